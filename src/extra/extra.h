/* The extra layer: what brisk offers beyond malloc, built on the core:
 * explicit heaps (heaps.c), object pools (pool*.c), statistics and the
 * reports at exit (stats.c, report.c), and looking inside (check.c,
 * visit.c). This header is what the api layer above uses, plus the handle
 * checks heaps and pools share. */
#ifndef BRISK_EXTRA_H
#define BRISK_EXTRA_H

#include "core/core.h"

/* ---- Handles (brisk_heap_t, brisk_pool_t) ------------------------------- */

/* NULL is EINVAL in every build; the checked library aborts, naming fn and
 * the misuse, with the stack, on a handle whose struct is not a live one of
 * its kind (types.h: HEAP_MAGIC, POOL_MAGIC, HANDLE_DEAD). */
static inline bool handle_ok(const void *handle, size_t magic_offset, uint32_t live, const char *fn,
                             const char *kind) {
  if (unlikely(!handle)) {
    errno = EINVAL;
    return false;
  }
#if BRISK_CHECKED
  uint32_t magic = *(const uint32_t *)((const uint8_t *)handle + magic_offset);
  if (magic == HANDLE_DEAD) CHECKED_FAIL("%s(%p): %s was destroyed", fn, handle, kind);
  if (magic != live) CHECKED_FAIL("%s(%p): not a %s from brisk_%s_new", fn, handle, kind, kind);
#else
  (void)magic_offset, (void)live, (void)fn, (void)kind;
#endif
  return true;
}

/* ---- pool*.c ------------------------------------------------------------ */
BRISK_INTERNAL void _bk_pool_fork_lock(void);
BRISK_INTERNAL void _bk_pool_fork_unlock(void);

/* ---- stats.c: glibc's statistics ---------------------------------------- */

/* glibc's struct mallinfo2 in brisk's terms (meanings in brisk.h), without
 * <malloc.h>: the api layer copies it into that header's layouts. */
typedef struct mallinfo_fields {
  size_t arena, ordblks, hblks, hblkhd, usmblks, uordblks, fordblks, keepcost;
} mallinfo_fields_t;
BRISK_INTERNAL void _bk_stats_mallinfo(mallinfo_fields_t *mi);
/* brisk_stats_get, also counting free chunks (mallinfo's ordblks). */
BRISK_INTERNAL int _bk_stats_collect(brisk_stats_t *st, uint64_t *free_chunks);
BRISK_INTERNAL void _bk_stats_mallinfo_from(const brisk_stats_t *st, uint64_t free_chunks, mallinfo_fields_t *mi);

/* ---- report.c: printed statistics and the reports at exit --------------- */
BRISK_INTERNAL void _bk_stats_print_malloc_stats(void);
BRISK_INTERNAL void _bk_report_prepare(void);
BRISK_INTERNAL void _bk_report_at_exit(void);

/* ---- check.c and visit.c ------------------------------------------------ */
#define MAX_BLOCKS_PER_PAGE ((1u << SMALL_PAGE_SHIFT) / 16)
/* The page's free blocks (all three lists), setting their bits in
 * free_bits when given; -1 on a broken list (brisk_check_message says how). */
BRISK_INTERNAL long _bk_page_free_blocks(const page_t *pg, uint64_t *free_bits);
/* What a walk of the blocks the caller may read calls, each when set: live
 * on each live block as the program sees it (brisk_visit_blocks), used on
 * each block not free and free on each free one as brisk keeps them, and
 * broken on a page whose lists do not walk (brisk_check_message says why). */
typedef struct block_walk {
  brisk_block_visitor live;
  void (*used)(void *block);
  void (*free)(void *block);
  void (*broken)(const page_t *pg);
  void *arg;
} block_walk_t;
BRISK_INTERNAL void _bk_walk_blocks(const block_walk_t *walk);
/* The secure and checked libraries name a fault on a guard page
 * (guard_fault.c); called once, at start. */
BRISK_INTERNAL void _bk_guard_faults_install(void);
/* The checked library's check of every block at exit (exit_check.c). */
BRISK_INTERNAL void _bk_exit_check(void);
/* The blocks live at exit that nothing reachable points to (leaked),
 * labelled with the process, and a line for those still reachable;
 * returns the count leaked. */
BRISK_INTERNAL uint64_t _bk_leak_report(int fd, long pid, const char *command);
/* reach.c: the blocks live now, each known reachable or not. NULL when the
 * tables could not be mapped; *complete false when the process's memory
 * could not be listed (then no block is known reachable). */
typedef struct reach reach_t;
BRISK_INTERNAL reach_t *_bk_reach_begin(bool *complete);
BRISK_INTERNAL size_t _bk_reach_count(const reach_t *r);
/* Block i (in address order) as the visit gave it; true when reachable. */
BRISK_INTERNAL bool _bk_reach_block(const reach_t *r, size_t i, void **p, size_t *size);
BRISK_INTERNAL void _bk_reach_end(reach_t *r);

#endif
