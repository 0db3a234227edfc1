/* Fixed-size object pools (brisk_pool_*): slabs, the checked library's
 * checks, and the public API. The scheme is in pool.h; the thread caches
 * and the shared stack are in pool_cache.c. */
#include "extra/pool.h"

#include <string.h>

#include "ds/quarantine.h"

#define SLAB_MAGIC 0x42534c42u /* "BSLB" */
#define SLAB_BYTES ((size_t)64 * 1024)
#define SLAB_MIN_OBJECTS 16
#define CARVE_BATCH 256
#define POISON 0xDD

static quarantine_t quarantined_pools; /* checked library (under _bk_pools_lock) */
static list_t live_pools;              /* under _bk_pools_lock */
static _Atomic(uint64_t) next_pool_id = 1;

/* ---- Slabs -------------------------------------------------------------- */

/* Slabs are plain 16-aligned blocks (so a pointer's slab is its block's
 * start); objects start at the first aligned offset after the header. */
static size_t slab_header_size(size_t capacity, size_t align) {
  size_t bits = BRISK_CHECKED ? (capacity + 63) / 64 * sizeof(uint64_t) : 0;
  return align_up(sizeof(slab_t) + bits, BLOCK_ALIGN) + (align > BLOCK_ALIGN ? align - BLOCK_ALIGN : 0);
}

static slab_t *slab_of(const void *p) {
  if (!segment_of(p)) return NULL;
  slab_t *s = _bk_block_start_of(p);
  return s && s->magic == SLAB_MAGIC ? s : NULL;
}

/* Grants the cache a range of up to CARVE_BATCH fresh objects; pool->lock
 * held. The checked library poisons them, as if freed. */
static bool carve(brisk_pool_t *pool, pool_cache_t *c) {
  slab_t *s = pool->carving;
  if (!s || pool->carved == s->capacity) {
    size_t capacity = (pool->slab_bytes - slab_header_size(0, pool->alignment)) / pool->object_size;
    _bk_locks_held++;
    s = malloc_fast(pool->slab_bytes);
    _bk_locks_held--;
    if (!s) return false;
    size_t header = slab_header_size(capacity, pool->alignment);
    capacity = (pool->slab_bytes - header) / pool->object_size;
    memset(s, 0, sizeof(slab_t) + (BRISK_CHECKED ? (capacity + 63) / 64 * sizeof(uint64_t) : 0));
    s->magic = SLAB_MAGIC;
    s->capacity = (uint32_t)capacity;
    s->pool = pool;
    s->objects = (uint8_t *)align_up((uintptr_t)s + sizeof(slab_t) +
                                         (BRISK_CHECKED ? (capacity + 63) / 64 * sizeof(uint64_t) : 0),
                                     pool->alignment);
    s->next = pool->slabs;
    pool->slabs = s;
    pool->slab_count++;
    pool->capacity += capacity;
    pool->carving = s;
    pool->carved = 0;
  }
  uint32_t n = s->capacity - pool->carved;
  if (n > CARVE_BATCH) n = CARVE_BATCH;
  c->bump = s->objects + (size_t)pool->carved * pool->object_size;
  c->bump_end = c->bump + (size_t)n * pool->object_size;
  if (BRISK_CHECKED) memset(c->bump, POISON, (size_t)(c->bump_end - c->bump));
  pool->carved += n;
  return true;
}

/* The next object of a cache's list. In the secure library a link an
 * overflow or a write after free changed decodes to an address outside
 * brisk's memory, or off the alignment every object has, and aborts,
 * instead of handing that address out (or reading its link there). */
static inline block_t *pool_link_next(const block_t *b) {
  block_t *next = link_get(b);
  if (BRISK_SECURE && next && unlikely(((uintptr_t)next & (_Alignof(block_t) - 1)) || !segment_of(next)))
    _bk_secure_corrupted_link(b, next);
  return next;
}

/* The next object of a thread's cache: its alloc_list, else the objects
 * freed lately, taken whole; NULL when both are empty. */
