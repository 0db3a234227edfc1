// Thread churn: thousands of short-lived threads, each leaving live blocks
// behind (freed later by the main thread or by later threads) and warm large
// blocks in its caches. Memory must not grow with the number of threads.
#include <algorithm>
#include <gtest/gtest.h>

#include <mutex>
#include <thread>
#include <vector>

#include "test_util.h"

using namespace bt;

namespace {

struct Shared {
  std::mutex m;
  std::vector<Block> left;       // left behind by threads of this round
  std::vector<Block> for_later;  // left for threads of a later round to free
  size_t errors = 0;
};

void short_thread(size_t id, Shared &sh) {
  Rng rng(id * 2654435761u + 1);
  std::vector<Block> mine;
  const size_t n_alloc = 40;
  for (size_t i = 0; i < n_alloc; ++i) {
    size_t n;
    size_t k = rng.below(100);
    if (k < 80) n = rng.range(1, 1024);
    else if (k < 95) n = rng.range(1025, 32 * KiB);
    else n = rng.range(32 * KiB + 1, 300 * KiB);
    void *p = brisk_malloc(n);
    if (!p) {
      std::lock_guard<std::mutex> g(sh.m);
      ++sh.errors;
      continue;
    }
    Block b{p, n, (static_cast<uint64_t>(id) << 20) | i};
    fill(p, n, b.seed);
    mine.push_back(b);
  }
  // Warm large blocks: they go to this thread's cache on free, which must be
  // given back when the thread ends.
  for (size_t n : {static_cast<size_t>(96 * KiB), 1 * MiB, 3 * MiB}) {
    void *p = brisk_malloc(n);
    if (p) {
      std::memset(p, 1, n);
      brisk_free(p);
    }
  }
  // Free half of them here; leave the rest behind, live.
  std::vector<Block> keep;
  for (size_t i = 0; i < mine.size(); ++i) {
    if (i % 2 == 0) {
      if (!check(mine[i].p, mine[i].n, mine[i].seed)) {
        std::lock_guard<std::mutex> g(sh.m);
        ++sh.errors;
      }
      brisk_free(mine[i].p);
    } else {
      keep.push_back(mine[i]);
    }
  }
  // Free a few blocks that earlier (now dead) threads left for us.
  std::vector<Block> inherited;
  {
    std::lock_guard<std::mutex> g(sh.m);
    for (int i = 0; i < 8 && !sh.for_later.empty(); ++i) {
      inherited.push_back(sh.for_later.back());
      sh.for_later.pop_back();
    }
  }
  size_t bad = 0;
  for (Block &b : inherited) {
    if (!check(b.p, b.n, b.seed)) ++bad;
    brisk_free(b.p);
  }
  std::lock_guard<std::mutex> g(sh.m);
  sh.errors += bad;
  for (size_t i = 0; i < keep.size(); ++i) (i % 4 == 0 ? sh.for_later : sh.left).push_back(keep[i]);
}

size_t free_all(std::vector<Block> &v) {
  size_t bad = 0;
  for (Block &b : v) {
    if (!check(b.p, b.n, b.seed)) ++bad;
    brisk_free(b.p);
  }
  v.clear();
  return bad;
}

}  // namespace

