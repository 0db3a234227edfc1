// The checked library's check at exit (extra/exit_check.c), underflows, and
// its leak report: each misuse aborts with a message naming it, the address,
// the block's size class and the stacks (see test_checked_misuse.cpp).
//
// The binary exports its symbols (ENABLE_EXPORTS), so the stacks name the
// functions of checked_misuse.h; death tests re-execute it ("threadsafe")
// and are skipped under ThreadSanitizer.
#include "checked_misuse.h"

// ---- The check at exit -------------------------------------------------------------------

// A block never freed, or a free block no malloc takes again, would escape
// the checks of free and malloc: at exit every block is checked as they
// would have (extra/exit_check.c), after other threads have ended.
TEST_F(CheckedMisuse, OverflowOfABlockNeverFreedIsCaughtAtExit) {
  for (size_t n : {size_t{10}, size_t{5000}, size_t{300000}})
    EXPECT_DEATH(
        {
          std::thread([] { g_sink = checked_test_alloc(100); }).join();  // a thread that ended
          char *p = static_cast<char *>(checked_test_alloc(n));
          poke(p, n, 0x41);
          std::exit(0);
        },
        "exit\\(" ADDR "\\): heap buffer overflow: the block \\(" + std::to_string(n) +
            " bytes[^\n]*byte 0 after it is 0x41, not the canary 0xab[^\n]*" DETECTED("") ALLOCATED)
        << "size " << n;
}

TEST_F(CheckedMisuse, OverflowPastTheCanaryOfABlockNeverFreedIsCaughtAtExit) {
  // Through the canary into brisk's trailer: the block no longer says what
  // it is, but a block handed out and not free must.
  EXPECT_DEATH(
      {
        char *p = static_cast<char *>(checked_test_alloc(10));
        for (size_t i = 10; i < 10 + 32; i++) poke(p, i, 0x41);
        std::exit(0);
      },
      "exit: corrupt block: the trailer of the block at " ADDR
      " \\(size class [0-9]+\\) does not check \\(a heap buffer overflow of it past its canary, or an "
      "underflow of the block after it\\)");
}

namespace {

// Inverts the byte at p: a write that changes it, whatever it held (a
// trailer's bytes are hashes and stack ids, any value).
void flip(void *p) {
  auto *q = static_cast<volatile uint8_t *>(p);
  *q = static_cast<uint8_t>(~*q);
}

// Two blocks of n bytes, b right after a in a page: of 32 blocks, the two
// closest (the distance of two neighbours is the block size).
void adjacent_blocks(size_t n, char **a, char **b) {
  char *p[32];
  for (auto &q : p) q = static_cast<char *>(checked_test_alloc(n));
  ptrdiff_t best = PTRDIFF_MAX;
  for (char *x : p)
    for (char *y : p)
      if (y > x && y - x < best) best = y - x, *a = x, *b = y;
}

}  // namespace

// An underflow writes over the trailer of the block before: caught at the
// free of the block that underflowed, at each field of that trailer
// (requested size, offset and stacks, seal), the block before live or freed.
TEST_F(CheckedMisuse, UnderflowIsCaughtAtTheFreeOfTheBlock) {
  for (size_t back : {1, 5, 8, 12, 17, 24}) {
    for (bool before_freed : {false, true}) {
      SCOPED_TRACE(testing::Message() << back << " bytes back, the block before "
                                      << (before_freed ? "freed" : "live"));
      EXPECT_DEATH(
          {
            char *a = nullptr;
            char *b = nullptr;
            adjacent_blocks(200, &a, &b);
            if (before_freed) checked_test_free(a);
            flip(b - back);
            checked_test_free(b);
            std::exit(0);
          },
          "free\\(" ADDR
          "\\): heap buffer underflow: the bytes before the block \\(200 bytes, size class [0-9]+\\) "
          "were overwritten: the trailer of the block before it, at " ADDR
          ", does not check \\(an underflow of this block, or an overflow of that one past its canary\\)" DETECTED(
              "checked_test_free") ALLOCATED);
    }
  }
}

// The same write, the block never freed: the check at exit finds the block
// before broken, live or freed.
TEST_F(CheckedMisuse, UnderflowOfABlockNeverFreedIsCaughtAtExit) {
  EXPECT_DEATH(
      {
        char *a = nullptr;
        char *b = nullptr;
        adjacent_blocks(200, &a, &b);
        flip(b - 1);
        std::exit(0);
      },
      "exit: corrupt block: the trailer of the block at " ADDR
      " \\(size class [0-9]+\\) does not check \\(a heap buffer overflow of it past its canary, or an "
      "underflow of the block after it\\)");
  EXPECT_DEATH(
      {
        char *a = nullptr;
        char *b = nullptr;
        adjacent_blocks(200, &a, &b);
        checked_test_free(a);
        flip(b - 8);
        std::exit(0);
      },
      "exit: write after free: the trailer of the freed block at " ADDR
      " \\(size class [0-9]+\\) was overwritten \\(a write after free, or an underflow of the block after it\\)");
}

