// C++ operator new and delete for the replay driver, in every form a trace
// names: the driver is C, and only C++ can call the operators as a program
// does (the preloaded allocator's own when it replaces them, else the C++
// runtime's, which call its malloc). A failed throwing new gives NULL.
#include <cstddef>
#include <new>

extern "C" void *replay_new(int array, int nothrow, size_t size, size_t align) {
  try {
    if (align) {
      std::align_val_t a{align};
      if (nothrow) return array ? ::operator new[](size, a, std::nothrow) : ::operator new(size, a, std::nothrow);
      return array ? ::operator new[](size, a) : ::operator new(size, a);
    }
    if (nothrow) return array ? ::operator new[](size, std::nothrow) : ::operator new(size, std::nothrow);
    return array ? ::operator new[](size) : ::operator new(size);
  } catch (const std::bad_alloc &) {
    return nullptr;
  }
}

// Statements, not ?: between two void calls: clang 14 compiled such a
// conditional into both calls, one after the other (found by the clang
// stage's record_format test: each delete freed its block twice).
extern "C" void replay_delete(int array, void *p, int sized, size_t size, size_t align) {
  std::align_val_t a{align ? align : alignof(std::max_align_t)};
  if (array) {
    if (align && sized) ::operator delete[](p, size, a);
    else if (align) ::operator delete[](p, a);
    else if (sized) ::operator delete[](p, size);
    else ::operator delete[](p);
  } else {
    if (align && sized) ::operator delete(p, size, a);
    else if (align) ::operator delete(p, a);
    else if (sized) ::operator delete(p, size);
    else ::operator delete(p);
  }
}
