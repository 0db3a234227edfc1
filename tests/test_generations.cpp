// Threads that come and go: the memory of threads gone is reused by the
// next ones before anything new is mapped, and given back when a group of
// them ends. (Reuse within a thread: test_reuse.cpp.)
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "test_util.h"

// Generations of short-lived threads, each leaving some blocks to a survivor:
// the segments they leave (abandoned) are adopted by the next generation
// before anything new is mapped, so what brisk maps stays bounded by the
// live set, not by the number of threads that ever ran.
TEST(Generations, ExitedThreadsMemoryIsReusedFirst) {
  const int kThreads = 4, kGenerations = static_cast<int>(bt::scaled(60, 20));
  std::vector<void *> kept;
  std::mutex mu;
  auto generation = [&](int g) {
    std::vector<std::thread> ts;
    for (int t = 0; t < kThreads; ++t)
      ts.emplace_back([&, g, t] {
        bt::Rng r(static_cast<uint64_t>(g * kThreads + t + 1));
        std::vector<void *> mine(1500);
        for (auto &p : mine) {
          size_t n = r.below(4) == 0 ? r.range(1024, 16384) : r.range(16, 512);
          ASSERT_NE(p = brisk_malloc(n), nullptr);
          static_cast<char *>(p)[0] = 1;
        }
        std::lock_guard<std::mutex> lock(mu);
        for (size_t i = 0; i < mine.size(); ++i)
          if (i % 20 == 0) kept.push_back(mine[i]);
          else brisk_free(mine[i]);
      });
    for (auto &t : ts) t.join();
  };
  for (int g = 0; g < 10; ++g) generation(g);
  const brisk_stats_t early = bt::stats_now();
  for (int g = 10; g < kGenerations; ++g) generation(g);
  const brisk_stats_t late = bt::stats_now();
  // The survivor holds 5% of every generation's blocks, so the live set
  // grows; the mapping may grow with it (pages hold blocks of one class),
  // not by segments per thread. (Measured: 4-8x under ctest -j2 on two
  // busy cores; 23x, 1040 MiB, without adoption.)
  const size_t grew = late.mapped - early.mapped, live_grew = late.in_use - early.in_use;
  EXPECT_LE(grew, 10 * live_grew + 32 * bt::MiB)
      << "after 10 generations: " << bt::mib(early.mapped) << " mapped, " << bt::mib(early.in_use)
      << " in use; after " << kGenerations << ": " << bt::mib(late.mapped) << " mapped, " << bt::mib(late.in_use)
      << " in use (" << late.abandoned_segments << " abandoned segments)";
  for (void *p : kept) brisk_free(p);
}

// Threads that exit while exited threads' segments already wait for
// adoption, more of them than the live threads will take soon: the free
// pages of those segments are purged at the exit, so the memory of threads
// that are gone is not held until some thread adopts it (200 generations
// of 8 threads peaked at 2.4 times glibc's RSS, most of it such pages).
TEST(Generations, FreePagesLeftByExitedThreadsArePurgedAtExit) {
  constexpr int kThreads = 8;
  constexpr size_t kBlocks = 24000, kSize = 128;  // 3 MiB a thread
  std::vector<void *> kept;
  kept.reserve(kThreads * kBlocks);
  std::mutex mu;
  std::condition_variable cv;
  int freed = 0;
  const brisk_stats_t before = bt::stats_now();
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&] {
      std::vector<void *> mine(kBlocks);
      for (void *&p : mine) {
        ASSERT_NE(p = brisk_malloc(kSize), nullptr);
        std::memset(p, 0x5a, kSize);
      }
      std::unique_lock<std::mutex> lock(mu);
      // A block in 16 of the first eighth stays live: the segment is
      // abandoned, its other pages are free and were touched.
      for (size_t i = 0; i < mine.size(); ++i)
        if (i < kBlocks / 8 && i % 16 == 0) kept.push_back(mine[i]);
        else brisk_free(mine[i]);
      // No thread exits before all have allocated, so none adopts another's segment.
      ++freed;
      cv.notify_all();
      cv.wait(lock, [&] { return freed == kThreads; });
    });
  for (auto &t : ts) t.join();
  const brisk_stats_t after = bt::stats_now();
  const size_t committed = after.tiers[BRISK_TIER_SMALL].committed, was = before.tiers[BRISK_TIER_SMALL].committed;
  // Left unpurged: 24 MiB of free pages. Purged: the pages of the live
  // blocks (3 MiB), and what the newest segments keep for the live threads.
  EXPECT_LE(committed, was + 10 * bt::MiB)
      << "small pages committed: " << bt::mib(was) << " before the threads, " << bt::mib(committed) << " after ("
      << after.abandoned_segments << " abandoned segments)";
  for (void *p : kept) brisk_free(p);
}

