// Reuse of freed memory: blocks freed a moment ago are handed out first
// (core/hot.c), and what a thread holds for reuse is still counted as free
// and given back when the thread ends.
#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "test_util.h"

namespace {

const size_t kHotSizes[] = {1500, 3000, 20000, 100000, 700000};

TEST(HotReuse, JustFreedBlockComesBackFirst) {
  bt::on_fresh_thread([] {
    for (size_t n : kHotSizes) {
      std::vector<void *> blocks(24);
      for (auto &p : blocks) ASSERT_NE(p = brisk_malloc(n), nullptr);
      // Two frees from the middle: the later one comes back first.
      brisk_free(blocks[7]);
      brisk_free(blocks[13]);
      void *a = brisk_malloc(n), *b = brisk_malloc(n);
#if BRISK_TEST_SECURE
      // The secure library lists the block freed last second (hot_push),
      // and pops a list of two or more: the earlier one comes back, the
      // later waits for the next free.
      EXPECT_EQ(a, blocks[7]) << n;
      EXPECT_NE(b, blocks[13]) << n;
      blocks[7] = a;
      blocks[13] = b;
#else
      EXPECT_EQ(a, blocks[13]) << n;
      EXPECT_EQ(b, blocks[7]) << n;
      blocks[13] = a;
      blocks[7] = b;
#endif
      for (void *p : blocks) brisk_free(p);
    }
  });
}

// Huge blocks too: of two blocks of one size freed in turn, the later one
// (the thread's hot block, its pages the ones touched last) serves the next
// request of that size, and the earlier one (in a warm slot) the one after.
// Before, malloc looked through the warm slots first and took the earlier.
TEST(HotReuse, JustFreedHugeBlockComesBackFirst) {
  bt::on_fresh_thread([] {
    for (size_t n : {(size_t)2 << 20, (size_t)5 << 20, (size_t)24 << 20}) {
      void *p = brisk_malloc(n), *q = brisk_malloc(n);
      ASSERT_NE(p, nullptr);
      ASSERT_NE(q, nullptr);
      brisk_free(p);
      brisk_free(q);
      void *a = brisk_malloc(n), *b = brisk_malloc(n);
      EXPECT_EQ(a, q) << n;
      EXPECT_EQ(b, p) << n;
      brisk_free(a);
      brisk_free(b);
    }
  });
}

// A block of 1 KiB or less goes back to its page. The release library
// hands the page's last freed block out next, while its lines are still in
// the cache (page_take_back); the secure library does not, since the block
// a program just freed is what a use-after-free would count on getting.
TEST(PageReuse, JustFreedSmallBlockComesBackFirstButNotInTheSecureLibrary) {
  bt::on_fresh_thread([] {
    for (size_t n : {16, 64, 256, 1024}) {
      std::vector<void *> blocks(24);
      for (auto &p : blocks) ASSERT_NE(p = brisk_malloc(n), nullptr);
      brisk_free(blocks[7]);
      brisk_free(blocks[13]);
      void *a = brisk_malloc(n), *b = brisk_malloc(n);
#if BRISK_TEST_SECURE
      // (The page still has fresh blocks to hand out.)
      EXPECT_NE(a, blocks[13]) << n;
      EXPECT_NE(a, blocks[7]) << n;
#else
      EXPECT_EQ(a, blocks[13]) << n;
      EXPECT_EQ(b, blocks[7]) << n;
#endif
      for (size_t i = 0; i < blocks.size(); i++)
        if (i != 7 && i != 13) brisk_free(blocks[i]);
      brisk_free(a);
      brisk_free(b);
    }
  });
}

// malloc finds the hot list of a size above 1 KiB from a table of classes
// (types.h, large_size_to_class): with a block of each smaller class on its
// hot list, every size gets a block of its own class, the smallest that
// holds it, never one of a class beside it.
TEST(HotReuse, EverySizeAbove1KiBGetsABlockOfItsOwnClass) {
  bt::on_fresh_thread([] {
    // The classes, as the blocks handed out say: all held until the end,
    // so that none of these mallocs finds a hot list.
    std::vector<size_t> classes;
    std::vector<void *> held;
    for (size_t s = 1025; s <= 1024 * 1024;) {
      void *p = brisk_malloc(s);
      ASSERT_NE(p, nullptr);
      held.push_back(p);
      classes.push_back(brisk_usable_size(p));
      ASSERT_GE(classes.back(), s);
      s = classes.back() + 1;
    }
    ASSERT_GE(classes.size(), 40u);
    for (void *p : held) brisk_free(p);  // a block of each class on its hot list
    size_t prev = 1024;
    for (size_t c : classes) {
      brisk_free(brisk_malloc(c));  // (the heap's cap may have refused its own)
      for (size_t s : {prev + 1, prev + 255, (prev + c) / 2, c - 1, c}) {
        void *p = brisk_malloc(s);
        ASSERT_NE(p, nullptr);
        EXPECT_EQ(brisk_usable_size(p), c) << s << " bytes";
        brisk_free(p);
      }
      prev = c;
    }
  });
}

TEST(HotReuse, StatisticsCountHotBlocksAsFree) {
  bt::on_fresh_thread([] {
    void *blocks[8];
    for (size_t n : kHotSizes) {
      brisk_stats_t before = bt::stats_now();
      unsigned cls = bt::class_for(before, n);
      ASSERT_NE(cls, 0u);
      for (auto &p : blocks) ASSERT_NE(p = brisk_malloc(n), nullptr);
      EXPECT_EQ(bt::stats_now().class_live_blocks[cls], before.class_live_blocks[cls] + 8) << n;
      for (void *p : blocks) brisk_free(p);
      brisk_stats_t after = bt::stats_now();
      EXPECT_EQ(after.class_live_blocks[cls], before.class_live_blocks[cls]) << n;
      EXPECT_EQ(after.in_use, before.in_use) << n;
    }
  });
}

// What a thread keeps on its hot lists (thread_cached) is bounded: at most
// HOT_HEAP_BYTES (4 MiB) over the classes above 8 KiB (above 1 KiB in the
// secure library), and 128 KiB a class below, however much it frees.
TEST(HotReuse, AThreadKeepsAtMost4MiBOfFreedBlocks) {
  bt::on_fresh_thread([] {
    std::vector<void *> blocks;
    blocks.reserve(1024);  // (a vector that grows frees blocks of these sizes)
    size_t before = bt::stats_now().thread_cached;
    for (size_t n : {1500, 3000, 9000, 20000, 60000, 100000, 300000, 700000, 1000000})
      for (int i = 0; i < 64; i++) blocks.push_back(brisk_malloc(n));
    for (void *p : blocks) ASSERT_NE(p, nullptr);
    EXPECT_LE(bt::stats_now().thread_cached, before);  // the mallocs took them
    for (void *p : blocks) brisk_free(p);
    size_t kept = bt::stats_now().thread_cached;
    EXPECT_LE(kept, (size_t{4} << 20) + 2 * (size_t{128} << 10));
    EXPECT_GE(kept, size_t{3} << 20);  // the classes freed first fill the budget
  });
}

// Blocks of 1-8 KiB (in 64 KiB pages) are not counted against the 4 MiB:
// their frees take the small classes' path (the segment's free_class byte),
// which keeps no count of the heap's bytes. With the budget full of bigger
// blocks, each of their classes still fills its stack (64 blocks or 128 KiB),
// past the 4 MiB, and the block freed last comes back first.
TEST(HotReuse, BlocksOf1To8KiBStayHotWhenTheBigBlocksFillTheBudget) {
  if (BRISK_TEST_CHECKED) GTEST_SKIP() << "the checked library keeps no hot stacks";
  if (BRISK_TEST_SECURE) GTEST_SKIP() << "the secure library counts its classes above 1 KiB against the budget";
  bt::on_fresh_thread([] {
    std::vector<void *> big, small;
    big.reserve(16);  // (a vector that grows frees blocks of these sizes)
    small.reserve(512);
    for (size_t n : {1000000, 900000, 700000, 500000, 400000})
      for (int i = 0; i < 2; i++) ASSERT_NE(big.emplace_back(brisk_malloc(n)), nullptr);
    const size_t sizes[] = {2048, 3072, 4096, 5120, 6144, 8192};  // (each a class's size)
    size_t stackable = 0;
    for (size_t n : sizes) {
      for (int i = 0; i < 70; i++) ASSERT_NE(small.emplace_back(brisk_malloc(n)), nullptr);
      stackable += std::min<size_t>(64, (128 << 10) / n) * n;
    }
    size_t before = bt::stats_now().thread_cached;
    for (void *p : big) brisk_free(p);
    size_t budget_spent = bt::stats_now().thread_cached - before;
    ASSERT_LE(budget_spent, size_t{4} << 20);
    for (void *p : small) brisk_free(p);
    size_t stacked = bt::stats_now().thread_cached - before - budget_spent;
    EXPECT_EQ(stacked, stackable);
    EXPECT_GT(budget_spent + stacked, size_t{4} << 20);
    // The last class's stack took its first 16 blocks (128 KiB), the last
    // of them on top; the rest went to their pages.
    void *top = small[small.size() - 70 + 15];
    EXPECT_EQ(brisk_malloc(8192), top);
    brisk_free(top);
  });
}

// The 4 MiB cap counts the blocks on the lists: once a class's blocks are
// taken again, their bytes are free for whichever class frees next (a room
// lent to each class, kept after its blocks were taken, was tried and lost
// 14-29% on a window of random 32 KiB-1 MiB blocks: docs/design.md).
TEST(HotReuse, BytesTakenOffTheListsGoToTheClassThatFreesNext) {
  bt::on_fresh_thread([] {
    // (Less what the thread's small blocks keep, on their own stacks.)
    size_t small_kept = bt::stats_now().thread_cached;
    auto kept = [small_kept] { return bt::stats_now().thread_cached - small_kept; };
    // Two blocks each of two classes near 1 MiB: 3.5 MiB or more, on the lists.
    void *big[4] = {brisk_malloc(1000000), brisk_malloc(1000000), brisk_malloc(900000), brisk_malloc(900000)};
    size_t listed = 0;
    for (void *p : big) {
      ASSERT_NE(p, nullptr);
      listed += brisk_usable_size(p);
    }
    ASSERT_GE(listed, size_t{7} << 19);
    for (void *p : big) brisk_free(p);
    EXPECT_EQ(kept(), listed);
    size_t one_each = brisk_usable_size(big[0]) + brisk_usable_size(big[2]);
    for (void *&p : big) ASSERT_NE(p = brisk_malloc(brisk_usable_size(p)), nullptr);
    // (The secure library leaves a class's last block on its list: hot_ready.)
    EXPECT_EQ(kept(), BRISK_TEST_SECURE ? one_each : 0u);
    // Blocks of a third class: the 3.5 MiB came off the lists, so they fit.
    void *a = brisk_malloc(700000), *b = brisk_malloc(700000);
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    size_t size = brisk_usable_size(a);
    brisk_free(a);
    brisk_free(b);
    EXPECT_EQ(kept(), 2 * size + (BRISK_TEST_SECURE ? one_each : 0));
#if BRISK_TEST_SECURE
    EXPECT_EQ(brisk_malloc(700000), a);  // from the hot list: the last freed second
    b = brisk_malloc(700000);            // not from it: b is its last block
    ASSERT_NE(b, nullptr);
#else
    EXPECT_EQ(brisk_malloc(700000), b);  // from the hot list: the last freed
    EXPECT_EQ(brisk_malloc(700000), a);
#endif
    brisk_free(a);
    brisk_free(b);
    for (void *p : big) brisk_free(p);
    EXPECT_LE(kept(), size_t{4} << 20);
  });
}

// Small blocks have stacks too (not in the secure library, whose small
// blocks come from pages in random order). A run of frees past a stack's
// bound (a structure torn down) goes on to the pages, as a free did before
// the stacks: the thread keeps no more than the stack holds, its heap
// checks clean, and the stack's blocks come back first, the last pushed
// first.
TEST(HotReuse, ARunOfSmallFreesPastTheStackGoesOnToThePages) {
  bt::on_fresh_thread([] {
    size_t kept_before = bt::stats_now().thread_cached;
    std::vector<void *> blocks(1000);
    for (auto &p : blocks) ASSERT_NE(p = brisk_malloc(48), nullptr);
    for (void *p : blocks) brisk_free(p);
    size_t kept = bt::stats_now().thread_cached - kept_before;
    EXPECT_LE(kept, 64 * brisk_usable_size(blocks[0]));
    EXPECT_EQ(brisk_check_heap(), BRISK_CHECK_OK) << brisk_check_message();
#if !BRISK_TEST_SECURE
    EXPECT_GT(kept, 0u);
    size_t stacked = kept / brisk_usable_size(blocks[0]);
    ASSERT_LE(stacked, blocks.size());
    void *again[8];
    for (size_t i = 0; i < 8 && i < stacked; i++)
      EXPECT_EQ(again[i] = brisk_malloc(48), blocks[stacked - 1 - i]) << i;
    for (size_t i = 0; i < 8 && i < stacked; i++) brisk_free(again[i]);
#endif
    brisk_collect();
    EXPECT_EQ(brisk_check_heap(), BRISK_CHECK_OK) << brisk_check_message();
  });
}

// The pages of blocks a thread freed just before it exited are free, not
// stranded in abandoned segments.
TEST(HotReuse, ThreadExitGivesHotBlocksBack) {
  brisk_stats_t before = bt::stats_now();
  bt::on_fresh_thread([] {
    std::vector<void *> blocks(64);
    for (auto &p : blocks) ASSERT_NE(p = brisk_malloc(8000), nullptr);
    for (void *p : blocks) brisk_free(p);
  });
  brisk_stats_t after = bt::stats_now();
  EXPECT_EQ(after.abandoned_segments, before.abandoned_segments);
  EXPECT_EQ(after.abandoned_bytes, before.abandoned_bytes);
}

// A visit (and the leak report built on it) sees hot blocks as free.
TEST(HotReuse, VisitSkipsHotBlocks) {
  bt::on_fresh_thread([] {
    void *keep = brisk_malloc(5000);
    void *gone = brisk_malloc(5000);
    ASSERT_NE(keep, nullptr);
    ASSERT_NE(gone, nullptr);
    brisk_free(gone);
    struct Seen {
      void *keep, *gone;
      bool saw_keep = false, saw_gone = false;
    } seen{keep, gone};
    brisk_visit_blocks(
        [](void *p, size_t, void *arg) {
          auto *s = static_cast<Seen *>(arg);
          if (p == s->keep) s->saw_keep = true;
          if (p == s->gone) s->saw_gone = true;
          return 0;
        },
        &seen);
    EXPECT_TRUE(seen.saw_keep);
    EXPECT_FALSE(seen.saw_gone);
    brisk_free(keep);
  });
}

}  // namespace