TEST(Churn, ThousandsOfShortThreadsDoNotGrowMemory) {
  const size_t total_threads = scaled(3000, 100);
  const size_t rounds = 10;
  const size_t per_round = (total_threads + rounds - 1) / rounds;
  const size_t batch = 4;  // threads alive at once

  Shared sh;
  std::vector<Block> previous;  // previous round's leftovers, freed one round late
  size_t bad = 0;
  // [0]: after the first half of the rounds, [1]: after the second half.
  // "live": with the leftovers of the last round still allocated;
  // "empty": after the main thread freed every leftover.
  size_t mapped_live[2] = {0, 0}, mapped_empty[2] = {0, 0};
  size_t rss_live[2] = {0, 0}, rss_empty[2] = {0, 0};
  // Mapped with leftovers live, after every round but the first: the most
  // in the first half and the least in the second.
  size_t live_first_most = 0, live_second_least = SIZE_MAX;
  size_t id = 0;

  for (size_t r = 0; r < rounds; ++r) {
    for (size_t done = 0; done < per_round; done += batch) {
      std::vector<std::thread> ts;
      for (size_t k = 0; k < batch && done + k < per_round; ++k) ts.emplace_back(short_thread, id++, std::ref(sh));
      for (auto &t : ts) t.join();
    }
    // The main thread frees what the previous round's (dead) threads left.
    bad += free_all(previous);
    {
      std::lock_guard<std::mutex> g(sh.m);
      previous.swap(sh.left);
    }
    if (r > 0) {
      brisk_collect();
      size_t mapped = brisk_mapped_bytes();
      if (r < rounds / 2) live_first_most = std::max(live_first_most, mapped);
      else live_second_least = std::min(live_second_least, mapped);
    }
    if (r == rounds / 2 - 1 || r == rounds - 1) {
      const int half = r == rounds - 1;
      brisk_collect();
      mapped_live[half] = brisk_mapped_bytes();
      rss_live[half] = rss_bytes();
      size_t live = 0;
      for (const Block &b : previous) live += b.n;
      for (const Block &b : sh.for_later) live += b.n;
      std::printf("after round %zu (%zu threads): mapped %s, rss %s, with %zu live blocks of %s\n", r + 1, id,
                  mib(mapped_live[half]).c_str(), mib(rss_live[half]).c_str(),
                  previous.size() + sh.for_later.size(), mib(live).c_str());
      // Now free every leftover of the dead threads.
      bad += free_all(previous);
      bad += free_all(sh.for_later);
      brisk_collect();
      mapped_empty[half] = brisk_mapped_bytes();
      rss_empty[half] = rss_bytes();
      std::printf("  after freeing the leftovers: mapped %s, rss %s\n", mib(mapped_empty[half]).c_str(),
                  mib(rss_empty[half]).c_str());
    }
  }

  EXPECT_EQ(sh.errors + bad, 0u) << "blocks with damaged contents or failed allocations";
  // Strict: once the dead threads' blocks are all freed, what stays mapped
  // does not depend on how many threads have come and gone.
  EXPECT_LE(mapped_empty[1], mapped_empty[0] + 8 * MiB)
      << "with nothing live, mapped memory grew from " << mib(mapped_empty[0]) << " to " << mib(mapped_empty[1])
      << " over " << total_threads / 2 << " more threads";
  // With a round of leftovers live, the footprint fluctuates with how the
  // blocks fall into the dead threads' segments and which of those are
  // adopted (release, 6 runs: 188-392 MiB after the first half, 236-384
  // MiB after the second, no trend; 636-756 MiB when threads adopted a
  // segment per class they ran out of; under ASan at half scale one
  // sample of 124 MiB among 272-340). So the least of the second half's
  // rounds is held to twice the most of the first's: a segment stranded
  // per dead thread would add 4 MiB x total_threads / 2, far above.
  EXPECT_LE(live_second_least, 2 * live_first_most + 32 * MiB)
      << "with leftovers live, mapped memory grew from at most " << mib(live_first_most) << " to at least "
      << mib(live_second_least);
  if (!BRISK_TEST_SANITIZED) {  // sanitizers keep per-thread state of their own
    EXPECT_LE(rss_empty[1], rss_empty[0] + 16 * MiB)
        << "with nothing live, RSS grew from " << mib(rss_empty[0]) << " to " << mib(rss_empty[1]);
    // (Release, 6 runs: 134-191 MiB after the first half, 124-187 after the second.)
    EXPECT_LE(rss_live[1], rss_live[0] + rss_live[0] / 2 + 16 * MiB)
        << "with leftovers live, RSS grew from " << mib(rss_live[0]) << " to " << mib(rss_live[1]);
  }
}

TEST(Churn, BlocksOfDeadThreadsAreReused) {
  // A thread fills many pages and dies; the main thread frees every block.
  // Repeating this must not keep mapping new memory.
  const size_t reps = scaled(40, 8);
  size_t after_first = 0;
  for (size_t rep = 0; rep < reps; ++rep) {
    std::vector<Block> blocks;
    std::thread t([&] {
      Rng rng(rep + 1);
      for (size_t i = 0; i < 4000; ++i) {
        size_t n = rng.below(10) == 0 ? rng.range(1024, 16 * KiB) : rng.range(16, 256);
        void *p = brisk_malloc(n);
        ASSERT_NE(p, nullptr);
        fill(p, n, i);
        blocks.push_back({p, n, i});
      }
    });
    t.join();
    size_t bad = free_all(blocks);
    ASSERT_EQ(bad, 0u);
    if (rep == 0) {
      brisk_collect();
      after_first = brisk_mapped_bytes();
    }
  }
  brisk_collect();
  size_t after_all = brisk_mapped_bytes();
  std::printf("mapped after first: %s, after %zu: %s\n", mib(after_first).c_str(), reps, mib(after_all).c_str());
  EXPECT_LE(after_all, after_first + 8 * MiB);
}
