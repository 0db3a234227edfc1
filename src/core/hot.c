/* A thread's most recently freed blocks, kept per class in a LIFO stack of
 * pointers in the heap and handed out first.
 *
 * With many blocks live, a class's frees land on many pages: without this
 * stack, malloc would take a block that left the cache long ago from the
 * class's current page, and wait for the line of its free-list link (in a
 * ring of 100 000 mixed blocks, a malloc's median was 4x jemalloc's, whose
 * thread cache is such a stack). A pointer stack hands a block out without
 * reading it: the program's first write to it is what meets the cache miss.
 * A block on the stack still counts as used in its page (so the page cannot
 * be released under it); the stack is bounded per class and (above the
 * direct sizes) per heap, and flushed back to the pages when the heap goes
 * idle, is walked, or ends. Never in the checked library, whose frees must
 * take effect at once; in the secure library only above the direct sizes
 * (its small blocks come from pages in a random order), and it holds the
 * block freed last off the stack until the next free (hot_push). */
#include "core/fast_path.h"

#define HOT_CLASS_BYTES ((size_t)128 * 1024) /* per class, but at least two blocks */
#define HOT_MAX_BLOCKS 64

static bool hot_class(unsigned cls) {
  return !BRISK_CHECKED && (!BRISK_SECURE || _bk_class_size(cls) > DIRECT_SIZE_MAX);
}

uint8_t _bk_hot_flags(unsigned cls) {
  if (!hot_class(cls)) return PAGE_COLD;
  return _bk_class_size(cls) > HOT_BOUNDED_MIN ? PAGE_HOT | PAGE_BIG : PAGE_HOT;
}

/* Every heap's hot lists start as this template, built once with the size
 * classes, its pointers as offsets into hot_slots: a thread's heap is set
 * up from it (building each heap's limits itself, a division per class,
 * was half the instructions of a short thread's malloc, mimalloc-bench's
 * mleak). */
static hot_list_t hot_template[CLASS_COUNT];

/* (Class 0, no class, has a stack with no room too: a free of a pointer
 * into a page never used reaches it, in the release library.) */
void _bk_hot_classes_init(void) {
  size_t slot = 0;
  for (unsigned cls = 0; cls < CLASS_COUNT; cls++) {
    hot_list_t *hl = &hot_template[cls];
    size_t size = cls ? _bk_class_size(cls) : 0, n = 0;
    if (cls && hot_class(cls)) {
      n = HOT_CLASS_BYTES / size;
      n = n < 2 ? 2 : n > HOT_MAX_BLOCKS ? HOT_MAX_BLOCKS : n;
    }
    hl->block_size = (uint32_t)size;
    slot += 1; /* the NULL below the stack */
    hl->base = hl->top = (block_t **)(uintptr_t)slot;
    slot += n;
    hl->end = (block_t **)(uintptr_t)slot;
  }
  if (slot > HOT_SLOTS) _bk_fatal("HOT_SLOTS (%d) is below the hot lists' limits (%zu)", HOT_SLOTS, slot);
}

/* The push and pop are inline (fast_path.h). */
void _bk_hot_init(heap_t *h) {
  for (unsigned cls = 0; cls < CLASS_COUNT; cls++) {
    const hot_list_t *t = &hot_template[cls];
    hot_list_t *hl = &h->hot[cls];
    *hl = *t;
    hl->base = hl->top = h->hot_slots + (uintptr_t)t->base;
    hl->end = h->hot_slots + (uintptr_t)t->end;
    hl->base[-1] = NULL;
  }
  for (size_t i = 0; i < DIRECT_SLOTS; i++) h->direct_hot[i] = &h->hot[_bk_direct_class[i]];
  h->hot_bytes = 0;
}

/* The blocks hl holds (for statistics, from any thread). */
size_t _bk_hot_count(const hot_list_t *hl) {
  size_t n = (size_t)(PEEK(hl->top) - hl->base);
#if BRISK_SECURE
  n += PEEK(hl->held) != NULL;
#endif
  return n;
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

/* A free of the owner's whose class's stack is full (free_fast). */
void _bk_free_to_page(void *p) { free_to_page(page_of(segment_base(p), p), p); }

#if BRISK_SECURE
/* The secure library's free of the heap's own block of a hot class
 * (free_fast). */
void _bk_hot_free(heap_t *h, page_t *pg, block_t *b) {
  if (!hot_push(h, &h->hot[pg->size_class], b, true)) _bk_heap_free_local(h, pg, b);
}
#endif

/* Every hot block back to its page, as a free of the owner's. */
void _bk_hot_flush(heap_t *h) {
  for (unsigned cls = 1; cls < CLASS_COUNT; cls++) {
    hot_list_t *hl = &h->hot[cls];
    block_t **held = held_slot(hl);
    if (held && *held) { /* (its page's: the stack may have no room) */
      block_t *b = *held;
      PUBLISH(*held, NULL);
      h->hot_bytes -= hl->block_size;
      _bk_heap_free_local(h, page_of(segment_of(b), b), b);
    }
    while (hl->top[-1]) {
      block_t *b = hot_unlink(h, hl, hl->block_size > HOT_BOUNDED_MIN);
      _bk_heap_free_local(h, page_of(segment_of(b), b), b);
    }
  }
}

/* Whether b is the start of a block of class cls in a page of h's. */
static bool is_own_block(heap_t *h, unsigned cls, const block_t *b) {
  segment_t *seg = segment_of(b);
  page_t *pg = seg && seg->kind != SEG_HUGE &&
          atomic_load_explicit(&seg->owner_uid, memory_order_relaxed) == h->uid
      ? page_of(seg, b)
      : NULL;
  return pg && pg->in_use && pg->size_class == cls && page_has_block_at(pg, b);
}

/* Walks the hot list of class cls (the secure library's held block first),
 * checking that every entry is the start of a block of that class in a page
 * of h's: returns the count, or PAGE_LIST_OUTSIDE (with *bad the stray
 * entry) or PAGE_LIST_LOOPS (more entries than the count). For
 * brisk_check_heap, on the heap's own thread. */
long _bk_hot_walk(heap_t *h, unsigned cls, const void **bad) {
  hot_list_t *hl = &h->hot[cls];
  block_t **held = held_slot(hl);
  long n = held && *held;
  if (n && !is_own_block(h, cls, *held)) {
    *bad = *held;
    return PAGE_LIST_OUTSIDE;
  }
  for (block_t **s = hl->top; s[-1]; s--) {
    if (!is_own_block(h, cls, s[-1])) {
      *bad = s[-1];
      return PAGE_LIST_OUTSIDE;
    }
    if (++n > (long)(hl->end - hl->base) + 1) return PAGE_LIST_LOOPS;
  }
  return n;
}
