// Helpers shared by the brisk GoogleTest suites: the one place for what more
// than one test file uses.
//
// The suites call only the prefixed API (brisk_malloc, ...) so that they also
// run in the sanitizer builds, where brisk is compiled into the test binary
// without its malloc override.
#ifndef BRISK_TEST_UTIL_H
#define BRISK_TEST_UTIL_H

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "brisk.h"

// Set by tests/CMakeLists.txt from the BRISK_SANITIZE cache variable.
#ifndef BRISK_TEST_ASAN
#define BRISK_TEST_ASAN 0
#endif
#ifndef BRISK_TEST_TSAN
#define BRISK_TEST_TSAN 0
#endif
#define BRISK_TEST_SANITIZED (BRISK_TEST_ASAN || BRISK_TEST_TSAN)
// Set for the suites built again on the checked library (*_checked): its
// usable size, and the size a visit shows, is the size asked for (a canary
// lies just past it); the release library's is the block's, at least a byte.
/* The checked library built with -DBRISK_VALGRIND=ON (memcheck's client
 * requests) moves every realloc and writes every calloc, so that memcheck
 * sees each block's bytes defined or not (src/core/checked.c). */
#ifndef BRISK_TEST_VALGRIND
#define BRISK_TEST_VALGRIND 0
#endif
#ifndef BRISK_TEST_CHECKED
#define BRISK_TEST_CHECKED 0
#endif
#ifndef BRISK_TEST_SECURE
#define BRISK_TEST_SECURE 0 /* 1: the suite runs on the secure library */
#endif

namespace bt {

constexpr size_t KiB = 1024;
constexpr size_t MiB = 1024 * KiB;

// A store the compiler must keep: results a test drops, and pointers it must
// not reason about (a store after free would otherwise be dropped as dead).
inline void *volatile g_sink;
inline void *launder(void *p) {
  g_sink = p;
  return g_sink;
}

// Clears the dead frames below the caller, where the allocator's frames
// left the addresses they returned: a leak report's scan of the stack must
// not find a stale copy of a leaked block's address there.
__attribute__((noinline)) inline void clear_dead_stack() {
  char junk[64 * 1024];
  memset(junk, 0, sizeof junk);
  __asm__ volatile("" : : "r"(junk) : "memory");
}

// BRISK_TEST_SCALE (a positive number, default 1) scales the work done by the
// stress tests; the sanitizer runs use a fraction of it.
inline double scale() {
  const char *s = std::getenv("BRISK_TEST_SCALE");
  if (!s || !*s) return 1.0;
  double v = std::strtod(s, nullptr);
  return v > 0 ? v : 1.0;
}

// n scaled by BRISK_TEST_SCALE, at least lo.
inline size_t scaled(size_t n, size_t lo = 1) {
  double v = static_cast<double>(n) * scale();
  size_t r = static_cast<size_t>(v);
  return r < lo ? lo : r;
}

// Resident set size in bytes, read from /proc/self/statm with plain system
// calls (no stdio, so no allocation disturbs what is measured).
inline size_t rss_bytes() {
  int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[256];
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  unsigned long size = 0, resident = 0;
  if (std::sscanf(buf, "%lu %lu", &size, &resident) != 2) return 0;
  return static_cast<size_t>(resident) * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

// Threads of this process now: the entries of /proc/self/task.
inline int thread_count() {
  DIR *d = ::opendir("/proc/self/task");
  if (!d) return -1;
  int n = 0;
  while (const dirent *e = ::readdir(d))
    if (e->d_name[0] != '.') ++n;
  ::closedir(d);
  return n;
}

inline std::string mib(size_t bytes) {
  char b[64];
  std::snprintf(b, sizeof b, "%.1f MiB", static_cast<double>(bytes) / MiB);
  return b;
}

// A cheap 64-bit mixer (splitmix64 finaliser).
inline uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// Deterministic byte pattern: byte i of a block tagged `seed` depends on both,
// so a block overwritten by another block's pattern, shifted, or zeroed is
// detected. The value of byte i does not depend on the block's size, so a
// prefix kept by realloc can be checked against the same seed.
inline uint64_t pattern_word(uint64_t seed, size_t word_index) {
  return mix(seed ^ (static_cast<uint64_t>(word_index) * 0xD6E8FEB86659FD93ULL));
}

inline void fill(void *p, size_t n, uint64_t seed, size_t from = 0) {
  unsigned char *b = static_cast<unsigned char *>(p);
  size_t i = from;
  // leading partial word
  while (i < n && (i & 7)) {
    b[i] = static_cast<unsigned char>(pattern_word(seed, i >> 3) >> ((i & 7) * 8));
    ++i;
  }
  for (; i + 8 <= n; i += 8) {
    uint64_t w = pattern_word(seed, i >> 3);
    std::memcpy(b + i, &w, 8);
  }
  for (; i < n; ++i) b[i] = static_cast<unsigned char>(pattern_word(seed, i >> 3) >> ((i & 7) * 8));
}

// Returns the offset of the first byte in [0, n) that does not hold the
// pattern, or SIZE_MAX when all match.
inline size_t first_mismatch(const void *p, size_t n, uint64_t seed) {
  const unsigned char *b = static_cast<const unsigned char *>(p);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w = pattern_word(seed, i >> 3), got;
    std::memcpy(&got, b + i, 8);
    if (got != w) break;
  }
  for (; i < n; ++i) {
    unsigned char want = static_cast<unsigned char>(pattern_word(seed, i >> 3) >> ((i & 7) * 8));
    if (b[i] != want) return i;
  }
  return SIZE_MAX;
}

inline bool check(const void *p, size_t n, uint64_t seed) { return first_mismatch(p, n, seed) == SIZE_MAX; }

inline bool all_zero(const void *p, size_t n) {
  static const unsigned char zeros[64 * 1024] = {};
  const unsigned char *b = static_cast<const unsigned char *>(p);
  while (n) {
    size_t k = n < sizeof zeros ? n : sizeof zeros;
    if (std::memcmp(b, zeros, k) != 0) return false;
    b += k;
    n -= k;
  }
  return true;
}

inline bool aligned_to(const void *p, size_t a) { return (reinterpret_cast<uintptr_t>(p) & (a - 1)) == 0; }

// A small deterministic PRNG for the tests.
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(mix(seed) | 1) {}
  uint64_t next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  }
  size_t below(size_t n) { return n ? static_cast<size_t>(next() % n) : 0; }
  size_t range(size_t lo, size_t hi) { return lo + below(hi - lo + 1); }  // inclusive
};

