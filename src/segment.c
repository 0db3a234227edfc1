/* Segments: 4 MiB-aligned mappings carved into pages, owned by one heap.
 * Also the two places segments wait when no heap uses them: the cache of
 * free segments (lock-free slots) and the list of abandoned segments that
 * still hold live blocks of an exited thread. */
#include "internal.h"

#include <pthread.h>
#include <string.h>

static const uint8_t kind_page_shift[PAGED_KINDS] = {SMALL_PAGE_SHIFT, MEDIUM_PAGE_SHIFT, LARGE_PAGE_SHIFT};

/* ---- The heap's segment lists ------------------------------------------- *
 * Segments with a free page are kept in front of those without, so finding a
 * free page looks at the first segment only. */

static void seg_list_remove(heap_t *h, segment_t *seg) {
  segment_t **head = &h->segments[seg->kind];
  if (seg->prev) seg->prev->next = seg->next; else *head = seg->next;
  if (seg->next) seg->next->prev = seg->prev;
  seg->next = seg->prev = NULL;
}

static void seg_list_push_front(heap_t *h, segment_t *seg) {
  segment_t **head = &h->segments[seg->kind];
  seg->prev = NULL;
  seg->next = *head;
  if (*head) (*head)->prev = seg;
  *head = seg;
}

static void seg_list_push_back(heap_t *h, segment_t *seg) {
  segment_t *last = h->segments[seg->kind];
  if (!last) { seg_list_push_front(h, seg); return; }
  while (last->next) last = last->next;
  last->next = seg;
  seg->prev = last;
  seg->next = NULL;
}

/* ---- The registry of mapped segments ------------------------------------ */

static pthread_mutex_t segments_mutex = PTHREAD_MUTEX_INITIALIZER;
static segment_t *all_segments;

void _bk_segments_lock(void) { pthread_mutex_lock(&segments_mutex); }
void _bk_segments_unlock(void) { pthread_mutex_unlock(&segments_mutex); }
segment_t *_bk_segments_first(void) { return all_segments; }

void _bk_segments_add(segment_t *seg) {
  _bk_segments_lock();
  seg->all_prev = NULL;
  seg->all_next = all_segments;
  if (all_segments) all_segments->all_prev = seg;
  all_segments = seg;
  _bk_segments_unlock();
}

void _bk_segments_remove(segment_t *seg) {
  _bk_segments_lock();
  if (seg->all_prev) seg->all_prev->all_next = seg->all_next; else all_segments = seg->all_next;
  if (seg->all_next) seg->all_next->all_prev = seg->all_prev;
  _bk_segments_unlock();
}

static void segment_setup(segment_t *seg, heap_t *h, unsigned kind) {
  seg->page_shift = kind_page_shift[kind];
  seg->page_count = (uint32_t)(SEGMENT_SIZE >> seg->page_shift);
  seg->pages_in_use = 0;
  seg->free_page_mask = seg->page_count == 64 ? ~(uint64_t)0 : (((uint64_t)1 << seg->page_count) - 1);
  for (uint32_t i = 0; i < seg->page_count; i++) {
    PUBLISH(seg->pages[i].in_use, 0);
    PUBLISH(seg->pages[i].needs_purge, 0);
  }
  seg->heap = h;
  seg->next = seg->prev = NULL;
  PUBLISH(seg->kind, (uint8_t)kind);
  PUBLISH(seg->state, SEG_STATE_OWNED);
  atomic_store_explicit(&seg->owner_uid, h->uid, memory_order_release);
}

/* A heap's mapped_bytes counts the pages (and huge blocks) it holds. */
static void heap_pages_delta(segment_t *seg, long pages) {
  if (seg->heap)
    atomic_fetch_add_explicit(&seg->heap->mapped_bytes, (size_t)(pages * ((long)1 << seg->page_shift)),
                              memory_order_relaxed);
}

/* A fresh segment-aligned mapping of `size` bytes, marked in the chunk map
 * and in the registry; placed so that seg + skew is a multiple of align
 * (a multiple of SEGMENT_SIZE). */
segment_t *_bk_segment_map(size_t size, size_t align, size_t skew) {
  uint8_t *base;
  size_t mapped;
  segment_t *seg = _bk_os_map_aligned(size, align, skew, &base, &mapped);
  if (!seg) return NULL;
  PUBLISH(seg->mapped_size, mapped);
  _bk_segment_mark(seg, true);
  _bk_segments_add(seg);
  return seg;
}

