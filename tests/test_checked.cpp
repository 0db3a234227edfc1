// The checked library (brisk_core_checked: the prefixed API with misuse
// checks): each misuse aborts with a message naming it, and correct use of
// heaps, pools and the malloc family raises no false alarm.
//
// Death tests run in the "threadsafe" style (the child re-executes the test
// binary), and are skipped under ThreadSanitizer, which does not support
// forking a threaded process.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "test_util.h"

using namespace bt;

namespace {

using CheckedDeath = DeathTest;

// The rest of a report's first line, and the first frame of the stack of
// the call that found the misuse.
#define WITH_STACK "[^\n]*\n  detected at:\n    #0 0x[0-9a-f]+"

}  // namespace

// ---- The malloc family --------------------------------------------------

TEST_F(CheckedDeath, DoubleFreeSmall) {
  EXPECT_DEATH(
      {
        void *p = brisk_malloc(64);
        brisk_free(p);
        brisk_free(launder(p));
      },
      "double free" WITH_STACK);
}

TEST_F(CheckedDeath, DoubleFreeEveryTier) {
  const size_t sizes[] = {16, 1000, 20000, 300000, 3 * MiB};
  for (size_t n : sizes) {
    EXPECT_DEATH(
        {
          void *keep = brisk_malloc(n);  // keeps the page in use
          void *p = brisk_malloc(n);
          brisk_free(p);
          brisk_free(launder(p));
          brisk_free(keep);
        },
        "double free")
        << "size " << n;
  }
}

TEST_F(CheckedDeath, DoubleFreeFromAnotherThread) {
  EXPECT_DEATH(
      {
        void *keep = brisk_malloc(128);
        void *p = brisk_malloc(128);
        brisk_free(p);
        std::thread t([p] { brisk_free(launder(p)); });
        t.join();
        brisk_free(keep);
      },
      "double free" WITH_STACK);
}

TEST_F(CheckedDeath, ForeignPointer) {
  EXPECT_DEATH(
      {
        int on_stack[4];
        std::memset(on_stack, 1, sizeof on_stack);
        brisk_free(launder(on_stack));
      },
      "not allocated by brisk" WITH_STACK);
  EXPECT_DEATH(
      {
        // glibc's (or the sanitizer's) malloc: brisk_core does not replace it.
        void *p = std::malloc(100);
        brisk_free(launder(p));
      },
      "not allocated by brisk" WITH_STACK);
}

TEST_F(CheckedDeath, InteriorPointer) {
  EXPECT_DEATH(
      {
        char *p = static_cast<char *>(brisk_malloc(4000));
        brisk_free(launder(p + 16));
      },
      "inside a block" WITH_STACK);
  EXPECT_DEATH(
      {
        char *p = static_cast<char *>(brisk_malloc(3 * MiB));
        brisk_free(launder(p + 4096));
      },
      "inside a block" WITH_STACK);
}

// ---- Explicit heaps -------------------------------------------------------

TEST_F(CheckedDeath, HeapAllocatedFromAnotherThread) {
  EXPECT_DEATH(
      {
        brisk_heap_t *heap = brisk_heap_new();
        std::thread t([heap] { g_sink = brisk_heap_malloc(heap, 32); });
        t.join();
      },
      "brisk_heap_malloc.*does not own" WITH_STACK);
  EXPECT_DEATH(
      {
        brisk_heap_t *heap = brisk_heap_new();
        std::thread t([heap] { g_sink = brisk_heap_calloc(heap, 4, 8); });
        t.join();
      },
      "brisk_heap_calloc.*does not own" WITH_STACK);
  EXPECT_DEATH(
      {
        brisk_heap_t *heap = brisk_heap_new();
        void *p = brisk_heap_malloc(heap, 10);
        std::thread t([=] { g_sink = brisk_heap_realloc(heap, p, 100); });
        t.join();
      },
      "brisk_heap_realloc.*does not own" WITH_STACK);
  EXPECT_DEATH(
      {
        brisk_heap_t *heap = brisk_heap_new();
        std::thread t([heap] { g_sink = brisk_heap_aligned_alloc(heap, 64, 64); });
        t.join();
      },
      "brisk_heap_aligned_alloc.*does not own" WITH_STACK);
  EXPECT_DEATH(
      {
        brisk_heap_t *heap = brisk_heap_new();
        std::thread t([heap] { g_sink = brisk_heap_calloc_aligned(heap, 4, 8, 64); });
        t.join();
      },
      "brisk_heap_calloc_aligned.*does not own" WITH_STACK);
  EXPECT_DEATH(
      {
        brisk_heap_t *heap = brisk_heap_new();
        void *p = brisk_heap_malloc(heap, 10);
        std::thread t([=] { g_sink = brisk_heap_realloc_aligned(heap, p, 64, 100); });
        t.join();
      },
      "brisk_heap_realloc_aligned.*does not own" WITH_STACK);
}

