/* Object pools' own data, shared by pool.c (slabs, the public API) and
 * pool_cache.c (each thread's cache, the shared stack of batches). Not for
 * other files.
 *
 * Objects are carved from slabs (ordinary brisk blocks). Each thread keeps
 * its own cache per pool, used with no lock and no atomic: allocation pops
 * `alloc_list`, free pushes `free_list`; when alloc_list runs dry it takes
 * free_list whole, then bumps through a range of fresh objects granted from
 * a slab. Every FLUSH_AT frees, free_list goes whole to the pool's shared
 * stack of batches; a dry cache takes one batch. The stack is lock-free
 * (ds/tagged_stack.h) and holds small batch records of brisk's own, never
 * the objects' memory, so no thread ever reads an object another thread may
 * be using. Every step is O(1), and no thread takes more than a batch of
 * what others gave back. Only a bounded pool counts live objects
 * atomically, to enforce its bound. */
#ifndef BRISK_POOL_H
#define BRISK_POOL_H

#include "extra/extra.h"

#include "core/fast_path.h"
#include "ds/tagged_stack.h"

#define FLUSH_AT 256

typedef struct pool_cache pool_cache_t;

/* A chain of free objects on a pool's shared stack. */
typedef struct batch {
  tagged_node_t node; /* first: the stack's node is the batch */
  block_t *first;
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
  tagged_stack_t full_batches;  /* batches of free objects */
  tagged_stack_t spare_batches; /* empty batch records */
  batch_chunk_t *batch_chunks;  /* under lock; freed with the pool */
  _Atomic(size_t) live;         /* bounded pools only */
  _Atomic(uint64_t) exhausted;
  pthread_mutex_t lock; /* slabs and carving */
  slab_t *slabs, *carving;
  size_t slab_bytes, slab_count, capacity;
  uint32_t carved;                      /* objects carved from `carving` */
  list_t caches;                        /* every thread's cache (under _bk_pools_lock) */
  uint64_t exited_allocs, exited_frees; /* of caches gone with their thread */
  /* Live pools (for fork), or the checked library's quarantine of destroyed
   * ones; under _bk_pools_lock. */
  list_node_t pools_link;
};

struct pool_cache {
  block_t *alloc_list;
  block_t *free_list;
  uint32_t free_count;
  uint8_t *bump, *bump_end; /* fresh objects granted from a slab */
  /* Written by the owner only (a load and a store, no RMW), read by stats. */
  _Atomic(uint64_t) allocs, frees;
  uint64_t pool_id;
  struct brisk_pool *pool;
  /* Its pool was destroyed: set with release by the destroyer after it
   * emptied the cache, read with acquire by the owner before it frees it. */
  _Atomic(int) dead;
  list_node_t pool_link;   /* in pool->caches */
  list_node_t thread_link; /* in the owner thread's list */
};

/* Guards every pool's caches list, the live pools, the quarantine, a
 * destroy, and a thread's exit. */
extern BRISK_INTERNAL pthread_mutex_t _bk_pools_lock;

BRISK_INTERNAL pool_cache_t *_bk_pool_cache_lookup(brisk_pool_t *pool);
BRISK_INTERNAL bool _bk_pool_shared_push(brisk_pool_t *pool, block_t *first);
BRISK_INTERNAL block_t *_bk_pool_shared_pop(brisk_pool_t *pool);
BRISK_INTERNAL void _bk_pool_flush_free_list(brisk_pool_t *pool, pool_cache_t *c);

#define TLS_POOL_SLOTS 8
typedef struct tls_pool_slot {
  uint64_t id;
  pool_cache_t *cache;
} tls_pool_slot_t;
extern __thread tls_pool_slot_t _bk_pool_tls_slots[TLS_POOL_SLOTS] BRISK_TLS BRISK_INTERNAL;

static inline tls_pool_slot_t *pool_tls_slot(const brisk_pool_t *pool) {
  return &_bk_pool_tls_slots[pool->id % TLS_POOL_SLOTS];
}

static inline pool_cache_t *pool_cache_for(brisk_pool_t *pool) {
  tls_pool_slot_t *slot = pool_tls_slot(pool);
  if (likely(slot->id == pool->id)) return slot->cache;
  return _bk_pool_cache_lookup(pool);
}

/* Owner-only counters that stats read: a relaxed load and store. */
static inline void counter_add(_Atomic(uint64_t) *c, uint64_t n) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n, memory_order_relaxed);
}

#endif
