/* A thread heap's slow paths: finding a page with a free block when the
 * fast path found none, and the free of a block that free_fast did not
 * finish. Everything here runs on the heap's own thread. */
#include "core/fast_path.h"

/* ---- Allocation slow path ----------------------------------------------- */

/* Before a segment comes from the cache or the OS, abandoned segments are
 * adopted until one of the kind has a free page: the memory of exited
 * threads is used first (their live pages join this heap's queues), or a
 * program whose threads come and go strands a segment per thread and
 * kind. Bounded, so one allocation adopts a handful at most.
 * Only then: a heap that adopted a segment for every class it ran out of,
 * while it still had free pages of its own, took segments that the
 * threads starting beside it needed, and they mapped new ones (8 threads
 * replaced 200 times each mapped 232 MiB for 16 MiB live; adopting for
 * pages only: 128 MiB, and faster). */
#define ADOPT_PER_PAGE 8

/* Whether h has a free page of `kind` without taking a segment (the list
 * keeps segments with a free page first). */
static bool has_free_page(heap_t *h, unsigned kind) {
  segment_t *seg = LIST_FIRST(&h->segments[kind], segment_t, link);
  return seg && seg->free_page_mask;
}

static bool adopt_for_page(heap_t *h, unsigned kind) {
  bool adopted = false;
  for (int i = 0; i < ADOPT_PER_PAGE; i++) {
    if (has_free_page(h, kind) || !_bk_abandoned_adopt(h, kind)) break;
    adopted = true;
  }
  return adopted;
}

/* A page of class cls from the heap's queue with a free block (collecting
 * frees, parking full pages on the way), or NULL. */
static page_t *queued_page(heap_t *h, unsigned cls) {
  page_t *pg = heap_queue_first(h, cls);
  while (pg) {
    page_t *next = LIST_NEXT(pg, page_t, link);
    _bk_page_collect(pg);
    if (!pg->free && pg->capacity < pg->reserved) _bk_page_extend(pg);
    if (pg->free) {
      _bk_heap_queue_to_front(h, pg);
      return pg;
    }
    if (_bk_page_set_delayed(pg, DELAYED_USE, true)) {
      _bk_heap_page_to_full(h, pg);
      pg = next;
    }
    /* else remote frees arrived meanwhile: look at the page again */
  }
  return NULL;
}

/* A fresh page of class cls, from adopted segments first (whose live
 * pages join the queues: one of the class may serve), for a heap whose
 * queue had none with a free block. */
static page_t *fresh_page(heap_t *h, unsigned cls) {
  page_t *pg;
  unsigned kind = _bk_class_segment_kind(cls);
  /* Pages kept empty go back to their segments before a segment is taken. */
  if (h->kept_empty_bytes && !has_free_page(h, kind)) _bk_heap_release_empty(h, UINT64_MAX);
  /* Explicit heaps never adopt: destroying one would free others' blocks. */
  if (!h->is_explicit && adopt_for_page(h, kind) && (pg = queued_page(h, cls))) return pg;
  pg = _bk_segment_page_alloc(h, kind);
  if (!pg) return NULL;
  _bk_page_init(pg, segment_of(pg), cls, h);
  _bk_heap_queue_push_front(h, pg);
  return pg;
}

/* The purge timer is read every 64 entries of the slow path and of the
 * heartbeat; the clock every 8th, for the heap's stamp of activity
 * (transfer.c: at every 64th, a producer among 100 on 2 cores stamped
 * once in 0.6 s, seemed idle, and its consumers sent its blocks home:
 * xmalloc-test with 100 producers took 1.25x the time). */
static inline void heap_tick(heap_t *h) {
  if (likely((++h->slow_calls & 7) != 0)) return;
  if ((h->slow_calls & 63) == 0) _bk_purge_maybe(h); /* (it stamps too) */
  else PUBLISH(h->active_ms, _bk_os_now_ms());
}

block_t *_bk_heap_heartbeat(heap_t *h, block_t *b) {
  PUBLISH(h->active_ms, _bk_os_now_ms());
  PUBLISH(h->stat_requested, heap_requested(h));
  PUBLISH(h->beat_budget, HEAP_BEAT_BYTES);
  heap_tick(h);
  return b;
}

/* page_pop, the one way out of a large page's lists: a block handed out
 * is neither idle nor given back any more (segment.c). The size tells a
 * large class (the classes above MEDIUM_SIZE_MAX) without a load. */
static void *page_pop_slow(heap_t *h, page_t *pg, size_t size) {
  block_t *b = page_pop(h, pg, size);
  if (size > MEDIUM_SIZE_MAX) {
    segment_t *seg = segment_base(pg);
    uint64_t bit = (uint64_t)1 << ((size_t)((uint8_t *)b - pg->start) / pg->block_size);
    seg->blocks_free_seen &= ~bit;
    seg->blocks_purged &= ~bit;
  }
  return b;
}

