// The secure library (brisk_core_secure: the prefixed API built with
// BRISK_SECURE), as the program sees it: fresh blocks in an order no one
// predicts, a block freed a moment ago not handed out again at once, and
// no link or mark left in a block handed out. Attacks and misuse:
// test_secure.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "test_util.h"

using namespace bt;

// ---- What the program sees ------------------------------------------------

TEST(Secure, FreshBlocksAreHandedOutInUnpredictableOrder) {
  std::vector<uintptr_t> got;
  for (int i = 0; i < 200; i++) got.push_back((uintptr_t)brisk_malloc(96));
  int ascending = 0;
  for (size_t i = 1; i < got.size(); i++) ascending += got[i] > got[i - 1];
  // In address order all 199 steps would go up; shuffled, about half do.
  EXPECT_LT(ascending, 160);
  EXPECT_GT(ascending, 40);
  for (uintptr_t p : got) brisk_free((void *)p);
}

TEST(Secure, FreshBlocksComeFromAWindowMovingInAddressOrder) {
  // The i-th fresh block of a page is one of the page's first i + 8: the
  // order is random, yet a loop over fresh blocks walks memory nearly in
  // order (a shuffle of the whole page made such loops up to 3x slower, a
  // window of 16 blocks 2.6x at 64 B, 8 blocks 1.3x).
  brisk_heap_t *heap = brisk_heap_new();
  ASSERT_NE(heap, nullptr);
  const size_t kSize = 64, kCount = 200;  // one extension of a fresh page
  std::vector<uintptr_t> got;
  for (size_t i = 0; i < kCount; i++) got.push_back((uintptr_t)brisk_heap_malloc(heap, kSize));
  uintptr_t lowest = *std::min_element(got.begin(), got.end());
  int ascending = 0;
  for (size_t i = 0; i < kCount; i++) {
    EXPECT_LT(got[i] - lowest, (i + 8) * kSize) << "block " << i;
    if (i) ascending += got[i] > got[i - 1];
  }
  EXPECT_LT(ascending, 170);  // in address order all 199 steps go up
  std::sort(got.begin(), got.end());
  EXPECT_EQ(std::adjacent_find(got.begin(), got.end()), got.end());
  brisk_heap_destroy(heap);
}

// A malloc-free loop cycles through every block its page has threaded (a
// block just freed comes back once the page's list runs dry): at least 64
// of them, so that the end of a cycle, a branch the processor mispredicts,
// is rare (page.c, SECURE_EXTEND_BLOCKS; with the 16 blocks of 1 KiB that
// 16 KiB made, that loop took 1.55x the release library's time).
TEST(Secure, AMallocFreeLoopCyclesThroughAtLeast64Blocks) {
  // (A segment's first page, which the header shares, holds 48 of 1 KiB.)
  for (auto [size, least] : {std::pair<size_t, size_t>{500, 64}, {1000, 48}}) {
    brisk_heap_t *heap = brisk_heap_new();
    ASSERT_NE(heap, nullptr);
    std::set<void *> seen;
    for (int i = 0; i < 1000; i++) {
      void *p = brisk_heap_malloc(heap, size);
      ASSERT_NE(p, nullptr);
      seen.insert(p);
      brisk_free(p);
    }
    EXPECT_GE(seen.size(), least) << size;
    brisk_heap_destroy(heap);
  }
}

// ... but only blocks of 1 KiB or less, whose frees cycle (bigger ones go
// to LIFO hot lists): threading 64 blocks of every class at once made one
// block each of 17 classes of 1.5 KiB - 1 MiB cost 1.3 MiB of RSS, where
// 16 KiB at a time costs 0.3 MiB as in the release library.
TEST(Secure, BlocksAbove1KiBAreThreaded16KiBAtATime) {
  bt::on_fresh_thread([] {
    std::vector<void *> held;
    held.reserve(64);
    size_t before = bt::rss_bytes();
    for (size_t n = 1500; n <= 1000000; n = n * 3 / 2) held.push_back(brisk_malloc(n));
    size_t grown = bt::rss_bytes() - before;
    for (void *p : held) EXPECT_NE(p, nullptr);
    // A sanitizer's shadow of the bytes brisk writes counts in the RSS too:
    // 0.3 MiB grows to 0.48-0.66 MiB under ASan and TSan, still well under
    // the 1.3 MiB that threading whole runs of these classes costs.
    EXPECT_LT(grown, size_t{BRISK_TEST_SANITIZED ? 1024 : 640} << 10);
    for (void *p : held) brisk_free(p);
  });
}

