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

extern "C" void replay_delete(int array, void *p, int sized, size_t size, size_t align) {
  if (align) {
    std::align_val_t a{align};
    if (sized) array ? ::operator delete[](p, size, a) : ::operator delete(p, size, a);
    else array ? ::operator delete[](p, a) : ::operator delete(p, a);
  } else if (sized) {
    array ? ::operator delete[](p, size) : ::operator delete(p, size);
  } else {
    array ? ::operator delete[](p) : ::operator delete(p);
  }
}
