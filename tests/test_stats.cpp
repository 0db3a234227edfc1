// Statistics (brisk_stats_get / _print / _json), heap checks
// (brisk_check_heap, brisk_check_message) and block visits
// (brisk_visit_blocks).
//
// Counts are compared as deltas around work done on a fresh thread while the
// rest of the process is quiet, so they can be exact: the blocks a test holds
// are exactly what the counters gain.
#include <gtest/gtest.h>

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "test_util.h"

using namespace bt;

namespace {

// The class brisk uses for a request of n bytes: the smallest class size
// that holds it.
unsigned class_for(const brisk_stats_t &st, size_t n) {
  for (unsigned c = 0; c < st.class_count && c < BRISK_STATS_MAX_CLASSES; ++c)
    if (st.class_size[c] >= n) return c;
  return 0;
}

// Runs f on a new thread and waits for it (a thread with a fresh heap).
template <class F>
void on_fresh_thread(F f) {
  std::thread t(f);
  t.join();
}

// ---- A minimal JSON reader: validates the grammar and records every number
// under its path ("tiers.huge.live_blocks", "classes[0].size").
class Json {
 public:
  explicit Json(const std::string &text) : s_(text) {}

  bool parse() {
    ws();
    if (!value("")) return false;
    ws();
    return pos_ == s_.size();
  }
  std::string error() const { return err_ + " at offset " + std::to_string(pos_); }
  const std::map<std::string, double> &numbers() const { return numbers_; }
  const std::set<std::string> &keys() const { return keys_; }

 private:
  bool fail(const char *what) {
    if (err_.empty()) err_ = what;
    return false;
  }
  void ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t' || s_[pos_] == '\r'))
      ++pos_;
  }
  bool lit(const char *w) {
    size_t n = std::strlen(w);
    if (s_.compare(pos_, n, w) != 0) return fail("bad literal");
    pos_ += n;
    return true;
  }
  bool string(std::string *out) {
    if (pos_ >= s_.size() || s_[pos_] != '"') return fail("expected a string");
    ++pos_;
    std::string r;
    while (pos_ < s_.size() && s_[pos_] != '"') {
      char c = s_[pos_++];
      if (static_cast<unsigned char>(c) < 0x20) return fail("control character in a string");
      if (c == '\\') {
        if (pos_ >= s_.size()) return fail("unfinished escape");
        char e = s_[pos_++];
        if (e == 'u') {
          for (int i = 0; i < 4; ++i)
            if (pos_ >= s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[pos_++])))
              return fail("bad \\u escape");
          r += '?';
          continue;
        }
        if (!std::strchr("\"\\/bfnrt", e)) return fail("bad escape");
      }
      r += c;
    }
    if (pos_ >= s_.size()) return fail("unterminated string");
    ++pos_;
    if (out) *out = r;
    return true;
  }
  bool number(const std::string &path) {
    size_t start = pos_;
    if (pos_ < s_.size() && s_[pos_] == '-') ++pos_;
    if (pos_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[pos_]))) return fail("bad number");
    if (s_[pos_] == '0') ++pos_;
    else
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    if (pos_ < s_.size() && s_[pos_] == '.') {
      ++pos_;
      if (pos_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[pos_]))) return fail("bad fraction");
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (pos_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[pos_]))) return fail("bad exponent");
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    }
    numbers_[path] = std::strtod(s_.substr(start, pos_ - start).c_str(), nullptr);
    return true;
  }
  bool value(const std::string &path) {
    if (++depth_ > 64) return fail("nested too deep");
    bool ok;
    if (pos_ >= s_.size()) ok = fail("unexpected end");
    else if (s_[pos_] == '{') ok = object(path);
    else if (s_[pos_] == '[') ok = array(path);
    else if (s_[pos_] == '"') ok = string(nullptr);
    else if (s_[pos_] == 't') ok = lit("true");
    else if (s_[pos_] == 'f') ok = lit("false");
    else if (s_[pos_] == 'n') ok = lit("null");
    else ok = number(path);
    --depth_;
    return ok;
  }
  bool object(const std::string &path) {
    ++pos_;
    ws();
    if (pos_ < s_.size() && s_[pos_] == '}') return ++pos_, true;
    std::set<std::string> seen;
    for (;;) {
      ws();
      std::string key;
      if (!string(&key)) return false;
      if (!seen.insert(key).second) return fail("duplicate key");
      std::string sub = path.empty() ? key : path + "." + key;
      keys_.insert(sub);
      ws();
      if (pos_ >= s_.size() || s_[pos_] != ':') return fail("expected ':'");
      ++pos_;
      ws();
      if (!value(sub)) return false;
      ws();
      if (pos_ < s_.size() && s_[pos_] == ',') { ++pos_; continue; }
      if (pos_ < s_.size() && s_[pos_] == '}') return ++pos_, true;
      return fail("expected ',' or '}'");
    }
  }
  bool array(const std::string &path) {
    ++pos_;
    ws();
    if (pos_ < s_.size() && s_[pos_] == ']') return ++pos_, true;
    for (size_t i = 0;; ++i) {
      ws();
      if (!value(path + "[" + std::to_string(i) + "]")) return false;
      ws();
      if (pos_ < s_.size() && s_[pos_] == ',') { ++pos_; continue; }
      if (pos_ < s_.size() && s_[pos_] == ']') return ++pos_, true;
      return fail("expected ',' or ']'");
    }
  }

  const std::string &s_;
  size_t pos_ = 0;
  int depth_ = 0;
  std::string err_;
  std::map<std::string, double> numbers_;
  std::set<std::string> keys_;
};