static inline block_t *cache_pop(pool_cache_t *c) {
  block_t *b = c->alloc_list;
  if (unlikely(!b)) {
    if (!(b = c->free_list)) return NULL;
    c->free_list = NULL;
    c->free_count = 0;
  }
  block_t *next = pool_link_next(b);
  c->alloc_list = next;
  __builtin_prefetch(next); /* its link is the next pop's load (as in page_pop) */
  return b;
}

static inline void cache_push(pool_cache_t *c, block_t *b) {
  link_set(b, c->free_list);
  c->free_list = b;
  counter_add(&c->frees, 1);
  c->free_count++;
}

/* alloc_list and free_list are empty: a fresh object, else the shared
 * list, else a new range. */
static BRISK_NOINLINE block_t *alloc_slow(brisk_pool_t *pool, pool_cache_t *c) {
  if (c->bump < c->bump_end) {
    block_t *b = (block_t *)c->bump;
    c->bump += pool->object_size;
    return b;
  }
  block_t *shared = _bk_pool_shared_pop(pool);
  if (shared) {
    c->alloc_list = pool_link_next(shared);
    return shared;
  }
  pthread_mutex_lock(&pool->lock);
  bool ok = carve(pool, c);
  pthread_mutex_unlock(&pool->lock);
  if (!ok) return NULL;
  block_t *b = (block_t *)c->bump;
  c->bump += pool->object_size;
  return b;
}

/* ---- Checked library ---------------------------------------------------- */

static void check_free(brisk_pool_t *pool, void *p) {
  slab_t *s = slab_of(p);
  if (!s) CHECKED_FAIL("brisk_pool_free(%p, %p): pointer was not allocated from any pool", (void *)pool, p);
  if (s->pool != pool)
    CHECKED_FAIL("brisk_pool_free(%p, %p): pointer belongs to another pool (%p)", (void *)pool, p,
                 (void *)s->pool);
  size_t off = (size_t)((uint8_t *)p - s->objects);
  if ((uint8_t *)p < s->objects || off % pool->object_size || off / pool->object_size >= s->capacity)
    CHECKED_FAIL("brisk_pool_free(%p, %p): pointer is not the start of an object (objects of %zu bytes)",
                 (void *)pool, p, pool->object_size);
  size_t i = off / pool->object_size;
  uint64_t bit = (uint64_t)1 << (i % 64);
  if (!(atomic_fetch_and(&s->live_bits[i / 64], ~bit) & bit))
    CHECKED_FAIL("brisk_pool_free(%p, %p): double free (the object of %zu bytes is already free)", (void *)pool, p,
                 pool->object_size);
  memset((uint8_t *)p + sizeof(block_t), POISON, pool->object_size - sizeof(block_t));
}

static void check_alloc(brisk_pool_t *pool, void *p) {
  const uint8_t *bytes = p, *bad = first_byte_not(bytes + sizeof(block_t), bytes + pool->object_size, POISON);
  if (bad)
    CHECKED_FAIL("brisk_pool_alloc(%p): object %p of %zu bytes was written after it was freed (byte %zu is "
                 "0x%02x, not 0x%02x)",
                 (void *)pool, p, pool->object_size, (size_t)(bad - bytes), *bad, POISON);
  slab_t *s = slab_of(p);
  size_t i = (size_t)(bytes - s->objects) / pool->object_size;
  atomic_fetch_or(&s->live_bits[i / 64], (uint64_t)1 << (i % 64));
  memset(p, 0, sizeof(block_t));
}

/* ---- Public API --------------------------------------------------------- */

static inline bool pool_ok(const brisk_pool_t *pool, const char *fn) {
  return handle_ok(pool, offsetof(brisk_pool_t, magic), POOL_MAGIC, fn, "pool");
}

/* The checked library never frees a pool struct: a destroyed one waits in
 * quarantined_pools, marked dead, so a stale handle never reads freed memory. */
static brisk_pool_t *pool_struct_alloc(void) {
  brisk_pool_t *pool = NULL;
  if (BRISK_CHECKED) {
    pthread_mutex_lock(&_bk_pools_lock);
    pool = LIST_ENTRY(quarantine_take(&quarantined_pools, HANDLE_QUARANTINE), brisk_pool_t, pools_link);
    pthread_mutex_unlock(&_bk_pools_lock);
    if (pool) memset(pool, 0, sizeof *pool);
  }
  return pool ? pool : _bk_calloc_in(_bk_tls_heap, 1, sizeof *pool);
}

