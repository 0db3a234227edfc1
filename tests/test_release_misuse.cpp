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

void *volatile g_sink;
void *launder(void *p) {
  g_sink = p;
  return g_sink;
}

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
  SUCCEED();
}
