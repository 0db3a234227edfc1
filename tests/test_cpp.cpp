// malloc and every form of C++ operator new/delete served by brisk.
//
// Built twice:
//  - BRISK_CPP_STATIC=1: linked with libbrisk.a (target brisk_static), the
//    brisk_* functions called directly;
//  - otherwise: a plain dynamically linked program that knows nothing of
//    brisk, run with LD_PRELOAD=libbrisk.so; brisk_* found with dlsym.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include "overaligned_types.h"
#include <malloc.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <string>
#include <thread>
#include <vector>

#ifndef BRISK_CPP_STATIC
#define BRISK_CPP_STATIC 0
#endif
#if BRISK_CPP_STATIC
#include "brisk.h"
#endif

namespace {

struct Brisk {
  int (*owns)(const void *) = nullptr;
  void (*set_max_bytes)(size_t) = nullptr;
  size_t (*get_max_bytes)() = nullptr;
  size_t (*mapped_bytes)() = nullptr;
  Brisk() {
#if BRISK_CPP_STATIC
    owns = brisk_owns;
    set_max_bytes = brisk_set_max_bytes;
    get_max_bytes = brisk_get_max_bytes;
    mapped_bytes = brisk_mapped_bytes;
#else
    owns = reinterpret_cast<int (*)(const void *)>(dlsym(RTLD_DEFAULT, "brisk_owns"));
    set_max_bytes = reinterpret_cast<void (*)(size_t)>(dlsym(RTLD_DEFAULT, "brisk_set_max_bytes"));
    get_max_bytes = reinterpret_cast<size_t (*)()>(dlsym(RTLD_DEFAULT, "brisk_get_max_bytes"));
    mapped_bytes = reinterpret_cast<size_t (*)()>(dlsym(RTLD_DEFAULT, "brisk_mapped_bytes"));
#endif
  }
  bool ok() const { return owns && set_max_bytes && get_max_bytes && mapped_bytes; }
};

const Brisk &brisk() {
  static Brisk b;
  return b;
}

// Keeps the compiler from eliding new/delete pairs.
void *sink(void *p) {
  asm volatile("" : : "r"(p) : "memory");
  return p;
}

bool owned(const void *p) { return brisk().owns && brisk().owns(p) != 0; }

bool aligned_to(const void *p, size_t a) { return (reinterpret_cast<uintptr_t>(p) & (a - 1)) == 0; }

volatile size_t g_huge = static_cast<size_t>(1) << 50;  // 1 PiB: never available


int g_handler_calls = 0;
int g_handler_limit = 0;
void counting_handler() {
  if (++g_handler_calls >= g_handler_limit) std::set_new_handler(nullptr);
}

void lifting_handler() {
  ++g_handler_calls;
  brisk().set_max_bytes(0);
}

class Cpp : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(brisk().ok()) << "brisk_* not found: run this program with LD_PRELOAD=libbrisk.so";
    std::set_new_handler(nullptr);
    g_handler_calls = 0;
  }
  void TearDown() override { std::set_new_handler(nullptr); }
};

// Where a symbol visible to the dynamic linker comes from.
std::string defining_object(const char *symbol) {
  void *s = dlsym(RTLD_DEFAULT, symbol);
  if (!s) return "(not found)";
  Dl_info info;
  if (!dladdr(s, &info) || !info.dli_fname) return "(unknown)";
  return info.dli_fname;
}

}  // namespace

TEST_F(Cpp, SymbolsComeFromBrisk) {
  // The malloc family and the throwing new and every delete must be brisk's.
  const char *symbols[] = {
      "malloc", "free", "calloc", "realloc", "aligned_alloc", "posix_memalign", "memalign",
      "malloc_usable_size", "valloc", "pvalloc", "reallocarray",
      "_Znwm", "_Znam", "_ZnwmSt11align_val_t", "_ZnamSt11align_val_t",
      "_ZdlPv", "_ZdaPv", "_ZdlPvm", "_ZdaPvm", "_ZdlPvSt11align_val_t",
      "_ZdaPvSt11align_val_t", "_ZdlPvmSt11align_val_t", "_ZdaPvmSt11align_val_t"};
  for (const char *s : symbols) {
    std::string obj = defining_object(s);
    EXPECT_EQ(obj.find("libstdc++"), std::string::npos) << s << " comes from " << obj;
    EXPECT_EQ(obj.find("libc.so"), std::string::npos) << s << " comes from " << obj;
#if !BRISK_CPP_STATIC
    EXPECT_NE(obj.find("libbrisk"), std::string::npos) << s << " comes from " << obj;
#endif
  }
  // The nothrow forms may be brisk's or libstdc++'s: libstdc++'s call the
  // (replaced) throwing form inside a try block, so the memory is brisk's
  // either way (checked by NothrowNewDelete and AlignedNewDelete).
  const char *nothrow_symbols[] = {
      "_ZnwmRKSt9nothrow_t", "_ZnamRKSt9nothrow_t", "_ZnwmSt11align_val_tRKSt9nothrow_t",
      "_ZnamSt11align_val_tRKSt9nothrow_t", "_ZdlPvRKSt9nothrow_t", "_ZdaPvRKSt9nothrow_t",
      "_ZdlPvSt11align_val_tRKSt9nothrow_t", "_ZdaPvSt11align_val_tRKSt9nothrow_t"};
  for (const char *s : nothrow_symbols) {
    std::string obj = defining_object(s);
    EXPECT_EQ(obj.find("libc.so"), std::string::npos) << s << " comes from " << obj;
    EXPECT_NE(obj.find('('), 0u) << s << ": " << obj;
  }
}