// ---- Working sets freed and built again --------------------------------------

// No purge pass may run while a test counts system calls.
class Rebuild : public ::testing::Test {
 protected:
  void SetUp() override {
    delay_ = brisk_option_get(BRISK_OPTION_PURGE_DELAY_MS);
    ASSERT_EQ(brisk_option_set(BRISK_OPTION_PURGE_DELAY_MS, 3600 * 1000), 0);
    brisk_collect();  // what earlier tests left cached is not this test's working set
  }
  void TearDown() override {
    brisk_option_set(BRISK_OPTION_PURGE_DELAY_MS, delay_);
    brisk_option_set(BRISK_OPTION_CACHE_CAP, cap_);
  }
  long long delay_ = 0, cap_ = brisk_option_get(BRISK_OPTION_CACHE_CAP);
};

void touch_pages(void *p, size_t n) {
  for (size_t off = 0; off < n; off += 4096) static_cast<volatile char *>(p)[off] = 1;
  static_cast<volatile char *>(p)[n - 1] = 1;
}

// One buffer at a time, of sizes that vary 5x: the buffer freed last serves
// the next whole, whatever its size, so the loop makes no system call (a
// shrink would drop pages the next, bigger buffer faults back in).
TEST_F(Rebuild, BufferLoopOfVariedSizesMakesNoSystemCall) {
  bt::Rng r(7);
  void *first = brisk_malloc(25 * bt::MiB);
  ASSERT_NE(first, nullptr);
  touch_pages(first, 25 * bt::MiB);
  brisk_free(first);
  const bt::OsCalls before = bt::os_calls();
  for (int i = 0; i < 40; ++i) {
    size_t n = 5 * bt::MiB + r.next() % (20 * bt::MiB);
    void *p = brisk_malloc(n);
    ASSERT_NE(p, nullptr);
    touch_pages(p, n);
    brisk_free(p);
  }
  EXPECT_EQ(bt::os_calls(), before);
}