static void pool_struct_free(brisk_pool_t *pool) {
  pool->magic = HANDLE_DEAD;
  if (!BRISK_CHECKED) {
    free_fast(pool);
    return;
  }
  pthread_mutex_lock(&_bk_pools_lock);
  quarantine_put(&quarantined_pools, &pool->pools_link);
  pthread_mutex_unlock(&_bk_pools_lock);
}

brisk_pool_t *brisk_pool_new(size_t object_size, size_t alignment, size_t max_objects) {
  if (alignment == 0) alignment = BLOCK_ALIGN;
  if (!is_power_of_two(alignment) || alignment > SLAB_BYTES / 4 || object_size == 0 ||
      object_size > LARGE_SIZE_MAX) {
    errno = EINVAL;
    return NULL;
  }
  /* A free object holds the free-list link: it must be aligned for one. */
  if (alignment < _Alignof(block_t)) alignment = _Alignof(block_t);
  brisk_pool_t *pool = pool_struct_alloc();
  if (!pool) return NULL;
  pool->magic = POOL_MAGIC;
  pool->object_size = align_up(object_size < BLOCK_ALIGN ? BLOCK_ALIGN : object_size, alignment);
  pool->alignment = alignment;
  pool->max_objects = max_objects;
  pool->id = atomic_fetch_add(&next_pool_id, 1);
  size_t slab = SLAB_BYTES;
  while (slab / pool->object_size < SLAB_MIN_OBJECTS) slab *= 2;
  pool->slab_bytes = slab;
  pthread_mutex_init(&pool->lock, NULL);
  pthread_mutex_lock(&_bk_pools_lock);
  list_push_front(&live_pools, &pool->pools_link);
  pthread_mutex_unlock(&_bk_pools_lock);
  return pool;
}

void brisk_pool_destroy(brisk_pool_t *pool) {
  if (!pool) return;
  pool_ok(pool, "brisk_pool_destroy");
  pthread_mutex_lock(&_bk_pools_lock);
  for (pool_cache_t *c = LIST_FIRST(&pool->caches, pool_cache_t, pool_link); c;
       c = LIST_NEXT(c, pool_cache_t, pool_link)) {
    c->alloc_list = c->free_list = NULL;
    c->free_count = 0;
    c->bump = c->bump_end = NULL;
    atomic_store_explicit(&c->dead, 1, memory_order_release);
  }
  list_remove(&live_pools, &pool->pools_link);
  pthread_mutex_unlock(&_bk_pools_lock);
  slab_t *s = pool->slabs;
  while (s) {
    slab_t *next = s->next;
    s->magic = 0;
    free_fast(s);
    s = next;
  }
  while (pool->batch_chunks) {
    batch_chunk_t *next = pool->batch_chunks->next;
    free_fast(pool->batch_chunks);
    pool->batch_chunks = next;
  }
  pthread_mutex_destroy(&pool->lock);
  pool_struct_free(pool);
}

/* The allocation and free of a bounded pool, of a thread without its
 * cache yet, and of an empty cache, out of line: the common path below
 * then calls nothing but in tail position, and keeps no register on the
 * stack: an alloc-free pair went from 71 to 54 instructions (callgrind;
 * brisk's malloc-free pair is 50). */
static BRISK_NOINLINE void *pool_alloc_slow(brisk_pool_t *pool) {
  if (pool->max_objects && atomic_fetch_add_explicit(&pool->live, 1, memory_order_relaxed) >= pool->max_objects) {
    atomic_fetch_sub_explicit(&pool->live, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&pool->exhausted, 1, memory_order_relaxed);
    errno = ENOMEM;
    return NULL;
  }
  pool_cache_t *c = pool_cache_for(pool);
  if (unlikely(!c)) goto out_of_memory;
  block_t *b = cache_pop(c);
  if (!b && !(b = alloc_slow(pool, c))) goto out_of_memory;
  counter_add(&c->allocs, 1);
  if (BRISK_CHECKED) check_alloc(pool, b);
  return b;
out_of_memory:
  if (pool->max_objects) atomic_fetch_sub_explicit(&pool->live, 1, memory_order_relaxed);
  errno = ENOMEM;
  return NULL;
}