TEST_F(Cpp, MallocFamilyIsBrisk) {
  void *p = sink(std::malloc(100));
  EXPECT_TRUE(owned(p));
  EXPECT_GE(malloc_usable_size(p), 100u);
  p = sink(std::realloc(p, 100000));
  EXPECT_TRUE(owned(p));
  std::free(p);
  void *c = sink(std::calloc(10, 10));
  EXPECT_TRUE(owned(c));
  std::free(c);
  void *a = sink(aligned_alloc(4096, 100));
  EXPECT_TRUE(owned(a));
  EXPECT_TRUE(aligned_to(a, 4096));
  std::free(a);
  void *pm = nullptr;
  ASSERT_EQ(posix_memalign(&pm, 256, 1000), 0);
  EXPECT_TRUE(owned(sink(pm)));
  EXPECT_TRUE(aligned_to(pm, 256));
  std::free(pm);
  void *m = sink(memalign(64, 10));
  EXPECT_TRUE(owned(m));
  std::free(m);
  void *v = sink(valloc(10));
  EXPECT_TRUE(owned(v));
  EXPECT_TRUE(aligned_to(v, 4096));
  std::free(v);
  void *pv = sink(pvalloc(10));
  EXPECT_TRUE(owned(pv));
  EXPECT_TRUE(aligned_to(pv, 4096));
  EXPECT_GE(malloc_usable_size(pv), 4096u);
  std::free(pv);
  // libc's own allocations come from brisk too.
  char *d = strdup("served by brisk?");
  EXPECT_TRUE(owned(d));
  std::free(d);
  std::free(nullptr);
}

TEST_F(Cpp, ScalarAndArrayNewDelete) {
  int *i = new int(5);
  EXPECT_TRUE(owned(sink(i)));
  delete i;
  int *arr = new int[1000];
  EXPECT_TRUE(owned(sink(arr)));
  delete[] arr;
  std::string *s = new std::string(1000, 'x');
  EXPECT_TRUE(owned(sink(s)));
  EXPECT_TRUE(owned(s->data()));
  delete s;

  void *p = sink(::operator new(100));
  EXPECT_TRUE(owned(p));
  ::operator delete(p);
  p = sink(::operator new(100));
  ::operator delete(p, static_cast<size_t>(100));  // sized
  p = sink(::operator new[](3000));
  EXPECT_TRUE(owned(p));
  ::operator delete[](p);
  p = sink(::operator new[](3000));
  ::operator delete[](p, static_cast<size_t>(3000));
  p = sink(::operator new(0));
  EXPECT_NE(p, nullptr);
  EXPECT_TRUE(owned(p));
  ::operator delete(p);
  ::operator delete(nullptr);
  ::operator delete[](nullptr);
  // Large sizes through new as well.
  for (size_t n : {static_cast<size_t>(100000), static_cast<size_t>(3) << 20,
                   static_cast<size_t>(40) << 20}) {
    char *b = static_cast<char *>(sink(::operator new(n)));
    EXPECT_TRUE(owned(b));
    std::memset(b, 1, n);
    ::operator delete(b, n);
  }
}

TEST_F(Cpp, NothrowNewDelete) {
  void *p = sink(::operator new(200, std::nothrow));
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(owned(p));
  ::operator delete(p, std::nothrow);
  p = sink(::operator new[](200, std::nothrow));
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(owned(p));
  ::operator delete[](p, std::nothrow);
  int *q = new (std::nothrow) int[50];
  ASSERT_NE(q, nullptr);
  EXPECT_TRUE(owned(sink(q)));
  delete[] q;
}

