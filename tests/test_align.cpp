// aligned_alloc, posix_memalign and memalign: alignments 1 B .. 4 MiB at many
// sizes, and the EINVAL rules. calloc_aligned: zeroed and aligned in every
// tier (reused blocks included, in a heap too), a fresh huge block left
// unwritten, ENOMEM for count * size overflow.
#include <sys/mman.h>

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "test_util.h"

using namespace bt;

namespace {

enum class Fn { Aligned, Posix, Memalign };

const char *name(Fn f) {
  switch (f) {
  case Fn::Aligned: return "aligned_alloc";
  case Fn::Posix: return "posix_memalign";
  default: return "memalign";
  }
}

void *alloc_with(Fn f, size_t align, size_t size) {
  switch (f) {
  case Fn::Aligned: return brisk_aligned_alloc(align, size);
  case Fn::Memalign: return brisk_memalign(align, size);
  default: {
    void *p = nullptr;
    int rc = brisk_posix_memalign(&p, align, size);
    return rc == 0 ? p : nullptr;
  }
  }
}

const size_t kSizes[] = {1,     7,     8,      16,     24,      100,         1000,        4095,   4096,
                         10000, 65536, 100000, 300000, 1 * MiB, 1 * MiB + 1, 3 * MiB + 7, 5 * MiB};

void run_alignment_sweep(Fn f) {
  for (size_t align = 1; align <= 4 * MiB; align *= 2) {
    if (f == Fn::Posix && align < sizeof(void *)) continue;  // EINVAL by definition
    std::vector<std::pair<void *, size_t>> live;
    for (size_t size : kSizes) {
      if (BRISK_TEST_SANITIZED && size > 1 * MiB && align > 64 * KiB) continue;
      void *p = alloc_with(f, align, size);
      ASSERT_NE(p, nullptr) << name(f) << "(" << align << ", " << size << ")";
      EXPECT_TRUE(aligned_to(p, align)) << name(f) << "(" << align << ", " << size << ") = " << p;
      if (size >= 16) {
        EXPECT_TRUE(aligned_to(p, 16));
      }
      EXPECT_GE(brisk_usable_size(p), size) << name(f) << "(" << align << ", " << size << ")";
      EXPECT_TRUE(brisk_owns(p));
      fill(p, size, align * 1000003 + size);
      live.push_back({p, size});
    }
    // All blocks of this alignment are live together: none overlaps another.
    for (auto &b : live)
      EXPECT_TRUE(check(b.first, b.second, align * 1000003 + b.second))
          << name(f) << "(" << align << ", " << b.second << ") was overwritten";
    for (auto &b : live) brisk_free(b.first);
  }
}

}  // namespace

TEST(Align, AlignedAllocSweep) { run_alignment_sweep(Fn::Aligned); }
TEST(Align, PosixMemalignSweep) { run_alignment_sweep(Fn::Posix); }
TEST(Align, MemalignSweep) { run_alignment_sweep(Fn::Memalign); }

TEST(Align, ManySmallAlignedBlocksAtOnce) {
  // Many live blocks per alignment, so aligned blocks are carved from the same
  // pages as each other: each one aligned and intact.
  for (size_t align = 16; align <= 64 * KiB; align *= 4) {
    std::vector<void *> v;
    for (int i = 0; i < 300; ++i) {
      size_t size = 1 + static_cast<size_t>(i) * 37 % 3000;
      void *p = brisk_aligned_alloc(align, size);
      ASSERT_NE(p, nullptr);
      ASSERT_TRUE(aligned_to(p, align)) << align << " " << p;
      fill(p, size, i + align);
      v.push_back(p);
    }
    for (int i = 0; i < 300; ++i) {
      size_t size = 1 + static_cast<size_t>(i) * 37 % 3000;
      EXPECT_TRUE(check(v[i], size, i + align)) << "align " << align << " block " << i;
      brisk_free(v[i]);
    }
  }
}

