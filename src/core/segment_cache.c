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
/* The slots a segment has ever been put in are those below this: walks
 * stop there, not at the 1024th (a miss walked them all, a tenth of a loop
 * of random 2-32 MiB blocks). Raised after the put, relaxed: a walk that
 * reads it a moment early misses one segment, as if it came a moment
 * later. */
static _Atomic(size_t) cache_slots_reach;

static size_t slots_reach(void) { return atomic_load_explicit(&cache_slots_reach, memory_order_relaxed); }
/* Bytes in the cache: reserved by fetch_add before a put and undone on
 * refusal, so the cap holds exactly without ordering (relaxed). */
static _Atomic(size_t) cached_bytes;

/* Unpurged bytes in the shared cache. Past the allowance (cache_policy.c),
 * the oldest are purged at once, so that bursts of freed segments (many
 * threads exiting at once) cannot hold memory for a whole purge delay. */
static _Atomic(size_t) cached_dirty;

static void dirty_account(segment_t *seg, bool add) {
  if (seg->purged) return;
  if (add) atomic_fetch_add_explicit(&cached_dirty, seg->cached_dirty, memory_order_relaxed);
  else atomic_fetch_sub_explicit(&cached_dirty, seg->cached_dirty, memory_order_relaxed);
}

/* What a paged segment holds resident as it enters the cache: the 64ths of
 * it that blocks touched since they were last purged (segment.c), and
 * those of pages still in use (an explicit heap's destroy). Counted by
 * mapped size, a short thread's segments (a few MiB of blocks in 8 MiB)
 * weighed as if all resident, and the cache purged them at once. */
static size_t paged_resident(segment_t *seg) {
  uint64_t mask = seg->resident_mask | 1;
  for (uint32_t i = 0; i < seg->page_count; i++)
    if (seg->pages[i].in_use) mask |= _bk_page_resident_bits(seg, &seg->pages[i]);
  return (size_t)__builtin_popcountll(mask) << (SEGMENT_SHIFT - 6);
}

static void purge_cached(segment_t *seg);
static void trim_dirty(cache_slot_t *slots, size_t n, size_t budget, bool counted);

static size_t slot_tag(const segment_t *seg) {
  return seg->mapped_size | seg->kind | (seg->purged ? TAG_PURGED : 0);
}

size_t _bk_segment_cache_bytes(void) { return atomic_load_explicit(&cached_bytes, memory_order_relaxed); }

/* The reserve is memory the program asked to keep at hand: it is held on
 * top of the cache cap, never in its place. */
static size_t cache_limit(void) { return _bk_opt.cache_cap + _bk_opt.reserve; }

/* The cap, or what the program had in use lately if that is more: a
 * program that frees a working set bigger than the cap and builds it again
 * must not map it anew (purged, what waits costs address space only).
 * Unpurged: the reserve, and what cache_policy.c allows. */
