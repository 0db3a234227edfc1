// The secure library (brisk_core_secure: the prefixed API built with
// BRISK_SECURE): attacks on freed memory and misuse of free stop the
// program with a message, or fault on a guard page, and never hand out an
// address an attacker chose.
//
// Death tests run in the "threadsafe" style and are skipped under
// ThreadSanitizer, which does not support forking a threaded process.
#include <gtest/gtest.h>

#include <algorithm>
#include <unistd.h>
#include <cstdint>
#include <cstring>
#include <thread>
#include <set>
#include <vector>

#include "test_util.h"

using namespace bt;

namespace {

using SecureDeath = bt::DeathTest;
void poke_word(void *at, uintptr_t value) { *(volatile uintptr_t *)launder(at) = value; }

alignas(64) char g_target[4096];

// Frees a block of `size`, overwrites its first word with the address of
// g_target (the classic poisoning), frees another block of that size (the
// secure library holds the block freed last off a hot list until the next
// free), then allocates that size until the block comes back and once
// more: returns what the last malloc gave.
void poison_and_allocate(size_t size) {
  void *other = brisk_malloc(size);
  void *victim = brisk_malloc(size);
  brisk_free(victim);
  poke_word(victim, (uintptr_t)g_target);
  brisk_free(other);
  for (int i = 0; i < 100000; i++) {
    void *p = brisk_malloc(size);
    if (p == g_target) {
      fprintf(stderr, "exploited: malloc returned the attacker's address\n");
      exit(3);
    }
  }
}

}  // namespace

// ---- Free-list poisoning --------------------------------------------------

TEST_F(SecureDeath, PoisonedLinkOfASmallBlockAborts) {
  EXPECT_DEATH(poison_and_allocate(64), "corrupted free list");
}

TEST_F(SecureDeath, PoisonedLinkOfEveryTierAborts) {
  // 1000: direct pages; 4000 and 40000: the hot lists, which span pages;
  // 300000: large pages.
  for (size_t size : {16u, 1000u, 4000u, 40000u, 300000u}) {
    SCOPED_TRACE(size);
    EXPECT_DEATH(poison_and_allocate(size), "corrupted free list");
  }
}

namespace {
// n blocks of `size`, freed by another thread, which then calls `after`
// (before it exits) with them.
template <typename After>
std::vector<void *> freed_by_another_thread(size_t n, size_t size, After after) {
  std::vector<void *> blocks(n);
  for (auto &b : blocks) b = brisk_malloc(size);
  std::thread([&] {
    for (auto *b : blocks) brisk_free(b);
    after(blocks);
  }).join();
  return blocks;
}
void nothing(const std::vector<void *> &) {}
}  // namespace

TEST_F(SecureDeath, PoisonedLinkOfABlockFreedByAnotherThreadAborts) {
  EXPECT_DEATH(
      {
        auto blocks = freed_by_another_thread(64, 48, nothing);
        poke_word(blocks[10], (uintptr_t)g_target);
        for (int i = 0; i < 100000; i++)
          if (brisk_malloc(48) == g_target) exit(3);
      },
      "corrupted free list");
}

// Blocks of 1 KiB or less that another thread frees travel in batches
// through the transfer cache; a thread that takes a batch follows its links
// only to blocks that still hold the mark their free wrote, and the link
// from one batch to the next (in the third word of a batch's first block)
// the same way.
namespace {
// 512 blocks of 64 B (four batches of 128), freed by another thread, which
// publishes them whole and then writes g_target into word `word` of block
// `block` (before it exits: a purge pass at its exit may send the batches
// back to their pages, which follows their links too); then malloc until
// the blocks come back.
void poison_a_batch_and_allocate(size_t word, size_t block) {
  freed_by_another_thread(512, 64, [&](const std::vector<void *> &blocks) {
    poke_word((uintptr_t *)blocks[block] + word, (uintptr_t)g_target);
  });
  for (int i = 0; i < 100000; i++)
    if (brisk_malloc(64) == g_target) exit(3);
}
}  // namespace

TEST_F(SecureDeath, PoisonedLinkOfABlockInTheTransferCacheAborts) {
  EXPECT_DEATH(poison_a_batch_and_allocate(0, 50), "corrupted free list");
}

TEST_F(SecureDeath, PoisonedLinkBetweenTwoBatchesAborts) {
  // Block 127 was the last of the first batch freed: its head.
  EXPECT_DEATH(poison_a_batch_and_allocate(2, 127), "corrupted free list");
}