TEST_F(Cpp, AlignedNewDelete) {
  const size_t aligns[] = {16, 32, 64, 256, 4096, 65536, static_cast<size_t>(2) << 20};
  for (size_t a : aligns) {
    std::align_val_t al{a};
    void *p = sink(::operator new(100, al));
    EXPECT_TRUE(owned(p));
    EXPECT_TRUE(aligned_to(p, a)) << a;
    ::operator delete(p, al);
    p = sink(::operator new(100, al));
    ::operator delete(p, static_cast<size_t>(100), al);  // sized + aligned
    p = sink(::operator new[](a * 3 + 1, al));
    EXPECT_TRUE(owned(p));
    EXPECT_TRUE(aligned_to(p, a)) << a;
    ::operator delete[](p, al);
    p = sink(::operator new[](777, al));
    ::operator delete[](p, static_cast<size_t>(777), al);
    p = sink(::operator new(50, al, std::nothrow));
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(owned(p));
    EXPECT_TRUE(aligned_to(p, a));
    ::operator delete(p, al, std::nothrow);
    p = sink(::operator new[](50, al, std::nothrow));
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(owned(p));
    EXPECT_TRUE(aligned_to(p, a));
    ::operator delete[](p, al, std::nothrow);
  }
}

TEST_F(Cpp, OverAlignedTypes) {
  std::vector<A256 *> v;
  for (int i = 0; i < 100; ++i) {
    A256 *o = new A256;
    EXPECT_TRUE(aligned_to(o, 256));
    EXPECT_TRUE(owned(sink(o)));
    v.push_back(o);
  }
  for (A256 *o : v) {
    EXPECT_EQ(o->c[299], 0x25);
    delete o;
  }
  A256 *arr = new A256[7];
  EXPECT_TRUE(aligned_to(arr, 256));
  EXPECT_TRUE(owned(sink(arr)));
  for (int i = 0; i < 7; ++i) EXPECT_EQ(arr[i].c[0], 0x25);
  delete[] arr;
  A64 *a64 = new A64[33];
  EXPECT_TRUE(aligned_to(a64, 64));
  EXPECT_TRUE(owned(sink(a64)));
  delete[] a64;
  A4096 *page = new A4096;
  EXPECT_TRUE(aligned_to(page, 4096));
  EXPECT_TRUE(owned(sink(page)));
  delete page;
  A4096 *pages = new (std::nothrow) A4096[3];
  ASSERT_NE(pages, nullptr);
  EXPECT_TRUE(aligned_to(pages, 4096));
  delete[] pages;
  std::vector<A256> vec(50);
  EXPECT_TRUE(aligned_to(vec.data(), 256));
  EXPECT_TRUE(owned(vec.data()));
}

TEST_F(Cpp, HugeNewThrowsBadAlloc) {
  size_t n = g_huge;
  EXPECT_THROW(sink(::operator new(n)), std::bad_alloc);
  EXPECT_THROW(sink(::operator new[](n)), std::bad_alloc);
  EXPECT_THROW(sink(::operator new(n, std::align_val_t{64})), std::bad_alloc);
  EXPECT_THROW(sink(::operator new[](n, std::align_val_t{4096})), std::bad_alloc);
  EXPECT_THROW(sink(new char[n]), std::bad_alloc);
  EXPECT_THROW(sink(::operator new(SIZE_MAX)), std::bad_alloc);
  bool caught = false;
  try {
    std::vector<char> v;
    v.reserve(n);
    sink(v.data());
  } catch (const std::bad_alloc &) {
    caught = true;
  } catch (const std::length_error &) {
    caught = true;  // some sizes exceed max_size first
  }
  EXPECT_TRUE(caught);
}

TEST_F(Cpp, HugeNothrowNewReturnsNull) {
  size_t n = g_huge;
  EXPECT_EQ(sink(::operator new(n, std::nothrow)), nullptr);
  EXPECT_EQ(sink(::operator new[](n, std::nothrow)), nullptr);
  EXPECT_EQ(sink(::operator new(n, std::align_val_t{256}, std::nothrow)), nullptr);
  EXPECT_EQ(sink(::operator new[](n, std::align_val_t{256}, std::nothrow)), nullptr);
  EXPECT_EQ(sink(new (std::nothrow) char[n]), nullptr);
}