static segment_t *segment_new(heap_t *h, unsigned kind) {
  segment_t *seg = _bk_cache_take(SEGMENT_SIZE, SEGMENT_SIZE, kind);
  stat_add(seg ? &h->stat_cache_hits : &h->stat_cache_misses, 1);
  if (!seg && !(seg = _bk_segment_map(SEGMENT_SIZE, SEGMENT_SIZE, 0))) return NULL;
  seg->block_offset = 0;
  PUBLISH(seg->purged, 0);
  segment_setup(seg, h, kind);
  seg_list_push_front(h, seg);
  return seg;
}

page_t *_bk_segment_page_alloc(heap_t *h, unsigned kind) {
  if (!_bk_heap_may_map(h, (size_t)1 << kind_page_shift[kind])) return NULL;
  segment_t *seg = h->segments[kind];
  if (!seg || !seg->free_page_mask) seg = segment_new(h, kind);
  if (!seg) return NULL;
  unsigned idx = (unsigned)__builtin_ctzll(seg->free_page_mask);
  seg->free_page_mask &= ~((uint64_t)1 << idx);
  seg->pages_in_use++;
  heap_pages_delta(seg, 1);
  if (!seg->free_page_mask && seg->next) {
    seg_list_remove(h, seg);
    seg_list_push_back(h, seg);
  }
  page_t *pg = &seg->pages[idx];
  PUBLISH(pg->needs_purge, 0);
  return pg;
}

/* The page's blocks are all free: give the page back to its segment, and the
 * segment back to the cache once empty (keeping one per kind for reuse). */
void _bk_segment_page_retire(heap_t *h, page_t *pg) {
  segment_t *seg = segment_of(pg);
  size_t idx = (size_t)(pg - seg->pages);
  PUBLISH(pg->in_use, 0);
  PUBLISH(pg->needs_purge, 1);
  pg->retired_at_ms = _bk_os_now_ms();
  pg->free = pg->local_free = NULL;
  seg->free_page_mask |= (uint64_t)1 << idx;
  seg->pages_in_use--;
  heap_pages_delta(seg, -1);
  if (seg->prev) {
    seg_list_remove(h, seg);
    seg_list_push_front(h, seg);
  }
  if (seg->pages_in_use == 0 && seg->next) {
    seg_list_remove(h, seg);
    _bk_segment_release(seg);
  }
}

static void segment_leave_heap(segment_t *seg) {
  heap_pages_delta(seg, -(long)seg->pages_in_use);
  seg->heap = NULL;
}

void _bk_segment_release(segment_t *seg) {
  atomic_store_explicit(&seg->owner_uid, 0, memory_order_relaxed);
  segment_leave_heap(seg);
  if (!_bk_cache_put(seg)) _bk_segment_unmap(seg);
}

/* Purges free pages that have been idle for the purge delay (all with force).
 * Neighbouring pages are given back in one call. */
void _bk_segment_purge_pages(segment_t *seg, uint64_t now, bool force) {
  uint32_t run_first = 0;
  uint8_t *run = NULL;
  size_t run_len = 0;
  for (uint32_t i = 0; i <= seg->page_count; i++) {
    page_t *pg = i < seg->page_count ? &seg->pages[i] : NULL;
    if (pg && !pg->in_use && pg->needs_purge &&
        (force || now - pg->retired_at_ms >= _bk_opt.purge_delay_ms)) {
      size_t len;
      uint8_t *start = page_area(seg, i, &len);
      if (!run) {
        run = start;
        run_first = i;
      }
      run_len = (size_t)(start + len - run);
      continue;
    }
    /* A purge that did not happen (realtime mode) leaves the pages dirty. */
    if (run && _bk_os_purge(run, run_len))
      for (uint32_t k = run_first; k < i; k++) PUBLISH(seg->pages[k].needs_purge, 0);
    run = NULL;
  }
}

/* Maps `bytes` of segments into the cache now (BRISK_RESERVE), touching
 * them in realtime mode so that first use takes no page fault either.
 * Returns the bytes it could place: short when the mapped-bytes cap or the
 * OS refuses, or when the cache's slots are full. */
