/* The transfer cache: small blocks freed by a thread that does not own
 * their page, handed in batches to any thread that allocates.
 *
 * A remote free used to go to the page's thread_free list, where only the
 * page's owner could take it back. An owner that sleeps while other threads
 * free its blocks (a producer waiting on a full queue) then holds all of
 * them, and the threads that do run map new memory: mimalloc-bench's
 * xmalloc-test with 100 producers peaked near 1 GB where it never holds
 * more than about 165 MB. Here the freeing thread strings its remote frees
 * of a class into a batch of its heap (no atomic), and a full batch goes
 * to the class's shared list; a thread whose pages ran dry takes the oldest
 * batch before it takes a fresh page (the newest is still in the freeing
 * core's cache). A block in the cache still counts as used in its page, as
 * a hot block does (hot.c): the page cannot be released under it. The
 * cache is bounded; past the bound, when no thread took from a class
 * between two purge passes, and on a collect, its blocks go back to their
 * pages as remote frees did before.
 *
 * Not in the secure library (its lists that span pages are checked per
 * link; a batch would need the same) nor the checked one (frees take effect
 * at once), nor in realtime mode (a class's lock may be contended), nor for
 * blocks of explicit heaps (destroying one frees its pages whole), nor with
 * the leak report on.
 *
 * Locks: each class's lock is a leaf, held only to push or pop a batch. */
#include "core/fast_path.h"

#define TRANSFER_SIZE_MAX DIRECT_SIZE_MAX
#define TRANSFER_BATCH_BYTES ((size_t)16 * 1024)
#define TRANSFER_CAP_BYTES ((size_t)64 << 20) /* all classes together */

typedef struct transfer_class {
  pthread_mutex_t lock;
  /* Batches, linked through the second word of each batch's first block
   * (the first word links the batch's blocks). Under the lock. */
  block_t *batches, *last;
  _Atomic(size_t) count;   /* batches (relaxed: a hint to take the lock) */
  _Atomic(uint32_t) takes; /* batches taken so far (relaxed: a hint) */
  uint32_t takes_seen;     /* takes at the last purge pass (pass_lock) */
} transfer_class_t;

static transfer_class_t classes[CLASS_COUNT];
static uint16_t batch_blocks[CLASS_COUNT]; /* 0: the class does not transfer */
static _Atomic(size_t) cached_bytes;       /* in the shared lists (relaxed: bounds a hint) */

void _bk_transfer_classes_init(void) {
  for (unsigned cls = 1; cls < CLASS_COUNT; cls++) {
    size_t size = _bk_class_size(cls), n = TRANSFER_BATCH_BYTES / size;
    pthread_mutex_init(&classes[cls].lock, NULL);
    batch_blocks[cls] = BRISK_SECURE || size > TRANSFER_SIZE_MAX ? 0 : n < 16 ? 16 : n > 128 ? 128 : (uint16_t)n;
  }
}

static block_t **batch_link(block_t *first) { return (block_t **)first + 1; }

/* Blocks back to their pages. With `local`, a block of the calling
 * thread's own heap is freed as its owner frees (at thread exit, on a
 * collect); else every block goes as a remote free, to whichever heap owns
 * or adopts its page then: that touches no heap's page lists, so a purge
 * pass may do it in the middle of an allocation. */
static void list_return(block_t *b, bool local) {
  heap_t *h = _bk_tls_heap;
  while (b) {
    block_t *next = link_get(b);
    segment_t *seg = segment_of(b);
    page_t *pg = page_of(seg, b);
    if (local && h != &_bk_heap_empty && atomic_load_explicit(&seg->owner_uid, memory_order_relaxed) == h->uid)
      _bk_heap_free_local(h, pg, b);
    else _bk_page_free_remote(pg, b);
    b = next;
  }
}

/* A full batch of class cls to the shared list, or back to its pages when
 * the cache is at its bound. */
static void batch_publish(unsigned cls, block_t *first) {
  size_t bytes = (size_t)batch_blocks[cls] * _bk_class_size(cls);
  transfer_class_t *tc = &classes[cls];
  if (atomic_load_explicit(&cached_bytes, memory_order_relaxed) + bytes > TRANSFER_CAP_BYTES) {
    list_return(first, false);
    return;
  }
  atomic_fetch_add_explicit(&cached_bytes, bytes, memory_order_relaxed);
  pthread_mutex_lock(&tc->lock);
  *batch_link(first) = NULL;
  if (tc->batches) *batch_link(tc->last) = first;
  else tc->batches = first;
  tc->last = first;
  atomic_store_explicit(&tc->count, atomic_load_explicit(&tc->count, memory_order_relaxed) + 1,
                        memory_order_relaxed);
  pthread_mutex_unlock(&tc->lock);
}

/* (The segment says whether an explicit heap owns it, where the owner's
 * heap struct would cost a line its thread keeps writing.) Not a block of
 * an exited thread's segment: back in its page, the segment empties and is
 * adopted or cached whole; shared, its blocks went from thread to thread
 * and kept it abandoned. Not with the leak report on: a block another live
 * thread freed into a batch it has not filled yet would be reported as
 * leaked at exit. */
