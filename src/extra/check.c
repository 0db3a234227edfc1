/* brisk_check_heap: is brisk's metadata consistent? Like the visits
 * (visit.c), it reads only what
 * no other thread is changing: the calling thread's own heaps, segments
 * taken off the abandoned list for the walk, and the headers of segments
 * held in place by the segment registry's lock. */
#include "extra/extra.h"

#include <stdarg.h>
#include <stdio.h>

static __thread char check_message[256] BRISK_TLS;

const char *brisk_check_message(void) { return check_message; }

static int failure(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int failure(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(check_message, sizeof check_message, fmt, ap);
  va_end(ap);
  return code;
}

/* ---- Free lists --------------------------------------------------------- */

/* One free list of a page (core's walk), with the message set when broken. */
static long walk_list(const page_t *pg, const block_t *b, uint64_t *free_bits, const char *which) {
  const void *bad = NULL;
  long n = _bk_page_list_walk(pg, b, free_bits, &bad);
  if (n == PAGE_LIST_OUTSIDE)
    failure(BRISK_CHECK_FREE_LIST, "page %p (blocks of %zu): %s list holds %p, outside the page's blocks",
            (void *)pg->start, pg->block_size, which, bad);
  else if (n == PAGE_LIST_LOOPS)
    failure(BRISK_CHECK_FREE_LIST, "page %p (blocks of %zu): %s list loops", (void *)pg->start, pg->block_size,
            which);
  return n < 0 ? -1 : n;
}

/* The page's free blocks (all three lists); -1 on a broken list. */
long _bk_page_free_blocks(const page_t *pg, uint64_t *free_bits) {
  const block_t *remote = tf_list(atomic_load(&((page_t *)pg)->thread_free));
  long a = walk_list(pg, pg->free, free_bits, "free");
  long b = a < 0 ? -1 : walk_list(pg, pg->local_free, free_bits, "local free");
  long c = b < 0 ? -1 : walk_list(pg, remote, free_bits, "thread free");
  return c < 0 ? -1 : a + b + c;
}

static int check_page(const page_t *pg) {
  if (pg->capacity > pg->reserved || pg->capacity > MAX_BLOCKS_PER_PAGE)
    return failure(BRISK_CHECK_PAGE, "page %p: capacity %u above its %u blocks", (void *)pg->start, pg->capacity,
                   pg->reserved);
  long free_blocks = _bk_page_free_blocks(pg, NULL);
  if (free_blocks < 0) return BRISK_CHECK_FREE_LIST;
  /* Remote frees not yet collected still count in `used`. */
  long remote = 0;
  for (const block_t *b = tf_list(atomic_load(&((page_t *)pg)->thread_free)); b; b = link_get(b)) remote++;
  if ((long)page_used(pg) + free_blocks - remote > (long)pg->capacity)
    return failure(BRISK_CHECK_PAGE, "page %p (blocks of %zu): %u used + %ld free exceed its %u blocks",
                   (void *)pg->start, pg->block_size, page_used(pg), free_blocks - remote, pg->capacity);
  return BRISK_CHECK_OK;
}

/* A paged segment that the calling thread may read in full. */
static int check_segment_pages(segment_t *seg) {
  uint32_t in_use = 0;
  for (uint32_t i = 0; i < seg->page_count; i++) {
    bool free_bit = (seg->free_page_mask >> i) & 1;
    if (!free_bit && !seg->pages[i].in_use && !page_is_usable(seg, i)) continue;
    if (free_bit == (bool)seg->pages[i].in_use)
      return failure(BRISK_CHECK_SEGMENT, "segment %p: page %u is %s but its free bit says otherwise", (void *)seg,
                     i, seg->pages[i].in_use ? "in use" : "free");
    if (!seg->pages[i].in_use) continue;
    in_use++;
    int rc = check_page(&seg->pages[i]);
    if (rc) return rc;
  }
  if (in_use != seg->pages_in_use)
    return failure(BRISK_CHECK_SEGMENT, "segment %p: %u pages in use, header says %u", (void *)seg, in_use,
                   seg->pages_in_use);
  return BRISK_CHECK_OK;
}

static int check_segment_abandoned(segment_t *seg, void *arg) {
  (void)arg;
  return check_segment_pages(seg);
}

static bool owned_by_caller(segment_t *seg) {
  heap_t *h = _bk_tls_heap;
  return h != &_bk_heap_empty && atomic_load_explicit(&seg->owner_uid, memory_order_acquire) == h->uid;
}

/* The calling thread's hot lists (core/hot.c): blocks freed, not yet back
 * in their pages. */
static int check_hot_lists(void) {
  heap_t *h = _bk_tls_heap;
  if (h == &_bk_heap_empty) return BRISK_CHECK_OK;
  for (unsigned cls = 1; cls < CLASS_COUNT; cls++) {
    const void *bad = NULL;
    long n = _bk_hot_walk(h, cls, &bad);
    if (n == PAGE_LIST_OUTSIDE)
      return failure(BRISK_CHECK_FREE_LIST,
                     "hot free list of blocks of %zu holds %p, not a free block of that size", _bk_class_size(cls),
                     bad);
    if (n == PAGE_LIST_LOOPS || n != (long)_bk_hot_count(&h->hot[cls]))
      return failure(BRISK_CHECK_FREE_LIST, "hot free list of blocks of %zu %s", _bk_class_size(cls),
                     n == PAGE_LIST_LOOPS ? "loops" : "is shorter than its count");
  }
  return BRISK_CHECK_OK;
}

int brisk_check_heap(void) {
  check_message[0] = '\0';
  int rc = check_hot_lists();
  if (rc) return rc;
  _bk_segments_lock();
  for (segment_t *seg = _bk_segments_first(); seg && !rc; seg = _bk_segments_next(seg)) {
    if (segment_of((uint8_t *)seg + (PEEK(seg->kind) == SEG_HUGE ? PEEK(seg->block_offset) : 0)) != seg) {
      rc = failure(BRISK_CHECK_CHUNK_MAP, "segment %p: the chunk map does not lead to it", (void *)seg);
      break;
    }
    unsigned state = PEEK(seg->state), kind = PEEK(seg->kind);
    size_t mapped = PEEK(seg->mapped_size);
    if (kind > SEG_HUGE || state > SEG_STATE_HUGE || mapped == 0 || mapped % OS_PAGE_SIZE)
      rc = failure(state == SEG_STATE_CACHED ? BRISK_CHECK_CACHE : BRISK_CHECK_SEGMENT,
                   "segment %p: kind %u, state %u, mapped size %zu make no sense", (void *)seg, kind, state,
                   mapped);
    else if (kind != SEG_HUGE && state == SEG_STATE_OWNED && owned_by_caller(seg)) rc = check_segment_pages(seg);
  }
  _bk_segments_unlock();
  if (rc) return rc;
  return _bk_abandoned_foreach(check_segment_abandoned, NULL);
}