TEST_F(CheckedDeath, NotAHeap) {
  EXPECT_DEATH(
      {
        static unsigned char fake[64 * 1024];  // zeroed: no heap looks like this
        g_sink = brisk_heap_malloc(reinterpret_cast<brisk_heap_t *>(fake), 32);
      },
      "not a heap" WITH_STACK);
}

TEST_F(CheckedDeath, HeapDestroyedByAnotherThreadAfterOwnerExits) {
  EXPECT_EXIT(
      {
        brisk_heap_t *heap = nullptr;
        void *p = nullptr;
        std::thread t([&] {
          heap = brisk_heap_new();
          p = brisk_heap_malloc(heap, 100);
        });
        t.join();
        brisk_free(p);
        brisk_heap_destroy(heap);
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

// ---- Pools ------------------------------------------------------------------

TEST_F(CheckedDeath, PoolDoubleFree) {
  EXPECT_DEATH(
      {
        brisk_pool_t *pool = brisk_pool_new(64, 0, 0);
        void *keep = brisk_pool_alloc(pool);
        void *p = brisk_pool_alloc(pool);
        brisk_pool_free(pool, p);
        brisk_pool_free(pool, launder(p));
        brisk_pool_free(pool, keep);
      },
      "double free" WITH_STACK);
}

TEST_F(CheckedDeath, PoolPointerFromAnotherPool) {
  EXPECT_DEATH(
      {
        brisk_pool_t *a = brisk_pool_new(64, 0, 0);
        brisk_pool_t *b = brisk_pool_new(64, 0, 0);
        void *p = brisk_pool_alloc(a);
        brisk_pool_free(b, launder(p));
      },
      "another pool" WITH_STACK);
}

TEST_F(CheckedDeath, PoolPointerFromOutside) {
  EXPECT_DEATH(
      {
        brisk_pool_t *pool = brisk_pool_new(64, 0, 0);
        g_sink = brisk_pool_alloc(pool);
        unsigned char on_stack[64] = {0};
        brisk_pool_free(pool, launder(on_stack));
      },
      "not allocated from any pool" WITH_STACK);
  EXPECT_DEATH(
      {
        brisk_pool_t *pool = brisk_pool_new(64, 0, 0);
        g_sink = brisk_pool_alloc(pool);
        void *p = brisk_malloc(64);  // brisk's, but no pool's
        brisk_pool_free(pool, launder(p));
      },
      "not allocated from any pool" WITH_STACK);
}

TEST_F(CheckedDeath, PoolInteriorPointer) {
  EXPECT_DEATH(
      {
        brisk_pool_t *pool = brisk_pool_new(64, 0, 0);
        char *p = static_cast<char *>(brisk_pool_alloc(pool));
        brisk_pool_free(pool, launder(p + 8));
      },
      "not the start of an object" WITH_STACK);
}

TEST_F(CheckedDeath, PoolWriteAfterFree) {
  EXPECT_DEATH(
      {
        brisk_pool_t *pool = brisk_pool_new(64, 0, 0);
        void *keep = brisk_pool_alloc(pool);
        unsigned char *p = static_cast<unsigned char *>(brisk_pool_alloc(pool));
        brisk_pool_free(pool, p);
        static_cast<unsigned char *>(launder(p))[40] = 0x42;  // a stale write
        // The freed object is the next one handed out; the write shows then.
        for (int i = 0; i < 4; ++i) g_sink = brisk_pool_alloc(pool);
        brisk_pool_free(pool, keep);
      },
      "written after it was freed" WITH_STACK);
}

TEST_F(CheckedDeath, PoolObjectWrittenAfterItsPoolWasDestroyed) {
  // The pool's slabs are freed blocks once it is destroyed: a write to an
  // object shows when the slab's memory is handed out again.
  EXPECT_DEATH(
      {
        brisk_pool_t *pool = brisk_pool_new(64, 0, 0);
        unsigned char *p = static_cast<unsigned char *>(brisk_pool_alloc(pool));
        brisk_pool_destroy(pool);
        static_cast<volatile unsigned char *>(launder(p))[20] = 0x42;
        for (int i = 0; i < 1000; ++i) g_sink = brisk_malloc(64 * 1024);
      },
      "write after free: the block 0x[0-9a-f]+ \\(65536 bytes, size class [0-9]+\\) was written after it was "
      "freed");
}

// ---- Handles used after destroy (issue 10, item 9) ---------------------------
// The struct of a destroyed heap or pool stays mapped and marked dead, and is
// reused only after many others were destroyed: a stale handle is named.

#define DESTROYED(fn, kind) fn "\\(0x[0-9a-f]+\\): " kind " was destroyed" WITH_STACK

namespace {

brisk_heap_t *destroyed_heap() {
  brisk_heap_t *heap = brisk_heap_new();
  g_sink = brisk_heap_malloc(heap, 100);
  brisk_heap_destroy(heap);
  return static_cast<brisk_heap_t *>(launder(heap));
}

}  // namespace

TEST_F(CheckedDeath, HeapUsedAfterDestroy) {
  EXPECT_DEATH(g_sink = brisk_heap_malloc(destroyed_heap(), 32), DESTROYED("brisk_heap_malloc", "heap"));
  EXPECT_DEATH(g_sink = brisk_heap_calloc(destroyed_heap(), 2, 8), DESTROYED("brisk_heap_calloc", "heap"));
  EXPECT_DEATH(g_sink = brisk_heap_realloc(destroyed_heap(), nullptr, 8), DESTROYED("brisk_heap_realloc", "heap"));
  EXPECT_DEATH(g_sink = brisk_heap_aligned_alloc(destroyed_heap(), 64, 8),
               DESTROYED("brisk_heap_aligned_alloc", "heap"));
  EXPECT_DEATH(g_sink = brisk_heap_calloc_aligned(destroyed_heap(), 2, 8, 64),
               DESTROYED("brisk_heap_calloc_aligned", "heap"));
  EXPECT_DEATH(g_sink = brisk_heap_realloc_aligned(destroyed_heap(), nullptr, 64, 8),
               DESTROYED("brisk_heap_realloc_aligned", "heap"));
  EXPECT_DEATH(brisk_heap_reset(destroyed_heap()), DESTROYED("brisk_heap_reset", "heap"));
  EXPECT_DEATH(brisk_heap_set_max_bytes(destroyed_heap(), MiB), DESTROYED("brisk_heap_set_max_bytes", "heap"));
  EXPECT_DEATH(g_sink = reinterpret_cast<void *>(brisk_heap_held_bytes(destroyed_heap())),
               DESTROYED("brisk_heap_held_bytes", "heap"));
  EXPECT_DEATH(brisk_heap_destroy(destroyed_heap()), DESTROYED("brisk_heap_destroy", "heap"));
}

TEST_F(CheckedDeath, HeapUsedAfterDestroyWhileOtherHeapsComeAndGo) {
  // New heaps must not take over the destroyed heap's struct at once.
  EXPECT_DEATH(
      {
        brisk_heap_t *stale = destroyed_heap();
        std::vector<brisk_heap_t *> live;
        for (int i = 0; i < 20; ++i) brisk_heap_destroy(brisk_heap_new());
        for (int i = 0; i < 20; ++i) live.push_back(brisk_heap_new());
        g_sink = brisk_heap_malloc(stale, 32);
      },
      DESTROYED("brisk_heap_malloc", "heap"));
}

namespace {

brisk_pool_t *destroyed_pool() {
  brisk_pool_t *pool = brisk_pool_new(64, 0, 0);
  g_sink = brisk_pool_alloc(pool);
  brisk_pool_destroy(pool);
  return static_cast<brisk_pool_t *>(launder(pool));
}

}  // namespace

TEST_F(CheckedDeath, PoolUsedAfterDestroy) {
  EXPECT_DEATH(g_sink = brisk_pool_alloc(destroyed_pool()), DESTROYED("brisk_pool_alloc", "pool"));
  EXPECT_DEATH(
      {
        brisk_pool_t *other = brisk_pool_new(64, 0, 0);
        void *p = brisk_pool_alloc(other);
        brisk_pool_free(destroyed_pool(), p);
      },
      DESTROYED("brisk_pool_free", "pool"));
  EXPECT_DEATH(
      {
        brisk_pool_stats_t st;
        brisk_pool_stats(destroyed_pool(), &st);
      },
      DESTROYED("brisk_pool_stats", "pool"));
  EXPECT_DEATH(brisk_pool_destroy(destroyed_pool()), DESTROYED("brisk_pool_destroy", "pool"));
}

TEST_F(CheckedDeath, PoolUsedAfterDestroyWhileOtherPoolsComeAndGo) {
  EXPECT_DEATH(
      {
        brisk_pool_t *stale = destroyed_pool();
        std::vector<brisk_pool_t *> live;
        for (int i = 0; i < 20; ++i) brisk_pool_destroy(brisk_pool_new(64, 0, 0));
        for (int i = 0; i < 20; ++i) live.push_back(brisk_pool_new(64, 0, 0));
        g_sink = brisk_pool_alloc(stale);
      },
      DESTROYED("brisk_pool_alloc", "pool"));
}

TEST_F(CheckedDeath, NotAPool) {
  EXPECT_DEATH(
      {
        static unsigned char fake[4096];  // zeroed: no pool looks like this
        g_sink = brisk_pool_alloc(reinterpret_cast<brisk_pool_t *>(fake));
      },
      "brisk_pool_alloc\\(0x[0-9a-f]+\\): not a pool from brisk_pool_new" WITH_STACK);
}

// ---- No false alarms --------------------------------------------------------

TEST(Checked, CorrectUseRaisesNoAlarm) {
  // Everything here is legal; the checked library must let it all through.
  const int nthreads = 3;
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  brisk_pool_t *shared_pool = brisk_pool_new(96, 32, 0);
  ASSERT_NE(shared_pool, nullptr);
  std::vector<std::vector<void *>> handoff(nthreads);
  std::vector<std::vector<void *>> pool_handoff(nthreads);
  for (int t = 0; t < nthreads; ++t)
    threads.emplace_back([&, t] {
      Rng rng(static_cast<uint64_t>(t) + 11);
      std::vector<std::pair<void *, size_t>> live;
      for (int i = 0; i < 20000; ++i) {
        size_t k = rng.below(10);
        if (k < 5 || live.empty()) {
          size_t n = random_size(rng, 2 * MiB);
          void *p = k == 0 ? brisk_aligned_alloc(static_cast<size_t>(1) << rng.range(4, 12), n)
              : k == 1     ? brisk_calloc(1, n)
                           : brisk_malloc(n);
          if (!p) {
            bad++;
            continue;
          }
          fill(p, n < 64 ? n : 64, static_cast<uint64_t>(i));
          live.emplace_back(p, n);
        } else if (k < 7) {
          size_t j = rng.below(live.size());
          size_t n = random_size(rng, 2 * MiB);
          void *q = brisk_realloc(live[j].first, n);
          if (!q) {
            bad++;
            continue;
          }
          live[j] = {q, n};
        } else {
          size_t j = rng.below(live.size());
          brisk_free(live[j].first);
          live[j] = live.back();
          live.pop_back();
        }
      }
      // Half freed here, half handed to the next thread.
      for (size_t i = 0; i < live.size(); ++i) {
        if (i % 2) handoff[t].push_back(live[i].first);
        else brisk_free(live[i].first);
      }
      brisk_heap_t *heap = brisk_heap_new();
      for (int i = 0; i < 1000; ++i) {
        void *p = i % 3 ? brisk_heap_malloc(heap, 48 + static_cast<size_t>(i))
                        : brisk_heap_aligned_alloc(heap, 256, 100);
        if (!p) bad++;
        if (i % 4 == 0) brisk_free(p);
      }
      if (t % 2) brisk_heap_reset(heap);
      brisk_heap_destroy(heap);
      for (int i = 0; i < 3000; ++i) {
        void *p = brisk_pool_alloc(shared_pool);
        if (!p) {
          bad++;
          continue;
        }
        std::memset(p, i, 96);
        if (i % 2) pool_handoff[t].push_back(p);
        else brisk_pool_free(shared_pool, p);
      }
    });
  for (auto &th : threads) th.join();
  // Frees of other (exited) threads' blocks and pool objects.
  std::thread last([&] {
    for (auto &v : handoff)
      for (void *p : v) brisk_free(p);
    for (auto &v : pool_handoff)
      for (void *p : v) brisk_pool_free(shared_pool, p);
  });
  last.join();
  EXPECT_EQ(bad.load(), 0);
  brisk_pool_stats_t st;
  brisk_pool_stats(shared_pool, &st);
  EXPECT_EQ(st.live_objects, 0u);
  brisk_pool_destroy(shared_pool);
  EXPECT_EQ(brisk_check_heap(), BRISK_CHECK_OK) << brisk_check_message();
}

TEST(Checked, PoolPoisonsFreedObjects) {
  // The checked library fills a freed object with 0xDD past its link word.
  brisk_pool_t *pool = brisk_pool_new(64, 0, 0);
  ASSERT_NE(pool, nullptr);
  void *keep = brisk_pool_alloc(pool);
  unsigned char *p = static_cast<unsigned char *>(brisk_pool_alloc(pool));
  ASSERT_NE(p, nullptr);
  std::memset(p, 0x11, 64);
  brisk_pool_free(pool, p);
  size_t poisoned = 0;
  for (size_t i = sizeof(void *); i < 64; ++i) poisoned += p[i] == 0xDD;
  EXPECT_EQ(poisoned, 64 - sizeof(void *));
  brisk_pool_free(pool, keep);
  brisk_pool_destroy(pool);
}

// The free of a block checks the trailer of the block before it (the last
// 24 bytes before it: requested size, offset, two stack ids, seal). A
// thread writing that trailer (its malloc or free) stores SEAL_WRITING
// (core.h) in the seal first; a preempted writer can leave it so for
// milliseconds on a loaded machine. The check must wait for the seal, not
// report an underflow: it once gave up after 100 yields, and tests aborted
// under ThreadSanitizer with "heap buffer underflow" on correct programs.
TEST(Checked, ATrailerBeingWrittenByAnotherThreadIsWaitedFor) {
  // Two neighbours: of 32 blocks of a class, the two closest.
  char *p[32];
  for (auto &q : p) q = static_cast<char *>(brisk_malloc(200));
  char *a = nullptr, *b = nullptr;
  ptrdiff_t best = PTRDIFF_MAX;
  for (char *x : p)
    for (char *y : p)
      if (y > x && y - x < best) best = y - x, a = x, b = y;
  auto *requested = reinterpret_cast<uint64_t *>(b - 24);
  auto *seal = reinterpret_cast<uint32_t *>(b - 4);
  uint64_t requested_was = __atomic_load_n(requested, __ATOMIC_RELAXED);
  uint32_t seal_was = __atomic_load_n(seal, __ATOMIC_RELAXED);
  const uint32_t seal_writing = 0x7f3c91d5u;  // SEAL_WRITING (core.h)
  // As a's malloc leaves it when preempted between two fields.
  __atomic_store_n(seal, seal_writing, __ATOMIC_RELAXED);
  __atomic_store_n(requested, ~requested_was, __ATOMIC_RELEASE);
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    __atomic_store_n(requested, requested_was, __ATOMIC_RELEASE);
    __atomic_store_n(seal, seal_was, __ATOMIC_RELEASE);
  });
  brisk_free(b);  // aborted before the writer was done
  writer.join();
  EXPECT_EQ(brisk_usable_size(a), 200u);  // its trailer whole again
  for (char *q : p)
    if (q != b) brisk_free(q);
}