// Into a static buffer: the call itself allocates nothing, so the JSON shows
// the same figures as a snapshot taken just before.
std::string stats_json() {
  static char buf[65536];
  size_t n = brisk_stats_json(buf, sizeof buf);
  EXPECT_LT(n, sizeof buf);
  return std::string(buf, std::min(n, sizeof buf - 1));
}

// Reads a whole stdio stream back from its start.
std::string slurp(FILE *f) {
  std::string out;
  std::fflush(f);
  std::rewind(f);
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  return out;
}

}  // namespace

// ---- brisk_stats_get ----------------------------------------------------------

TEST(Stats, VersionIsChecked) {
  brisk_stats_t st;
  std::memset(&st, 0, sizeof st);
  for (uint32_t v : {0u, 2u, 1000u, 0xFFFFFFFFu}) {
    st.version = v;
    EXPECT_EQ(brisk_stats_get(&st), EINVAL) << "version " << v;
  }
  EXPECT_EQ(brisk_stats_get(nullptr), EINVAL);
  st.version = BRISK_STATS_VERSION;
  EXPECT_EQ(brisk_stats_get(&st), 0);
  EXPECT_EQ(st.version, static_cast<uint32_t>(BRISK_STATS_VERSION));
}

TEST(Stats, ClassesAndTotalsAreConsistent) {
  std::vector<void *> held;
  for (size_t n = 1; n < 1500000; n = n * 5 / 4 + 7) held.push_back(brisk_malloc(n));
  brisk_stats_t st = stats_now();
  ASSERT_GT(st.class_count, 8u);
  ASSERT_LE(st.class_count, static_cast<uint32_t>(BRISK_STATS_MAX_CLASSES));
  // Class sizes rise strictly, are multiples of 16 and reach 1 MiB.
  size_t prev = 0;
  for (unsigned c = 1; c < st.class_count; ++c) {
    EXPECT_GT(st.class_size[c], prev) << "class " << c;
    EXPECT_EQ(st.class_size[c] % 16, 0u) << "class " << c;
    prev = st.class_size[c];
  }
  EXPECT_EQ(prev, 1 * MiB);
  // Totals are the sums of the tiers; each tier's figures nest.
  size_t in_use = 0, committed = 0, reserved = 0;
  uint64_t paged_live = 0, class_live = 0;
  for (int t = 0; t < BRISK_TIER_COUNT; ++t) {
    const brisk_tier_stats_t &ts = st.tiers[t];
    EXPECT_GE(ts.committed, ts.in_use) << "tier " << t;
    EXPECT_GE(ts.reserved, ts.committed) << "tier " << t;
    in_use += ts.in_use;
    committed += ts.committed;
    reserved += ts.reserved;
    if (t != BRISK_TIER_HUGE) paged_live += ts.live_blocks;
  }
  for (unsigned c = 0; c < st.class_count; ++c) class_live += st.class_live_blocks[c];
  EXPECT_EQ(st.in_use, in_use);
  EXPECT_GE(st.committed, committed);  // plus unpurged cached segments
  EXPECT_EQ(st.reserved, reserved + st.cached);
  EXPECT_EQ(class_live, paged_live);
  EXPECT_GE(st.peak_reserved, st.mapped);
  EXPECT_EQ(st.mapped, brisk_mapped_bytes());
  EXPECT_GE(st.mapped, st.reserved);
  EXPECT_GE(st.tiers[BRISK_TIER_HUGE].live_blocks, 1u);
  EXPECT_GE(st.thread_heaps, 1u);
  for (void *p : held) brisk_free(p);
}

