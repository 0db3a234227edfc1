// Over-aligned types for the tests of C++ operator new/delete (test_cpp.cpp,
// test_new_delete_header.cpp): each needs the std::align_val_t forms.
#ifndef BRISK_TEST_OVERALIGNED_TYPES_H
#define BRISK_TEST_OVERALIGNED_TYPES_H

#include <cstring>

struct alignas(64) A64 {
  char c[100];
};
struct alignas(256) A256 {
  char c[300];
  A256() { std::memset(c, 0x25, sizeof c); }
};
struct alignas(4096) A4096 {
  char c[5000];
};

#endif
