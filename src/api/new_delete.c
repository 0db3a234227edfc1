/* Every C++ operator new and delete, defined by their mangled names so
 * the library needs no C++ runtime; when the program has one, `new` runs
 * the program's new_handler and throws std::bad_alloc through it. */
#include "api/override.h"

typedef void (*new_handler_fn)(void);
/* From libstdc++, present only when the program uses it. */
extern new_handler_fn _ZSt15get_new_handlerv(void) __attribute__((weak));
extern void _ZSt17__throw_bad_allocv(void) __attribute__((weak, noreturn));

/* The checked library also keeps how a block was allocated (new or new[]),
 * so that every delete can check that it matches. */
static inline void *alloc_for_new(size_t size, size_t align, enum alloc_kind kind) {
#if BRISK_CHECKED
  return _bk_checked_new(size, align, kind);
#else
  (void)kind;
  return align ? brisk_aligned_alloc(align, size) : malloc_fast(size);
#endif
}

/* The standard's loop: call the new_handler until memory comes or there is
 * none, then throw std::bad_alloc. */
static BRISK_NOINLINE void *new_failed(size_t size, size_t align, enum alloc_kind kind) {
  for (;;) {
    new_handler_fn handler = _ZSt15get_new_handlerv ? _ZSt15get_new_handlerv() : NULL;
    if (!handler) break;
    handler();
    void *p = alloc_for_new(size, align, kind);
    if (p) return p;
  }
  if (_ZSt17__throw_bad_allocv) _ZSt17__throw_bad_allocv();
  _bk_fatal("operator new(%zu) failed: out of memory and no C++ runtime to throw std::bad_alloc", size);
}

static inline void *new_impl(size_t size, size_t align, enum alloc_kind kind) {
  void *p = alloc_for_new(size, align, kind);
  if (likely(p != NULL)) return p;
  return new_failed(size, align, kind);
}

/* size: the size a sized delete names (sized true). */
static inline void delete_impl(void *p, size_t size, bool sized, enum alloc_kind kind) {
#if BRISK_CHECKED
  _bk_checked_delete(p, size, sized, kind);
#else
  if (sized) free_sized_fast(p, size, kind == ALLOC_NEW ? "operator delete" : "operator delete[]");
  else free_fast(p);
#endif
}

/* operator new(size_t) and friends, by mangled name. The nothrow forms are
 * deliberately not replaced: the C++ runtime's own (libstdc++ since GCC 9,
 * libc++) call the throwing form above inside a try block, which gives the
 * standard's behaviour (handler loop, then nullptr) and still allocates
 * from brisk; C cannot catch the exception a new_handler may throw. */
REPLACEABLE void *_Znwm(size_t n) { return new_impl(n, 0, ALLOC_NEW); }
REPLACEABLE void *_Znam(size_t n) { return new_impl(n, 0, ALLOC_NEW_ARRAY); }
REPLACEABLE void *_ZnwmSt11align_val_t(size_t n, size_t a) { return new_impl(n, a, ALLOC_NEW); }
REPLACEABLE void *_ZnamSt11align_val_t(size_t n, size_t a) { return new_impl(n, a, ALLOC_NEW_ARRAY); }

/* Every delete: plain, sized, nothrow, aligned, and their combinations. */
REPLACEABLE void _ZdlPv(void *p) { delete_impl(p, 0, false, ALLOC_NEW); }
REPLACEABLE void _ZdaPv(void *p) { delete_impl(p, 0, false, ALLOC_NEW_ARRAY); }
REPLACEABLE void _ZdlPvm(void *p, size_t n) { delete_impl(p, n, true, ALLOC_NEW); }
REPLACEABLE void _ZdaPvm(void *p, size_t n) { delete_impl(p, n, true, ALLOC_NEW_ARRAY); }
REPLACEABLE void _ZdlPvRKSt9nothrow_t(void *p, const void *t) {
  (void)t;
  delete_impl(p, 0, false, ALLOC_NEW);
}
REPLACEABLE void _ZdaPvRKSt9nothrow_t(void *p, const void *t) {
  (void)t;
  delete_impl(p, 0, false, ALLOC_NEW_ARRAY);
}
REPLACEABLE void _ZdlPvSt11align_val_t(void *p, size_t a) {
  (void)a;
  delete_impl(p, 0, false, ALLOC_NEW);
}
REPLACEABLE void _ZdaPvSt11align_val_t(void *p, size_t a) {
  (void)a;
  delete_impl(p, 0, false, ALLOC_NEW_ARRAY);
}
REPLACEABLE void _ZdlPvmSt11align_val_t(void *p, size_t n, size_t a) {
  (void)a;
  delete_impl(p, n, true, ALLOC_NEW);
}
REPLACEABLE void _ZdaPvmSt11align_val_t(void *p, size_t n, size_t a) {
  (void)a;
  delete_impl(p, n, true, ALLOC_NEW_ARRAY);
}
REPLACEABLE void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, const void *t) {
  (void)a;
  (void)t;
  delete_impl(p, 0, false, ALLOC_NEW);
}
REPLACEABLE void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, const void *t) {
  (void)a;
  (void)t;
  delete_impl(p, 0, false, ALLOC_NEW_ARRAY);
}
