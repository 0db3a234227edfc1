/* A heap's life: created for a thread (or by brisk_heap_new), listed in
 * the registry of live heaps, destroyed whole; its struct then waits in a
 * quarantine for reuse. A thread's heap ends in thread_exit.c. */
#include "core/core.h"

#include <string.h>

#include "ds/quarantine.h"

/* The registry lock guards `registry`, `spare_heaps` and exited_totals. */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static list_t registry;          /* live heaps */
static quarantine_t spare_heaps; /* structs of exited threads and destroyed heaps, for reuse */
static uint64_t exited_totals[4];
static _Atomic(uint64_t) next_uid = 1; /* relaxed: uniqueness needs only atomicity */
/* Relaxed: hints for thread_exit.c's purges. */
static _Atomic(size_t) live_heaps, live_thread_heaps;

size_t _bk_heaps_live(void) { return atomic_load_explicit(&live_heaps, memory_order_relaxed); }
size_t _bk_thread_heaps_live(void) { return atomic_load_explicit(&live_thread_heaps, memory_order_relaxed); }

/* Heap structs live in mappings never given back, so that a destroyed
 * heap's handle still reads a struct (marked dead, see HANDLE_QUARANTINE). */
static heap_t *heap_struct_alloc(void) {
  static uint8_t *chunk, *chunk_end;
  heap_t *h = LIST_ENTRY(quarantine_take(&spare_heaps, HANDLE_QUARANTINE), heap_t, registry_link);
  if (h) return h;
  size_t size = align_up(sizeof(heap_t), 64);
  if (!chunk || chunk + size > chunk_end) {
    size_t len = 64 * size;
    void *m = _bk_os_map_records(len);
    if (!m) return NULL;
    chunk = m;
    chunk_end = chunk + len;
  }
  h = (heap_t *)chunk;
  chunk += size;
  return h;
}

static void heap_reset_fields(heap_t *h) {
  for (size_t i = 0; i < DIRECT_SLOTS; i++) h->direct[i] = &_bk_page_empty;
  memset(h->queues, 0, sizeof h->queues);
  memset(&h->full, 0, sizeof h->full);
  memset(h->segments, 0, sizeof h->segments);
  h->stat_requested = h->stat_cache_hits = h->stat_cache_misses = 0;
  h->beat_budget = HEAP_BEAT_BYTES;
  atomic_store_explicit(&h->delayed_free, NULL, memory_order_relaxed);
  atomic_store_explicit(&h->mapped_bytes, 0, memory_order_relaxed);
  memset(&h->huge_blocks, 0, sizeof h->huge_blocks);
  _bk_hot_init(h);
  h->kept_empty_bytes = 0;
  h->uid = atomic_fetch_add_explicit(&next_uid, 1, memory_order_relaxed);
  PUBLISH(h->active_ms, _bk_os_now_ms());
}

/* A new heap in the registry (so purge passes and stats see it). */
heap_t *_bk_heap_create(bool is_explicit) {
  pthread_mutex_lock(&registry_lock);
  heap_t *h = heap_struct_alloc();
  if (h) {
    /* All but the stamp, which a remote free may be reading (owner_idle,
     * transfer.c: through a segment the struct's last heap owned), atomically
     * as it is written in heap_reset_fields. */
    size_t stamp = offsetof(heap_t, active_ms), after = stamp + sizeof h->active_ms;
    memset(h, 0, stamp);
    memset((char *)h + after, 0, offsetof(heap_t, hot_slots) - after);
    heap_reset_fields(h);
    h->is_explicit = is_explicit;
    if (is_explicit) h->magic = HEAP_MAGIC;
    h->owner_thread = pthread_self();
    pthread_mutex_init(&h->huge_lock, NULL);
    list_push_front(&registry, &h->registry_link);
    atomic_fetch_add_explicit(&live_heaps, 1, memory_order_relaxed);
    if (!is_explicit) atomic_fetch_add_explicit(&live_thread_heaps, 1, memory_order_relaxed);
  }
  pthread_mutex_unlock(&registry_lock);
  if (!h) errno = ENOMEM;
  return h;
}

