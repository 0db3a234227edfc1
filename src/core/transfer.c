/* The transfer cache: blocks of 8 KiB or less freed by a thread that does
 * not own their page, handed in batches to any thread that allocates.
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
 * In the secure library every link of a batch, and the link from one
 * batch to the next, is checked by its mark (link_ok_across_pages): each
 * block keeps its freed mark, so the batch link is not in the second word
 * but in the third, and blocks of 16 bytes do not transfer there. Not in
 * the checked library (frees take effect at once), nor in realtime mode (a
 * class's lock may be contended), nor for blocks of explicit heaps
 * (destroying one frees its pages whole), nor with the leak report on.
 *
 * Locks: each class's lock is a leaf, held only to push or pop a batch. */
#include "core/fast_path.h"

#define TRANSFER_SIZE_MAX ((size_t)8 * 1024)
#define TRANSFER_BATCH_BYTES ((size_t)16 * 1024)
#define TRANSFER_CAP_BYTES ((size_t)64 << 20) /* all classes together */

typedef struct transfer_class {
  pthread_mutex_t lock;
  /* Batches, linked through a word of each batch's first block (the first
   * word links the batch's blocks; batch_link). Under the lock. */
  block_t *batches, *last;
  _Atomic(size_t) count; /* batches (relaxed: a hint to take the lock) */
  _Atomic(size_t) takes; /* batches taken so far (under the lock; relaxed: a hint) */
  size_t takes_seen;     /* takes at the last purge pass (pass_lock) */
  /* Batches waited at the last purge pass (relaxed: a hint; a forced
   * drain clears it outside the pass's lock). */
  _Atomic(bool) waited;
} transfer_class_t;

static transfer_class_t classes[CLASS_COUNT];
static uint16_t batch_blocks[CLASS_COUNT]; /* 0: the class does not transfer */
static _Atomic(size_t) cached_bytes;       /* in the shared lists (relaxed: bounds a hint) */

/* A count of a class that only its lock's holder changes, so a plain add,
 * stored atomically for the unlocked readers (relaxed: they take it as a
 * hint). */
static void locked_count_add(_Atomic(size_t) *count, int delta) {
  atomic_store_explicit(count, atomic_load_explicit(count, memory_order_relaxed) + (size_t)(ptrdiff_t)delta,
                        memory_order_relaxed);
}

void _bk_transfer_classes_init(void) {
  for (unsigned cls = 1; cls < CLASS_COUNT; cls++) {
    size_t size = _bk_class_size(cls), n = TRANSFER_BATCH_BYTES / size;
    pthread_mutex_init(&classes[cls].lock, NULL);
    bool transfers = !BRISK_CHECKED && size <= TRANSFER_SIZE_MAX && size > TRANSFER_WORD * sizeof(void *);
    batch_blocks[cls] = !transfers ? 0 : n < 4 ? 4 : n > 128 ? 128 : (uint16_t)n;
  }
}

/* The link from a batch to the next is stored as a block's link is
 * (encoded in the secure library), in a word of the batch's first block
 * seen as a block of its own. */
static block_t *batch_link(block_t *first) { return (block_t *)((block_t **)first + TRANSFER_WORD); }

/* The next batch after first, checked in the secure library. */
static block_t *batch_next(unsigned cls, block_t *first) {
  block_t *next = link_get(batch_link(first));
  if (unlikely(!link_ok_across_pages(_bk_class_size(cls), next))) _bk_secure_corrupted_link(first, next);
  return next;
}

/* Blocks back to their pages. With `local`, a block of the calling
 * thread's own heap is freed as its owner frees (at thread exit, on a
 * collect); else every block goes as a remote free, to whichever heap owns
 * or adopts its page then: that touches no heap's page lists, so a purge
 * pass may do it in the middle of an allocation. */
static void list_return(unsigned cls, block_t *b, bool local) {
  heap_t *h = _bk_tls_heap;
  size_t size = _bk_class_size(cls);
  while (b) {
    block_t *next = link_get(b);
    if (unlikely(!link_ok_across_pages(size, next))) _bk_secure_corrupted_link(b, next);
    if (BRISK_SECURE) ((block_t **)b)[TRANSFER_WORD] = NULL; /* a hint or batch link: not handed out */
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
    list_return(cls, first, false);
    return;
  }
  atomic_fetch_add_explicit(&cached_bytes, bytes, memory_order_relaxed);
  pthread_mutex_lock(&tc->lock);
  link_set(batch_link(first), NULL);
  if (tc->batches) link_set(batch_link(tc->last), first);
  else tc->batches = first;
  tc->last = first;
  locked_count_add(&tc->count, 1);
  pthread_mutex_unlock(&tc->lock);
}

