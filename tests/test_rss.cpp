// RSS falls back after a burst: ~256 MiB of small and large blocks, all
// touched, then all freed; RSS (from /proc/self/statm) must come back near
// where it started within a few seconds. brisk has no thread of its own by
// default: a program that keeps allocating gets its memory back through
// its own calls (the purge passes run from them), and one that goes idle
// turns on BRISK_OPTION_BACKGROUND_PURGE, whose thread purges without any
// call into brisk.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "test_util.h"

using namespace bt;

namespace {

constexpr size_t kSmallBytes = 128 * MiB;
constexpr size_t kLargeBytes = 128 * MiB;
constexpr size_t kMargin = 64 * MiB;   // what the test requires
constexpr size_t kSettled = 16 * MiB;  // polling stops early below this
constexpr double kWaitSeconds = 3.0;

double now_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

void sleep_ms(long ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

// Allocates the burst (blocks kept in `out`, whose storage is reserved up
// front) and touches every page.
void burst(std::vector<void *> &out, uint64_t seed) {
  Rng rng(seed);
  size_t small = 0, large = 0;
  while (small < kSmallBytes || large < kLargeBytes) {
    bool big = large < kLargeBytes && (small >= kSmallBytes || rng.below(200) == 0);
    size_t n = big ? rng.range(64 * KiB, 8 * MiB) : rng.range(16, 2048);
    void *p = brisk_malloc(n);
    if (!p) {
      ADD_FAILURE() << "malloc(" << n << ") failed during the burst";
      return;
    }
    std::memset(p, 0x6b, n);
    out.push_back(p);
    (big ? large : small) += n;
  }
}

void free_all(std::vector<void *> &v) {
  // Free in an order unlike the allocation order.
  for (size_t i = 0; i < v.size(); i += 2) brisk_free(v[i]);
  for (size_t i = 1; i < v.size(); i += 2) brisk_free(v[i]);
}

// Small blocks allocated and freed, as a program at work does.
void keep_allocating() {
  void *v[64];
  for (size_t i = 0; i < 64; ++i) v[i] = brisk_malloc(16 + i * 24);
  for (void *p : v) brisk_free(p);
}

// Waits until RSS is within kSettled of base, or the time is up, calling
// brisk meanwhile only when `allocating`. Returns the last RSS seen.
size_t wait_for_fall(size_t base, double *took, bool allocating) {
  double t0 = now_s();
  size_t rss = rss_bytes();
  while (rss > base + kSettled && now_s() - t0 < kWaitSeconds) {
    if (allocating) {
      for (double t1 = now_s(); now_s() - t1 < 0.05;) keep_allocating();
    } else {
      sleep_ms(50);
    }
    rss = rss_bytes();
  }
  *took = now_s() - t0;
  return rss;
}

void warm_up() {
  // Start brisk (and whatever background machinery it has) before the
  // baseline is taken.
  void *p = brisk_malloc(100);
  void *q = brisk_malloc(1 * MiB);
  brisk_free(p);
  brisk_free(q);
}

std::vector<void *> make_list() {
  // Room for every block (small ones average ~1 KiB), made resident before
  // the baseline is taken.
  std::vector<void *> v;
  v.assign(kSmallBytes / 256 + kLargeBytes / (64 * KiB) + 16, nullptr);
  v.clear();
  return v;
}

void report(const char *what, size_t base, size_t peak, size_t after, double took) {
  std::printf("%s: base %s, peak %s, after free %s (waited %.2f s)\n", what, mib(base).c_str(), mib(peak).c_str(),
              mib(after).c_str(), took);
}

}  // namespace

TEST(Rss, FallsBackAfterBurstInMainThread) {
#if BRISK_TEST_TSAN
  GTEST_SKIP() << "ThreadSanitizer's shadow memory does not shrink on madvise";
#endif
  warm_up();
  std::vector<void *> blocks = make_list();
  const size_t base = rss_bytes();
  burst(blocks, 1);
  const size_t peak = rss_bytes();
  ASSERT_GE(peak, base + 200 * MiB) << "the burst did not become resident";
  free_all(blocks);
  double took = 0;
  const size_t after = wait_for_fall(base, &took, true);
  report("main thread", base, peak, after, took);
  EXPECT_LE(after, base + kMargin) << "RSS did not fall back within " << kWaitSeconds << " s: base " << mib(base)
                                   << ", now " << mib(after);
}

TEST(Rss, FallsBackAfterBurstInIdleThread) {
#if BRISK_TEST_TSAN
  GTEST_SKIP() << "ThreadSanitizer's shadow memory does not shrink on madvise";
#endif
  // The burst is made and freed by a thread that then blocks (stays alive,
  // never calls brisk again), and the main thread waits without calling
  // brisk either: the opt-in helper thread must purge what was cached.
  ASSERT_EQ(brisk_option_set(BRISK_OPTION_BACKGROUND_PURGE, 1), 0);
  warm_up();
  std::vector<void *> blocks = make_list();
  std::mutex m;
  std::condition_variable cv;
  bool freed = false, release = false;
  size_t peak = 0;
  const size_t base = rss_bytes();
  std::thread t([&] {
    warm_up();
    burst(blocks, 2);
    size_t p = rss_bytes();
    free_all(blocks);
    std::unique_lock<std::mutex> g(m);
    peak = p;
    freed = true;
    cv.notify_all();
    cv.wait(g, [&] { return release; });
  });
  {
    std::unique_lock<std::mutex> g(m);
    cv.wait(g, [&] { return freed; });
  }
  double took = 0;
  const size_t after = wait_for_fall(base, &took, false);
  {
    std::lock_guard<std::mutex> g(m);
    release = true;
  }
  cv.notify_all();
  t.join();
  brisk_option_set(BRISK_OPTION_BACKGROUND_PURGE, 0);
  report("idle thread", base, peak, after, took);
  ASSERT_GE(peak, base + 200 * MiB) << "the burst did not become resident";
  EXPECT_LE(after, base + kMargin) << "RSS did not fall back within " << kWaitSeconds << " s: base " << mib(base)
                                   << ", now " << mib(after);
}

TEST(Rss, FallsBackAfterBurstInExitedThread) {
#if BRISK_TEST_TSAN
  GTEST_SKIP() << "ThreadSanitizer's shadow memory does not shrink on madvise";
#endif
  warm_up();
  std::vector<void *> blocks = make_list();
  size_t peak = 0;
  const size_t base = rss_bytes();
  std::thread t([&] {
    burst(blocks, 3);
    peak = rss_bytes();
    free_all(blocks);
  });
  t.join();
  // What the exited thread left in the shared caches is purged by the
  // passes the main thread's own calls run.
  double took = 0;
  const size_t after = wait_for_fall(base, &took, true);
  report("exited thread", base, peak, after, took);
  ASSERT_GE(peak, base + 200 * MiB) << "the burst did not become resident";
  EXPECT_LE(after, base + kMargin) << "RSS did not fall back within " << kWaitSeconds << " s: base " << mib(base)
                                   << ", now " << mib(after);
}

namespace {

// Bytes of free segments and huge blocks brisk keeps that were not purged
// yet: the unpurged cached bytes are the part of `committed` no tier counts.
size_t unpurged_cached() {
  brisk_stats_t st = stats_now();
  size_t tiers = 0;
  for (const brisk_tier_stats_t &t : st.tiers) tiers += t.committed;
  return st.committed - tiers;
}

}  // namespace

// Buffers of 5-25 MiB, all live and touched, then freed by a program that
// then makes no call into brisk (it sleeps, or waits for input): no purge
// pass can run, so what the frees keep unpurged is what it holds. A thread
// keeps its biggest freed block (a loop of buffers reuses it) and a few
// MiB beside it; the shared cache a few MiB more. It held all of them.
TEST(Rss, FreedHugeBuffersAreGivenBackWithoutALaterCall) {
  // Nothing cached, no rebuild under way (tests run before this one in the
  // same process rebuilt their buffers).
  brisk_collect();
  const long long delay = brisk_option_get(BRISK_OPTION_PURGE_DELAY_MS);
  ASSERT_EQ(brisk_option_set(BRISK_OPTION_PURGE_DELAY_MS, 3600 * 1000), 0);
  on_fresh_thread([] {
    warm_up();
    const size_t base = rss_bytes();
    Rng rng(5);
    std::vector<void *> v;
    size_t biggest = 0;
    for (int i = 0; i < 10; ++i) {
      size_t n = rng.range(5 * MiB, 25 * MiB);
      void *p = brisk_malloc(n);
      ASSERT_NE(p, nullptr);
      std::memset(p, 0x3c, n);
      v.push_back(p);
      biggest = std::max(biggest, n);
    }
    const size_t peak = rss_bytes();
    ASSERT_GE(peak, base + 100 * MiB) << "the buffers did not become resident";
    for (void *p : v) brisk_free(p);
    const size_t after = rss_bytes(), unpurged = unpurged_cached();
    std::printf("RSS: base %s, peak %s, after the frees %s (biggest buffer %s); unpurged cached %s\n",
                mib(base).c_str(), mib(peak).c_str(), mib(after).c_str(), mib(biggest).c_str(),
                mib(unpurged).c_str());
    EXPECT_LE(unpurged, biggest + 12 * MiB) << "freed buffers were kept unpurged";
#if !BRISK_TEST_TSAN  // (its shadow memory does not shrink on madvise)
    EXPECT_LE(after, base + biggest + 16 * MiB) << "freed buffers stayed resident";
#endif
  });
  brisk_option_set(BRISK_OPTION_PURGE_DELAY_MS, delay);
}

// Without BRISK_BACKGROUND_PURGE brisk runs no thread of its own, yet freed
// memory is purged once the purge delay has passed, by the passes the
// program's own allocation and free calls make (issue #10, item 7): memory
// in this thread's warm cache and in the shared cache (left by an exited
// thread) both.
// busy_loop: one round of the program's calls after the frees.
void expect_purged_by_allocation_calls(const std::function<void()> &busy_loop) {
  // (Tests before this one in the same process may have run rounds of
  // threads, which start the helper thread: brisk_collect forgets them.)
  brisk_collect();
  ASSERT_EQ(brisk_option_set(BRISK_OPTION_BACKGROUND_PURGE, 0), 0);
  // An hour's delay while the memory is freed, so that none is purged
  // before it is measured, however slow the machine.
  const long long delay = brisk_option_get(BRISK_OPTION_PURGE_DELAY_MS);
  ASSERT_EQ(brisk_option_set(BRISK_OPTION_PURGE_DELAY_MS, 3600 * 1000), 0);
  warm_up();
  std::thread([] {}).join();  // ThreadSanitizer starts a thread of its own at the first one
  const int threads = thread_count();
  ASSERT_GT(threads, 0);
  auto touch_and_free = [](std::initializer_list<size_t> sizes) {
    std::vector<void *> v;
    for (size_t n : sizes) {
      void *p = brisk_malloc(n);
      ASSERT_NE(p, nullptr);
      std::memset(p, 0x5a, n);
      v.push_back(p);
    }
    for (void *p : v) brisk_free(p);
  };
  touch_and_free({8 * MiB, 16 * MiB, 24 * MiB, 32 * MiB});
  std::thread t([&] { touch_and_free({6 * MiB, 6 * MiB, 6 * MiB}); });
  t.join();
  const size_t before = unpurged_cached();
  // (Each thread keeps its biggest freed block unpurged, and a little more.)
  EXPECT_GE(before, 32 * MiB) << "the freed blocks were not cached unpurged: the check below proves nothing";
  // Then a short delay, and small blocks allocated and freed, as a busy
  // program does.
  ASSERT_EQ(brisk_option_set(BRISK_OPTION_PURGE_DELAY_MS, 20), 0);
  double t0 = now_s();
  size_t after = before;
  while (after > 4 * MiB && now_s() - t0 < 20.0) {
    busy_loop();
    after = unpurged_cached();
  }
  std::printf("unpurged cached bytes: %s before, %s after %.2f s of allocation calls\n", mib(before).c_str(),
              mib(after).c_str(), now_s() - t0);
  EXPECT_LE(after, 4 * MiB) << "freed memory was not purged by the allocation calls";
  // (Fewer is fine: an earlier test's helper thread may still be ending.)
  EXPECT_LE(thread_count(), threads) << "brisk started a thread";
  brisk_option_set(BRISK_OPTION_PURGE_DELAY_MS, delay);
}

TEST(Rss, FreedMemoryIsPurgedByAllocationCallsWithoutAThread) {
  expect_purged_by_allocation_calls([] {
    void *v[256];
    for (size_t i = 0; i < 256; ++i) v[i] = brisk_malloc(16 + (i * 40) % 3000);
    for (void *p : v) brisk_free(p);
  });
}

// A loop that frees each block before the next malloc of its size finds
// it again at once, and may never run out of blocks: the purges must not
// wait for a malloc that does (the heap's heartbeat, fast_path.h).
TEST(Rss, FreedMemoryIsPurgedByAOneSizeMallocFreeLoop) {
  expect_purged_by_allocation_calls([] {
    for (int i = 0; i < 1000; ++i) {
      void *p = brisk_malloc(64);
      ASSERT_NE(p, nullptr);
      static_cast<volatile char *>(p)[0] = 1;
      brisk_free(p);
    }
  });
}

// Each round's end is a group's end (one thread left), where brisk gives
// back at once what the threads gone freed, so that thread churn ends lean.
// A program that starts the next round at once took all of it back and
// faulted it in again, every round: mimalloc's stress test with 2 threads
// spent 2.2x its time doing so (3.8 M faults against 0.3 M). Once a round
// has taken back that much, the group ends leave the memory to the caches.
TEST(Rss, RoundsOfThreadsReuseWhatTheRoundBeforeFreed) {
#if BRISK_TEST_TSAN
  GTEST_SKIP() << "ThreadSanitizer's shadow memory faults in beside brisk's";
#endif
  warm_up();
  long faults[6];
  for (int round = 0; round < 6; ++round) faults[round] = thread_round(round + 1);
  std::printf("minor faults by round: %ld %ld %ld %ld %ld %ld\n", faults[0], faults[1], faults[2], faults[3],
              faults[4], faults[5]);
  ASSERT_GE(faults[0], 12000) << "the first round did not fault its memory in";
  // (The second round faults in what the first group end purged. The later
  // ones fault in what the shared cache trims as the threads free: 6-13k,
  // every round 24-25k before.)
  EXPECT_LE(faults[2] + faults[3] + faults[4], 2 * faults[0])
      << "every round faulted its memory in again: the group ends purged what the next round takes back";
}

// The other side: once the rounds stop and the program goes idle, making no
// call into brisk, that memory still goes back (a helper thread runs the
// purge passes until nothing waits).
TEST(Rss, RoundsOfThreadsGiveTheirMemoryBackOnceIdle) {
#if BRISK_TEST_TSAN
  GTEST_SKIP() << "ThreadSanitizer's shadow memory does not shrink on madvise";
#endif
  const long long delay = brisk_option_get(BRISK_OPTION_PURGE_DELAY_MS);
  ASSERT_EQ(brisk_option_set(BRISK_OPTION_PURGE_DELAY_MS, 200), 0);
  warm_up();
  const int threads = thread_count();
  for (int round = 0; round < 4; ++round) thread_round(round + 7);
  keep_allocating();  // (a call after the rounds: what starts the helper)
  const size_t held = unpurged_cached();
  std::printf("unpurged cached after the rounds: %s; threads %d before, %d after\n", mib(held).c_str(), threads,
              thread_count());
  ASSERT_GE(held, 16 * MiB) << "the rounds' memory was not cached unpurged: the check below proves nothing";
  double t0 = now_s();
  size_t after = held;
  while (after > 4 * MiB && now_s() - t0 < 5.0) {
    sleep_ms(50);
    after = unpurged_cached();
  }
  std::printf("unpurged cached: %s after %.2f s idle\n", mib(after).c_str(), now_s() - t0);
  EXPECT_LE(after, 4 * MiB) << "the rounds' memory stayed unpurged while the program was idle";
  brisk_option_set(BRISK_OPTION_PURGE_DELAY_MS, delay);
}

// Blocks of 80 KiB to 1 MiB share 4 MiB pages, which stay in use while one
// of their blocks does: a program that freed nine in ten of its 300 KiB
// buffers kept 224 of 298 MiB resident. Free blocks that sit idle are
// given back past their first OS page, on brisk_collect at once and on the
// purge ticks of a busy thread within about a purge delay.
namespace {
size_t resident_in(const void *p, size_t n) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  uintptr_t from = (reinterpret_cast<uintptr_t>(p) + page - 1) & ~(page - 1);
  uintptr_t to = (reinterpret_cast<uintptr_t>(p) + n) & ~(page - 1);
  if (to <= from) return 0;
  std::vector<unsigned char> vec((to - from) / page);
  if (::mincore(reinterpret_cast<void *>(from), to - from, vec.data()) != 0) return 0;
  size_t pages = 0;
  for (unsigned char v : vec) pages += v & 1;
  return pages * page;
}

// 64 blocks of 300 KiB, every page written; all freed but every 8th, so
// that each 4 MiB page keeps a live block. Returns the bytes of the freed
// ones still resident after `settle` ran.
size_t freed_large_blocks_resident(const std::function<void(const std::function<size_t()> &)> &settle) {
  constexpr size_t kBlocks = 64, kSize = 300 * KiB;
  std::vector<void *> v(kBlocks);
  for (auto &p : v) {
    p = brisk_malloc(kSize);
    EXPECT_NE(p, nullptr);
    if (p) std::memset(p, 0x3c, kSize);
  }
  std::vector<void *> freed;
  for (size_t i = 0; i < kBlocks; ++i)
    if (i % 8) freed.push_back(v[i]);
  auto resident = [&] {
    size_t sum = 0;
    for (void *p : freed) sum += resident_in(p, kSize);
    return sum;
  };
  const size_t before = resident();
  EXPECT_GE(before, freed.size() * (kSize - 8 * KiB)) << "the blocks were not resident";
  for (void *p : freed) brisk_free(p);
  settle(resident);
  const size_t after = resident();
  std::printf("freed 300 KiB blocks resident: %s before their free, %s after\n", mib(before).c_str(),
              mib(after).c_str());
  for (size_t i = 0; i < kBlocks; i += 8) {
    EXPECT_EQ(static_cast<unsigned char *>(v[i])[kSize - 1], 0x3c) << "a live block changed";
    brisk_free(v[i]);
  }
  return after;
}
}  // namespace