// A working set larger than the cache cap, freed whole and built again: the
// cache follows what the program had in use, so nothing is mapped or
// unmapped again. The first frees purge what they free (a program that
// frees and sleeps must get its memory back): the first rebuild costs at
// most one purge per block. Taking back blocks purged that recently shows
// a rebuild, and from then on the working set stays warm: no call at all.
void rebuild_without_calls(size_t block, size_t count) {
  ASSERT_EQ(brisk_option_set(BRISK_OPTION_CACHE_CAP, (long long)(16 * bt::MiB)), 0);
  std::vector<void *> blocks(count);
  auto build = [&] {
    for (auto &p : blocks) {
      ASSERT_NE(p = brisk_malloc(block), nullptr);
      touch_pages(p, block);
    }
  };
  auto free_all = [&] {
    for (void *p : blocks) brisk_free(p);
  };
  build();
  free_all();
  const bt::OsCalls first = bt::os_calls();
  build();
  free_all();
  const bt::OsCalls rebuilt = bt::os_calls();
  EXPECT_EQ(rebuilt.mmap, first.mmap) << "blocks of " << block;
  EXPECT_EQ(rebuilt.munmap, first.munmap) << "blocks of " << block;
  EXPECT_LE(rebuilt.madvise - first.madvise, count) << "blocks of " << block;
  build();
  free_all();
  build();
  EXPECT_EQ(bt::os_calls(), rebuilt) << "blocks of " << block << ": the rebuilt working set was not kept warm";
  free_all();
}

