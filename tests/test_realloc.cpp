// realloc keeps contents across every tier transition (small, medium, large,
// huge with its mremap path, and back), and a failed realloc leaves the old
// block intact. realloc_aligned the same at every alignment (16 B - 32 MiB),
// in place where it promises, in a heap too, and its EINVAL and ENOMEM.
#include <gtest/gtest.h>

#include <vector>

#include "test_util.h"

using namespace bt;

namespace {

// Sizes that sit in different tiers (the exact boundaries are brisk's
// business; these straddle every plausible one).
const size_t kTierSizes[] = {1,     24,     500,    3000,           20000,   32 * KiB,
                             40000, 200000, 900000, 1 * MiB + 4096, 3 * MiB, 20 * MiB + 5};

// Reallocate p (holding `have` bytes of pattern `seed`) to n bytes, check the
// kept prefix and fill the rest.
void *step(void *p, size_t have, size_t n, uint64_t seed) {
  void *q = brisk_realloc(p, n);
  EXPECT_NE(q, nullptr) << "realloc(" << have << " -> " << n << ")";
  if (!q) return p;
  EXPECT_GE(brisk_usable_size(q), n);
  size_t keep = have < n ? have : n;
  size_t bad = first_mismatch(q, keep, seed);
  EXPECT_EQ(bad, SIZE_MAX) << "realloc " << have << " -> " << n << " lost byte " << bad;
  if (n > have) fill(q, n, seed, have);
  return q;
}

}  // namespace

TEST(Realloc, NullIsMalloc) {
  void *p = brisk_realloc(nullptr, 100);
  ASSERT_NE(p, nullptr);
  EXPECT_GE(brisk_usable_size(p), 100u);
  brisk_free(p);
}

TEST(Realloc, EveryTierPair) {
  const size_t n = sizeof kTierSizes / sizeof kTierSizes[0];
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j) {
      size_t a = kTierSizes[i], b = kTierSizes[j];
      uint64_t seed = i * 131 + j;
      void *p = brisk_malloc(a);
      ASSERT_NE(p, nullptr);
      fill(p, a, seed);
      p = step(p, a, b, seed);
      // and straight back
      p = step(p, b, a, seed);
      brisk_free(p);
    }
}

TEST(Realloc, LadderUpAndDown) {
  const size_t up[] = {1,         16,        100,     1000,    8 * KiB, 32 * KiB,
                       100 * KiB, 600 * KiB, 1 * MiB, 2 * MiB, 8 * MiB, 64 * MiB};
  const size_t down[] = {8 * MiB, 1536 * KiB, 700 * KiB, 64 * KiB, 20 * KiB, 3000, 200, 24, 1};
  for (int round = 0; round < 3; ++round) {
    uint64_t seed = 1000 + round;
    size_t have = up[0];
    void *p = brisk_malloc(have);
    ASSERT_NE(p, nullptr);
    fill(p, have, seed);
    for (size_t n : up) {
      p = step(p, have, n, seed);
      have = n;
    }
    for (size_t n : down) {
      p = step(p, have, n, seed);
      have = n;
    }
    // and up again from the bottom straight to huge
    p = step(p, have, 5 * MiB, seed);
    brisk_free(p);
  }
}

TEST(Realloc, ByteByByteGrowthAndShrink) {
  uint64_t seed = 4242;
  size_t have = 1;
  void *p = brisk_malloc(have);
  ASSERT_NE(p, nullptr);
  fill(p, have, seed);
  for (size_t n = 2; n <= 6000; ++n) {
    void *q = brisk_realloc(p, n);
    ASSERT_NE(q, nullptr);
    p = q;
    fill(p, n, seed, have);
    have = n;
    if (n % 251 == 0) {
      ASSERT_TRUE(check(p, n, seed)) << "at " << n;
    }
  }
  for (size_t n = have; n >= 1; n = n * 15 / 16) {
    void *q = brisk_realloc(p, n);
    ASSERT_NE(q, nullptr);
    p = q;
    ASSERT_TRUE(check(p, n, seed)) << "shrink to " << n;
    have = n;
    if (n == 1) break;
  }
  brisk_free(p);
}