void _bk_heap_exited_totals(uint64_t out[4]) {
  pthread_mutex_lock(&registry_lock);
  memcpy(out, exited_totals, sizeof exited_totals);
  pthread_mutex_unlock(&registry_lock);
}

/* Out of the registry; the struct waits in the quarantine for the next heap. */
void _bk_heap_unregister(heap_t *h) {
  pthread_mutex_lock(&registry_lock);
  exited_totals[0] += heap_requested(h);
  exited_totals[1] += h->stat_cache_hits;
  exited_totals[2] += h->stat_cache_misses;
  exited_totals[3] += !h->is_explicit;
  list_remove(&registry, &h->registry_link);
  atomic_fetch_sub_explicit(&live_heaps, 1, memory_order_relaxed);
  if (!h->is_explicit) atomic_fetch_sub_explicit(&live_thread_heaps, 1, memory_order_relaxed);
  h->magic = h->is_explicit ? HANDLE_DEAD : 0;
  quarantine_put(&spare_heaps, &h->registry_link);
  pthread_mutex_unlock(&registry_lock);
}

/* Drops every block of an explicit heap at once: its segments and huge
 * blocks go back to the caches whatever they hold. */
void _bk_heap_release_all(heap_t *h) {
  for (unsigned kind = 0; kind < PAGED_KINDS; kind++) {
    list_node_t *n;
    while ((n = list_pop_front(&h->segments[kind]))) _bk_segment_release(LIST_ENTRY(n, segment_t, link));
  }
  _bk_huge_release_heap_blocks(h);
  _bk_huge_purge_warm(h, 0, true);
  heap_reset_fields(h);
}

/* Gives back what this heap holds idle: pages that waited the purge delay
 * (all with force), the free blocks of its large pages that sat idle, and,
 * with force, its warm huge blocks. */
void _bk_heap_collect_idle(heap_t *h, uint64_t now, bool force) {
  for (unsigned kind = 0; kind < PAGED_KINDS; kind++)
    for (segment_t *seg = LIST_FIRST(&h->segments[kind], segment_t, link); seg;
         seg = LIST_NEXT(seg, segment_t, link))
      _bk_segment_purge_pages(h, seg, now, force);
  _bk_huge_purge_warm(h, now, force);
}

void _bk_heap_foreach(void (*fn)(heap_t *, void *), void *arg) {
  pthread_mutex_lock(&registry_lock);
  _bk_locks_held++;
  for (heap_t *h = LIST_FIRST(&registry, heap_t, registry_link); h; h = LIST_NEXT(h, heap_t, registry_link))
    fn(h, arg);
  _bk_locks_held--;
  pthread_mutex_unlock(&registry_lock);
}

/* fork: the registry, then each explicit heap's huge-block lock (the
 * registry keeps the list of heaps still while they are taken). */
void _bk_heap_fork_lock(void) {
  pthread_mutex_lock(&registry_lock);
  for (heap_t *h = LIST_FIRST(&registry, heap_t, registry_link); h; h = LIST_NEXT(h, heap_t, registry_link))
    if (h->is_explicit) pthread_mutex_lock(&h->huge_lock);
}

void _bk_heap_fork_unlock(void) {
  for (heap_t *h = LIST_FIRST(&registry, heap_t, registry_link); h; h = LIST_NEXT(h, heap_t, registry_link))
    if (h->is_explicit) pthread_mutex_unlock(&h->huge_lock);
  pthread_mutex_unlock(&registry_lock);
}

/* The thread's own pending work, for brisk_collect. */
void _bk_heap_collect_own(bool force) {
  heap_t *h = _bk_tls_heap;
  if (h == &_bk_heap_empty) return;
  _bk_transfer_flush_heap(h);
  _bk_heap_take_delayed(h);
  _bk_hot_flush(h);
  _bk_heap_release_empty(h, UINT64_MAX);
  _bk_heap_collect_idle(h, _bk_os_now_ms(), force);
}
