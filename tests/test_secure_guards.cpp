// The secure library's guard pages (brisk_core_secure): a write past the
// end of a segment or a huge block, or before a huge block into its
// header, faults on a PROT_NONE page instead of reaching another block or
// brisk's metadata. (Split from test_secure.cpp.)
//
// Death tests run in the "threadsafe" style and are skipped under
// ThreadSanitizer, which does not support forking a threaded process.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdint>
#include <cstring>
#include <sys/mman.h>
#include <unistd.h>

#include "test_util.h"

using namespace bt;

namespace {
using SecureDeath = bt::DeathTest;
void poke_byte(void *at, unsigned char value) { *(volatile unsigned char *)launder(at) = value; }
}  // namespace

// ---- Guard pages ------------------------------------------------------------

namespace {

// A fault inside [g_guard_lo, g_guard_hi) exits with 42, any other with 43:
// the tests below show the write stopped on a guard page, not somewhere
// unmapped further on.
uintptr_t g_guard_lo, g_guard_hi;

void on_fault(int, siginfo_t *info, void *) {
  uintptr_t a = (uintptr_t)info->si_addr;
  _exit(a >= g_guard_lo && a < g_guard_hi ? 42 : 43);
}

void expect_guard(uintptr_t lo, uintptr_t hi) {
  g_guard_lo = lo;
  g_guard_hi = hi;
  struct sigaction sa = {};
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO;
  sigaction(SIGSEGV, &sa, nullptr);
}

uintptr_t page_size() { return (uintptr_t)sysconf(_SC_PAGESIZE); }

}  // namespace

TEST_F(SecureDeath, UnderflowOfAHugeBlockFaultsBeforeReachingItsHeader) {
  // The header's mapping fields sat 152-160 bytes before the block.
  for (size_t back : {1u, 8u, 152u, 160u, 4000u}) {
    SCOPED_TRACE(back);
    EXPECT_EXIT(
        {
          char *p = (char *)brisk_malloc(3 * MiB);
          expect_guard((uintptr_t)p - page_size(), (uintptr_t)p);
          poke_byte(p - back, 0x41);
          brisk_free(p);
          exit(0);
        },
        ::testing::ExitedWithCode(42), "");
  }
}

TEST_F(SecureDeath, OverflowPastAHugeBlockFaults) {
  EXPECT_EXIT(
      {
        char *p = (char *)brisk_malloc(3 * MiB);
        size_t usable = brisk_usable_size(p);
        expect_guard((uintptr_t)p + usable, (uintptr_t)p + usable + page_size());
        poke_byte(p + usable - 1, 0x41);  // the last usable byte is fine
        poke_byte(p + usable, 0x41);
        exit(0);
      },
      ::testing::ExitedWithCode(42), "");
}

TEST_F(SecureDeath, OverflowPastTheLastBlockOfASegmentFaults) {
  // Blocks of 1 MB share a segment of 4 MiB: writing on past the last of
  // them stops at the segment's end.
  EXPECT_EXIT(
      {
        char *first = (char *)brisk_malloc(1000 * 1000);
        uintptr_t seg = (uintptr_t)first & ~(uintptr_t)(4 * MiB - 1);
        char *last = first;
        for (int i = 0; i < 8; i++) {
          char *b = (char *)brisk_malloc(1000 * 1000);
          if (((uintptr_t)b & ~(uintptr_t)(4 * MiB - 1)) == seg && b > last) last = b;
        }
        expect_guard(seg + 4 * MiB - page_size(), seg + 4 * MiB);
        for (size_t off = 0;; off += 64) poke_byte(last + off, 0x41);
      },
      ::testing::ExitedWithCode(42), "");
}

// A huge block that realloc shrinks, grows in place or moves keeps a guard
// page on each side: the mapping's pieces move and resize one at a time
// (memory.c), and a copy, which the secure library made before, is not
// needed. The space after a shrunk block is free, so the grow that follows
// stays in place; a page mapped right after the block forces a move.
TEST_F(SecureDeath, GuardPagesFollowAHugeBlockThatReallocResizesOrMoves) {
  enum { kShrink, kGrowInPlace, kMove };
  for (int how : {kShrink, kGrowInPlace, kMove}) {
    SCOPED_TRACE(how);
    for (bool below : {false, true}) {
      EXPECT_EXIT(
          {
            char *p = (char *)brisk_malloc(40 * MiB);
            std::memset(p, 0x5A, 64);
            if (how != kMove) p = (char *)brisk_realloc(p, 3 * MiB);
            char *was = p;
            if (how == kGrowInPlace) p = (char *)brisk_realloc(p, 30 * MiB);
            if (how == kMove) {
              char *end = p + brisk_usable_size(p) + page_size();
              mmap(end, page_size(), PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
              p = (char *)brisk_realloc(p, 60 * MiB);
            }
            if (!p || p[0] != 0x5A || p[63] != 0x5A) exit(1);
            if ((how == kGrowInPlace) != (p == was) && how != kShrink) exit(2);
            size_t usable = brisk_usable_size(p);
            p[usable - 1] = 1;  // the last usable byte is the block's
            if (below) {
              expect_guard((uintptr_t)p - page_size(), (uintptr_t)p);
              poke_byte(p - 1, 0x41);
            } else {
              expect_guard((uintptr_t)p + usable, (uintptr_t)p + usable + page_size());
              poke_byte(p + usable, 0x41);
            }
            exit(0);
          },
          ::testing::ExitedWithCode(42), "");
    }
  }
}

// ... and the blocks' pages are moved, not copied: realloc of a huge block
// calls mremap, as the release library's does.
TEST(Secure, ReallocOfAHugeBlockMovesItsPages) {
  brisk_stats_t s0 = {}, s1 = {};
  s0.version = s1.version = BRISK_STATS_VERSION;
  unsigned char *p = (unsigned char *)brisk_malloc(5 * MiB);
  ASSERT_NE(p, nullptr);
  for (size_t i = 0; i < 5 * MiB; i += 4096) p[i] = (unsigned char)(i >> 12);
  ASSERT_EQ(brisk_stats_get(&s0), 0);
  unsigned char *q = (unsigned char *)brisk_realloc(p, 50 * MiB);
  ASSERT_NE(q, nullptr);
  ASSERT_EQ(brisk_stats_get(&s1), 0);
  EXPECT_GE(s1.mremap_calls - s0.mremap_calls, 1u);
  for (size_t i = 0; i < 5 * MiB; i += 4096) ASSERT_EQ(q[i], (unsigned char)(i >> 12)) << i;
  std::memset(q, 1, 50 * MiB);
  brisk_free(q);
}