TEST(Realloc, HugeGrowthThroughMremap) {
  // Huge blocks grown step by step (brisk grows these in place with mremap):
  // every byte written before must be there after each move.
  const size_t top = BRISK_TEST_SANITIZED ? 64 * MiB : 400 * MiB;
  uint64_t seed = 777;
  size_t have = 2 * MiB;
  void *p = brisk_malloc(have);
  ASSERT_NE(p, nullptr);
  fill(p, have, seed);
  // An unrelated huge block allocated in between, so the growing block has
  // a neighbour and must sometimes move.
  void *neighbour = brisk_malloc(4 * MiB);
  ASSERT_NE(neighbour, nullptr);
  fill(neighbour, 4 * MiB, 99);
  for (size_t n = 3 * MiB; n <= top; n = n * 2 + 12345) {
    p = step(p, have, n, seed);
    have = n;
  }
  EXPECT_TRUE(check(p, have, seed));
  EXPECT_TRUE(check(neighbour, 4 * MiB, 99)) << "growing a huge block damaged its neighbour";
  // Shrink a huge block in place and grow it back.
  p = step(p, have, have / 3, seed);
  have /= 3;
  p = step(p, have, have + 5 * MiB, seed);
  have += 5 * MiB;
  EXPECT_TRUE(check(p, have, seed));
  brisk_free(p);
  brisk_free(neighbour);
}

TEST(Realloc, SameSizeKeepsContents) {
  size_t count;
  const size_t *sizes = tier_sizes(&count);
  for (size_t i = 0; i < count; ++i) {
    size_t n = sizes[i];
    void *p = brisk_malloc(n);
    ASSERT_NE(p, nullptr);
    fill(p, n, n);
    void *q = brisk_realloc(p, n);
    ASSERT_NE(q, nullptr);
    EXPECT_TRUE(check(q, n, n));
    size_t u = brisk_usable_size(q);
    void *r = brisk_realloc(q, u);  // growing into the slack
    ASSERT_NE(r, nullptr);
    EXPECT_TRUE(check(r, n, n));
    brisk_free(r);
  }
}

TEST(Realloc, FailureLeavesOldBlockIntact) {
  const size_t impossible[] = {SIZE_MAX, SIZE_MAX - 4096, SIZE_MAX / 2, static_cast<size_t>(PTRDIFF_MAX) + 1,
                               static_cast<size_t>(1) << 50};  // 1 PiB
  const size_t olds[] = {10, 3000, 100000, 2 * MiB, 40 * MiB};
  for (size_t old : olds) {
    void *p = brisk_malloc(old);
    ASSERT_NE(p, nullptr);
    fill(p, old, old + 1);
    for (size_t n : impossible) {
      errno = 0;
      void *q = brisk_realloc(p, n);
      EXPECT_EQ(q, nullptr) << "realloc(" << old << " -> " << n << ")";
      EXPECT_EQ(errno, ENOMEM) << "realloc(" << old << " -> " << n << ")";
      if (q) {  // should not happen; keep the test sane
        p = q;
        break;
      }
      ASSERT_TRUE(check(p, old, old + 1)) << "failed realloc damaged a " << old << " B block";
      EXPECT_TRUE(brisk_owns(p));
      EXPECT_GE(brisk_usable_size(p), old);
    }
    // The block still works: grows and is freed normally.
    void *q = brisk_realloc(p, old * 2);
    ASSERT_NE(q, nullptr);
    EXPECT_TRUE(check(q, old, old + 1));
    brisk_free(q);
  }
}

TEST(Realloc, ManyLiveBlocksInterleaved) {
  // Several blocks grown and shrunk in turns, so in-place growth has to
  // respect the neighbours.
  Rng rng(31337);
  struct B {
    void *p;
    size_t n;
    uint64_t seed;
  };
  std::vector<B> bs;
  for (int i = 0; i < 64; ++i) {
    size_t n = rng.range(1, 2000);
    void *p = brisk_malloc(n);
    ASSERT_NE(p, nullptr);
    fill(p, n, i);
    bs.push_back({p, n, static_cast<uint64_t>(i)});
  }
  const size_t iters = scaled(4000, 200);
  for (size_t it = 0; it < iters; ++it) {
    B &b = bs[rng.below(bs.size())];
    size_t n = random_size(rng, 3 * MiB);
    void *q = brisk_realloc(b.p, n);
    ASSERT_NE(q, nullptr);
    size_t keep = b.n < n ? b.n : n;
    ASSERT_EQ(first_mismatch(q, keep, b.seed), SIZE_MAX) << b.n << " -> " << n;
    if (n > b.n) fill(q, n, b.seed, b.n);
    b.p = q;
    b.n = n;
  }
  for (auto &b : bs) {
    EXPECT_TRUE(check(b.p, b.n, b.seed));
    brisk_free(b.p);
  }
}

// ---- brisk_realloc_aligned -----------------------------------------------------

