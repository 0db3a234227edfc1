// brisk's own records (heap structs, the checked library's stack depot) sit
// between PROT_NONE zones: a program's write that runs or lands outside a
// neighbouring mapping faults rather than rewrite them. Found by an outside
// misuse suite: a write 1 MiB below the first block rewrote the checked
// library's stack depot unnoticed. The suite links brisk's objects, where
// the OS layer's hidden entry points are visible.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

extern "C" void *_bk_os_map_records(size_t size);
extern "C" void _bk_os_unmap_records(void *p, size_t size);

namespace {

// The permissions ("rw-p", "---p") of the mapping holding address a, from
// /proc/self/maps; "" when nothing is mapped there.
std::string protection_at(uintptr_t a) {
  FILE *f = std::fopen("/proc/self/maps", "r");
  if (!f) return "?";
  char line[512];
  std::string found;
  while (found.empty() && std::fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    char perms[8];
    if (std::sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 && a >= lo && a < hi) found = perms;
  }
  std::fclose(f);
  return found;
}

void poke(volatile unsigned char *p) { *p = 0x41; }

TEST(OsRecords, SitBetweenZonesThatFault) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE)), size = 3 * page + 100;
  const size_t inner = (size + page - 1) / page * page;
  auto *p = static_cast<unsigned char *>(_bk_os_map_records(size));
  ASSERT_NE(p, nullptr);
  std::memset(p, 0x5a, size);  // all of it is writable
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  EXPECT_EQ(protection_at(a), "rw-p");
  for (uintptr_t off : {uintptr_t{1}, uintptr_t{1} << 20, (uintptr_t{4} << 20) - 1})
    EXPECT_EQ(protection_at(a - off), "---p") << off << " bytes below";
  for (uintptr_t off : {uintptr_t{0}, uintptr_t{1} << 20, (uintptr_t{4} << 20) - 1})
    EXPECT_EQ(protection_at(a + inner + off), "---p") << off << " bytes past the end";
  _bk_os_unmap_records(p, size);
  EXPECT_EQ(protection_at(a), "");
}

TEST(OsRecordsDeathTest, AWriteAMegabyteOffFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto *p = static_cast<unsigned char *>(_bk_os_map_records(4096));
  ASSERT_NE(p, nullptr);
  EXPECT_DEATH(poke(p - (1u << 20)), "");
  _bk_os_unmap_records(p, 4096);
}

}  // namespace
