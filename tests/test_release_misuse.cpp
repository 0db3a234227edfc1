// The release library's one check of a free (fast_path.h,
// release_freed_twice): a block freed twice in a row, on the list it went
// on, aborts with a message instead of being handed out twice. Built on
// brisk_core (the release library; the secure and checked libraries check
// every free in full: test_secure.cpp, test_checked_misuse.cpp).
//
// Death tests run in the "threadsafe" style and are skipped under
// ThreadSanitizer, which does not support forking a threaded process.
#include <gtest/gtest.h>

#include "test_util.h"

using namespace bt;

namespace {

using ReleaseMisuse = DeathTest;

}  // namespace

// Page blocks (up to 1 KiB) go back on their page's list, larger ones up to
// 1 MiB on the heap's hot list: the block freed last heads either.
TEST_F(ReleaseMisuse, DoubleFreeInARowAborts) {
  for (size_t n : {16, 100, 1024, 4096, 20000, 300000}) {
    SCOPED_TRACE(n);
    EXPECT_DEATH(
        {
          void *p = brisk_malloc(n);
          brisk_free(p);
          brisk_free(launder(p));
        },
        "brisk: error: free\\(0x[0-9a-f]+\\): double free \\(the block is the next its list hands out\\)");
  }
}

// Huge blocks (above 1 MiB) are checked in full, out of line: freed twice,
// one went back to the caches twice and two later mallocs got the same
// block; freed or reallocated at an inside pointer, the whole block went.
TEST_F(ReleaseMisuse, HugeBlockFreedTwiceOrInsideAborts) {
  const char *not_live =
      "brisk: error: (free|realloc)\\(0x[0-9a-f]+\\): double free or invalid pointer \\(its block is not live\\)";
  const char *inside =
      "brisk: error: (free|realloc)\\(0x[0-9a-f]+\\): pointer is inside a block, not at its start";
  for (size_t n : {size_t{2} << 20, size_t{9} << 20}) {
    SCOPED_TRACE(n);
    EXPECT_DEATH(
        {
          char *p = (char *)brisk_malloc(n);
          brisk_free(p);
          brisk_free(launder(p));
        },
        not_live);
    EXPECT_DEATH(
        {
          char *p = (char *)brisk_malloc(n);
          brisk_free(p);
          g_sink = brisk_realloc(launder(p), 2 * n);
        },
        not_live);
    EXPECT_DEATH(brisk_free((char *)launder(brisk_malloc(n)) + 4096), inside);
    EXPECT_DEATH(brisk_free((char *)launder(brisk_malloc(n)) + (5u << 20) % n + 64), inside);
    EXPECT_DEATH(g_sink = brisk_realloc((char *)launder(brisk_malloc(n)) + 64, n / 2), inside);
  }
}

// The check never fires on correct use: blocks freed and allocated again in
// every order, the same block handed back and freed many times over.
TEST(ReleaseFree, CorrectUseRaisesNothing) {
  for (size_t n : {16, 100, 1024, 4096, 20000, 300000}) {
    for (int i = 0; i < 1000; i++) {
      void *a = brisk_malloc(n);
      void *b = brisk_malloc(n);
      brisk_free(a);
      void *c = brisk_malloc(n);  // a again, as a rule
      brisk_free(b);
      brisk_free(c);
    }
  }
  for (size_t n : {size_t{2} << 20, size_t{9} << 20}) {  // huge blocks, reused warm and resized
    for (int i = 0; i < 50; i++) {
      char *a = (char *)brisk_malloc(n);
      char *b = (char *)brisk_realloc(brisk_malloc(n / 2), n + (size_t)i * 4096);
      brisk_free(a);
      a = (char *)brisk_realloc(brisk_malloc(n), n / 3);
      brisk_free(b);
      brisk_free(a);
    }
  }
  SUCCEED();
}