namespace {

// Alignments from 16 B to past a segment (4 MiB): page blocks, blocks carved
// at an alignment, huge blocks, and huge blocks skewed in their mapping.
const size_t kAligns[] = {16, 32, 64, 256, 4096, 64 * KiB, 1 * MiB, 4 * MiB, 16 * MiB};

// realloc_aligned of p (`have` bytes of pattern `seed`) to n bytes at align:
// aligned, the prefix kept, the rest filled.
void *step_aligned(void *p, size_t have, size_t align, size_t n, uint64_t seed) {
  void *q = brisk_realloc_aligned(p, align, n);
  EXPECT_NE(q, nullptr) << "realloc_aligned(" << have << " -> " << n << ", align " << align << ")";
  if (!q) return p;
  EXPECT_TRUE(aligned_to(q, align)) << "realloc_aligned(" << have << " -> " << n << ", align " << align
                                    << ") = " << q;
  EXPECT_GE(brisk_usable_size(q), n);
  size_t keep = have < n ? have : n;
  size_t bad = first_mismatch(q, keep, seed);
  EXPECT_EQ(bad, SIZE_MAX) << "realloc_aligned " << have << " -> " << n << " (align " << align << ") lost byte "
                           << bad;
  if (n > have) fill(q, n, seed, have);
  return q;
}

// Whether the sanitizers' slower runs skip this combination (a few huge
// blocks at huge alignments are enough there).
bool too_slow_here(size_t align, size_t n) { return BRISK_TEST_SANITIZED && align > 64 * KiB && n > 3 * MiB; }

}  // namespace

TEST(ReallocAligned, EveryTierUpAndDownAtEveryAlignment) {
  const size_t n = sizeof kTierSizes / sizeof kTierSizes[0];
  for (size_t align : kAligns) {
    uint64_t seed = align * 7 + 1;
    size_t have = kTierSizes[0];
    void *p = brisk_aligned_alloc(align, have);
    ASSERT_NE(p, nullptr);
    fill(p, have, seed);
    for (size_t i = 1; i < n; ++i) {  // up through every tier
      if (too_slow_here(align, kTierSizes[i])) continue;
      p = step_aligned(p, have, align, kTierSizes[i], seed);
      have = kTierSizes[i];
    }
    for (size_t i = n; i-- > 0;) {  // and down again
      if (too_slow_here(align, kTierSizes[i])) continue;
      p = step_aligned(p, have, align, kTierSizes[i], seed);
      have = kTierSizes[i];
    }
    brisk_free(p);
  }
}

TEST(ReallocAligned, EveryTierPairFromPlainBlocks) {
  // From malloc's blocks (16 B aligned) to a larger alignment and back.
  const size_t n = sizeof kTierSizes / sizeof kTierSizes[0];
  for (size_t align : {size_t{64}, size_t{4096}, 2 * MiB})
    for (size_t i = 0; i < n; ++i)
      for (size_t j = 0; j < n; ++j) {
        size_t a = kTierSizes[i], b = kTierSizes[j];
        if (too_slow_here(align, a) || too_slow_here(align, b)) continue;
        uint64_t seed = align + i * 131 + j;
        void *p = brisk_malloc(a);
        ASSERT_NE(p, nullptr);
        fill(p, a, seed);
        p = step_aligned(p, a, align, b, seed);
        p = step_aligned(p, b, 16, a, seed);  // and back to malloc's alignment
        brisk_free(p);
      }
}

TEST(ReallocAligned, StaysInPlaceWhenAlignedAndBigEnough) {
  if (BRISK_TEST_CHECKED && BRISK_TEST_VALGRIND) GTEST_SKIP() << "built for memcheck: every realloc moves";
  size_t count;
  const size_t *sizes = tier_sizes(&count);
  // Not asked: tiny blocks (brisk_realloc too moves a block to its own size
  // when the usable size is more than twice that), and a huge block shrunk
  // to a page block's size (it moves to a page when most of its mapping,
  // which may be a cached bigger one, would be left unused).
  for (size_t align : kAligns)
    for (size_t i = 0; i < count; ++i) {
      size_t n = sizes[i];
      if (n < 100 || too_slow_here(align, n)) continue;
      void *p = brisk_aligned_alloc(align, n);
      ASSERT_NE(p, nullptr);
      fill(p, n, n + align);
      auto stays = [&](size_t a, size_t size) {
        void *q = brisk_realloc_aligned(p, a, size);
        EXPECT_EQ(q, p) << "realloc_aligned(align " << a << ", " << n << " -> " << size << ") moved the block";
        if (q) p = q;
      };
      // The same size, a little less, and all of the usable size: in place.
      stays(align, n);
      size_t less = n >= 1024 ? n - n / 8 : n;
      if (n >= 1 * MiB && less <= 1 * MiB) less = n;  // 1 MiB is huge in the checked library
      stays(align, less);
      size_t usable = brisk_usable_size(p);
      stays(align, usable);
      EXPECT_TRUE(check(p, less, n + align));
      // A smaller alignment that p has anyway, the same size: in place too.
      stays(align / 2, usable);
      brisk_free(p);
    }
}

