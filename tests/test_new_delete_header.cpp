// include/brisk-new-delete.hpp: the one translation unit of this program
// that includes it. The program links brisk_core (the prefixed API, no
// malloc override), so malloc stays glibc's while every operator new and
// delete, GoogleTest's and libstdc++'s included, goes to brisk.
//
// Not built under the sanitizers: they replace operator new themselves.
#include "brisk-new-delete.hpp"

#include <gtest/gtest.h>

#include "overaligned_types.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr size_t MiB = 1024 * 1024;
// 1 PiB: more than the address space, so never available.
volatile size_t g_huge = static_cast<size_t>(1) << 50;

bool owned(const void *p) { return brisk_owns(p) != 0; }
bool aligned_to(const void *p, size_t a) { return (reinterpret_cast<uintptr_t>(p) & (a - 1)) == 0; }

// Keeps the compiler from eliding new/delete pairs.
template <class T>
T *sink(T *p) {
  asm volatile("" : : "r"(p) : "memory");
  return p;
}

struct WithDtor {  // arrays of it carry a cookie: sized delete[] sees it
  int v = 1;
  ~WithDtor() { v = 0; }
};

// Restores the default (no handler) whatever a test does.
struct HandlerGuard {
  ~HandlerGuard() { std::set_new_handler(nullptr); }
};

TEST(NewDeleteHeader, PlainAndArrayAreBrisk) {
  int *i = sink(new int(5));
  EXPECT_TRUE(owned(i));
  EXPECT_EQ(*i, 5);
  delete i;
  int *a = sink(new int[1000]());
  EXPECT_TRUE(owned(a));
  EXPECT_EQ(a[999], 0);
  delete[] a;
  WithDtor *w = sink(new WithDtor[33]);
  EXPECT_TRUE(owned(w));
  delete[] w;
  char *big = sink(new char[8 * MiB]);
  EXPECT_TRUE(owned(big));
  big[8 * MiB - 1] = 1;
  delete[] big;
  // malloc is not replaced: the check above is not trivially true.
  void *m = sink(std::malloc(64));
  EXPECT_FALSE(owned(m));
  std::free(m);
}

TEST(NewDeleteHeader, ZeroSize) {
  void *a = ::operator new(0);
  void *b = ::operator new(0);
  EXPECT_NE(a, nullptr);
  EXPECT_NE(a, b);
  EXPECT_TRUE(owned(a));
  ::operator delete(a);
  ::operator delete(b);
  char *c = sink(new char[0]);
  EXPECT_NE(c, nullptr);
  delete[] c;
}

TEST(NewDeleteHeader, StandardLibraryUsesIt) {
  std::vector<int> v(10000, 3);
  EXPECT_TRUE(owned(v.data()));
  std::string s(1000, 's');
  EXPECT_TRUE(owned(s.data()));
  std::map<int, std::string> m;
  for (int i = 0; i < 1000; i++) m[i] = std::string(100, 'm');
  EXPECT_TRUE(owned(&*m.begin()));
  auto sp = std::make_shared<std::string>(500, 'p');
  EXPECT_TRUE(owned(sp.get()));
  try {
    throw std::runtime_error(std::string(300, 'e'));
  } catch (const std::runtime_error &e) {
    EXPECT_EQ(std::strlen(e.what()), 300u);
  }
}

TEST(NewDeleteHeader, Aligned) {
  A64 *a = sink(new A64);
  EXPECT_TRUE(aligned_to(a, 64));
  EXPECT_TRUE(owned(a));
  delete a;
  A256 *b = sink(new A256);
  EXPECT_TRUE(aligned_to(b, 256));
  EXPECT_TRUE(owned(b));
  EXPECT_EQ(b->c[299], 0x25);
  delete b;
  A256 *arr = sink(new A256[17]);
  for (int i = 0; i < 17; i++) ASSERT_TRUE(aligned_to(&arr[i], 256));
  delete[] arr;
  A4096 *p = sink(new A4096[3]);
  EXPECT_TRUE(aligned_to(p, 4096));
  delete[] p;
  std::vector<A256> v(100);
  EXPECT_TRUE(aligned_to(v.data(), 256));
  EXPECT_TRUE(owned(v.data()));
  for (size_t align = 1; align <= 64 * 1024; align *= 2) {
    void *q = ::operator new(1000, std::align_val_t(align));
    EXPECT_TRUE(aligned_to(q, align)) << align;
    EXPECT_TRUE(owned(q));
    ::operator delete(q, std::align_val_t(align));
    void *r = ::operator new[](3 * align, std::align_val_t(align));
    EXPECT_TRUE(aligned_to(r, align)) << align;
    ::operator delete[](r, 3 * align, std::align_val_t(align));
  }
}

