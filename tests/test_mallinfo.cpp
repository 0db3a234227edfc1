// glibc's statistics interface (mallinfo2, mallinfo, malloc_stats, mallopt)
// answers for brisk, not for glibc's idle arena (issue #10, item 11).
//
// Built twice, like test_cpp: linked with libbrisk.a (mallinfo_static) and
// as a plain program run under LD_PRELOAD=libbrisk.so (mallinfo_preload).
#include <gtest/gtest.h>
#include <malloc.h>
#include <unistd.h>

#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

// mallinfo is deprecated (its int fields wrap); its saturation is tested here.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace {

void *sink(void *p) {
  asm volatile("" : : "r"(p) : "memory");
  return p;
}

constexpr size_t kSmallCount = 1000, kSmallSize = 100;
constexpr size_t kHugeCount = 10, kHugeSize = static_cast<size_t>(8) << 20;

int clamp(size_t v) { return v > static_cast<size_t>(INT_MAX) ? INT_MAX : static_cast<int>(v); }

// The fields of mallinfo that must equal mallinfo2's, saturated.
void expect_saturated_copy(const struct mallinfo &mi, const struct mallinfo2 &m2) {
  EXPECT_EQ(mi.arena, clamp(m2.arena));
  EXPECT_EQ(mi.ordblks, clamp(m2.ordblks));
  EXPECT_EQ(mi.smblks, clamp(m2.smblks));
  EXPECT_EQ(mi.hblks, clamp(m2.hblks));
  EXPECT_EQ(mi.hblkhd, clamp(m2.hblkhd));
  EXPECT_EQ(mi.usmblks, clamp(m2.usmblks));
  EXPECT_EQ(mi.fsmblks, clamp(m2.fsmblks));
  EXPECT_EQ(mi.uordblks, clamp(m2.uordblks));
  EXPECT_EQ(mi.fordblks, clamp(m2.fordblks));
  EXPECT_EQ(mi.keepcost, clamp(m2.keepcost));
}

// What malloc_stats() writes to stderr.
std::string capture_malloc_stats() {
  fflush(stderr);
  FILE *tmp = tmpfile();
  if (!tmp) return "(tmpfile failed)";
  int saved = dup(2);
  dup2(fileno(tmp), 2);
  malloc_stats();
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  std::string text;
  rewind(tmp);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, tmp)) > 0) text.append(buf, n);
  fclose(tmp);
  return text;
}

// The number after `label` (e.g. "in use bytes") in the block after `section`.
long long figure_after(const std::string &text, const std::string &section, const std::string &label) {
  size_t at = text.find(section);
  if (at == std::string::npos) return -1;
  at = text.find(label, at);
  if (at == std::string::npos) return -1;
  at = text.find('=', at);
  if (at == std::string::npos) return -1;
  return std::strtoll(text.c_str() + at + 1, nullptr, 10);
}

}  // namespace

TEST(Mallinfo, Mallinfo2CountsBriskBlocksInUseAndHuge) {
  struct mallinfo2 before = mallinfo2();
  std::vector<void *> small, huge;
  for (size_t i = 0; i < kSmallCount; ++i) small.push_back(sink(std::malloc(kSmallSize)));
  for (size_t i = 0; i < kHugeCount; ++i) huge.push_back(sink(std::malloc(kHugeSize)));
  struct mallinfo2 live = mallinfo2();

  EXPECT_GE(live.uordblks, before.uordblks + kSmallCount * kSmallSize);
  EXPECT_GE(live.hblks, before.hblks + kHugeCount);
  EXPECT_GE(live.hblkhd, before.hblkhd + kHugeCount * kHugeSize);
  // The small blocks live in brisk's segments: arena holds them and more.
  EXPECT_GE(live.arena, live.uordblks);
  EXPECT_EQ(live.fordblks, live.arena - live.uordblks);
  EXPECT_LE(live.keepcost, live.fordblks);
  EXPECT_GE(live.usmblks, live.arena + live.hblkhd) << "usmblks is the peak of what brisk holds";
  EXPECT_EQ(live.smblks, 0u);
  EXPECT_EQ(live.fsmblks, 0u);

  for (void *p : small) std::free(p);
  for (void *p : huge) std::free(p);
  struct mallinfo2 after = mallinfo2();
  EXPECT_LE(after.uordblks + kSmallCount * kSmallSize, live.uordblks);
  EXPECT_LE(after.hblkhd + kHugeCount * kHugeSize, live.hblkhd);
  EXPECT_LE(after.hblks + kHugeCount, live.hblks);
}

TEST(Mallinfo, MallinfoIsMallinfo2SaturatedAtIntMax) {
  std::vector<void *> blocks;
  for (size_t i = 0; i < kSmallCount; ++i) blocks.push_back(sink(std::malloc(kSmallSize)));
  struct mallinfo2 m2 = mallinfo2();
  struct mallinfo mi = mallinfo();
  EXPECT_GE(static_cast<size_t>(mi.uordblks), kSmallCount * kSmallSize);
  expect_saturated_copy(mi, m2);

  // 3 GiB of address space (never touched): hblkhd passes INT_MAX.
  const size_t big = static_cast<size_t>(3) << 30;
  void *p = sink(std::malloc(big));
  ASSERT_NE(p, nullptr) << "could not reserve 3 GiB of address space";
  m2 = mallinfo2();
  mi = mallinfo();
  EXPECT_GE(m2.hblkhd, big);
  EXPECT_EQ(mi.hblkhd, INT_MAX);
  expect_saturated_copy(mi, m2);
  std::free(p);
  for (void *b : blocks) std::free(b);
}

TEST(Mallinfo, MallocStatsPrintsBriskSummary) {
  std::vector<void *> small, huge;
  for (size_t i = 0; i < kSmallCount; ++i) small.push_back(sink(std::malloc(kSmallSize)));
  for (size_t i = 0; i < kHugeCount; ++i) huge.push_back(sink(std::malloc(kHugeSize)));
  std::string text = capture_malloc_stats();
  for (void *p : small) std::free(p);
  for (void *p : huge) std::free(p);

  ASSERT_FALSE(text.empty());
  EXPECT_NE(text.find("Arena 0:"), std::string::npos) << text;
  EXPECT_NE(text.find("brisk statistics"), std::string::npos) << text;
  EXPECT_GE(figure_after(text, "Arena 0:", "in use bytes"),
            static_cast<long long>(kSmallCount * kSmallSize)) << text;
  EXPECT_GE(figure_after(text, "Total (incl. mmap):", "in use bytes"),
            static_cast<long long>(kSmallCount * kSmallSize + kHugeCount * kHugeSize)) << text;
}

TEST(Mallinfo, MalloptAcceptsGlibcTuningAndRefusesTheRest) {
  EXPECT_EQ(mallopt(M_ARENA_MAX, 2), 1);
  EXPECT_EQ(mallopt(M_MMAP_THRESHOLD, 1 << 20), 1);
  EXPECT_EQ(mallopt(M_TRIM_THRESHOLD, 1 << 20), 1);
  // Debugging features brisk does not have, and parameters nobody defines.
  EXPECT_EQ(mallopt(M_PERTURB, 0xAB), 0);
  EXPECT_EQ(mallopt(M_CHECK_ACTION, 3), 0);
  EXPECT_EQ(mallopt(12345, 1), 0);
}
