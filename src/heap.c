/* Per-thread heaps: the page queues the allocation slow path works through,
 * a heap's start and end with its thread, and adoption of the segments that
 * exited threads left behind. */
#include "internal.h"

#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

BRISK_INTERNAL page_t _bk_page_empty;
BRISK_INTERNAL heap_t _bk_heap_empty = {
    .direct = {[0 ... DIRECT_SLOTS - 1] = &_bk_page_empty},
    .uid = UINT64_MAX, /* matches no segment, so frees take the remote path */
};
__thread heap_t *_bk_tls_heap __attribute__((tls_model("initial-exec"))) = &_bk_heap_empty;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static heap_t *registry;      /* live heaps */
static retired_list_t spare_heaps; /* structs of exited threads and destroyed heaps, for reuse */
static _Atomic(uint64_t) next_uid = 1;
static pthread_key_t thread_key;
static _Atomic(int) thread_key_ready;

/* ---- Page queues -------------------------------------------------------- */

/* Points the direct slots of a small class at the first page of its queue. */
static void direct_update(heap_t *h, unsigned cls) {
  size_t size = _bk_class_size(cls);
  if (size > DIRECT_SIZE_MAX) return;
  page_t *pg = h->queues[cls].first ? h->queues[cls].first : &_bk_page_empty;
  size_t lo = cls == 1 ? 0 : _bk_class_size(cls - 1) / 16 + 1;
  for (size_t i = lo; i <= size / 16; i++) h->direct[i] = pg;
}

static void queue_remove(page_queue_t *q, page_t *pg) {
  if (pg->prev) pg->prev->next = pg->next; else q->first = pg->next;
  if (pg->next) pg->next->prev = pg->prev; else q->last = pg->prev;
  pg->next = pg->prev = NULL;
}

static void queue_push_front(page_queue_t *q, page_t *pg) {
  pg->prev = NULL;
  pg->next = q->first;
  if (q->first) q->first->prev = pg; else q->last = pg;
  q->first = pg;
}

static void queue_push_back(page_queue_t *q, page_t *pg) {
  pg->next = NULL;
  pg->prev = q->last;
  if (q->last) q->last->next = pg; else q->first = pg;
  q->last = pg;
}

void _bk_heap_queue_push(heap_t *h, page_t *pg) {
  queue_push_back(&h->queues[pg->size_class], pg);
  if (h->queues[pg->size_class].first == pg) direct_update(h, pg->size_class);
}

static void queue_to_front(heap_t *h, page_t *pg) {
  page_queue_t *q = &h->queues[pg->size_class];
  if (q->first == pg) return;
  queue_remove(q, pg);
  queue_push_front(q, pg);
  direct_update(h, pg->size_class);
}

static void page_to_full(heap_t *h, page_t *pg) {
  page_queue_t *q = &h->queues[pg->size_class];
  bool was_first = q->first == pg;
  queue_remove(q, pg);
  queue_push_back(&h->full, pg);
  PUBLISH(pg->flags, (uint8_t)(pg->flags | PAGE_IN_FULL));
  if (was_first) direct_update(h, pg->size_class);
}

static void page_unfull(heap_t *h, page_t *pg) {
  queue_remove(&h->full, pg);
  PUBLISH(pg->flags, (uint8_t)(pg->flags & ~PAGE_IN_FULL));
  _bk_page_set_delayed(pg, DELAYED_NONE, false);
  _bk_heap_queue_push(h, pg);
}

void _bk_heap_page_emptied(heap_t *h, page_t *pg) {
  page_queue_t *q = &h->queues[pg->size_class];
  if (q->first == pg) return; /* the page being allocated from stays */
  queue_remove(q, pg);
  _bk_segment_page_retire(h, pg);
}

/* A block of h's own page, freed by h's thread (or handed over by another
 * thread through the delayed list). */
static void free_local(heap_t *h, page_t *pg, block_t *b) {
  b->next = pg->local_free;
  pg->local_free = b;
  PUBLISH(pg->used, pg->used - 1);
  if (pg->flags & PAGE_IN_FULL) page_unfull(h, pg);
  if (pg->used == 0) _bk_heap_page_emptied(h, pg);
}

static void delayed_free_process(heap_t *h) {
  if (!atomic_load_explicit(&h->delayed_free, memory_order_relaxed)) return;
  block_t *b = atomic_exchange_explicit(&h->delayed_free, NULL, memory_order_acquire);
  while (b) {
    block_t *next = b->next;
    segment_t *seg = segment_of(b);
    free_local(h, page_of(seg, b), b);
    b = next;
  }
}

/* ---- Adoption of abandoned segments ------------------------------------- */

