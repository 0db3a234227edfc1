/* Replaces the malloc family and every C++ operator new/delete, so that
 * LD_PRELOAD=libbrisk.so or linking libbrisk puts brisk under a whole
 * program. The C++ operators are defined here by their mangled names so the
 * library needs no C++ runtime; when the program has one, `new` runs the
 * program's new_handler and throws std::bad_alloc through it. */
#include "fast_path.h"

#include <limits.h>
#include <malloc.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

/* valgrind and other tools that bring their own allocator swap these names,
 * in any library, for theirs, by address; not the others exported here
 * (valgrind 3.19: reallocarray, free_sized, pvalloc, __libc_*, ...). Those
 * others are therefore built only from calls to these, so a tool sees every
 * block come and go through functions it replaced. noipa keeps each body at
 * its own address, never inlined into a caller nor folded with an identical
 * twin (free and operator delete share a body); the hot paths keep their
 * code, only the rare entry points pay a jump. */
#if defined(__clang__)
#define REPLACEABLE EXPORT __attribute__((noinline))
#else
#define REPLACEABLE EXPORT __attribute__((noipa))
#endif

REPLACEABLE void *malloc(size_t size) { return malloc_fast(size); }
REPLACEABLE void free(void *p) { free_fast(p); }
REPLACEABLE void *calloc(size_t n, size_t size) { return brisk_calloc(n, size); }
REPLACEABLE void *realloc(void *p, size_t size) { return brisk_realloc(p, size); }
REPLACEABLE void *aligned_alloc(size_t align, size_t size) { return brisk_aligned_alloc(align, size); }
REPLACEABLE int posix_memalign(void **out, size_t align, size_t size) { return brisk_posix_memalign(out, align, size); }
REPLACEABLE void *memalign(size_t align, size_t size) { return brisk_memalign(align, size); }
REPLACEABLE void *valloc(size_t size) { return brisk_memalign((size_t)sysconf(_SC_PAGESIZE), size); }
REPLACEABLE size_t malloc_usable_size(void *p) { return brisk_usable_size(p); }
REPLACEABLE void cfree(void *p) { brisk_free(p); }

REPLACEABLE int malloc_trim(size_t pad) {
  (void)pad;
  brisk_collect();
  return 1;
}

/* ---- Built on the replaceable ones --------------------------------------- */

EXPORT void *reallocarray(void *p, size_t n, size_t size) {
  size_t total;
  return size_product(n, size, &total) ? realloc(p, total) : NULL;
}

EXPORT void free_sized(void *p, size_t size) { (void)size; free(p); }
EXPORT void free_aligned_sized(void *p, size_t align, size_t size) { (void)align; (void)size; free(p); }

EXPORT void *pvalloc(size_t size) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  size_t rounded = align_up(size ? size : 1, page);
  if (rounded < size) {
    errno = ENOMEM;
    return NULL;
  }
  return valloc(rounded);
}

/* glibc's own entry points, which some programs call directly. */
EXPORT void *__libc_malloc(size_t size) { return malloc(size); }
EXPORT void __libc_free(void *p) { free(p); }
EXPORT void *__libc_calloc(size_t n, size_t size) { return calloc(n, size); }
EXPORT void *__libc_realloc(void *p, size_t size) { return realloc(p, size); }
EXPORT void *__libc_memalign(size_t align, size_t size) { return memalign(align, size); }
EXPORT void *__libc_valloc(size_t size) { return valloc(size); }
EXPORT void *__libc_pvalloc(size_t size) { return pvalloc(size); }
EXPORT int __posix_memalign(void **out, size_t align, size_t size) { return posix_memalign(out, align, size); }

/* ---- glibc's statistics and tuning (what each figure means: brisk.h) ----- */

#if defined(__GLIBC__)
#if __GLIBC_PREREQ(2, 33)
EXPORT struct mallinfo2 mallinfo2(void) {
  mallinfo_fields_t f;
  _bk_stats_mallinfo(&f);
  return (struct mallinfo2){.arena = f.arena, .ordblks = f.ordblks, .hblks = f.hblks, .hblkhd = f.hblkhd,
                            .usmblks = f.usmblks, .uordblks = f.uordblks, .fordblks = f.fordblks,
                            .keepcost = f.keepcost};
}
#endif

/* glibc's int fields wrap past 2 GiB; a figure stuck at INT_MAX is less wrong. */
static int saturate(size_t v) { return v > INT_MAX ? INT_MAX : (int)v; }

REPLACEABLE struct mallinfo mallinfo(void) {
  mallinfo_fields_t f;
  _bk_stats_mallinfo(&f);
  return (struct mallinfo){.arena = saturate(f.arena), .ordblks = saturate(f.ordblks),
                           .hblks = saturate(f.hblks), .hblkhd = saturate(f.hblkhd),
                           .usmblks = saturate(f.usmblks), .uordblks = saturate(f.uordblks),
                           .fordblks = saturate(f.fordblks), .keepcost = saturate(f.keepcost)};
}

REPLACEABLE void malloc_stats(void) { _bk_stats_print_malloc_stats(); }

/* glibc's tuning of its arenas, thresholds and trimming has nothing to act on
 * in brisk (BRISK_* options tune it): accepted, as glibc accepts the SVID
 * no-ops. Its debugging aids (heap checks, perturbed contents) brisk does not
 * have: refused, like a parameter nobody defines. */
REPLACEABLE int mallopt(int param, int value) {
  (void)value;
  switch (param) {
    case M_MXFAST: case M_NLBLKS: case M_GRAIN: case M_KEEP:
    case M_TRIM_THRESHOLD: case M_TOP_PAD: case M_MMAP_THRESHOLD: case M_MMAP_MAX:
    case M_ARENA_TEST: case M_ARENA_MAX:
      return 1;
    default:
      return 0;
  }
}
#endif

/* ---- C++ operator new and delete ---------------------------------------- */

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
REPLACEABLE void _ZdlPvm(void *p, size_t n) { (void)n; free_fast(p); }
REPLACEABLE void _ZdaPvm(void *p, size_t n) { (void)n; free_fast(p); }
REPLACEABLE void _ZdlPvRKSt9nothrow_t(void *p, const void *t) { (void)t; brisk_free(p); }
REPLACEABLE void _ZdaPvRKSt9nothrow_t(void *p, const void *t) { (void)t; brisk_free(p); }
REPLACEABLE void _ZdlPvSt11align_val_t(void *p, size_t a) { (void)a; brisk_free(p); }
REPLACEABLE void _ZdaPvSt11align_val_t(void *p, size_t a) { (void)a; brisk_free(p); }
REPLACEABLE void _ZdlPvmSt11align_val_t(void *p, size_t n, size_t a) { (void)a; brisk_free_sized(p, n); }
REPLACEABLE void _ZdaPvmSt11align_val_t(void *p, size_t n, size_t a) { (void)a; brisk_free_sized(p, n); }
REPLACEABLE void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, const void *t) { (void)a; (void)t; brisk_free(p); }
REPLACEABLE void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, const void *t) { (void)a; (void)t; brisk_free(p); }
