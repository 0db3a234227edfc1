// The C++ layer (include/brisk.hpp), its std allocators: brisk::allocator,
// brisk::heap and brisk::heap_allocator, in the standard containers. The
// std::pmr resources and brisk::object_pool are in test_cpp_pmr_pool.cpp.
//
// Linked with brisk_core (the prefixed API, no malloc override), so malloc
// and operator new stay glibc's (or the sanitizer's) and brisk_owns() tells
// which memory the adapters took from brisk.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <deque>
#include <limits>
#include <list>
#include <map>
#include <memory>
#include <new>
#include <numeric>
#include <scoped_allocator>
#include <set>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "brisk.hpp"
#include "test_util.h"

using namespace bt;

namespace {

template <class T>
using bvector = std::vector<T, brisk::allocator<T>>;
using bstring = std::basic_string<char, std::char_traits<char>, brisk::allocator<char>>;
template <class T>
using hvector = std::vector<T, brisk::heap_allocator<T>>;
using hstring = std::basic_string<char, std::char_traits<char>, brisk::heap_allocator<char>>;

struct alignas(4096) A4096 {
  unsigned char c[5000];
};

// ---- brisk::allocator ------------------------------------------------------

TEST(CppAllocator, TraitsAndRebind) {
  using A = brisk::allocator<int>;
  using T = std::allocator_traits<A>;
  static_assert(std::is_same_v<T::value_type, int>);
  static_assert(std::is_same_v<T::rebind_alloc<double>, brisk::allocator<double>>);
  static_assert(T::is_always_equal::value);
  static_assert(T::propagate_on_container_move_assignment::value);
  static_assert(std::is_nothrow_default_constructible_v<A>);
  A a;
  brisk::allocator<double> d(a);
  EXPECT_TRUE(a == d);
  EXPECT_FALSE(a != d);
  int *p = T::allocate(a, 10);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(owned(p));
  T::deallocate(a, p, 10);
  int *z = a.allocate(0);  // a zero count is allowed and must be freed
  a.deallocate(z, 0);
}

TEST(CppAllocator, Vector) {
  bvector<int> v;
  for (int i = 0; i < 100000; i++) v.push_back(i);
  EXPECT_TRUE(owned(v.data()));
  EXPECT_EQ(std::accumulate(v.begin(), v.end(), 0LL), 100000LL * 99999 / 2);
  v.resize(10);
  v.shrink_to_fit();
  EXPECT_TRUE(owned(v.data()));
  bvector<int> w = v;  // copy
  EXPECT_EQ(w, v);
  const int *buf = w.data();
  bvector<int> m;
  m = std::move(w);  // equal allocators: the buffer moves, no copy
  EXPECT_EQ(m.data(), buf);
  m.swap(v);
  EXPECT_EQ(v.data(), buf);
}

TEST(CppAllocator, String) {
  bstring s(1000, 'x');
  EXPECT_TRUE(owned(s.data()));
  for (int i = 0; i < 1000; i++) s += std::to_string(i);
  EXPECT_NE(s.find("999"), bstring::npos);
  bstring t = s.substr(0, 500);
  EXPECT_EQ(t, bstring(500, 'x'));
  EXPECT_TRUE(owned(t.data()));
  bstring small = "abc";  // fits in the string itself; nothing allocated
  small.append(200, 'y');
  EXPECT_TRUE(owned(small.data()));
}

TEST(CppAllocator, Map) {
  std::map<int, bstring, std::less<int>, brisk::allocator<std::pair<const int, bstring>>> m;
  for (int i = 0; i < 5000; i++) m.emplace(i, bstring(static_cast<size_t>(50 + i % 50), 'm'));
  ASSERT_EQ(m.size(), 5000u);
  for (auto &kv : m) {
    EXPECT_TRUE(owned(&kv));  // the node
    EXPECT_TRUE(owned(kv.second.data()));
    EXPECT_EQ(kv.second.size(), static_cast<size_t>(50 + kv.first % 50));
  }
  for (int i = 0; i < 5000; i += 2) m.erase(i);
  EXPECT_EQ(m.size(), 2500u);
}

TEST(CppAllocator, UnorderedMap) {
  std::unordered_map<int, int, std::hash<int>, std::equal_to<int>,
                     brisk::allocator<std::pair<const int, int>>>
      m;
  for (int i = 0; i < 20000; i++) m[i] = i * 3;
  for (int i = 0; i < 20000; i++) ASSERT_EQ(m.at(i), i * 3);
  EXPECT_TRUE(owned(&*m.begin()));
  m.rehash(100000);
  EXPECT_EQ(m.size(), 20000u);
  m.clear();
}

TEST(CppAllocator, ListDequeSet) {
  std::list<int, brisk::allocator<int>> l;
  std::deque<int, brisk::allocator<int>> d;
  std::set<int, std::less<int>, brisk::allocator<int>> s;
  for (int i = 0; i < 10000; i++) {
    l.push_back(i);
    d.push_front(i);
    s.insert(i);
  }
  EXPECT_TRUE(owned(&l.front()));
  EXPECT_TRUE(owned(&d.front()));
  EXPECT_TRUE(owned(&*s.begin()));
  EXPECT_EQ(l.size(), 10000u);
  EXPECT_EQ(d.back(), 0);
  EXPECT_EQ(*s.rbegin(), 9999);
  l.sort(std::greater<int>());
  EXPECT_EQ(l.front(), 9999);
}

TEST(CppAllocator, NestedContainers) {
  bvector<bstring> v;
  for (int i = 0; i < 1000; i++) v.emplace_back(static_cast<size_t>(100), static_cast<char>('a' + i % 26));
  bvector<bvector<bstring>> vv(10, v);
  EXPECT_EQ(vv[9][999], bstring(100, static_cast<char>('a' + 999 % 26)));
  EXPECT_TRUE(owned(vv[9][999].data()));
}

TEST(CppAllocator, SharedPtr) {
  auto p = std::allocate_shared<A256>(brisk::allocator<A256>(), 7);
  EXPECT_TRUE(owned(p.get()));
  EXPECT_TRUE(aligned_to(p.get(), 256));
  EXPECT_EQ(p->c[299], 7);
}

TEST(CppAllocator, OverAligned) {
  bvector<A64> v64;
  bvector<A256> v256;
  for (int i = 0; i < 200; i++) {
    v64.emplace_back(static_cast<unsigned char>(i));
    v256.emplace_back(static_cast<unsigned char>(i));
    ASSERT_TRUE(aligned_to(v64.data(), 64));
    ASSERT_TRUE(aligned_to(v256.data(), 256));
  }
  EXPECT_EQ(v256[199].c[0], 199);
  // Node containers rebind to a node type at least as aligned as T.
  std::list<A256, brisk::allocator<A256>> l;
  std::set<A256, std::less<A256>, brisk::allocator<A256>> s;
  std::deque<A64, brisk::allocator<A64>> d;
  for (int i = 0; i < 100; i++) {
    l.emplace_back(static_cast<unsigned char>(i));
    s.emplace(static_cast<unsigned char>(i));
    d.emplace_back(static_cast<unsigned char>(i));
  }
  for (auto &x : l) ASSERT_TRUE(aligned_to(&x, 256));
  for (auto &x : s) ASSERT_TRUE(aligned_to(&x, 256));
  for (auto &x : d) ASSERT_TRUE(aligned_to(&x, 64));
  brisk::allocator<A4096> a;
  A4096 *p = a.allocate(3);
  EXPECT_TRUE(aligned_to(p, 4096));
  std::memset(p, 1, 3 * sizeof(A4096));
  a.deallocate(p, 3);
}

TEST(CppAllocator, FailureThrows) {
  brisk::allocator<char> a;
  EXPECT_THROW((void)a.allocate(g_huge), std::bad_alloc);
  brisk::allocator<A256> a256;
  EXPECT_THROW((void)a256.allocate(g_huge / 256), std::bad_alloc);
  // A count whose byte size wraps around is a bad length, not a huge request.
  brisk::allocator<uint64_t> a64;
  EXPECT_THROW((void)a64.allocate(std::numeric_limits<size_t>::max() / 4),
               std::bad_array_new_length);
  bvector<int> v(10, 1);
  EXPECT_THROW(v.reserve(g_huge / sizeof(int)), std::bad_alloc);
  EXPECT_EQ(v.size(), 10u);  // the container is left as it was
  v.push_back(2);
  EXPECT_EQ(v.back(), 2);
}

// ---- brisk::heap and brisk::heap_allocator ---------------------------------

TEST(CppHeap, OwnsAndMoves) {
  brisk::heap h;
  ASSERT_NE(h.get(), nullptr);
  EXPECT_EQ(h.held_bytes(), 0u);
  void *p = brisk_heap_malloc(h.get(), 100);
  ASSERT_NE(p, nullptr);
  EXPECT_GT(h.held_bytes(), 0u);
  brisk_heap_t *raw = h.get();
  brisk::heap h2(std::move(h));
  EXPECT_EQ(h.get(), nullptr);  // NOLINT: checking the moved-from state
  EXPECT_EQ(h.held_bytes(), 0u);
  h.reset();  // harmless on a moved-from heap
  h.set_max_bytes(1);
  EXPECT_EQ(h2.get(), raw);
  brisk::heap h3;
  h3 = std::move(h2);  // h3's own heap is destroyed, raw's taken over
  EXPECT_EQ(h3.get(), raw);
  brisk_free(p);
  static_assert(!std::is_copy_constructible_v<brisk::heap>);
  static_assert(!std::is_copy_assignable_v<brisk::heap>);
  static_assert(std::is_nothrow_move_constructible_v<brisk::heap>);
}

TEST(CppHeapAllocator, TraitsAndEquality) {
  brisk::heap h1, h2;
  brisk::heap_allocator<int> a1(h1), b1(h1.get()), a2(h2);
  brisk::heap_allocator<double> r1(a1);  // rebinding keeps the heap
  EXPECT_TRUE(a1 == b1);
  EXPECT_TRUE(a1 == r1);
  EXPECT_TRUE(a1 != a2);
  EXPECT_EQ(r1.get(), h1.get());
  using T = std::allocator_traits<brisk::heap_allocator<int>>;
  static_assert(!T::is_always_equal::value);
  static_assert(std::is_same_v<T::rebind_alloc<char>, brisk::heap_allocator<char>>);
}

TEST(CppHeapAllocator, Containers) {
  brisk::heap h;
  {
    hvector<int> v(h);
    for (int i = 0; i < 50000; i++) v.push_back(i);
    EXPECT_TRUE(owned(v.data()));
    hstring s(5000, 's', h);
    s += "tail";
    EXPECT_TRUE(owned(s.data()));
    std::map<int, int, std::less<int>, brisk::heap_allocator<std::pair<const int, int>>> m(h);
    std::unordered_map<int, int, std::hash<int>, std::equal_to<int>,
                       brisk::heap_allocator<std::pair<const int, int>>>
        um(h);
    std::list<int, brisk::heap_allocator<int>> l(h);
    std::deque<int, brisk::heap_allocator<int>> d(h);
    for (int i = 0; i < 5000; i++) {
      m[i] = i;
      um[i] = i;
      l.push_back(i);
      d.push_back(i);
    }
    EXPECT_EQ(m.size(), 5000u);
    EXPECT_EQ(um.at(4999), 4999);
    EXPECT_EQ(l.back(), 4999);
    EXPECT_EQ(d[2500], 2500);
    EXPECT_GT(h.held_bytes(), 50000 * sizeof(int));
    // Copies stay on the source's heap.
    hvector<int> c = v;
    EXPECT_EQ(c.get_allocator(), v.get_allocator());
  }  // containers free their blocks (brisk_free) before the heap goes
  h.reset();
  EXPECT_EQ(h.held_bytes(), 0u);
}

TEST(CppHeapAllocator, AssignmentKeepsEachHeap) {
  brisk::heap h1, h2;
  hvector<int> a(h1), b(h2);
  a.assign(1000, 1);
  b.assign(2000, 2);
  a = b;  // copy: a stays on h1
  EXPECT_EQ(a.get_allocator().get(), h1.get());
  a = std::move(b);  // heaps differ: elements move into h1
  EXPECT_EQ(a.get_allocator().get(), h1.get());
  EXPECT_EQ(a.size(), 2000u);
  EXPECT_EQ(a[1999], 2);
  hvector<int> c(h1);
  c.assign(5, 5);
  const int *buf = a.data();
  c = std::move(a);  // same heap: the buffer is taken over
  EXPECT_EQ(c.data(), buf);
}

TEST(CppHeapAllocator, ResetAndDestroyDropEverything) {
  // Arena use: containers that are never destructed, dropped with the heap.
  // Their destructors must then not run, hence the raw storage.
  using Map = std::map<int, hstring, std::less<int>, brisk::heap_allocator<std::pair<const int, hstring>>>;
  alignas(Map) unsigned char map_storage[sizeof(Map)];
  alignas(hvector<int>) unsigned char vec_storage[sizeof(hvector<int>)];

  brisk::heap h;
  for (int round = 0; round < 3; round++) {
    Map *m = ::new (map_storage) Map(brisk::heap_allocator<int>(h));
    auto *v = ::new (vec_storage) hvector<int>(h);
    for (int i = 0; i < 3000; i++) m->emplace(i, hstring(100, 'q', h));
    v->resize(2 * MiB / sizeof(int));
    EXPECT_GT(h.held_bytes(), 2 * MiB);
    h.reset();  // every block is gone; m and v are never touched again
    EXPECT_EQ(h.held_bytes(), 0u);
  }

  // Destroying heaps full of live blocks gives the memory back for reuse:
  // 40 rounds of 8 MiB must not add up.
  const size_t before = brisk_mapped_bytes();
  for (int round = 0; round < 40; round++) {
    brisk::heap hr;
    auto *v = ::new (vec_storage) hvector<int>(hr);
    v->resize(4 * MiB / sizeof(int), round);
    Map *m = ::new (map_storage) Map(brisk::heap_allocator<int>(hr));
    for (int i = 0; i < 20000; i++) m->emplace(i, hstring(150, 'r', hr));
    EXPECT_GT(hr.held_bytes(), 4 * MiB);
  }  // ~heap: brisk_heap_destroy
  const size_t after = brisk_mapped_bytes();
  EXPECT_LT(after, before + 64 * MiB) << "destroyed heaps' memory was not reused";
}

TEST(CppHeapAllocator, ScopedAdaptorReachesInnerContainers) {
  brisk::heap h;
  using Outer = std::scoped_allocator_adaptor<brisk::heap_allocator<hstring>>;
  {
    std::vector<hstring, Outer> v{Outer(h)};
    for (int i = 0; i < 100; i++) v.emplace_back(200, 'i');  // the strings get h too
    for (auto &s : v) {
      ASSERT_EQ(s.get_allocator().get(), h.get());
      ASSERT_TRUE(owned(s.data()));
    }
  }
  h.reset();
}

TEST(CppHeapAllocator, OverAligned) {
  brisk::heap h;
  hvector<A64> v64(h);
  hvector<A256> v256(h);
  std::list<A256, brisk::heap_allocator<A256>> l(h);
  for (int i = 0; i < 100; i++) {
    v64.emplace_back(static_cast<unsigned char>(i));
    v256.emplace_back(static_cast<unsigned char>(i));
    l.emplace_back(static_cast<unsigned char>(i));
    ASSERT_TRUE(aligned_to(v64.data(), 64));
    ASSERT_TRUE(aligned_to(v256.data(), 256));
  }
  for (auto &x : l) ASSERT_TRUE(aligned_to(&x, 256));
  EXPECT_EQ(v256[99].c[299], 99);
}

TEST(CppHeapAllocator, BoundedHeapThrowsThenRecovers) {
  brisk::heap h(8 * MiB);
  hvector<char> v(h);
  EXPECT_THROW(
      {
        for (size_t n = 1; n <= 64 * MiB; n *= 2) v.resize(n, 'v');
      },
      std::bad_alloc);
  EXPECT_LE(h.held_bytes(), 8 * MiB);
  const size_t kept = v.size();
  EXPECT_GE(kept, 1u);
  EXPECT_EQ(v[kept - 1], 'v');  // the failed resize left v as it was

  // Many small nodes run into the bound too.
  std::list<int, brisk::heap_allocator<int>> l(h);
  EXPECT_THROW(
      {
        for (int i = 0; i < 10000000; i++) l.push_back(i);
      },
      std::bad_alloc);
  EXPECT_LE(h.held_bytes(), 8 * MiB);

  // Freeing makes room again; raising the bound too.
  l.clear();
  v.clear();
  v.shrink_to_fit();
  h.reset();
  EXPECT_NO_THROW(v.resize(4 * MiB));
  h.set_max_bytes(0);
  EXPECT_NO_THROW(v.resize(32 * MiB));
}

}  // namespace