// A block resized to its usable size with an alignment it has stays where
// it is, in every library. The checked library's usable size is the size
// asked, and it moved a block of 4608 bytes that held 128 aligned to 4096
// when asked for the same 128 aligned to 2048 (more than twice what that
// needs: the test above found it when a class of 4608 bytes came in).
TEST(ReallocAligned, ABlockResizedToItsUsableSizeStays) {
  if (BRISK_TEST_CHECKED && BRISK_TEST_VALGRIND) GTEST_SKIP() << "built for memcheck: every realloc moves";
  std::vector<void *> held;
  for (int i = 0; i < 64; i++) {
    void *p = brisk_aligned_alloc(4096, 128);
    ASSERT_NE(p, nullptr);
    void *q = brisk_realloc_aligned(p, 2048, brisk_usable_size(p));
    EXPECT_EQ(q, p) << "block " << i << " moved";
    held.push_back(q ? q : p);
  }
  for (void *p : held) brisk_free(p);
}

TEST(ReallocAligned, MovesABlockThatIsNotAligned) {
  for (size_t align : {size_t{64}, size_t{4096}, 64 * KiB, 8 * MiB})
    for (size_t n : {size_t{48}, size_t{3000}, size_t{100000}, 3 * MiB}) {
      // A block of malloc's that is not on the alignment (some sizes' blocks
      // all are: then there is nothing to move).
      std::vector<void *> aligned_ones;
      void *p = brisk_malloc(n);
      while (p && aligned_to(p, align) && aligned_ones.size() < 64) {
        aligned_ones.push_back(p);
        p = brisk_malloc(n);
      }
      ASSERT_NE(p, nullptr);
      if (aligned_to(p, align)) {
        aligned_ones.push_back(p);
        for (void *a : aligned_ones) brisk_free(a);
        continue;
      }
      fill(p, n, n * 3 + align);
      void *q = brisk_realloc_aligned(p, align, n);
      ASSERT_NE(q, nullptr);
      EXPECT_NE(q, p);
      EXPECT_TRUE(aligned_to(q, align)) << q;
      EXPECT_TRUE(check(q, n, n * 3 + align));
      brisk_free(q);
      for (void *a : aligned_ones) brisk_free(a);
    }
}

TEST(ReallocAligned, HugeGrowthKeepsAlignmentsAboveASegment) {
  // A huge block aligned to more than a segment may only grow where it
  // lies (a move by mremap would keep 4 MiB only); else it is copied.
  for (size_t align : {8 * MiB, 32 * MiB}) {
    uint64_t seed = align + 5;
    size_t have = 5 * MiB;
    void *p = brisk_aligned_alloc(align, have);
    ASSERT_NE(p, nullptr);
    fill(p, have, seed);
    void *neighbour = brisk_aligned_alloc(align, 5 * MiB);  // in the way, sometimes
    ASSERT_NE(neighbour, nullptr);
    for (size_t n : {6 * MiB, 13 * MiB, 40 * MiB + 7, 9 * MiB, 70 * MiB}) {
      if (BRISK_TEST_SANITIZED && n > 13 * MiB) continue;
      p = step_aligned(p, have, align, n, seed);
      have = n;
    }
    brisk_free(neighbour);
    brisk_free(p);
  }
}

TEST(ReallocAligned, NullIsAlignedAlloc) {
  for (size_t align : {size_t{16}, size_t{512}, 2 * MiB}) {
    void *p = brisk_realloc_aligned(nullptr, align, 1000);
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(aligned_to(p, align));
    EXPECT_GE(brisk_usable_size(p), 1000u);
    brisk_free(p);
  }
}

