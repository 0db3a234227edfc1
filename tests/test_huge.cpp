// Huge blocks under stress and at the edges: realloc racing other threads'
// segment creation, calloc after realtime mode, large alignments, and
// requests the kernel would refuse. Each test is named after the defect it
// guards against.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "test_util.h"

using namespace bt;

namespace {

// Live blocks counted by brisk_visit_blocks.
struct Visited {
  size_t blocks = 0;
  bool saw_target = false;
  void *target = nullptr;
};

int count_visit(void *block, size_t size, void *arg) {
  auto *v = static_cast<Visited *>(arg);
  v->blocks++;
  if (block == v->target && size >= bt::usable_at_least(0)) v->saw_target = true;
  return 0;
}

constexpr size_t kEnd = 64 * KiB;

bool range_holds(const void *p, size_t from, size_t to, uint64_t seed) {
  const unsigned char *b = static_cast<const unsigned char *>(p);
  for (size_t i = from; i < to; i++)
    if (b[i] != static_cast<unsigned char>(pattern_word(seed, i >> 3) >> ((i & 7) * 8))) return false;
  return true;
}

void mark_ends(void *p, size_t n, uint64_t seed) {
  fill(p, n < kEnd ? n : kEnd, seed);
  if (n > kEnd) fill(p, n, seed, n - kEnd);
}

bool head_holds(const void *p, size_t n, uint64_t seed) { return check(p, n < kEnd ? n : kEnd, seed); }
bool tail_holds(const void *p, size_t n, uint64_t seed) {
  return range_holds(p, n > kEnd ? n - kEnd : 0, n, seed);
}

// 4 threads grow and shrink huge blocks in place and by moving them, while
// 2 threads map and unmap segments of every tier: the chunk map must lead to
// the right segment at every instant, or a page is initialised in memory
// that is not brisk's (SIGSEGV) or a live block is taken for a foreign one.
void realloc_race(size_t cache_cap) {
  long long old_cap = brisk_option_get(BRISK_OPTION_CACHE_CAP);
  ASSERT_EQ(brisk_option_set(BRISK_OPTION_CACHE_CAP, (long long)cache_cap), 0);
  brisk_collect();
  size_t mapped_before = brisk_mapped_bytes();
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  const size_t rounds = scaled(300, 20);

  // Each block carries a pattern in its first and last 64 KiB: enough to see
  // a move that lost pages or a mapping that went to someone else.
  auto resizer = [&](int id) {
    Rng r(1000 + id);
    size_t n = r.range(1 * MiB, 8 * MiB);
    uint64_t seed = r.next();
    void *p = brisk_malloc(n);
    if (!p) {
      failures++;
      return;
    }
    mark_ends(p, n, seed);
    for (size_t i = 0; i < rounds; i++) {
      size_t m = r.below(4) == 0 ? r.range(32 * MiB, 64 * MiB) : r.range(1 * MiB, 16 * MiB);
      void *q = brisk_realloc(p, m);
      if (!q) {
        failures++;
        break;
      }
      if (!head_holds(q, n < m ? n : m, seed) || (m >= n && !tail_holds(q, n, seed))) failures++;
      if (!brisk_owns(q) || brisk_usable_size(q) < m) failures++;
      p = q;
      n = m;
      seed = r.next();
      mark_ends(p, n, seed);
    }
    if (!head_holds(p, n, seed) || !tail_holds(p, n, seed)) failures++;
    brisk_free(p);
  };
  // Bursts of blocks of every paged tier, all freed again: segments are
  // mapped and (with no cache) unmapped all the time, into the address
  // ranges the resizers give up.
  auto churner = [&](int id) {
    Rng r(2000 + id);
    std::vector<Block> live;
    while (!stop.load(std::memory_order_relaxed)) {
      size_t burst = r.range(8, 96);
      for (size_t i = 0; i < burst; i++) {
        size_t n = r.below(2) ? r.range(16, 4 * KiB) : r.range(4 * KiB, 256 * KiB);
        void *p = brisk_malloc(n);
        if (!p) {
          failures++;
          break;
        }
        uint64_t seed = r.next();
        size_t probe = n < 512 ? n : 512;
        fill(p, probe, seed);
        live.push_back({p, probe, seed});
      }
      for (auto &b : live) {
        if (!check(b.p, b.n, b.seed)) failures++;
        brisk_free(b.p);
      }
      live.clear();
    }
  };
  std::vector<std::thread> churners, resizers;
  for (int i = 0; i < 2; i++) churners.emplace_back(churner, i);
  for (int i = 0; i < 4; i++) resizers.emplace_back(resizer, i);
  for (auto &t : resizers) t.join();
  stop = true;
  for (auto &t : churners) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(brisk_check_heap(), BRISK_CHECK_OK) << brisk_check_message();
  // Every block was freed: a block taken for a foreign one would stay mapped.
  brisk_collect();
  EXPECT_LE(brisk_mapped_bytes(), mapped_before + 16 * MiB)
      << "mapped " << mib(brisk_mapped_bytes()) << " after freeing all, " << mib(mapped_before) << " before";
  brisk_option_set(BRISK_OPTION_CACHE_CAP, old_cap);
}

}  // namespace