size_t _bk_segment_reserve(size_t bytes) {
  size_t n = (bytes + SEGMENT_SIZE - 1) / SEGMENT_SIZE, placed = 0;
  while (n-- > 0) {
    segment_t *seg = _bk_segment_map(SEGMENT_SIZE, SEGMENT_SIZE, 0);
    if (!seg) break;
    PUBLISH(seg->kind, SEG_SMALL);
    if (_bk_opt.realtime)
      for (size_t off = 0; off < SEGMENT_SIZE; off += OS_PAGE_SIZE) ((volatile uint8_t *)seg)[off] = 0;
    if (!_bk_cache_put(seg)) {
      _bk_segment_unmap(seg);
      break;
    }
    placed += SEGMENT_SIZE;
  }
  return placed < bytes ? placed : bytes;
}

/* ---- Abandoned segments ------------------------------------------------- */

static pthread_mutex_t abandoned_lock = PTHREAD_MUTEX_INITIALIZER;
static segment_t *abandoned;
static _Atomic(size_t) abandoned_count;

void _bk_segment_abandoned_push(segment_t *seg) {
  pthread_mutex_lock(&abandoned_lock);
  seg->prev = NULL;
  seg->next = abandoned;
  abandoned = seg;
  atomic_fetch_add_explicit(&abandoned_count, 1, memory_order_relaxed);
  pthread_mutex_unlock(&abandoned_lock);
}

segment_t *_bk_segment_abandoned_pop(void) {
  if (!atomic_load_explicit(&abandoned_count, memory_order_relaxed)) return NULL;
  pthread_mutex_lock(&abandoned_lock);
  segment_t *seg = abandoned;
  if (seg) {
    abandoned = seg->next;
    seg->next = NULL;
    atomic_fetch_sub_explicit(&abandoned_count, 1, memory_order_relaxed);
  }
  pthread_mutex_unlock(&abandoned_lock);
  return seg;
}

void _bk_segment_abandon(segment_t *seg) {
  atomic_store_explicit(&seg->owner_uid, 0, memory_order_release);
  PUBLISH(seg->state, SEG_STATE_ABANDONED);
  segment_leave_heap(seg);
  _bk_segment_abandoned_push(seg);
}

/* Collects every in-use page of a segment that no thread is using. Empty
 * pages are freed; live ones join the adopter's queues, or with no adopter
 * are set so that all later remote frees go to the page itself. Returns how
 * many pages still hold blocks. */
uint32_t _bk_segment_collect_pages(segment_t *seg, heap_t *adopter) {
  if (adopter) seg->heap = NULL; /* counted into the adopter below */
  for (uint32_t i = 0; i < seg->page_count; i++) {
    page_t *pg = &seg->pages[i];
    if (!pg->in_use) continue;
    _bk_page_set_delayed(pg, adopter ? DELAYED_NONE : DELAYED_NEVER, false);
    atomic_store_explicit(&pg->heap, adopter, memory_order_release);
    _bk_page_collect(pg);
    PUBLISH(pg->flags, (uint8_t)(pg->flags & ~PAGE_IN_FULL)); /* PAGE_HAS_ALIGNED must stay */
    pg->next = pg->prev = NULL;
    if (pg->used == 0) {
      PUBLISH(pg->in_use, 0);
      PUBLISH(pg->needs_purge, 1);
      pg->retired_at_ms = _bk_os_now_ms();
      seg->free_page_mask |= (uint64_t)1 << i;
      seg->pages_in_use--;
      heap_pages_delta(seg, -1);
    } else if (adopter) {
      _bk_heap_queue_push(adopter, pg);
    }
  }
  if (adopter) {
    seg->heap = adopter;
    heap_pages_delta(seg, (long)seg->pages_in_use);
  }
  return seg->pages_in_use;
}

/* Releases abandoned segments that remote frees have emptied, so memory of
 * exited threads returns even if no thread ever adopts it. */
size_t _bk_segment_drain_abandoned(void) {
  size_t n = atomic_load_explicit(&abandoned_count, memory_order_relaxed), released = 0;
  segment_t *keep = NULL;
  while (n-- > 0) {
    segment_t *seg = _bk_segment_abandoned_pop();
    if (!seg) break;
    if (_bk_segment_collect_pages(seg, NULL) == 0) {
      _bk_segment_release(seg);
      released++;
    } else {
      _bk_segment_purge_pages(seg, _bk_os_now_ms(), false); /* nobody else will */
      seg->next = keep;
      keep = seg;
    }
  }
  while (keep) {
    segment_t *next = keep->next;
    _bk_segment_abandoned_push(keep);
    keep = next;
  }
  return released;
}

