/* The segment cache: free segments (empty paged segments and huge blocks)
 * that any thread may take, so that a segment freed by one thread is reused
 * by the next that needs one without a system call. Bounded by
 * BRISK_CACHE_CAP (plus BRISK_RESERVE); what sits unused for the purge
 * delay is purged, and much later unmapped.
 *
 * The same lock-free slots (_bk_slots_*) hold each heap's warm huge blocks
 * (huge.c), uncounted there.
 */
#include "core/core.h"

/* A fixed array of slots. A slot's segment pointer is claimed by CAS; its
 * size and time are hints read without ownership and checked after the
 * claim, so the header of a segment is only touched by whoever holds it. */

#define TAG_PURGED 4
#define UNMAP_DELAY_FACTOR 20

static cache_slot_t cache_slots[SEGMENT_CACHE_SLOTS];
/* Bytes in the cache: reserved by fetch_add before a put and undone on
 * refusal, so the cap holds exactly without ordering (relaxed). */
static _Atomic(size_t) cached_bytes;

/* Unpurged bytes in the shared cache. A segment that comes in past the
 * dirty allowance is purged at once, so that bursts of freed segments (many
 * threads exiting at once) cannot hold memory for a whole purge delay. */
static _Atomic(size_t) cached_dirty;

/* The allowance follows the program: as much as it had in use lately (the
 * peak of this purge delay's window and the last one's), so a program that
 * frees its working set and builds it again reuses it warm, without a page
 * fault; and at least a sixteenth of the cache cap. Relaxed: hints, read
 * and updated on the cache's slow path only. */
static _Atomic(uint64_t) window_start_ms;
static _Atomic(size_t) window_peak, last_window_peak;

static size_t in_use_recently(uint64_t now) {
  size_t mapped = _bk_memory_mapped(), cached = atomic_load_explicit(&cached_bytes, memory_order_relaxed);
  size_t in_use = mapped > cached ? mapped - cached : 0;
  uint64_t start = atomic_load_explicit(&window_start_ms, memory_order_relaxed);
  if (now - start >= _bk_opt.purge_delay_ms &&
      atomic_compare_exchange_strong_explicit(&window_start_ms, &start, now, memory_order_relaxed,
                                              memory_order_relaxed)) {
    atomic_store_explicit(&last_window_peak, atomic_load_explicit(&window_peak, memory_order_relaxed),
                          memory_order_relaxed);
    atomic_store_explicit(&window_peak, in_use, memory_order_relaxed);
  }
  size_t peak = atomic_load_explicit(&window_peak, memory_order_relaxed);
  if (in_use > peak) atomic_store_explicit(&window_peak, peak = in_use, memory_order_relaxed);
  size_t last = atomic_load_explicit(&last_window_peak, memory_order_relaxed);
  return peak > last ? peak : last;
}

static void dirty_account(segment_t *seg, bool add) {
  if (seg->purged) return;
  if (add) atomic_fetch_add_explicit(&cached_dirty, seg->mapped_size, memory_order_relaxed);
  else atomic_fetch_sub_explicit(&cached_dirty, seg->mapped_size, memory_order_relaxed);
}

static void purge_cached(segment_t *seg);

static size_t slot_tag(const segment_t *seg) {
  return seg->mapped_size | seg->kind | (seg->purged ? TAG_PURGED : 0);
}

size_t _bk_segment_cache_bytes(void) { return atomic_load_explicit(&cached_bytes, memory_order_relaxed); }

/* The reserve is memory the program asked to keep at hand: it is held on
 * top of the cache cap, never in its place. */
static size_t cache_limit(void) { return _bk_opt.cache_cap + _bk_opt.reserve; }

/* The cap, or what the program had in use lately if that is more: a
 * program that frees a working set bigger than the cap and builds it again
 * must not map it anew (purged, what waits costs address space only). The
 * unpurged part is bounded by what it had in use lately, and at least a
 * sixteenth of the cap. */
static size_t cache_allowance(uint64_t now, size_t *dirty) {
  size_t limit = cache_limit(), recent = in_use_recently(now);
  *dirty = recent > limit / 16 ? recent : limit / 16;
  return recent > limit ? recent : limit;
}

static bool cache_reserve(size_t bytes, size_t allowance) {
  size_t cur = atomic_fetch_add_explicit(&cached_bytes, bytes, memory_order_relaxed);
  /* Realtime mode trims no cache: freeing must not unmap. */
  if (cur + bytes <= allowance || _bk_opt.realtime) return true;
  atomic_fetch_sub_explicit(&cached_bytes, bytes, memory_order_relaxed);
  return false;
}

static void cache_unreserve(size_t bytes) {
  atomic_fetch_sub_explicit(&cached_bytes, bytes, memory_order_relaxed);
}

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
    bool really = kind == SEG_HUGE
        ? seg->kind == SEG_HUGE && seg->mapped_size >= min_size && seg->mapped_size <= max_size
        : seg->kind != SEG_HUGE && seg->mapped_size == SEGMENT_SIZE;
    if (really) return seg;
    /* The slot was emptied and refilled with a resized segment meanwhile. */
    if (!_bk_slots_put(slots, n, seg, _bk_os_now_ms())) {
      if (counted) {
        cache_unreserve(seg->mapped_size);
        dirty_account(seg, false);
      }
      _bk_segment_unmap(seg);
    }
  }
  return NULL;
}


bool _bk_segment_cache_put(segment_t *seg) {
  /* A local copy: once in a slot the segment is another thread's to take. */
  uint64_t now = _bk_os_now_ms();
  seg->cached_at_ms = now;
  size_t dirty_max, allowance = cache_allowance(now, &dirty_max);
  if (!cache_reserve(seg->mapped_size, allowance)) return false;
  if (!seg->purged && atomic_load_explicit(&cached_dirty, memory_order_relaxed) + seg->mapped_size > dirty_max)
    purge_cached(seg);
  dirty_account(seg, true);
  if (_bk_slots_put(cache_slots, SEGMENT_CACHE_SLOTS, seg, now)) {
    _bk_purge_note_pending();
    _bk_purge_tick(now);
    return true;
  }
  dirty_account(seg, false);
  cache_unreserve(seg->mapped_size);
  return false;
}

segment_t *_bk_segment_cache_take(size_t min_size, size_t max_size, unsigned kind) {
  if (!atomic_load_explicit(&cached_bytes, memory_order_relaxed)) return NULL;
  segment_t *seg = _bk_slots_take(cache_slots, SEGMENT_CACHE_SLOTS, min_size, max_size, kind, true);
  if (seg) {
    cache_unreserve(seg->mapped_size);
    dirty_account(seg, false);
  }
  return seg;
}

/* Gives back all of a cached segment but its header. `purged` promises
 * calloc that the rest reads as zero: set only when the purge happened. */
static void purge_cached(segment_t *seg) {
  uint8_t *header_end = (uint8_t *)seg +
      align_up(seg->kind == SEG_HUGE ? HUGE_BLOCK_OFFSET : sizeof(segment_t), OS_PAGE_SIZE);
  if (_bk_memory_purge(header_end, (size_t)((uint8_t *)seg + seg->mapped_size - header_end)))
    PUBLISH(seg->purged, 1);
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
    if (!force && age < _bk_opt.purge_delay_ms) {
      pending = true;
      continue;
    }
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
    if (counted) cache_unreserve(seg->mapped_size);
    _bk_segment_unmap(seg);
  }
  return pending;
}

void _bk_segment_cache_purge(uint64_t now, bool force) {
  _bk_slots_purge(cache_slots, SEGMENT_CACHE_SLOTS, now, force, true);
}