struct TierCase {
  size_t size;
  int tier;
  size_t count;
};

TEST(Stats, LiveBlocksAndInUseGrowByWhatIsHeld) {
  const TierCase cases[] = {{2500, BRISK_TIER_SMALL, 1000},
                            {40000, BRISK_TIER_MEDIUM, 100},
                            {300000, BRISK_TIER_LARGE, 20}};
  for (const TierCase &tc : cases) {
    SCOPED_TRACE("blocks of " + std::to_string(tc.size));
    on_fresh_thread([&] {
      std::vector<void *> blocks;
      blocks.reserve(tc.count);
      brisk_stats_t s0 = stats_now();
      unsigned cls = class_for(s0, tc.size);
      ASSERT_GT(cls, 0u);
      const size_t csize = s0.class_size[cls];
      for (size_t i = 0; i < tc.count; ++i) {
        void *p = brisk_malloc(tc.size);
        ASSERT_NE(p, nullptr);
        blocks.push_back(p);
      }
      brisk_stats_t s1 = stats_now();
      EXPECT_EQ(s1.class_live_blocks[cls] - s0.class_live_blocks[cls], tc.count);
      EXPECT_EQ(s1.tiers[tc.tier].live_blocks - s0.tiers[tc.tier].live_blocks, tc.count);
      EXPECT_EQ(s1.tiers[tc.tier].in_use - s0.tiers[tc.tier].in_use, tc.count * csize);
      EXPECT_EQ(s1.in_use - s0.in_use, tc.count * csize);
      EXPECT_GE(s1.requested - s0.requested, tc.count * tc.size);
      EXPECT_GE(s1.tiers[tc.tier].committed, s0.tiers[tc.tier].committed + tc.count * csize / 2);
      for (int t = 0; t < BRISK_TIER_COUNT; ++t)
        if (t != tc.tier) {
          EXPECT_EQ(s1.tiers[t].live_blocks, s0.tiers[t].live_blocks) << "tier " << t;
        }
      for (void *p : blocks) brisk_free(p);
      brisk_stats_t s2 = stats_now();
      EXPECT_EQ(s2.class_live_blocks[cls], s0.class_live_blocks[cls]);
      EXPECT_EQ(s2.tiers[tc.tier].live_blocks, s0.tiers[tc.tier].live_blocks);
      EXPECT_EQ(s2.in_use, s0.in_use);
      EXPECT_EQ(s2.requested, s1.requested) << "frees count as requests";
    });
  }
}

TEST(Stats, HugeTier) {
  on_fresh_thread([] {
    const size_t sizes[] = {1 * MiB + 1, 3 * MiB, 7 * MiB + 5};
    std::vector<void *> blocks;
    blocks.reserve(3);
    brisk_stats_t s0 = stats_now();
    size_t total = 0;
    for (size_t n : sizes) {
      void *p = brisk_malloc(n);
      ASSERT_NE(p, nullptr);
      blocks.push_back(p);
      total += n;
    }
    brisk_stats_t s1 = stats_now();
    const brisk_tier_stats_t &h0 = s0.tiers[BRISK_TIER_HUGE], &h1 = s1.tiers[BRISK_TIER_HUGE];
    EXPECT_EQ(h1.live_blocks - h0.live_blocks, 3u);
    EXPECT_GE(h1.in_use - h0.in_use, total);
    EXPECT_LE(h1.in_use - h0.in_use, total + total / 4 + 3 * 64 * KiB);
    EXPECT_GE(h1.reserved - h0.reserved, total);
    EXPECT_GE(s1.requested - s0.requested, total);
    for (unsigned c = 0; c < s0.class_count; ++c)
      EXPECT_EQ(s1.class_live_blocks[c], s0.class_live_blocks[c]) << "class " << c;
    for (void *p : blocks) brisk_free(p);
    brisk_stats_t s2 = stats_now();
    EXPECT_EQ(s2.tiers[BRISK_TIER_HUGE].live_blocks, h0.live_blocks);
    EXPECT_EQ(s2.tiers[BRISK_TIER_HUGE].in_use, h0.in_use);
    // Freed huge blocks stay warm: cached, still reserved.
    EXPECT_GE(s2.cached, s1.cached + total);
  });
}

