// Pools of every object size with every alignment the API accepts (issue
// #10, item 4): brisk_pool_new(857, 1, 0) used to space objects 857 bytes
// apart, so the free-list link each free object holds was written at a
// misaligned address (undefined behaviour, reported by UBSan). Objects must
// be aligned as asked, links aligned for a pointer, objects apart by at
// least their size, and the statistics must say what the pool really uses.
// Run under the ASan+UBSan build too: a misaligned link halts it there.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

using namespace bt;

namespace {

const size_t kSizes[] = {1,    3,    7,    8,     9,     15,    17,        31,        100,        857,
                         1000, 4095, 4097, 10001, 65537, 99999, 512 * KiB, 1 * MiB - 1, 1 * MiB};
const size_t kAligns[] = {1, 2, 4, 8, 16, 64, 4096};

// Objects allocated at once: enough to span several slabs and thread-cache
// flushes for small objects, a few slabs for the largest, a bounded
// footprint for all.
size_t object_count(size_t object_size) {
  size_t n = 8 * MiB / object_size;
  return std::min<size_t>(std::max<size_t>(n, 40), 5000);
}

// Allocates n objects, checks their alignment, writes each one whole
// (`size` bytes, the caller's) and then checks every pattern: an object
// overlapping another shows as a damaged pattern.
void allocate_and_check(brisk_pool_t *pool, size_t size, size_t align, size_t n, uint64_t round,
                        std::vector<unsigned char *> &objs) {
  objs.clear();
  for (size_t i = 0; i < n; ++i) {
    unsigned char *p = static_cast<unsigned char *>(brisk_pool_alloc(pool));
    ASSERT_NE(p, nullptr) << "object " << i;
    ASSERT_TRUE(aligned_to(p, align)) << "object " << i << " at " << static_cast<void *>(p);
    ASSERT_TRUE(aligned_to(p, alignof(void *)))
        << "object " << i << " at " << static_cast<void *>(p) << ": its free-list link would be misaligned";
    fill(p, size, round * 1000003 + i);
    objs.push_back(p);
  }
  for (size_t i = 0; i < n; ++i)
    ASSERT_TRUE(check(objs[i], size, round * 1000003 + i)) << "object " << i << " overlaps another";
  std::vector<unsigned char *> sorted(objs);
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 1; i < n; ++i)
    ASSERT_GE(static_cast<size_t>(sorted[i] - sorted[i - 1]), size) << "objects closer than their size";
}

}  // namespace

TEST(PoolOddAlignment, ObjectsAndFreeListLinksAreAligned) {
  std::vector<unsigned char *> objs;
  for (size_t size : kSizes) {
    for (size_t align : kAligns) {
      SCOPED_TRACE("brisk_pool_new(" + std::to_string(size) + ", " + std::to_string(align) + ", 0)");
      brisk_pool_t *pool = brisk_pool_new(size, align, 0);
      ASSERT_NE(pool, nullptr);
      brisk_pool_stats_t st;
      ASSERT_EQ(brisk_pool_stats(pool, &st), 0);
      // The effective values: at least the alignment asked and a pointer's.
      EXPECT_EQ(st.alignment, std::max(align, alignof(void *)));
      EXPECT_GE(st.object_size, size);
      EXPECT_GE(st.object_size, 16u);
      EXPECT_EQ(st.object_size % st.alignment, 0u);
      EXPECT_LT(st.object_size, std::max<size_t>(size, 16) + st.alignment);

      const size_t n = object_count(st.object_size);
      allocate_and_check(pool, size, align, n, 1, objs);
      if (HasFatalFailure()) return;
      // Every other object first, then the rest: the free lists link
      // objects all over the slabs, and the second round reuses them.
      for (size_t i = 0; i < n; i += 2) brisk_pool_free(pool, objs[i]);
      for (size_t i = 1; i < n; i += 2) brisk_pool_free(pool, objs[i]);
      allocate_and_check(pool, size, align, n, 2, objs);
      if (HasFatalFailure()) return;
      ASSERT_EQ(brisk_pool_stats(pool, &st), 0);
      EXPECT_EQ(st.live_objects, n);
      EXPECT_GE(st.bytes_held, st.capacity * st.object_size);
      for (unsigned char *p : objs) brisk_pool_free(pool, p);
      brisk_pool_destroy(pool);
    }
  }
}

// The same sizes from several threads at once: objects freed by one thread
// go back through the pool's shared batches, whose links must be aligned
// as well.
TEST(PoolOddAlignment, ObjectsPassedBetweenThreadsStayAligned) {
  for (size_t align : {1, 2, 4}) {
    brisk_pool_t *pool = brisk_pool_new(857, align, 0);
    ASSERT_NE(pool, nullptr);
    std::vector<unsigned char *> objs;
    allocate_and_check(pool, 857, align, 3000, 3, objs);
    if (HasFatalFailure()) return;
    std::thread t([&] {
      for (unsigned char *p : objs) brisk_pool_free(pool, p);
    });
    t.join();
    std::thread u([&] {
      std::vector<unsigned char *> again;
      allocate_and_check(pool, 857, align, 3000, 4, again);
      for (unsigned char *p : again) brisk_pool_free(pool, p);
    });
    u.join();
    brisk_pool_destroy(pool);
  }
}
