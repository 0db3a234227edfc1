// Statistics reports: brisk_stats_json (valid JSON, the figures of a
// snapshot, the needed length and truncation) and brisk_stats_print (the
// table, and stderr for a NULL stream). The figures themselves are checked in
// test_stats.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "test_util.h"

using namespace bt;

namespace {

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
