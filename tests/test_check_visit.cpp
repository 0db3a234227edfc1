// Heap checks (brisk_check_heap, brisk_check_message) and block visits
// (brisk_visit_blocks).
#include <gtest/gtest.h>

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "test_util.h"

using namespace bt;

// ---- brisk_check_heap -----------------------------------------------------------

TEST(CheckHeap, CleanAfterMultiThreadedStress) {
  const int nthreads = 4;
  const size_t slots = 4096;
  std::vector<std::atomic<void *>> table(slots);
  for (auto &s : table) s.store(nullptr);
  std::atomic<int> check_failures{0};
  std::string first_message;
  std::mutex msg_lock;
  const size_t steps = scaled(60000, 5000);
  std::vector<std::thread> threads;
  for (int t = 0; t < nthreads; ++t)
    threads.emplace_back([&, t] {
      Rng rng(static_cast<uint64_t>(t) * 77 + 1);
      std::vector<void *> mine;
      for (size_t i = 0; i < steps; ++i) {
        size_t sz = random_size(rng, 3 * MiB);
        void *p = brisk_malloc(sz);
        if (!p) continue;
        std::memset(p, static_cast<int>(i), sz < 32 ? sz : 32);
        if (rng.below(4) == 0) {
          mine.push_back(p);  // kept, some left at exit
        } else {
          // Swapped into the shared table: the block displaced (often
          // another thread's) is freed here.
          void *old = table[rng.below(slots)].exchange(p);
          brisk_free(old);
        }
        if (mine.size() > 200) {
          size_t j = rng.below(mine.size());
          brisk_free(mine[j]);
          mine[j] = mine.back();
          mine.pop_back();
        }
        if (i % 10000 == 9999) {
          int rc = brisk_check_heap();
          if (rc != BRISK_CHECK_OK) {
            check_failures++;
            std::lock_guard<std::mutex> g(msg_lock);
            if (first_message.empty()) first_message = brisk_check_message();
          }
        }
      }
      // Leave half of the kept blocks behind: abandoned at exit.
      for (size_t i = 0; i < mine.size(); i += 2) brisk_free(mine[i]);
      if (brisk_check_heap() != BRISK_CHECK_OK) check_failures++;
      for (size_t i = 1; i < mine.size(); i += 2) brisk_free(table[rng.below(slots)].exchange(mine[i]));
    });
  for (auto &th : threads) th.join();
  EXPECT_EQ(check_failures.load(), 0) << first_message;
  // The exited threads' abandoned segments are checked too.
  EXPECT_EQ(brisk_check_heap(), BRISK_CHECK_OK) << brisk_check_message();
  EXPECT_STREQ(brisk_check_message(), "");
  for (auto &s : table) brisk_free(s.exchange(nullptr));
  brisk_collect();
  EXPECT_EQ(brisk_check_heap(), BRISK_CHECK_OK) << brisk_check_message();
}

TEST(CheckHeap, DetectsCorruptedFreeList) {
  on_fresh_thread([] {
    ASSERT_EQ(brisk_check_heap(), BRISK_CHECK_OK) << brisk_check_message();
    // Blocks of a class nothing else here uses; `keep` holds the page.
    void *keep = brisk_malloc(2500);
    void *victim = brisk_malloc(2500);
    ASSERT_NE(keep, nullptr);
    ASSERT_NE(victim, nullptr);
    brisk_free(victim);
    brisk_collect();  // off the class's hot stack, onto its page's free list
    void *saved;
    std::memcpy(&saved, victim, sizeof saved);  // its free-list link

    static int outside;
    void *garbage[] = {&outside,                                  // far outside the page
                       static_cast<char *>(victim) + 8,           // inside, not a block start
                       reinterpret_cast<void *>(0x1000),          // low garbage
                       victim};                                   // a loop onto itself
    const char *what[] = {"outside", "misaligned", "low", "loop"};
    int rc[4];
    std::string msg[4];
    for (int i = 0; i < 4; ++i) {
      std::memcpy(victim, &garbage[i], sizeof(void *));
      rc[i] = brisk_check_heap();
      const char *m = brisk_check_message();
      std::memcpy(victim, &saved, sizeof saved);  // repaired before anything else runs
      msg[i] = m ? m : "";
    }
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(rc[i], BRISK_CHECK_FREE_LIST) << what[i] << ": " << msg[i];
      EXPECT_NE(msg[i].find("free list"), std::string::npos) << what[i] << ": " << msg[i];
    }
#if !BRISK_TEST_CHECKED
    // The message says where: the bad pointer for the first case. (The
    // checked library stores links encoded, as the secure one does: a raw
    // pointer written over one decodes to another address, never a loop.)
    char bad[32];
    std::snprintf(bad, sizeof bad, "%p", static_cast<void *>(&outside));
    EXPECT_NE(msg[0].find(bad), std::string::npos) << msg[0];
    EXPECT_NE(msg[3].find("loop"), std::string::npos) << msg[3];
#endif
    // Repaired: clean again, and the heap works on.
    EXPECT_EQ(brisk_check_heap(), BRISK_CHECK_OK) << brisk_check_message();
    void *again = brisk_malloc(2500);
    EXPECT_NE(again, nullptr);
    brisk_free(again);
    brisk_free(keep);
    EXPECT_EQ(brisk_check_heap(), BRISK_CHECK_OK) << brisk_check_message();
  });
}

