// brisk on machines whose pages are 4, 16 or 64 KiB (arm64 kernels use all
// three). The page size comes from sysconf at start; this suite makes the OS
// layer work in the page size named by BRISK_TEST_PAGE_SIZE through its
// test-only hook (_bk_os_page_size_force, hidden: the suite links brisk's
// objects, not a library), before brisk maps anything. A page bigger than the
// real one is a whole number of real pages, so every rounding, alignment,
// purge and check that depends on the page size runs as it would on such a
// machine; tests/CMakeLists.txt runs the suite at 4 KiB (the machine's own
// size), 16 KiB and 64 KiB. qemu-user reports the host's page size, so the
// aarch64 run of the test command relies on this too.
#include <cstring>
#include <vector>

#include "test_util.h"

extern "C" bool _bk_os_page_size_force(size_t size);
extern "C" size_t _bk_os_page_size(void);

namespace {

using bt::KiB;
using bt::MiB;

size_t wanted_page() {
  const char *v = std::getenv("BRISK_TEST_PAGE_SIZE");
  return v && *v ? std::strtoul(v, nullptr, 10) : 0;
}

// Patterns that tell blocks and offsets apart.
unsigned char byte_at(size_t block, size_t i) { return static_cast<unsigned char>(block * 31 + i * 7 + 1); }

void fill(void *p, size_t n, size_t block) {
  auto *b = static_cast<unsigned char *>(p);
  for (size_t i = 0; i < n; i += 509) b[i] = byte_at(block, i);
  b[n - 1] = byte_at(block, n - 1);
}

bool intact(const void *p, size_t n, size_t block) {
  auto *b = static_cast<const unsigned char *>(p);
  for (size_t i = 0; i < n; i += 509)
    if (b[i] != byte_at(block, i)) return false;
  return b[n - 1] == byte_at(block, n - 1);
}

bool zero(const void *p, size_t n) {
  auto *b = static_cast<const unsigned char *>(p);
  for (size_t i = 0; i < n; i++)
    if (b[i]) return false;
  return true;
}

TEST(PageSize, IsTheOneAskedFor) {
  size_t want = wanted_page();
  if (!want) want = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  EXPECT_EQ(_bk_os_page_size(), want);
  EXPECT_EQ(want & (want - 1), 0u);
}

TEST(PageSize, HookRefusesWhatNoMachineHas) {
  size_t page = _bk_os_page_size();
  EXPECT_FALSE(_bk_os_page_size_force(3 * 4096));    // not a power of two
  EXPECT_FALSE(_bk_os_page_size_force(128 * KiB));   // above what the geometry holds
  EXPECT_FALSE(_bk_os_page_size_force(512));         // below the real page
  EXPECT_EQ(_bk_os_page_size(), page);
}

// Every tier, blocks written in full and checked after their neighbours
// were written, then moved across the tiers by realloc.
TEST(PageSize, EveryTierKeepsItsBytes) {
  const size_t sizes[] = {16, 100, 4 * KiB, 9 * KiB, 60 * KiB, 100 * KiB, 700 * KiB, 1 * MiB, 3 * MiB, 9 * MiB};
  std::vector<std::pair<void *, size_t>> held;
  for (int round = 0; round < 3; round++)
    for (size_t s : sizes) {
      void *p = brisk_malloc(s);
      ASSERT_NE(p, nullptr) << s;
      fill(p, s, held.size());
      held.emplace_back(p, s);
    }
  for (size_t i = 0; i < held.size(); i++) ASSERT_TRUE(intact(held[i].first, held[i].second, i)) << held[i].second;
  EXPECT_EQ(brisk_check_heap(), BRISK_CHECK_OK) << brisk_check_message();
  for (size_t i = 0; i < held.size(); i++) {
    size_t n = held[i].second, grown = n * 3 + 5 * KiB;
    void *q = brisk_realloc(held[i].first, grown);
    ASSERT_NE(q, nullptr);
    ASSERT_TRUE(intact(q, n, i)) << "realloc " << n << " -> " << grown;
    void *r = brisk_realloc(q, n / 2 + 1);
    ASSERT_NE(r, nullptr);
    held[i] = {r, n / 2 + 1};
    fill(r, n / 2 + 1, i);
  }
  for (size_t i = 0; i < held.size(); i++) ASSERT_TRUE(intact(held[i].first, held[i].second, i));
  for (auto &h : held) brisk_free(h.first);
  EXPECT_EQ(brisk_check_heap(), BRISK_CHECK_OK) << brisk_check_message();
}

// Alignments from 16 B up to past the page size, on every tier.
TEST(PageSize, AlignmentsUpToBeyondThePage) {
  size_t page = _bk_os_page_size();
  for (size_t align = 16; align <= 8 * page; align *= 2)
    for (size_t s : {size_t{1}, page - 1, page, 3 * page + 17, size_t{2 * MiB}}) {
      void *p = brisk_aligned_alloc(align, s);
      ASSERT_NE(p, nullptr) << align << " " << s;
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % align, 0u) << align << " " << s;
      EXPECT_GE(brisk_usable_size(p), s);
      std::memset(p, 0x5a, s);
      brisk_free(p);
    }
}