// A block carved for an aligned request starts inside a block of its page's
// class: its free must not put that inner address on the class's hot stack,
// or a malloc of the class would hand out a block that runs into the next
// (the release library's free tells such a page by a byte of the segment
// header for each 64 KiB, which page_flags_set sets in all the 64 KiBs of
// the page when it gets aligned blocks: one for a small page, 8 for a
// medium one, 64 for a large one).
TEST(Align, FreedCarvedBlocksNeverComeBackAsBlocksOfTheirClass) {
  const struct {
    size_t align, size;
    int count;
  } cases[] = {{256, 100, 200}, {16384, 20000, 60}, {262144, 100000, 12}};
  for (const auto &c : cases) {
    std::thread([c] {
      const size_t whole = c.size + c.align - 1;
      std::vector<void *> carved;
      size_t inside = 0;  // blocks that start inside a block of their page
      for (int i = 0; i < c.count; ++i) {
        void *p = brisk_aligned_alloc(c.align, c.size);
        ASSERT_NE(p, nullptr);
        carved.push_back(p);
        inside += brisk_usable_size(p) < whole;
      }
      if (!BRISK_TEST_CHECKED) {
        EXPECT_GT(inside, 0u) << "align " << c.align << ": no block was carved";
      }
      for (void *p : carved) brisk_free(p);
      std::vector<void *> v;
      for (int i = 0; i < 3 * c.count; ++i) {
        void *p = brisk_malloc(whole);
        ASSERT_NE(p, nullptr);
        fill(p, whole, i);
        v.push_back(p);
      }
      for (int i = 0; i < 3 * c.count; ++i) {
        EXPECT_TRUE(check(v[i], whole, i)) << "block " << i << " of " << whole << " B overlaps another";
        brisk_free(v[i]);
      }
    }).join();
  }
}

// A size whose class is a multiple of the alignment (aligned_alloc(64, 128),
// C++'s new of an alignas(64) type) takes a block of that class, as malloc
// does: such blocks were carved from blocks of size + align - 1 (192 B for
// 128, 1.5x the memory) whenever the class had no page at hand.
TEST(Align, AlignedSizesOfAnAlignedClassTakeThatClass) {
  if (BRISK_TEST_CHECKED) GTEST_SKIP() << "the checked library's blocks carry a canary past the size";
  const struct {
    size_t align, size;
  } cases[] = {{32, 32}, {32, 96}, {64, 64}, {64, 128}, {64, 192}, {128, 256}, {128, 384}};
  for (const auto &c : cases) {
    std::vector<void *> v;
    size_t exact = 0;
    for (int i = 0; i < 100; ++i) {
      void *p = brisk_aligned_alloc(c.align, c.size);
      ASSERT_NE(p, nullptr);
      ASSERT_TRUE(aligned_to(p, c.align)) << c.align << " " << p;
      exact += brisk_usable_size(p) == c.size;
      fill(p, c.size, i);
      v.push_back(p);
    }
    // (A segment's first page may start off a larger alignment: a block or
    // two there is carved instead.)
    EXPECT_GE(exact, 95u) << "aligned_alloc(" << c.align << ", " << c.size
                          << "): blocks bigger than the size's class";
    for (int i = 0; i < 100; ++i) {
      EXPECT_TRUE(check(v[i], c.size, i));
      brisk_free(v[i]);
    }
  }
}

TEST(Align, ZeroSizeAligned) {
  // size 0 may give NULL or a unique pointer; either way nothing breaks.
  for (size_t align = 8; align <= 1 * MiB; align *= 8) {
    void *a = brisk_aligned_alloc(align, 0);
    if (a) {
      EXPECT_TRUE(aligned_to(a, align));
      brisk_free(a);
    }
    void *p = nullptr;
    int rc = brisk_posix_memalign(&p, align, 0);  // POSIX lets size 0 fail
    if (rc == 0 && p) {
      EXPECT_TRUE(aligned_to(p, align));
      brisk_free(p);
    }
    void *m = brisk_memalign(align, 0);
    if (m) {
      EXPECT_TRUE(aligned_to(m, align));
      brisk_free(m);
    }
  }
}

TEST(Align, AlignedAllocBadAlignmentIsEinval) {
  const size_t bad[] = {0, 3, 5, 6, 7, 12, 24, 48, 100, 3 * 4096, 4096 + 16, SIZE_MAX, (SIZE_MAX >> 1) + 2};
  for (size_t a : bad) {
    errno = 0;
    void *p = brisk_aligned_alloc(a, 64);
    EXPECT_EQ(p, nullptr) << "aligned_alloc(" << a << ", 64)";
    EXPECT_EQ(errno, EINVAL) << "aligned_alloc(" << a << ", 64)";
    if (p) brisk_free(p);
  }
}

TEST(Align, PosixMemalignBadAlignmentIsEinval) {
  // Not a power of two, or not a multiple of sizeof(void*): EINVAL is
  // returned, errno is not set, and *out is left alone (or set to NULL).
  const size_t bad[] = {0, 1, 2, 4, 3, 12, 24, 40, 48, 96, 3 * 4096, SIZE_MAX};
  int sentinel;
  for (size_t a : bad) {
    if (a == sizeof(void *)) continue;
    void *out = &sentinel;
    errno = EBADF;
    int rc = brisk_posix_memalign(&out, a, 64);
    EXPECT_EQ(rc, EINVAL) << "posix_memalign(" << a << ")";
    EXPECT_TRUE(out == &sentinel || out == nullptr) << "posix_memalign(" << a << ") wrote *out";
    EXPECT_EQ(errno, EBADF) << "posix_memalign(" << a << ") changed errno";
    if (rc == 0 && out != &sentinel) brisk_free(out);
  }
}

