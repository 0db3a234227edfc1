// Multi-threaded stress: random sizes over every tier, each block filled with a
// pattern derived from (thread, round, index); half of the blocks are handed
// to other threads, which check every byte and free them (some after a
// realloc); the owners check and free the rest.
#include <gtest/gtest.h>

#include <algorithm>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

using namespace bt;

namespace {

uint64_t seed_of(size_t thread, size_t round, size_t index) {
  return (static_cast<uint64_t>(thread) << 48) ^ (static_cast<uint64_t>(round) << 32) ^ index;
}

struct Errors {
  std::atomic<size_t> count{0};
  std::mutex m;
  std::string first;
  void add(const std::string &what) {
    if (count.fetch_add(1) == 0) {
      std::lock_guard<std::mutex> g(m);
      first = what;
    }
  }
};

struct Mailbox {
  std::mutex m;
  std::vector<Block> items;
  void put(const Block &b) {
    std::lock_guard<std::mutex> g(m);
    items.push_back(b);
  }
  std::vector<Block> take() {
    std::lock_guard<std::mutex> g(m);
    std::vector<Block> out;
    out.swap(items);
    return out;
  }
};

std::string describe(const char *who, size_t tid, const Block &b, size_t bad) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "%s (thread %zu): block %p of %zu B, seed %llx: byte %zu wrong",
                who, tid, b.p, b.n, static_cast<unsigned long long>(b.seed), bad);
  return buf;
}