TEST(Rss, FreeBlocksOfLargePagesAreGivenBackOnCollect) {
  // (The first OS page of each stays: it holds the free lists' words.)
  size_t after = freed_large_blocks_resident([](const std::function<size_t()> &) { brisk_collect(); });
  EXPECT_LE(after, 56 * 8 * KiB) << "free blocks of pages still in use stayed resident after brisk_collect";
  // Handed out again, such blocks hold what is written to them, and calloc
  // clears them, the first OS page (which kept the lists' words) too.
  std::vector<unsigned char *> again;
  for (int i = 0; i < 32; ++i) {
    auto *p = static_cast<unsigned char *>(i % 2 ? brisk_calloc(1, 300 * KiB) : brisk_malloc(300 * KiB));
    ASSERT_NE(p, nullptr);
    if (i % 2) {
      for (size_t k = 0; k < 300 * KiB; ++k) ASSERT_EQ(p[k], 0) << "calloc's block " << i << " byte " << k;
    }
    std::memset(p, i, 300 * KiB);
    again.push_back(p);
  }
  for (int i = 0; i < 32; ++i) {
    EXPECT_EQ(again[i][0], i);
    EXPECT_EQ(again[i][300 * KiB - 1], i);
    brisk_free(again[i]);
  }
}

TEST(Rss, FreeBlocksOfLargePagesAreGivenBackByAllocationCalls) {
  const long long delay = brisk_option_get(BRISK_OPTION_PURGE_DELAY_MS);
  ASSERT_EQ(brisk_option_set(BRISK_OPTION_PURGE_DELAY_MS, 40), 0);
  size_t after = freed_large_blocks_resident([](const std::function<size_t()> &resident) {
    // A busy thread: small blocks allocated and freed until the free large
    // blocks leave, or 20 s.
    double t0 = now_s();
    while (resident() > 8 * MiB && now_s() - t0 < 20.0) keep_allocating();
  });
  brisk_option_set(BRISK_OPTION_PURGE_DELAY_MS, delay);
  EXPECT_LE(after, 8 * MiB) << "free blocks of large pages stayed resident while the thread kept allocating";
}