TEST(ReallocAligned, SizeZeroGivesAnAlignedBlock) {
  // As realloc(p, 0): nothing is freed without a block in return.
  for (size_t align : {size_t{16}, size_t{128}, 4096 * size_t{1}, 1 * MiB})
    for (size_t n : {size_t{10}, size_t{5000}, 2 * MiB}) {
      void *p = brisk_aligned_alloc(align, n);
      ASSERT_NE(p, nullptr);
      void *q = brisk_realloc_aligned(p, align, 0);
      ASSERT_NE(q, nullptr) << "align " << align << ", size " << n;
      EXPECT_TRUE(aligned_to(q, align));
      EXPECT_TRUE(brisk_owns(q));
      brisk_free(q);
    }
}

TEST(ReallocAligned, BadAlignmentIsEinvalAndKeepsTheBlock) {
  const size_t bad[] = {0, 3, 24, 48, 100, 3 * 4096, SIZE_MAX, (SIZE_MAX >> 1) + 2};
  for (size_t n : {size_t{100}, 200 * KiB, 3 * MiB}) {
    void *p = brisk_malloc(n);
    ASSERT_NE(p, nullptr);
    fill(p, n, n);
    for (size_t a : bad) {
      errno = 0;
      EXPECT_EQ(brisk_realloc_aligned(p, a, 2 * n), nullptr) << "alignment " << a;
      EXPECT_EQ(errno, EINVAL) << "alignment " << a;
      ASSERT_TRUE(check(p, n, n)) << "alignment " << a << " changed the block";
    }
    errno = 0;
    EXPECT_EQ(brisk_realloc_aligned(nullptr, 12, 64), nullptr);
    EXPECT_EQ(errno, EINVAL);
    brisk_free(p);
  }
}

TEST(ReallocAligned, FailureIsEnomemAndKeepsTheBlock) {
  const size_t impossible[] = {SIZE_MAX, SIZE_MAX - 4096, static_cast<size_t>(PTRDIFF_MAX) + 1,
                               static_cast<size_t>(1) << 50};
  for (size_t align : {size_t{64}, size_t{4096}, 8 * MiB})
    for (size_t old : {size_t{10}, size_t{100000}, 2 * MiB}) {
      void *p = brisk_aligned_alloc(align, old);
      ASSERT_NE(p, nullptr);
      fill(p, old, old + align);
      for (size_t n : impossible) {
        errno = 0;
        void *q = brisk_realloc_aligned(p, align, n);
        EXPECT_EQ(q, nullptr) << "realloc_aligned(" << old << " -> " << n << ", align " << align << ")";
        EXPECT_EQ(errno, ENOMEM);
        if (q) {
          p = q;
          break;
        }
        ASSERT_TRUE(check(p, old, old + align)) << "a failed realloc_aligned damaged the block";
      }
      brisk_free(p);
    }
}

TEST(ReallocAligned, InAHeapKeepsPrefixAlignmentAndStaysInTheHeap) {
  brisk_heap_t *heap = brisk_heap_new();
  ASSERT_NE(heap, nullptr);
  for (size_t align : {size_t{64}, size_t{4096}, 2 * MiB, 8 * MiB}) {
    void *p = brisk_heap_realloc_aligned(heap, nullptr, align, 100);  // NULL: aligned_alloc in the heap
    ASSERT_NE(p, nullptr);
    ASSERT_TRUE(aligned_to(p, align));
    fill(p, 100, align);
    size_t have = 100;
    for (size_t n : {size_t{3000}, size_t{70000}, 3 * MiB, 7 * MiB + 5, size_t{500}}) {
      size_t held = brisk_heap_held_bytes(heap);
      void *q = brisk_heap_realloc_aligned(heap, p, align, n);
      ASSERT_NE(q, nullptr) << "align " << align << ", " << have << " -> " << n;
      EXPECT_TRUE(aligned_to(q, align)) << "align " << align << ", " << have << " -> " << n;
      EXPECT_TRUE(check(q, have < n ? have : n, align)) << "align " << align << ", " << have << " -> " << n;
      // A block that grew past what the heap held came from the heap (one
      // that moved to the thread's heap would leave its figure alone).
      if (n > held) {
        EXPECT_GE(brisk_heap_held_bytes(heap), n) << "align " << align << ", " << have << " -> " << n;
      }
      if (n > have) fill(q, n, align, have);
      p = q;
      have = n;
    }
    brisk_free(p);
  }
  // A bad alignment: NULL with EINVAL, the block untouched.
  void *p = brisk_heap_malloc(heap, 64);
  ASSERT_NE(p, nullptr);
  fill(p, 64, 3);
  errno = 0;
  EXPECT_EQ(brisk_heap_realloc_aligned(heap, p, 48, 1000), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_TRUE(check(p, 64, 3));
  brisk_heap_destroy(heap);
}
