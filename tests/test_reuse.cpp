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