TEST_F(SecureDeath, DoubleFreeOfABlockInTheTransferCacheAborts) {
  EXPECT_DEATH(
      {
        auto blocks = freed_by_another_thread(512, 64, nothing);
        brisk_free(launder(blocks[200]));
      },
      "double free");
}

// A hot list (sizes above 1 KiB) is a stack of pointers in the heap: a
// write after free of a block on it (the classic poisoning of its first
// words) is never read, so it cannot steer malloc, and the blocks come back
// whole. (It was a list linked through the blocks, which followed a
// poisoned link to the check that stopped the program.)
TEST(SecureHot, PoisonedHotBlockIsNeverFollowed) {
  for (size_t size : {4000u, 40000u}) {
    SCOPED_TRACE(size);
    void *keep = brisk_malloc(size);
    void *victim = brisk_malloc(size), *head = brisk_malloc(size), *held = brisk_malloc(size);
    brisk_free(victim);
    brisk_free(head);
    brisk_free(held);  // (held off the list until the next free: hot_push)
    poke_word(victim, (uintptr_t)g_target);
    poke_word((uintptr_t *)victim + 1, 0x4141414141414141);
    std::set<void *> got;
    for (int i = 0; i < 4; i++) {
      void *p = brisk_malloc(size);
      ASSERT_NE(p, nullptr);
      EXPECT_NE(p, static_cast<void *>(g_target));
      EXPECT_TRUE(got.insert(p).second);
    }
    EXPECT_TRUE(got.count(victim)) << "the poisoned block is handed out as a block";
    EXPECT_EQ(brisk_check_heap(), BRISK_CHECK_OK) << brisk_check_message();
    for (void *p : got) brisk_free(p);
    brisk_free(keep);
  }
}

TEST_F(SecureDeath, WriteAfterFreeOfTheBlockFreedLastAborts) {
  // The hot block freed last is held off its list (hot_push): a fill of it
  // after its free (mimalloc-bench's write_after_free, write_after_free_reuse)
  // stops the next malloc or free of its class.
  for (size_t size : {4000u, 40000u, 300000u}) {
    SCOPED_TRACE(size);
    for (bool then_free : {false, true}) {
      EXPECT_DEATH(
          {
            void *keep = brisk_malloc(size);
            void *p = brisk_malloc(size);
            brisk_free(p);
            memset(launder(p), 'A', size);
            if (then_free) brisk_free(keep);
            g_sink = brisk_malloc(size);
          },
          "corrupted free list at 0x[0-9a-f]+: a freed block written after its free");
    }
  }
}

namespace {
// Fills pages with blocks of `size` and frees every eighth in address order
// (enough that their pages are allocated from again), the last one b
// linking to the one freed before it. Flips bit `flip` of b's link and
// allocates that size until far past b: a malloc that hands out a block
// still in use exits with "exploited".
void flip_link_and_allocate(size_t size, uintptr_t flip) {
  std::vector<void *> blocks(4096);
  for (auto &p : blocks) p = brisk_malloc(size);
  std::sort(blocks.begin(), blocks.end());
  std::set<void *> in_use(blocks.begin(), blocks.end());
  void *b = nullptr;
  for (size_t i = 8; i < blocks.size(); i += 8) {
    brisk_free(b = blocks[i]);
    in_use.erase(b);
  }
  poke_word(b, *(volatile uintptr_t *)launder(b) ^ flip);
  for (int i = 0; i < 100000; i++) {
    void *p = brisk_malloc(size);
    if (!in_use.insert(p).second) {
      fprintf(stderr, "exploited: malloc returned a block in use\n");
      exit(3);
    }
  }
}
}  // namespace

// An overflow that reaches only some bytes of a freed block's link (a
// one-byte overflow, an off-by-a-few write after free) never hands out a
// block in use: the link decodes to an address whose own link is checked
// before the block is handed out. (What it does not stop: a link turned
// into another free block of the same list, such as bit 40 here, which is
// bit 11 decoded, 2 KiB on, where every eighth 64 B block is free: the
// blocks between are skipped, never handed out twice.)
TEST_F(SecureDeath, PartialOverwriteOfALinkAborts) {
  for (size_t size : {64u, 1024u}) {
    for (uintptr_t flip : {uintptr_t{1} << 6, uintptr_t{1} << 10, uintptr_t{1} << 31}) {
      SCOPED_TRACE(testing::Message() << size << " B, link ^ " << flip);
      EXPECT_DEATH(flip_link_and_allocate(size, flip), "corrupted free list");
    }
  }
}

