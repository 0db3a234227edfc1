/* Allocation on a heap beyond malloc and free: calloc, realloc, aligned
 * blocks, the size of a block, and pointers brisk did not make. The public
 * functions (api/) and explicit heaps (extra/) are built on these. */
#include "core/fast_path.h"

#include <string.h>

static void foreign_free(void *p);

/* Everything free_fast does not finish: other threads' blocks, huge and
 * over-aligned blocks, pages with aligned blocks, NULL and foreign pointers. */
void _bk_free_slow(void *p) {
  segment_t *seg = segment_checked("free", p, true);
  if (unlikely(seg == NULL)) {
    if (p) foreign_free(p);
    return;
  }
  _bk_heap_free_generic(seg, p);
}

/* The bytes from p to the end of its block, in brisk's segment seg. */
static inline size_t usable_in(segment_t *seg, const void *p) {
  if (seg->kind == SEG_HUGE)
    return huge_block_size(seg) - (size_t)((const uint8_t *)p - ((const uint8_t *)seg + seg->block_offset));
  page_t *pg = page_of(seg, p);
  return (size_t)((const uint8_t *)_bk_page_block_start(pg, p) + pg->block_size - (const uint8_t *)p);
}

size_t _bk_usable_size(const void *p) {
  if (BRISK_CHECKED) return _bk_checked_usable_size(p);
  segment_t *seg = segment_of(p);
  return seg ? usable_in(seg, p) : 0;
}

/* The start of the block that holds p (p may be aligned inside it). */
void *_bk_block_start_of(const void *p) {
  segment_t *seg = segment_of(p);
  if (!seg) return NULL;
  if (seg->kind == SEG_HUGE) return (uint8_t *)seg + seg->block_offset;
  return _bk_page_block_start(page_of(seg, p), p);
}

/* ---- calloc, realloc, aligned blocks ------------------------------------ *
 * Each in two forms: the plain one (align 0) and the aligned one (align a
 * power of two); both are the one function below, inlined. */

static heap_t *heap_ready(heap_t *h) { return h != &_bk_heap_empty ? h : _bk_heap_get_initialized(); }

/* A block of `size` bytes at a multiple of align (0 or a power of two),
 * with zero all zero: memory known to be zero (a fresh or purged huge
 * mapping) is not written. Not the checked library's (checked.c). */
static inline __attribute__((always_inline)) void *block_in(heap_t *h, size_t align, size_t size, bool zero) {
  if (align > BLOCK_ALIGN) return heap_aligned_block(h, align, size, zero);
  if (zero && size > LARGE_SIZE_MAX) return (h = heap_ready(h)) ? _bk_huge_alloc(h, size, 0, true) : NULL;
  void *p = heap_malloc_fast(h, size);
  if (zero && p) memset(p, 0, size);
  return p;
}

static inline __attribute__((always_inline)) void *calloc_in(heap_t *h, size_t count, size_t size, size_t align) {
  size_t total;
  if (!size_product(count, size, &total)) return NULL;
  if (BRISK_CHECKED) return _bk_checked_alloc(h, total, align, true);
  return block_in(h, align, total, true);
}

void *_bk_calloc_in(heap_t *h, size_t count, size_t size) { return calloc_in(h, count, size, 0); }

void *_bk_calloc_aligned_in(heap_t *h, size_t count, size_t size, size_t align) {
  return alignment_valid(align) ? calloc_in(h, count, size, align) : NULL;
}

static void *realloc_foreign(heap_t *h, void *p, size_t align, size_t size);

/* In place when p is aligned and the block suits the size
 * (realloc_in_place), or a huge block's mapping can be resized to it; else
 * a new block. */
static inline __attribute__((always_inline)) void *realloc_in(heap_t *h, void *p, size_t align, size_t size) {
  if (BRISK_CHECKED) return _bk_checked_realloc(h, p, align, size);
  if (!p) return block_in(h, align, size, false);
  segment_t *seg = segment_checked(align ? "realloc_aligned" : "realloc", p, false);
  if (unlikely(!seg)) return realloc_foreign(h, p, align, size);
  /* Every block of brisk's is aligned to BLOCK_ALIGN. */
  bool aligned = align <= BLOCK_ALIGN || ((uintptr_t)p & (align - 1)) == 0;
  /* A huge block stays huge (its mapping resized) when a new block would be
   * huge too. */
  if (aligned && seg->kind == SEG_HUGE && aligned_block_is_huge(align, size)) {
    void *q = _bk_huge_realloc(seg, p, size, align);
    if (q) return q;
  }
  size_t usable = usable_in(seg, p); /* (seg: segment_checked's lookup, not another) */
  if (aligned && realloc_in_place(usable, align, size)) return p;
  void *q = block_in(h, align, size, false);
  if (!q) return NULL;
  memcpy(q, p, size < usable ? size : usable);
  free_fast(p);
  return q;
}

void *_bk_realloc_in(heap_t *h, void *p, size_t size) { return realloc_in(h, p, 0, size); }

void *_bk_realloc_aligned_in(heap_t *h, void *p, size_t align, size_t size) {
  return alignment_valid(align) ? realloc_in(h, p, align, size) : NULL;
}

void *_bk_aligned_in(heap_t *h, size_t align, size_t size) {
  if (BRISK_CHECKED) return _bk_checked_alloc(h, size, align, false);
  return block_in(h, align, size, false);
}

/* ---- Foreign pointers --------------------------------------------------- *
 * The dynamic loader hands out memory from its own bootstrap allocator before
 * brisk is in place, and may later pass it to free or realloc. brisk never
 * writes to such memory: free leaves it alone, realloc copies out of it. */

static void foreign_free(void *p) {
  if (_bk_opt.verbose) _bk_warning("free(%p): not allocated by brisk; left alone", p);
}

/* The block's true size is unknown: copy as much of the request as is
 * mapped. */
static void *realloc_foreign(heap_t *h, void *p, size_t align, size_t size) {
  if (_bk_opt.verbose) _bk_warning("realloc(%p): not allocated by brisk; copying it out", p);
  void *q = block_in(h, align, size, false);
  if (q) memcpy(q, p, _bk_os_readable(p, size));
  return q;
}