TEST(HugeRealloc, ReallocRacesSegmentCreationNoCache) { realloc_race(0); }
TEST(HugeRealloc, ReallocRacesSegmentCreationWithCache) { realloc_race(512 * MiB); }

// Realtime mode skips purging; memory whose purge was skipped is dirty and
// calloc must clear it, whichever cache hands it out.
TEST(Calloc, ZeroAfterRealtimeSkippedPurge) {
  long long old_cap = brisk_option_get(BRISK_OPTION_CACHE_CAP);
  // A small cap: a freed 8 MiB block overflows the thread's cache into the
  // shared one, which wants to purge it at once (and realtime says no).
  ASSERT_EQ(brisk_option_set(BRISK_OPTION_CACHE_CAP, (long long)(16 * MiB)), 0);
  brisk_set_realtime(1);
  for (size_t n : {2 * MiB, 8 * MiB, 5 * MiB + 123}) {
    for (int round = 0; round < 3; round++) {
      void *dirty = brisk_malloc(n);
      ASSERT_NE(dirty, nullptr);
      std::memset(dirty, 0xAB, n);
      brisk_free(dirty);
      void *z = brisk_calloc(1, n);
      ASSERT_NE(z, nullptr);
      EXPECT_TRUE(all_zero(z, n)) << "calloc(" << n << ") after a realtime free is dirty";
      brisk_free(z);
    }
  }
  brisk_set_realtime(0);
  brisk_option_set(BRISK_OPTION_CACHE_CAP, old_cap);
}

// aligned_alloc with alignments from 128 KiB to 1 GiB and sizes from 0 up:
// a usable block (size 0 included), freed for real, walked by the visits.
TEST(Align, LargeAlignmentsGiveUsableFreeableVisitableBlocks) {
  brisk_collect();
  size_t mapped_before = brisk_mapped_bytes();
  for (size_t align = 128 * KiB; align <= 1024 * MiB; align *= 2) {
    for (size_t size : {(size_t)0, (size_t)1, (size_t)100, 64 * KiB, 3 * MiB + 5}) {
      void *p = brisk_aligned_alloc(align, size);
      ASSERT_NE(p, nullptr) << "aligned_alloc(" << align << ", " << size << ")";
      EXPECT_TRUE(aligned_to(p, align)) << p;
      size_t usable = brisk_usable_size(p);
      EXPECT_GE(usable, usable_at_least(size)) << "aligned_alloc(" << align << ", " << size << ")";
      EXPECT_TRUE(brisk_owns(p));
      std::memset(p, 0x5A, usable_at_least(size));  // must be writable, size 0 too
      Visited v;
      v.target = p;
      brisk_visit_blocks(count_visit, &v);
      EXPECT_TRUE(v.saw_target) << "visit missed aligned_alloc(" << align << ", " << size << ")";
      EXPECT_EQ(brisk_check_heap(), BRISK_CHECK_OK) << brisk_check_message();
      brisk_free(p);
    }
  }
  brisk_collect();
  EXPECT_LE(brisk_mapped_bytes(), mapped_before + 8 * MiB) << "aligned blocks were not unmapped";
}