// ---- brisk_visit_blocks -----------------------------------------------------------

namespace {

struct Visit {
  std::vector<std::pair<void *, size_t>> seen;  // reserved up front: no allocation
  size_t stop_after = 0;                          // 0: never stop
};

int record(void *block, size_t size, void *arg) {
  Visit *v = static_cast<Visit *>(arg);
  if (v->seen.size() < v->seen.capacity()) v->seen.emplace_back(block, size);
  return v->stop_after && v->seen.size() >= v->stop_after;
}

}  // namespace

// Plain arrays, so that the test's own bookkeeping allocates nothing from
// the thread whose blocks are visited (in the normal build brisk serves the
// C++ containers too).
struct Held {
  void *p;
  size_t size;
  bool freed;
};
Held g_held[600];
std::pair<void *, size_t> g_seen[100000];
size_t g_nseen;
std::pair<void *, size_t> g_base[1000];
size_t g_nbase;

int record_plain(void *block, size_t size, void *arg) {
  (void)arg;
  if (g_nseen < sizeof g_seen / sizeof g_seen[0]) g_seen[g_nseen] = {block, size};
  ++g_nseen;
  return 0;
}

// Holds blocks of every tier on a fresh thread (some freed again, locally
// and remotely), visits, and checks that every held block is visited once
// with its usable size and no freed one is; with `nothing_else`, also that
// no other block is visited.
void visit_held_blocks(bool nothing_else) {
  on_fresh_thread([nothing_else] {
    static constexpr size_t n = 502;
    // The freeing thread starts first: starting a thread allocates (glibc's
    // per-thread tables), and those blocks are in the baseline below.
    std::atomic<bool> go{false}, started{false};
    std::thread other([&go, &started] {
      started.store(true);
      while (!go.load()) std::this_thread::yield();
      for (size_t i = 5; i < n; i += 10) {
        brisk_free(g_held[i].p);
        g_held[i].freed = true;
      }
    });
    while (!started.load()) std::this_thread::yield();
    g_nseen = 0;
    brisk_visit_blocks(record_plain, nullptr);
    g_nbase = std::min(g_nseen, sizeof g_base / sizeof g_base[0]);
    std::copy(g_seen, g_seen + g_nbase, g_base);
    std::sort(g_base, g_base + g_nbase);
    // What this thread holds: blocks of every tier, two of them huge.
    Rng rng(5);
    for (size_t i = 0; i < n - 2; ++i) {
      size_t sz = random_size(rng, 1 * MiB);
      g_held[i] = {brisk_malloc(sz), sz, false};
    }
    g_held[n - 2] = {brisk_malloc(2 * MiB), 2 * MiB, false};
    g_held[n - 1] = {brisk_malloc(5 * MiB + 1), 5 * MiB + 1, false};
    // Some freed again by this thread, some by another thread.
    for (size_t i = 0; i < n; i += 10) {
      brisk_free(g_held[i].p);
      g_held[i].freed = true;
    }
    go.store(true);
    other.join();
    for (size_t i = 0; i < n; ++i) ASSERT_TRUE(g_held[i].freed || g_held[i].p != nullptr);

    g_nseen = 0;
    brisk_visit_blocks(record_plain, nullptr);
    const size_t nseen = g_nseen;
    ASSERT_LE(nseen, sizeof g_seen / sizeof g_seen[0]);
    std::sort(g_seen, g_seen + nseen);
    size_t dup = 0;
    for (size_t i = 1; i < nseen; ++i) dup += g_seen[i].first == g_seen[i - 1].first;
    EXPECT_EQ(dup, 0u) << "a block was visited twice";
    size_t live = 0, matched = 0;
    for (size_t i = 0; i < n; ++i) {
      const Held &h = g_held[i];
      auto it = std::lower_bound(g_seen, g_seen + nseen, std::make_pair(h.p, static_cast<size_t>(0)));
      bool visited = it != g_seen + nseen && it->first == h.p;
      if (h.freed) {
        EXPECT_FALSE(visited) << "freed block " << h.p << " was visited";
        continue;
      }
      ++live;
      if (!visited) {
        ADD_FAILURE() << "block " << h.p << " of " << h.size << " bytes was not visited";
        continue;
      }
      ++matched;
      EXPECT_GE(it->second, h.size) << "visited size below the request";
      EXPECT_EQ(it->second, brisk_usable_size(h.p));
    }
    EXPECT_EQ(matched, live);
    // Nothing else: this thread holds no other block than those it held
    // before, and no other huge block exists in this process.
    if (nothing_else && nseen != matched) {
      std::string extra;
      size_t unexpected = 0;
      for (size_t i = 0; i < nseen; ++i) {
        bool mine = false;
        for (size_t k = 0; k < n && !mine; ++k) mine = !g_held[k].freed && g_held[k].p == g_seen[i].first;
        if (mine || std::binary_search(g_base, g_base + g_nbase, g_seen[i])) continue;
        unexpected++;
        extra += " " + std::to_string(g_seen[i].second) + "-byte block;";
      }
      if (unexpected) ADD_FAILURE() << unexpected << " blocks visited that the thread does not hold:" << extra;
    }
    for (size_t i = 0; i < n; ++i)
      if (!g_held[i].freed) brisk_free(g_held[i].p);
  });
}

