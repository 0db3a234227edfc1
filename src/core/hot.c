/* A thread's most recently freed blocks of the classes above the direct
 * sizes, kept per class in a LIFO list of the heap and handed out first.
 *
 * Blocks of these classes come 2 to 64 to a page, so with many blocks live a
 * class's frees land on many pages: without this list, malloc would take a
 * block that left the cache long ago from whichever page is current, and
 * walk cold pages to find one with room. A block on the hot list still
 * counts as used in its page (so the page cannot be released under it);
 * the list is bounded per class and per heap, and flushed back to the pages
 * when the heap goes idle, is walked, or ends. Never in the checked library,
 * whose frees must take effect at once. The secure library holds the block
 * freed last off the list until the next free (hot_push). */
#include "core/fast_path.h"

#define HOT_CLASS_BYTES ((size_t)128 * 1024) /* per class, but at least two blocks */
#define HOT_MAX_BLOCKS 64

bool _bk_hot_class(unsigned cls) { return !BRISK_CHECKED && _bk_class_size(cls) > DIRECT_SIZE_MAX; }

/* Every heap's hot lists start as this template, built once with the size
 * classes: a thread's heap is set up with a copy (building each heap's
 * limits itself, a division per class, was half the instructions of a
 * short thread's malloc, mimalloc-bench's mleak). */
static hot_list_t hot_template[CLASS_COUNT];

void _bk_hot_classes_init(void) {
  for (unsigned cls = 1; cls < CLASS_COUNT; cls++) {
    hot_list_t *hl = &hot_template[cls];
    size_t size = _bk_class_size(cls), n = HOT_CLASS_BYTES / size;
    if (n < 2) n = 2;
    hl->block_size = (uint32_t)size;
    hl->limit = !_bk_hot_class(cls) ? 0 : n > HOT_MAX_BLOCKS ? HOT_MAX_BLOCKS : (uint16_t)n;
  }
}

/* The push and pop are inline (fast_path.h). */
void _bk_hot_init(heap_t *h) {
  memcpy(h->hot, hot_template, sizeof h->hot);
  h->hot_bytes = 0;
}

/* Where the secure library holds hl's block freed last (hot_push), or NULL
 * in the libraries that hold none. */
static block_t **held_slot(hot_list_t *hl) {
#if BRISK_SECURE
  return &hl->held;
#else
  (void)hl;
  return NULL;
#endif
}

#if BRISK_SECURE
/* The secure library's free of the heap's own block of a hot class
 * (free_fast). */
void _bk_hot_free(heap_t *h, page_t *pg, block_t *b) {
  if (!hot_push(h, pg, b)) _bk_heap_free_local(h, pg, b);
}
#endif

/* Every hot block back to its page, as a free of the owner's. */
void _bk_hot_flush(heap_t *h) {
  if (!h->hot_bytes) return;
  for (unsigned cls = 1; cls < CLASS_COUNT; cls++) {
    hot_list_t *hl = &h->hot[cls];
    block_t **held = held_slot(hl);
    if (held && *held) { /* (counted as on the list: it goes with it) */
      hot_link(hl, *held);
      *held = NULL;
    }
    while (hl->head) {
      block_t *b = hot_unlink(h, hl);
      _bk_heap_free_local(h, page_of(segment_of(b), b), b);
    }
  }
}

/* Walks the hot list of class cls (the secure library's held block first),
 * checking that every link is the start of a block of that class in a page
 * of h's: returns the count, or
 * PAGE_LIST_OUTSIDE (with *bad the stray link) or PAGE_LIST_LOOPS. For
 * brisk_check_heap, on the heap's own thread. */
long _bk_hot_walk(heap_t *h, unsigned cls, const void **bad) {
  long n = 0;
  block_t **slot = held_slot(&h->hot[cls]);
  const block_t *held = slot ? *slot : NULL;
  for (const block_t *b = held ? held : h->hot[cls].head; b; b = b == held ? h->hot[cls].head : link_get(b)) {
    segment_t *seg = segment_of(b);
    page_t *pg = seg && seg->kind != SEG_HUGE &&
            atomic_load_explicit(&seg->owner_uid, memory_order_relaxed) == h->uid
        ? page_of(seg, b)
        : NULL;
    if (!pg || !pg->in_use || pg->size_class != cls || !page_has_block_at(pg, b)) {
      *bad = b;
      return PAGE_LIST_OUTSIDE;
    }
    if (++n > (long)h->hot[cls].count) return PAGE_LIST_LOOPS;
  }
  return n;
}