void _bk_segment_abandoned_lock(void) { pthread_mutex_lock(&abandoned_lock); }
void _bk_segment_abandoned_unlock(void) { pthread_mutex_unlock(&abandoned_lock); }

/* ---- The cache of free segments ----------------------------------------- *
 * A fixed array of slots. A slot's segment pointer is claimed by CAS; its
 * size and time are hints read without ownership and checked after the
 * claim, so the header of a segment is only touched by whoever holds it. */

#define TAG_PURGED 4
#define UNMAP_DELAY_FACTOR 20

static cache_slot_t cache_slots[CACHE_SLOTS];
static _Atomic(size_t) cached_bytes;

/* Unpurged bytes in the shared cache. Past a sixteenth of the cache cap a
 * segment is purged as it comes in, so that bursts of freed segments (many
 * threads exiting at once) cannot hold memory for a whole purge delay. */
static _Atomic(size_t) cached_dirty;

static void dirty_account(segment_t *seg, bool add) {
  if (seg->purged) return;
  if (add) atomic_fetch_add_explicit(&cached_dirty, seg->mapped_size, memory_order_relaxed);
  else atomic_fetch_sub_explicit(&cached_dirty, seg->mapped_size, memory_order_relaxed);
}

static void purge_cached(segment_t *seg);

static size_t slot_tag(const segment_t *seg) {
  return seg->mapped_size | seg->kind | (seg->purged ? TAG_PURGED : 0);
}

size_t _bk_cache_bytes(void) { return atomic_load_explicit(&cached_bytes, memory_order_relaxed); }

/* The reserve is memory the program asked to keep at hand: it is held on
 * top of the cache cap, never in its place. */
size_t _bk_cache_limit(void) { return _bk_opt.cache_cap + _bk_opt.reserve; }

bool _bk_cache_reserve(size_t bytes) {
  size_t cur = atomic_fetch_add_explicit(&cached_bytes, bytes, memory_order_relaxed);
  /* Realtime mode trims no cache: freeing must not unmap. */
  if (cur + bytes <= _bk_cache_limit() || _bk_opt.realtime) return true;
  atomic_fetch_sub_explicit(&cached_bytes, bytes, memory_order_relaxed);
  return false;
}

void _bk_cache_unreserve(size_t bytes) { atomic_fetch_sub_explicit(&cached_bytes, bytes, memory_order_relaxed); }

/* A slot is claimed with SLOT_BUSY while its hints are written, so a taker
 * that sees a segment also sees that segment's hints. */
#define SLOT_BUSY ((segment_t *)1)

bool _bk_slots_put(cache_slot_t *slots, size_t n, segment_t *seg, uint64_t since) {
  for (size_t i = 0; i < n; i++) {
    segment_t *expected = NULL;
    if (atomic_load_explicit(&slots[i].seg, memory_order_relaxed)) continue;
    if (!atomic_compare_exchange_strong_explicit(&slots[i].seg, &expected, SLOT_BUSY, memory_order_acquire,
                                                 memory_order_relaxed))
      continue;
    PUBLISH(seg->state, SEG_STATE_CACHED);
    atomic_store_explicit(&slots[i].size_kind, slot_tag(seg), memory_order_relaxed);
    atomic_store_explicit(&slots[i].since_ms, since, memory_order_relaxed);
    atomic_store_explicit(&slots[i].seg, seg, memory_order_release);
    return true;
  }
  return false;
}

segment_t *_bk_slots_take(cache_slot_t *slots, size_t n, size_t min_size, size_t max_size, unsigned kind,
                      bool counted) {
  for (size_t i = 0; i < n; i++) {
    segment_t *seg = atomic_load_explicit(&slots[i].seg, memory_order_acquire);
    if (!seg || seg == SLOT_BUSY) continue;
    size_t tag = atomic_load_explicit(&slots[i].size_kind, memory_order_relaxed);
    size_t size = tag & ~(size_t)(OS_PAGE_SIZE - 1);
    bool fits = kind == SEG_HUGE ? (tag & 3) == SEG_HUGE && size >= min_size && size <= max_size
                                 : (tag & 3) != SEG_HUGE && size == SEGMENT_SIZE;
    if (!fits) continue;
    if (!atomic_compare_exchange_strong_explicit(&slots[i].seg, &seg, NULL, memory_order_acquire,
                                                 memory_order_relaxed))
      continue;
    bool really = kind == SEG_HUGE ? seg->kind == SEG_HUGE && seg->mapped_size >= min_size &&
                                         seg->mapped_size <= max_size
                                   : seg->kind != SEG_HUGE && seg->mapped_size == SEGMENT_SIZE;
    if (really) return seg;
    /* The slot was emptied and refilled with a resized segment meanwhile. */
    if (!_bk_slots_put(slots, n, seg, _bk_os_now_ms())) {
      if (counted) {
        _bk_cache_unreserve(seg->mapped_size);
        dirty_account(seg, false);
      }
      _bk_segment_unmap(seg);
    }
  }
  return NULL;
}


