// Every function of brisk.h and its edge cases: zero sizes, overflow, errno,
// usable size, sized free, ownership, the mapped-memory cap and collect.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <set>
#include <vector>

#include "test_util.h"

using namespace bt;

namespace {

int g_static_int = 42;
char g_static_buf[256];

// glibc's own malloc/free, looked up in libc.so.6 itself so that the lookup
// does not land on an interposed malloc (brisk's override, or a sanitizer's).
struct LibcMalloc {
  void *(*malloc_fn)(size_t) = nullptr;
  void (*free_fn)(void *) = nullptr;
  LibcMalloc() {
    void *h = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    if (!h) return;
    malloc_fn = reinterpret_cast<void *(*)(size_t)>(dlsym(h, "malloc"));
    free_fn = reinterpret_cast<void (*)(void *)>(dlsym(h, "free"));
  }
};

}  // namespace

// The macros, the string and the loaded library agree (the tests run the
// library of the same build).
TEST(Api, VersionMacrosMatchTheLoadedLibrary) {
  char want[64];
  snprintf(want, sizeof want, "%d.%d.%d", BRISK_VERSION_MAJOR, BRISK_VERSION_MINOR, BRISK_VERSION_PATCH);
  EXPECT_STREQ(BRISK_VERSION_STRING, want);
  ASSERT_NE(brisk_version(), nullptr);
  EXPECT_STREQ(brisk_version(), BRISK_VERSION_STRING);
  EXPECT_EQ(BRISK_VERSION_NUMBER, BRISK_VERSION_MAJOR * 10000 + BRISK_VERSION_MINOR * 100 + BRISK_VERSION_PATCH);
}

TEST(Api, MallocZeroGivesUniqueFreeablePointers) {
  std::vector<void *> ptrs;
  std::set<void *> seen;
  for (int i = 0; i < 1000; ++i) {
    void *p = brisk_malloc(0);
    ASSERT_NE(p, nullptr) << "malloc(0) #" << i;
    EXPECT_TRUE(seen.insert(p).second) << "malloc(0) returned " << p << " twice";
    EXPECT_TRUE(brisk_owns(p));
    ptrs.push_back(p);
  }
  for (void *p : ptrs) brisk_free(p);
  // And again after the frees, interleaved with real blocks.
  void *a = brisk_malloc(0);
  void *b = brisk_malloc(24);
  void *c = brisk_malloc(0);
  ASSERT_TRUE(a && b && c);
  EXPECT_NE(a, c);
  EXPECT_NE(a, b);
  brisk_free(a);
  brisk_free(b);
  brisk_free(c);
}

TEST(Api, CallocZeroAndReallocNullZero) {
  void *a = brisk_calloc(0, 16);
  void *b = brisk_calloc(16, 0);
  void *c = brisk_calloc(0, 0);
  void *d = brisk_realloc(nullptr, 0);  // same as malloc(0)
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_NE(c, nullptr);
  ASSERT_NE(d, nullptr);
  std::set<void *> s{a, b, c, d};
  EXPECT_EQ(s.size(), 4u);
  brisk_free(a);
  brisk_free(b);
  brisk_free(c);
  brisk_free(d);
}

TEST(Api, ReallocToZero) {
  // The header allows both behaviours: NULL (the block was freed) or a
  // minimal block (the old one was freed or reused).
  void *p = brisk_malloc(100);
  ASSERT_NE(p, nullptr);
  std::memset(p, 0x5a, 100);
  void *q = brisk_realloc(p, 0);
  if (q) {
    EXPECT_TRUE(brisk_owns(q));
    brisk_free(q);
  }
}

