/* How much free memory the caches keep, and how much of it unpurged.
 *
 * Unpurged memory makes reuse cheap (no page fault), and it is what a
 * program that has freed its memory and gone idle still holds: brisk has
 * no thread of its own by default, so nothing purges while the program
 * sleeps. So the caches purge at once what is past an allowance:
 *  - twice what live huge blocks map (a program that keeps replacing big
 *    blocks reuses them warm; one that has freed them all holds little:
 *    glibc's heap behaves alike, holes among live blocks stay resident and
 *    its top is trimmed), and a floor;
 *  - while the program rebuilds, what it had in use lately: it rebuilds
 *    once it takes back from a cache a block that was purged less than a
 *    purge delay after it came in (a purge the delay would not have made),
 *    and for as long as it keeps taking back blocks that recently freed.
 *
 * Relaxed throughout: these are hints, read and updated on slow paths.
 */
#include "core/core.h"

/* Stepped by each thread (counter_step) in steps of HUGE_LIVE_STEP: a
 * thread's loop over a block smaller than that touches no shared line. */
static _Atomic(size_t) huge_live_bytes;
#define HUGE_LIVE_STEP ((long)64 << 20)
static __thread long huge_live_pending BRISK_TLS;
static _Atomic(uint64_t) rebuild_until_ms;
static _Atomic(uint64_t) window_start_ms;

/* A peak over this purge delay's window and the last one's. */
typedef struct window_peak {
  _Atomic(size_t) now, last;
} window_peak_t;
static window_peak_t mapped_peak, touched_peak;

void _bk_cache_note_huge_live(long delta) {
  counter_step(&huge_live_bytes, &huge_live_pending, delta, HUGE_LIVE_STEP);
}

void _bk_cache_huge_live_flush(void) { counter_flush(&huge_live_bytes, &huge_live_pending); }

/* The live huge blocks' bytes: every thread's steps, and this thread's
 * changes since its last (below zero for a moment when one thread's frees
 * are added before the allocations another still holds back). */
static size_t huge_live(void) {
  ptrdiff_t n = (ptrdiff_t)atomic_load_explicit(&huge_live_bytes, memory_order_relaxed) + huge_live_pending;
  return n < 0 ? 0 : (size_t)n;
}

static size_t peak_update(window_peak_t *w, size_t value, bool new_window) {
  if (new_window) {
    atomic_store_explicit(&w->last, atomic_load_explicit(&w->now, memory_order_relaxed), memory_order_relaxed);
    atomic_store_explicit(&w->now, value, memory_order_relaxed);
  }
  size_t peak = atomic_load_explicit(&w->now, memory_order_relaxed);
  if (value > peak) atomic_store_explicit(&w->now, peak = value, memory_order_relaxed);
  size_t last = atomic_load_explicit(&w->last, memory_order_relaxed);
  return peak > last ? peak : last;
}

/* What was in use lately, two ways: the address space (mapped, less
 * `cached`), which bounds what the caches may hold; and the memory blocks
 * have touched (blocks threaded in pages, live huge blocks), which bounds
 * what they hold unpurged. Segments of threads that come and go are mostly
 * free pages: counted by address space, the caches kept 25-100 MiB resident
 * where the threads had a few MiB of blocks. */
size_t _bk_cache_in_use_recently(uint64_t now, size_t cached, size_t *touched) {
  size_t mapped = _bk_memory_mapped();
  uint64_t start = atomic_load_explicit(&window_start_ms, memory_order_relaxed);
  bool new_window = ms_since(now, start) >= _bk_opt.purge_delay_ms &&
      atomic_compare_exchange_strong_explicit(&window_start_ms, &start, now, memory_order_relaxed,
                                              memory_order_relaxed);
  *touched = peak_update(&touched_peak, _bk_segment_threaded_bytes() + huge_live(), new_window);
  return peak_update(&mapped_peak, mapped > cached ? mapped - cached : 0, new_window);
}

/* The purge at a group's end (purge.c) gives back at once what the threads
 * gone freed. A program that runs its threads in rounds (start them, join
 * them, start the next: mimalloc's stress test, a parallel loop) takes it
 * all back at once and faults it in again: at 2 threads x 25 rounds, 3.8 M
 * faults and 2.2x the time of the run without those purges (0.3 M). So the
 * bytes taken back within two delays of a group-end purge, of blocks and
 * segments that were cached before it (so purged by it, or before it),
 * are counted, by what they held resident, and past GROUP_REBUILT_HOLD the
 * group ends purge no more, but one every GROUP_HOLD_DELAYS delays (to see
 * whether the rounds went on): what they freed then waits for the cache's
 * own purges, as any freed memory does. Thread churn rebuilds a few MiB a group, and keeps its
 * purge at the group's end (its RSS right after the last join). Counted
 * by segment size, and with what the dirty allowance trimmed after the
 * group end, a churn of short threads beside a long-lived one held after
 * its first group end, and its last join kept 10 MiB resident in 3 of 5
 * runs (glibc 2). Relaxed: hints, as above. */
#define GROUP_REBUILT_HOLD ((size_t)64 << 20)
#define GROUP_HOLD_DELAYS 64
static _Atomic(uint64_t) group_purge_ms;
static _Atomic(size_t) group_rebuilt;

bool _bk_cache_group_end_purges(uint64_t now) {
  uint64_t last = atomic_load_explicit(&group_purge_ms, memory_order_relaxed);
  if (!last || atomic_load_explicit(&group_rebuilt, memory_order_relaxed) < GROUP_REBUILT_HOLD) return true;
  return ms_since(now, last) >= GROUP_HOLD_DELAYS * _bk_opt.purge_delay_ms;
}

void _bk_cache_group_end_purged(uint64_t now) {
  atomic_store_explicit(&group_purge_ms, now, memory_order_relaxed);
  atomic_store_explicit(&group_rebuilt, 0, memory_order_relaxed);
}

void _bk_cache_note_reuse(bool purged, size_t bytes, uint64_t cached_at, uint64_t now) {
  uint64_t delay = _bk_opt.purge_delay_ms;
  uint64_t group = atomic_load_explicit(&group_purge_ms, memory_order_relaxed);
  if (purged && group && cached_at <= group && ms_since(now, group) < 2 * delay)
    atomic_fetch_add_explicit(&group_rebuilt, bytes, memory_order_relaxed);
  if (ms_since(now, cached_at) >= delay) return; /* the delay would have purged it too */
  uint64_t until = atomic_load_explicit(&rebuild_until_ms, memory_order_relaxed);
  if (!purged && now >= until) return;
  if (until < now + delay) atomic_store_explicit(&rebuild_until_ms, now + 2 * delay, memory_order_relaxed);
}

/* brisk_collect: the program asks for everything back, rebuild or not,
 * and rounds of threads or not. */
void _bk_cache_rebuild_end(void) {
  atomic_store_explicit(&rebuild_until_ms, 0, memory_order_relaxed);
  atomic_store_explicit(&group_purge_ms, 0, memory_order_relaxed);
  atomic_store_explicit(&group_rebuilt, 0, memory_order_relaxed);
}

size_t _bk_cache_dirty_allowance(size_t floor, unsigned times, size_t rebuilding, uint64_t now) {
  size_t live = huge_live();
  live = live > SIZE_MAX / times ? SIZE_MAX : live * times;
  if (live < floor) live = floor;
  if (now < atomic_load_explicit(&rebuild_until_ms, memory_order_relaxed) && rebuilding > live) return rebuilding;
  return live;
}
