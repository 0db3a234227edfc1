/* A heap's pages: per size class a queue of pages that may have free
 * blocks (the first is the one allocated from, and the direct slots point
 * at it), the list of pages parked as full, and the frees of the heap's own
 * blocks that move pages between them. Owner thread only. */
#include "core/core.h"

/* Points the direct slots of a small class at the first page of its queue,
 * which alone of the class's pages carries PAGE_CURRENT. */
static void direct_update(heap_t *h, unsigned cls) {
  size_t size = _bk_class_size(cls);
  if (size > DIRECT_SIZE_MAX) return;
  page_t *pg = heap_queue_first(h, cls), *was = h->direct[size / 16];
  if (!pg) pg = &_bk_page_empty;
  if (was == pg) return;
  if (was != &_bk_page_empty) page_flags_set(was, (uint8_t)(was->flags & ~PAGE_CURRENT));
  if (pg != &_bk_page_empty) page_flags_set(pg, (uint8_t)(pg->flags | PAGE_CURRENT));
  size_t lo = cls == 1 ? 0 : _bk_class_size(cls - 1) / 16 + 1;
  for (size_t i = lo; i <= size / 16; i++) h->direct[i] = pg;
}

static size_t page_bytes(const page_t *pg) { return (size_t)1 << segment_of(pg)->page_shift; }

/* A page kept empty is in use again (or given back). */
static void page_unkeep(heap_t *h, page_t *pg) {
  if (!pg->idle_since_ms) return;
  pg->idle_since_ms = 0;
  h->kept_empty_bytes -= page_bytes(pg);
}

/* The class's first page may have changed: it is the one allocated from. */
static void first_changed(heap_t *h, unsigned cls) {
  page_t *pg = heap_queue_first(h, cls);
  if (pg) page_unkeep(h, pg);
  direct_update(h, cls);
}

void _bk_heap_queue_push_front(heap_t *h, page_t *pg) {
  list_push_front(&h->queues[pg->size_class], &pg->link);
  first_changed(h, pg->size_class);
}

void _bk_heap_queue_push(heap_t *h, page_t *pg) {
  list_push_back(&h->queues[pg->size_class], &pg->link);
  if (heap_is_current(h, pg)) first_changed(h, pg->size_class);
  else page_flags_set(pg, (uint8_t)(pg->flags & ~PAGE_CURRENT)); /* (an adopted page may have been current) */
}

void _bk_heap_queue_to_front(heap_t *h, page_t *pg) {
  list_t *q = &h->queues[pg->size_class];
  if (q->first == &pg->link) return;
  list_move_to_front(q, &pg->link);
  first_changed(h, pg->size_class);
}

void _bk_heap_page_to_full(heap_t *h, page_t *pg) {
  bool was_first = heap_is_current(h, pg);
  list_remove(&h->queues[pg->size_class], &pg->link);
  list_push_back(&h->full, &pg->link);
  page_flags_set(pg, (uint8_t)(pg->flags | PAGE_IN_FULL));
  if (was_first) first_changed(h, pg->size_class);
}

/* The page keeps DELAYED_USE: the next remote free, if one comes, takes
 * the delayed path once and sets DELAYED_NONE itself, and a page that
 * fills again needs no change (with many blocks live, pages go full and
 * back all the time: an exchange each way cost more than malloc itself in
 * bench/ring). */
void _bk_heap_page_unfull(heap_t *h, page_t *pg) {
  list_remove(&h->full, &pg->link);
  page_flags_set(pg, (uint8_t)(pg->flags & ~PAGE_IN_FULL));
  _bk_heap_queue_push(h, pg);
}

static void page_release(heap_t *h, page_t *pg) {
  page_unkeep(h, pg);
  list_remove(&h->queues[pg->size_class], &pg->link);
  _bk_segment_page_release(h, pg);
}

/* A page whose last block came back stays in its queue, its blocks on its
 * lists as they were freed, while the heap keeps under KEPT_EMPTY_BYTES of
 * such pages: a program that frees many blocks and then allocates as many
 * again (a phase of a solver, a batch of requests) takes the page as it
 * is. Given back to its segment, the page had its blocks threaded anew
 * when next used, a fifth of a loop that builds and frees 10 000 blocks
 * of 0-1 KiB (then 0.79x tcmalloc's speed). Large pages (one block or a
 * few) gain nothing. Nor does the secure library's for blocks of 1 KiB
 * or less: a kept page hands its blocks out in the order its owner freed
 * them, where a page threaded anew shuffles them a window at a time and
 * fetches each for writing as it goes, so the mallocs that follow find
 * their lines in the cache (fixed-size objects of 64 B: 81 -> 54 M/s
 * kept). Its larger blocks (hot pages, a few blocks each, lines enough
 * that the order matters little) are kept: given back, 2000 blocks of
 * 2-32 KiB built and freed over and over ran at 0.73x the release
 * library's speed, threading and initializing pages anew; kept, 0.87x.
 * Kept pages go back to their segments in a sweep
 * (_bk_heap_release_empty): once idle for half a purge delay, and all
 * before the heap takes a page from a new segment, so keeping them never
 * maps memory. */
