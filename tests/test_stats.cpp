// Statistics: the figures of brisk_stats_get (classes, tiers, totals, OS
// calls, the huge-block cache, purges, thread and explicit heaps, abandoned
// segments). The JSON and table reports are in test_stats_print.cpp.
//
// Counts are compared as deltas around work done on a fresh thread while the
// rest of the process is quiet, so they can be exact: the blocks a test holds
// are exactly what the counters gain.
#include <algorithm>
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

using namespace bt;

// ---- brisk_stats_get ----------------------------------------------------------

TEST(Stats, VersionIsChecked) {
  brisk_stats_t st;
  std::memset(&st, 0, sizeof st);
  for (uint32_t v : {0u, 3u, 1000u, 0xFFFFFFFFu}) {
    st.version = v;
    EXPECT_EQ(brisk_stats_get(&st), EINVAL) << "version " << v;
  }
  EXPECT_EQ(brisk_stats_get(nullptr), EINVAL);
  st.version = BRISK_STATS_VERSION;
  EXPECT_EQ(brisk_stats_get(&st), 0);
  EXPECT_EQ(st.version, static_cast<uint32_t>(BRISK_STATS_VERSION));
}

// A program built against version 1 of the struct, which ends before
// thread_cached, gets the fields it has and nothing written past them.
TEST(Stats, Version1StructIsFilledUpToItsEnd) {
  brisk_stats_t st;
  std::memset(&st, 0xAB, sizeof st);
  st.version = 1;
  void *p = brisk_malloc(100);
  ASSERT_EQ(brisk_stats_get(&st), 0);
  EXPECT_EQ(st.version, 1u);
  EXPECT_GT(st.in_use, 0u);
  EXPECT_GT(st.thread_heaps, 0u);
  const unsigned char *tail = reinterpret_cast<const unsigned char *>(&st) +
      offsetof(brisk_stats_t, thread_cached);
  for (size_t i = 0; i < sizeof st - offsetof(brisk_stats_t, thread_cached); i++) EXPECT_EQ(tail[i], 0xAB) << i;
  brisk_free(p);
}

// Every size gets the smallest class that holds it (so its usable size is
// that class's size), and a page-sized buffer with a header of up to an
// eighth of it wastes no more than that eighth: sqlite's page cache entries
// of 4368 bytes took 5120-byte blocks, 17% of its page cache, when the
// doublings above 2, 4 and 8 KiB had only four classes.
TEST(Stats, EverySizeTakesTheSmallestClassThatHoldsIt) {
#if BRISK_TEST_CHECKED
  GTEST_SKIP() << "the checked library's usable size is the size asked";
#endif
  brisk_stats_t st = stats_now();
  std::vector<size_t> sizes(st.class_size + 1, st.class_size + st.class_count);
  for (size_t n = 1; n <= 1 * MiB; n += n < 20000 ? 1 : 61) {
    void *p = brisk_malloc(n);
    ASSERT_NE(p, nullptr);
    const size_t fit = *std::lower_bound(sizes.begin(), sizes.end(), n);
    ASSERT_EQ(brisk_usable_size(p), fit) << "malloc(" << n << ")";
    brisk_free(p);
  }
  for (size_t page : {2 * KiB, 4 * KiB, 8 * KiB})
    for (size_t header : {size_t{8}, page / 16, page / 8}) {
      void *p = brisk_malloc(page + header);
      EXPECT_LE(brisk_usable_size(p), page + page / 8) << "malloc(" << page << " + " << header << ")";
      brisk_free(p);
    }
}

