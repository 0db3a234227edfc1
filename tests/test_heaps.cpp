// Explicit heaps (brisk_heap_*): allocation from a heap, frees from any
// thread, destroy and reset releasing memory (held bytes, mapped bytes, RSS),
// the per-heap byte bound, huge blocks in a heap, and many heaps in a row.
// The checked-library rule (only the owner thread allocates) is in
// test_checked.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "test_util.h"

using namespace bt;

namespace {

// Whether brisk_visit_blocks (which covers the calling thread's heaps, its
// explicit heaps and every huge block) reports a live block holding p.
struct Holder {
  const void *p;
  bool seen;
};

int find_block(void *block, size_t size, void *arg) {
  Holder *h = static_cast<Holder *>(arg);
  const char *b = static_cast<const char *>(block);
  const char *p = static_cast<const char *>(h->p);
  if (p >= b && p < b + size) h->seen = true;
  return 0;
}

bool visible_to_visit(const void *p) {
  Holder h{p, false};
  brisk_visit_blocks(find_block, &h);
  return h.seen;
}

}  // namespace

TEST(Heaps, NewGivesDistinctEmptyHeaps) {
  brisk_heap_t *a = brisk_heap_new();
  brisk_heap_t *b = brisk_heap_new();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a, b);
  EXPECT_EQ(brisk_heap_held_bytes(a), 0u);
  EXPECT_EQ(brisk_heap_held_bytes(b), 0u);
  brisk_heap_destroy(a);
  brisk_heap_destroy(b);
  brisk_heap_destroy(nullptr);  // a no-op, like free(NULL)
}

TEST(Heaps, MallocEveryTierKeepsContents) {
  brisk_heap_t *heap = brisk_heap_new();
  ASSERT_NE(heap, nullptr);
  size_t count;
  const size_t *sizes = tier_sizes(&count);
  std::vector<std::pair<void *, size_t>> blocks;
  for (int rep = 0; rep < 3; ++rep) {
    for (size_t i = 0; i < count; ++i) {
      size_t n = sizes[i];
      if (n > 16 * MiB) continue;
      void *p = brisk_heap_malloc(heap, n);
      ASSERT_NE(p, nullptr) << "heap_malloc(" << n << ")";
      EXPECT_TRUE(brisk_owns(p));
      EXPECT_GE(brisk_usable_size(p), n);
      if (n >= 16) {
        EXPECT_TRUE(aligned_to(p, 16)) << p;
      }
      fill(p, n, blocks.size());
      blocks.emplace_back(p, n);
    }
  }
  // Held bytes cover at least every block handed out.
  size_t total = 0;
  for (auto &b : blocks) total += b.second;
  EXPECT_GE(brisk_heap_held_bytes(heap), total);
  for (size_t i = 0; i < blocks.size(); ++i)
    EXPECT_EQ(first_mismatch(blocks[i].first, blocks[i].second, i), SIZE_MAX)
        << "block " << i << " of " << blocks[i].second << " bytes";
  // Half freed one by one, the rest dropped with the heap.
  for (size_t i = 0; i < blocks.size(); i += 2) brisk_free(blocks[i].first);
  for (size_t i = 1; i < blocks.size(); i += 2)
    EXPECT_TRUE(check(blocks[i].first, blocks[i].second, i)) << "block " << i;
  brisk_heap_destroy(heap);
}

TEST(Heaps, MallocZeroAndUniqueness) {
  brisk_heap_t *heap = brisk_heap_new();
  ASSERT_NE(heap, nullptr);
  void *a = brisk_heap_malloc(heap, 0);
  void *b = brisk_heap_malloc(heap, 0);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a, b);
  brisk_free(a);
  brisk_heap_destroy(heap);
}