// Threads that exit leave their segments in the cache, mostly pages their
// blocks never touched. The cache weighs each by what it holds resident,
// not by its size: two threads with a few hundred KiB of blocks each leave
// both segments warm for the next threads (before, each counted as 4 MiB,
// the second was purged at once, and a program whose threads come and go
// kept faulting pages in, or, once that looked like a rebuild, kept 25-100
// MiB unpurged for threads that had touched a few MiB).
// (A third thread lives through the check: when the last thread of a group
// exits, the group's memory is purged at once, the test below. The purge
// delay is long: a thread held off the CPU for half a second between its
// frees and its exit, as under ThreadSanitizer on a loaded CI machine, had
// its emptied pages purged for their age, clean43.)
TEST(ShortThreads, CachedSegmentsAreWeighedByWhatTheirBlocksTouched) {
  brisk_free(brisk_malloc(16));  // the process is set up
  const long long delay = brisk_option_get(BRISK_OPTION_PURGE_DELAY_MS);
  ASSERT_EQ(brisk_option_set(BRISK_OPTION_PURGE_DELAY_MS, 3600 * 1000), 0);
  bt::LiveThread keeper;
  const bt::OsCalls before = bt::os_calls();
  std::mutex mu;
  std::condition_variable cv;
  int allocated = 0;
  auto work = [&] {
    std::vector<void *> blocks(2000);
    for (size_t i = 0; i < blocks.size(); ++i) {
      ASSERT_NE(blocks[i] = brisk_malloc(16 + i % 200), nullptr);
      std::memset(blocks[i], 1, 16 + i % 200);
    }
    {  // both threads hold their segments at once
      std::unique_lock<std::mutex> lock(mu);
      ++allocated;
      cv.notify_all();
      cv.wait(lock, [&] { return allocated == 2; });
    }
    for (void *p : blocks) brisk_free(p);
  };
  std::thread a(work), b(work);
  a.join();
  b.join();
  const brisk_stats_t st = bt::stats_now();
  EXPECT_EQ(bt::os_calls().madvise, before.madvise) << "a segment of an exited thread was purged at once";
  EXPECT_GE(st.cached, 2 * 4 * bt::MiB) << "both threads' segments are in the cache";
  size_t in_tiers = 0;
  for (const brisk_tier_stats_t &t : st.tiers) in_tiers += t.committed;
  EXPECT_LE(st.committed - in_tiers, 2 * bt::MiB) << "the cache reports its segments as resident in full";
  brisk_option_set(BRISK_OPTION_PURGE_DELAY_MS, delay);
}

// Committed bytes other than the calling thread's own live blocks and pages.
static size_t committed_beyond(const brisk_stats_t &st, const brisk_stats_t &base) {
  return st.committed > base.committed ? st.committed - base.committed : 0;
}

// When the last thread of a group exits, what the group freed goes back to
// the OS at once, as glibc's arenas trim as they empty: the segments of
// exited threads that other threads' frees emptied (those frees made while
// the owner lived wait in the transfer cache, in batches) and the cache's
// unpurged segments. Before, they stayed resident until a purge pass, which
// needs a slow path to run (thread churn: 10-12 MiB resident after the last
// join, against glibc's 2).
TEST(ShortThreads, TheLastThreadOfAGroupGivesBackWhatTheGroupFreed) {
  brisk_free(brisk_malloc(16));  // the process is set up; this thread has a heap
  const size_t kBlocks = 20000;
  std::vector<void *> handed(kBlocks);
  const brisk_stats_t before = bt::stats_now();
  std::mutex mu;
  std::condition_variable cv;
  int step = 0;  // 1: handed out, 2: freed by the consumer, 3: producer gone
  auto wait_for = [&](int s) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return step >= s; });
  };
  auto reach = [&](int s) {
    std::lock_guard<std::mutex> lock(mu);
    step = s;
    cv.notify_all();
  };
  std::thread producer([&] {
    for (size_t i = 0; i < kBlocks; ++i) {
      ASSERT_NE(handed[i] = brisk_malloc(64 + i % 3 * 16), nullptr);
      std::memset(handed[i], 1, 64);
    }
    std::vector<void *> own(2000);  // freed by their owner: free pages
    for (auto &p : own) ASSERT_NE(p = brisk_malloc(3000), nullptr);
    for (void *p : own) brisk_free(p);
    reach(1);
    wait_for(2);  // the owner lives while its blocks are freed: they go in batches
  });
  std::thread consumer([&] {
    brisk_free(brisk_malloc(16));  // a heap of its own
    wait_for(1);
    for (void *p : handed) brisk_free(p);
    reach(2);
    wait_for(3);  // the group's last thread
  });
  producer.join();
  reach(3);
  consumer.join();
  const brisk_stats_t st = bt::stats_now();
  EXPECT_EQ(st.abandoned_segments, 0u) << "a segment of an exited thread was not released";
  EXPECT_LE(committed_beyond(st, before), 1 * bt::MiB)
      << "committed: " << bt::mib(before.committed) << " before the threads, " << bt::mib(st.committed) << " after";
}

