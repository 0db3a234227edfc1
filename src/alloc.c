/* The public allocation API. The fast paths are in fast_path.h. */
#include "fast_path.h"

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- malloc and free ---------------------------------------------------- */

void *brisk_malloc(size_t size) { return malloc_fast(size); }

void brisk_free(void *p) { free_fast(p); }

/* Everything free_fast does not finish: other threads' blocks, huge and
 * over-aligned blocks, pages with aligned blocks, NULL and foreign pointers. */
void _bk_free_slow(void *p) {
  segment_t *seg = segment_of(p);
  if (unlikely(seg == NULL)) {
    if (p) _bk_foreign_free(p);
    return;
  }
  _bk_heap_free_generic(seg, page_of(seg, p), p);
}

void brisk_free_sized(void *p, size_t size) {
  (void)size;
  brisk_free(p);
}

size_t brisk_usable_size(const void *p) {
  segment_t *seg = segment_of(p);
  if (!seg) return 0;
  if (seg->kind == SEG_HUGE) return (size_t)((const uint8_t *)seg + seg->mapped_size - (const uint8_t *)p);
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

int brisk_owns(const void *p) { return segment_of(p) != NULL; }

/* ---- calloc and realloc ------------------------------------------------- */

static heap_t *heap_ready(heap_t *h) {
  return h != &_bk_heap_empty ? h : _bk_heap_get_initialized();
}

void *_bk_calloc_in(heap_t *h, size_t count, size_t size) {
  size_t total;
  if (!size_product(count, size, &total)) return NULL;
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
  if (!p) return heap_malloc_fast(h, size);
  segment_t *seg = segment_of(p);
  if (unlikely(!seg)) return realloc_foreign(p, size);
  if (seg->kind == SEG_HUGE && size > LARGE_SIZE_MAX) {
    void *q = _bk_huge_realloc(seg, p, size);
    if (q) return q;
  }
  size_t usable = brisk_usable_size(p);
  if (size <= usable && size >= usable / 2) return p;
  void *q = heap_malloc_fast(h, size);
  if (!q) return NULL;
  memcpy(q, p, size < usable ? size : usable);
  free_fast(p);
  return q;
}

void *brisk_calloc(size_t count, size_t size) { return _bk_calloc_in(_bk_tls_heap, count, size); }
void *brisk_realloc(void *p, size_t size) { return _bk_realloc_in(_bk_tls_heap, p, size); }

void *brisk_reallocarray(void *p, size_t count, size_t size) {
  size_t total;
  if (!size_product(count, size, &total)) return NULL;
  return brisk_realloc(p, total);
}

/* ---- Aligned allocation ------------------------------------------------- */

/* align: a power of two. */
void *_bk_aligned_in(heap_t *h, size_t align, size_t size) {
  if (align <= BLOCK_ALIGN) return heap_malloc_fast(h, size);
  if (size > PTRDIFF_MAX) {
    errno = ENOMEM;
    return NULL;
  }
  if (size <= DIRECT_SIZE_MAX) {
    /* Often the next block of the size's own class is aligned already. */
    page_t *pg = h->direct[(size + 15) >> 4];
    block_t *b = pg->free;
    if (b && ((uintptr_t)b & (align - 1)) == 0) {
      pg->free = b->next;
      PUBLISH(pg->used, pg->used + 1);
      stat_add(&h->stat_requested, size);
      block_handed_out(b);
      return b;
    }
  }
  if (align <= MEDIUM_SIZE_MAX && size + align - 1 <= LARGE_SIZE_MAX) {
    uint8_t *b = _bk_heap_malloc_generic(h, size + align - 1);
    if (!b) return NULL;
    uint8_t *p = (uint8_t *)align_up((uintptr_t)b, align);
    if (p != b) {
      page_t *pg = page_of(segment_of(b), b);
      PUBLISH(pg->flags, (uint8_t)(pg->flags | PAGE_HAS_ALIGNED));
    }
    return p;
  }
  if (!(h = heap_ready(h))) return NULL;
  return _bk_huge_alloc(h, size, align, false);
}

void *brisk_aligned_alloc(size_t align, size_t size) {
  if (!is_power_of_two(align)) {
    errno = EINVAL;
    return NULL;
  }
  return _bk_aligned_in(_bk_tls_heap, align, size);
}

int brisk_posix_memalign(void **out, size_t align, size_t size) {
  if (!is_power_of_two(align) || align % sizeof(void *) != 0) return EINVAL;
  int saved = errno;
  void *p = _bk_aligned_in(_bk_tls_heap, align, size);
  errno = saved;
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}

/* glibc's memalign rounds a non-power-of-two alignment up. */
void *brisk_memalign(size_t align, size_t size) {
  if (align > ((size_t)1 << (sizeof(size_t) * 8 - 2))) {
    errno = EINVAL;
    return NULL;
  }
  if (!is_power_of_two(align)) align = align < 2 ? 1 : (size_t)1 << (64 - __builtin_clzl(align));
  return _bk_aligned_in(_bk_tls_heap, align, size);
}

/* ---- Foreign pointers --------------------------------------------------- *
 * The dynamic loader hands out memory from its own bootstrap allocator before
 * brisk is in place, and may later pass it to free or realloc. brisk never
 * writes to such memory: free leaves it alone, realloc copies out of it. */

void _bk_foreign_free(void *p) {
  if (_bk_opt.verbose) _bk_warning("free(%p): not allocated by brisk; left alone", p);
}

/* How many bytes from p, up to want, are readable: the block's true size is
 * unknown, so copy as much of the request as is mapped. */
size_t _bk_foreign_usable_size(const void *p, size_t want) {
  uintptr_t a = (uintptr_t)p, page = a & ~(uintptr_t)(OS_PAGE_SIZE - 1);
  size_t readable = 0;
  unsigned char vec;
  while (readable < want) {
    if (mincore((void *)page, OS_PAGE_SIZE, &vec) != 0) break;
    page += OS_PAGE_SIZE;
    readable = page - a;
  }
  return readable < want ? readable : want;
}

static void *realloc_foreign(void *p, size_t size) {
  if (_bk_opt.verbose) _bk_warning("realloc(%p): not allocated by brisk; copying it out", p);
  void *q = brisk_malloc(size);
  if (q) memcpy(q, p, _bk_foreign_usable_size(p, size));
  return q;
}