TEST(Align, PosixMemalignOutOfMemoryIsEnomem) {
  int sentinel;
  void *out = &sentinel;
  int rc = brisk_posix_memalign(&out, 64, SIZE_MAX - 4096);
  EXPECT_EQ(rc, ENOMEM);
  EXPECT_TRUE(out == &sentinel || out == nullptr);
  out = &sentinel;
  rc = brisk_posix_memalign(&out, 4096, static_cast<size_t>(1) << 50);
  EXPECT_EQ(rc, ENOMEM);
  EXPECT_TRUE(out == &sentinel || out == nullptr);
}

TEST(Align, AlignedOverflowIsEnomem) {
  // size + alignment would overflow.
  const size_t aligns[] = {16, 4096, 2 * MiB};
  for (size_t a : aligns) {
    errno = 0;
    void *p = brisk_aligned_alloc(a, SIZE_MAX - a / 2);
    EXPECT_EQ(p, nullptr);
    EXPECT_EQ(errno, ENOMEM) << "aligned_alloc(" << a << ", SIZE_MAX - " << a / 2 << ")";
    errno = 0;
    p = brisk_memalign(a, SIZE_MAX - 1);
    EXPECT_EQ(p, nullptr);
    EXPECT_EQ(errno, ENOMEM) << "memalign(" << a << ", SIZE_MAX - 1)";
  }
}

TEST(Align, MemalignOddAlignmentIsSafe) {
  // memalign is not held to the power-of-two rule by the header: it may fail
  // with EINVAL or round the alignment up (glibc rounds up). Either way the
  // result, if any, is usable and at least as aligned as asked, rounded up.
  const size_t odd[] = {3, 24, 48, 100, 3 * 4096};
  for (size_t a : odd) {
    errno = 0;
    void *p = brisk_memalign(a, 100);
    if (!p) {
      EXPECT_EQ(errno, EINVAL) << "memalign(" << a << ")";
      continue;
    }
    size_t pow2 = 1;
    while (pow2 < a) pow2 *= 2;
    EXPECT_TRUE(aligned_to(p, pow2)) << "memalign(" << a << ") = " << p;
    std::memset(p, 1, 100);
    brisk_free(p);
  }
}

TEST(Align, ReallocOfAlignedBlocksKeepsContents) {
  const size_t aligns[] = {64, 4096, 64 * KiB, 2 * MiB};
  const size_t targets[] = {10, 5000, 300000, 3 * MiB};
  for (size_t a : aligns)
    for (size_t t : targets) {
      size_t n = 2000;
      void *p = brisk_aligned_alloc(a, n);
      ASSERT_NE(p, nullptr);
      fill(p, n, a + t);
      void *q = brisk_realloc(p, t);
      ASSERT_NE(q, nullptr);
      EXPECT_TRUE(check(q, n < t ? n : t, a + t)) << "align " << a << " -> " << t;
      brisk_free(q);
    }
}

// ---- brisk_calloc_aligned --------------------------------------------------------

TEST(CallocAligned, ZeroedAlignedEveryTierEvenReusedBlocks) {
  // Each round dirties its blocks before freeing them, so the next round's
  // blocks (the same sizes and alignments) are reused memory that held data.
  const size_t sizes[] = {1, 16, 100, 1000, 5000, 40000, 300000, 1 * MiB, 2 * MiB + 3, 9 * MiB};
  for (size_t align = 16; align <= 8 * MiB; align *= 8) {
    for (int round = 0; round < 3; ++round) {
      std::vector<std::pair<unsigned char *, size_t>> dirty;
      for (size_t n : sizes) {
        if (BRISK_TEST_SANITIZED && n > 1 * MiB && align > 64 * KiB) continue;
        auto *p = static_cast<unsigned char *>(brisk_calloc_aligned(1, n, align));
        ASSERT_NE(p, nullptr) << "calloc_aligned(1, " << n << ", " << align << ")";
        EXPECT_TRUE(aligned_to(p, align)) << "calloc_aligned(1, " << n << ", " << align << ") = " << (void *)p;
        EXPECT_GE(brisk_usable_size(p), n);
        EXPECT_TRUE(all_zero(p, n)) << "calloc_aligned(1, " << n << ", " << align << "), round " << round;
        std::memset(p, 0xA5, n);
        dirty.emplace_back(p, n);
      }
      for (auto &d : dirty) brisk_free(d.first);
    }
  }
}