// A block the program gets holds neither link nor mark: read before it is
// written (an info leak a program may have), an encoded link beside the
// block's address is material for solving the keys.
TEST(Secure, HandedOutBlocksHoldNoLinkOrMark) {
  brisk_heap_t *heap = brisk_heap_new();
  ASSERT_NE(heap, nullptr);
  for (size_t size : {size_t{16}, size_t{64}, size_t{1000}, size_t{4096}, size_t{40000}}) {
    std::vector<uintptr_t *> got;
    for (int round = 0; round < 2; round++) {  // fresh blocks, then reused ones
      for (int i = 0; i < 100; i++) got.push_back(static_cast<uintptr_t *>(brisk_heap_malloc(heap, size)));
      for (uintptr_t *p : got) {
        ASSERT_NE(p, nullptr);
        EXPECT_EQ(p[0], 0u) << size << " B, round " << round;
        EXPECT_EQ(p[1], 0u) << size << " B, round " << round;
      }
      for (uintptr_t *p : got) brisk_free(p);
      got.clear();
    }
  }
  brisk_heap_destroy(heap);
}

// Blocks another thread freed come back through the transfer cache (or,
// sent back, through their pages) without the words the cache wrote into
// them: the link, the freed mark, and the third word (the block four
// places further on the list, or the link to the next batch).
TEST(Secure, AMallocRightAfterAFreeGetsAnotherBlock) {
  // The use after free an attacker arranges: free an object, allocate one
  // of its size in its place (mimalloc-bench's malloc_reuse). Through every
  // cycle of a page's lists, where the release library hands the block
  // freed last out first, and on the hot lists above 1 KiB.
  bt::on_fresh_thread([] {
    for (size_t size : {16u, 64u, 1000u, 1500u, 4000u, 40000u, 300000u}) {
      void *keep = brisk_malloc(size);
      int same = 0;
      for (int i = 0; i < 3000; i++) {
        void *p = brisk_malloc(size);
        ASSERT_NE(p, nullptr);
        brisk_free(p);
        void *q = brisk_malloc(size);
        same += q == p;
        brisk_free(q);
      }
      EXPECT_EQ(same, 0) << "blocks of " << size << " B";
      brisk_free(keep);
    }
  });
}

TEST(Secure, AMallocRightAfterAFreeGetsAnotherBlockAsPagesFill) {
  // The same, with each block kept: the heap fills page after page, and at
  // the end of each, the block just freed was the page's only free block
  // (a heap sprayed full, then one free and one malloc).
  bt::on_fresh_thread([] {
    for (size_t size : {16u, 64u, 256u, 1000u, 1500u}) {
      std::vector<void *> kept;
      int same = 0;
      for (int i = 0; i < 20000; i++) {
        void *p = brisk_malloc(size);
        ASSERT_NE(p, nullptr);
        brisk_free(p);
        void *q = brisk_malloc(size);
        ASSERT_NE(q, nullptr);
        same += q == p;
        kept.push_back(q);
      }
      EXPECT_EQ(same, 0) << "blocks of " << size << " B";
      std::set<void *> distinct(kept.begin(), kept.end());
      EXPECT_EQ(distinct.size(), kept.size()) << "a block handed out twice";
      for (void *q : kept) brisk_free(q);
    }
  });
}

TEST(Secure, CorrectUseRaisesNoAlarm) {
  // Every tier, freed by the allocating thread and by another, reallocated
  // across tiers, aligned: the checks stay silent and contents survive.
  std::vector<std::pair<unsigned char *, size_t>> blocks;
  for (size_t size = 1; size <= 8 * MiB; size = size * 3 + 1) {
    auto *p = (unsigned char *)brisk_malloc(size);
    ASSERT_NE(p, nullptr);
    memset(p, (int)(size & 0xff), size);
    blocks.push_back({p, size});
  }
  for (auto &[p, size] : blocks) {
    auto *q = (unsigned char *)brisk_realloc(p, size * 2 + 7);
    ASSERT_NE(q, nullptr);
    for (size_t i = 0; i < size; i += 97) ASSERT_EQ(q[i], (unsigned char)(size & 0xff));
    p = q;
  }
  std::thread([&] {
    for (size_t i = 0; i < blocks.size(); i += 2) brisk_free(blocks[i].first);
  }).join();
  for (size_t i = 1; i < blocks.size(); i += 2) brisk_free(blocks[i].first);
  for (size_t align = 32; align <= 8 * MiB; align *= 4) {
    void *p = brisk_aligned_alloc(align, align + 16);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ((uintptr_t)p % align, 0u);
    brisk_free(p);
  }
  EXPECT_EQ(brisk_check_heap(), 0);
}