// A large class's current page stays in use when its last block is freed
// (the class's next malloc takes it as it is), and its blocks were never
// given back: perl, whose strings grow through these classes, held 6 MiB
// more than glibc at its peak in such pages, none of their blocks live.
TEST(Rss, FreeBlocksOfALargeClassCurrentPageAreGivenBack) {
  constexpr size_t kBlocks = 4, kSize = 600 * KiB; // (a 4 MiB page holds 6)
  const long long delay = brisk_option_get(BRISK_OPTION_PURGE_DELAY_MS);
  ASSERT_EQ(brisk_option_set(BRISK_OPTION_PURGE_DELAY_MS, 40), 0);
  std::vector<void *> v(kBlocks);
  for (auto &p : v) {
    p = brisk_malloc(kSize);
    ASSERT_NE(p, nullptr);
    std::memset(p, 0x5a, kSize);
  }
  auto resident = [&] {
    size_t sum = 0;
    for (void *p : v) sum += resident_in(p, kSize);
    return sum;
  };
  const size_t before = resident();
  EXPECT_GE(before, kBlocks * (kSize - 8 * KiB)) << "the blocks were not resident";
  for (void *p : v) brisk_free(p);
  double t0 = now_s();
  while (resident() > kBlocks * 8 * KiB && now_s() - t0 < 20.0) keep_allocating();
  const size_t after = resident();
  std::printf("freed 600 KiB blocks resident: %s before their free, %s after %.2f s\n", mib(before).c_str(),
              mib(after).c_str(), now_s() - t0);
  brisk_option_set(BRISK_OPTION_PURGE_DELAY_MS, delay);
  EXPECT_LE(after, kBlocks * 8 * KiB) << "the free blocks of the class's current page stayed resident";
  // The page serves its class again, its blocks written and read back.
  for (auto &p : v) {
    p = brisk_malloc(kSize);
    ASSERT_NE(p, nullptr);
    std::memset(p, 0x6b, kSize);
  }
  for (void *p : v) {
    EXPECT_EQ(static_cast<unsigned char *>(p)[kSize - 1], 0x6b);
    brisk_free(p);
  }
}