// Repeated aligned requests are served from the blocks freed before them,
// like any other huge request: a handful of mappings, not one per call.
TEST(Align, AlignedRequestsReuseCachedBlocks) {
  for (size_t align : {4 * MiB, 8 * MiB, 64 * MiB}) {
    brisk_collect();
    brisk_stats_t before = stats_now();
    const int calls = 200;
    for (int i = 0; i < calls; i++) {
      void *p = brisk_aligned_alloc(align, 4 * MiB);
      ASSERT_NE(p, nullptr);
      EXPECT_TRUE(aligned_to(p, align));
      static_cast<char *>(p)[0] = 1;
      brisk_free(p);
    }
    brisk_stats_t after = stats_now();
    EXPECT_LE(after.mmap_calls - before.mmap_calls, 4u) << "align " << align;
    EXPECT_LE(after.munmap_calls - before.munmap_calls, 8u) << "align " << align;
    EXPECT_LE(after.cached, 32 * MiB) << "align " << align;
  }
}

// The shared cache hands out the huge block that fits best, not the first
// that is big enough: first fit cut a block of 24 MiB down to a request of
// 3 MiB with mremap (and a later request grew another back), where a block
// of 6 MiB served it whole. The blocks reach the shared cache in the order
// 24, 6, 16, 20 MiB (the thread's hot block first at its exit).
TEST(HugeCache, TakesTheBlockThatFitsBest) {
  const long long delay = brisk_option_get(BRISK_OPTION_PURGE_DELAY_MS);
  ASSERT_EQ(brisk_option_set(BRISK_OPTION_PURGE_DELAY_MS, 3600 * 1000), 0);
  std::thread([] {
    std::vector<void *> blocks;
    for (size_t mib : {6, 16, 20, 24}) {
      blocks.push_back(brisk_malloc(mib * MiB));
      ASSERT_NE(blocks.back(), nullptr);
    }
    for (void *p : blocks) brisk_free(p);
  }).join();
  std::thread([] {
    const OsCalls before = os_calls();
    void *p = brisk_malloc(3 * MiB);
    ASSERT_NE(p, nullptr);
    const OsCalls after = os_calls();
    if (!BRISK_TEST_CHECKED) {  // (whose usable size is the size asked for)
      EXPECT_GE(brisk_usable_size(p), 6 * MiB) << "the 6 MiB block, whole";
    }
    EXPECT_EQ(after.mremap, before.mremap) << "no block cut down";
    EXPECT_EQ(after.mmap, before.mmap) << "no block mapped";
    brisk_free(p);
  }).join();
  brisk_option_set(BRISK_OPTION_PURGE_DELAY_MS, delay);
}

// A request the kernel would refuse fails now with ENOMEM, rather than
// succeeding unbacked and killing the program at first touch.
TEST(Overcommit, RequestBeyondMemoryAndSwapFails) {
  int fd = ::open("/proc/sys/vm/overcommit_memory", O_RDONLY);
  char mode = '0';
  if (fd >= 0) {
    if (::read(fd, &mode, 1) != 1) mode = '0';
    ::close(fd);
  }
  if (mode == '1') GTEST_SKIP() << "vm.overcommit_memory=1: the kernel grants every mapping";
  FILE *f = std::fopen("/proc/meminfo", "r");
  ASSERT_NE(f, nullptr);
  char line[256];
  unsigned long long kib, total_kib = 0;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "MemTotal: %llu", &kib) == 1 || std::sscanf(line, "SwapTotal: %llu", &kib) == 1)
      total_kib += kib;
  std::fclose(f);
  size_t too_much = (size_t)total_kib * 1024 * 2 + 1024 * MiB;
  for (size_t n : {too_much, (size_t)1 << 40}) {
    errno = 0;
    void *p = brisk_malloc(n);
    EXPECT_EQ(p, nullptr) << "malloc(" << n << ") succeeded";
    EXPECT_EQ(errno, ENOMEM);
    if (p) brisk_free(p);
    errno = 0;
    void *q = brisk_calloc(1, n);
    EXPECT_EQ(q, nullptr);
    if (q) brisk_free(q);
    void *small = brisk_malloc(16);
    void *r = brisk_realloc(small, n);
    EXPECT_EQ(r, nullptr) << "realloc to " << n << " succeeded";
    brisk_free(r ? r : small);
  }
}