TEST(NewDeleteHeader, EveryDeleteForm) {
  // Each replaceable delete, called directly on a block of the matching new.
  const std::align_val_t al{128};
  void *p;
  p = ::operator new(40);
  ::operator delete(p);
  p = ::operator new(40);
  ::operator delete(p, size_t(40));
  p = ::operator new(40, std::nothrow);
  ::operator delete(p, std::nothrow);
  p = ::operator new[](40);
  ::operator delete[](p);
  p = ::operator new[](40);
  ::operator delete[](p, size_t(40));
  p = ::operator new[](40, std::nothrow);
  ::operator delete[](p, std::nothrow);
  p = ::operator new(40, al);
  ::operator delete(p, al);
  p = ::operator new(40, al);
  ::operator delete(p, size_t(40), al);
  p = ::operator new(40, al, std::nothrow);
  ::operator delete(p, al, std::nothrow);
  p = ::operator new[](40, al);
  ::operator delete[](p, al);
  p = ::operator new[](40, al);
  ::operator delete[](p, size_t(40), al);
  p = ::operator new[](40, al, std::nothrow);
  ::operator delete[](p, al, std::nothrow);
  ::operator delete(nullptr);
  ::operator delete(nullptr, al);
  // The compiler's own sized deletes (-fsized-deallocation is the default).
  struct S {
    char c[40];
  };
  S *s = sink(new S);
  delete s;
  WithDtor *w = sink(new WithDtor[5]);
  delete[] w;
}

TEST(NewDeleteHeader, NothrowHugeReturnsNull) {
  EXPECT_EQ(sink(new (std::nothrow) char[g_huge]), nullptr);
  EXPECT_EQ(::operator new(g_huge, std::nothrow), nullptr);
  EXPECT_EQ(::operator new[](g_huge, std::nothrow), nullptr);
  EXPECT_EQ(::operator new(g_huge, std::align_val_t(256), std::nothrow), nullptr);
  EXPECT_EQ(::operator new[](g_huge, std::align_val_t(256), std::nothrow), nullptr);
  int *ok = sink(new (std::nothrow) int(3));
  ASSERT_NE(ok, nullptr);
  EXPECT_TRUE(owned(ok));
  delete ok;
  A256 *a = sink(new (std::nothrow) A256);
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(aligned_to(a, 256));
  delete a;
}

TEST(NewDeleteHeader, ThrowingHugeThrowsBadAlloc) {
  EXPECT_THROW(sink(new char[g_huge]), std::bad_alloc);
  EXPECT_THROW((void)::operator new(g_huge), std::bad_alloc);
  EXPECT_THROW((void)::operator new[](g_huge), std::bad_alloc);
  EXPECT_THROW((void)::operator new(g_huge, std::align_val_t(4096)), std::bad_alloc);
  EXPECT_THROW((void)::operator new[](g_huge, std::align_val_t(64)), std::bad_alloc);
  std::vector<char> v;
  EXPECT_THROW(v.reserve(g_huge), std::bad_alloc);
}

int g_calls = 0;

TEST(NewDeleteHeader, NewHandlerCalledUntilItGivesUp) {
  HandlerGuard guard;
  g_calls = 0;
  std::set_new_handler([] {
    if (++g_calls == 3) std::set_new_handler(nullptr);  // then bad_alloc
  });
  EXPECT_THROW(sink(new char[g_huge]), std::bad_alloc);
  EXPECT_EQ(g_calls, 3);

  g_calls = 0;
  std::set_new_handler([] {
    if (++g_calls == 2) std::set_new_handler(nullptr);
  });
  EXPECT_THROW((void)::operator new(g_huge, std::align_val_t(256)), std::bad_alloc);
  EXPECT_EQ(g_calls, 2);
}

TEST(NewDeleteHeader, NewHandlerThatThrows) {
  HandlerGuard guard;
  g_calls = 0;
  std::set_new_handler([] {
    g_calls++;
    throw std::bad_alloc();
  });
  EXPECT_THROW((void)::operator new(g_huge), std::bad_alloc);
  EXPECT_EQ(g_calls, 1);
  // The nothrow forms turn the handler's bad_alloc into nullptr.
  EXPECT_EQ(::operator new(g_huge, std::nothrow), nullptr);
  EXPECT_EQ(::operator new[](g_huge, std::nothrow), nullptr);
  EXPECT_EQ(::operator new(g_huge, std::align_val_t(128), std::nothrow), nullptr);
  EXPECT_EQ(::operator new[](g_huge, std::align_val_t(128), std::nothrow), nullptr);
  EXPECT_EQ(g_calls, 5);
}

TEST(NewDeleteHeader, NewHandlerThatMakesRoomSucceeds) {
  HandlerGuard guard;
  // Cap brisk just above what it maps now; the handler lifts the cap, as a
  // real handler would release a reserve, and the retry succeeds.
  const size_t old_cap = brisk_get_max_bytes();
  g_calls = 0;
  std::set_new_handler([] {
    g_calls++;
    brisk_set_max_bytes(0);
  });
  brisk_set_max_bytes(brisk_mapped_bytes() + MiB);
  char *p = sink(new char[64 * MiB]);
  brisk_set_max_bytes(old_cap);
  EXPECT_EQ(g_calls, 1);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(owned(p));
  p[64 * MiB - 1] = 1;
  delete[] p;
}

TEST(NewDeleteHeader, AcrossThreads) {
  std::vector<std::string *> made(2000);
  std::thread maker([&] {
    for (auto &s : made) s = new std::string(64, 'x');
  });
  maker.join();
  std::thread freer([&] {
    for (auto *s : made) {
      EXPECT_TRUE(owned(s));
      delete s;
    }
  });
  freer.join();
}

}  // namespace
