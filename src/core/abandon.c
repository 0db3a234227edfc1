/* Abandoned segments: segments of exited threads that still hold live
 * blocks. They wait on one list until a thread adopts them (a heap that
 * needs a page takes one), or until remote frees have emptied them and a
 * purge pass drains them back to the cache. Memory of exited threads is
 * reused, never stranded. */
#include "core/core.h"

/* A list per segment kind, so that a heap adopts only segments whose pages
 * it can use. Pushes and pops hold the lock; the counts are also read
 * without it (relaxed) as a hint that a list is worth locking. */
static pthread_mutex_t abandoned_lock = PTHREAD_MUTEX_INITIALIZER;
static list_t abandoned[PAGED_KINDS];
static _Atomic(size_t) abandoned_count[PAGED_KINDS];

void _bk_abandoned_lock(void) { pthread_mutex_lock(&abandoned_lock); }
void _bk_abandoned_unlock(void) { pthread_mutex_unlock(&abandoned_lock); }

void _bk_abandoned_push(segment_t *seg) {
  pthread_mutex_lock(&abandoned_lock);
  list_push_front(&abandoned[seg->kind], &seg->link);
  atomic_fetch_add_explicit(&abandoned_count[seg->kind], 1, memory_order_relaxed);
  pthread_mutex_unlock(&abandoned_lock);
}

/* One abandoned segment of `kind`, or of any kind with PAGED_KINDS. */
segment_t *_bk_abandoned_pop(unsigned kind) {
  unsigned first = kind < PAGED_KINDS ? kind : 0, last = kind < PAGED_KINDS ? kind : PAGED_KINDS - 1;
  for (unsigned k = first; k <= last; k++) {
    if (!atomic_load_explicit(&abandoned_count[k], memory_order_relaxed)) continue;
    pthread_mutex_lock(&abandoned_lock);
    segment_t *seg = LIST_ENTRY(list_pop_front(&abandoned[k]), segment_t, link);
    if (seg) atomic_fetch_sub_explicit(&abandoned_count[k], 1, memory_order_relaxed);
    pthread_mutex_unlock(&abandoned_lock);
    if (seg) return seg;
  }
  return NULL;
}

static size_t abandoned_total(void) {
  size_t n = 0;
  for (unsigned k = 0; k < PAGED_KINDS; k++) n += atomic_load_explicit(&abandoned_count[k], memory_order_relaxed);
  return n;
}

/* Release: a thread that later adopts the segment (and stores its own uid)
 * is ordered after everything the exiting owner wrote. */
void _bk_abandon(segment_t *seg) {
  atomic_store_explicit(&seg->owner_uid, 0, memory_order_release);
  PUBLISH(seg->state, SEG_STATE_ABANDONED);
  _bk_segment_pages_delta(seg, -(long)seg->pages_in_use);
  PUBLISH(seg->heap, NULL);
  _bk_abandoned_push(seg);
}

/* Collects every in-use page of a segment that no thread is using. Empty
 * pages are freed; live ones join the adopter's queues, or with no adopter
 * are set so that all later remote frees go to the page itself. Returns how
 * many pages still hold blocks. */
uint32_t _bk_segment_collect_pages(segment_t *seg, heap_t *adopter) {
  if (adopter) PUBLISH(seg->heap, NULL); /* counted into the adopter below */
  for (uint64_t pages = segment_pages_not_free(seg); pages; pages &= pages - 1) {
    page_t *pg = &seg->pages[__builtin_ctzll(pages)];
    if (!pg->in_use) continue;
    _bk_page_set_delayed(pg, adopter ? DELAYED_NONE : DELAYED_NEVER, false);
    /* Release: a remote free that reads the new heap sees it set up. */
    atomic_store_explicit(&pg->heap, adopter, memory_order_release);
    _bk_page_collect(pg);
    page_flags_set(pg, (uint8_t)(pg->flags & ~PAGE_IN_FULL)); /* PAGE_HAS_ALIGNED must stay */
    pg->link.next = pg->link.prev = NULL;
    pg->idle_since_ms = 0; /* (its heap's count of kept pages is gone) */
    if (page_used(pg) == 0) _bk_segment_page_freed(seg, pg);
    else if (adopter) _bk_heap_queue_push(adopter, pg);
  }
  if (adopter) {
    PUBLISH(seg->heap, adopter);
    _bk_segment_pages_delta(seg, (long)seg->pages_in_use);
  }
  return seg->pages_in_use;
}

/* h takes one abandoned segment of `kind`: its live pages join h's queues,
 * and its free pages are the next h uses. False when none waits. */
