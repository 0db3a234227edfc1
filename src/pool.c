/* Fixed-size object pools (brisk_pool_*).
 *
 * Objects are carved from slabs (ordinary brisk blocks). Each thread keeps
 * its own cache per pool, used with no lock and no atomic: allocation pops
 * `alloc_list`, free pushes `free_list`; when alloc_list runs dry it takes
 * free_list whole, then bumps through a range of fresh objects granted from
 * a slab. Every FLUSH_AT frees, free_list goes whole to the pool's shared
 * stack of batches; a dry cache takes one batch. The stack is lock-free
 * (tagged pointers against ABA) and holds small batch records of brisk's
 * own, never the objects' memory, so no thread ever reads an object another
 * thread may be using. Every step is O(1), and no thread takes more than a
 * batch of what others gave back. Only a bounded pool counts live objects
 * atomically, to enforce its bound. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define SLAB_MAGIC 0x42534c42u /* "BSLB" */
#define SLAB_BYTES ((size_t)64 * 1024)
#define SLAB_MIN_OBJECTS 16
#define CARVE_BATCH 256
#define FLUSH_AT 256
#define POISON 0xDD
#define TLS_POOL_SLOTS 8

typedef struct pool_cache pool_cache_t;

/* A chain of free objects on a pool's shared stack. */
typedef struct batch {
  block_t *first;
  _Atomic(struct batch *) next; /* read by poppers that may lose the race */
} batch_t;

#define BATCHES_PER_CHUNK 64
typedef struct batch_chunk {
  struct batch_chunk *next;
  batch_t batch[BATCHES_PER_CHUNK];
} batch_chunk_t;

typedef struct slab {
  uint32_t magic;
  uint32_t capacity;
  struct brisk_pool *pool;
  struct slab *next;
  uint8_t *objects;
  _Atomic(uint64_t) live_bits[]; /* checked library: which objects are live */
} slab_t;

struct brisk_pool {
  uint32_t magic;
  size_t object_size, alignment, max_objects;
  uint64_t id;
  _Atomic(uint64_t) full_batches;  /* tagged stacks of batch_t */
  _Atomic(uint64_t) spare_batches;
  batch_chunk_t *batch_chunks;     /* under lock; freed with the pool */
  _Atomic(size_t) live;          /* bounded pools only */
  _Atomic(uint64_t) exhausted;
  pthread_mutex_t lock;          /* slabs and carving */
  slab_t *slabs, *carving;
  size_t slab_bytes, slab_count, capacity;
  uint32_t carved;               /* objects carved from `carving` */
  pool_cache_t *caches;          /* every thread's cache (under pools_lock) */
  uint64_t retired_allocs, retired_frees; /* of caches gone with their thread */
  struct brisk_pool *retired_next; /* checked library: destroyed, awaiting reuse */
  struct brisk_pool *next_pool, *prev_pool; /* live pools (under pools_lock), for fork */
};

struct pool_cache {
  block_t *alloc_list;
  block_t *free_list;
  uint32_t free_count;
  uint8_t *bump, *bump_end;        /* fresh objects granted from a slab */
  _Atomic(uint64_t) allocs, frees; /* written by the owner, read by stats */
  uint64_t pool_id;
  struct brisk_pool *pool;
  _Atomic(int) dead;               /* its pool was destroyed */
  pool_cache_t *pool_next, *pool_prev, *thread_next;
};

typedef struct tls_pool_slot { uint64_t id; pool_cache_t *cache; } tls_pool_slot_t;

static __thread tls_pool_slot_t tls_slots[TLS_POOL_SLOTS] __attribute__((tls_model("initial-exec")));
static __thread pool_cache_t *tls_caches __attribute__((tls_model("initial-exec")));
static pthread_mutex_t pools_lock = PTHREAD_MUTEX_INITIALIZER; /* caches lists, destroy, thread exit */
static retired_list_t retired_pools; /* checked library (under pools_lock) */
static brisk_pool_t *live_pools;
static _Atomic(uint64_t) next_pool_id = 1;

static inline void counter_add(_Atomic(uint64_t) *c, uint64_t n) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n, memory_order_relaxed);
}

/* ---- Thread caches ------------------------------------------------------ */

