/* Replaces the malloc family, so that LD_PRELOAD=libbrisk.so or linking
 * libbrisk puts brisk under a whole program (new_delete.c does the same for
 * C++). */
#include "api/override.h"

#include <limits.h>
#include <malloc.h>

REPLACEABLE void *malloc(size_t size) { return malloc_fast(size); }
REPLACEABLE void free(void *p) { free_fast(p); }
REPLACEABLE void *calloc(size_t n, size_t size) { return brisk_calloc(n, size); }
/* realloc(p, 0) frees p and returns NULL, as glibc's (and jemalloc's and
 * tcmalloc's) does: programs written for glibc call it to free and drop
 * the result, which leaked the minimal block brisk_realloc returns. */
REPLACEABLE void *realloc(void *p, size_t size) {
  if (unlikely(size == 0) && p) {
    free(p);
    return NULL;
  }
  return brisk_realloc(p, size);
}
REPLACEABLE void *aligned_alloc(size_t align, size_t size) { return brisk_aligned_alloc(align, size); }
REPLACEABLE int posix_memalign(void **out, size_t align, size_t size) {
  return brisk_posix_memalign(out, align, size);
}
REPLACEABLE void *memalign(size_t align, size_t size) { return brisk_memalign(align, size); }
REPLACEABLE void *valloc(size_t size) { return brisk_memalign(_bk_os_page_size(), size); }
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

/* Through free(), which valgrind replaces (it does not know free_sized and
 * free_aligned_sized): under memcheck the block is valgrind's. */
static void sized_free(void *p, size_t size, const char *fn) {
#if BRISK_CHECKED
  _bk_checked_free_sized(p, size, fn, false);
#else
  secure_check_size(p, size, fn);
#endif
  free(p);
}
EXPORT void free_sized(void *p, size_t size) { sized_free(p, size, "free_sized"); }
EXPORT void free_aligned_sized(void *p, size_t align, size_t size) {
  (void)align;
  sized_free(p, size, "free_aligned_sized");
}

EXPORT void *pvalloc(size_t size) {
  size_t page = _bk_os_page_size();
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
  return (struct mallinfo2){.arena = f.arena,
                            .ordblks = f.ordblks,
                            .hblks = f.hblks,
                            .hblkhd = f.hblkhd,
                            .usmblks = f.usmblks,
                            .uordblks = f.uordblks,
                            .fordblks = f.fordblks,
                            .keepcost = f.keepcost};
}
#endif

/* glibc's int fields wrap past 2 GiB; a figure stuck at INT_MAX is less wrong. */
static int saturate(size_t v) { return v > INT_MAX ? INT_MAX : (int)v; }

REPLACEABLE struct mallinfo mallinfo(void) {
  mallinfo_fields_t f;
  _bk_stats_mallinfo(&f);
  return (struct mallinfo){.arena = saturate(f.arena),
                           .ordblks = saturate(f.ordblks),
                           .hblks = saturate(f.hblks),
                           .hblkhd = saturate(f.hblkhd),
                           .usmblks = saturate(f.usmblks),
                           .uordblks = saturate(f.uordblks),
                           .fordblks = saturate(f.fordblks),
                           .keepcost = saturate(f.keepcost)};
}

REPLACEABLE void malloc_stats(void) { _bk_stats_print_malloc_stats(); }

/* glibc's tuning of its arenas, thresholds and trimming has nothing to act on
 * in brisk (BRISK_* options tune it): accepted, as glibc accepts the SVID
 * no-ops. Its debugging aids (heap checks, perturbed contents) brisk does not
 * have: refused, like a parameter nobody defines. */
REPLACEABLE int mallopt(int param, int value) {
  (void)value;
  switch (param) {
  case M_MXFAST:
  case M_NLBLKS:
  case M_GRAIN:
  case M_KEEP:
  case M_TRIM_THRESHOLD:
  case M_TOP_PAD:
  case M_MMAP_THRESHOLD:
  case M_MMAP_MAX:
  case M_ARENA_TEST:
  case M_ARENA_MAX: return 1;
  default: return 0;
  }
}
#endif