TEST(Api, MallocOverflowGivesEnomem) {
  const size_t bad[] = {SIZE_MAX,
                        SIZE_MAX - 1,
                        SIZE_MAX - 15,
                        SIZE_MAX - 4096,
                        SIZE_MAX / 2 + 1,
                        static_cast<size_t>(PTRDIFF_MAX) + 1,
                        static_cast<size_t>(PTRDIFF_MAX) - 4096,
                        static_cast<size_t>(1) << 50};  // 1 PiB: past any address space
  for (size_t n : bad) {
    errno = 0;
    void *p = brisk_malloc(n);
    EXPECT_EQ(p, nullptr) << "malloc(" << n << ")";
    EXPECT_EQ(errno, ENOMEM) << "malloc(" << n << ")";
    if (p) brisk_free(p);
  }
}

TEST(Api, CallocOverflowGivesEnomem) {
  struct {
    size_t count, size;
  } bad[] = {{SIZE_MAX, 2},
             {2, SIZE_MAX},
             {SIZE_MAX / 2 + 1, 2},
             {static_cast<size_t>(1) << 33, static_cast<size_t>(1) << 33},
             {static_cast<size_t>(1) << 32, static_cast<size_t>(1) << 32},
             {SIZE_MAX / 16 + 1, 16},
             {3, SIZE_MAX / 3 + 1},
             {SIZE_MAX, SIZE_MAX}};
  for (auto &b : bad) {
    errno = 0;
    void *p = brisk_calloc(b.count, b.size);
    EXPECT_EQ(p, nullptr) << "calloc(" << b.count << ", " << b.size << ")";
    EXPECT_EQ(errno, ENOMEM) << "calloc(" << b.count << ", " << b.size << ")";
    if (p) brisk_free(p);
  }
  // A product that is huge but does not overflow still fails cleanly.
  errno = 0;
  void *p = brisk_calloc(static_cast<size_t>(1) << 25, static_cast<size_t>(1) << 25);  // 1 PiB
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(errno, ENOMEM);
}

TEST(Api, ReallocarrayOverflowGivesEnomemAndKeepsBlock) {
  errno = 0;
  void *p = brisk_reallocarray(nullptr, SIZE_MAX / 2, 3);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(errno, ENOMEM);

  void *q = brisk_malloc(300);
  ASSERT_NE(q, nullptr);
  fill(q, 300, 77);
  errno = 0;
  void *r = brisk_reallocarray(q, static_cast<size_t>(1) << 40, static_cast<size_t>(1) << 40);
  EXPECT_EQ(r, nullptr);
  EXPECT_EQ(errno, ENOMEM);
  EXPECT_TRUE(check(q, 300, 77)) << "reallocarray failure damaged the old block";
  errno = 0;
  r = brisk_reallocarray(q, 2, SIZE_MAX / 2 + 1);
  EXPECT_EQ(r, nullptr);
  EXPECT_EQ(errno, ENOMEM);
  EXPECT_TRUE(check(q, 300, 77));

  // The normal path: grows like realloc and keeps the contents.
  r = brisk_reallocarray(q, 1000, 8);
  ASSERT_NE(r, nullptr);
  EXPECT_TRUE(check(r, 300, 77));
  EXPECT_GE(brisk_usable_size(r), 8000u);
  brisk_free(r);

  void *s = brisk_reallocarray(nullptr, 10, 10);  // acts as malloc
  ASSERT_NE(s, nullptr);
  EXPECT_GE(brisk_usable_size(s), 100u);
  brisk_free(s);
}

TEST(Api, AlignmentOfPlainMalloc) {
  // 16 B or more: 16-aligned. Smaller: aligned for any object that fits.
  std::vector<void *> ptrs;
  for (size_t n = 1; n <= 2048; ++n) {
    void *p = brisk_malloc(n);
    ASSERT_NE(p, nullptr);
    size_t want = 16;
    if (n < 16) {
      want = 1;
      while (want * 2 <= n) want *= 2;
    }
    EXPECT_TRUE(aligned_to(p, want)) << "malloc(" << n << ") = " << p;
    ptrs.push_back(p);
  }
  size_t count;
  const size_t *sizes = tier_sizes(&count);
  for (size_t i = 0; i < count; ++i) {
    if (sizes[i] < 16) continue;
    void *p = brisk_malloc(sizes[i]);
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(aligned_to(p, 16)) << "malloc(" << sizes[i] << ") = " << p;
    ptrs.push_back(p);
  }
  for (void *p : ptrs) brisk_free(p);
}