static BRISK_NOINLINE pool_cache_t *cache_lookup_slow(brisk_pool_t *pool) {
  /* Drop caches of destroyed pools while walking this thread's list. */
  pool_cache_t *c = NULL, **link = &tls_caches;
  while (*link) {
    pool_cache_t *cur = *link;
    if (atomic_load_explicit(&cur->dead, memory_order_acquire)) {
      *link = cur->thread_next;
      brisk_free(cur);
      continue;
    }
    if (cur->pool_id == pool->id) c = cur;
    link = &cur->thread_next;
  }
  if (!c) {
    c = brisk_calloc(1, sizeof *c);
    if (!c) return NULL;
    c->pool_id = pool->id;
    c->pool = pool;
    pthread_mutex_lock(&pools_lock);
    c->pool_next = pool->caches;
    if (pool->caches) pool->caches->pool_prev = c;
    pool->caches = c;
    pthread_mutex_unlock(&pools_lock);
    c->thread_next = tls_caches;
    tls_caches = c;
  }
  tls_slots[pool->id % TLS_POOL_SLOTS] = (tls_pool_slot_t){pool->id, c};
  return c;
}

static inline pool_cache_t *cache_for(brisk_pool_t *pool) {
  tls_pool_slot_t *slot = &tls_slots[pool->id % TLS_POOL_SLOTS];
  if (likely(slot->id == pool->id)) return slot->cache;
  return cache_lookup_slow(pool);
}

/* ---- The shared stack of batches ---------------------------------------- */

#define TAG_SHIFT 48
#define PTR_MASK (((uint64_t)1 << TAG_SHIFT) - 1)

static void stack_push(_Atomic(uint64_t) *top, batch_t *b) {
  uint64_t old = atomic_load_explicit(top, memory_order_relaxed), new_top;
  do {
    atomic_store_explicit(&b->next, (batch_t *)(uintptr_t)(old & PTR_MASK), memory_order_relaxed);
    new_top = (uint64_t)(uintptr_t)b | (((old >> TAG_SHIFT) + 1) << TAG_SHIFT);
  } while (!atomic_compare_exchange_weak_explicit(top, &old, new_top, memory_order_release, memory_order_relaxed));
}

/* Batch records are never freed before their pool: a popper that reads
 * `next` of a record someone else just took reads stale memory, and the
 * tag makes its CAS fail. */
static batch_t *stack_pop(_Atomic(uint64_t) *top) {
  uint64_t old = atomic_load_explicit(top, memory_order_acquire), new_top;
  batch_t *b;
  do {
    b = (batch_t *)(uintptr_t)(old & PTR_MASK);
    if (!b) return NULL;
    batch_t *next = atomic_load_explicit(&b->next, memory_order_relaxed);
    new_top = (uint64_t)(uintptr_t)next | (((old >> TAG_SHIFT) + 1) << TAG_SHIFT);
  } while (!atomic_compare_exchange_weak_explicit(top, &old, new_top, memory_order_acquire, memory_order_acquire));
  return b;
}

static batch_t *spare_batch(brisk_pool_t *pool) {
  batch_t *b = stack_pop(&pool->spare_batches);
  if (b) return b;
  batch_chunk_t *chunk = brisk_calloc(1, sizeof *chunk);
  if (!chunk) return NULL;
  pthread_mutex_lock(&pool->lock);
  chunk->next = pool->batch_chunks;
  pool->batch_chunks = chunk;
  pthread_mutex_unlock(&pool->lock);
  for (int i = 1; i < BATCHES_PER_CHUNK; i++) stack_push(&pool->spare_batches, &chunk->batch[i]);
  return &chunk->batch[0];
}

/* Gives a NULL-terminated chain of objects to the other threads; false when
 * no batch record can be had (the caller keeps the objects). */
static bool shared_push(brisk_pool_t *pool, block_t *first) {
  batch_t *b = spare_batch(pool);
  if (!b) return false;
  b->first = first;
  stack_push(&pool->full_batches, b);
  return true;
}

static block_t *shared_pop(brisk_pool_t *pool) {
  batch_t *b = stack_pop(&pool->full_batches);
  if (!b) return NULL;
  block_t *first = b->first;
  stack_push(&pool->spare_batches, b);
  return first;
}

/* Hands the objects freed lately to the other threads. */
static void flush_free_list(brisk_pool_t *pool, pool_cache_t *c) {
  if (!c->free_list || !shared_push(pool, c->free_list)) return;
  c->free_list = NULL;
  c->free_count = 0;
}

/* Everything the cache holds back to the pool (at thread exit); what finds
 * no batch record stays in the slabs until the pool is destroyed. */
static void cache_flush_all(brisk_pool_t *pool, pool_cache_t *c) {
  flush_free_list(pool, c);
  block_t *fresh = NULL;
  for (; c->bump < c->bump_end; c->bump += pool->object_size) {
    block_t *b = (block_t *)c->bump;
    b->next = fresh;
    fresh = b;
  }
  if (fresh) shared_push(pool, fresh);
  if (c->alloc_list) shared_push(pool, c->alloc_list);
  c->alloc_list = NULL;
}