TEST(Stats, OsCallCountersFollowHugeBlocks) {
  brisk_collect();
  on_fresh_thread([] {
    const size_t sizes[] = {5 * MiB, 9 * MiB + 3, 17 * MiB, 33 * MiB + 100};
    std::vector<void *> blocks;
    blocks.reserve(4);
    brisk_stats_t s0 = stats_now();
    size_t total = 0;
    for (size_t n : sizes) {
      void *p = brisk_malloc(n);
      ASSERT_NE(p, nullptr);
      std::memset(p, 1, 4096);
      blocks.push_back(p);
      total += n;
    }
    brisk_stats_t s1 = stats_now();
    EXPECT_GE(s1.mmap_calls - s0.mmap_calls, 4u) << "fresh huge blocks need new mappings";
    EXPECT_GE(s1.cache_misses - s0.cache_misses, 4u);
    EXPECT_GE(s1.mapped - s0.mapped, total);
    EXPECT_GE(s1.peak_reserved, s1.mapped);
    for (void *p : blocks) brisk_free(p);
    // Freed and taken again: served warm, no new mapping.
    brisk_stats_t s2 = stats_now();
    void *again = brisk_malloc(9 * MiB + 3);
    ASSERT_NE(again, nullptr);
    brisk_stats_t s3 = stats_now();
    EXPECT_EQ(s3.mmap_calls, s2.mmap_calls) << "a freed huge block was not recycled";
    EXPECT_GE(s3.cache_hits - s2.cache_hits, 1u);
    // Growing a huge block in place: mremap.
    void *grown = brisk_realloc(again, 40 * MiB);
    ASSERT_NE(grown, nullptr);
    brisk_stats_t s4 = stats_now();
    EXPECT_GE(s4.mremap_calls - s3.mremap_calls, 1u);
    brisk_free(grown);
    // Collect gives it all back: munmap, mapped bytes fall.
    brisk_collect();
    brisk_stats_t s5 = stats_now();
    EXPECT_GE(s5.munmap_calls - s4.munmap_calls, 4u);
    EXPECT_LE(s5.mapped + total, s4.mapped + 8 * MiB);
    EXPECT_EQ(s5.tiers[BRISK_TIER_HUGE].live_blocks, s0.tiers[BRISK_TIER_HUGE].live_blocks);
  });
}

// A huge request bigger than every warm block of the thread grows one of
// them (mremap) rather than mapping anew; calloc never does (the growth
// would have to be zeroed), and its block reads as zero.
TEST(Stats, BiggerHugeRequestGrowsAWarmBlock) {
  brisk_collect();
  on_fresh_thread([] {
    void *small = brisk_malloc(4 * MiB);
    ASSERT_NE(small, nullptr);
    std::memset(small, 0x5A, 4 * MiB);
    brisk_free(small);
    brisk_stats_t s0 = stats_now();
    const size_t big = 12 * MiB + 123;
    unsigned char *p = static_cast<unsigned char *>(brisk_malloc(big));
    ASSERT_NE(p, nullptr);
    brisk_stats_t s1 = stats_now();
    EXPECT_GE(s1.cache_hits - s0.cache_hits, 1u) << "the warm 4 MiB block was not used";
    EXPECT_EQ(s1.cache_misses, s0.cache_misses);
    EXPECT_GE(s1.mremap_calls - s0.mremap_calls, 1u);
    EXPECT_GE(brisk_usable_size(p), big);
    std::memset(p, 0xA5, big);
    EXPECT_EQ(p[0], 0xA5);
    EXPECT_EQ(p[big - 1], 0xA5);
    brisk_free(p);
    // The grown block is warm now: calloc of a bigger size must still be zero.
    const size_t bigger = 20 * MiB;
    unsigned char *z = static_cast<unsigned char *>(brisk_calloc(1, bigger));
    ASSERT_NE(z, nullptr);
    size_t nonzero = 0;
    for (size_t i = 0; i < bigger; i += 4096 - 1) nonzero += z[i] != 0;
    EXPECT_EQ(nonzero, 0u) << "calloc returned dirty bytes";
    brisk_free(z);
  });
}

