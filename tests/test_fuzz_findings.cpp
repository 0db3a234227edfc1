// Regression tests of what the fuzzers of fuzz/ found (fuzz/README.md lists
// each finding). The suite links brisk's objects, as test_page_size does, so
// that it can also call the option parser's hidden entry point
// (_bk_option_parse_env), which the environment reaches only at start.
#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <thread>

#include "test_util.h"

extern "C" int _bk_option_parse_env(brisk_option_t opt, const char *v, long long *value);

namespace {

using bt::KiB;
using bt::MiB;

// A huge block's mapping may end inside a 4 MiB chunk; the chunk map marks
// the whole chunk as brisk's. A mapping the program (or anyone) makes in the
// rest of that chunk was taken for part of the huge block: brisk_owns said
// yes, brisk_usable_size answered a wrapped-around size, and brisk_free of a
// pointer into it freed the huge block. Found by fuzz_api.
void foreign_after_huge(size_t size) {
  auto *b = static_cast<unsigned char *>(brisk_malloc(size));
  ASSERT_NE(b, nullptr);
  size_t usable = brisk_usable_size(b);
  uintptr_t end = reinterpret_cast<uintptr_t>(b) + usable;
  uintptr_t chunk_end = (end + 4 * MiB - 1) & ~(uintptr_t)(4 * MiB - 1);
  if (end == chunk_end) {
    brisk_free(b);
    GTEST_SKIP() << "the mapping of " << size << " bytes ends on a chunk boundary";
  }
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void *m = mmap(reinterpret_cast<void *>(end), page, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  if (m == MAP_FAILED || m != reinterpret_cast<void *>(end)) {
    if (m != MAP_FAILED) munmap(m, page);
    brisk_free(b);
    GTEST_SKIP() << "the address after the mapping is taken";
  }
  std::memset(b, 0x5a, size);
  EXPECT_EQ(brisk_owns(m), 0);
  EXPECT_EQ(brisk_usable_size(m), 0u);
  brisk_free(m);  // not brisk's: left alone
  EXPECT_EQ(brisk_usable_size(b), usable);
  void *again = brisk_malloc(size);  // would be b, had b been freed
  EXPECT_NE(again, static_cast<void *>(b));
  EXPECT_EQ(b[0], 0x5a);
  EXPECT_EQ(b[size - 1], 0x5a);
  brisk_free(again);
  brisk_free(b);
  munmap(m, page);
}

// free_fast takes a pointer in a huge segment's first chunk without the
// chunk-map walk; segment_of's walk serves the later chunks.
TEST(FuzzFindings, ForeignMappingInTheFirstChunkOfAHugeBlock) { foreign_after_huge(MiB + 1); }
TEST(FuzzFindings, ForeignMappingInALaterChunkOfAHugeBlock) { foreign_after_huge(5 * MiB + 1); }

// A thread's hot huge block (the biggest it freed lately) was read by the
// thread (its size, compared on the next huge free or allocation) before
// the thread had taken it, while a purge pass on another thread
// (brisk_collect here) may take it and unmap it: the read faulted. Found by
// fuzz_threads (SEGV in warm_put). Without the fix this crashed in 0.5 to
// 2 seconds of the loop below (release build, 2 cores).
TEST(FuzzFindings, HotHugeBlockTakenByAnotherThreadsCollect) {
  std::atomic<bool> done{false};
  std::thread collector([&] {
    while (!done.load(std::memory_order_relaxed)) brisk_collect();
  });
  const size_t sizes[] = {2 * MiB + 1, 3 * MiB + 1, MiB + MiB / 2, 5 * MiB};
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(4);
  for (size_t i = 0; std::chrono::steady_clock::now() < end; i++) {
    void *a = brisk_malloc(sizes[i % 4]), *b = brisk_malloc(sizes[(i + 1) % 4]);
    ASSERT_TRUE(a && b);
    static_cast<char *>(a)[0] = 1;
    brisk_free(a);  // the hot block, or compared with it
    brisk_free(b);
  }
  done = true;
  collector.join();
}

// strtoull skips leading white space and takes a sign after it: " 250" and
// " +5" were accepted while "+5" and "250 " were refused. Found by
// fuzz_options.
TEST(FuzzFindings, OptionValuesStartWithADigit) {
  long long v = -1;
  for (const char *bad : {" 250", "\t250", "\n250", " +5", " 64M", "+64M"}) {
    EXPECT_EQ(_bk_option_parse_env(BRISK_OPTION_PURGE_DELAY_MS, bad, &v), EINVAL) << '"' << bad << '"';
    EXPECT_EQ(_bk_option_parse_env(BRISK_OPTION_CACHE_CAP, bad, &v), EINVAL) << '"' << bad << '"';
  }
  EXPECT_EQ(_bk_option_parse_env(BRISK_OPTION_PURGE_DELAY_MS, "250", &v), 0);
  EXPECT_EQ(v, 250);
  EXPECT_EQ(_bk_option_parse_env(BRISK_OPTION_CACHE_CAP, "64MiB", &v), 0);
  EXPECT_EQ(v, 64LL << 20);
}

// A size's unit was looked up with strchr("KMGT", c & ~0x20): a space
// masks to '\0', which strchr finds at the string's end, a fifth unit, so
// "1 " read as 1 PiB and "0 " as 0. Found by fuzz_options.
TEST(FuzzFindings, ATrailingSpaceIsNoUnit) {
  long long v = -1;
  for (const char *bad : {"0 ", "1 ", "64 ", "64M "}) {
    EXPECT_EQ(_bk_option_parse_env(BRISK_OPTION_CACHE_CAP, bad, &v), EINVAL) << '"' << bad << '"';
    EXPECT_EQ(_bk_option_parse_env(BRISK_OPTION_RESERVE, bad, &v), EINVAL) << '"' << bad << '"';
  }
  EXPECT_EQ(_bk_option_parse_env(BRISK_OPTION_CACHE_CAP, "1k", &v), 0);
  EXPECT_EQ(v, 1024);
}

}  // namespace