TEST(Heaps, CallocZeroesEvenRecycledMemory) {
  brisk_heap_t *heap = brisk_heap_new();
  ASSERT_NE(heap, nullptr);
  const size_t sizes[] = {1, 16, 100, 1000, 5000, 40000, 300000, 1 * MiB, 2 * MiB + 3, 9 * MiB};
  for (int round = 0; round < 3; ++round) {
    std::vector<std::pair<unsigned char *, size_t>> dirty;
    for (size_t n : sizes) {
      unsigned char *p = static_cast<unsigned char *>(brisk_heap_calloc(heap, 1, n));
      ASSERT_NE(p, nullptr) << n;
      EXPECT_TRUE(all_zero(p, n)) << "heap_calloc(1, " << n << ") round " << round;
      std::memset(p, 0xA5, n);  // dirty it, so reuse must clear it again
      dirty.emplace_back(p, n);
    }
    for (auto &d : dirty) brisk_free(d.first);
  }
  // Overflow of count * size.
  errno = 0;
  EXPECT_EQ(brisk_heap_calloc(heap, SIZE_MAX / 2, 3), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  // A calloc in a heap that was reset: the pages were used before.
  void *p = brisk_heap_malloc(heap, 4000);
  ASSERT_NE(p, nullptr);
  std::memset(p, 0xFF, 4000);
  brisk_heap_reset(heap);
  for (int i = 0; i < 100; ++i) {
    void *q = brisk_heap_calloc(heap, 4, 1000);
    ASSERT_NE(q, nullptr);
    EXPECT_TRUE(all_zero(q, 4000)) << "calloc after reset, #" << i;
  }
  brisk_heap_destroy(heap);
}

TEST(Heaps, ReallocKeepsPrefixAndStaysInHeap) {
  brisk_heap_t *heap = brisk_heap_new();
  ASSERT_NE(heap, nullptr);
  // NULL: acts as malloc from the heap.
  void *p = brisk_heap_realloc(heap, nullptr, 100);
  ASSERT_NE(p, nullptr);
  fill(p, 100, 1);
  size_t held_small = brisk_heap_held_bytes(heap);
  EXPECT_GT(held_small, 0u);
  // Growing into a medium size class must take a medium page into the heap
  // (a block that moved to the thread's heap would leave it unchanged).
  void *q = brisk_heap_realloc(heap, p, 20000);
  ASSERT_NE(q, nullptr);
  EXPECT_TRUE(check(q, 100, 1));
  EXPECT_GE(brisk_heap_held_bytes(heap), held_small + 64 * KiB)
      << "brisk_heap_realloc moved the block out of its heap";
  fill(q, 20000, 2);
  // And on into a huge block, still in the heap.
  size_t held_medium = brisk_heap_held_bytes(heap);
  void *r = brisk_heap_realloc(heap, q, 3 * MiB);
  ASSERT_NE(r, nullptr);
  EXPECT_TRUE(check(r, 20000, 2));
  EXPECT_GE(brisk_heap_held_bytes(heap), held_medium + 3 * MiB - 64 * KiB);
  fill(r, 3 * MiB, 3);
  // Growing a huge block of a heap keeps it in the heap too.
  void *s = brisk_heap_realloc(heap, r, 7 * MiB);
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(check(s, 3 * MiB, 3));
  EXPECT_GE(brisk_heap_held_bytes(heap), 7 * MiB);
  // Shrinking keeps the prefix.
  void *t = brisk_heap_realloc(heap, s, 50);
  ASSERT_NE(t, nullptr);
  EXPECT_TRUE(check(t, 50, 3));
  brisk_free(t);
  brisk_heap_destroy(heap);
}

TEST(Heaps, PlainReallocMovesBlockOutOfHeap) {
  // brisk_realloc on a heap block moves it to the thread's own heap when it
  // must move: the block then outlives the heap.
  brisk_heap_t *heap = brisk_heap_new();
  ASSERT_NE(heap, nullptr);
  void *p = brisk_heap_malloc(heap, 64);
  ASSERT_NE(p, nullptr);
  fill(p, 64, 9);
  void *q = brisk_realloc(p, 100000);
  ASSERT_NE(q, nullptr);
  EXPECT_TRUE(check(q, 64, 9));
  fill(q, 100000, 10);
  brisk_heap_destroy(heap);
  // Still intact and freeable after the heap is gone.
  EXPECT_TRUE(check(q, 100000, 10));
  EXPECT_TRUE(brisk_owns(q));
  brisk_free(q);
}

TEST(Heaps, AlignedAlloc) {
  brisk_heap_t *heap = brisk_heap_new();
  ASSERT_NE(heap, nullptr);
  std::vector<void *> blocks;
  for (size_t align = 1; align <= 8 * MiB; align *= 2) {
    const size_t sizes[] = {1, 24, align, 3 * align / 2 + 1, 5000};
    for (size_t n : sizes) {
      if (n > 24 * MiB) continue;
      void *p = brisk_heap_aligned_alloc(heap, align, n);
      ASSERT_NE(p, nullptr) << "aligned_alloc(" << align << ", " << n << ")";
      EXPECT_TRUE(aligned_to(p, align)) << "aligned_alloc(" << align << ", " << n << ") = " << p;
      EXPECT_GE(brisk_usable_size(p), n);
      std::memset(p, 0x3C, n);
      blocks.push_back(p);
    }
  }
  // Free half explicitly (pages with aligned blocks), drop the rest.
  for (size_t i = 0; i < blocks.size(); i += 2) brisk_free(blocks[i]);
  // A bad alignment: NULL with EINVAL.
  const size_t bad[] = {0, 3, 24, 1000, 4097};
  for (size_t a : bad) {
    errno = 0;
    EXPECT_EQ(brisk_heap_aligned_alloc(heap, a, 64), nullptr) << "alignment " << a;
    EXPECT_EQ(errno, EINVAL) << "alignment " << a;
  }
  brisk_heap_destroy(heap);
}

TEST(Heaps, BlocksFreedByOwnerAndOtherThreads) {
  brisk_heap_t *heap = brisk_heap_new();
  ASSERT_NE(heap, nullptr);
  const size_t n = scaled(20000, 2000);
  Rng rng(42);
  std::vector<std::pair<void *, size_t>> blocks(n);
  for (size_t i = 0; i < n; ++i) {
    size_t sz = i % 997 == 0 ? rng.range(1 * MiB + 1, 3 * MiB) : rng.range(1, 3000);
    void *p = brisk_heap_malloc(heap, sz);
    ASSERT_NE(p, nullptr);
    fill(p, sz, i);
    blocks[i] = {p, sz};
  }
  size_t held_full = brisk_heap_held_bytes(heap);
  // Two other threads free the odd blocks (checking them first) while the
  // owner frees the even ones.
  std::atomic<size_t> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      for (size_t i = 1 + 2 * static_cast<size_t>(t); i < n; i += 4) {
        if (!check(blocks[i].first, blocks[i].second, i)) bad++;
        brisk_free(blocks[i].first);
      }
    });
  for (size_t i = 0; i < n; i += 2) {
    if (!check(blocks[i].first, blocks[i].second, i)) bad++;
    brisk_free(blocks[i].first);
  }
  for (auto &t : threads) t.join();
  EXPECT_EQ(bad.load(), 0u);
  // The memory freed, locally and remotely, serves the same load again
  // without the heap growing much.
  for (size_t i = 0; i < n; ++i) {
    void *p = brisk_heap_malloc(heap, blocks[i].second);
    ASSERT_NE(p, nullptr);
    fill(p, blocks[i].second, i + n);
    blocks[i].first = p;
  }
  EXPECT_LE(brisk_heap_held_bytes(heap), held_full + held_full / 4 + 4 * MiB)
      << "freed blocks of the heap were not reused (held " << mib(held_full) << " before, "
      << mib(brisk_heap_held_bytes(heap)) << " after)";
  for (size_t i = 0; i < n; ++i)
    ASSERT_TRUE(check(blocks[i].first, blocks[i].second, i + n)) << "block " << i;
  brisk_heap_destroy(heap);
}

