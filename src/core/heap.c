/* A thread heap's slow paths: the page queues the allocation slow path
 * works through, and the free of a block that free_fast did not finish.
 * Everything here runs on the heap's own thread. */
#include "core/fast_path.h"

BRISK_INTERNAL page_t _bk_page_empty;
BRISK_INTERNAL heap_t _bk_heap_empty = {
    .direct = {[0 ... DIRECT_SLOTS - 1] = &_bk_page_empty},
    .uid = UINT64_MAX, /* matches no segment, so frees take the remote path */
};
__thread heap_t *_bk_tls_heap __attribute__((tls_model("initial-exec"))) = &_bk_heap_empty;

/* ---- Page queues -------------------------------------------------------- */

static page_t *queue_first(heap_t *h, unsigned cls) { return LIST_FIRST(&h->queues[cls], page_t, link); }

/* Points the direct slots of a small class at the first page of its queue. */
static void direct_update(heap_t *h, unsigned cls) {
  size_t size = _bk_class_size(cls);
  if (size > DIRECT_SIZE_MAX) return;
  page_t *pg = queue_first(h, cls);
  if (!pg) pg = &_bk_page_empty;
  size_t lo = cls == 1 ? 0 : _bk_class_size(cls - 1) / 16 + 1;
  for (size_t i = lo; i <= size / 16; i++) h->direct[i] = pg;
}

void _bk_heap_queue_push(heap_t *h, page_t *pg) {
  list_push_back(&h->queues[pg->size_class], &pg->link);
  if (queue_first(h, pg->size_class) == pg) direct_update(h, pg->size_class);
}

static void queue_to_front(heap_t *h, page_t *pg) {
  list_t *q = &h->queues[pg->size_class];
  if (q->first == &pg->link) return;
  list_move_to_front(q, &pg->link);
  direct_update(h, pg->size_class);
}

static void page_to_full(heap_t *h, page_t *pg) {
  bool was_first = queue_first(h, pg->size_class) == pg;
  list_remove(&h->queues[pg->size_class], &pg->link);
  list_push_back(&h->full, &pg->link);
  PUBLISH(pg->flags, (uint8_t)(pg->flags | PAGE_IN_FULL));
  if (was_first) direct_update(h, pg->size_class);
}

static void page_unfull(heap_t *h, page_t *pg) {
  list_remove(&h->full, &pg->link);
  PUBLISH(pg->flags, (uint8_t)(pg->flags & ~PAGE_IN_FULL));
  _bk_page_set_delayed(pg, DELAYED_NONE, false);
  _bk_heap_queue_push(h, pg);
}

void _bk_heap_page_emptied(heap_t *h, page_t *pg) {
  if (queue_first(h, pg->size_class) == pg) return; /* the page being allocated from stays */
  list_remove(&h->queues[pg->size_class], &pg->link);
  _bk_segment_page_release(h, pg);
}

/* A block of h's own page, freed by h's thread (or handed over by another
 * thread through the delayed list). */
static void free_local(heap_t *h, page_t *pg, block_t *b) {
  b->next = pg->local_free;
  pg->local_free = b;
  BRISK_ASSERT(pg->used > 0);
  PUBLISH(pg->used, pg->used - 1);
  if (pg->flags & PAGE_IN_FULL) page_unfull(h, pg);
  if (pg->used == 0) _bk_heap_page_emptied(h, pg);
}

/* The blocks other threads freed into h's full pages (remote_free.c). */
void _bk_heap_take_delayed(heap_t *h) {
  if (!atomic_load_explicit(&h->delayed_free, memory_order_relaxed)) return;
  block_t *b = atomic_exchange_explicit(&h->delayed_free, NULL, memory_order_acquire);
  while (b) {
    block_t *next = b->next;
    segment_t *seg = segment_of(b);
    free_local(h, page_of(seg, b), b);
    b = next;
  }
}

/* ---- Allocation slow path ----------------------------------------------- */

/* Finds a page of class cls with a free block: the queue first (collecting
 * frees, parking full pages), then adopted segments, then a fresh page. */
static page_t *find_page(heap_t *h, unsigned cls) {
  for (int attempt = 0;; attempt++) {
    page_t *pg = queue_first(h, cls);
    while (pg) {
      page_t *next = LIST_NEXT(pg, page_t, link);
      _bk_page_collect(pg);
      if (!pg->free && pg->capacity < pg->reserved) _bk_page_extend(pg);
      if (pg->free) {
        queue_to_front(h, pg);
        return pg;
      }
      if (_bk_page_set_delayed(pg, DELAYED_USE, true)) {
        page_to_full(h, pg);
        pg = next;
      }
      /* else remote frees arrived meanwhile: look at the page again */
    }
    /* Explicit heaps never adopt: destroying one would free others' blocks. */
    if (attempt > 0 || h->is_explicit || !_bk_abandoned_adopt(h)) break;
  }
  page_t *pg = _bk_segment_page_alloc(h, _bk_class_segment_kind(cls));
  if (!pg) return NULL;
  _bk_page_init(pg, segment_of(pg), cls, h);
  list_push_front(&h->queues[cls], &pg->link);
  direct_update(h, cls);
  return pg;
}

void *_bk_heap_malloc_generic(heap_t *h, size_t size) {
  if (unlikely(h == &_bk_heap_empty)) {
    h = _bk_heap_get_initialized();
    if (!h) return NULL;
  }
  /* Counted on every entry: a program that allocates and frees one size
   * comes here once per page's worth of blocks, and must purge too. */
  if (unlikely((++h->slow_calls & 63) == 0)) _bk_purge_maybe(h);
  if (size > LARGE_SIZE_MAX) return _bk_huge_alloc(h, size, 0, false);
  unsigned cls = size_to_class(size);
  page_t *pg = queue_first(h, cls);
  if (likely(pg != NULL)) {
    /* The current page's own frees are reused first: no atomics needed. */
    if (!pg->free) {
      pg->free = pg->local_free;
      pg->local_free = NULL;
    }
    if (likely(pg->free != NULL)) return page_pop(h, pg, size);
  }
  _bk_heap_take_delayed(h);
  pg = find_page(h, cls);
  if (!pg) return NULL;
  return page_pop(h, pg, size);
}

void _bk_heap_free_generic(segment_t *seg, page_t *pg, void *p) {
  if (seg->kind == SEG_HUGE) {
    _bk_huge_free(seg);
    return;
  }
  /* Only a page that handed out over-aligned blocks sees interior pointers
   * (the division is worth skipping on the remote-free path). */
  block_t *b = PEEK(pg->flags) & PAGE_HAS_ALIGNED ? _bk_page_block_start(pg, p) : (block_t *)p;
  heap_t *h = _bk_tls_heap;
  if (atomic_load_explicit(&seg->owner_uid, memory_order_relaxed) == h->uid) free_local(h, pg, b);
  else _bk_page_free_remote(pg, b);
}