TEST(Api, UsableSizeAtLeastRequestAcrossTiers) {
  EXPECT_EQ(brisk_usable_size(nullptr), 0u);
  size_t count;
  const size_t *sizes = tier_sizes(&count);
  std::vector<size_t> all(sizes, sizes + count);
  for (size_t n = 1; n <= 70000; n = n * 9 / 8 + 1) all.push_back(n);
  if (!BRISK_TEST_SANITIZED) {
    all.push_back(200 * MiB);
    all.push_back(300 * MiB + 12345);
  }
  for (size_t n : all) {
    void *p = brisk_malloc(n);
    ASSERT_NE(p, nullptr) << "malloc(" << n << ")";
    size_t u = brisk_usable_size(p);
    EXPECT_GE(u, n) << "usable_size(malloc(" << n << "))";
    // Every usable byte may be written (first and last, and a page stride).
    unsigned char *b = static_cast<unsigned char *>(p);
    for (size_t i = 0; i < u; i += 4096) b[i] = 1;
    b[u - 1] = 2;
    EXPECT_TRUE(brisk_owns(p));
    EXPECT_TRUE(brisk_owns(b + u - 1)) << "interior pointer at the last usable byte, size " << n;
    brisk_free(p);
  }
}

TEST(Api, SmallSizeClassWasteIsBounded) {
  // About four size classes per doubling up to 32 KiB: the usable size of a
  // small block stays within 25% (+16 B for the tiniest) of the request.
  for (size_t n = 1; n <= 32 * KiB; n = n + 1 + n / 7) {
    void *p = brisk_malloc(n);
    ASSERT_NE(p, nullptr);
    size_t u = brisk_usable_size(p);
    EXPECT_GE(u, n);
    EXPECT_LE(u, n + n / 4 + 16) << "malloc(" << n << ") usable " << u;
    brisk_free(p);
  }
}

TEST(Api, CallocIsZeroedEvenOnReusedMemory) {
  size_t count;
  const size_t *sizes = tier_sizes(&count);
  for (size_t i = 0; i < count; ++i) {
    size_t n = sizes[i];
    // Dirty some blocks of this size, free them, then calloc the same size:
    // whatever block comes back must read as zero.
    void *dirty[4];
    for (auto &d : dirty) {
      d = brisk_malloc(n);
      ASSERT_NE(d, nullptr);
      std::memset(d, 0xA5, n);
    }
    for (auto &d : dirty) brisk_free(d);
    void *z[4];
    for (auto &p : z) {
      p = brisk_calloc(1, n);
      ASSERT_NE(p, nullptr);
      EXPECT_TRUE(all_zero(p, n)) << "calloc(1, " << n << ") not zeroed";
      std::memset(p, 0x5A, n);
    }
    for (auto &p : z) brisk_free(p);
    void *q = brisk_calloc(n, 1);
    ASSERT_NE(q, nullptr);
    EXPECT_TRUE(all_zero(q, n)) << "calloc(" << n << ", 1) not zeroed";
    brisk_free(q);
  }
}

TEST(Api, FreeNullAndFreeSizedNull) {
  brisk_free(nullptr);
  brisk_free_sized(nullptr, 0);
  brisk_free_sized(nullptr, 100);
  SUCCEED();
}

TEST(Api, FreeKeepsErrno) {
  // POSIX.1-2024: free() does not change errno.
  size_t count;
  const size_t *sizes = tier_sizes(&count);
  for (size_t i = 0; i < count; ++i) {
    void *p = brisk_malloc(sizes[i]);
    ASSERT_NE(p, nullptr);
    errno = EBADF;
    brisk_free(p);
    EXPECT_EQ(errno, EBADF) << "free of a " << sizes[i] << " B block changed errno";
  }
}