// Blocks whose neighbours are freed and allocated again on other threads
// meanwhile raise no false alarm (a trailer being written is read again).
TEST_F(CheckedMisuse, NeighboursFreedOnOtherThreadsRaiseNoAlarm) {
  std::vector<char *> blocks(4000);
  for (auto &p : blocks) p = static_cast<char *>(checked_test_alloc(48));
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; t++)
    threads.emplace_back([&blocks, t] {
      for (size_t i = static_cast<size_t>(t); i < blocks.size(); i += 2) {
        checked_test_free(blocks[i]);
        blocks[i] = static_cast<char *>(checked_test_alloc(48));
      }
    });
  for (auto &th : threads) th.join();
  for (char *p : blocks) checked_test_free(p);
  SUCCEED();
}

TEST_F(CheckedMisuse, WriteAfterFreeOfABlockNeverHandedOutAgainIsCaughtAtExit) {
  EXPECT_DEATH(
      {
        void *p = checked_test_alloc(300);
        checked_test_free(p);
        poke(p, 40, 0x42);
        std::exit(0);
      },
      "exit: write after free: the block " ADDR
      " \\(300 bytes[^\n]*byte 40 of the block is 0x42, not 0xdf[^\n]*" DETECTED("") ALLOCATED FREED);
  EXPECT_DEATH(
      {
        void *p = checked_test_alloc(64);
        checked_test_free(p);
        *static_cast<volatile uintptr_t *>(p) = 0x4141414141414141ull;
        std::exit(0);
      },
      "exit: write after free: page " ADDR " \\(blocks of [0-9]+\\): [a-z ]*list holds " ADDR ", outside "
      "the page's blocks \\(the first word of a free block, its link, was overwritten\\)");
}

TEST_F(CheckedMisuse, TheCheckAtExitIsOffWithBrisk_EXIT_CHECK0) {
  EXPECT_EXIT(
      {
        setenv("BRISK_EXIT_CHECK", "0", 1);
        char *p = static_cast<char *>(checked_test_alloc(10));
        poke(p, 10, 0x41);
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

// ---- Leaks at exit -----------------------------------------------------------------------

// The report's lines for blocks leaked by checked_test_leak: "N blocks of
// SIZE bytes, TOTAL bytes, allocated at:" and a stack through it.
#define LEAKED_AT_TEST_LEAK(n, size, total)                                                                       \
  "  " n " blocks of " size " bytes, " total " bytes, allocated at:\n" FRAMES                                     \
  "    #[0-9]+ 0x[0-9a-f]+ [^\n]*checked_test_leak[^\n]*\n" FRAMES

TEST_F(CheckedMisuse, LeakReportGroupsLeaksByAllocationStack) {
  // BRISK_LEAK_REPORT is read at start: the child re-executed by the death
  // test inherits it.
  setenv("BRISK_LEAK_REPORT", "1", 1);
  EXPECT_EXIT(
      {
        checked_test_leak(200, 10);
        checked_test_leak(300, 3);
        bt::clear_dead_stack();
        std::exit(0);
      },
      ::testing::ExitedWithCode(0),
      "brisk leak report: 13 leaked blocks, 2900 bytes \\(pid [0-9]+, [^)]*\\)\n" LEAKED_AT_TEST_LEAK(
          "10", "200", "2000") LEAKED_AT_TEST_LEAK("3", "300", "900"));
  unsetenv("BRISK_LEAK_REPORT");
}

// A block a global points to, and one it points to, are still reachable at
// exit: not leaks, but counted on a line of their own (the C and C++
// runtimes keep such blocks until the process ends: brisk-run --leaks used
// to fail every C++ program on them).
void *volatile g_kept;

TEST_F(CheckedMisuse, BlocksStillReachableAtExitAreNoLeaks) {
  setenv("BRISK_LEAK_REPORT", "1", 1);
  EXPECT_EXIT(
      {
        checked_test_leak(200, 4);
        void *kept = checked_test_alloc(300);
        *static_cast<void **>(kept) = checked_test_alloc(50);
        g_kept = kept;
        bt::clear_dead_stack();
        std::exit(0);
      },
      ::testing::ExitedWithCode(0),
      "brisk leak report: 4 leaked blocks, 800 bytes \\(pid [0-9]+, [^)]*\\)\n" LEAKED_AT_TEST_LEAK(
          "4", "200", "800") "  and [0-9]+ blocks, [0-9]+ bytes, still reachable \\(not leaks\\)\n");
  unsetenv("BRISK_LEAK_REPORT");
}

TEST_F(CheckedMisuse, NoStacksRecordedWithStackDepthZero) {
  setenv("BRISK_LEAK_REPORT", "1", 1);
  setenv("BRISK_STACK_DEPTH", "0", 1);
  EXPECT_EXIT(
      {
        checked_test_leak(100, 5);
        bt::clear_dead_stack();
        std::exit(0);
      },
      ::testing::ExitedWithCode(0),
      "brisk leak report: 5 leaked blocks, 500 bytes \\(pid [0-9]+, [^)]*\\)\n"
      "  5 blocks of 100 bytes, 500 bytes, allocated with no stack recorded");
  unsetenv("BRISK_STACK_DEPTH");
  unsetenv("BRISK_LEAK_REPORT");
}