TEST(Stats, MadviseCounterFollowsPurges) {
  on_fresh_thread([] {
    // Small blocks over many pages, all freed: the pages wait for a purge,
    // which brisk_collect does at once.
    std::vector<void *> blocks;
    for (int i = 0; i < 20000; ++i) blocks.push_back(brisk_malloc(1000));
    for (void *p : blocks) std::memset(p, 1, 1000);
    for (void *p : blocks) brisk_free(p);
    brisk_stats_t s0 = stats_now();
    brisk_collect();
    brisk_stats_t s1 = stats_now();
    EXPECT_GE(s1.madvise_calls + s1.munmap_calls, s0.madvise_calls + s0.munmap_calls + 1)
        << "collect gave nothing back";
    EXPECT_LE(s1.committed, s0.committed - 8 * MiB) << "collect left the freed pages committed";
  });
}

TEST(Stats, MadviseCounterCountsHugepageAdvice) {
  ASSERT_EQ(brisk_option_set(BRISK_OPTION_HUGEPAGES, 1), 0);
  brisk_collect();
  on_fresh_thread([] {
    brisk_stats_t s0 = stats_now();
    void *p = brisk_malloc(13 * MiB + 5);  // nothing cached fits: a new mapping
    ASSERT_NE(p, nullptr);
    brisk_stats_t s1 = stats_now();
    EXPECT_GE(s1.mmap_calls - s0.mmap_calls, 1u);
    EXPECT_GE(s1.madvise_calls - s0.madvise_calls, s1.mmap_calls - s0.mmap_calls)
        << "madvise(MADV_HUGEPAGE) calls are not counted";
    brisk_free(p);
  });
  brisk_option_set(BRISK_OPTION_HUGEPAGES, 0);
}

TEST(Stats, ThreadHeapsAndExits) {
  brisk_stats_t s0 = stats_now();
  std::mutex m;
  std::condition_variable cv;
  int stage = 0;
  std::thread t([&] {
    void *p = brisk_malloc(100);  // the thread's heap starts with its first block
    std::unique_lock<std::mutex> g(m);
    stage = 1;
    cv.notify_all();
    cv.wait(g, [&] { return stage == 2; });
    brisk_free(p);
  });
  {
    std::unique_lock<std::mutex> g(m);
    cv.wait(g, [&] { return stage == 1; });
  }
  brisk_stats_t s1 = stats_now();
  EXPECT_EQ(s1.thread_heaps, s0.thread_heaps + 1);
  EXPECT_EQ(s1.threads_exited, s0.threads_exited);
  {
    std::lock_guard<std::mutex> g(m);
    stage = 2;
  }
  cv.notify_all();
  t.join();
  brisk_stats_t s2 = stats_now();
  EXPECT_EQ(s2.thread_heaps, s0.thread_heaps);
  EXPECT_EQ(s2.threads_exited, s0.threads_exited + 1);

  // Several at once.
  std::vector<std::thread> ts;
  for (int i = 0; i < 5; ++i) ts.emplace_back([] { brisk_free(brisk_malloc(64)); });
  for (auto &th : ts) th.join();
  brisk_stats_t s3 = stats_now();
  EXPECT_EQ(s3.threads_exited, s0.threads_exited + 6);
  EXPECT_EQ(s3.thread_heaps, s0.thread_heaps);

  // Explicit heaps are counted apart.
  brisk_heap_t *h = brisk_heap_new();
  brisk_stats_t s4 = stats_now();
  EXPECT_EQ(s4.explicit_heaps, s3.explicit_heaps + 1);
  EXPECT_EQ(s4.thread_heaps, s3.thread_heaps);
  brisk_heap_destroy(h);
  EXPECT_EQ(stats_now().explicit_heaps, s3.explicit_heaps);
}

TEST(Stats, AbandonedSegmentsOfExitedThreads) {
  std::vector<void *> left;
  left.reserve(500);  // the thread must allocate nothing but the blocks
  brisk_stats_t s0 = stats_now();
  unsigned cls = class_for(s0, 3000);
  std::thread t([&] {
    for (int i = 0; i < 500; ++i) left.push_back(brisk_malloc(3000));
  });
  t.join();
  brisk_stats_t s1 = stats_now();
  // (The thread may have adopted an older abandoned segment first.)
  EXPECT_GE(s1.abandoned_segments, 1u);
  EXPECT_GE(s1.abandoned_bytes, s0.abandoned_bytes + 500 * 3000);
  EXPECT_EQ(s1.class_live_blocks[cls] - s0.class_live_blocks[cls], 500u) << "blocks of exited threads stay live";
  for (void *p : left) brisk_free(p);
  brisk_collect();
  brisk_stats_t s2 = stats_now();
  EXPECT_EQ(s2.abandoned_segments, s0.abandoned_segments);
  EXPECT_EQ(s2.abandoned_bytes, s0.abandoned_bytes);
  EXPECT_EQ(s2.class_live_blocks[cls], s0.class_live_blocks[cls]);
}