TEST(Api, FreeSizedAcrossTiers) {
  size_t count;
  const size_t *sizes = tier_sizes(&count);
  for (int round = 0; round < 3; ++round) {
    std::vector<std::pair<void *, size_t>> blocks;
    for (size_t i = 0; i < count; ++i) {
      size_t n = sizes[i];
      void *p = brisk_malloc(n);
      ASSERT_NE(p, nullptr);
      fill(p, n, n * 3 + round);
      blocks.push_back({p, n});
    }
    for (auto &b : blocks) {
      ASSERT_TRUE(check(b.first, b.second, b.second * 3 + round));
      size_t u = brisk_usable_size(b.first);
      // Any size between the request and the usable size is allowed.
      size_t pass = round == 0 ? b.second : round == 1 ? u : b.second + (u - b.second) / 2;
      brisk_free_sized(b.first, pass);
    }
  }
  // Blocks from calloc and the aligned functions too.
  void *c = brisk_calloc(10, 100);
  void *a = brisk_aligned_alloc(4096, 5000);
  void *m = brisk_memalign(64, 70000);
  ASSERT_TRUE(c && a && m);
  brisk_free_sized(c, 1000);
  brisk_free_sized(a, 5000);
  brisk_free_sized(m, 70000);
}

TEST(Api, OwnsOwnPointersOnly) {
  EXPECT_FALSE(brisk_owns(nullptr));
  int local = 7;
  char stack_buf[512];
  stack_buf[0] = 0;
  EXPECT_FALSE(brisk_owns(&local));
  EXPECT_FALSE(brisk_owns(stack_buf));
  EXPECT_FALSE(brisk_owns(stack_buf + 256));
  EXPECT_FALSE(brisk_owns(&g_static_int));
  EXPECT_FALSE(brisk_owns(g_static_buf));
  EXPECT_FALSE(brisk_owns("a string literal"));
  EXPECT_FALSE(brisk_owns(reinterpret_cast<const void *>(&brisk_malloc)));
  EXPECT_FALSE(brisk_owns(reinterpret_cast<const void *>(static_cast<uintptr_t>(16))));
  EXPECT_FALSE(brisk_owns(reinterpret_cast<const void *>(~static_cast<uintptr_t>(15))));
  EXPECT_EQ(brisk_usable_size(&local), 0u);
  EXPECT_EQ(brisk_usable_size(g_static_buf), 0u);

  size_t count;
  const size_t *sizes = tier_sizes(&count);
  for (size_t i = 0; i < count; ++i) {
    size_t n = sizes[i];
    char *p = static_cast<char *>(brisk_malloc(n));
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(brisk_owns(p)) << n;
    EXPECT_TRUE(brisk_owns(p + n / 2)) << "interior pointer, size " << n;
    brisk_free(p);
  }
  void *z = brisk_malloc(0);
  EXPECT_TRUE(brisk_owns(z));
  brisk_free(z);
}

TEST(Api, ForeignHeapPointerIsNotOwned) {
  LibcMalloc libc;
  if (!libc.malloc_fn || !libc.free_fn) GTEST_SKIP() << "libc.so.6 malloc not found";
  void *p = libc.malloc_fn(1000);
  ASSERT_NE(p, nullptr);
  void *q = libc.malloc_fn(1 << 20);
  ASSERT_NE(q, nullptr);
  EXPECT_FALSE(brisk_owns(p));
  EXPECT_FALSE(brisk_owns(q));
  EXPECT_EQ(brisk_usable_size(p), 0u);
  EXPECT_EQ(brisk_usable_size(q), 0u);
  libc.free_fn(p);
  libc.free_fn(q);
}

