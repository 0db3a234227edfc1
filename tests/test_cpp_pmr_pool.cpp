// The C++ layer (include/brisk.hpp): the std::pmr resources
// (brisk::global_resource, brisk::heap_resource) and brisk::object_pool.
// brisk::allocator, brisk::heap and brisk::heap_allocator are in
// test_cpp_allocator.cpp.
//
// Linked with brisk_core (the prefixed API, no malloc override), so malloc
// and operator new stay glibc's (or the sanitizer's) and brisk_owns() tells
// which memory the adapters took from brisk.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <list>
#include <map>
#include <memory_resource>
#include <new>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "brisk.hpp"
#include "test_util.h"

using namespace bt;

namespace {

// ---- std::pmr resources ----------------------------------------------------

TEST(CppPmr, GlobalResource) {
  brisk::memory_resource *r = brisk::global_resource();
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r, brisk::global_resource());
  EXPECT_EQ(r->heap_handle(), nullptr);
  brisk::memory_resource other;  // also the global allocator: interchangeable
  EXPECT_TRUE(r->is_equal(other));
  EXPECT_TRUE(*r == other);
  EXPECT_FALSE(r->is_equal(*std::pmr::new_delete_resource()));

  std::pmr::vector<int> v(r);
  for (int i = 0; i < 10000; i++) v.push_back(i);
  EXPECT_TRUE(owned(v.data()));
  std::pmr::map<int, std::pmr::string> m(r);
  for (int i = 0; i < 1000; i++) m.emplace(i, std::string(100, 'p'));
  for (auto &kv : m) {
    ASSERT_TRUE(owned(&kv));
    ASSERT_TRUE(owned(kv.second.data()));  // uses-allocator: the string uses r too
  }
  std::pmr::string s(r);
  s.assign(1000, 'z');
  EXPECT_TRUE(owned(s.data()));
  std::pmr::unordered_map<int, std::pmr::vector<int>> um(r);
  um[1].assign(100, 1);
  EXPECT_TRUE(owned(um[1].data()));
}

TEST(CppPmr, GlobalResourceDirect) {
  brisk::memory_resource *r = brisk::global_resource();
  for (size_t align : {size_t(1), size_t(8), size_t(16), size_t(64), size_t(256), size_t(4096)}) {
    for (size_t size : {size_t(0), size_t(1), size_t(100), size_t(5000), size_t(300 * KiB)}) {
      void *p = r->allocate(size, align);
      ASSERT_NE(p, nullptr);
      EXPECT_TRUE(aligned_to(p, align)) << size << " " << align;
      EXPECT_TRUE(owned(p));
      std::memset(p, 0xab, size);
      r->deallocate(p, size, align);
    }
  }
  EXPECT_THROW((void)r->allocate(g_huge, 16), std::bad_alloc);
  EXPECT_THROW((void)r->allocate(g_huge, 4096), std::bad_alloc);
}

TEST(CppPmr, HeapResource) {
  brisk::heap h;
  brisk::heap_resource r(h);
  brisk::heap_resource same(h.get());
  brisk::heap other_heap;
  brisk::heap_resource other(other_heap);
  EXPECT_EQ(r.heap_handle(), h.get());
  EXPECT_TRUE(r.is_equal(same));
  EXPECT_FALSE(r.is_equal(other));
  EXPECT_FALSE(r.is_equal(*brisk::global_resource()));
  {
    std::pmr::vector<int> v(&r);
    std::pmr::map<int, std::pmr::string> m(&r);
    std::pmr::string s(&r);
    for (int i = 0; i < 20000; i++) v.push_back(i);
    for (int i = 0; i < 2000; i++) m.emplace(i, std::string(64, 'h'));
    s.assign(10000, 's');
    EXPECT_TRUE(owned(v.data()));
    EXPECT_TRUE(owned(s.data()));
    EXPECT_GT(h.held_bytes(), 20000 * sizeof(int) + 10000);
    // Equal resources hand buffers over; unequal ones copy.
    std::pmr::vector<int> w(&same);
    const int *buf = v.data();
    w = std::move(v);
    EXPECT_EQ(w.data(), buf);
    std::pmr::vector<int> x(&other);
    x = std::move(w);
    EXPECT_NE(x.data(), buf);
    EXPECT_EQ(x[19999], 19999);
    void *a = r.allocate(1000, 256);
    EXPECT_TRUE(aligned_to(a, 256));
    r.deallocate(a, 1000, 256);
  }
  h.reset();
  EXPECT_EQ(h.held_bytes(), 0u);
}

TEST(CppPmr, BoundedHeapResourceThrows) {
  brisk::heap h(4 * MiB);
  brisk::heap_resource r(h);
  std::pmr::vector<char> v(&r);
  EXPECT_THROW(v.resize(16 * MiB), std::bad_alloc);
  EXPECT_THROW((void)r.allocate(8 * MiB, 64), std::bad_alloc);
  EXPECT_NO_THROW(v.resize(MiB));
}

