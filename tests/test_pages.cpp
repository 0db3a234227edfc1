// A heap's pages: a page filled up waits until a sixteenth of its blocks
// are free (the free fast path's alarm), a page emptied by its thread waits
// in its queue with its blocks as freed, and pages other threads emptied go
// back to their segments when the owner sweeps.
#include <cstring>
#include <thread>
#include <algorithm>
#include <vector>

#include "test_util.h"

namespace {
// ---- Pages parked as full -----------------------------------------------------

// Blocks of 1 KiB taken on this thread, with room for all of them reserved
// up front: the test's own bookkeeping allocates no block of that class in
// between. Its frees go back to their pages at once: brisk_collect empties
// the class's hot stack (hot.c), where they would wait otherwise.
struct Taken {
  std::vector<void *> blocks;
  Taken() { blocks.reserve(1024); }
  static uintptr_t page(const void *p) { return reinterpret_cast<uintptr_t>(p) >> 16; }
  // Takes blocks until one lands on a 64 KiB page other than the last
  // block's, and returns that page.
  uintptr_t to_next_page() {
    for (;;) {
      void *p = brisk_malloc(1024);
      if (!p || blocks.size() == blocks.capacity()) return 0;
      bool moved = !blocks.empty() && page(blocks.back()) != page(p);
      blocks.push_back(p);
      if (moved) return page(p);
    }
  }
  // Frees n of the blocks on page pg.
  void free_on(uintptr_t pg, size_t n, bool to_page = true) {
    for (void *&p : blocks)
      if (n && p && page(p) == pg) brisk_free(p), p = nullptr, n--;
    if (to_page) brisk_collect();
  }
  size_t count_on(uintptr_t pg) const {
    size_t n = 0;
    for (void *p : blocks) n += p && page(p) == pg;
    return n;
  }
  ~Taken() {
    for (void *p : blocks) brisk_free(p);
  }
};

// A page its thread filled is parked until a sixteenth of its blocks are
// free, then allocated from again, before any fresh page: the free fast path
// tells both from one compare of the page's count of blocks in use
// (page_flags_set), whatever kind of page the block is on.
TEST(FullPages, ComeBackOnceASixteenthOfTheirBlocksIsFree) {
  bt::on_fresh_thread([] {
    Taken t;
    uintptr_t first = t.to_next_page();
    ASSERT_NE(t.to_next_page(), 0u);  // `first` is full and parked
    size_t sixteenth = (t.count_on(first) + 15) / 16;
    ASSERT_GE(t.count_on(first), 32u);
    // One block short of a sixteenth: the current page fills, and the
    // block after it comes from a page other than `first`.
    t.free_on(first, sixteenth - 1);
    uintptr_t third = t.to_next_page();
    ASSERT_NE(third, 0u);
    EXPECT_NE(third, first);
    // One more free: `first` is allocated from once `third` is full.
    t.free_on(first, 1);
    EXPECT_EQ(t.to_next_page(), first);
  });
}

// The statistics count a page's blocks in use exactly through every state
// the free fast path tells apart (current, in its queue, parked as full, back
// from full, emptied): the count is kept less the page's alarm, and each
// change of state moves both (page_flags_set).
TEST(FullPages, StatisticsCountBlocksInUseThroughEveryPageState) {
  bt::on_fresh_thread([] {
    const brisk_stats_t before = bt::stats_now();
    const unsigned cls = bt::class_for(before, 1024);
    ASSERT_NE(cls, 0u);
    Taken t;
    auto live = [&] {
      size_t n = 0;
      for (void *p : t.blocks) n += p != nullptr;
      return n;
    };
    auto expect_live = [&](const char *when) {
      EXPECT_EQ(bt::stats_now().class_live_blocks[cls], before.class_live_blocks[cls] + live()) << when;
    };
    uintptr_t first = t.to_next_page();
    expect_live("first page current");
    uintptr_t second = t.to_next_page();  // `first` parked as full
    expect_live("first page parked");
    size_t sixteenth = (t.count_on(first) + 15) / 16;
    t.free_on(first, sixteenth - 1);
    expect_live("frees to a parked page");
    t.free_on(first, 1);  // back in its queue
    expect_live("a parked page back in its queue");
    t.free_on(second, 3);  // the current page
    expect_live("frees to the current page");
    t.free_on(first, t.count_on(first));  // emptied: kept in its queue
    expect_live("a page emptied");
    t.to_next_page();
    expect_live("the next page");
  });
}

// ---- Pages emptied by their thread ---------------------------------------------

// A page whose blocks all came back waits in its queue as it is (up to
// KEPT_EMPTY_BYTES a heap), so a program that frees many blocks and builds
// as many again gets the same page back with its blocks in the order freed.
// Before, the page went back to its segment and came back from there with
// its blocks threaded anew, in address order. (The secure library still
// threads it anew, in random order: page_queue.c says why.) In the release
// library the class's hot stack takes these frees first and hands them out
// in the same order; past its bound, the kept page does
// (expect_refilled_falling below).
TEST(EmptiedPages, AreKeptWithTheirBlocksInTheOrderFreed) {
  bt::on_fresh_thread([] {
    Taken t;
    uintptr_t first = t.to_next_page();
    ASSERT_NE(t.to_next_page(), 0u);  // `first` is full
    std::vector<void *> on_first;
    for (void *p : t.blocks)
      if (p && Taken::page(p) == first) on_first.push_back(p);
    ASSERT_GE(on_first.size(), 32u);
    t.free_on(first, on_first.size(), false);  // in address order
    // The current page runs out; the next block comes from `first`.
    ASSERT_EQ(t.to_next_page(), first);
    std::vector<void *> again{t.blocks.back()};
    while (again.size() < 16) {
      again.push_back(brisk_malloc(1024));
      t.blocks.push_back(again.back());
    }
    const std::vector<void *> last_freed(on_first.rbegin(), on_first.rbegin() + 16);
#if BRISK_TEST_SECURE
    EXPECT_NE(again, last_freed) << "the secure library threads the page anew, shuffled";
#else
    EXPECT_EQ(again, last_freed) << "the blocks freed last come first";
#endif
  });
}

// Allocates `bytes` of blocks of `size`, frees them in rising address
// order, allocates as many again and expects them in falling order, as
// kept pages hand them out: the last freed first.
static void expect_refilled_falling(size_t size, size_t bytes, size_t percent = 90) {
  bt::on_fresh_thread([size, bytes, percent] {
    const size_t count = bytes / size;
    std::vector<void *> blocks(count);
    for (auto &p : blocks) ASSERT_NE(p = brisk_malloc(size), nullptr);
    std::sort(blocks.begin(), blocks.end());  // (the secure library's come shuffled)
    for (void *p : blocks) brisk_free(p);
    for (auto &p : blocks) ASSERT_NE(p = brisk_malloc(size), nullptr);
    size_t falling = 0;
    for (size_t i = 1; i < count; i++)
      falling += reinterpret_cast<uintptr_t>(blocks[i]) < reinterpret_cast<uintptr_t>(blocks[i - 1]);
    EXPECT_GT(falling, count * percent / 100) << "of " << count << " blocks of " << size << " B taken again, " << falling
                                       << " came below the one before";
    for (void *p : blocks) brisk_free(p);
  });
}

// A working set of 12 MiB of small blocks, freed and built again, gets its
// pages back as they were freed: each hands its blocks out last freed
// first, so the blocks come in falling address order. With the budget at
// 8 MiB, the pages past it went back to their segments and were threaded
// anew, in rising order (fixed-size objects of 128 B, 100 000 at a time,
// 12.5 MiB, were then 0.86x mimalloc's speed).
TEST(EmptiedPages, AWorkingSetOf12MiBIsKeptWhole) {
#if BRISK_TEST_SECURE
  GTEST_SKIP() << "the secure library keeps no emptied page of blocks of 1 KiB or less";
#endif
  expect_refilled_falling(256, 12 * bt::MiB);
}

// The secure library keeps emptied pages of blocks above 1 KiB too (hot
// pages, a few blocks each): given back to their segments, they were
// initialized and threaded anew, shuffled, at every round of a program that
// builds and frees many such blocks (2000 of 2-32 KiB: 0.73x the release
// library's speed, 0.87x kept). Threaded anew, a page hands its blocks out
// in random order within a window.
// (The secure library's block freed last goes second on a list:
// secure_last_freed_second, hot_push; threaded anew, half would fall.)
TEST(EmptiedPages, PagesOfBlocksAbove1KiBAreKeptInEveryLibrary) {
  expect_refilled_falling(4096, 8 * bt::MiB, BRISK_TEST_SECURE ? 80 : 90);
}

// Kept pages never make a heap map memory: before it takes a page from a
// new segment, the heap gives its kept pages back to their segments, where
// blocks of any size reuse them.
TEST(EmptiedPages, GoBackBeforeTheHeapMapsMore) {
  bt::on_fresh_thread([] {
    const size_t bytes = 6 * bt::MiB;
    std::vector<void *> blocks;
    blocks.reserve(bytes / 512);  // (grown on the way, it would map a segment of its own)
    for (size_t n = 0; n < bytes; n += 1024) blocks.push_back(brisk_malloc(1024));
    for (void *p : blocks) brisk_free(p);
    const size_t mapped = brisk_mapped_bytes();
    blocks.clear();
    for (size_t n = 0; n < bytes; n += 512) blocks.push_back(brisk_malloc(512));
    EXPECT_LT(brisk_mapped_bytes(), mapped + 2 * bt::MiB)
        << bt::mib(mapped) << " mapped with the pages of 1 KiB blocks kept, then " << bt::mib(brisk_mapped_bytes())
        << " with as many bytes of 512 B blocks";
    for (void *p : blocks) brisk_free(p);
  });
}

// Pages that other threads' frees emptied (a producer whose blocks
// consumers free) are given back too when the owner sweeps: brisk_collect
// returns their memory. Before, they waited in the owner's queue until it
// allocated from them again.
TEST(EmptiedPages, PagesOtherThreadsEmptiedGoBackOnCollect) {
  bt::on_fresh_thread([] {
    const size_t count = 4 * bt::MiB / 64;
    std::vector<void *> blocks(count);
    for (auto &p : blocks) ASSERT_NE(p = brisk_malloc(64), nullptr);
    for (void *p : blocks) std::memset(p, 1, 64);
    const size_t committed = bt::stats_now().committed;
    std::thread([&] {
      for (void *p : blocks) brisk_free(p);
    }).join();
    brisk_collect();
    const size_t after = bt::stats_now().committed;
    EXPECT_LT(after + 3 * bt::MiB, committed)
        << bt::mib(committed) << " committed before, " << bt::mib(after) << " after the frees and brisk_collect";
  });
}

}  // namespace