// Sizes over every tier: mostly small, some medium/large, a few huge.
inline size_t random_size(Rng &r, size_t max_huge = 4 * MiB) {
  size_t k = r.below(1000);
  if (k < 700) return r.range(1, 512);
  if (k < 900) return r.range(513, 32 * KiB);
  if (k < 975) return r.range(32 * KiB + 1, 512 * KiB);
  if (k < 995 || max_huge <= 1 * MiB) return r.range(512 * KiB + 1, 1 * MiB);
  return r.range(1 * MiB + 1, max_huge);
}

// Blocks of random sizes in [lo, hi] from brisk_malloc, each written in full
// with `byte`, until they hold `total` bytes or more (*made: how many).
inline std::vector<void *> written_blocks(Rng &r, size_t total, size_t lo, size_t hi, int byte,
                                          size_t *made = nullptr) {
  std::vector<void *> v;
  size_t bytes = 0;
  while (bytes < total) {
    size_t n = r.range(lo, hi);
    void *p = brisk_malloc(n);
    if (!p) {
      ADD_FAILURE() << "brisk_malloc(" << n << ") failed";
      break;
    }
    std::memset(p, byte, n);
    v.push_back(p);
    bytes += n;
  }
  if (made) *made = bytes;
  return v;
}

inline long minor_faults() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

// One round of a program that runs its threads in rounds (mimalloc's stress
// test, a parallel loop): two threads each touch 48 MiB of 64 KiB-2 MiB
// blocks, free them and exit. Returns the minor page faults it took.
inline long thread_round(uint64_t seed) {
  long before = minor_faults();
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([seed, t] {
      Rng rng(seed * 2 + t);
      for (void *p : written_blocks(rng, 48 * MiB, 64 * KiB, 2 * MiB, 0x2d)) brisk_free(p);
    });
  for (std::thread &t : threads) t.join();
  return minor_faults() - before;
}