TEST(CppPmr, UpstreamOfMonotonicBuffer) {
  brisk::heap h;
  brisk::heap_resource r(h);
  {
    std::pmr::monotonic_buffer_resource mono(&r);
    std::pmr::vector<std::pmr::string> v(&mono);
    for (int i = 0; i < 5000; i++) v.emplace_back(std::string(50, 'm'));
    EXPECT_GT(h.held_bytes(), 0u);
    std::pmr::unsynchronized_pool_resource pool(brisk::global_resource());
    std::pmr::list<int> l(&pool);
    for (int i = 0; i < 5000; i++) l.push_back(i);
    EXPECT_EQ(l.size(), 5000u);
  }
  h.reset();
}

// ---- brisk::object_pool ----------------------------------------------------

struct Tracked {
  static inline std::atomic<int> live{0};
  static inline std::atomic<int> destroyed{0};
  int a;
  std::string s;
  Tracked(int a_, std::string s_) : a(a_), s(std::move(s_)) { live++; }
  ~Tracked() {
    live--;
    destroyed++;
  }
};

struct Throws {
  explicit Throws(bool fail) {
    if (fail) throw std::runtime_error("constructor failed");
  }
};

struct Point {  // an aggregate: built with braces
  int x, y;
};

TEST(CppObjectPool, CreateAndDestroy) {
  Tracked::live = 0;
  Tracked::destroyed = 0;
  brisk::object_pool<Tracked> pool;
  brisk_pool_stats_t st = pool.stats();
  EXPECT_GE(st.object_size, sizeof(Tracked));
  EXPECT_GE(st.alignment, alignof(Tracked));
  EXPECT_EQ(st.max_objects, 0u);
  EXPECT_EQ(st.live_objects, 0u);

  std::vector<Tracked *> objs;
  for (int i = 0; i < 1000; i++) {
    Tracked *t = pool.create(i, std::string(40, static_cast<char>('a' + i % 26)));
    ASSERT_NE(t, nullptr);
    ASSERT_TRUE(aligned_to(t, alignof(Tracked)));
    objs.push_back(t);
  }
  EXPECT_EQ(Tracked::live, 1000);
  EXPECT_EQ(pool.stats().live_objects, 1000u);
  std::set<Tracked *> distinct(objs.begin(), objs.end());
  EXPECT_EQ(distinct.size(), 1000u);
  for (int i = 0; i < 1000; i++) {
    EXPECT_EQ(objs[static_cast<size_t>(i)]->a, i);
    EXPECT_EQ(objs[static_cast<size_t>(i)]->s[39], static_cast<char>('a' + i % 26));
  }
  for (Tracked *t : objs) pool.destroy(t);
  pool.destroy(nullptr);  // ignored
  EXPECT_EQ(Tracked::live, 0);
  EXPECT_EQ(Tracked::destroyed, 1000);
  st = pool.stats();
  EXPECT_EQ(st.live_objects, 0u);
  EXPECT_EQ(st.allocs, 1000u);
  EXPECT_EQ(st.frees, 1000u);
}

TEST(CppObjectPool, UniquePtr) {
  Tracked::live = 0;
  brisk::object_pool<Tracked> pool;
  {
    auto p = pool.make_unique(7, "seven");
    static_assert(std::is_same_v<decltype(p), brisk::object_pool<Tracked>::unique_ptr>);
    EXPECT_EQ(p->a, 7);
    EXPECT_EQ(p->s, "seven");
    EXPECT_EQ(Tracked::live, 1);
    auto q = std::move(p);
    EXPECT_EQ(p, nullptr);  // NOLINT: checking the moved-from state
    q.reset();
    EXPECT_EQ(Tracked::live, 0);
    std::vector<brisk::object_pool<Tracked>::unique_ptr> many;
    for (int i = 0; i < 500; i++) many.push_back(pool.make_unique(i, "x"));
    EXPECT_EQ(Tracked::live, 500);
    EXPECT_EQ(pool.stats().live_objects, 500u);
  }
  EXPECT_EQ(Tracked::live, 0);
  EXPECT_EQ(pool.stats().live_objects, 0u);
  // An empty unique_ptr's deleter does nothing.
  brisk::object_pool<Tracked>::unique_ptr empty(nullptr, {pool.get()});
  empty.reset();
}

TEST(CppObjectPool, AggregateAndDefault) {
  brisk::object_pool<Point> pool;
  Point *p = pool.create(3, 4);
  EXPECT_EQ(p->x, 3);
  EXPECT_EQ(p->y, 4);
  Point *z = pool.create();  // value-initialized
  EXPECT_EQ(z->x, 0);
  EXPECT_EQ(z->y, 0);
  pool.destroy(p);
  pool.destroy(z);
}

