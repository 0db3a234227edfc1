/* Each thread's cache of a pool's objects, and the pool's shared stack of
 * batches that the caches hand objects to each other through (pool.h tells
 * the whole scheme). */
#include "extra/pool.h"

#include <string.h>

BRISK_INTERNAL pthread_mutex_t _bk_pools_lock = PTHREAD_MUTEX_INITIALIZER;
BRISK_INTERNAL __thread tls_pool_slot_t _bk_pool_tls_slots[TLS_POOL_SLOTS] BRISK_TLS;
static __thread list_t tls_caches BRISK_TLS;

/* A thread's caches are handed back by a thread-exit hook of their own. */
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;
static pthread_key_t exit_key;
static bool exit_key_ok;

static void thread_exit(void *unused);
static void exit_key_create(void) { exit_key_ok = pthread_key_create(&exit_key, thread_exit) == 0; }

/* ---- The shared stack of batches ---------------------------------------- */

static batch_t *spare_batch(brisk_pool_t *pool) {
  batch_t *b = (batch_t *)tagged_pop(&pool->spare_batches);
  if (b) return b;
  batch_chunk_t *chunk = _bk_calloc_in(_bk_tls_heap, 1, sizeof *chunk);
  if (!chunk) return NULL;
  pthread_mutex_lock(&pool->lock);
  chunk->next = pool->batch_chunks;
  pool->batch_chunks = chunk;
  pthread_mutex_unlock(&pool->lock);
  for (int i = 1; i < BATCHES_PER_CHUNK; i++) tagged_push(&pool->spare_batches, &chunk->batch[i].node);
  return &chunk->batch[0];
}

/* Gives a NULL-terminated chain of objects to the other threads; false when
 * no batch record can be had (the caller keeps the objects). */
bool _bk_pool_shared_push(brisk_pool_t *pool, block_t *first) {
  batch_t *b = spare_batch(pool);
  if (!b) return false;
  b->first = first;
  tagged_push(&pool->full_batches, &b->node);
  return true;
}

block_t *_bk_pool_shared_pop(brisk_pool_t *pool) {
  batch_t *b = (batch_t *)tagged_pop(&pool->full_batches);
  if (!b) return NULL;
  block_t *first = b->first;
  tagged_push(&pool->spare_batches, &b->node);
  return first;
}

/* Hands the objects freed lately to the other threads. */
void _bk_pool_flush_free_list(brisk_pool_t *pool, pool_cache_t *c) {
  if (!c->free_list || !_bk_pool_shared_push(pool, c->free_list)) return;
  c->free_list = NULL;
  c->free_count = 0;
}

/* ---- Thread caches ------------------------------------------------------ */

pool_cache_t *_bk_pool_cache_lookup(brisk_pool_t *pool) {
  /* Drop caches of destroyed pools while walking this thread's list. */
  pool_cache_t *c = NULL, *next;
  for (pool_cache_t *cur = LIST_FIRST(&tls_caches, pool_cache_t, thread_link); cur; cur = next) {
    next = LIST_NEXT(cur, pool_cache_t, thread_link);
    if (atomic_load_explicit(&cur->dead, memory_order_acquire)) {
      list_remove(&tls_caches, &cur->thread_link);
      free_fast(cur);
    } else if (cur->pool_id == pool->id) {
      c = cur;
    }
  }
  if (!c) {
    c = _bk_calloc_in(_bk_tls_heap, 1, sizeof *c);
    if (!c) return NULL;
    c->pool_id = pool->id;
    c->pool = pool;
    pthread_once(&exit_key_once, exit_key_create);
    if (exit_key_ok) pthread_setspecific(exit_key, c);
    pthread_mutex_lock(&_bk_pools_lock);
    list_push_front(&pool->caches, &c->pool_link);
    pthread_mutex_unlock(&_bk_pools_lock);
    list_push_front(&tls_caches, &c->thread_link);
  }
  _bk_pool_tls_slots[pool->id % TLS_POOL_SLOTS] = (tls_pool_slot_t){pool->id, c};
  return c;
}

/* Everything the cache holds back to the pool (at thread exit); what finds
 * no batch record stays in the slabs until the pool is destroyed. */
static void cache_flush_all(brisk_pool_t *pool, pool_cache_t *c) {
  _bk_pool_flush_free_list(pool, c);
  block_t *fresh = NULL;
  for (; c->bump < c->bump_end; c->bump += pool->object_size) {
    block_t *b = (block_t *)c->bump;
    link_set(b, fresh);
    fresh = b;
  }
  if (fresh) _bk_pool_shared_push(pool, fresh);
  if (c->alloc_list) _bk_pool_shared_push(pool, c->alloc_list);
  c->alloc_list = NULL;
}

static void thread_exit(void *unused) {
  (void)unused;
  pthread_mutex_lock(&_bk_pools_lock);
  _bk_locks_held++;
  list_node_t *n;
  while ((n = list_pop_front(&tls_caches))) {
    pool_cache_t *c = LIST_ENTRY(n, pool_cache_t, thread_link);
    if (!atomic_load_explicit(&c->dead, memory_order_acquire)) {
      brisk_pool_t *pool = c->pool;
      cache_flush_all(pool, c);
      pool->exited_allocs += atomic_load_explicit(&c->allocs, memory_order_relaxed);
      pool->exited_frees += atomic_load_explicit(&c->frees, memory_order_relaxed);
      list_remove(&pool->caches, &c->pool_link);
    }
    free_fast(c);
  }
  _bk_locks_held--;
  pthread_mutex_unlock(&_bk_pools_lock);
  memset(_bk_pool_tls_slots, 0, sizeof _bk_pool_tls_slots);
}