/* At thread exit (from the heap's exit hook). */
void _bk_pool_thread_exit(void) {
  pthread_mutex_lock(&pools_lock);
  _bk_locks_held++;
  while (tls_caches) {
    pool_cache_t *c = tls_caches;
    tls_caches = c->thread_next;
    if (!atomic_load_explicit(&c->dead, memory_order_acquire)) {
      brisk_pool_t *pool = c->pool;
      cache_flush_all(pool, c);
      pool->retired_allocs += atomic_load_explicit(&c->allocs, memory_order_relaxed);
      pool->retired_frees += atomic_load_explicit(&c->frees, memory_order_relaxed);
      if (c->pool_prev) c->pool_prev->pool_next = c->pool_next; else pool->caches = c->pool_next;
      if (c->pool_next) c->pool_next->pool_prev = c->pool_prev;
    }
    brisk_free(c);
  }
  _bk_locks_held--;
  pthread_mutex_unlock(&pools_lock);
  memset(tls_slots, 0, sizeof tls_slots);
}

/* ---- Slabs -------------------------------------------------------------- */

/* Slabs are plain 16-aligned blocks (so a pointer's slab is its block's
 * start); objects start at the first aligned offset after the header. */
static size_t slab_header_size(size_t capacity, size_t align) {
  size_t bits = BRISK_CHECKED ? (capacity + 63) / 64 * sizeof(uint64_t) : 0;
  return align_up(sizeof(slab_t) + bits, BLOCK_ALIGN) + (align > BLOCK_ALIGN ? align - BLOCK_ALIGN : 0);
}