// ---- brisk_stats_json ---------------------------------------------------------

TEST(Stats, JsonIsValidAndMatchesSnapshot) {
  on_fresh_thread([] {
    std::vector<void *> held;
    for (int i = 0; i < 333; ++i) held.push_back(brisk_malloc(2500));
    held.push_back(brisk_malloc(2 * MiB));
    held.push_back(brisk_malloc(5 * MiB));
    brisk_stats_t st = stats_now();
    std::string text = stats_json();
    Json j(text);
    ASSERT_TRUE(j.parse()) << j.error() << "\n" << text;
    const auto &num = j.numbers();
    const char *const want[] = {"version", "requested", "in_use", "committed", "reserved", "cached",
                                "mapped", "peak_reserved", "os.mmap", "os.munmap", "os.madvise",
                                "os.mremap", "cache.hits", "cache.misses", "heaps.thread",
                                "heaps.explicit", "heaps.threads_exited", "heaps.abandoned_segments",
                                "heaps.abandoned_bytes"};
    for (const char *k : want) EXPECT_TRUE(num.count(k)) << "no number \"" << k << "\" in " << text;
    for (const char *tier : {"small", "medium", "large", "huge"})
      for (const char *f : {"live_blocks", "in_use", "committed", "reserved"})
        EXPECT_TRUE(num.count(std::string("tiers.") + tier + "." + f)) << tier << "." << f;
    EXPECT_EQ(num.at("version"), BRISK_STATS_VERSION);
    // Figures nothing changed since the snapshot: equal.
    EXPECT_EQ(num.at("tiers.huge.live_blocks"), static_cast<double>(st.tiers[BRISK_TIER_HUGE].live_blocks));
    EXPECT_EQ(num.at("tiers.small.live_blocks"), static_cast<double>(st.tiers[BRISK_TIER_SMALL].live_blocks));
    EXPECT_EQ(num.at("in_use"), static_cast<double>(st.in_use));
    EXPECT_EQ(num.at("os.mmap"), static_cast<double>(st.mmap_calls));
    EXPECT_EQ(num.at("heaps.thread"), static_cast<double>(st.thread_heaps));
    // The classes list names the class of the held blocks with its count.
    unsigned cls = class_for(st, 2500);
    bool found = false;
    for (size_t i = 0; num.count("classes[" + std::to_string(i) + "].size"); ++i) {
      std::string base = "classes[" + std::to_string(i) + "]";
      ASSERT_TRUE(num.count(base + ".live_blocks"));
      EXPECT_GT(num.at(base + ".live_blocks"), 0) << "a class with no live block is listed";
      if (num.at(base + ".size") == static_cast<double>(st.class_size[cls])) {
        found = true;
        EXPECT_EQ(num.at(base + ".live_blocks"), static_cast<double>(st.class_live_blocks[cls]));
        EXPECT_GE(num.at(base + ".live_blocks"), 333);
      }
    }
    EXPECT_TRUE(found) << "class " << st.class_size[cls] << " missing from " << text;
    for (void *p : held) brisk_free(p);
  });
}