TEST(Heaps, HugeBlocksFreedByAnotherThread) {
  brisk_heap_t *heap = brisk_heap_new();
  ASSERT_NE(heap, nullptr);
  std::vector<void *> huge;
  for (int i = 0; i < 6; ++i) {
    void *p = brisk_heap_malloc(heap, 2 * MiB + static_cast<size_t>(i) * 512 * KiB);
    ASSERT_NE(p, nullptr);
    std::memset(p, i, 4096);
    huge.push_back(p);
  }
  size_t held = brisk_heap_held_bytes(heap);
  EXPECT_GE(held, 6 * 2 * MiB);
  std::thread t([&] {
    for (size_t i = 0; i < huge.size(); i += 2) brisk_free(huge[i]);
  });
  t.join();
  EXPECT_LT(brisk_heap_held_bytes(heap), held) << "huge blocks freed remotely still counted";
  EXPECT_GE(brisk_heap_held_bytes(heap), 3 * 2 * MiB);
  brisk_heap_destroy(heap);  // drops the three left
}

TEST(Heaps, DestroyReleasesMemory) {
  brisk_collect();
  const size_t mapped0 = brisk_mapped_bytes();
  const size_t rss0 = rss_bytes();
  brisk_heap_t *heap = brisk_heap_new();
  ASSERT_NE(heap, nullptr);
  // About 96 MiB in small, medium and large blocks, every byte written.
  const size_t target = 96 * MiB;
  size_t total = 0;
  Rng rng(7);
  while (total < target) {
    size_t k = rng.below(100);
    size_t sz = k < 70 ? rng.range(16, 1024) : k < 95 ? rng.range(1025, 60000) : rng.range(60001, 900000);
    void *p = brisk_heap_malloc(heap, sz);
    ASSERT_NE(p, nullptr);
    std::memset(p, 0x77, sz);
    total += sz;
  }
  const size_t held = brisk_heap_held_bytes(heap);
  const size_t mapped1 = brisk_mapped_bytes();
  const size_t rss1 = rss_bytes();
  EXPECT_GE(held, target);
  EXPECT_GE(mapped1, mapped0 + target);
  EXPECT_GE(rss1, rss0 + target * 3 / 4) << "rss " << mib(rss0) << " -> " << mib(rss1);
  brisk_stats_t st1 = stats_now();
  EXPECT_GE(st1.explicit_heaps, 1u);

  brisk_heap_destroy(heap);
  brisk_collect();
  const size_t mapped2 = brisk_mapped_bytes();
  const size_t rss2 = rss_bytes();
  EXPECT_LE(mapped2, mapped0 + 8 * MiB)
      << "mapped " << mib(mapped0) << " -> " << mib(mapped1) << " -> " << mib(mapped2);
  EXPECT_LE(rss2 + target * 3 / 4, rss1)
      << "rss " << mib(rss0) << " -> " << mib(rss1) << " -> " << mib(rss2);
  brisk_stats_t st2 = stats_now();
  EXPECT_EQ(st2.explicit_heaps, st1.explicit_heaps - 1);
  EXPECT_LE(st2.in_use + target, st1.in_use);
}