namespace {
// Frees a, b and then c, three blocks of `size` (b then links to a: on a
// hot list the secure library holds c, the block freed last, off the list
// until the next free, and b's link is read when malloc takes b; on a
// page's, when its list is taken up), sets b's link to what `overwrite`
// makes of it, and allocates that size `mallocs` times.
template <typename Overwrite>
void overwrite_link_and_allocate(size_t size, Overwrite overwrite, int mallocs) {
  void *keep = brisk_malloc(size);
  void *a = brisk_malloc(size);
  void *b = brisk_malloc(size);
  void *c = brisk_malloc(size);
  brisk_free(a);
  brisk_free(b);
  brisk_free(c);
  poke_word(b, overwrite(*(volatile uintptr_t *)launder(b)));
  for (int i = 0; i < mallocs; i++) g_sink = brisk_malloc(size);
  brisk_free(keep);
}
}  // namespace

TEST_F(SecureDeath, ZeroedLinkAborts) {
  // A link cleared by a write after free does not read as the list's end.
  EXPECT_DEATH(overwrite_link_and_allocate(
                   64, [](uintptr_t) { return uintptr_t{0}; }, 100000),
               "corrupted free list");
}

TEST_F(SecureDeath, PoisonedLinkOfAPoolObjectAborts) {
  EXPECT_DEATH(
      {
        brisk_pool_t *pool = brisk_pool_new(64, 0, 0);
        void *a = brisk_pool_alloc(pool);
        brisk_pool_free(pool, a);
        poke_word(a, (uintptr_t)g_target);
        for (int i = 0; i < 3; i++)
          if (brisk_pool_alloc(pool) == g_target) exit(3);
      },
      "corrupted free list");
}

// A pool's link that decodes into brisk's memory off an object's alignment
// (bit 31 of the stored word is bit 2 of the decoded link) aborts before
// the object is handed out or its link read there (a misaligned load).
TEST_F(SecureDeath, PoolLinkOffAnObjectBoundaryAborts) {
  EXPECT_DEATH(
      {
        brisk_pool_t *pool = brisk_pool_new(64, 0, 0);
        void *a = brisk_pool_alloc(pool);
        void *b = brisk_pool_alloc(pool);
        brisk_pool_free(pool, a);
        brisk_pool_free(pool, b);  // b links to a
        poke_word(b, *(volatile uintptr_t *)launder(b) ^ (uintptr_t{1} << 31));
        for (int i = 0; i < 100; i++) g_sink = brisk_pool_alloc(pool);
      },
      "corrupted free list");
}

// ---- Misuse of free ----------------------------------------------------------

TEST_F(SecureDeath, DoubleFreeEveryTier) {
  for (size_t size : {16u, 1000u, 20000u, 300000u, 3u * 1024 * 1024}) {
    SCOPED_TRACE(size);
    EXPECT_DEATH(
        {
          void *keep = brisk_malloc(size);
          void *p = brisk_malloc(size);
          brisk_free(p);
          brisk_free(launder(p));
          brisk_free(keep);
        },
        "double free");
  }
}

TEST_F(SecureDeath, DoubleFreeWhenTheFirstFreeCameFromAnotherThread) {
  for (size_t size : {64u, 4000u, 3u * 1024 * 1024}) {
    SCOPED_TRACE(size);
    EXPECT_DEATH(
        {
          void *keep = brisk_malloc(size);
          void *p = brisk_malloc(size);
          std::thread([p] { brisk_free(p); }).join();
          brisk_free(launder(p));
          brisk_free(keep);
        },
        "double free");
  }
}

TEST_F(SecureDeath, ASizedFreeNamingMoreThanTheBlockHoldsAborts) {
  // A C++ delete through a pointer to a bigger type (mimalloc-bench's
  // delete_type_size_mismatch: new char, deleted as a 72-byte struct).
  for (size_t size : {1u, 16u, 200u, 1000u, 5000u, 70000u}) {
    SCOPED_TRACE(size);
    EXPECT_DEATH(
        {
          void *p = brisk_malloc(size);
          brisk_free_sized(launder(p), brisk_usable_size(p) + 56);
        },
        "brisk_free_sized\\(0x[0-9a-f]+, [0-9]+\\): the block holds [0-9]+ bytes: a size it was not allocated with");
  }
}