void *brisk_pool_alloc(brisk_pool_t *pool) {
  if (!pool_ok(pool, "brisk_pool_alloc")) return NULL;
  if (BRISK_CHECKED || pool->max_objects) return pool_alloc_slow(pool);
  tls_pool_slot_t *slot = pool_tls_slot(pool);
  pool_cache_t *c = slot->cache;
  block_t *b;
  if (unlikely(slot->id != pool->id) || unlikely(!(b = cache_pop(c)))) return pool_alloc_slow(pool);
  counter_add(&c->allocs, 1);
  return b;
}

static BRISK_NOINLINE void pool_free_slow(brisk_pool_t *pool, void *p) {
  if (BRISK_CHECKED) check_free(pool, p);
  pool_cache_t *c = pool_cache_for(pool);
  if (unlikely(!c)) { /* no memory for a cache: give it straight back */
    link_set(p, NULL);
    _bk_pool_shared_push(pool, p);
  } else {
    cache_push(c, p);
    if (unlikely(c->free_count >= FLUSH_AT)) _bk_pool_flush_free_list(pool, c);
  }
  if (pool->max_objects) atomic_fetch_sub_explicit(&pool->live, 1, memory_order_relaxed);
}

void brisk_pool_free(brisk_pool_t *pool, void *p) {
  if (!p || !pool_ok(pool, "brisk_pool_free")) return;
  if (BRISK_CHECKED || pool->max_objects) return pool_free_slow(pool, p);
  tls_pool_slot_t *slot = pool_tls_slot(pool);
  pool_cache_t *c = slot->cache;
  /* (A full free list takes the slow path before the push, which flushes
   * it after.) */
  if (unlikely(slot->id != pool->id) || unlikely(c->free_count >= FLUSH_AT - 1)) return pool_free_slow(pool, p);
  cache_push(c, p);
}

int brisk_pool_stats(const brisk_pool_t *cpool, brisk_pool_stats_t *out) {
  brisk_pool_t *pool = (brisk_pool_t *)cpool;
  if (out) memset(out, 0, sizeof *out);
  if (!pool_ok(pool, "brisk_pool_stats") || !out) return EINVAL;
  pthread_mutex_lock(&_bk_pools_lock);
  uint64_t allocs = pool->exited_allocs, frees = pool->exited_frees;
  for (pool_cache_t *c = LIST_FIRST(&pool->caches, pool_cache_t, pool_link); c;
       c = LIST_NEXT(c, pool_cache_t, pool_link)) {
    allocs += atomic_load_explicit(&c->allocs, memory_order_relaxed);
    frees += atomic_load_explicit(&c->frees, memory_order_relaxed);
  }
  pthread_mutex_unlock(&_bk_pools_lock);
  pthread_mutex_lock(&pool->lock);
  out->capacity = pool->capacity;
  out->bytes_held = pool->slab_count * pool->slab_bytes;
  pthread_mutex_unlock(&pool->lock);
  out->object_size = pool->object_size;
  out->alignment = pool->alignment;
  out->max_objects = pool->max_objects;
  out->allocs = allocs;
  out->frees = frees;
  out->live_objects = allocs >= frees ? (size_t)(allocs - frees) : 0;
  out->exhausted = atomic_load_explicit(&pool->exhausted, memory_order_relaxed);
  return 0;
}

/* fork: the registry of pools, then each pool's lock (carving holds a
 * pool's lock, never the registry). */
void _bk_pool_fork_lock(void) {
  pthread_mutex_lock(&_bk_pools_lock);
  for (brisk_pool_t *p = LIST_FIRST(&live_pools, brisk_pool_t, pools_link); p;
       p = LIST_NEXT(p, brisk_pool_t, pools_link))
    pthread_mutex_lock(&p->lock);
}

void _bk_pool_fork_unlock(void) {
  for (brisk_pool_t *p = LIST_FIRST(&live_pools, brisk_pool_t, pools_link); p;
       p = LIST_NEXT(p, brisk_pool_t, pools_link))
    pthread_mutex_unlock(&p->lock);
  pthread_mutex_unlock(&_bk_pools_lock);
}