/* The secure library leaves a page's one free block, the block freed last,
 * where it is, and takes another page (secure_last_freed_second): when no
 * page can be had (the heap's bound, the OS refusing memory), such a block
 * is handed out rather than none. The pages holding one are parked as full. */
static void *last_freed_block(heap_t *h, unsigned cls, size_t size) {
#if BRISK_SECURE && !BRISK_CHECKED
  for (page_t *pg = LIST_FIRST(&h->full, page_t, link); pg; pg = LIST_NEXT(pg, page_t, link)) {
    if (pg->size_class == cls && pg->local_free && !pg->free) {
      pg->free = pg->local_free;
      pg->local_free = NULL;
      return page_pop_slow(h, pg, size);
    }
  }
#else
  (void)h, (void)cls, (void)size;
#endif
  return NULL;
}

/* With `others`, blocks of other threads' pages may serve (the transfer
 * cache); else only the heap's own pages. */
static void *heap_malloc(heap_t *h, size_t size, bool others) {
  if (unlikely(h == &_bk_heap_empty)) {
    h = _bk_heap_get_initialized();
    if (!h) return NULL;
  }
  heap_tick(h);
  if (size > LARGE_SIZE_MAX) return _bk_huge_alloc(h, size, 0, false);
  unsigned cls = size_to_class(size);
  hot_held_check(&h->hot[cls]);
  list_node_t *first = h->queues[cls].first;
  page_t *pg = LIST_ENTRY(first, page_t, link);
  if (likely(first != NULL)) {
    /* The current page's other list is reused first: no atomics needed. */
    if (!pg->free) page_reuse_local(pg);
    if (likely(pg->free != NULL)) return page_pop_slow(h, pg, size);
  }
  /* Other threads' frees of the class (transfer.c): what the heap took of
   * them first, then its own pages, and before a fresh page another batch
   * of them. */
  others = others && !h->is_explicit;
  bool taken = others && transfer_ready(h, cls, size) != NULL;
  if (!taken) {
    _bk_heap_take_delayed(h);
    BRISK_ASSERT_FULL(list_is_consistent(&h->queues[cls]) && list_is_consistent(&h->full));
    if ((pg = queued_page(h, cls))) return page_pop_slow(h, pg, size);
  }
  void *b = others ? _bk_transfer_malloc(h, cls, size) : NULL;
  if (b) return b;
  if (!(pg = fresh_page(h, cls))) return last_freed_block(h, cls, size);
  return page_pop_slow(h, pg, size);
}

void *_bk_heap_malloc_generic(heap_t *h, size_t size) { return heap_malloc(h, size, true); }

void *_bk_heap_malloc_own_page(heap_t *h, size_t size) { return heap_malloc(h, size, false); }

/* (The page is found again here, not passed: free_fast would compute it
 * ahead of its own tests for this call, an instruction on every free.) */
void _bk_heap_free_generic(segment_t *seg, void *p) {
  if (seg->kind == SEG_HUGE) {
    /* free_fast sends here any pointer in a huge segment's first chunk,
     * also one past its mapping, which is not brisk's (see segment_of). */
    if ((uintptr_t)p - (uintptr_t)seg >= seg->mapped_size) return;
    /* (The secure library checked it before, out of line: secure.c.) */
    if (!BRISK_SECURE) _bk_huge_check("free", seg, p, false);
    _bk_huge_free(seg);
    return;
  }
  page_t *pg = page_of(seg, p);
  /* Only a page that handed out over-aligned blocks sees interior pointers
   * (the division is worth skipping on the remote-free path). Another
   * thread's page is read where its owner does not write (types.h). */
  heap_t *h = _bk_tls_heap;
  if (atomic_load_explicit(&seg->owner_uid, memory_order_relaxed) != h->uid) {
    block_t *b = page_has_aligned_for_others(pg) ? _bk_page_block_start(pg, p) : (block_t *)p;
    /* (A thread that only frees gets a heap for its batches.) */
    if (_bk_transfer_wants(seg, pg, h) && (h != &_bk_heap_empty || (h = _bk_heap_get_initialized())))
      _bk_transfer_free(h, page_class_for_others(pg), b);
    else _bk_page_free_remote(pg, b);
    return;
  }
  block_t *b = pg->flags & PAGE_HAS_ALIGNED ? _bk_page_block_start(pg, p) : (block_t *)p;
  if (!(pg->flags & PAGE_HOT) || !hot_push(h, &h->hot[pg->size_class], b, pg->flags & PAGE_BIG))
    _bk_heap_free_local(h, pg, b);
}
