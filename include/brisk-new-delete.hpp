// brisk-new-delete.hpp: global operator new and delete on brisk.
//
// For programs that link only brisk's prefixed API (libbrisk_core.a, the
// CMake target brisk_core) and still want every C++ allocation served by
// brisk, while malloc stays the system's. Include this header in exactly ONE
// translation unit of the program: it defines, not declares, the
// replaceable operators ([replacement.functions]), so a second inclusion
// elsewhere is a duplicate-symbol link error.
//
// libbrisk.so and libbrisk.a already replace malloc and every operator
// new/delete; with them this header is not needed, and with libbrisk.a it
// clashes (multiple definitions) as soon as the program calls malloc.
//
// Every form is replaced: plain, array, nothrow, sized delete, and the
// std::align_val_t forms. Failure follows the standard: the new_handler is
// called until it makes room, throws, or is unset, and then std::bad_alloc
// is thrown; the nothrow forms return nullptr instead.
//
// Under AddressSanitizer (and other sanitizers that own operator new) do
// not include it: the sanitizer's own operators would be replaced.
#ifndef BRISK_NEW_DELETE_HPP
#define BRISK_NEW_DELETE_HPP

#include <cstddef>
#include <cstdlib>
#include <new>

#include "brisk.h"

namespace brisk {
namespace new_delete_detail {

#if defined(__cpp_exceptions) || defined(__EXCEPTIONS)
#define BRISK_ND_EXCEPTIONS 1
#else
#define BRISK_ND_EXCEPTIONS 0
#endif

// align == 0: brisk_malloc's natural alignment.
inline void *allocate(std::size_t size, std::size_t align, bool nothrow) {
  for (;;) {
    void *p = align ? brisk_aligned_alloc(align, size) : brisk_malloc(size);
    if (p) return p;
    std::new_handler handler = std::get_new_handler();
    // A bad alignment would fail forever; no handler can fix it.
    if (!handler || (align & (align - 1)) != 0) {
      if (nothrow) return nullptr;
#if BRISK_ND_EXCEPTIONS
      throw std::bad_alloc();
#else
      std::abort();
#endif
    }
#if BRISK_ND_EXCEPTIONS
    if (nothrow) {
      try {
        handler();
      } catch (const std::bad_alloc &) {
        return nullptr;
      }
      continue;
    }
#endif
    handler();
  }
}

inline std::size_t alignment(std::align_val_t a) noexcept { return static_cast<std::size_t>(a); }

#undef BRISK_ND_EXCEPTIONS

}  // namespace new_delete_detail
}  // namespace brisk

// ---- new ---------------------------------------------------------------------

void *operator new(std::size_t size) { return brisk::new_delete_detail::allocate(size, 0, false); }
void *operator new[](std::size_t size) { return brisk::new_delete_detail::allocate(size, 0, false); }
void *operator new(std::size_t size, const std::nothrow_t &) noexcept {
  return brisk::new_delete_detail::allocate(size, 0, true);
}
void *operator new[](std::size_t size, const std::nothrow_t &) noexcept {
  return brisk::new_delete_detail::allocate(size, 0, true);
}
void *operator new(std::size_t size, std::align_val_t align) {
  return brisk::new_delete_detail::allocate(size, brisk::new_delete_detail::alignment(align), false);
}
void *operator new[](std::size_t size, std::align_val_t align) {
  return brisk::new_delete_detail::allocate(size, brisk::new_delete_detail::alignment(align), false);
}
void *operator new(std::size_t size, std::align_val_t align, const std::nothrow_t &) noexcept {
  return brisk::new_delete_detail::allocate(size, brisk::new_delete_detail::alignment(align), true);
}
void *operator new[](std::size_t size, std::align_val_t align, const std::nothrow_t &) noexcept {
  return brisk::new_delete_detail::allocate(size, brisk::new_delete_detail::alignment(align), true);
}

// ---- delete ------------------------------------------------------------------
// Sizes are passed on as brisk_free_sized hints; aligned blocks are freed
// unsized (their size does not describe the alignment padding).

void operator delete(void *p) noexcept { brisk_free(p); }
void operator delete[](void *p) noexcept { brisk_free(p); }
void operator delete(void *p, std::size_t size) noexcept { brisk_free_sized(p, size); }
void operator delete[](void *p, std::size_t size) noexcept { brisk_free_sized(p, size); }
void operator delete(void *p, const std::nothrow_t &) noexcept { brisk_free(p); }
void operator delete[](void *p, const std::nothrow_t &) noexcept { brisk_free(p); }
void operator delete(void *p, std::align_val_t) noexcept { brisk_free(p); }
void operator delete[](void *p, std::align_val_t) noexcept { brisk_free(p); }
void operator delete(void *p, std::size_t, std::align_val_t) noexcept { brisk_free(p); }
void operator delete[](void *p, std::size_t, std::align_val_t) noexcept { brisk_free(p); }
void operator delete(void *p, std::align_val_t, const std::nothrow_t &) noexcept { brisk_free(p); }
void operator delete[](void *p, std::align_val_t, const std::nothrow_t &) noexcept { brisk_free(p); }

#endif  // BRISK_NEW_DELETE_HPP