// One representative size list covering every tier from tiny to huge.
inline const size_t *tier_sizes(size_t *count) {
  static const size_t sizes[] = {
      1,       8,         15,          16,        17,      24,           32,           48,      64,
      100,     128,       255,         256,       500,     1000,         1024,         2000,    4096,
      5000,    8192,      10000,       16384,     20000,   32 * KiB,     32 * KiB + 1, 40000,   64 * KiB,
      100000,  128 * KiB, 200000,      256 * KiB, 500000,  512 * KiB,    900000,       1 * MiB, 1 * MiB + 1,
      1500000, 2 * MiB,   3 * MiB + 5, 4 * MiB,   8 * MiB, 16 * MiB + 3, 32 * MiB,     64 * MiB};
  *count = sizeof sizes / sizeof sizes[0];
  return sizes;
}

// A block a test holds, with the seed of the pattern written into it.
struct Block {
  void *p;
  size_t n;
  uint64_t seed;
};

// brisk's statistics now (the call itself must succeed).
inline brisk_stats_t stats_now() {
  brisk_stats_t st;
  std::memset(&st, 0, sizeof st);
  st.version = BRISK_STATS_VERSION;
  EXPECT_EQ(brisk_stats_get(&st), 0);
  return st;
}

// brisk's counts of its memory system calls, compared and printed as one.
struct OsCalls {
  uint64_t mmap, munmap, madvise, mremap;
  bool operator==(const OsCalls &o) const {
    return mmap == o.mmap && munmap == o.munmap && madvise == o.madvise && mremap == o.mremap;
  }
};

inline std::ostream &operator<<(std::ostream &os, const OsCalls &c) {
  return os << "mmap " << c.mmap << ", munmap " << c.munmap << ", madvise " << c.madvise << ", mremap "
            << c.mremap;
}

inline OsCalls os_calls() {
  brisk_stats_t st = stats_now();
  return {st.mmap_calls, st.munmap_calls, st.madvise_calls, st.mremap_calls};
}

// The class brisk uses for a request of n bytes: the smallest class size
// that holds it.
inline unsigned class_for(const brisk_stats_t &st, size_t n) {
  for (unsigned c = 0; c < st.class_count && c < BRISK_STATS_MAX_CLASSES; ++c)
    if (st.class_size[c] >= n) return c;
  return 0;
}

// Runs f on a new thread and waits for it (a thread with a fresh heap).
template <class F>
void on_fresh_thread(F f) {
  std::thread t(f);
  t.join();
}

// A thread with a heap of its own that lives as long as this object: while
// it does, the exit of another thread is not the last of a group, which
// purges what the group freed (core/purge.c), for tests of what exited
// threads leave to the threads that live on.
class LiveThread {
 public:
  LiveThread() : thread_([this] { run(); }) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return ready_; });
  }
  ~LiveThread() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  void run() {
    void *p = brisk_malloc(64);
    std::unique_lock<std::mutex> lock(mu_);
    ready_ = true;
    cv_.notify_all();
    cv_.wait(lock, [this] { return done_; });
    brisk_free(p);
  }
  std::mutex mu_;
  std::condition_variable cv_;
  bool ready_ = false, done_ = false;
  std::thread thread_;
};

// ---- The C++ layer (test_cpp_allocator.cpp, test_cpp_pmr_pool.cpp) ----------
// (Not the types of overaligned_types.h, which the operator new/delete tests
// use: a file includes one or the other.)

// 1 PiB: more than the address space, so never available.
inline volatile size_t g_huge = static_cast<size_t>(1) << 50;

// The block came from brisk (the C++ layer tests link brisk_core, so malloc
// and operator new stay glibc's or the sanitizer's).
inline bool owned(const void *p) { return brisk_owns(p) != 0; }

struct alignas(64) A64 {
  unsigned char c[100];
  explicit A64(unsigned char v = 0) { std::memset(c, v, sizeof c); }
};
struct alignas(256) A256 {
  unsigned char c[300];
  explicit A256(unsigned char v = 0) { std::memset(c, v, sizeof c); }
  bool operator<(const A256 &o) const { return c[0] < o.c[0]; }
};

// What malloc_usable_size says at least for a block of n bytes.
inline size_t usable_at_least(size_t n) { return BRISK_TEST_CHECKED || n ? n : 1; }

// Death tests (the checked library's reports): run in the "threadsafe"
// style (the child re-executes the test binary), and skipped under
// ThreadSanitizer, which does not support forking a threaded process.
class DeathTest : public ::testing::Test {
 protected:
  void SetUp() override {
#if BRISK_TEST_TSAN
    GTEST_SKIP() << "death tests are not run under ThreadSanitizer";
#endif
    GTEST_FLAG_SET(death_test_style, "threadsafe");
  }
};

}  // namespace bt

#endif