TEST(VisitBlocks, VisitsEveryHeldBlock) { visit_held_blocks(false); }

TEST(VisitBlocks, VisitsNothingButTheThreadsBlocks) {
  // Where brisk is the process's malloc, glibc allocates in the thread
  // behind the test's back (its per-thread TLS tables); the sanitizer builds
  // link brisk_core, where only the test allocates from brisk.
  void *probe = calloc(1, 1);
  bool brisk_is_malloc = brisk_owns(probe);
  free(probe);
  if (brisk_is_malloc) GTEST_SKIP() << "libc allocates from brisk here; checked in the sanitizer builds";
  visit_held_blocks(true);
}

TEST(VisitBlocks, StopsWhenVisitorSaysSo) {
  on_fresh_thread([] {
    std::vector<void *> mine;
    for (int i = 0; i < 300; ++i) mine.push_back(brisk_malloc(100 + static_cast<size_t>(i) * 10));
    mine.push_back(brisk_malloc(2 * MiB));
    for (size_t k : {1u, 2u, 7u, 150u}) {
      Visit v;
      v.seen.reserve(1000);
      v.stop_after = k;
      brisk_visit_blocks(record, &v);
      EXPECT_EQ(v.seen.size(), k) << "the visit went on after the visitor returned nonzero";
    }
    for (void *p : mine) brisk_free(p);
  });
}

TEST(VisitBlocks, IncludesExitedThreadsBlocksAndOwnHeaps) {
  on_fresh_thread([] {
    std::vector<void *> left;
    std::thread t([&] {
      for (int i = 0; i < 50; ++i) left.push_back(brisk_malloc(7000));
    });
    t.join();
    brisk_free(brisk_malloc(16));  // this thread has a heap (see the next test)
    brisk_heap_t *heap = brisk_heap_new();
    void *hb = brisk_heap_malloc(heap, 12345);
    Visit v;
    v.seen.reserve(10000);
    brisk_visit_blocks(record, &v);
    std::set<void *> got;
    for (auto &s : v.seen) got.insert(s.first);
    for (void *p : left) EXPECT_TRUE(got.count(p)) << "a block of an exited thread was not visited";
    EXPECT_TRUE(got.count(hb)) << "a block of the thread's explicit heap was not visited";
    brisk_heap_destroy(heap);
    for (void *p : left) brisk_free(p);
  });
}

TEST(VisitBlocks, OtherLiveThreadsBlocksAreNotVisited) {
  std::mutex m;
  std::condition_variable cv;
  int stage = 0;
  std::vector<void *> theirs;
  std::thread t([&] {
    for (int i = 0; i < 100; ++i) theirs.push_back(brisk_malloc(6000));
    std::unique_lock<std::mutex> g(m);
    stage = 1;
    cv.notify_all();
    cv.wait(g, [&] { return stage == 2; });
    for (void *p : theirs) brisk_free(p);
  });
  {
    std::unique_lock<std::mutex> g(m);
    cv.wait(g, [&] { return stage == 1; });
  }
  Visit v;
  v.seen.reserve(100000);
  brisk_visit_blocks(record, &v);
  std::set<void *> got;
  for (auto &s : v.seen) got.insert(s.first);
  size_t visited = 0;
  for (void *p : theirs) visited += got.count(p);
  EXPECT_EQ(visited, 0u);
  {
    std::lock_guard<std::mutex> g(m);
    stage = 2;
  }
  cv.notify_all();
  t.join();
}