static bool adopt_one(heap_t *h) {
  segment_t *seg = _bk_segment_abandoned_pop();
  if (!seg) return false;
  atomic_store_explicit(&seg->owner_uid, h->uid, memory_order_release);
  PUBLISH(seg->state, SEG_STATE_OWNED);
  uint32_t live = _bk_segment_collect_pages(seg, h);
  if (live == 0 && h->segments[seg->kind]) {
    _bk_segment_release(seg);
    return true;
  }
  /* In front: its free pages are the next to use. */
  seg->prev = NULL;
  seg->next = h->segments[seg->kind];
  if (seg->next) seg->next->prev = seg;
  h->segments[seg->kind] = seg;
  return true;
}

/* ---- Allocation slow path ----------------------------------------------- */

/* Finds a page of class cls with a free block: the queue first (collecting
 * frees, parking full pages), then adopted segments, then a fresh page. */
static page_t *find_page(heap_t *h, unsigned cls) {
  for (int attempt = 0;; attempt++) {
    page_t *pg = h->queues[cls].first;
    while (pg) {
      page_t *next = pg->next;
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
    if (attempt > 0 || h->is_explicit || !adopt_one(h)) break;
  }
  page_t *pg = _bk_segment_page_alloc(h, _bk_class_segment_kind(cls));
  if (!pg) return NULL;
  _bk_page_init(pg, segment_of(pg), cls, h);
  queue_push_front(&h->queues[cls], pg);
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
  page_t *pg = h->queues[cls].first;
  if (likely(pg != NULL)) {
    /* The current page's own frees are reused first: no atomics needed. */
    if (!pg->free) {
      pg->free = pg->local_free;
      pg->local_free = NULL;
    }
    if (likely(pg->free != NULL)) goto pop;
  }
  delayed_free_process(h);
  pg = find_page(h, cls);
  if (!pg) return NULL;
pop:;
  block_t *b = pg->free;
  pg->free = b->next;
  PUBLISH(pg->used, pg->used + 1);
  stat_add(&h->stat_requested, size);
  block_handed_out(b);
  return b;
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
  else _bk_page_free_remote(seg, pg, b);
}

/* ---- Heap lifetime ------------------------------------------------------ */

/* Heap structs live in mappings never given back, so that a destroyed
 * heap's handle still reads a struct (marked dead, see HANDLE_QUARANTINE). */
static heap_t *heap_struct_alloc(void) {
  static uint8_t *chunk, *chunk_end;
  heap_t *h = retired_take(&spare_heaps, offsetof(heap_t, next_heap));
  if (h) return h;
  size_t size = align_up(sizeof(heap_t), 64);
  if (!chunk || chunk + size > chunk_end) {
    size_t len = 64 * size;
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return NULL;
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
  atomic_store_explicit(&h->delayed_free, NULL, memory_order_relaxed);
  atomic_store_explicit(&h->mapped_bytes, 0, memory_order_relaxed);
  h->huge_list = NULL;
  h->uid = atomic_fetch_add_explicit(&next_uid, 1, memory_order_relaxed);
}

/* A new heap in the registry (so purge passes and stats see it). */
heap_t *_bk_heap_create(bool is_explicit) {
  _bk_process_init();
  pthread_mutex_lock(&registry_lock);
  heap_t *h = heap_struct_alloc();
  if (h) {
    memset(h, 0, sizeof *h);
    heap_reset_fields(h);
    h->is_explicit = is_explicit;
    if (is_explicit) h->magic = HEAP_MAGIC;
    h->owner_thread = pthread_self();
    pthread_mutex_init(&h->huge_lock, NULL);
    h->next_heap = registry;
    if (registry) registry->prev_heap = h;
    registry = h;
  }
  pthread_mutex_unlock(&registry_lock);
  if (!h) errno = ENOMEM;
  return h;
}

/* Counters of heaps gone: requested, cache hits, cache misses, exits. */
static uint64_t retired_stats[4];

void _bk_heap_stats_retired(uint64_t out[4]) {
  pthread_mutex_lock(&registry_lock);
  memcpy(out, retired_stats, sizeof retired_stats);
  pthread_mutex_unlock(&registry_lock);
}

/* Out of the registry; the struct is kept for the next heap. */
void _bk_heap_retire_struct(heap_t *h) {
  pthread_mutex_lock(&registry_lock);
  retired_stats[0] += h->stat_requested;
  retired_stats[1] += h->stat_cache_hits;
  retired_stats[2] += h->stat_cache_misses;
  retired_stats[3] += !h->is_explicit;
  if (h->prev_heap) h->prev_heap->next_heap = h->next_heap; else registry = h->next_heap;
  if (h->next_heap) h->next_heap->prev_heap = h->prev_heap;
  h->prev_heap = NULL;
  h->magic = h->is_explicit ? HANDLE_DEAD : 0;
  retired_put(&spare_heaps, h, offsetof(heap_t, next_heap));
  pthread_mutex_unlock(&registry_lock);
}

/* Drops every block of an explicit heap at once: its segments and huge
 * blocks go back to the caches whatever they hold. */
void _bk_heap_release_all(heap_t *h) {
  for (unsigned kind = 0; kind < PAGED_KINDS; kind++) {
    segment_t *seg = h->segments[kind];
    while (seg) {
      segment_t *next = seg->next;
      seg->next = seg->prev = NULL;
      _bk_segment_release(seg);
      seg = next;
    }
  }
  _bk_huge_release_heap_blocks(h);
  _bk_huge_flush_thread_cache(h, 0, true);
  heap_reset_fields(h);
}

bool _bk_heap_may_map(heap_t *h, size_t bytes) {
  if (!h->max_bytes) return true;
  if (atomic_load_explicit(&h->mapped_bytes, memory_order_relaxed) + bytes <= h->max_bytes) return true;
  errno = ENOMEM;
  return false;
}

heap_t *_bk_heap_get_initialized(void) {
  heap_t *h = _bk_tls_heap;
  if (h != &_bk_heap_empty) return h;
  h = _bk_heap_create(false);
  if (!h) return NULL;
  _bk_tls_heap = h;
  if (atomic_load_explicit(&thread_key_ready, memory_order_acquire)) pthread_setspecific(thread_key, h);
  return h;
}

/* Called once per process (before or from the first allocation). */
void _bk_heap_process_init(void) {
  if (pthread_key_create(&thread_key, _bk_heap_thread_done) == 0)
    atomic_store_explicit(&thread_key_ready, 1, memory_order_release);
}

static void set_pages_never_delayed(heap_t *h) {
  for (unsigned kind = 0; kind < PAGED_KINDS; kind++)
    for (segment_t *seg = h->segments[kind]; seg; seg = seg->next)
      for (uint32_t i = 0; i < seg->page_count; i++)
        if (seg->pages[i].in_use) _bk_page_set_delayed(&seg->pages[i], DELAYED_NEVER, false);
}

/* Thread exit: pages still holding blocks go with their segments to the
 * abandoned list; everything empty goes back to the caches. */
void _bk_heap_thread_done(void *value) {
  heap_t *h = value ? (heap_t *)value : _bk_tls_heap;
  if (h == &_bk_heap_empty) return;
  _bk_tls_heap = h; /* frees below must see the heap as local */
  _bk_pool_thread_exit();
  delayed_free_process(h);
  /* Waits out remote threads mid-way through a delayed free; after this no
   * remote thread reads this heap again. */
  set_pages_never_delayed(h);
  delayed_free_process(h);
  for (unsigned kind = 0; kind < PAGED_KINDS; kind++) {
    segment_t *seg = h->segments[kind];
    while (seg) {
      segment_t *next = seg->next;
      seg->next = seg->prev = NULL;
      if (_bk_segment_collect_pages(seg, NULL) == 0) _bk_segment_release(seg);
      else _bk_segment_abandon(seg);
      seg = next;
    }
    h->segments[kind] = NULL;
  }
  _bk_huge_flush_thread_cache(h, 0, true);
  _bk_tls_heap = &_bk_heap_empty;
  _bk_heap_retire_struct(h);
  _bk_purge_tick(_bk_os_now_ms());
}

/* Gives back what this heap holds idle: pages that waited the purge delay
 * (all with force) and, with force, its warm huge blocks. */
void _bk_heap_collect_caches(heap_t *h, uint64_t now, bool force) {
  for (unsigned kind = 0; kind < PAGED_KINDS; kind++)
    for (segment_t *seg = h->segments[kind]; seg; seg = seg->next) _bk_segment_purge_pages(seg, now, force);
  _bk_huge_flush_thread_cache(h, now, force);
}

void _bk_heap_foreach(void (*fn)(heap_t *, void *), void *arg) {
  pthread_mutex_lock(&registry_lock);
  _bk_locks_held++;
  for (heap_t *h = registry; h; h = h->next_heap) fn(h, arg);
  _bk_locks_held--;
  pthread_mutex_unlock(&registry_lock);
}

/* fork: the registry, then each explicit heap's huge-block lock (the
 * registry keeps the list of heaps still while they are taken). */
void _bk_heap_fork_lock(void) {
  pthread_mutex_lock(&registry_lock);
  for (heap_t *h = registry; h; h = h->next_heap)
    if (h->is_explicit) pthread_mutex_lock(&h->huge_lock);
}

void _bk_heap_fork_unlock(void) {
  for (heap_t *h = registry; h; h = h->next_heap)
    if (h->is_explicit) pthread_mutex_unlock(&h->huge_lock);
  pthread_mutex_unlock(&registry_lock);
}

/* The thread's own pending work, for brisk_collect. */
void _bk_heap_collect_own(bool force) {
  heap_t *h = _bk_tls_heap;
  if (h == &_bk_heap_empty) return;
  delayed_free_process(h);
  _bk_heap_collect_caches(h, _bk_os_now_ms(), force);
}