static slab_t *slab_of(const void *p) {
  if (!brisk_owns(p)) return NULL;
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
    s = brisk_malloc(pool->slab_bytes);
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

/* alloc_list and free_list are empty: a fresh object, else the shared
 * list, else a new range. */
static BRISK_NOINLINE block_t *alloc_slow(brisk_pool_t *pool, pool_cache_t *c) {
  if (c->bump < c->bump_end) {
    block_t *b = (block_t *)c->bump;
    c->bump += pool->object_size;
    return b;
  }
  block_t *shared = shared_pop(pool);
  if (shared) {
    c->alloc_list = shared->next;
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
  if (!s) _bk_fatal("brisk_pool_free(%p, %p): pointer was not allocated from any pool", (void *)pool, p);
  if (s->pool != pool)
    _bk_fatal("brisk_pool_free(%p, %p): pointer belongs to another pool (%p)", (void *)pool, p, (void *)s->pool);
  size_t off = (size_t)((uint8_t *)p - s->objects);
  if ((uint8_t *)p < s->objects || off % pool->object_size || off / pool->object_size >= s->capacity)
    _bk_fatal("brisk_pool_free(%p, %p): pointer is not the start of an object", (void *)pool, p);
  size_t i = off / pool->object_size;
  uint64_t bit = (uint64_t)1 << (i % 64);
  if (!(atomic_fetch_and(&s->live_bits[i / 64], ~bit) & bit))
    _bk_fatal("brisk_pool_free(%p, %p): double free (object is already free)", (void *)pool, p);
  memset((uint8_t *)p + sizeof(block_t), POISON, pool->object_size - sizeof(block_t));
}

static void check_alloc(brisk_pool_t *pool, void *p) {
  const uint8_t *bytes = p;
  for (size_t i = sizeof(block_t); i < pool->object_size; i++)
    if (bytes[i] != POISON)
      _bk_fatal("brisk_pool_alloc(%p): object %p was written after it was freed (byte %zu is 0x%02x, "
                  "not 0x%02x)", (void *)pool, p, i, bytes[i], POISON);
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
 * retired_pools, marked dead, so a stale handle never reads freed memory. */
static brisk_pool_t *pool_struct_alloc(void) {
  brisk_pool_t *pool = NULL;
  if (BRISK_CHECKED) {
    pthread_mutex_lock(&pools_lock);
    pool = retired_take(&retired_pools, offsetof(brisk_pool_t, retired_next));
    pthread_mutex_unlock(&pools_lock);
    if (pool) memset(pool, 0, sizeof *pool);
  }
  return pool ? pool : brisk_calloc(1, sizeof *pool);
}

static void pool_struct_free(brisk_pool_t *pool) {
  pool->magic = HANDLE_DEAD;
  if (!BRISK_CHECKED) {
    brisk_free(pool);
    return;
  }
  pthread_mutex_lock(&pools_lock);
  retired_put(&retired_pools, pool, offsetof(brisk_pool_t, retired_next));
  pthread_mutex_unlock(&pools_lock);
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
  pthread_mutex_lock(&pools_lock);
  pool->next_pool = live_pools;
  if (live_pools) live_pools->prev_pool = pool;
  live_pools = pool;
  pthread_mutex_unlock(&pools_lock);
  return pool;
}

void brisk_pool_destroy(brisk_pool_t *pool) {
  if (!pool) return;
  pool_ok(pool, "brisk_pool_destroy");
  pthread_mutex_lock(&pools_lock);
  for (pool_cache_t *c = pool->caches; c; c = c->pool_next) {
    c->alloc_list = c->free_list = NULL;
    c->free_count = 0;
    c->bump = c->bump_end = NULL;
    atomic_store_explicit(&c->dead, 1, memory_order_release);
  }
  if (pool->prev_pool) pool->prev_pool->next_pool = pool->next_pool; else live_pools = pool->next_pool;
  if (pool->next_pool) pool->next_pool->prev_pool = pool->prev_pool;
  pthread_mutex_unlock(&pools_lock);
  slab_t *s = pool->slabs;
  while (s) {
    slab_t *next = s->next;
    s->magic = 0;
    brisk_free(s);
    s = next;
  }
  while (pool->batch_chunks) {
    batch_chunk_t *next = pool->batch_chunks->next;
    brisk_free(pool->batch_chunks);
    pool->batch_chunks = next;
  }
  pthread_mutex_destroy(&pool->lock);
  pool_struct_free(pool);
}

void *brisk_pool_alloc(brisk_pool_t *pool) {
  if (!pool_ok(pool, "brisk_pool_alloc")) return NULL;
  if (pool->max_objects &&
      atomic_fetch_add_explicit(&pool->live, 1, memory_order_relaxed) >= pool->max_objects) {
    atomic_fetch_sub_explicit(&pool->live, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&pool->exhausted, 1, memory_order_relaxed);
    errno = ENOMEM;
    return NULL;
  }
  pool_cache_t *c = cache_for(pool);
  if (unlikely(!c)) goto out_of_memory;
  block_t *b = c->alloc_list;
  if (likely(b)) {
    c->alloc_list = b->next;
  } else if ((b = c->free_list)) { /* the objects freed lately, in one step */
    c->alloc_list = b->next;
    c->free_list = NULL;
    c->free_count = 0;
  } else if (!(b = alloc_slow(pool, c))) {
    goto out_of_memory;
  }
  counter_add(&c->allocs, 1);
  if (BRISK_CHECKED) check_alloc(pool, b);
  return b;
out_of_memory:
  if (pool->max_objects) atomic_fetch_sub_explicit(&pool->live, 1, memory_order_relaxed);
  errno = ENOMEM;
  return NULL;
}

void brisk_pool_free(brisk_pool_t *pool, void *p) {
  if (!p || !pool_ok(pool, "brisk_pool_free")) return;
  if (BRISK_CHECKED) check_free(pool, p);
  pool_cache_t *c = cache_for(pool);
  if (unlikely(!c)) { /* no memory for a cache: give it straight back */
    ((block_t *)p)->next = NULL;
    shared_push(pool, p);
  } else {
    block_t *b = p;
    b->next = c->free_list;
    c->free_list = b;
    counter_add(&c->frees, 1);
    if (unlikely(++c->free_count >= FLUSH_AT)) flush_free_list(pool, c);
  }
  if (pool->max_objects) atomic_fetch_sub_explicit(&pool->live, 1, memory_order_relaxed);
}

int brisk_pool_stats(const brisk_pool_t *cpool, brisk_pool_stats_t *out) {
  brisk_pool_t *pool = (brisk_pool_t *)cpool;
  if (out) memset(out, 0, sizeof *out);
  if (!pool_ok(pool, "brisk_pool_stats") || !out) return EINVAL;
  pthread_mutex_lock(&pools_lock);
  uint64_t allocs = pool->retired_allocs, frees = pool->retired_frees;
  for (pool_cache_t *c = pool->caches; c; c = c->pool_next) {
    allocs += atomic_load_explicit(&c->allocs, memory_order_relaxed);
    frees += atomic_load_explicit(&c->frees, memory_order_relaxed);
  }
  pthread_mutex_unlock(&pools_lock);
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
  pthread_mutex_lock(&pools_lock);
  for (brisk_pool_t *p = live_pools; p; p = p->next_pool) pthread_mutex_lock(&p->lock);
}

void _bk_pool_fork_unlock(void) {
  for (brisk_pool_t *p = live_pools; p; p = p->next_pool) pthread_mutex_unlock(&p->lock);
  pthread_mutex_unlock(&pools_lock);
}