void _bk_heap_page_emptied(heap_t *h, page_t *pg) {
  if (heap_is_current(h, pg) || pg->idle_since_ms) return; /* the page allocated from stays (and a kept one) */
  size_t bytes = page_bytes(pg);
  bool keepable = !BRISK_SECURE || (pg->flags & PAGE_HOT);
  if (keepable && segment_of(pg)->kind != SEG_LARGE && h->kept_empty_bytes + bytes <= KEPT_EMPTY_BYTES) {
    uint64_t now = _bk_os_now_ms();
    pg->idle_since_ms = now ? now : 1;
    h->kept_empty_bytes += bytes;
    return;
  }
  page_release(h, pg);
}

/* Gives back to their segments the heap's empty pages but the current
 * ones: kept pages idle since `kept_before` (0: none, UINT64_MAX: all),
 * and pages that other threads' frees emptied (collected here: the
 * blocks a producer's consumers freed while it slept). */
void _bk_heap_release_empty(heap_t *h, uint64_t kept_before) {
  for (unsigned cls = 1; cls < CLASS_COUNT; cls++) {
    page_t *first = heap_queue_first(h, cls), *next;
    for (page_t *pg = first ? LIST_NEXT(first, page_t, link) : NULL; pg; pg = next) {
      next = LIST_NEXT(pg, page_t, link);
      if (!pg->idle_since_ms) _bk_page_collect(pg);
      if (page_used(pg) == 0 && (!pg->idle_since_ms || pg->idle_since_ms < kept_before)) page_release(h, pg);
    }
  }
}

/* A block of h's own page, freed by h's thread (or handed over by another
 * thread through the delayed list). */
void _bk_heap_free_local(heap_t *h, page_t *pg, block_t *b) {
  BRISK_ASSERT(page_used(pg) > 0);
  hot_held_check(&h->hot[pg->size_class]);
  if (page_take_back(pg, b)) _bk_heap_page_alarm(h, pg);
}

/* A free left pg's blocks in use below its alarm (page_flags_set). */
void _bk_heap_page_alarm(heap_t *h, page_t *pg) {
  if (pg->flags & PAGE_IN_FULL) _bk_heap_page_unfull(h, pg);
  if (page_used(pg) == 0) _bk_heap_page_emptied(h, pg);
}

/* The same, from free's fast path, for its thread's block p: called with
 * p alone, the fast path keeps no copy of the page's address for it. */
void _bk_heap_block_alarm(void *p) {
  segment_t *seg = segment_base(p);
  _bk_heap_page_alarm(_bk_tls_heap, page_of(seg, p));
}

static bool delayed_link_ok(heap_t *h, const block_t *next) {
  page_t *pg = page_holding(next);
  return pg && atomic_load_explicit(&segment_of(next)->owner_uid, memory_order_relaxed) == h->uid;
}

/* The blocks other threads freed into h's full pages (remote_free.c). */
void _bk_heap_take_delayed(heap_t *h) {
  if (!atomic_load_explicit(&h->delayed_free, memory_order_relaxed)) return;
  block_t *b = atomic_exchange_explicit(&h->delayed_free, NULL, memory_order_acquire);
  while (b) {
    block_t *next = link_get(b);
    /* The list spans pages: its next block must be in a page of h's. */
    if (BRISK_SECURE && next && !delayed_link_ok(h, next)) _bk_secure_corrupted_link(b, next);
    page_t *pg = page_of(segment_of(b), b);
    /* A remote free woke the page: it goes back to its queue now, where
     * the frees that follow it (to its thread_free) are collected. Before
     * the free, which may empty the page and give its segment away (read
     * after it, the flags were another thread's: found by ThreadSanitizer
     * in CheckHeap.CleanAfterMultiThreadedStress). */
    if (pg->flags & PAGE_IN_FULL) _bk_heap_page_unfull(h, pg);
    _bk_heap_free_local(h, pg, b);
    b = next;
  }
}