TEST(Secure, SizedFreesNamingTheAllocatedSizeFreeTheBlock) {
  // Every size up to the block's passes, after a realloc in place too.
  for (size_t size : {1u, 16u, 200u, 1000u, 5000u, 70000u, 3u * 1024 * 1024}) {
    void *p = brisk_malloc(size);
    ASSERT_NE(p, nullptr);
    brisk_free_sized(p, size);
    void *q = brisk_malloc(size);
    brisk_free_sized(q, brisk_usable_size(q));
    void *r = brisk_realloc(brisk_malloc(size), size / 2 + 1);
    brisk_free_sized(r, size / 2 + 1);
  }
  EXPECT_EQ(brisk_check_heap(), 0);
}

TEST_F(SecureDeath, FreeOfABlockNeverHandedOutAborts) {
  // A block threaded onto a fresh page's list and never handed out is
  // free: freeing it would put it on two lists (found by fuzz_corrupt,
  // where the page's memory had been purged to zero).
  EXPECT_DEATH(
      {
        std::vector<uintptr_t> got;
        for (int i = 0; i < 8; i++) got.push_back((uintptr_t)brisk_malloc(48));
        std::sort(got.begin(), got.end());
        for (size_t i = 0; i + 1 < got.size(); i++)
          if (got[i + 1] - got[i] > 48) {
            brisk_free(launder((void *)(got[i] + 48)));
            break;
          }
      },
      "free\\(0x[0-9a-f]+\\): double free");
}

TEST_F(SecureDeath, ReallocOfAFreedBlockAborts) {
  EXPECT_DEATH(
      {
        void *keep = brisk_malloc(100);
        void *p = brisk_malloc(100);
        brisk_free(p);
        brisk_realloc(launder(p), 100);  // the same size: no free inside
        brisk_free(keep);
      },
      "realloc\\(0x[0-9a-f]+\\): double free");
  // realloc_aligned checks its block as realloc does.
  EXPECT_DEATH(
      {
        void *keep = brisk_malloc(100);
        void *p = brisk_aligned_alloc(64, 100);
        brisk_free(p);
        brisk_realloc_aligned(launder(p), 64, 100);
        brisk_free(keep);
      },
      "realloc_aligned\\(0x[0-9a-f]+\\): double free");
  EXPECT_DEATH(brisk_realloc_aligned(static_cast<char *>(brisk_malloc(20000)) + 16, 16, 100),
               "realloc_aligned\\(0x[0-9a-f]+\\): pointer is inside a block");
}

TEST_F(SecureDeath, InteriorPointerEveryTier) {
  for (size_t size : {64u, 20000u, 300000u, 3u * 1024 * 1024}) {
    SCOPED_TRACE(size);
    EXPECT_DEATH(
        {
          char *p = (char *)brisk_malloc(size);
          brisk_free(launder(p + 16));
        },
        "inside a block");
  }
}

TEST_F(SecureDeath, InteriorPointerOfEveryKindOfClassAborts) {
  // The free fast path tells a block's start by a multiply (secure.h,
  // secure_block_start): sizes with an odd factor of 1, 3, 5 and 7, times
  // small and large powers of two; pointers 8 and 16 bytes in, and one
  // granule before the next block.
  for (size_t size : {16u, 48u, 80u, 112u, 160u, 192u, 224u, 320u, 448u, 1280u, 3584u, 40960u, 229376u}) {
    SCOPED_TRACE(size);
    for (size_t off : {size_t{8}, size_t{16}, size - 16}) {
      if (off % size == 0) continue;
      EXPECT_DEATH(brisk_free(launder((char *)brisk_malloc(size) + off)), "inside a block") << off;
    }
  }
}

TEST(Secure, EveryClassFreesItsBlocks) {
  // The other side of the multiply: every block start of every class is
  // taken, at every index of a page's first blocks.
  std::vector<void *> blocks;
  for (size_t size = 16; size <= 1024 * 1024; size += size < 128 ? 16 : size / 4) {
    for (int i = 0; i < 40; i++) blocks.push_back(brisk_malloc(size));
    for (void *p : blocks) brisk_free(p);
    blocks.clear();
  }
  EXPECT_EQ(brisk_check_heap(), 0);
}