TEST(VisitBlocks, EveryExplicitHeapOfTheThread) {
  // "... its explicit heaps": all of them, however many the thread has.
  on_fresh_thread([] {
    const int nheaps = 100;
    static brisk_heap_t *heaps[nheaps];
    for (int i = 0; i < nheaps; ++i) {
      heaps[i] = brisk_heap_new();
      ASSERT_NE(heaps[i], nullptr);
      g_held[i] = {brisk_heap_malloc(heaps[i], 5000), 5000, false};
      ASSERT_NE(g_held[i].p, nullptr);
    }
    g_nseen = 0;
    brisk_visit_blocks(record_plain, nullptr);
    std::sort(g_seen, g_seen + std::min(g_nseen, sizeof g_seen / sizeof g_seen[0]));
    int missing = 0, first_missing = -1;
    for (int i = 0; i < nheaps; ++i) {
      auto it = std::lower_bound(g_seen, g_seen + g_nseen, std::make_pair(g_held[i].p, static_cast<size_t>(0)));
      if (it == g_seen + g_nseen || it->first != g_held[i].p) {
        if (first_missing < 0) first_missing = i;
        ++missing;
      }
    }
    EXPECT_EQ(missing, 0) << "blocks of " << missing << " of the thread's " << nheaps
                          << " explicit heaps were not visited, the first of heap #" << first_missing;
    for (int i = 0; i < nheaps; ++i) brisk_heap_destroy(heaps[i]);
  });
}

namespace {

void *leave_blocks(void *) {
  for (int i = 0; i < 50; ++i) g_held[i] = {brisk_malloc(7000), 7000, false};
  g_held[50] = {brisk_malloc(2 * MiB), 2 * MiB, false};  // a huge block: the visit lists it
  return nullptr;
}

void *visit_only(void *) {
  g_nseen = 0;
  brisk_visit_blocks(record_plain, nullptr);
  return nullptr;
}

}  // namespace

TEST(VisitBlocks, ExitedThreadsBlocksFromAThreadThatNeverAllocated) {
  // Raw threads: nothing allocates on the visiting thread before the visit.
  pthread_t t;
  ASSERT_EQ(pthread_create(&t, nullptr, leave_blocks, nullptr), 0);
  ASSERT_EQ(pthread_join(t, nullptr), 0);
  ASSERT_EQ(pthread_create(&t, nullptr, visit_only, nullptr), 0);
  ASSERT_EQ(pthread_join(t, nullptr), 0);
  const size_t nseen = std::min(g_nseen, sizeof g_seen / sizeof g_seen[0]);
  std::sort(g_seen, g_seen + nseen);
  int missing = 0;
  for (int i = 0; i < 50; ++i)
    missing += !std::binary_search(g_seen, g_seen + nseen,
                                   std::make_pair(g_held[i].p, static_cast<size_t>(BRISK_TEST_CHECKED ? 7000 : 7168)));
  EXPECT_EQ(missing, 0) << missing << " of the 50 blocks an exited thread left were not visited";
  for (int i = 0; i < 51; ++i) brisk_free(g_held[i].p);
}

// Blocks another thread freed are not visited as live: also those that
// went into the transfer cache, where they still count as used in their
// pages (the visit sends them back first). The freeing thread stays alive
// through the visit: at its exit it would send back what it holds.
TEST(VisitBlocks, BlocksOtherThreadsFreedAreNotVisited) {
  on_fresh_thread([] {
    const size_t n = 4096;  // 128 B blocks: 32 full batches of the cache
    std::vector<void *> mine(n);
    for (auto &p : mine) ASSERT_NE(p = brisk_malloc(128), nullptr);
    std::mutex m;
    std::condition_variable cv;
    bool freed_all = false, visited = false;
    std::thread other([&] {
      for (void *p : mine) brisk_free(p);
      std::unique_lock<std::mutex> lk(m);
      freed_all = true;
      cv.notify_all();
      cv.wait(lk, [&] { return visited; });
    });
    {
      std::unique_lock<std::mutex> lk(m);
      cv.wait(lk, [&] { return freed_all; });
    }
    Visit v;
    v.seen.reserve(64 * 1024);
    brisk_visit_blocks(record, &v);
    {
      std::lock_guard<std::mutex> lk(m);
      visited = true;
    }
    cv.notify_all();
    other.join();
    std::set<void *> freed(mine.begin(), mine.end());
    size_t live = 0;
    for (auto &b : v.seen) live += freed.count(b.first);
    EXPECT_EQ(live, 0u) << "blocks freed by another thread were visited as live";
  });
}
