// Reuse of freed memory: blocks freed a moment ago are handed out first
// (core/hot.c), and what a thread holds for reuse is still counted as free
// and given back when the thread ends.
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
      EXPECT_EQ(a, blocks[13]) << n;
      EXPECT_EQ(b, blocks[7]) << n;
      blocks[13] = a;
      blocks[7] = b;
      for (void *p : blocks) brisk_free(p);
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
// cache follows what the program had in use, so nothing is mapped, purged or
// unmapped the second time.
void rebuild_without_calls(size_t block, size_t count) {
  ASSERT_EQ(brisk_option_set(BRISK_OPTION_CACHE_CAP, (long long)(16 * bt::MiB)), 0);
  std::vector<void *> blocks(count);
  auto build = [&] {
    for (auto &p : blocks) {
      ASSERT_NE(p = brisk_malloc(block), nullptr);
      touch_pages(p, block);
    }
  };
  build();
  for (void *p : blocks) brisk_free(p);
  const bt::OsCalls before = bt::os_calls();
  build();
  for (void *p : blocks) brisk_free(p);
  build();
  EXPECT_EQ(bt::os_calls(), before) << "blocks of " << block;
  for (void *p : blocks) brisk_free(p);
}

TEST_F(Rebuild, HugeWorkingSetAboveTheCapIsReused) { rebuild_without_calls(3 * bt::MiB, 40); }

TEST_F(Rebuild, PagedWorkingSetAboveTheCapIsReused) { rebuild_without_calls(600 * bt::KiB, 200); }