// Memory given back (purged) in whole pages of this size, then handed out
// again: calloc reads zero at every tier, and what was not given back (the
// segment headers, live blocks sharing a page) is intact.
TEST(PageSize, PurgedMemoryComesBackZeroAndLiveBlocksStay) {
  ASSERT_EQ(brisk_option_set(BRISK_OPTION_PURGE_DELAY_MS, 0), 0);
  const size_t sizes[] = {48, 2 * KiB, 24 * KiB, 200 * KiB, 5 * MiB};
  std::vector<void *> keep;
  for (int round = 0; round < 3; round++) {
    std::vector<void *> dirty;
    for (size_t s : sizes)
      for (int i = 0; i < 40; i++) {
        void *p = brisk_malloc(s);
        ASSERT_NE(p, nullptr);
        std::memset(p, 0xff, s);
        (i % 8 == 0 ? keep : dirty).push_back(p);
      }
    for (void *p : dirty) brisk_free(p);
    brisk_collect();
    for (size_t s : sizes)
      for (int i = 0; i < 40; i++) {
        void *p = brisk_calloc(1, s);
        ASSERT_NE(p, nullptr);
        ASSERT_TRUE(zero(p, s)) << "calloc(" << s << ") after a purge, round " << round;
        brisk_free(p);
      }
    brisk_collect();
  }
  for (void *p : keep) {
    auto *b = static_cast<unsigned char *>(p);
    size_t n = brisk_usable_size(p);
    ASSERT_EQ(b[0], 0xff);
    ASSERT_EQ(b[n < 48 ? n - 1 : 47], 0xff);
    brisk_free(p);
  }
  EXPECT_EQ(brisk_check_heap(), BRISK_CHECK_OK) << brisk_check_message();
  brisk_collect();
  brisk_stats_t st = {};
  st.version = BRISK_STATS_VERSION;
  ASSERT_EQ(brisk_stats_get(&st), 0);
  EXPECT_GT(st.madvise_calls + st.munmap_calls, 0u);
  EXPECT_EQ(st.mapped % _bk_os_page_size(), 0u);
}

}  // namespace

// The page size is set before brisk maps anything: before any test runs.
int main(int argc, char **argv) {
  size_t want = wanted_page();
  if (want && !_bk_os_page_size_force(want)) {
    std::fprintf(stderr, "BRISK_TEST_PAGE_SIZE=%zu: refused (the real page is %ld bytes)\n", want,
                 sysconf(_SC_PAGESIZE));
    return 1;
  }
  brisk_stats_t st = {};
  st.version = BRISK_STATS_VERSION;
  if (want && (brisk_stats_get(&st) != 0 || st.mmap_calls != 0)) {
    std::fprintf(stderr, "brisk mapped memory before the page size was set\n");
    return 1;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