TEST(Heaps, HugeBlocksReleasedByDestroy) {
  brisk_collect();
  const size_t mapped0 = brisk_mapped_bytes();
  brisk_stats_t st0 = stats_now();
  brisk_heap_t *heap = brisk_heap_new();
  ASSERT_NE(heap, nullptr);
  const size_t sizes[] = {1 * MiB + 1, 2 * MiB, 5 * MiB + 17, 12 * MiB, 33 * MiB};
  size_t total = 0;
  for (size_t n : sizes) {
    void *p = brisk_heap_malloc(heap, n);
    ASSERT_NE(p, nullptr) << n;
    std::memset(p, 0x11, n);
    total += n;
  }
  EXPECT_GE(brisk_heap_held_bytes(heap), total);
  brisk_stats_t st1 = stats_now();
  EXPECT_EQ(st1.tiers[BRISK_TIER_HUGE].live_blocks, st0.tiers[BRISK_TIER_HUGE].live_blocks + 5);
  EXPECT_GE(brisk_mapped_bytes(), mapped0 + total);

  brisk_heap_destroy(heap);
  brisk_stats_t st2 = stats_now();
  EXPECT_EQ(st2.tiers[BRISK_TIER_HUGE].live_blocks, st0.tiers[BRISK_TIER_HUGE].live_blocks)
      << "destroy left huge blocks live";
  brisk_collect();
  EXPECT_LE(brisk_mapped_bytes(), mapped0 + 4 * MiB)
      << "mapped " << mib(mapped0) << " -> " << mib(brisk_mapped_bytes());
}