TEST(Stats, JsonReturnsNeededLengthAndTruncates) {
  on_fresh_thread([] {
    // Nothing allocates between the calls, so every call sees the same stats.
    static char big[32768], small[64];
    size_t need = brisk_stats_json(nullptr, 0);
    ASSERT_GT(need, 100u);
    ASSERT_LT(need, sizeof big);
    std::memset(big, 'X', sizeof big);
    size_t got = brisk_stats_json(big, need + 1);
    EXPECT_EQ(got, need);
    EXPECT_EQ(std::strlen(big), need);
    EXPECT_EQ(big[need + 1], 'X') << "wrote past the length given";
    EXPECT_EQ(big[0], '{');
    EXPECT_EQ(big[need - 1], '}');
    // Exactly the length: one byte short for the NUL, so the text is cut by one.
    std::memset(big, 'X', sizeof big);
    EXPECT_EQ(brisk_stats_json(big, need), need);
    EXPECT_EQ(std::strlen(big), need - 1);
    // A short buffer: cut and terminated, nothing written past it.
    std::memset(small, 'X', sizeof small);
    EXPECT_EQ(brisk_stats_json(small, 10), need);
    EXPECT_EQ(std::strlen(small), 9u);
    EXPECT_EQ(std::string(small, 9), std::string(big, 9));
    EXPECT_EQ(small[10], 'X');
    std::memset(small, 'X', sizeof small);
    EXPECT_EQ(brisk_stats_json(small, 1), need);
    EXPECT_EQ(small[0], '\0');
    EXPECT_EQ(small[1], 'X');
    // len 0 with a buffer: nothing written.
    std::memset(small, 'X', sizeof small);
    EXPECT_EQ(brisk_stats_json(small, 0), need);
    EXPECT_EQ(small[0], 'X');
  });
}

// ---- brisk_stats_print ----------------------------------------------------------

TEST(Stats, PrintWritesTableNamingTiers) {
  std::vector<void *> held;
  for (int i = 0; i < 777; ++i) held.push_back(brisk_malloc(2500));
  held.push_back(brisk_malloc(3 * MiB));
  brisk_stats_t st = stats_now();
  FILE *f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  std::fputs("before the table\n", f);  // buffered: must come out first
  brisk_stats_print(f);
  std::fputs("after the table\n", f);
  std::string text = slurp(f);
  std::fclose(f);
  EXPECT_EQ(text.find("before the table\n"), 0u) << text;
  EXPECT_NE(text.find("after the table\n"), std::string::npos);
  EXPECT_LT(text.find("brisk statistics"), text.find("after the table"));
  for (const char *word : {"brisk statistics", "small", "medium", "large", "huge", "total", "live blocks",
                           "in use", "committed", "reserved", "mmap", "munmap", "madvise", "mremap",
                           "requested", "thread", "explicit"})
    EXPECT_NE(text.find(word), std::string::npos) << "no \"" << word << "\" in\n" << text;
  // The tier rows and the class row for the held blocks.
  bool huge_row = false, class_row = false;
  unsigned cls = class_for(st, 2500);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    std::string line = text.substr(pos, eol == std::string::npos ? std::string::npos : eol - pos);
    pos = eol == std::string::npos ? text.size() : eol + 1;
    unsigned long long a = 0, b = 0;
    char name[32];
    if (std::sscanf(line.c_str(), " %31s %llu", name, &a) == 2 && std::string(name) == "huge" && a >= 1)
      huge_row = true;
    if (std::sscanf(line.c_str(), " %llu %llu", &a, &b) == 2 && a == st.class_size[cls] && b >= 777)
      class_row = true;
  }
  EXPECT_TRUE(huge_row) << text;
  EXPECT_TRUE(class_row) << "no row for class " << st.class_size[cls] << " in\n" << text;
  for (void *p : held) brisk_free(p);
}

TEST(Stats, PrintNullGoesToStderr) {
  std::fflush(stderr);
  FILE *f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  int saved = ::dup(2);
  ASSERT_GE(saved, 0);
  ::dup2(::fileno(f), 2);
  brisk_stats_print(nullptr);
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::string text = slurp(f);
  std::fclose(f);
  EXPECT_NE(text.find("brisk statistics"), std::string::npos) << text;
  EXPECT_NE(text.find("huge"), std::string::npos) << text;
}

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
    // The message says where: the bad pointer for the first case.
    char bad[32];
    std::snprintf(bad, sizeof bad, "%p", static_cast<void *>(&outside));
    EXPECT_NE(msg[0].find(bad), std::string::npos) << msg[0];
    EXPECT_NE(msg[3].find("loop"), std::string::npos) << msg[3];
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
    const size_t n = 502;
    // The freeing thread starts first: starting a thread allocates (glibc's
    // per-thread tables), and those blocks are in the baseline below.
    std::atomic<bool> go{false}, started{false};
    std::thread other([n, &go, &started] {
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
    missing += !std::binary_search(g_seen, g_seen + nseen, std::make_pair(g_held[i].p, static_cast<size_t>(7168)));
  EXPECT_EQ(missing, 0) << missing << " of the 50 blocks an exited thread left were not visited";
  for (int i = 0; i < 51; ++i) brisk_free(g_held[i].p);
}
