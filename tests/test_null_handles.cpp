// NULL handles (issue #10, item 9): every brisk_heap_*, brisk_pool_*,
// stats and visit function given NULL reports an error as brisk.h documents
// instead of crashing. Built twice: against the release library and, as
// "checked.*", against the checked one, which must answer NULL the same way
// (it aborts only on handles that are not live; see test_checked.cpp).
#include <gtest/gtest.h>

#include "test_util.h"

using namespace bt;

namespace {

// A value no call of ours sets: errno must be left alone where it should.
constexpr int kUntouched = 12345;

}  // namespace

// ---- Explicit heaps ---------------------------------------------------------

TEST(NullHandle, HeapDestroyIsANoOp) {
  errno = kUntouched;
  brisk_heap_destroy(nullptr);
  EXPECT_EQ(errno, kUntouched);
}

TEST(NullHandle, HeapResetSetsEinval) {
  errno = 0;
  brisk_heap_reset(nullptr);
  EXPECT_EQ(errno, EINVAL);
}

TEST(NullHandle, HeapSetMaxBytesSetsEinval) {
  errno = 0;
  brisk_heap_set_max_bytes(nullptr, 1 * MiB);
  EXPECT_EQ(errno, EINVAL);
}

TEST(NullHandle, HeapHeldBytesIsZeroWithEinval) {
  errno = 0;
  EXPECT_EQ(brisk_heap_held_bytes(nullptr), 0u);
  EXPECT_EQ(errno, EINVAL);
}

TEST(NullHandle, HeapMallocIsNullWithEinval) {
  for (size_t n : {size_t{0}, size_t{8}, 100 * KiB, 3 * MiB}) {
    errno = 0;
    EXPECT_EQ(brisk_heap_malloc(nullptr, n), nullptr) << n;
    EXPECT_EQ(errno, EINVAL) << n;
  }
}

TEST(NullHandle, HeapCallocIsNullWithEinval) {
  errno = 0;
  EXPECT_EQ(brisk_heap_calloc(nullptr, 4, 8), nullptr);
  EXPECT_EQ(errno, EINVAL);
}

TEST(NullHandle, HeapReallocIsNullWithEinvalAndKeepsTheBlock) {
  brisk_heap_t *heap = brisk_heap_new();
  ASSERT_NE(heap, nullptr);
  void *p = brisk_heap_malloc(heap, 200);
  ASSERT_NE(p, nullptr);
  fill(p, 200, 7);
  errno = 0;
  EXPECT_EQ(brisk_heap_realloc(nullptr, p, 5000), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_TRUE(check(p, 200, 7)) << "the block was changed";
  errno = 0;
  EXPECT_EQ(brisk_heap_realloc(nullptr, nullptr, 64), nullptr);
  EXPECT_EQ(errno, EINVAL);
  brisk_free(p);
  brisk_heap_destroy(heap);
}

TEST(NullHandle, HeapAlignedAllocIsNullWithEinval) {
  errno = 0;
  EXPECT_EQ(brisk_heap_aligned_alloc(nullptr, 64, 100), nullptr);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(brisk_heap_calloc_aligned(nullptr, 4, 25, 64), nullptr);
  EXPECT_EQ(errno, EINVAL);
}

TEST(NullHandle, HeapReallocAlignedIsNullWithEinvalAndKeepsTheBlock) {
  void *p = brisk_aligned_alloc(256, 300);
  ASSERT_NE(p, nullptr);
  fill(p, 300, 8);
  errno = 0;
  EXPECT_EQ(brisk_heap_realloc_aligned(nullptr, p, 256, 5000), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_TRUE(check(p, 300, 8)) << "the block was changed";
  brisk_free(p);
}

// ---- Pools ------------------------------------------------------------------

TEST(NullHandle, PoolDestroyIsANoOp) {
  errno = kUntouched;
  brisk_pool_destroy(nullptr);
  EXPECT_EQ(errno, kUntouched);
}

TEST(NullHandle, PoolAllocIsNullWithEinval) {
  errno = 0;
  EXPECT_EQ(brisk_pool_alloc(nullptr), nullptr);
  EXPECT_EQ(errno, EINVAL);
}

TEST(NullHandle, PoolFreeSetsEinvalAndFreesNothing) {
  brisk_pool_t *pool = brisk_pool_new(64, 0, 0);
  ASSERT_NE(pool, nullptr);
  void *p = brisk_pool_alloc(pool);
  ASSERT_NE(p, nullptr);
  errno = 0;
  brisk_pool_free(nullptr, p);
  EXPECT_EQ(errno, EINVAL);
  brisk_pool_stats_t st;
  ASSERT_EQ(brisk_pool_stats(pool, &st), 0);
  EXPECT_EQ(st.live_objects, 1u) << "a free through a NULL pool freed the object";
  errno = kUntouched;
  brisk_pool_free(pool, nullptr);  // a NULL object: a no-op, as free(NULL)
  brisk_pool_free(nullptr, nullptr);
  EXPECT_EQ(errno, kUntouched);
  brisk_pool_free(pool, p);
  brisk_pool_destroy(pool);
}

TEST(NullHandle, PoolStatsGiveEinval) {
  brisk_pool_stats_t st;
  std::memset(&st, 0xEE, sizeof st);
  EXPECT_EQ(brisk_pool_stats(nullptr, &st), EINVAL);
  EXPECT_TRUE(all_zero(&st, sizeof st)) << "out is not zeroed";
  brisk_pool_t *pool = brisk_pool_new(64, 0, 0);
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(brisk_pool_stats(pool, nullptr), EINVAL);
  EXPECT_EQ(brisk_pool_stats(nullptr, nullptr), EINVAL);
  EXPECT_EQ(brisk_pool_stats(pool, &st), 0);
  brisk_pool_destroy(pool);
}

// ---- Statistics and visits -----------------------------------------------------

TEST(NullHandle, StatsGetGivesEinval) { EXPECT_EQ(brisk_stats_get(nullptr), EINVAL); }

TEST(NullHandle, StatsJsonWithoutBufferGivesTheLength) {
  // snprintf's convention: no buffer, nothing written, the length needed.
  // (Other calls may allocate in between and change a count's digits.)
  const size_t need = brisk_stats_json(nullptr, 0);
  EXPECT_GT(need, 100u);
  for (size_t len : {size_t{1}, size_t{64}, size_t{100000}, SIZE_MAX}) {
    size_t got = brisk_stats_json(nullptr, len);
    EXPECT_GT(got + 32, need) << "len " << len;
    EXPECT_LT(got, need + 32) << "len " << len;
  }
}

TEST(NullHandle, VisitBlocksWithoutVisitorSetsEinval) {
  void *p = brisk_malloc(100);  // something to visit
  ASSERT_NE(p, nullptr);
  int arg = 0;
  errno = 0;
  brisk_visit_blocks(nullptr, &arg);
  EXPECT_EQ(errno, EINVAL);
  brisk_free(p);
}