TEST(Stats, ClassesAndTotalsAreConsistent) {
  std::vector<void *> held;
  for (size_t n = 1; n < 1500000; n = n * 5 / 4 + 7) held.push_back(brisk_malloc(n));
  brisk_stats_t st = stats_now();
  ASSERT_GT(st.class_count, 8u);
  ASSERT_LE(st.class_count, static_cast<uint32_t>(BRISK_STATS_MAX_CLASSES));
  // Class sizes rise strictly, are multiples of 16 and reach 1 MiB.
  size_t prev = 0;
  for (unsigned c = 1; c < st.class_count; ++c) {
    EXPECT_GT(st.class_size[c], prev) << "class " << c;
    EXPECT_EQ(st.class_size[c] % 16, 0u) << "class " << c;
    prev = st.class_size[c];
  }
  EXPECT_EQ(prev, 1 * MiB);
  // Totals are the sums of the tiers; each tier's figures nest.
  size_t in_use = 0, committed = 0, reserved = 0;
  uint64_t paged_live = 0, class_live = 0;
  for (int t = 0; t < BRISK_TIER_COUNT; ++t) {
    const brisk_tier_stats_t &ts = st.tiers[t];
    EXPECT_GE(ts.committed, ts.in_use) << "tier " << t;
    EXPECT_GE(ts.reserved, ts.committed) << "tier " << t;
    in_use += ts.in_use;
    committed += ts.committed;
    reserved += ts.reserved;
    if (t != BRISK_TIER_HUGE) paged_live += ts.live_blocks;
  }
  for (unsigned c = 0; c < st.class_count; ++c) class_live += st.class_live_blocks[c];
  EXPECT_EQ(st.in_use, in_use);
  EXPECT_GE(st.committed, committed);  // plus unpurged cached segments
  EXPECT_EQ(st.reserved, reserved + st.cached);
  EXPECT_EQ(class_live, paged_live);
  EXPECT_GE(st.peak_reserved, st.mapped);
  EXPECT_EQ(st.mapped, brisk_mapped_bytes());
  EXPECT_GE(st.mapped, st.reserved);
  EXPECT_GE(st.tiers[BRISK_TIER_HUGE].live_blocks, 1u);
  EXPECT_GE(st.thread_heaps, 1u);
  for (void *p : held) brisk_free(p);
}

struct TierCase {
  size_t size;
  int tier;
  size_t count;
};

TEST(Stats, LiveBlocksAndInUseGrowByWhatIsHeld) {
  const TierCase cases[] = {
      {2500, BRISK_TIER_SMALL, 1000}, {40000, BRISK_TIER_MEDIUM, 100}, {300000, BRISK_TIER_LARGE, 20}};
  for (const TierCase &tc : cases) {
    SCOPED_TRACE("blocks of " + std::to_string(tc.size));
    on_fresh_thread([&] {
      std::vector<void *> blocks;
      blocks.reserve(tc.count);
      brisk_stats_t s0 = stats_now();
      unsigned cls = class_for(s0, tc.size);
      ASSERT_GT(cls, 0u);
      const size_t csize = s0.class_size[cls];
      for (size_t i = 0; i < tc.count; ++i) {
        void *p = brisk_malloc(tc.size);
        ASSERT_NE(p, nullptr);
        blocks.push_back(p);
      }
      brisk_stats_t s1 = stats_now();
      EXPECT_EQ(s1.class_live_blocks[cls] - s0.class_live_blocks[cls], tc.count);
      EXPECT_EQ(s1.tiers[tc.tier].live_blocks - s0.tiers[tc.tier].live_blocks, tc.count);
      EXPECT_EQ(s1.tiers[tc.tier].in_use - s0.tiers[tc.tier].in_use, tc.count * csize);
      EXPECT_EQ(s1.in_use - s0.in_use, tc.count * csize);
      EXPECT_GE(s1.requested - s0.requested, tc.count * tc.size);
      EXPECT_GE(s1.tiers[tc.tier].committed, s0.tiers[tc.tier].committed + tc.count * csize / 2);
      for (int t = 0; t < BRISK_TIER_COUNT; ++t)
        if (t != tc.tier) {
          EXPECT_EQ(s1.tiers[t].live_blocks, s0.tiers[t].live_blocks) << "tier " << t;
        }
      for (void *p : blocks) brisk_free(p);
      brisk_stats_t s2 = stats_now();
      EXPECT_EQ(s2.class_live_blocks[cls], s0.class_live_blocks[cls]);
      EXPECT_EQ(s2.tiers[tc.tier].live_blocks, s0.tiers[tc.tier].live_blocks);
      EXPECT_EQ(s2.in_use, s0.in_use);
      EXPECT_EQ(s2.requested, s1.requested) << "frees count as requests";
    });
  }
}