bool _bk_transfer_wants(const segment_t *seg, const page_t *pg) {
  return batch_blocks[pg->size_class] && PEEK(seg->state) == SEG_STATE_OWNED && !PEEK(seg->of_explicit_heap) &&
      !_bk_opt.realtime && !_bk_opt.leak_report;
}

void _bk_transfer_free(heap_t *h, unsigned cls, block_t *b) {
  transfer_list_t *fill = &h->transfer_fill[cls];
  link_set(b, fill->head);
  fill->head = b;
  PUBLISH(fill->count, (uint16_t)(fill->count + 1));
  if (fill->count < batch_blocks[cls]) return;
  block_t *first = fill->head;
  fill->head = NULL;
  PUBLISH(fill->count, 0);
  batch_publish(cls, first);
}

void *_bk_transfer_malloc(heap_t *h, unsigned cls, size_t size) {
  transfer_list_t *take = &h->transfer_take[cls];
  if (!take->head) {
    transfer_class_t *tc = &classes[cls];
    if (!batch_blocks[cls] || !atomic_load_explicit(&tc->count, memory_order_relaxed)) return NULL;
    /* (Realtime mode: a lock another thread holds is not waited for.) */
    if (_bk_opt.realtime ? pthread_mutex_trylock(&tc->lock) != 0 : pthread_mutex_lock(&tc->lock) != 0) return NULL;
    block_t *first = tc->batches;
    if (first) {
      tc->batches = *batch_link(first);
      atomic_store_explicit(&tc->count, atomic_load_explicit(&tc->count, memory_order_relaxed) - 1,
                            memory_order_relaxed);
    }
    pthread_mutex_unlock(&tc->lock);
    if (!first) return NULL;
    atomic_fetch_sub_explicit(&cached_bytes, (size_t)batch_blocks[cls] * _bk_class_size(cls),
                              memory_order_relaxed);
    atomic_store_explicit(&tc->takes, atomic_load_explicit(&tc->takes, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    take->head = first;
    PUBLISH(take->count, batch_blocks[cls]);
  }
  return transfer_pop(h, take, size);
}

/* The heap's batches, full or not, and what it took and has not handed
 * out, back to their pages: at thread exit and on a collect. */
void _bk_transfer_flush_heap(heap_t *h) {
  for (unsigned cls = 1; cls < CLASS_COUNT; cls++) {
    if (!batch_blocks[cls]) continue;
    transfer_list_t *lists[2] = {&h->transfer_fill[cls], &h->transfer_take[cls]};
    for (int i = 0; i < 2; i++) {
      block_t *b = lists[i]->head;
      lists[i]->head = NULL;
      PUBLISH(lists[i]->count, 0);
      list_return(b, true);
    }
  }
}

/* The classes no thread took a batch from since the last purge pass (all,
 * with force) back to their pages, as remote frees. From the purge pass
 * (under its lock), brisk_collect and when memory runs out. */
void _bk_transfer_drain(bool force) {
  if (!atomic_load_explicit(&cached_bytes, memory_order_relaxed)) return;
  for (unsigned cls = 1; cls < CLASS_COUNT; cls++) {
    transfer_class_t *tc = &classes[cls];
    if (!atomic_load_explicit(&tc->count, memory_order_relaxed)) continue;
    if (!force) {
      uint32_t takes = atomic_load_explicit(&tc->takes, memory_order_relaxed), seen = tc->takes_seen;
      tc->takes_seen = takes;
      if (takes != seen) continue;
    }
    pthread_mutex_lock(&tc->lock);
    block_t *batch = tc->batches;
    size_t n = atomic_load_explicit(&tc->count, memory_order_relaxed);
    tc->batches = NULL;
    atomic_store_explicit(&tc->count, 0, memory_order_relaxed);
    pthread_mutex_unlock(&tc->lock);
    atomic_fetch_sub_explicit(&cached_bytes, n * batch_blocks[cls] * _bk_class_size(cls), memory_order_relaxed);
    while (batch) {
      block_t *next = *batch_link(batch);
      list_return(batch, false);
      batch = next;
    }
  }
}

/* Blocks of class cls in the shared list (for statistics). */
size_t _bk_transfer_cached_blocks(unsigned cls) {
  return atomic_load_explicit(&classes[cls].count, memory_order_relaxed) * batch_blocks[cls];
}

/* The 20 classes that transfer (ThreadSanitizer's deadlock detector holds
 * at most 64 locks a thread: all 63 failed its check). */
void _bk_transfer_fork_lock(void) {
  for (unsigned cls = 1; cls < CLASS_COUNT; cls++)
    if (batch_blocks[cls]) pthread_mutex_lock(&classes[cls].lock);
}

void _bk_transfer_fork_unlock(void) {
  for (unsigned cls = 1; cls < CLASS_COUNT; cls++)
    if (batch_blocks[cls]) pthread_mutex_unlock(&classes[cls].lock);
}
