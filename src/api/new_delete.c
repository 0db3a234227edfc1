/* Every C++ operator new and delete, defined by their mangled names so
 * the library needs no C++ runtime; when the program has one, `new` runs
 * the program's new_handler and throws std::bad_alloc through it. */
#include "api/override.h"

typedef void (*new_handler_fn)(void);
/* From libstdc++, present only when the program uses it. */
extern new_handler_fn _ZSt15get_new_handlerv(void) __attribute__((weak));
extern void _ZSt17__throw_bad_allocv(void) __attribute__((weak, noreturn));

static inline void *alloc_for_new(size_t size, size_t align) {
  return align ? brisk_aligned_alloc(align, size) : malloc_fast(size);
}

/* The standard's loop: call the new_handler until memory comes or there is
 * none, then throw std::bad_alloc. */
static BRISK_NOINLINE void *new_failed(size_t size, size_t align) {
  for (;;) {
    new_handler_fn handler = _ZSt15get_new_handlerv ? _ZSt15get_new_handlerv() : NULL;
    if (!handler) break;
    handler();
    void *p = alloc_for_new(size, align);
    if (p) return p;
  }
  if (_ZSt17__throw_bad_allocv) _ZSt17__throw_bad_allocv();
  _bk_fatal("operator new(%zu) failed: out of memory and no C++ runtime to throw std::bad_alloc", size);
}

static inline void *new_impl(size_t size, size_t align) {
  void *p = alloc_for_new(size, align);
  if (likely(p != NULL)) return p;
  return new_failed(size, align);
}

/* operator new(size_t) and friends, by mangled name. The nothrow forms are
 * deliberately not replaced: the C++ runtime's own (libstdc++ since GCC 9,
 * libc++) call the throwing form above inside a try block, which gives the
 * standard's behaviour (handler loop, then nullptr) and still allocates
 * from brisk; C cannot catch the exception a new_handler may throw. */
REPLACEABLE void *_Znwm(size_t n) { return new_impl(n, 0); }
REPLACEABLE void *_Znam(size_t n) { return new_impl(n, 0); }
REPLACEABLE void *_ZnwmSt11align_val_t(size_t n, size_t a) { return new_impl(n, a); }
REPLACEABLE void *_ZnamSt11align_val_t(size_t n, size_t a) { return new_impl(n, a); }

REPLACEABLE void _ZdlPv(void *p) { free_fast(p); }
REPLACEABLE void _ZdaPv(void *p) { free_fast(p); }
REPLACEABLE void _ZdlPvm(void *p, size_t n) { free_sized_fast(p, n, "operator delete"); }
REPLACEABLE void _ZdaPvm(void *p, size_t n) { free_sized_fast(p, n, "operator delete[]"); }
REPLACEABLE void _ZdlPvRKSt9nothrow_t(void *p, const void *t) {
  (void)t;
  brisk_free(p);
}
REPLACEABLE void _ZdaPvRKSt9nothrow_t(void *p, const void *t) {
  (void)t;
  brisk_free(p);
}
REPLACEABLE void _ZdlPvSt11align_val_t(void *p, size_t a) {
  (void)a;
  brisk_free(p);
}
REPLACEABLE void _ZdaPvSt11align_val_t(void *p, size_t a) {
  (void)a;
  brisk_free(p);
}
REPLACEABLE void _ZdlPvmSt11align_val_t(void *p, size_t n, size_t a) {
  (void)a;
  free_sized_fast(p, n, "operator delete");
}
REPLACEABLE void _ZdaPvmSt11align_val_t(void *p, size_t n, size_t a) {
  (void)a;
  free_sized_fast(p, n, "operator delete[]");
}
REPLACEABLE void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, const void *t) {
  (void)a;
  (void)t;
  brisk_free(p);
}
REPLACEABLE void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, const void *t) {
  (void)a;
  (void)t;
  brisk_free(p);
}