TEST(Heaps, ResetEmptiesForReuse) {
  brisk_heap_t *heap = brisk_heap_new();
  ASSERT_NE(heap, nullptr);
  size_t first_held = 0;
  for (int round = 0; round < 5; ++round) {
    std::vector<void *> blocks;
    for (size_t i = 0; i < 5000; ++i) {
      size_t sz = 16 + (i * 37) % 5000;
      void *p = brisk_heap_malloc(heap, sz);
      ASSERT_NE(p, nullptr);
      fill(p, sz, i + static_cast<size_t>(round) * 100000);
      blocks.push_back(p);
    }
    void *big = brisk_heap_malloc(heap, 4 * MiB);
    ASSERT_NE(big, nullptr);
    std::memset(big, round, 4 * MiB);
    for (size_t i = 0; i < blocks.size(); ++i)
      ASSERT_TRUE(check(blocks[i], 16 + (i * 37) % 5000, i + static_cast<size_t>(round) * 100000));
    size_t held = brisk_heap_held_bytes(heap);
    EXPECT_GT(held, 4 * MiB);
    if (round == 0) first_held = held;
    else EXPECT_LE(held, first_held + first_held / 4) << "round " << round;
    brisk_heap_reset(heap);
    EXPECT_EQ(brisk_heap_held_bytes(heap), 0u) << "round " << round;
    EXPECT_FALSE(visible_to_visit(blocks[0])) << "a block survived the reset";
  }
  brisk_heap_destroy(heap);
}

