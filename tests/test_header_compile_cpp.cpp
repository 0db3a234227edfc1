// brisk.hpp compiles on its own under strict ISO C++ (built as -std=c++17
// and -std=c++20, -pedantic -Werror), every member included (explicit
// instantiations), and works at run time. Outside the sanitizer builds,
// BRISK_TEST_NEW_DELETE=1 adds brisk-new-delete.hpp under the same rules.
#include "brisk.hpp"

#if BRISK_TEST_NEW_DELETE
#include "brisk-new-delete.hpp"
#endif

#include <cstdint>
#include <cstdio>
#include <list>
#include <map>
#include <string>
#include <vector>

// Every member function of the class templates, instantiated.
template class brisk::allocator<int>;
template class brisk::allocator<std::max_align_t>;
template class brisk::heap_allocator<long>;
template class brisk::object_pool<std::string>;
template class std::vector<int, brisk::allocator<int>>;
template class std::vector<int, brisk::heap_allocator<int>>;
template class std::basic_string<char, std::char_traits<char>, brisk::allocator<char>>;

namespace {

struct alignas(128) Wide {
  char c[128];
};

bool check() {
  bool ok = true;
  std::vector<int, brisk::allocator<int>> v(1000, 7);
  ok = ok && brisk_owns(v.data()) && v[999] == 7;
  std::map<int, Wide, std::less<int>, brisk::allocator<std::pair<const int, Wide>>> m;
  m[1].c[0] = 1;
  ok = ok && (reinterpret_cast<std::uintptr_t>(&m[1]) % 128) == 0;

  brisk::heap h;
  {
    std::list<int, brisk::heap_allocator<int>> l(h);
    l.assign(100, 1);
    ok = ok && h.held_bytes() > 0;
    std::pmr::vector<int> pv(brisk::global_resource());
    pv.assign(100, 2);
    brisk::heap_resource hr(h);
    std::pmr::string ps(300, 'p', &hr);
    ok = ok && brisk_owns(pv.data()) && brisk_owns(ps.data());
  }
  h.reset();
  ok = ok && h.held_bytes() == 0;

  brisk::object_pool<std::string> pool(2);
  auto s = pool.make_unique(100, 's');
  std::string *t = pool.create("t");
  ok = ok && s->size() == 100 && *t == "t" && pool.stats().live_objects == 2;
  pool.destroy(t);

#if BRISK_TEST_NEW_DELETE
  int *i = new int(1);
  Wide *w = new Wide;
  ok = ok && brisk_owns(i) && brisk_owns(w) && (reinterpret_cast<std::uintptr_t>(w) % 128) == 0;
  delete w;
  delete i;
#endif
  return ok;
}

}  // namespace

int main() {
  if (check()) return 0;
  std::fprintf(stderr, "brisk C++ header check failed (C++ %ld)\n", static_cast<long>(__cplusplus));
  return 1;
}