// Thread churn: pairs of short threads, one pair after another, each
// group's end the last join of a pair. Group ends purge a bounded number of
// times (purge.c), and not at all while the threads take back in rounds
// what those purges gave (cache_policy.c: rounds of threads, as mimalloc's
// stress test runs them). That was counted by the size of the segments
// taken back, 4 MiB each, where a short thread touches a few hundred KiB of
// its segment: the churn looked like rounds, and its last join kept 10 MiB
// resident in 3 of 5 runs of the suite's churn (2.1 MiB in the others,
// glibc 2.0).
TEST(ShortThreads, ChurnEndsWithWhatItsThreadsFreedGivenBack) {
  brisk_free(brisk_malloc(16));  // this thread has a heap: each pair's end is a group's
  const brisk_stats_t before = bt::stats_now();
  auto work = [](unsigned seed) {
    bt::Rng rng(seed);
    std::vector<void *> blocks(1000);
    for (auto &p : blocks) {
      const size_t n = rng.below(10) < 6 ? rng.range(16, 256) : rng.below(4) < 3 ? rng.range(512, 2048)
                                                                               : rng.range(4096, 32768);
      ASSERT_NE(p = brisk_malloc(n), nullptr);
      std::memset(p, 1, n);
    }
    for (void *p : blocks) brisk_free(p);
  };
  auto run_pair = [&](unsigned pair) {
    std::thread a(work, 2 * pair), b(work, 2 * pair + 1);
    a.join();
    b.join();
  };
  for (unsigned pair = 0; pair < 300; ++pair) run_pair(pair);
  // The next group end purges unless churn looks like rounds: past a purge
  // delay, the bound on group-end purges allows one again (purge.c).
  std::this_thread::sleep_for(std::chrono::milliseconds(brisk_option_get(BRISK_OPTION_PURGE_DELAY_MS) + 100));
  run_pair(300);
  const brisk_stats_t st = bt::stats_now();
  EXPECT_LE(committed_beyond(st, before), 2 * bt::MiB)
      << "committed " << bt::mib(st.committed) << " after the last pair, " << bt::mib(before.committed) << " before";
}

// A program that runs one short thread after another reuses warm what the
// one before freed: the last exit of a group purges at most a few times a
// purge delay (each thread faulting in again what the last one freed took
// 1.9x the time).
TEST(ShortThreads, OneThreadAfterAnotherReusesWarmMemory) {
  const long long delay = brisk_option_get(BRISK_OPTION_PURGE_DELAY_MS);
  ASSERT_EQ(brisk_option_set(BRISK_OPTION_PURGE_DELAY_MS, 3600 * 1000), 0);
  brisk_free(brisk_malloc(16));
  auto work = [] {
    std::vector<void *> blocks(2000);  // (well within what the cache keeps unpurged)
    for (size_t i = 0; i < blocks.size(); ++i) {
      ASSERT_NE(blocks[i] = brisk_malloc(16 + i % 25 * 32), nullptr);
      std::memset(blocks[i], 1, 16);
    }
    for (void *p : blocks) brisk_free(p);
  };
  int purging_exits = 0;
  for (int i = 0; i < 20; ++i) {
    const size_t madvise = bt::os_calls().madvise;
    std::thread(work).join();
    purging_exits += bt::os_calls().madvise != madvise;
  }
  EXPECT_GE(purging_exits, 1) << "no group's end gave its memory back";
  EXPECT_LE(purging_exits, 4) << "thread exits purged what the next thread reuses";
  brisk_option_set(BRISK_OPTION_PURGE_DELAY_MS, delay);
}