TEST_F(SecureDeath, InteriorPointerOnAPageOfOverAlignedBlocksAborts) {
  // Such a page takes pointers inside its blocks (an over-aligned block
  // starts there), but only at an alignment of 32 or more (found by
  // fuzz_corrupt: a pointer 28 bytes into a block was freed).
  EXPECT_DEATH(
      {
        for (int i = 0; i < 16; i++) g_sink = brisk_aligned_alloc(256, 100);  // blocks of 368 B
        char *p = (char *)brisk_malloc(360);
        brisk_free(launder(p + 28));
      },
      "inside a block");
}

TEST_F(SecureDeath, InteriorPointerAtAnAlignedOffsetOfAPlainBlockAborts) {
  // On a page that handed out over-aligned blocks, a pointer 32 bytes into
  // a block malloc handed out is not where any block starts: only the
  // pointer an aligned allocation handed out may be freed inside a block
  // (found by fuzz_corrupt: free(p + 32) of a live 64 B block went by).
  EXPECT_DEATH(
      {
        for (int i = 0; i < 16; i++) g_sink = brisk_aligned_alloc(32, 80);  // blocks of 112 B
        char *p;
        do p = (char *)brisk_malloc(100);  // the same class, where p + 32 is 32-aligned
        while (((uintptr_t)p + 32) % 32);
        brisk_free(launder(p + 32));
      },
      "inside a block");
}

TEST(Secure, OverAlignedBlocksInsideBlocksAreFreedAndReallocated) {
  // The pointer an aligned allocation hands out inside a block is taken by
  // free and realloc, and a second free of it is a double free.
  std::vector<void *> got;
  for (size_t align = 32; align <= 4096; align *= 2)
    for (size_t size : {1u, 80u, 200u, 1000u, 5000u}) {
      void *p = brisk_aligned_alloc(align, size);
      ASSERT_NE(p, nullptr);
      ASSERT_EQ((uintptr_t)p % align, 0u);
      memset(p, 0x5a, size);
      got.push_back(p);
    }
  for (size_t i = 0; i < got.size(); i++) {
    if (i % 2) {
      void *q = brisk_realloc(got[i], 64);
      ASSERT_NE(q, nullptr);
      EXPECT_EQ(((unsigned char *)q)[0], 0x5a);
      got[i] = q;
    }
  }
  for (void *p : got) brisk_free(p);
}

TEST_F(SecureDeath, DoubleFreeOfAnOverAlignedBlockInsideABlock) {
  EXPECT_DEATH(
      {
        void *p;  // until one starts inside its 112 B block (16 bytes in)
        for (int i = 0; i < 1000 && brisk_usable_size(p = brisk_aligned_alloc(32, 80)) != 96; i++) {
        }
        brisk_free(p);
        brisk_free(launder(p));
      },
      "double free");
}

TEST_F(SecureDeath, ForeignPointerAborts) {
  EXPECT_DEATH(brisk_free(launder(g_target)), "not allocated by brisk");
  EXPECT_DEATH(
      {
        int on_stack = 0;
        brisk_free(launder(&on_stack));
      },
      "not allocated by brisk");
}

TEST_F(SecureDeath, PointerIntoASegmentHeaderAborts) {
  // The first bytes of the 4 MiB-aligned mapping that holds a block are
  // brisk's header, never a block.
  EXPECT_DEATH(
      {
        char *p = (char *)brisk_malloc(64);
        brisk_free(launder((void *)((uintptr_t)p & ~(uintptr_t)(4 * MiB - 1))));
      },
      "free\\(0x[0-9a-f]+\\): ");
}

TEST(Secure, BlocksBackFromTheTransferCacheHoldNothingOfIt) {
  auto blocks = freed_by_another_thread(512, 64, nothing);
  std::set<void *> freed(blocks.begin(), blocks.end());
  std::vector<uintptr_t *> again;
  size_t back = 0;
  for (int i = 0; i < 100000 && back < blocks.size(); i++) {
    auto *p = static_cast<uintptr_t *>(brisk_malloc(64));
    ASSERT_NE(p, nullptr);
    again.push_back(p);
    if (!freed.count(p)) continue;
    back++;
    EXPECT_EQ(p[0], 0u);
    EXPECT_EQ(p[1], 0u);
    EXPECT_EQ(p[2], 0u) << "block " << back;
  }
  EXPECT_EQ(back, blocks.size());
  for (auto *p : again) brisk_free(p);
}