TEST(Stats, HugeTier) {
  on_fresh_thread([] {
    const size_t sizes[] = {1 * MiB + 1, 3 * MiB, 7 * MiB + 5};
    std::vector<void *> blocks;
    blocks.reserve(3);
    brisk_stats_t s0 = stats_now();
    size_t total = 0;
    for (size_t n : sizes) {
      void *p = brisk_malloc(n);
      ASSERT_NE(p, nullptr);
      blocks.push_back(p);
      total += n;
    }
    brisk_stats_t s1 = stats_now();
    const brisk_tier_stats_t &h0 = s0.tiers[BRISK_TIER_HUGE], &h1 = s1.tiers[BRISK_TIER_HUGE];
    EXPECT_EQ(h1.live_blocks - h0.live_blocks, 3u);
    EXPECT_GE(h1.in_use - h0.in_use, total);
    EXPECT_LE(h1.in_use - h0.in_use, total + total / 4 + 3 * 64 * KiB);
    EXPECT_GE(h1.reserved - h0.reserved, total);
    EXPECT_GE(s1.requested - s0.requested, total);
    for (unsigned c = 0; c < s0.class_count; ++c)
      EXPECT_EQ(s1.class_live_blocks[c], s0.class_live_blocks[c]) << "class " << c;
    for (void *p : blocks) brisk_free(p);
    brisk_stats_t s2 = stats_now();
    EXPECT_EQ(s2.tiers[BRISK_TIER_HUGE].live_blocks, h0.live_blocks);
    EXPECT_EQ(s2.tiers[BRISK_TIER_HUGE].in_use, h0.in_use);
    // Freed huge blocks stay warm: cached, still reserved.
    EXPECT_GE(s2.cached, s1.cached + total);
  });
}

TEST(Stats, OsCallCountersFollowHugeBlocks) {
  brisk_collect();
  on_fresh_thread([] {
    const size_t sizes[] = {5 * MiB, 9 * MiB + 3, 17 * MiB, 33 * MiB + 100};
    std::vector<void *> blocks;
    blocks.reserve(4);
    brisk_stats_t s0 = stats_now();
    size_t total = 0;
    for (size_t n : sizes) {
      void *p = brisk_malloc(n);
      ASSERT_NE(p, nullptr);
      std::memset(p, 1, 4096);
      blocks.push_back(p);
      total += n;
    }
    brisk_stats_t s1 = stats_now();
    EXPECT_GE(s1.mmap_calls - s0.mmap_calls, 4u) << "fresh huge blocks need new mappings";
    EXPECT_GE(s1.cache_misses - s0.cache_misses, 4u);
    EXPECT_GE(s1.mapped - s0.mapped, total);
    EXPECT_GE(s1.peak_reserved, s1.mapped);
    for (void *p : blocks) brisk_free(p);
    // Freed and taken again: served warm, no new mapping.
    brisk_stats_t s2 = stats_now();
    void *again = brisk_malloc(9 * MiB + 3);
    ASSERT_NE(again, nullptr);
    brisk_stats_t s3 = stats_now();
    EXPECT_EQ(s3.mmap_calls, s2.mmap_calls) << "a freed huge block was not recycled";
    EXPECT_GE(s3.cache_hits - s2.cache_hits, 1u);
    // Growing a huge block in place or moving it: mremap (the checked
    // library's guard pages follow the mapping, memory.c; built for
    // memcheck, it copies).
    void *grown = brisk_realloc(again, 40 * MiB);
    ASSERT_NE(grown, nullptr);
    brisk_stats_t s4 = stats_now();
    if (!(BRISK_TEST_CHECKED && BRISK_TEST_VALGRIND)) {
      EXPECT_GE(s4.mremap_calls - s3.mremap_calls, 1u);
    }
    brisk_free(grown);
    // Collect gives it all back: munmap, mapped bytes fall.
    brisk_collect();
    brisk_stats_t s5 = stats_now();
    EXPECT_GE(s5.munmap_calls - s4.munmap_calls, 4u);
    EXPECT_LE(s5.mapped + total, s4.mapped + 8 * MiB);
    EXPECT_EQ(s5.tiers[BRISK_TIER_HUGE].live_blocks, s0.tiers[BRISK_TIER_HUGE].live_blocks);
  });
}

