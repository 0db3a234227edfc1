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

static _Atomic(size_t) huge_live_bytes;
static _Atomic(uint64_t) rebuild_until_ms;
static _Atomic(uint64_t) window_start_ms;
static _Atomic(size_t) window_peak, last_window_peak;

void _bk_cache_note_huge_live(size_t added, size_t removed) {
  if (added) atomic_fetch_add_explicit(&huge_live_bytes, added, memory_order_relaxed);
  if (removed) atomic_fetch_sub_explicit(&huge_live_bytes, removed, memory_order_relaxed);
}

/* The peak of what was in use (mapped, less `cached`) over this purge
 * delay's window and the last one's. */
size_t _bk_cache_in_use_recently(uint64_t now, size_t cached) {
  size_t mapped = _bk_memory_mapped();
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

void _bk_cache_note_reuse(bool purged, uint64_t cached_at, uint64_t now) {
  uint64_t delay = _bk_opt.purge_delay_ms;
  if (now - cached_at >= delay) return; /* the delay would have purged it too */
  uint64_t until = atomic_load_explicit(&rebuild_until_ms, memory_order_relaxed);
  if (!purged && now >= until) return;
  if (until < now + delay) atomic_store_explicit(&rebuild_until_ms, now + 2 * delay, memory_order_relaxed);
}

/* brisk_collect: the program asks for everything back, rebuild or not. */
void _bk_cache_rebuild_end(void) { atomic_store_explicit(&rebuild_until_ms, 0, memory_order_relaxed); }

size_t _bk_cache_dirty_allowance(size_t floor, unsigned times, size_t rebuilding, uint64_t now) {
  size_t live = atomic_load_explicit(&huge_live_bytes, memory_order_relaxed);
  live = live > SIZE_MAX / times ? SIZE_MAX : live * times;
  if (live < floor) live = floor;
  if (now < atomic_load_explicit(&rebuild_until_ms, memory_order_relaxed) && rebuilding > live) return rebuilding;
  return live;
}