/* Empties a heap's list: returns its blocks. */
static block_t *list_clear(transfer_list_t *tl) {
  block_t *first = tl->head;
  tl->head = NULL;
#if BRISK_SECURE
  memset(tl->after, 0, sizeof tl->after);
#endif
  PUBLISH(tl->count, 0);
  return first;
}

/* Whether the segment's owner has not allocated for OWNER_IDLE_MS before
 * the freeing thread last did (their heartbeats' stamps: no clock read
 * here). Its blocks then go back to its pages, not into the transfer cache:
 * there the threads that free them hand them out again, free them again
 * (another thread's block: the slow path each time), and so on, for as
 * long as the owner sleeps. Larson (mimalloc-bench's: workers replace
 * blocks the main thread allocated, then sleeps through the run) spent 15%
 * of its time on such frees, 40% of its frees. A consumer that never
 * allocates has no stamp of its own past its heap's start, and its
 * producer's blocks go to the cache as before. The owner's heap struct
 * stays mapped (records are never unmapped): a stale pointer reads another
 * heap's stamp, a wrong hint at worst. */
#define OWNER_IDLE_MS 250
static bool owner_idle(const segment_t *seg, const heap_t *freeing) {
  const heap_t *owner = PEEK(seg->heap);
  if (!owner) return false;
  /* (A thread's first free, before it has a heap: the clock.) */
  uint64_t mine = freeing == &_bk_heap_empty ? _bk_os_now_ms() : PEEK(freeing->active_ms);
  return PEEK(owner->active_ms) + OWNER_IDLE_MS < mine;
}

/* (The segment says whether an explicit heap owns it, where the owner's
 * heap struct would cost a line its thread keeps writing.) Not a block of
 * an exited thread's segment: back in its page, the segment empties and is
 * adopted or cached whole; shared, its blocks went from thread to thread
 * and kept it abandoned. Not with the leak report on: a block another live
 * thread freed into a batch it has not filled yet would be reported as
 * leaked at exit. Not a block of an idle owner's either (owner_idle). */
bool _bk_transfer_wants(const segment_t *seg, const page_t *pg, const heap_t *freeing) {
  return batch_blocks[page_class_for_others(pg)] && PEEK(seg->state) == SEG_STATE_OWNED &&
      !PEEK(seg->of_explicit_heap) && !_bk_opt.realtime && !_bk_opt.leak_report && !owner_idle(seg, freeing);
}

void _bk_transfer_free(heap_t *h, unsigned cls, block_t *b) {
  transfer_list_t *fill = &h->transfer_fill[cls];
  if (!fill->head) fill->block_size = (uint32_t)_bk_class_size(cls);
#if BRISK_SECURE
  /* The list is popped in the reverse order of these pushes, by a thread
   * on another core as a rule, whose loads of the links would wait in a
   * chain: the secure library's blocks come shuffled, which a hardware
   * prefetcher does not follow. Its 64 B producer/consumer pair ran at
   * 39-47 M blocks a second with only the next block prefetched (14 when
   * the two threads kept in step), 68-70 two blocks further, 71-74 three.
   * The release library's blocks come in address order as a rule, and the
   * hint cost its pair 8% (84 against 91). */
  ((block_t **)b)[TRANSFER_WORD] = fill->after[TRANSFER_AHEAD - 2];
  for (int i = TRANSFER_AHEAD - 2; i > 0; i--) fill->after[i] = fill->after[i - 1];
  fill->after[0] = fill->head;
#endif
  link_set(b, fill->head);
  fill->head = b;
  PUBLISH(fill->count, (uint16_t)(fill->count + 1));
  if (fill->count < batch_blocks[cls]) return;
  block_t *first = list_clear(fill);
  batch_publish(cls, first);
}

void *_bk_transfer_malloc(heap_t *h, unsigned cls, size_t size) {
  transfer_list_t *take = transfer_ready(h, cls, size);
  if (!take) {
    take = &h->transfer_take[cls];
    transfer_class_t *tc = &classes[cls];
    if (!batch_blocks[cls] || !atomic_load_explicit(&tc->count, memory_order_relaxed)) return NULL;
    /* (Realtime mode: a lock another thread holds is not waited for.) */
    if (_bk_opt.realtime ? pthread_mutex_trylock(&tc->lock) != 0 : pthread_mutex_lock(&tc->lock) != 0) return NULL;
    block_t *first = tc->batches;
    if (first) {
      tc->batches = batch_next(cls, first);
      locked_count_add(&tc->count, -1);
      locked_count_add(&tc->takes, 1);
    }
    pthread_mutex_unlock(&tc->lock);
    if (!first) return NULL;
    atomic_fetch_sub_explicit(&cached_bytes, (size_t)batch_blocks[cls] * _bk_class_size(cls),
                              memory_order_relaxed);
    if (BRISK_SECURE) batch_link(first)->next = NULL; /* not handed out (block_handed_out) */
    take->head = first;
    take->block_size = (uint32_t)_bk_class_size(cls);
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
      list_return(cls, list_clear(lists[i]), true);
    }
  }
}