// Verify a block received from another thread, sometimes realloc it first,
// then free it.
void consume(size_t tid, Block b, Rng &rng, Errors &err, std::atomic<size_t> &freed) {
  size_t bad = first_mismatch(b.p, b.n, b.seed);
  if (bad != SIZE_MAX) err.add(describe("receiver", tid, b, bad));
  if (!brisk_owns(b.p)) err.add(describe("receiver: not owned", tid, b, 0));
  if (brisk_usable_size(b.p) < b.n) err.add(describe("receiver: usable < size", tid, b, 0));
  if (rng.below(8) == 0) {
    // A realloc of a block owned by another thread.
    size_t n2 = random_size(rng, 2 * MiB);
    void *q = brisk_realloc(b.p, n2);
    if (!q) {
      err.add(describe("receiver: realloc failed", tid, b, 0));
    } else {
      size_t keep = b.n < n2 ? b.n : n2;
      bad = first_mismatch(q, keep, b.seed);
      if (bad != SIZE_MAX) err.add(describe("receiver after realloc", tid, b, bad));
      b.p = q;
    }
  }
  brisk_free(b.p);
  freed.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

TEST(Threads, StressHandOffHalfAcrossThreads) {
  const size_t kThreads = 8;
  const size_t rounds = scaled(4, 1);
  const size_t per_round = scaled(1000, 50);
  const size_t max_huge = BRISK_TEST_SANITIZED ? 2 * MiB : 4 * MiB;

  std::vector<Mailbox> boxes(kThreads);
  Errors err;
  std::atomic<size_t> allocated{0}, freed{0};
  std::atomic<size_t> producers_done{0};

  auto worker = [&](size_t tid) {
    Rng rng(tid * 7919 + 1);
    for (size_t round = 0; round < rounds; ++round) {
      std::vector<Block> mine;
      mine.reserve(per_round);
      for (size_t i = 0; i < per_round; ++i) {
        size_t n = random_size(rng, max_huge);
        void *p = brisk_malloc(n);
        if (!p) {
          err.add("malloc(" + std::to_string(n) + ") failed");
          continue;
        }
        allocated.fetch_add(1, std::memory_order_relaxed);
        Block b{p, n, seed_of(tid, round, i)};
        fill(p, n, b.seed);
        if (i & 1) {
          size_t to = (tid + 1 + rng.below(kThreads - 1)) % kThreads;  // never self
          boxes[to].put(b);
        } else {
          mine.push_back(b);
        }
        // Serve the mailbox now and then, so frees from other threads happen
        // while this thread is allocating.
        if (i % 64 == 63)
          for (Block &r : boxes[tid].take()) consume(tid, r, rng, err, freed);
      }
      for (Block &b : mine) {
        size_t bad = first_mismatch(b.p, b.n, b.seed);
        if (bad != SIZE_MAX) err.add(describe("owner", tid, b, bad));
        if (rng.below(2))
          brisk_free(b.p);
        else
          brisk_free_sized(b.p, b.n);
        freed.fetch_add(1, std::memory_order_relaxed);
      }
    }
    producers_done.fetch_add(1);
    // Keep serving until every producer has finished, then a last drain.
    while (producers_done.load() < kThreads) {
      std::vector<Block> got = boxes[tid].take();
      if (got.empty()) std::this_thread::yield();
      for (Block &r : got) consume(tid, r, rng, err, freed);
    }
    for (Block &r : boxes[tid].take()) consume(tid, r, rng, err, freed);
  };

  std::vector<std::thread> ts;
  for (size_t t = 0; t < kThreads; ++t) ts.emplace_back(worker, t);
  for (auto &t : ts) t.join();
  // Anything sent after a receiver's final drain (cannot happen, but be sure).
  for (size_t t = 0; t < kThreads; ++t) {
    Rng rng(t);
    for (Block &r : boxes[t].take()) consume(t, r, rng, err, freed);
  }

  EXPECT_EQ(err.count.load(), 0u) << "first error: " << err.first;
  EXPECT_EQ(allocated.load(), freed.load());
  EXPECT_EQ(allocated.load(), kThreads * rounds * per_round);
}

TEST(Threads, ProducerConsumerRemoteFree) {
  // Two threads allocate small blocks; two others free them: the remote-free
  // path under steady load.
  const size_t per_producer = scaled(200000, 5000);
  std::mutex m;
  std::condition_variable cv;
  std::deque<Block> q;
  bool done = false;
  Errors err;
  std::atomic<size_t> consumed{0};

  auto producer = [&](size_t tid) {
    Rng rng(tid + 100);
    std::vector<Block> batch;
    for (size_t i = 0; i < per_producer; ++i) {
      size_t n = rng.range(8, 1024);
      void *p = brisk_malloc(n);
      if (!p) {
        err.add("malloc failed");
        continue;
      }
      Block b{p, n, seed_of(tid, 0, i)};
      fill(p, n, b.seed);
      batch.push_back(b);
      if (batch.size() == 256) {
        {
          std::lock_guard<std::mutex> g(m);
          q.insert(q.end(), batch.begin(), batch.end());
        }
        cv.notify_one();
        batch.clear();
      }
    }
    std::lock_guard<std::mutex> g(m);
    q.insert(q.end(), batch.begin(), batch.end());
    cv.notify_all();
  };
  auto consumer = [&](size_t tid) {
    for (;;) {
      std::vector<Block> got;
      {
        std::unique_lock<std::mutex> g(m);
        cv.wait(g, [&] { return !q.empty() || done; });
        if (q.empty() && done) return;
        while (!q.empty() && got.size() < 512) {
          got.push_back(q.front());
          q.pop_front();
        }
      }
      for (Block &b : got) {
        size_t bad = first_mismatch(b.p, b.n, b.seed);
        if (bad != SIZE_MAX) err.add(describe("consumer", tid, b, bad));
        brisk_free(b.p);
        consumed.fetch_add(1, std::memory_order_relaxed);
      }
    }
  };
  std::thread p1(producer, 1), p2(producer, 2), c1(consumer, 3), c2(consumer, 4);
  p1.join();
  p2.join();
  {
    std::lock_guard<std::mutex> g(m);
    done = true;
  }
  cv.notify_all();
  c1.join();
  c2.join();
  EXPECT_EQ(err.count.load(), 0u) << "first error: " << err.first;
  EXPECT_EQ(consumed.load(), 2 * per_producer);
}

TEST(Threads, SharedSlotsRandomCrossFree) {
  // Threads swap blocks in and out of shared slots, so any thread may free a
  // block made by any other, at any size, while all of them allocate.
  const size_t kThreads = 4;
  const size_t kSlots = 2048;
  const size_t iters = scaled(60000, 2000);
  std::vector<std::atomic<Block *>> slots(kSlots);
  for (auto &s : slots) s.store(nullptr);
  Errors err;

  auto worker = [&](size_t tid) {
    Rng rng(tid * 31 + 7);
    for (size_t i = 0; i < iters; ++i) {
      Block *nb = nullptr;
      if (rng.below(4) != 0) {
        size_t n = rng.below(50) == 0 ? random_size(rng, 1 * MiB) : rng.range(1, 2048);
        void *p = brisk_malloc(n);
        if (!p) {
          err.add("malloc failed");
          continue;
        }
        // The descriptor itself comes from brisk too.
        nb = static_cast<Block *>(brisk_malloc(sizeof(Block)));
        if (!nb) {
          err.add("malloc(Block) failed");
          brisk_free(p);
          continue;
        }
        *nb = Block{p, n, seed_of(tid, 1, i)};
        fill(p, n, nb->seed);
      }
      Block *old = slots[rng.below(kSlots)].exchange(nb, std::memory_order_acq_rel);
      if (old) {
        size_t bad = first_mismatch(old->p, old->n, old->seed);
        if (bad != SIZE_MAX) err.add(describe("slot", tid, *old, bad));
        brisk_free(old->p);
        brisk_free(old);
      }
    }
  };
  std::vector<std::thread> ts;
  for (size_t t = 0; t < kThreads; ++t) ts.emplace_back(worker, t);
  for (auto &t : ts) t.join();
  for (auto &s : slots) {
    Block *b = s.load();
    if (!b) continue;
    size_t bad = first_mismatch(b->p, b->n, b->seed);
    if (bad != SIZE_MAX) err.add(describe("final", 99, *b, bad));
    brisk_free(b->p);
    brisk_free(b);
  }
  EXPECT_EQ(err.count.load(), 0u) << "first error: " << err.first;
}

TEST(Threads, ConcurrentCallocAndAlignedAreCorrect) {
  // calloc zeroing and alignment hold when many threads recycle blocks.
  const size_t kThreads = 4;
  const size_t iters = scaled(20000, 1000);
  Errors err;
  auto worker = [&](size_t tid) {
    Rng rng(tid + 555);
    for (size_t i = 0; i < iters; ++i) {
      size_t n = rng.below(20) == 0 ? rng.range(4096, 300000) : rng.range(1, 3000);
      if (i & 1) {
        unsigned char *p = static_cast<unsigned char *>(brisk_calloc(1, n));
        if (!p) {
          err.add("calloc failed");
          continue;
        }
        if (!all_zero(p, n)) err.add("calloc(" + std::to_string(n) + ") not zeroed");
        std::memset(p, 0xEE, n);
        brisk_free(p);
      } else {
        size_t a = static_cast<size_t>(16) << rng.below(9);  // 16 .. 4096
        void *p = brisk_aligned_alloc(a, n);
        if (!p) {
          err.add("aligned_alloc failed");
          continue;
        }
        if (!aligned_to(p, a)) err.add("aligned_alloc(" + std::to_string(a) + ") misaligned");
        std::memset(p, 0xDD, n);
        brisk_free(p);
      }
    }
  };
  std::vector<std::thread> ts;
  for (size_t t = 0; t < kThreads; ++t) ts.emplace_back(worker, t);
  for (auto &t : ts) t.join();
  EXPECT_EQ(err.count.load(), 0u) << "first error: " << err.first;
}

// A page that filled up, got a block back from its owner (too few to take
// it off the full list) and then blocks from another thread: the first
// remote free reaches the owner through its heap and puts the page back in
// its queue, where the others are collected; every block comes back, and
// the heap checks clean.
TEST(Threads, RemoteFreesIntoAPageItsOwnerTookOffTheFullList) {
  // (The checked library's 64 B blocks are of a bigger class, with room for
  // its trailer: there, only the heap check tells.)
  brisk_collect();  // (blocks the threads of tests before left in the transfer cache would serve first)
  brisk_stats_t before = stats_now();
  unsigned cls = class_for(before, 64);
  auto live = [&] { return BRISK_TEST_CHECKED ? 0 : stats_now().class_live_blocks[cls] - before.class_live_blocks[cls]; };
  std::vector<void *> blocks(3000);  // a 64 KiB page holds 1024: two fill up
  for (auto &p : blocks) ASSERT_NE(p = brisk_malloc(64), nullptr);
  brisk_free(blocks[0]);  // the owner's own free takes the first page off the full list
  std::vector<void *> remote(blocks.begin() + 1, blocks.begin() + 501);
  std::thread([&] {
    for (void *p : remote) brisk_free(p);
  }).join();
  // The owner runs out of its current page's blocks and looks for more: the
  // 501 blocks freed above serve before any fresh page is needed.
  std::vector<void *> again(2000);
  for (auto &p : again) ASSERT_NE(p = brisk_malloc(64), nullptr);
  std::set<void *> freed(remote.begin(), remote.end());
  size_t reused = 0;
  for (void *p : again) reused += freed.count(p);
  EXPECT_GE(reused, 450u) << "the page the other thread freed into stayed parked as full";
  EXPECT_EQ(brisk_check_heap(), BRISK_CHECK_OK) << brisk_check_message();
  EXPECT_EQ(live(), BRISK_TEST_CHECKED ? 0u : 2499u + 2000u);
  for (size_t i = 501; i < blocks.size(); ++i) brisk_free(blocks[i]);
  for (void *p : again) brisk_free(p);
  EXPECT_EQ(live(), 0u);
  EXPECT_EQ(brisk_check_heap(), BRISK_CHECK_OK) << brisk_check_message();
}

// A thread that sleeps while another frees its blocks does not keep them:
// they serve the mallocs of a third thread (the transfer cache). Before,
// they waited in the sleeping owner's pages and the third thread took new
// pages: mimalloc-bench's xmalloc-test with 100 producers, which sleep on a
// full queue while consumers free their batches, peaked at about 1 GB for
// at most 165 MB live. Blocks on their way through the cache are not live
// in the statistics either.
namespace {
// With pass_first, a shared purge pass runs between the frees and the
// mallocs: at the exit of the thread that freed them, a second after the
// last pass (the interval of passes with nothing else waiting).
void blocks_freed_for_a_sleeping_owner_serve_other_threads(size_t size, bool pass_first = false) {
  SCOPED_TRACE(size);
  brisk_collect();                       // (empties the cache of what tests before left in it)
  const size_t n = (size_t{2} << 20) / size;  // 2 MiB of blocks, in whole batches
  std::vector<void *> blocks(n);
  std::mutex m;
  std::condition_variable cv;
  bool allocated = false, done = false;
  std::thread owner([&] {
    for (auto &p : blocks) p = brisk_malloc(size);
    std::unique_lock<std::mutex> lk(m);
    allocated = true;
    cv.notify_all();
    cv.wait(lk, [&] { return done; });
  });
  {
    std::unique_lock<std::mutex> lk(m);
    cv.wait(lk, [&] { return allocated; });
  }
  for (void *p : blocks) ASSERT_NE(p, nullptr);
  const brisk_stats_t before = stats_now();
  const unsigned cls = class_for(before, size);
  std::thread([&] {
    for (void *p : blocks) brisk_free(p);
    if (pass_first) std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  }).join();
  const brisk_stats_t after = stats_now();
  EXPECT_EQ(before.class_live_blocks[cls] - after.class_live_blocks[cls], n)
      << "blocks freed by another thread still count as live";
  std::set<void *> freed(blocks.begin(), blocks.end());
  size_t reused = 0;
  std::thread([&] {
    std::vector<void *> again(n);
    for (auto &p : again) reused += freed.count(p = brisk_malloc(size));
    for (void *p : again) brisk_free(p);
  }).join();
  EXPECT_GE(reused, n * 9 / 10) << "the third thread got " << reused << " of the " << n
                                << " blocks the sleeping owner's were";
  {
    std::lock_guard<std::mutex> lk(m);
    done = true;
  }
  cv.notify_all();
  owner.join();
  EXPECT_EQ(brisk_check_heap(), BRISK_CHECK_OK) << brisk_check_message();
}
}  // namespace

// Blocks of 8 KiB or less (the mixed sizes of bursty transfer); above 1
// KiB, a thread's own frees go to its hot lists, and others' to the cache.
TEST(Threads, BlocksFreedForASleepingOwnerServeOtherThreads) {
  if (BRISK_TEST_CHECKED) GTEST_SKIP() << "the checked library frees every block to its page";
  for (size_t size : {size_t{128}, size_t{4096}, size_t{8192}}) blocks_freed_for_a_sleeping_owner_serve_other_threads(size);
}

// A purge pass sends a class's batches back to their pages only when they
// waited through the pass before it with none taken. It sent back those
// that had just come: at a thread's exit, whose pass is often the first
// due, every batch the thread had freed went back to its sleeping owner,
// and the next thread got none of them.
TEST(Threads, BatchesFreedJustBeforeAPurgePassStillServeOtherThreads) {
  if (BRISK_TEST_CHECKED) GTEST_SKIP() << "the checked library frees every block to its page";
  blocks_freed_for_a_sleeping_owner_serve_other_threads(128, true);
}

// A thread that frees another thread's blocks of 256 B or more takes them
// back for its own next mallocs of the class, before their batch is full:
// they are in its cache (larson, where every thread frees the others'
// blocks, ran 3-4% faster). Smaller ones it does not: sharing cache lines
// with the blocks the other thread keeps, they would make the two threads
// write the same lines (Hoard's cache-scratch, passive false sharing: 8x
// slower).
TEST(Threads, AThreadReusesOtherThreadsBlocksItFreedFrom256Bytes) {
  if (BRISK_TEST_CHECKED) GTEST_SKIP() << "the checked library frees every block to its page";
  for (size_t size : {size_t{32}, size_t{512}}) {
    std::vector<void *> blocks(8);
    for (auto &p : blocks) p = brisk_malloc(size);
    size_t reused = 0;
    bt::on_fresh_thread([&] {
      for (void *p : blocks) brisk_free(p);
      std::vector<void *> again(blocks.size());
      for (auto &p : again) reused += std::count(blocks.begin(), blocks.end(), p = brisk_malloc(size));
      for (void *p : again) brisk_free(p);
    });
    if (size < 256) EXPECT_EQ(reused, 0u) << size << " B";
    else EXPECT_EQ(reused, blocks.size()) << size << " B";
  }
}

// Blocks of an owner that has not allocated for a while (250 ms before the
// freeing thread did) go back to its pages, not round the transfer cache:
// there the freeing thread handed them out again and freed them again, a
// free of another thread's block each time, for as long as the owner slept
// (mimalloc-bench's larson: the main thread's blocks, 40% of the workers'
// frees). So the freeing thread's next blocks are its own.
TEST(Threads, BlocksOfAnIdleOwnerGoBackToItsPages) {
  if (BRISK_TEST_CHECKED) GTEST_SKIP() << "the checked library frees every block to its page";
  const size_t size = 512, n = 64;
  std::vector<void *> blocks(n);
  for (auto &p : blocks) p = brisk_malloc(size);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // idle: no allocation since
  size_t reused = 0;
  bt::on_fresh_thread([&] {
    for (void *p : blocks) brisk_free(p);
    std::vector<void *> again(n);
    for (auto &p : again) reused += std::count(blocks.begin(), blocks.end(), p = brisk_malloc(size));
    for (void *p : again) brisk_free(p);
  });
  EXPECT_EQ(reused, 0u) << "of " << n << " blocks of an idle owner, freed by another thread";
}

// Blocks of an exited thread's segment that another thread frees go back
// to their pages, not round the transfer cache: the segment empties, and
// the next thread that needs a page adopts it whole. Shared, they went
// from thread to thread and kept the segment abandoned. (A thread lives
// throughout: the exits are not the last of a group, which would purge the
// emptied segment into the cache, test_reuse.cpp.)
TEST(Threads, BlocksOfAnExitedThreadGoBackToItsSegment) {
  brisk_collect();
  bt::LiveThread keeper;
  const size_t n = 4096;  // 64 B blocks: 256 KiB, whole batches of the cache
  std::vector<void *> blocks(n);
  std::thread([&] {
    for (auto &p : blocks) p = brisk_malloc(64);
  }).join();
  for (void *p : blocks) ASSERT_NE(p, nullptr);
  const uint32_t abandoned = stats_now().abandoned_segments;
  ASSERT_GE(abandoned, 1u) << "the exited thread's segment holds its blocks";
  std::thread([&] {
    for (void *p : blocks) brisk_free(p);
  }).join();
  std::set<void *> freed(blocks.begin(), blocks.end());
  size_t reused = 0;
  uint32_t after = 0;
  std::thread([&] {
    std::vector<void *> again(n);
    for (auto &p : again) reused += freed.count(p = brisk_malloc(64));
    after = stats_now().abandoned_segments;
    for (void *p : again) brisk_free(p);
  }).join();
  EXPECT_LT(after, abandoned) << "a thread took the exited thread's blocks one by one, and its segment stayed abandoned";
  EXPECT_GE(reused, n * 9 / 10);
}

// An aligned block that malloc carves out of a bigger one marks the bigger
// one's page (PAGE_HAS_ALIGNED: a free of the aligned pointer then finds
// the block's start). Only the page's owner may write its flags: they share
// a word-sized store with the count its frees step, so a thread that set
// them on another thread's page could undo the owner's step done at the
// same moment, or lose the mark. So such a block comes from the thread's
// own pages, never from blocks of other threads it freed (the transfer
// cache), which it takes back for its plain mallocs from 256 B up
// (AThreadReusesOtherThreadsBlocksItFreedFrom256Bytes).
TEST(Threads, AlignedBlocksCarvedFromBiggerOnesComeFromTheThreadsOwnPages) {
  if (BRISK_TEST_CHECKED) GTEST_SKIP() << "the checked library frees every block to its page";
  const brisk_stats_t st = stats_now();
  const size_t align = 128, request = 180;  // carved from a block of request + align - 1 bytes
  const size_t block = st.class_size[class_for(st, request + align - 1)];
  ASSERT_GE(block, size_t{256});
  std::vector<void *> theirs(64);  // this thread's blocks: their pages stay its own
  for (auto &p : theirs) ASSERT_NE(p = brisk_malloc(block), nullptr);
  size_t inside_theirs = 0, misaligned = 0;
  bt::on_fresh_thread([&] {
    for (void *p : theirs) brisk_free(p);  // now in the fresh thread's transfer lists
    std::vector<void *> mine(theirs.size());
    for (auto &p : mine) {
      p = brisk_aligned_alloc(align, request);
      misaligned += !aligned_to(p, align);
      for (void *t : theirs)
        inside_theirs += static_cast<char *>(p) >= static_cast<char *>(t) &&
            static_cast<char *>(p) < static_cast<char *>(t) + block;
    }
    for (void *p : mine) brisk_free(p);
  });
  EXPECT_EQ(misaligned, 0u);
  EXPECT_EQ(inside_theirs, 0u) << "aligned blocks were carved from another thread's pages";
  EXPECT_EQ(brisk_check_heap(), BRISK_CHECK_OK) << brisk_check_message();
}

// Another thread's free of an aligned block carved out of a bigger one
// finds the bigger one's start (the page says it handed such blocks out,
// where that thread reads it: types.h): the blocks come back whole.
TEST(Threads, AlignedBlocksFreedByAnotherThreadComeBackWhole) {
  const brisk_stats_t before = stats_now();
  const size_t align = 128, request = 180;
  const unsigned cls = class_for(before, request + align - 1);
  std::vector<void *> blocks(512);
  size_t carved = 0;
  for (auto &p : blocks) {
    ASSERT_NE(p = brisk_aligned_alloc(align, request), nullptr);
    std::memset(p, 0x5a, request);
    carved += brisk_usable_size(p) < before.class_size[cls];
  }
  ASSERT_GT(carved, 0u) << "no block was carved out of a bigger one";
  bt::on_fresh_thread([&] {
    for (void *p : blocks) brisk_free(p);
  });
  EXPECT_EQ(brisk_check_heap(), BRISK_CHECK_OK) << brisk_check_message();
  std::vector<void *> again(blocks.size());
  for (auto &p : again) ASSERT_NE(p = brisk_malloc(before.class_size[cls]), nullptr);
  for (void *p : again) EXPECT_TRUE(aligned_to(p, 16)) << p;
  for (void *p : again) brisk_free(p);
  EXPECT_EQ(brisk_check_heap(), BRISK_CHECK_OK) << brisk_check_message();
}
