/* Allocation on a heap beyond malloc and free: calloc, realloc, aligned
 * blocks, the size of a block, and pointers brisk did not make. The public
 * functions (api/) and explicit heaps (extra/) are built on these. */
#include "core/fast_path.h"

#include <string.h>

static void foreign_free(void *p);

/* Everything free_fast does not finish: other threads' blocks, huge and
 * over-aligned blocks, pages with aligned blocks, NULL and foreign pointers. */
void _bk_free_slow(void *p) {
  _bk_secure_check_block("free", p, true);
  segment_t *seg = segment_of(p);
  if (unlikely(seg == NULL)) {
    if (p) foreign_free(p);
    return;
  }
  _bk_heap_free_generic(seg, page_of(seg, p), p);
}

size_t _bk_usable_size(const void *p) {
  if (BRISK_CHECKED) return _bk_checked_usable_size(p);
  segment_t *seg = segment_of(p);
  if (!seg) return 0;
  if (seg->kind == SEG_HUGE)
    return huge_block_size(seg) - (size_t)((const uint8_t *)p - ((const uint8_t *)seg + seg->block_offset));
  page_t *pg = page_of(seg, p);
  const uint8_t *b = (const uint8_t *)_bk_page_block_start(pg, p);
  return (size_t)(b + pg->block_size - (const uint8_t *)p);
}

/* The start of the block that holds p (p may be aligned inside it). */
void *_bk_block_start_of(const void *p) {
  segment_t *seg = segment_of(p);
  if (!seg) return NULL;
  if (seg->kind == SEG_HUGE) return (uint8_t *)seg + seg->block_offset;
  return _bk_page_block_start(page_of(seg, p), p);
}

/* ---- calloc and realloc ------------------------------------------------- */

static heap_t *heap_ready(heap_t *h) { return h != &_bk_heap_empty ? h : _bk_heap_get_initialized(); }

void *_bk_calloc_in(heap_t *h, size_t count, size_t size) {
  size_t total;
  if (!size_product(count, size, &total)) return NULL;
  if (BRISK_CHECKED) return _bk_checked_alloc(h, total, 0, true);
  if (total > LARGE_SIZE_MAX) {
    if (!(h = heap_ready(h))) return NULL;
    return _bk_huge_alloc(h, total, 0, true);
  }
  void *p = heap_malloc_fast(h, total);
  if (p) memset(p, 0, total);
  return p;
}

static void *realloc_foreign(void *p, size_t size);

void *_bk_realloc_in(heap_t *h, void *p, size_t size) {
  if (BRISK_CHECKED) return _bk_checked_realloc(h, p, size);
  if (!p) return heap_malloc_fast(h, size);
  _bk_secure_check_block("realloc", p, false);
  segment_t *seg = segment_of(p);
  if (unlikely(!seg)) return realloc_foreign(p, size);
  if (seg->kind == SEG_HUGE && size > LARGE_SIZE_MAX) {
    void *q = _bk_huge_realloc(seg, p, size);
    if (q) return q;
  }
  size_t usable = _bk_usable_size(p);
  if (size <= usable && size >= usable / 2) return p;
  void *q = heap_malloc_fast(h, size);
  if (!q) return NULL;
  memcpy(q, p, size < usable ? size : usable);
  free_fast(p);
  return q;
}

/* ---- Aligned allocation ------------------------------------------------- */

/* align: a power of two. */
void *_bk_aligned_in(heap_t *h, size_t align, size_t size) {
  if (BRISK_CHECKED) return _bk_checked_alloc(h, size, align, false);
  if (align <= BLOCK_ALIGN) return heap_malloc_fast(h, size);
  return heap_aligned_block(h, align, size);
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
static void *realloc_foreign(void *p, size_t size) {
  if (_bk_opt.verbose) _bk_warning("realloc(%p): not allocated by brisk; copying it out", p);
  void *q = malloc_fast(size);
  if (q) memcpy(q, p, _bk_os_readable(p, size));
  return q;
}