TEST(Api, MaxBytesCapFailsThenSucceeds) {
  const size_t old = brisk_get_max_bytes();
  brisk_set_max_bytes(123 * MiB);
  EXPECT_EQ(brisk_get_max_bytes(), 123 * MiB);
  brisk_set_max_bytes(0);
  EXPECT_EQ(brisk_get_max_bytes(), 0u);

  // A live block keeps brisk busy while the cap is set.
  void *keep = brisk_malloc(100);
  ASSERT_NE(keep, nullptr);
  const size_t cap = brisk_mapped_bytes() + 32 * MiB;
  brisk_set_max_bytes(cap);
  EXPECT_EQ(brisk_get_max_bytes(), cap);

  errno = 0;
  void *big = brisk_malloc(256 * MiB);
  EXPECT_EQ(big, nullptr) << "256 MiB allocated with a cap of " << mib(cap);
  EXPECT_EQ(errno, ENOMEM);
  if (big) brisk_free(big);

  errno = 0;
  void *big2 = brisk_calloc(64, 4 * MiB);
  EXPECT_EQ(big2, nullptr);
  EXPECT_EQ(errno, ENOMEM);
  if (big2) brisk_free(big2);

  void *al = reinterpret_cast<void *>(0x1);
  int rc = brisk_posix_memalign(&al, 4096, 128 * MiB);
  EXPECT_EQ(rc, ENOMEM);
  if (rc == 0) brisk_free(al);

  // realloc past the cap fails and keeps the block.
  void *r = brisk_malloc(64 * KiB);
  ASSERT_NE(r, nullptr);
  fill(r, 64 * KiB, 99);
  errno = 0;
  void *r2 = brisk_realloc(r, 200 * MiB);
  EXPECT_EQ(r2, nullptr);
  EXPECT_EQ(errno, ENOMEM);
  if (r2) {
    r = r2;
  } else {
    EXPECT_TRUE(check(r, 64 * KiB, 99));
  }

  // Small allocations within the cap still work.
  std::vector<void *> small;
  for (int i = 0; i < 1000; ++i) {
    void *p = brisk_malloc(64);
    ASSERT_NE(p, nullptr) << "small allocation failed under a cap with room left";
    small.push_back(p);
  }
  for (void *p : small) brisk_free(p);

  brisk_set_max_bytes(0);
  EXPECT_EQ(brisk_get_max_bytes(), 0u);
  big = brisk_malloc(256 * MiB);
  ASSERT_NE(big, nullptr) << "256 MiB still refused after the cap was lifted";
  std::memset(big, 1, 256 * MiB);
  brisk_free(big);
  brisk_free(r);
  brisk_free(keep);
  brisk_set_max_bytes(old);
  EXPECT_EQ(brisk_get_max_bytes(), old);
}

TEST(Api, CollectReducesMappedBytes) {
  brisk_collect();
  const size_t base = brisk_mapped_bytes();
  size_t total = 0;
  Rng rng(5);
  std::vector<void *> blocks = written_blocks(rng, 192 * MiB, 256 * KiB, 6 * MiB, 0x33, &total);
  const size_t peak = brisk_mapped_bytes();
  EXPECT_GE(peak, base + total * 9 / 10) << "mapped bytes did not count " << mib(total) << " of live blocks";
  for (void *p : blocks) brisk_free(p);
  const size_t after_free = brisk_mapped_bytes();
  brisk_collect();
  const size_t after_collect = brisk_mapped_bytes();
  std::printf("mapped: base %s, peak %s, after free %s, after collect %s\n", mib(base).c_str(), mib(peak).c_str(),
              mib(after_free).c_str(), mib(after_collect).c_str());
  EXPECT_LE(after_collect, after_free);
  // Most of what the burst mapped is gone (a little may stay, e.g. one
  // current page per size class).
  EXPECT_LE(after_collect, base + (peak - base) / 4)
      << "brisk_collect left " << mib(after_collect - base) << " of the burst's " << mib(peak - base) << " mapped";
}

TEST(Api, MappedBytesIsPlausible) {
  void *p = brisk_malloc(16);
  ASSERT_NE(p, nullptr);
  size_t m = brisk_mapped_bytes();
  EXPECT_GT(m, 0u);
  EXPECT_LT(m, static_cast<size_t>(64) << 30);
  brisk_free(p);
}
