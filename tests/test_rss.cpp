// RSS falls back by itself after a burst: ~256 MiB of small and large blocks,
// all touched, then all freed; without any call into brisk, RSS (from
// /proc/self/statm) must come back near where it started within a few
// seconds (brisk purges in the background after about a second).
#include <gtest/gtest.h>
#include <time.h>

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "test_util.h"

using namespace bt;

namespace {

constexpr size_t kSmallBytes = 128 * MiB;
constexpr size_t kLargeBytes = 128 * MiB;
constexpr size_t kMargin = 64 * MiB;  // what the test requires
constexpr size_t kSettled = 16 * MiB; // polling stops early below this
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

// Waits (never calling brisk) until RSS is within kSettled of base, or the
// time is up. Returns the last RSS seen.
size_t wait_for_fall(size_t base, double *took) {
  double t0 = now_s();
  size_t rss = rss_bytes();
  while (rss > base + kSettled && now_s() - t0 < kWaitSeconds) {
    sleep_ms(50);
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
  std::printf("%s: base %s, peak %s, after free %s (waited %.2f s)\n", what, mib(base).c_str(),
              mib(peak).c_str(), mib(after).c_str(), took);
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
  const size_t after = wait_for_fall(base, &took);
  report("main thread", base, peak, after, took);
  EXPECT_LE(after, base + kMargin) << "RSS did not fall back within " << kWaitSeconds
                                   << " s: base " << mib(base) << ", now " << mib(after);
}

TEST(Rss, FallsBackAfterBurstInIdleThread) {
#if BRISK_TEST_TSAN
  GTEST_SKIP() << "ThreadSanitizer's shadow memory does not shrink on madvise";
#endif
  // The burst is made and freed by a thread that then blocks (stays alive,
  // never calls brisk again): whatever it cached must be purged anyway.
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
  const size_t after = wait_for_fall(base, &took);
  {
    std::lock_guard<std::mutex> g(m);
    release = true;
  }
  cv.notify_all();
  t.join();
  report("idle thread", base, peak, after, took);
  ASSERT_GE(peak, base + 200 * MiB) << "the burst did not become resident";
  EXPECT_LE(after, base + kMargin) << "RSS did not fall back within " << kWaitSeconds
                                   << " s: base " << mib(base) << ", now " << mib(after);
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
  double took = 0;
  const size_t after = wait_for_fall(base, &took);
  report("exited thread", base, peak, after, took);
  ASSERT_GE(peak, base + 200 * MiB) << "the burst did not become resident";
  EXPECT_LE(after, base + kMargin) << "RSS did not fall back within " << kWaitSeconds
                                   << " s: base " << mib(base) << ", now " << mib(after);
}