TEST(Heaps, MaxBytesBound) {
  brisk_heap_t *heap = brisk_heap_new();
  ASSERT_NE(heap, nullptr);
  const size_t bound = 2 * MiB;
  brisk_heap_set_max_bytes(heap, bound);
  // Fill it with 1000-byte blocks until it refuses.
  std::vector<void *> blocks;
  void *p;
  errno = 0;
  while ((p = brisk_heap_malloc(heap, 1000)) != nullptr) {
    blocks.push_back(p);
    ASSERT_LT(blocks.size(), 100000u) << "the bound is not enforced";
  }
  EXPECT_EQ(errno, ENOMEM);
  EXPECT_LE(brisk_heap_held_bytes(heap), bound);
  EXPECT_GE(blocks.size() * 1000, bound / 2) << "the heap refused long before its bound";
  // Other entry points refuse too, and a failed call leaves the heap usable.
  errno = 0;
  EXPECT_EQ(brisk_heap_malloc(heap, 100000), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  errno = 0;
  EXPECT_EQ(brisk_heap_calloc(heap, 1, 3 * MiB), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  errno = 0;
  EXPECT_EQ(brisk_heap_aligned_alloc(heap, 4096, 200000), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  errno = 0;
  EXPECT_EQ(brisk_heap_calloc_aligned(heap, 1, 200000, 4096), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  errno = 0;
  EXPECT_EQ(brisk_heap_realloc_aligned(heap, blocks.back(), 4096, 200000), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  // The thread's own heap is not bounded by it.
  void *plain = brisk_malloc(3 * MiB);
  EXPECT_NE(plain, nullptr);
  brisk_free(plain);

  // Freeing blocks makes room again (in the pages it holds).
  for (size_t i = 0; i < 10; ++i) brisk_free(blocks[i]);
  for (size_t i = 0; i < 10; ++i) {
    blocks[i] = brisk_heap_malloc(heap, 1000);
    EXPECT_NE(blocks[i], nullptr) << "no room after frees";
  }
  // After a reset, the whole bound is available again.
  brisk_heap_reset(heap);
  size_t again = 0;
  while ((p = brisk_heap_malloc(heap, 1000)) != nullptr) ++again;
  EXPECT_GE(again + 64, blocks.size()) << "reset did not give the bound back";
  // Raising the bound lets it grow further.
  brisk_heap_set_max_bytes(heap, 4 * bound);
  size_t more = 0;
  while ((p = brisk_heap_malloc(heap, 1000)) != nullptr) ++more;
  EXPECT_GE(more * 1000, bound) << "raising the bound gave no room";
  EXPECT_LE(brisk_heap_held_bytes(heap), 4 * bound);
  // 0: unbounded.
  brisk_heap_set_max_bytes(heap, 0);
  void *huge = brisk_heap_malloc(heap, 16 * MiB);
  EXPECT_NE(huge, nullptr);
  brisk_heap_destroy(heap);
}

TEST(Heaps, MaxBytesBoundsHugeBlocks) {
  brisk_heap_t *heap = brisk_heap_new();
  ASSERT_NE(heap, nullptr);
  const size_t bound = 8 * MiB;
  brisk_heap_set_max_bytes(heap, bound);
  errno = 0;
  EXPECT_EQ(brisk_heap_malloc(heap, 16 * MiB), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  void *a = brisk_heap_malloc(heap, 3 * MiB);
  ASSERT_NE(a, nullptr);
  EXPECT_LE(brisk_heap_held_bytes(heap), bound);
  std::memset(a, 1, 3 * MiB);
  brisk_free(a);
  EXPECT_EQ(brisk_heap_held_bytes(heap), 0u);
  brisk_heap_destroy(heap);
}

TEST(Heaps, HeldBytesNeverPassTheBound) {
  // "Bound the memory the heap holds (its pages and huge blocks)": whatever
  // succeeds, what the heap holds stays within the bound.
  const size_t bound = 6 * MiB;
  const size_t sizes[] = {2 * MiB - 100, 3 * MiB, 4 * MiB - 4096, 6 * MiB - 100000, 5 * MiB + 1, 6 * MiB - 100,
                          6 * MiB};
  for (size_t n : sizes) {
    brisk_heap_t *heap = brisk_heap_new();
    ASSERT_NE(heap, nullptr);
    brisk_heap_set_max_bytes(heap, bound);
    void *p = brisk_heap_malloc(heap, n);
    if (p) {
      EXPECT_LE(brisk_heap_held_bytes(heap), bound)
          << "heap_malloc(" << n << ") succeeded and the heap now holds "
          << brisk_heap_held_bytes(heap) << " bytes, above its bound of " << bound;
    } else {
      EXPECT_EQ(errno, ENOMEM);
    }
    brisk_heap_destroy(heap);
  }
}

TEST(Heaps, ManyHeapsDoNotGrowMemory) {
  const int rounds = static_cast<int>(scaled(1500, 200));
  size_t mapped_warm = 0, explicit_before = 0;
  {
    brisk_stats_t st = stats_now();
    explicit_before = st.explicit_heaps;
  }
  for (int i = 0; i < rounds; ++i) {
    brisk_heap_t *heap = brisk_heap_new();
    ASSERT_NE(heap, nullptr) << "round " << i;
    for (int j = 0; j < 50; ++j) {
      void *p = brisk_heap_malloc(heap, static_cast<size_t>(16 + j * 97));
      ASSERT_NE(p, nullptr);
      std::memset(p, j, 16);
    }
    void *m = brisk_heap_malloc(heap, 100000);
    ASSERT_NE(m, nullptr);
    if (i % 10 == 0) {
      void *h = brisk_heap_malloc(heap, 2 * MiB);
      ASSERT_NE(h, nullptr);
      std::memset(h, 1, 4096);
    }
    brisk_heap_destroy(heap);
    if (i == 50) mapped_warm = brisk_mapped_bytes();
  }
  size_t mapped_end = brisk_mapped_bytes();
  EXPECT_LE(mapped_end, mapped_warm + 16 * MiB)
      << "mapped " << mib(mapped_warm) << " after 50 heaps, " << mib(mapped_end) << " after "
      << rounds;
  brisk_stats_t st = stats_now();
  EXPECT_EQ(st.explicit_heaps, explicit_before);
  brisk_collect();
}

TEST(Heaps, HeapsOfSeveralThreads) {
  // Each thread owns its heaps; they do not disturb each other.
  const int nthreads = 4;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < nthreads; ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round) {
        brisk_heap_t *heap = brisk_heap_new();
        if (!heap) { failures++; return; }
        std::vector<std::pair<void *, size_t>> blocks;
        Rng rng(static_cast<uint64_t>(t * 1000 + round));
        for (int i = 0; i < 500; ++i) {
          size_t sz = random_size(rng, 2 * MiB);
          void *p = brisk_heap_malloc(heap, sz);
          if (!p) { failures++; break; }
          fill(p, sz < 256 ? sz : 256, static_cast<uint64_t>(i));
          blocks.emplace_back(p, sz);
        }
        for (size_t i = 0; i < blocks.size(); ++i)
          if (!check(blocks[i].first, blocks[i].second < 256 ? blocks[i].second : 256, i)) failures++;
        if (round % 2) brisk_heap_reset(heap);
        brisk_heap_destroy(heap);
      }
    });
  for (auto &th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(Heaps, HeapBlocksAreVisitedAndDroppedWithTheHeap) {
  brisk_heap_t *heap = brisk_heap_new();
  ASSERT_NE(heap, nullptr);
  void *small = brisk_heap_malloc(heap, 200);
  void *huge = brisk_heap_malloc(heap, 3 * MiB);
  ASSERT_NE(small, nullptr);
  ASSERT_NE(huge, nullptr);
  EXPECT_TRUE(visible_to_visit(small));
  EXPECT_TRUE(visible_to_visit(huge));
  brisk_heap_destroy(heap);
  EXPECT_FALSE(visible_to_visit(small));
  EXPECT_FALSE(visible_to_visit(huge));
}

TEST(Heaps, DestroyedByAnotherThreadAfterItsOwnerExits) {
  // A worker fills a heap and exits; the main thread reads the results and
  // drops the heap (only allocation is tied to the creating thread).
  brisk_heap_t *heap = nullptr;
  std::vector<void *> blocks;
  blocks.reserve(2001);
  std::thread t([&] {
    heap = brisk_heap_new();
    if (!heap) return;
    for (size_t i = 0; i < 2000; ++i) {
      void *p = brisk_heap_malloc(heap, 100 + i);
      if (!p) return;
      fill(p, 100 + i, i);
      blocks.push_back(p);
    }
    blocks.push_back(brisk_heap_malloc(heap, 3 * MiB));
  });
  t.join();
  ASSERT_NE(heap, nullptr);
  ASSERT_EQ(blocks.size(), 2001u);
  for (size_t i = 0; i < 2000; ++i) ASSERT_TRUE(check(blocks[i], 100 + i, i)) << i;
  EXPECT_GE(brisk_heap_held_bytes(heap), 3 * MiB + 2000 * 100);
  brisk_stats_t st0 = stats_now();
  brisk_heap_destroy(heap);
  brisk_stats_t st1 = stats_now();
  EXPECT_EQ(st1.explicit_heaps, st0.explicit_heaps - 1);
  EXPECT_LE(st1.in_use + 3 * MiB + 2000 * 100, st0.in_use);
}
