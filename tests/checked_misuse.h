// What the checked library's misuse tests share (test_checked_misuse.cpp,
// test_checked_at_exit.cpp): entry points whose names the reported stacks
// show, and the patterns of a report. Included once per test binary.
#ifndef BRISK_TESTS_CHECKED_MISUSE_H
#define BRISK_TESTS_CHECKED_MISUSE_H

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "test_util.h"

using namespace bt;

namespace {

using CheckedMisuse = DeathTest;

}  // namespace

// Outside any namespace, not inlined nor cloned: the stacks show these names.
#if defined(__clang__)
#define TEST_FRAME __attribute__((noinline))
#else
#define TEST_FRAME __attribute__((noipa))
#endif

extern "C" TEST_FRAME void *checked_test_alloc(size_t n) {
  void *p = brisk_malloc(n);
  g_sink = p;  // keeps the call out of tail position: this frame shows
  return p;
}

extern "C" TEST_FRAME void checked_test_free(void *p) {
  brisk_free(p);
  g_sink = nullptr;
}

extern "C" TEST_FRAME void *checked_test_realloc(void *p, size_t n) {
  void *q = brisk_realloc(p, n);
  g_sink = q;
  return q;
}

extern "C" TEST_FRAME void *checked_test_realloc_aligned(void *p, size_t align, size_t n) {
  void *q = brisk_realloc_aligned(p, align, n);
  g_sink = q;
  return q;
}

// Leaked for real: no copy of the blocks' addresses is kept (only their
// complements, which point nowhere), so the leak report's scan finds none.
extern "C" TEST_FRAME void checked_test_leak(size_t n, int count) {
  for (int i = 0; i < count; ++i) g_sink = reinterpret_cast<void *>(~reinterpret_cast<uintptr_t>(brisk_malloc(n)));
}

#define ADDR "0x[0-9a-f]+"
// A stack in a report: "  <title>:", then frames "    #N 0x... ...", one
// of which names `fn`.
#define FRAMES "(    #[0-9]+ 0x[0-9a-f]+[^\n]*\n)*"
#define STACK(title, fn) "  " title ":\n" FRAMES "    #[0-9]+ 0x[0-9a-f]+ [^\n]*" fn "[^\n]*\n" FRAMES
#define DETECTED(fn) "\n" STACK("detected at", fn)
#define ALLOCATED STACK("allocated at", "checked_test_alloc")
#define FREED STACK("freed at", "checked_test_free")

namespace {

// A volatile write the compiler cannot drop (a store to freed memory or
// past a block is otherwise dead).
[[maybe_unused]] void poke(void *p, size_t at, uint8_t value) { static_cast<volatile uint8_t *>(p)[at] = value; }

// Allocates blocks of n bytes until p comes back (or gives up).
[[maybe_unused]] void allocate_until(void *p, size_t n) {
  for (int i = 0; i < 100000; ++i)
    if (checked_test_alloc(n) == p) return;
}

[[maybe_unused]] const size_t kTierSizes[] = {1, 100, 1000, 20000, 300000, 3 * MiB};

}  // namespace

#endif