bool _bk_abandoned_adopt(heap_t *h, unsigned kind) {
  segment_t *seg = _bk_abandoned_pop(kind);
  if (!seg) return false;
  atomic_store_explicit(&seg->owner_uid, h->uid, memory_order_release);
  PUBLISH(seg->state, SEG_STATE_OWNED);
  uint32_t live = _bk_segment_collect_pages(seg, h);
  if (live == 0 && !list_is_empty(&h->segments[seg->kind])) {
    _bk_segment_release(seg);
    return true;
  }
  list_push_front(&h->segments[seg->kind], &seg->link);
  return true;
}

/* Segments held off the list for a while go back on it. */
static void push_back_all(list_t *held) {
  list_node_t *n;
  while ((n = list_pop_front(held))) _bk_abandoned_push(LIST_ENTRY(n, segment_t, link));
}

/* An abandoned segment off the list takes its remote frees: released if
 * that emptied it (false), else its free pages are purged, those idle for
 * the purge delay or with force all (true: it goes back on the list). */
static bool settle(segment_t *seg, uint64_t now, bool force) {
  if (_bk_segment_collect_pages(seg, NULL) == 0) {
    _bk_segment_release(seg);
    return false;
  }
  _bk_segment_purge_pages(NULL, seg, now, force); /* nobody else will */
  return true;
}

/* Releases abandoned segments that remote frees have emptied, so memory of
 * exited threads returns even if no thread ever adopts it; with force, the
 * free pages of those still holding blocks are purged too, idle or not. */
size_t _bk_abandoned_drain(bool force) {
  size_t n = abandoned_total(), released = 0;
  list_t keep = {0};
  while (n-- > 0) {
    segment_t *seg = _bk_abandoned_pop(PAGED_KINDS);
    if (!seg) break;
    if (settle(seg, _bk_os_now_ms(), force)) list_push_front(&keep, &seg->link);
    else released++;
  }
  push_back_all(&keep);
  return released;
}

/* Threads adopt abandoned segments one at a time, the newest first, as
 * they need pages: more than one per live thread waits long. Past the
 * `keep` newest of each kind, the free pages of abandoned segments are
 * purged now (emptied segments released), so that threads that come and go
 * do not hold the memory of those gone until someone adopts it. (Bursty
 * transfer with 200 generations of 8 threads: peak RSS 113 -> 100 MiB, and
 * 113 -> 74 at the end, at the same speed. Keeping half as many purged
 * more, to 66 MiB, but a new thread then faults in what it adopts: 1.4x
 * the time there, and thread churn, whose few abandoned segments are all
 * adopted at once, lost a third of its speed.) A call trims at most
 * TRIM_MAX segments after the `keep` newest: each exit adds a segment or
 * two at the front, so every segment passes through that window as it
 * ages; trimmed, they wait at the back. */
#define TRIM_MAX 32
void _bk_abandoned_trim(size_t keep) {
  for (unsigned k = 0; k < PAGED_KINDS; k++) {
    if (atomic_load_explicit(&abandoned_count[k], memory_order_relaxed) <= keep) continue;
    list_t held = {0};
    pthread_mutex_lock(&abandoned_lock);
    list_node_t *n = abandoned[k].first;
    for (size_t i = 0; n && i < keep; i++) n = n->next;
    for (size_t i = 0; n && i < TRIM_MAX; i++) {
      list_node_t *next = n->next;
      list_remove(&abandoned[k], n);
      atomic_fetch_sub_explicit(&abandoned_count[k], 1, memory_order_relaxed);
      list_push_back(&held, n);
      n = next;
    }
    pthread_mutex_unlock(&abandoned_lock);
    list_t kept = {0};
    list_node_t *node;
    while ((node = list_pop_front(&held)))
      if (settle(LIST_ENTRY(node, segment_t, link), 0, true)) list_push_back(&kept, node);
    pthread_mutex_lock(&abandoned_lock);
    while ((node = list_pop_front(&kept))) {
      list_push_back(&abandoned[k], node);
      atomic_fetch_add_explicit(&abandoned_count[k], 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&abandoned_lock);
  }
}

int _bk_abandoned_foreach(int (*fn)(segment_t *, void *), void *arg) {
  list_t taken = {0};
  segment_t *seg;
  int rc = 0;
  while (!rc && (seg = _bk_abandoned_pop(PAGED_KINDS))) {
    rc = fn(seg, arg);
    list_push_front(&taken, &seg->link);
  }
  push_back_all(&taken);
  return rc;
}