TEST_F(Cpp, NewHandlerRunsBeforeBadAlloc) {
  size_t n = g_huge;
  g_handler_limit = 3;
  g_handler_calls = 0;
  std::set_new_handler(counting_handler);
  EXPECT_THROW(sink(::operator new(n)), std::bad_alloc);
  EXPECT_EQ(g_handler_calls, 3) << "new_handler calls before bad_alloc";

  g_handler_calls = 0;
  std::set_new_handler(counting_handler);
  EXPECT_THROW(sink(::operator new[](n)), std::bad_alloc);
  EXPECT_EQ(g_handler_calls, 3);

  g_handler_calls = 0;
  std::set_new_handler(counting_handler);
  EXPECT_THROW(sink(::operator new(n, std::align_val_t{128})), std::bad_alloc);
  EXPECT_EQ(g_handler_calls, 3);
}

TEST_F(Cpp, NothrowNewRunsNewHandler) {
  // [new.delete.single]: the nothrow forms behave as if they called the
  // throwing form and caught bad_alloc, so the handler loop runs before
  // nullptr comes back (libstdc++'s own nothrow new does this).
  size_t n = g_huge;
  g_handler_limit = 3;
  g_handler_calls = 0;
  std::set_new_handler(counting_handler);
  EXPECT_EQ(sink(::operator new(n, std::nothrow)), nullptr);
  EXPECT_EQ(g_handler_calls, 3) << "operator new(size, nothrow) did not run the new_handler";

  g_handler_calls = 0;
  std::set_new_handler(counting_handler);
  EXPECT_EQ(sink(::operator new[](n, std::align_val_t{64}, std::nothrow)), nullptr);
  EXPECT_EQ(g_handler_calls, 3) << "operator new[](size, align, nothrow) did not run the new_handler";
}

TEST_F(Cpp, NewHandlerCanMakeRoom) {
  // A cap makes a 128 MiB new fail; the handler lifts the cap, and new
  // retries and succeeds.
  const size_t old = brisk().get_max_bytes();
  void *keep = sink(std::malloc(64));
  brisk().set_max_bytes(brisk().mapped_bytes() + (16 << 20));
  g_handler_calls = 0;
  std::set_new_handler(lifting_handler);
  void *p = nullptr;
  try {
    p = sink(::operator new(static_cast<size_t>(128) << 20));
  } catch (const std::bad_alloc &) {
  }
  std::set_new_handler(nullptr);
  brisk().set_max_bytes(old);
  ASSERT_NE(p, nullptr) << "new still failed after the handler lifted the cap";
  EXPECT_EQ(g_handler_calls, 1);
  EXPECT_TRUE(owned(p));
  std::memset(p, 7, static_cast<size_t>(128) << 20);
  ::operator delete(p);
  std::free(keep);
}

TEST_F(Cpp, CapMakesNewThrowAndNothrowReturnNull) {
  const size_t old = brisk().get_max_bytes();
  void *keep = sink(std::malloc(64));
  brisk().set_max_bytes(brisk().mapped_bytes() + (16 << 20));
  size_t big = static_cast<size_t>(256) << 20;
  bool threw = false;
  try {
    sink(::operator new(big));
  } catch (const std::bad_alloc &) {
    threw = true;
  }
  void *q = sink(::operator new(big, std::nothrow));
  errno = 0;
  void *m = sink(std::malloc(big));
  int e = errno;
  brisk().set_max_bytes(old);
  EXPECT_TRUE(threw);
  EXPECT_EQ(q, nullptr);
  EXPECT_EQ(m, nullptr);
  EXPECT_EQ(e, ENOMEM);
  std::free(keep);
}

TEST_F(Cpp, ContainersAndExceptions) {
  std::map<std::string, std::vector<int>> m;
  for (int i = 0; i < 20000; ++i) m[std::to_string(i * 7919 % 10007)].push_back(i);
  size_t total = 0;
  for (auto &kv : m) total += kv.second.size();
  EXPECT_EQ(total, 20000u);
  EXPECT_TRUE(owned(m.begin()->second.data()));
  int caught = 0;
  for (int i = 0; i < 1000; ++i) {
    try {
      throw std::runtime_error(std::string(200, 'e'));
    } catch (const std::runtime_error &e) {
      caught += e.what()[0] == 'e';
    }
  }
  EXPECT_EQ(caught, 1000);
}

TEST_F(Cpp, CrossThreadDelete) {
  std::vector<std::string *> objs(20000);
  std::thread maker([&] {
    for (size_t i = 0; i < objs.size(); ++i) objs[i] = new std::string(i % 300 + 20, 'a');
  });
  maker.join();
  std::atomic<int> bad{0};
  std::thread killer([&] {
    for (std::string *s : objs) {
      if (!owned(s) || (*s)[0] != 'a') ++bad;
      delete s;
    }
  });
  killer.join();
  EXPECT_EQ(bad.load(), 0);
}