bool _bk_cache_put(segment_t *seg) {
  /* A local copy: once in a slot the segment is another thread's to take. */
  uint64_t now = _bk_os_now_ms();
  seg->cached_at_ms = now;
  if (!_bk_cache_reserve(seg->mapped_size)) return false;
  if (!seg->purged && atomic_load_explicit(&cached_dirty, memory_order_relaxed) + seg->mapped_size >
                          _bk_cache_limit() / 16)
    purge_cached(seg);
  dirty_account(seg, true);
  if (_bk_slots_put(cache_slots, CACHE_SLOTS, seg, now)) {
    _bk_purge_note_pending();
    _bk_purge_tick(now);
    return true;
  }
  dirty_account(seg, false);
  _bk_cache_unreserve(seg->mapped_size);
  return false;
}

segment_t *_bk_cache_take(size_t min_size, size_t max_size, unsigned kind) {
  segment_t *seg = _bk_slots_take(cache_slots, CACHE_SLOTS, min_size, max_size, kind, true);
  if (seg) {
    _bk_cache_unreserve(seg->mapped_size);
    dirty_account(seg, false);
  }
  return seg;
}

/* Gives back all of a cached segment but its header. `purged` promises
 * calloc that the rest reads as zero: set only when the purge happened. */
static void purge_cached(segment_t *seg) {
  uint8_t *header_end = (uint8_t *)seg + align_up(seg->kind == SEG_HUGE ? HUGE_BLOCK_OFFSET : sizeof(segment_t), OS_PAGE_SIZE);
  if (_bk_os_purge(header_end, (size_t)((uint8_t *)seg + seg->mapped_size - header_end))) PUBLISH(seg->purged, 1);
}

void _bk_segment_mark(segment_t *seg, bool on) { _bk_os_map_range(seg, 0, seg->mapped_size, on); }

/* Out of the chunk map before the range is free for others to map. */
void _bk_segment_unmap(segment_t *seg) {
  _bk_segments_remove(seg);
  _bk_segment_mark(seg, false);
  _bk_os_unmap(seg, seg->mapped_size);
}

/* Purges (or with force, unmaps) what has sat in `slots` for the purge
 * delay. Returns whether something is still waiting to be purged. */
bool _bk_slots_purge(cache_slot_t *slots, size_t n, uint64_t now, bool force, bool counted) {
  bool pending = false;
  for (size_t i = 0; i < n; i++) {
    segment_t *seg = atomic_load_explicit(&slots[i].seg, memory_order_acquire);
    if (!seg || seg == SLOT_BUSY) continue;
    uint64_t age = now - atomic_load_explicit(&slots[i].since_ms, memory_order_relaxed);
    bool purged = atomic_load_explicit(&slots[i].size_kind, memory_order_relaxed) & TAG_PURGED;
    if (!force && age < _bk_opt.purge_delay_ms) { pending = true; continue; }
    /* Purged segments cost only address space: unmap them much later. */
    if (!force && purged && age < UNMAP_DELAY_FACTOR * _bk_opt.purge_delay_ms) continue;
    if (!atomic_compare_exchange_strong_explicit(&slots[i].seg, &seg, NULL, memory_order_acquire,
                                                 memory_order_relaxed))
      continue;
    if (counted) dirty_account(seg, false);
    if (!force && !seg->purged) {
      purge_cached(seg);
      if (_bk_slots_put(slots, n, seg, now - age)) continue;
    }
    if (counted) _bk_cache_unreserve(seg->mapped_size);
    _bk_segment_unmap(seg);
  }
  return pending;
}

void _bk_cache_purge(uint64_t now, bool force) { _bk_slots_purge(cache_slots, CACHE_SLOTS, now, force, true); }