// A huge request bigger than every warm block of the thread grows one of
// them (mremap) rather than mapping anew; calloc never does (the growth
// would have to be zeroed), and its block reads as zero.
TEST(Stats, BiggerHugeRequestGrowsAWarmBlock) {
  if (BRISK_TEST_CHECKED && BRISK_TEST_VALGRIND)
    GTEST_SKIP() << "built for memcheck: huge mappings are never resized";
  brisk_collect();
  on_fresh_thread([] {
    void *small = brisk_malloc(4 * MiB);
    ASSERT_NE(small, nullptr);
    std::memset(small, 0x5A, 4 * MiB);
    brisk_free(small);
    brisk_stats_t s0 = stats_now();
    const size_t big = 12 * MiB + 123;
    unsigned char *p = static_cast<unsigned char *>(brisk_malloc(big));
    ASSERT_NE(p, nullptr);
    brisk_stats_t s1 = stats_now();
    EXPECT_GE(s1.cache_hits - s0.cache_hits, 1u) << "the warm 4 MiB block was not used";
    EXPECT_EQ(s1.cache_misses, s0.cache_misses);
    EXPECT_GE(s1.mremap_calls - s0.mremap_calls, 1u);
    EXPECT_GE(brisk_usable_size(p), big);
    std::memset(p, 0xA5, big);
    EXPECT_EQ(p[0], 0xA5);
    EXPECT_EQ(p[big - 1], 0xA5);
    brisk_free(p);
    // The grown block is warm now: calloc of a bigger size must still be zero.
    const size_t bigger = 20 * MiB;
    unsigned char *z = static_cast<unsigned char *>(brisk_calloc(1, bigger));
    ASSERT_NE(z, nullptr);
    size_t nonzero = 0;
    for (size_t i = 0; i < bigger; i += 4096 - 1) nonzero += z[i] != 0;
    EXPECT_EQ(nonzero, 0u) << "calloc returned dirty bytes";
    brisk_free(z);
  });
}

TEST(Stats, MadviseCounterFollowsPurges) {
  on_fresh_thread([] {
    // Small blocks over many pages, all freed: the pages are purged, some
    // at once (segments left empty go to the shared cache, which keeps
    // little unpurged), the rest when brisk_collect runs.
    std::vector<void *> blocks;
    for (int i = 0; i < 20000; ++i) blocks.push_back(brisk_malloc(1000));
    for (void *p : blocks) std::memset(p, 1, 1000);
    brisk_stats_t s0 = stats_now();
    for (void *p : blocks) brisk_free(p);
    brisk_collect();
    brisk_stats_t s1 = stats_now();
    EXPECT_GE(s1.madvise_calls + s1.munmap_calls, s0.madvise_calls + s0.munmap_calls + 1)
        << "collect gave nothing back";
    EXPECT_LE(s1.committed, s0.committed - 8 * MiB) << "collect left the freed pages committed";
  });
}