TEST(CallocAligned, CountTimesSize) {
  auto *p = static_cast<unsigned char *>(brisk_calloc_aligned(300, 7, 256));
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(aligned_to(p, 256));
  EXPECT_GE(brisk_usable_size(p), 2100u);
  EXPECT_TRUE(all_zero(p, 2100));
  brisk_free(p);
  for (size_t align : {size_t{64}, size_t{4096}}) {  // 0 bytes: a block to free
    void *z = brisk_calloc_aligned(0, 100, align);
    ASSERT_NE(z, nullptr);
    EXPECT_TRUE(aligned_to(z, align));
    brisk_free(z);
  }
}

TEST(CallocAligned, OverflowIsEnomem) {
  const size_t aligns[] = {16, 64, 4096, 8 * MiB};
  const struct {
    size_t count, size;
  } overflow[] = {
      {SIZE_MAX, 2}, {SIZE_MAX / 2 + 1, 2}, {static_cast<size_t>(1) << 33, static_cast<size_t>(1) << 33}};
  for (size_t a : aligns)
    for (auto o : overflow) {
      errno = 0;
      void *p = brisk_calloc_aligned(o.count, o.size, a);
      EXPECT_EQ(p, nullptr) << "calloc_aligned(" << o.count << ", " << o.size << ", " << a << ")";
      EXPECT_EQ(errno, ENOMEM);
      if (p) brisk_free(p);
    }
}

TEST(CallocAligned, BadAlignmentIsEinval) {
  for (size_t a : {size_t{0}, size_t{3}, size_t{24}, size_t{100}, size_t{4096 + 16}, SIZE_MAX}) {
    errno = 0;
    void *p = brisk_calloc_aligned(4, 16, a);
    EXPECT_EQ(p, nullptr) << "alignment " << a;
    EXPECT_EQ(errno, EINVAL) << "alignment " << a;
    if (p) brisk_free(p);
  }
}

TEST(CallocAligned, FreshHugeBlockIsNotWritten) {
  // The kernel gives a fresh mapping zeroed: calloc_aligned, like calloc,
  // leaves its pages untouched (not resident) rather than clearing them.
  if (BRISK_TEST_CHECKED && BRISK_TEST_VALGRIND) GTEST_SKIP() << "built for memcheck: every calloc is written";
  brisk_collect();  // no cached block to reuse: a fresh mapping
  const size_t n = 64 * MiB, page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  for (size_t align : {size_t{64}, 64 * KiB, 2 * MiB, 8 * MiB}) {
    auto *p = static_cast<unsigned char *>(brisk_calloc_aligned(1, n, align));
    ASSERT_NE(p, nullptr);
    ASSERT_TRUE(aligned_to(p, align));
    auto *start = reinterpret_cast<unsigned char *>(reinterpret_cast<uintptr_t>(p) & ~(page - 1));
    std::vector<unsigned char> resident((n + page) / page + 1);
    ASSERT_EQ(mincore(start, static_cast<size_t>(p + n - start), resident.data()), 0);
    size_t touched = 0;
    for (size_t i = 0; i < (static_cast<size_t>(p + n - start) + page - 1) / page; ++i) touched += resident[i] & 1;
    EXPECT_LT(touched * page, n / 16) << "calloc_aligned(1, 64 MiB, " << align << ") wrote its fresh pages";
    EXPECT_EQ(p[0], 0);
    EXPECT_EQ(p[n / 2], 0);
    EXPECT_EQ(p[n - 1], 0);
    brisk_free(p);
    brisk_collect();
  }
}

TEST(CallocAligned, InAHeapZeroesEvenRecycledMemory) {
  brisk_heap_t *heap = brisk_heap_new();
  ASSERT_NE(heap, nullptr);
  const size_t sizes[] = {1, 100, 5000, 40000, 300000, 2 * MiB + 3};
  for (size_t align : {size_t{32}, size_t{4096}, 1 * MiB})
    for (int round = 0; round < 3; ++round) {
      std::vector<std::pair<unsigned char *, size_t>> dirty;
      for (size_t n : sizes) {
        auto *p = static_cast<unsigned char *>(brisk_heap_calloc_aligned(heap, 1, n, align));
        ASSERT_NE(p, nullptr) << n;
        EXPECT_TRUE(aligned_to(p, align)) << "heap_calloc_aligned(1, " << n << ", " << align << ")";
        EXPECT_TRUE(all_zero(p, n)) << "heap_calloc_aligned(1, " << n << ", " << align << ") round " << round;
        std::memset(p, 0xA5, n);
        dirty.emplace_back(p, n);
      }
      for (auto &d : dirty) brisk_free(d.first);
    }
  errno = 0;
  EXPECT_EQ(brisk_heap_calloc_aligned(heap, SIZE_MAX / 2, 3, 64), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  errno = 0;
  EXPECT_EQ(brisk_heap_calloc_aligned(heap, 2, 3, 96), nullptr);
  EXPECT_EQ(errno, EINVAL);
  brisk_heap_destroy(heap);
}