TEST(CppObjectPool, ExhaustionThrowsAndRecovers) {
  brisk::object_pool<Tracked> pool(4);
  EXPECT_EQ(pool.stats().max_objects, 4u);
  std::vector<Tracked *> objs;
  for (int i = 0; i < 4; i++) objs.push_back(pool.create(i, "b"));
  EXPECT_THROW((void)pool.create(4, "over"), std::bad_alloc);
  EXPECT_THROW((void)pool.make_unique(5, "over"), std::bad_alloc);
  brisk_pool_stats_t st = pool.stats();
  EXPECT_EQ(st.live_objects, 4u);
  EXPECT_GE(st.exhausted, 2u);
  pool.destroy(objs.back());
  objs.pop_back();
  auto p = pool.make_unique(6, "recovered");  // room again
  EXPECT_EQ(p->a, 6);
  EXPECT_THROW((void)pool.create(7, "over"), std::bad_alloc);
  p.reset();
  for (Tracked *t : objs) pool.destroy(t);
  objs.clear();
  for (int i = 0; i < 4; i++) objs.push_back(pool.create(i, "again"));
  EXPECT_EQ(pool.stats().live_objects, 4u);
  for (Tracked *t : objs) pool.destroy(t);
}

TEST(CppObjectPool, ThrowingConstructorReturnsTheSlot) {
  brisk::object_pool<Throws> pool(1);
  EXPECT_THROW((void)pool.create(true), std::runtime_error);
  EXPECT_EQ(pool.stats().live_objects, 0u);
  Throws *t = nullptr;
  EXPECT_NO_THROW(t = pool.create(false));  // the only slot came back
  pool.destroy(t);
}

TEST(CppObjectPool, OverAlignedAndTiny) {
  brisk::object_pool<A64> p64;
  brisk::object_pool<A256> p256;
  brisk::object_pool<char> pc;
  std::vector<A64 *> a;
  std::vector<A256 *> b;
  std::vector<char *> c;
  for (int i = 0; i < 300; i++) {
    a.push_back(p64.create(static_cast<unsigned char>(i)));
    b.push_back(p256.create(static_cast<unsigned char>(i)));
    c.push_back(pc.create(static_cast<char>(i)));
    ASSERT_TRUE(aligned_to(a.back(), 64));
    ASSERT_TRUE(aligned_to(b.back(), 256));
  }
  EXPECT_GE(p256.stats().alignment, 256u);
  for (int i = 0; i < 300; i++) {
    EXPECT_EQ(a[static_cast<size_t>(i)]->c[99], static_cast<unsigned char>(i));
    EXPECT_EQ(b[static_cast<size_t>(i)]->c[299], static_cast<unsigned char>(i));
    EXPECT_EQ(*c[static_cast<size_t>(i)], static_cast<char>(i));
  }
  EXPECT_EQ(std::set<char *>(c.begin(), c.end()).size(), 300u);
  for (auto *x : a) p64.destroy(x);
  for (auto *x : b) p256.destroy(x);
  for (auto *x : c) pc.destroy(x);
}

TEST(CppObjectPool, MoveKeepsObjects) {
  static_assert(!std::is_copy_constructible_v<brisk::object_pool<int>>);
  static_assert(!std::is_copy_assignable_v<brisk::object_pool<int>>);
  brisk::object_pool<int> a;
  auto p = a.make_unique(42);
  brisk_pool_t *raw = a.get();
  brisk::object_pool<int> b(std::move(a));
  EXPECT_EQ(a.get(), nullptr);  // NOLINT: checking the moved-from state
  EXPECT_EQ(a.stats().live_objects, 0u);
  EXPECT_EQ(b.get(), raw);
  EXPECT_EQ(*p, 42);
  p.reset();  // goes back to the pool b now owns
  EXPECT_EQ(b.stats().live_objects, 0u);
  brisk::object_pool<int> c;
  c = std::move(b);
  EXPECT_EQ(c.get(), raw);
  int *i = c.create(1);
  c.destroy(i);
}

TEST(CppObjectPool, ObjectsFreedOnOtherThreads) {
  Tracked::live = 0;
  brisk::object_pool<Tracked> pool;
  constexpr int kThreads = 2, kRounds = 20, kPerRound = 500;
  for (int round = 0; round < kRounds; round++) {
    std::vector<brisk::object_pool<Tracked>::unique_ptr> objs;
    for (int i = 0; i < kThreads * kPerRound; i++) objs.push_back(pool.make_unique(i, "t"));
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; t++) {
      std::vector<brisk::object_pool<Tracked>::unique_ptr> mine;
      for (int i = 0; i < kPerRound; i++) mine.push_back(std::move(objs[static_cast<size_t>(t * kPerRound + i)]));
      threads.emplace_back([&pool, mine = std::move(mine)]() mutable {
        // Free the main thread's objects here, and make and free our own.
        for (auto &p : mine) p.reset();
        for (int i = 0; i < 100; i++) {
          auto own = pool.make_unique(i, "own");
          ASSERT_EQ(own->a, i);
        }
      });
    }
    for (auto &t : threads) t.join();
  }
  EXPECT_EQ(Tracked::live, 0);
  brisk_pool_stats_t st = pool.stats();
  EXPECT_EQ(st.live_objects, 0u);
  EXPECT_EQ(st.allocs, st.frees);
}

}  // namespace
