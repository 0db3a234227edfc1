// The C++ layer from an installed brisk: brisk::allocator with brisk::core.
#include <brisk.hpp>

#include <cstdio>
#include <vector>

int main() {
  std::vector<int, brisk::allocator<int>> v;
  for (int i = 0; i < 10000; i++) v.push_back(i);
  if (!brisk_owns(v.data()) || v[9999] != 9999) {
    std::puts("FAIL: brisk::allocator");
    return 1;
  }
  std::puts("ok: brisk::allocator");
  return 0;
}