TEST(Stats, MadviseCounterCountsHugepageAdvice) {
  ASSERT_EQ(brisk_option_set(BRISK_OPTION_HUGEPAGES, 1), 0);
  brisk_collect();
  on_fresh_thread([] {
    brisk_stats_t s0 = stats_now();
    void *p = brisk_malloc(13 * MiB + 5);  // nothing cached fits: a new mapping
    ASSERT_NE(p, nullptr);
    brisk_stats_t s1 = stats_now();
    EXPECT_GE(s1.mmap_calls - s0.mmap_calls, 1u);
    EXPECT_GE(s1.madvise_calls - s0.madvise_calls, s1.mmap_calls - s0.mmap_calls)
        << "madvise(MADV_HUGEPAGE) calls are not counted";
    brisk_free(p);
  });
  brisk_option_set(BRISK_OPTION_HUGEPAGES, 0);
}

TEST(Stats, ThreadHeapsAndExits) {
  brisk_stats_t s0 = stats_now();
  std::mutex m;
  std::condition_variable cv;
  int stage = 0;
  std::thread t([&] {
    void *p = brisk_malloc(100);  // the thread's heap starts with its first block
    std::unique_lock<std::mutex> g(m);
    stage = 1;
    cv.notify_all();
    cv.wait(g, [&] { return stage == 2; });
    brisk_free(p);
  });
  {
    std::unique_lock<std::mutex> g(m);
    cv.wait(g, [&] { return stage == 1; });
  }
  brisk_stats_t s1 = stats_now();
  EXPECT_EQ(s1.thread_heaps, s0.thread_heaps + 1);
  EXPECT_EQ(s1.threads_exited, s0.threads_exited);
  {
    std::lock_guard<std::mutex> g(m);
    stage = 2;
  }
  cv.notify_all();
  t.join();
  brisk_stats_t s2 = stats_now();
  EXPECT_EQ(s2.thread_heaps, s0.thread_heaps);
  EXPECT_EQ(s2.threads_exited, s0.threads_exited + 1);

  // Several at once.
  std::vector<std::thread> ts;
  for (int i = 0; i < 5; ++i) ts.emplace_back([] { brisk_free(brisk_malloc(64)); });
  for (auto &th : ts) th.join();
  brisk_stats_t s3 = stats_now();
  EXPECT_EQ(s3.threads_exited, s0.threads_exited + 6);
  EXPECT_EQ(s3.thread_heaps, s0.thread_heaps);

  // Explicit heaps are counted apart.
  brisk_heap_t *h = brisk_heap_new();
  brisk_stats_t s4 = stats_now();
  EXPECT_EQ(s4.explicit_heaps, s3.explicit_heaps + 1);
  EXPECT_EQ(s4.thread_heaps, s3.thread_heaps);
  brisk_heap_destroy(h);
  EXPECT_EQ(stats_now().explicit_heaps, s3.explicit_heaps);
}

TEST(Stats, AbandonedSegmentsOfExitedThreads) {
  std::vector<void *> left;
  left.reserve(500);  // the thread must allocate nothing but the blocks
  brisk_stats_t s0 = stats_now();
  unsigned cls = class_for(s0, 3000);
  std::thread t([&] {
    for (int i = 0; i < 500; ++i) left.push_back(brisk_malloc(3000));
  });
  t.join();
  brisk_stats_t s1 = stats_now();
  // (The thread may have adopted an older abandoned segment first.)
  EXPECT_GE(s1.abandoned_segments, 1u);
  EXPECT_GE(s1.abandoned_bytes, s0.abandoned_bytes + 500 * 3000);
  EXPECT_EQ(s1.class_live_blocks[cls] - s0.class_live_blocks[cls], 500u) << "blocks of exited threads stay live";
  for (void *p : left) brisk_free(p);
  brisk_collect();
  brisk_stats_t s2 = stats_now();
  EXPECT_EQ(s2.abandoned_segments, s0.abandoned_segments);
  EXPECT_EQ(s2.abandoned_bytes, s0.abandoned_bytes);
  EXPECT_EQ(s2.class_live_blocks[cls], s0.class_live_blocks[cls]);
}
