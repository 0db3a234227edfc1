/* Explicit heaps (brisk_heap_*): heaps that belong to the program instead
 * of a thread. They share the thread heaps' machinery; what differs is that
 * all their blocks can be dropped at once, they can be bounded, and they
 * never adopt other threads' memory. */
#include "fast_path.h"

/* The checked library verifies that a heap is one, and that only the
 * creating thread allocates from it; destroy, reset and the bound may come
 * from any thread (the owner may have exited). */
static inline heap_t *heap_checked(brisk_heap_t *bh, const char *fn, bool allocates) {
  heap_t *h = (heap_t *)bh;
#if BRISK_CHECKED
  if (!h || !h->is_explicit) brisk_fatal("%s: %p is not a heap from brisk_heap_new", fn, (void *)bh);
  if (allocates && !pthread_equal(h->owner_thread, pthread_self()))
    brisk_fatal("%s: heap %p used from a thread that does not own it (a heap allocates only on the "
                "thread that created it)", fn, (void *)bh);
#else
  (void)fn;
  (void)allocates;
#endif
  return h;
}

static inline heap_t *heap_for_alloc(brisk_heap_t *bh, const char *fn) { return heap_checked(bh, fn, true); }

brisk_heap_t *brisk_heap_new(void) { return (brisk_heap_t *)heap_create(true); }

void brisk_heap_destroy(brisk_heap_t *bh) {
  if (!bh) return;
  heap_t *h = heap_checked(bh, "brisk_heap_destroy", false);
  heap_release_all(h);
  heap_retire_struct(h);
}

void brisk_heap_reset(brisk_heap_t *bh) { heap_release_all(heap_checked(bh, "brisk_heap_reset", false)); }

void brisk_heap_set_max_bytes(brisk_heap_t *bh, size_t max_bytes) {
  heap_checked(bh, "brisk_heap_set_max_bytes", false)->max_bytes = max_bytes;
}

size_t brisk_heap_held_bytes(const brisk_heap_t *bh) {
  return atomic_load_explicit(&((const heap_t *)bh)->mapped_bytes, memory_order_relaxed);
}

void *brisk_heap_malloc(brisk_heap_t *bh, size_t size) {
  return heap_malloc_fast(heap_for_alloc(bh, "brisk_heap_malloc"), size);
}

void *brisk_heap_calloc(brisk_heap_t *bh, size_t count, size_t size) {
  return calloc_in(heap_for_alloc(bh, "brisk_heap_calloc"), count, size);
}

void *brisk_heap_realloc(brisk_heap_t *bh, void *p, size_t size) {
  return realloc_in(heap_for_alloc(bh, "brisk_heap_realloc"), p, size);
}

void *brisk_heap_aligned_alloc(brisk_heap_t *bh, size_t align, size_t size) {
  heap_t *h = heap_for_alloc(bh, "brisk_heap_aligned_alloc");
  if (!is_power_of_two(align)) {
    errno = EINVAL;
    return NULL;
  }
  return aligned_in(h, align, size);
}