static size_t cache_allowance(uint64_t now, size_t *dirty) {
  size_t limit = cache_limit();
  size_t touched,
      recent = _bk_cache_in_use_recently(now, atomic_load_explicit(&cached_bytes, memory_order_relaxed), &touched);
  /* In a rebuild, twice what blocks touched: a cached segment holds what
   * its blocks touched since its last purge, counted in 64ths of it, and
   * segments that pass from thread to thread hold more than the blocks in
   * them (pages that other threads freed, other classes' pages). With an
   * eighth more, the cache purged one segment in three as short threads
   * exited, and the next ones faulted them in again: two threads at a time
   * made 4100 a second with 40 faults each, and 5900-6400 with 9-14 at
   * twice (peak RSS 15 -> 19-20 MiB, mimalloc's 18.6; at the last join the
   * group's end gives it back, 2.2 MiB either way). */
  *dirty = _bk_opt.reserve +
      _bk_cache_dirty_allowance(_bk_opt.cache_cap / SHARED_DIRTY_SHARE, 2, 2 * touched, now);
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

size_t _bk_slots_put(cache_slot_t *slots, size_t n, segment_t *seg, uint64_t since) {
  for (size_t i = 0; i < n; i++) {
    segment_t *expected = NULL;
    if (atomic_load_explicit(&slots[i].seg, memory_order_relaxed)) continue;
    if (!atomic_compare_exchange_strong_explicit(&slots[i].seg, &expected, SLOT_BUSY, memory_order_acquire,
                                                 memory_order_relaxed))
      continue;
    PUBLISH(seg->state, SEG_STATE_CACHED);
    atomic_store_explicit(&slots[i].size_kind, slot_tag(seg), memory_order_relaxed);
    atomic_store_explicit(&slots[i].dirty, seg->purged ? 0 : seg->cached_dirty, memory_order_relaxed);
    atomic_store_explicit(&slots[i].since_ms, since, memory_order_relaxed);
    atomic_store_explicit(&slots[i].seg, seg, memory_order_release);
    return i + 1;
  }
  return 0;
}

/* An unpurged segment that fits, else a purged one (an unpurged one's pages
 * are resident and would be purged next). Among huge blocks, the one whose
 * size fits best: the smallest in the range, or with SLOTS_LARGEST the
 * biggest (a block to grow). First fit took any block up to 8 times the
 * size, cut it down with mremap and grew another later: many 2-32 MiB
 * blocks live, freed and built again, made an mremap every 23 mallocs and
 * faulted in the pages each cut had dropped. */
static bool slot_better(bool purged, size_t size, bool best_purged, size_t best_size, bool largest) {
  if (purged != best_purged) return !purged;
  return largest ? size > best_size : size < best_size;
}

segment_t *_bk_slots_take(cache_slot_t *slots, size_t n, size_t min_size, size_t max_size, unsigned kind,
                          unsigned flags) {
  bool counted = flags & SLOTS_COUNTED, largest = flags & SLOTS_LARGEST;
  for (;;) {
    size_t best = n, best_size = 0;
    bool best_purged = true;
    for (size_t i = 0; i < n; i++) {
      segment_t *seg = atomic_load_explicit(&slots[i].seg, memory_order_acquire);
      if (!seg || seg == SLOT_BUSY) continue;
      size_t tag = atomic_load_explicit(&slots[i].size_kind, memory_order_relaxed);
      size_t size = tag & ~(size_t)(OS_PAGE_SIZE - 1);
      bool fits = kind == SEG_HUGE ? (tag & 3) == SEG_HUGE && size >= min_size && size <= max_size
                                   : (tag & 3) != SEG_HUGE && size == SEGMENT_SIZE;
      bool purged = tag & TAG_PURGED;
      if (!fits || (purged && (flags & SLOTS_UNPURGED_ONLY))) continue;
      if (best != n && !slot_better(purged, size, best_purged, best_size, largest)) continue;
      best = i, best_size = size, best_purged = purged;
      /* Nothing fits better than an unpurged segment of the exact size. */
      if (!purged && (kind != SEG_HUGE || size == (largest ? max_size : min_size))) break;
    }
    if (best == n) return NULL;
    segment_t *seg = atomic_load_explicit(&slots[best].seg, memory_order_acquire);
    uint64_t since = atomic_load_explicit(&slots[best].since_ms, memory_order_relaxed);
    if (!seg || seg == SLOT_BUSY ||
        !atomic_compare_exchange_strong_explicit(&slots[best].seg, &seg, NULL, memory_order_acquire,
                                                 memory_order_relaxed))
      continue; /* another thread took it: look again */
    bool really = kind == SEG_HUGE
        ? seg->kind == SEG_HUGE && seg->mapped_size >= min_size && seg->mapped_size <= max_size
        : seg->kind != SEG_HUGE && seg->mapped_size == SEGMENT_SIZE;
    if (really) {
      /* What the segment held resident when it came in (what a purge gave
       * back is faulted in again), not its size: a short thread's segment
       * is 4 MiB of address space for a few hundred KiB of blocks. */
      _bk_cache_note_reuse(best_purged, seg->cached_dirty, since, _bk_os_now_ms());
      return seg;
    }
    /* The slot was emptied and refilled with a resized segment meanwhile. */
    if (!_bk_slots_put(slots, n, seg, _bk_os_now_ms())) {
      if (counted) {
        cache_unreserve(seg->mapped_size);
        dirty_account(seg, false);
      }
      _bk_segment_unmap(seg);
    }
  }
}

bool _bk_segment_cache_put(segment_t *seg) {
  /* A local copy: once in a slot the segment is another thread's to take. */
  uint64_t now = _bk_os_now_ms();
  seg->cached_at_ms = now;
  PUBLISH(seg->cached_dirty, seg->kind == SEG_HUGE ? seg->mapped_size : paged_resident(seg));
  size_t dirty_max, allowance = cache_allowance(now, &dirty_max);
  if (!cache_reserve(seg->mapped_size, allowance)) return false;
  dirty_account(seg, true);
  size_t reach = _bk_slots_put(cache_slots, SEGMENT_CACHE_SLOTS, seg, now);
  if (reach) {
    size_t was = slots_reach();
    while (was < reach &&
           !atomic_compare_exchange_weak_explicit(&cache_slots_reach, &was, reach, memory_order_relaxed,
                                                  memory_order_relaxed)) {
    }
    if (atomic_load_explicit(&cached_dirty, memory_order_relaxed) > dirty_max && !_bk_opt.realtime)
      trim_dirty(cache_slots, slots_reach(), dirty_max, true);
    _bk_purge_note_pending();
    _bk_purge_tick(now);
    return true;
  }
  dirty_account(seg, false);
  cache_unreserve(seg->mapped_size);
  return false;
}

segment_t *_bk_segment_cache_take(size_t min_size, size_t max_size, unsigned kind, unsigned flags) {
  if (!atomic_load_explicit(&cached_bytes, memory_order_relaxed)) return NULL;
  segment_t *seg = _bk_slots_take(cache_slots, slots_reach(), min_size, max_size, kind, flags | SLOTS_COUNTED);
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
  if (_bk_memory_purge(header_end, (size_t)((uint8_t *)seg + seg->mapped_size - header_end))) {
    PUBLISH(seg->purged, 1);
    seg->resident_mask = 1;
  }
}

/* Purges the unpurged segments in `slots`, oldest first, until those left
 * unpurged come to at most `budget` bytes. */
static void trim_dirty(cache_slot_t *slots, size_t n, size_t budget, bool counted) {
  for (;;) {
    size_t dirty = 0, oldest = n;
    uint64_t oldest_since = UINT64_MAX;
    for (size_t i = 0; i < n; i++) {
      segment_t *seg = atomic_load_explicit(&slots[i].seg, memory_order_relaxed);
      size_t tag = atomic_load_explicit(&slots[i].size_kind, memory_order_relaxed);
      if (!seg || seg == SLOT_BUSY || (tag & TAG_PURGED)) continue;
      dirty += atomic_load_explicit(&slots[i].dirty, memory_order_relaxed);
      uint64_t since = atomic_load_explicit(&slots[i].since_ms, memory_order_relaxed);
      if (since < oldest_since) {
        oldest_since = since;
        oldest = i;
      }
    }
    if (dirty <= budget || oldest == n) return;
    segment_t *seg = atomic_load_explicit(&slots[oldest].seg, memory_order_acquire);
    if (!seg || seg == SLOT_BUSY ||
        !atomic_compare_exchange_strong_explicit(&slots[oldest].seg, &seg, NULL, memory_order_acquire,
                                                 memory_order_relaxed))
      continue;
    if (counted) dirty_account(seg, false);
    purge_cached(seg);
    bool purged = seg->purged; /* (once put back, the segment is not ours) */
    if (counted) dirty_account(seg, true);
    if (!_bk_slots_put(slots, n, seg, oldest_since)) {
      if (counted) {
        dirty_account(seg, false);
        cache_unreserve(seg->mapped_size);
        _bk_segment_unmap(seg);
      } else if (!_bk_segment_cache_put(seg)) { /* (a warm huge block: no heap, no owner) */
        _bk_segment_unmap(seg);
      }
    }
    if (!purged) return; /* realtime mode: nothing is purged */
  }
}

void _bk_slots_trim_dirty(cache_slot_t *slots, size_t n, size_t budget) { trim_dirty(slots, n, budget, false); }

/* Purges (or with force, unmaps) what has sat in `slots` for the purge
 * delay. Returns whether something is still waiting to be purged. */
bool _bk_slots_purge(cache_slot_t *slots, size_t n, uint64_t now, bool force, bool counted) {
  bool pending = false;
  for (size_t i = 0; i < n; i++) {
    segment_t *seg = atomic_load_explicit(&slots[i].seg, memory_order_acquire);
    if (!seg || seg == SLOT_BUSY) continue;
    uint64_t age = ms_since(now, atomic_load_explicit(&slots[i].since_ms, memory_order_relaxed));
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

/* Purges every unpurged segment in the cache, keeping them mapped. */
void _bk_segment_cache_purge_all(void) { trim_dirty(cache_slots, slots_reach(), 0, true); }

void _bk_segment_cache_purge(uint64_t now, bool force) {
  _bk_slots_purge(cache_slots, slots_reach(), now, force, true);
}
