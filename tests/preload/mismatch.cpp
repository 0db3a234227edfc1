// Blocks freed another way than they were allocated, for the checked
// library under LD_PRELOAD (mismatch.sh) and, with the wrong type, the
// secure one (wrong_size.sh): each mode but "ok" frees one block the wrong
// way and exits 0 if nothing stops it. "ok" frees every
// kind the right way (plain, sized, aligned, nothrow, arrays, the standard
// containers) and must raise nothing.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <vector>

namespace {

void *volatile g_sink;

template <typename T>
T *launder(T *p) {
  g_sink = p;
  return static_cast<T *>(g_sink);
}

struct alignas(64) Wide {
  char bytes[64];
};

struct Record {
  char bytes[72];
};

int correct_use() {
  delete launder(new int(1));
  delete[] launder(new int[10]);
  delete launder(new Wide);
  delete[] launder(new Wide[3]);
  ::operator delete(launder(::operator new(100)), 100);
  ::operator delete[](launder(::operator new[](100)), 100);
  ::operator delete(launder(::operator new(100, std::align_val_t(256))), std::align_val_t(256));
  ::operator delete[](launder(::operator new[](100, std::align_val_t(256))), std::align_val_t(256));
  delete launder(new (std::nothrow) int(2));
  delete[] launder(new (std::nothrow) int[5]);
  ::operator delete(launder(::operator new(50, std::nothrow)), std::nothrow);
  std::free(launder(std::malloc(40)));
  std::free(launder(std::realloc(std::malloc(10), 1000)));
  std::vector<std::string> words;
  std::map<int, std::string> map;
  for (int i = 0; i < 1000; i++) {
    words.push_back(std::string(static_cast<size_t>(i % 100), 'x'));
    map[i] = words.back();
  }
  auto shared = std::make_shared<std::vector<int>>(100, 1);
  std::unique_ptr<int[]> array(new int[20]);
  std::puts("ok");
  return 0;
}

}  // namespace

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  if (!std::strcmp(mode, "ok")) return correct_use();
  if (!std::strcmp(mode, "new_array_free")) {
    std::free(launder(new int[10]));
    return 0;
  }
  if (!std::strcmp(mode, "malloc_delete")) {
    delete launder(static_cast<int *>(std::malloc(sizeof(int))));
    return 0;
  }
  if (!std::strcmp(mode, "new_delete_array")) {
    delete[] launder(new int(3));
    return 0;
  }
  if (!std::strcmp(mode, "new_array_delete")) {
    delete launder(new int[10]);
    return 0;
  }
  if (!std::strcmp(mode, "new_realloc")) {
    g_sink = std::realloc(launder(new int(4)), 100);
    return 0;
  }
  if (!std::strcmp(mode, "wrong_type_delete")) { /* a sized delete of 72 bytes, of a 1-byte block */
    delete launder(reinterpret_cast<Record *>(new char('r')));
    return 0;
  }
  std::fprintf(stderr,
               "usage: %s ok|new_array_free|malloc_delete|new_delete_array|new_array_delete|new_realloc|"
               "wrong_type_delete\n",
               argv[0]);
  return 64;
}