/* n batches of class cls, taken off the shared list, back to their pages
 * as remote frees. */
static void batches_return(unsigned cls, block_t *batch, size_t n) {
  atomic_fetch_sub_explicit(&cached_bytes, n * batch_blocks[cls] * _bk_class_size(cls), memory_order_relaxed);
  while (batch) {
    block_t *next = batch_next(cls, batch);
    list_return(cls, batch, false);
    batch = next;
  }
}

/* Back to their pages, as remote frees: the classes whose batches waited
 * a whole purge interval, from one pass to the next, with no thread taking
 * one (a batch published just before a pass is not idle yet); with force,
 * all. From the purge pass (under its lock), brisk_collect and when memory
 * runs out. */
void _bk_transfer_drain(bool force) {
  for (unsigned cls = 1; cls < CLASS_COUNT; cls++) {
    transfer_class_t *tc = &classes[cls];
    size_t count = atomic_load_explicit(&tc->count, memory_order_relaxed);
    if (!force) {
      size_t takes = atomic_load_explicit(&tc->takes, memory_order_relaxed);
      bool idle = count && takes == tc->takes_seen && atomic_load_explicit(&tc->waited, memory_order_relaxed);
      tc->takes_seen = takes;
      atomic_store_explicit(&tc->waited, count != 0, memory_order_relaxed);
      if (!idle) continue;
    } else if (!count) continue;
    pthread_mutex_lock(&tc->lock);
    block_t *batch = tc->batches;
    size_t n = atomic_load_explicit(&tc->count, memory_order_relaxed);
    tc->batches = NULL;
    atomic_store_explicit(&tc->count, 0, memory_order_relaxed);
    pthread_mutex_unlock(&tc->lock);
    atomic_store_explicit(&tc->waited, false, memory_order_relaxed);
    batches_return(cls, batch, n);
  }
}

/* Back to their pages: the batches whose first block is of a thread gone
 * (its segment abandoned), so that the segments of threads gone can empty
 * (the last exit of a group of threads, purge.c). The first block stands
 * for the batch: one thread's frees of a class, in a row, come mostly from
 * the same few owners. A batch of live owners' blocks stays for another
 * thread to take (an owner asleep would strand them). */
void _bk_transfer_drain_orphans(void) {
  for (unsigned cls = 1; cls < CLASS_COUNT; cls++) {
    transfer_class_t *tc = &classes[cls];
    if (!atomic_load_explicit(&tc->count, memory_order_relaxed)) continue;
    block_t *orphans = NULL, *kept = NULL, *kept_last = NULL;
    size_t n = 0;
    pthread_mutex_lock(&tc->lock);
    for (block_t *batch = tc->batches, *next; batch; batch = next) {
      next = batch_next(cls, batch);
      /* (Relaxed: a hint; an owner gone stays gone.) */
      if (atomic_load_explicit(&segment_of(batch)->owner_uid, memory_order_relaxed) == 0) {
        link_set(batch_link(batch), orphans);
        orphans = batch;
        n++;
        continue;
      }
      link_set(batch_link(batch), NULL);
      if (kept) link_set(batch_link(kept_last), batch);
      else kept = batch;
      kept_last = batch;
    }
    tc->batches = kept;
    tc->last = kept_last;
    locked_count_add(&tc->count, -(int)n);
    pthread_mutex_unlock(&tc->lock);
    batches_return(cls, orphans, n);
  }
}

/* Blocks of class cls in the shared list (for statistics). */
size_t _bk_transfer_cached_blocks(unsigned cls) {
  return atomic_load_explicit(&classes[cls].count, memory_order_relaxed) * batch_blocks[cls];
}

/* The 34 classes that transfer (ThreadSanitizer's deadlock detector holds
 * at most 64 locks a thread: all 63 failed its check). */
void _bk_transfer_fork_lock(void) {
  for (unsigned cls = 1; cls < CLASS_COUNT; cls++)
    if (batch_blocks[cls]) pthread_mutex_lock(&classes[cls].lock);
}

void _bk_transfer_fork_unlock(void) {
  for (unsigned cls = 1; cls < CLASS_COUNT; cls++)
    if (batch_blocks[cls]) pthread_mutex_unlock(&classes[cls].lock);
}
