/* Explicit heaps (brisk_heap_*): heaps that belong to the program instead
 * of a thread. They share the thread heaps' machinery; what differs is that
 * all their blocks can be dropped at once, they can be bounded, and they
 * never adopt other threads' memory. */
#include "extra/extra.h"

#include "core/fast_path.h"

/* NULL is EINVAL; the checked library also verifies that a heap is a live
 * one, and that only the creating thread allocates from it; destroy, reset
 * and the bound may come from any thread (the owner may have exited). */
static inline heap_t *heap_checked(const brisk_heap_t *bh, const char *fn, bool allocates) {
  if (!handle_ok(bh, offsetof(heap_t, magic), HEAP_MAGIC, fn, "heap")) return NULL;
  heap_t *h = (heap_t *)bh;
#if BRISK_CHECKED
  if (allocates && !pthread_equal(h->owner_thread, pthread_self()))
    CHECKED_FAIL("%s: heap %p used from a thread that does not own it (a heap allocates only on the "
                 "thread that created it)",
                 fn, (void *)bh);
#else
  (void)allocates;
#endif
  return h;
}

static inline heap_t *heap_for_alloc(brisk_heap_t *bh, const char *fn) { return heap_checked(bh, fn, true); }

brisk_heap_t *brisk_heap_new(void) {
  _bk_process_init();
  return (brisk_heap_t *)_bk_heap_create(true);
}

void brisk_heap_destroy(brisk_heap_t *bh) {
  if (!bh) return;
  heap_t *h = heap_checked(bh, "brisk_heap_destroy", false);
  if (BRISK_CHECKED) _bk_checked_heap_drop(h);
  _bk_heap_release_all(h);
  _bk_heap_unregister(h);
}

void brisk_heap_reset(brisk_heap_t *bh) {
  heap_t *h = heap_checked(bh, "brisk_heap_reset", false);
  if (!h) return;
  if (BRISK_CHECKED) _bk_checked_heap_drop(h);
  _bk_heap_release_all(h);
}

void brisk_heap_set_max_bytes(brisk_heap_t *bh, size_t max_bytes) {
  heap_t *h = heap_checked(bh, "brisk_heap_set_max_bytes", false);
  if (h) h->max_bytes = max_bytes;
}

size_t brisk_heap_held_bytes(const brisk_heap_t *bh) {
  heap_t *h = heap_checked(bh, "brisk_heap_held_bytes", false);
  return h ? atomic_load_explicit(&h->mapped_bytes, memory_order_relaxed) : 0;
}

void *brisk_heap_malloc(brisk_heap_t *bh, size_t size) {
  heap_t *h = heap_for_alloc(bh, "brisk_heap_malloc");
  return h ? heap_malloc_fast(h, size) : NULL;
}

void *brisk_heap_calloc(brisk_heap_t *bh, size_t count, size_t size) {
  heap_t *h = heap_for_alloc(bh, "brisk_heap_calloc");
  return h ? _bk_calloc_in(h, count, size) : NULL;
}

void *brisk_heap_realloc(brisk_heap_t *bh, void *p, size_t size) {
  heap_t *h = heap_for_alloc(bh, "brisk_heap_realloc");
  return h ? _bk_realloc_in(h, p, size) : NULL;
}

void *brisk_heap_aligned_alloc(brisk_heap_t *bh, size_t align, size_t size) {
  heap_t *h = heap_for_alloc(bh, "brisk_heap_aligned_alloc");
  return h && alignment_valid(align) ? _bk_aligned_in(h, align, size) : NULL;
}

void *brisk_heap_calloc_aligned(brisk_heap_t *bh, size_t count, size_t size, size_t align) {
  heap_t *h = heap_for_alloc(bh, "brisk_heap_calloc_aligned");
  return h ? _bk_calloc_aligned_in(h, count, size, align) : NULL;
}

void *brisk_heap_realloc_aligned(brisk_heap_t *bh, void *p, size_t align, size_t size) {
  heap_t *h = heap_for_alloc(bh, "brisk_heap_realloc_aligned");
  return h ? _bk_realloc_aligned_in(h, p, align, size) : NULL;
}