TEST_F(Rebuild, HugeWorkingSetAboveTheCapIsReused) { rebuild_without_calls(3 * bt::MiB, 40); }

TEST_F(Rebuild, PagedWorkingSetAboveTheCapIsReused) { rebuild_without_calls(600 * bt::KiB, 200); }

// brisk_collect asks for everything back: it also ends a rebuild, so the
// frees that follow purge again instead of keeping what the rebuild had
// in use (before, the rebuild outlived the collect by two purge delays).
TEST_F(Rebuild, CollectEndsTheRebuild) {
  ASSERT_EQ(brisk_option_set(BRISK_OPTION_CACHE_CAP, (long long)(256 * bt::MiB)), 0);
  const size_t block = 3 * bt::MiB, count = 20;
  std::vector<void *> blocks(count);
  auto build_and_free = [&] {
    for (auto &p : blocks) {
      ASSERT_NE(p = brisk_malloc(block), nullptr);
      touch_pages(p, block);
    }
    for (void *p : blocks) brisk_free(p);
  };
  build_and_free();
  build_and_free();  // takes back blocks purged moments ago: a rebuild
  brisk_collect();
  const bt::OsCalls before = bt::os_calls();
  build_and_free();
  EXPECT_GE(bt::os_calls().madvise - before.madvise, count / 2)
      << "the frees after brisk_collect kept their blocks";
}
