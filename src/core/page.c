/* Pages: a run of equal blocks with three free lists.
 *   free        blocks ready to hand out (owner only), the owner's frees on
 *               top in the release library (page_take_back)
 *   local_free  remote frees collected while free was not empty, and in the
 *               secure library the owner's frees; moved to `free` when it
 *               runs dry
 *   thread_free blocks other threads freed (atomic LIFO, owner collects)
 * The owner takes remote frees in one atomic exchange, and never walks
 * them (their blocks are cold: other threads wrote them last). */
#include "core/core.h"

/* Thread at most this many bytes of fresh blocks at a time, so a page is
 * touched (and committed) only as fast as it is used. */
#define EXTEND_BYTES (16 * 1024)

void _bk_page_init(page_t *pg, segment_t *seg, unsigned cls, heap_t *h) {
  size_t area;
  pg->start = page_area(seg, (size_t)(pg - seg->pages), &area);
  PUBLISH(pg->block_size, _bk_class_size(cls));
  page_secure_init(pg);
  PUBLISH(pg->reserved, (uint16_t)(area / pg->block_size));
  PUBLISH(pg->capacity, 0);
  /* No block in use and no alarm, which page_flags_set sets from there. */
  PUBLISH(pg->used_past_alarm, 0);
  PUBLISH(pg->free_alarm, 0);
  pg->free = NULL;
  pg->local_free = NULL;
  PUBLISH(pg->size_class, (uint8_t)cls); /* (before the flags: page_flags_set reads it) */
  page_flags_set(pg, _bk_hot_flags(cls));
  page_copy_for_others(pg);
  PUBLISH(pg->in_use, 1);
  pg->link.next = pg->link.prev = NULL;
  pg->idle_since_ms = 0;
  if (seg->kind == SEG_LARGE) seg->blocks_free_seen = seg->blocks_purged = 0;
  atomic_store_explicit(&pg->thread_free, (uintptr_t)DELAYED_NONE, memory_order_relaxed);
  atomic_store_explicit(&pg->heap, h, memory_order_release);
  page_initialized(pg);
  _bk_page_extend(pg);
}

/* The secure library threads at least this many blocks at a time on a
 * page that is not hot (blocks of 1 KiB or less). Its owner frees wait on
 * local_free until the page's list runs dry, so a
 * malloc-free loop cycles through every block threaded, and the end of a
 * cycle is a branch the processor mispredicts: with the 16 blocks of 1 KiB
 * that EXTEND_BYTES makes, one pair in 16 (that loop took 1.55x the release
 * library's time, 64 B 1.3x). More blocks also make a longer shuffle. */
#define SECURE_EXTEND_BLOCKS 64

void _bk_page_extend(page_t *pg) {
  size_t bsize = pg->block_size;
  size_t count = EXTEND_BYTES / bsize;
  if (BRISK_SECURE && !BRISK_CHECKED && !(pg->flags & PAGE_HOT) && count < SECURE_EXTEND_BLOCKS)
    count = SECURE_EXTEND_BLOCKS; /* (a hot page's frees go to a LIFO hot list: no cycle) */
  if (count == 0) count = 1;
  size_t room = (size_t)pg->reserved - pg->capacity;
  if (count > room) count = room;
  if (count == 0) return;
  uint8_t *first = pg->start + (size_t)pg->capacity * bsize;
  /* Before the links are written: a locked add waits for earlier stores,
   * and these go to memory not in the cache (it cost 13% of a loop that
   * frees and refills 80 pages, placed after them). */
  _bk_segment_threaded((long)(count * bsize));
#if BRISK_SECURE && !BRISK_CHECKED
  pg->free = _bk_secure_thread_shuffled(first, count, bsize, pg->free);
#else
  /* In address order: the checked library tells a fresh block from a freed
   * one by its index (checked_block.c). */
  uint8_t *last = first + (count - 1) * bsize;
  for (uint8_t *b = first; b < last; b += bsize) {
    /* (Fetched for writing a few blocks ahead, as in the secure library's
     * window: bench/fixed, 64-512 B, 2-10% faster.) */
    __builtin_prefetch(b + 8 * bsize, 1);
    link_set((block_t *)b, (block_t *)(b + bsize));
  }
  link_set((block_t *)last, pg->free);
  pg->free = (block_t *)first;
#endif
  PUBLISH(pg->capacity, (uint16_t)(pg->capacity + count));
  page_secure_update(pg);
}

/* Takes the remote frees and their count, keeping the delayed state bits
 * as they are. */
static block_t *take_thread_free(page_t *pg, uint32_t *count) {
  uintptr_t tf = atomic_load_explicit(&pg->thread_free, memory_order_relaxed);
  while (tf & ~TF_STATE_MASK) {
    if (atomic_compare_exchange_weak_explicit(&pg->thread_free, &tf, tf & TF_STATE_MASK, memory_order_acquire,
                                              memory_order_relaxed)) {
      *count = (uint32_t)(tf >> TF_COUNT_SHIFT);
      return tf_list(tf);
    }
  }
  return NULL;
}

/* Remote frees join the page's lists without a walk (their blocks are cold:
 * other threads wrote them last), unless both lists are in use. */
void _bk_page_collect(page_t *pg) {
  uint32_t n = 0;
  block_t *remote = take_thread_free(pg, &n);
  if (remote) {
    BRISK_ASSERT(n <= page_used(pg));
    PUBLISH(pg->used_past_alarm, pg->used_past_alarm - (int32_t)n);
    if (!pg->free) {
      pg->free = remote;
    } else if (!pg->local_free) {
      pg->local_free = remote;
    } else {
      block_t *tail = remote;
      for (block_t *next; (next = link_get_in_page(pg, tail));) tail = next;
      link_set(tail, pg->local_free);
      pg->local_free = remote;
    }
  }
  if (!pg->free) page_reuse_local(pg);
}

/* Walks one free list of a page, checking that every link is on a block
 * boundary of the page's threaded blocks; sets the blocks' bits in
 * free_bits when given. Returns the count, or PAGE_LIST_OUTSIDE (with *bad
 * the stray link) or PAGE_LIST_LOOPS. For checks and full assertions. */
long _bk_page_list_walk(const page_t *pg, const block_t *b, uint64_t *free_bits, const void **bad) {
  long n = 0;
  for (; b; b = link_get(b)) {
    const uint8_t *p = (const uint8_t *)b;
    if (!page_has_block_at(pg, p)) {
      if (bad) *bad = p;
      return PAGE_LIST_OUTSIDE;
    }
    if (++n > (long)pg->capacity) return PAGE_LIST_LOOPS;
    if (free_bits) {
      size_t i = (size_t)(p - pg->start) / pg->block_size;
      free_bits[i / 64] |= (uint64_t)1 << (i % 64);
    }
  }
  return n;
}

block_t *_bk_page_block_start(const page_t *pg, const void *p) {
  size_t off = (size_t)((const uint8_t *)p - pg->start);
  return (block_t *)(pg->start + off - off % pg->block_size);
}
