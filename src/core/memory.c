/* Memory from the OS, counted: the bytes brisk has mapped, their peak, and
 * the cap a program may put on them (BRISK_MAX_BYTES, brisk_set_max_bytes).
 * Also the options that change how memory is asked for (realtime mode makes
 * no purge and no mremap; hugepages asks for transparent huge pages). A
 * refusal is returned: releasing cached memory and retrying is segment.c's
 * business. */
#include "core/core.h"

#include <string.h>

/* Relaxed throughout: the counters are statistics, and the cap check is a
 * reservation by fetch_add that is undone on refusal, exact without order. */
static _Atomic(size_t) mapped_bytes;
static _Atomic(size_t) max_bytes;
static _Atomic(size_t) peak_mapped;

static bool reserve_bytes(size_t size) {
  size_t cap = atomic_load_explicit(&max_bytes, memory_order_relaxed);
  size_t cur = atomic_fetch_add_explicit(&mapped_bytes, size, memory_order_relaxed);
  if (cap && cur + size > cap) {
    atomic_fetch_sub_explicit(&mapped_bytes, size, memory_order_relaxed);
    return false;
  }
  size_t peak = atomic_load_explicit(&peak_mapped, memory_order_relaxed);
  while (cur + size > peak &&
         !atomic_compare_exchange_weak_explicit(&peak_mapped, &peak, cur + size, memory_order_relaxed,
                                                memory_order_relaxed)) {
  }
  return true;
}

static void unreserve_bytes(size_t size) { atomic_fetch_sub_explicit(&mapped_bytes, size, memory_order_relaxed); }

void *_bk_memory_map(size_t size, size_t align, size_t skew, bool *over_cap) {
  if (!reserve_bytes(size)) {
    *over_cap = true;
    return NULL;
  }
  void *p = _bk_os_map(size, align, skew);
  if (!p) {
    unreserve_bytes(size);
    return NULL;
  }
  /* Segments are 4 MiB-aligned: two whole huge pages each. */
  if (_bk_opt.hugepages) _bk_os_advise_huge(p, size);
  return p;
}

void _bk_memory_unmap(void *p, size_t size) {
  _bk_os_unmap(p, size);
  unreserve_bytes(size);
}

/* Returns whether the pages now read as zero: realtime mode skips the call,
 * and the kernel may refuse it (locked pages), so callers that trust purged
 * memory to be zero must ask. */
bool _bk_memory_purge(void *p, size_t size) { return !_bk_opt.realtime && _bk_os_purge(p, size); }

/* The secure library's segments carry guard pages (segment.c): after the
 * header, and the mapping's last page. The mapping is then three ranges of
 * the kernel's (header, blocks, tail guard; the header's guard a fourth),
 * and mremap moves or resizes one range at a time: the tail guard is what
 * grows (its new pages inaccessible too) and then gives up all but its last
 * page to the blocks; a shrink makes a new last page the guard and unmaps
 * what is past it; a move takes the blocks' range and copies the header,
 * a few KiB. Each costs one to four calls more than the release library's one,
 * where the secure library used to map a fresh block and fault in every
 * page (2.3x the release library's time on random 2-32 MiB blocks). The
 * part a growth in place opens joins the blocks' range only when both came
 * from one mapping (not after a move): a later move of a range made of two
 * then fails, and the block is copied instead. */
static bool os_resize_guarded(uint8_t *p, size_t old_size, size_t new_size) {
  size_t guard = OS_PAGE_SIZE;
  if (new_size < old_size) {
    if (!_bk_os_guard(p + new_size - guard, guard)) return false;
    _bk_os_unmap(p + new_size, old_size - new_size);
    return true;
  }
  uint8_t *tail = p + old_size - guard;
  if (!_bk_os_resize(tail, guard, new_size - old_size + guard)) return false;
  if (_bk_os_unguard(tail, new_size - old_size)) return true;
  _bk_os_resize(tail, new_size - old_size + guard, guard);
  return false;
}

static bool os_move_guarded(uint8_t *p, size_t old_size, uint8_t *target, size_t new_size) {
  size_t guard = OS_PAGE_SIZE, data = segment_data_offset(true);
  if (!_bk_os_guard(target + segment_header_guard_offset(), guard) ||
      !_bk_os_guard(target + new_size - guard, guard) ||
      !_bk_os_move(p + data, old_size - data - guard, target + data, new_size - data - guard))
    return false;
  memcpy(target, p, segment_header_guard_offset());
  /* What is left of the old mapping, piece by piece: the range the blocks
   * left is free for any thread to map the moment they leave. */
  _bk_os_unmap(p, data);
  _bk_os_unmap(p + old_size - guard, guard);
  return true;
}

static bool os_resize(void *p, size_t old_size, size_t new_size) {
  if (BRISK_SECURE) return os_resize_guarded(p, old_size, new_size);
  return _bk_os_resize(p, old_size, new_size);
}

bool _bk_memory_resize(void *p, size_t old_size, size_t new_size) {
  if (_bk_opt.realtime) return false;
  if (new_size > old_size && !reserve_bytes(new_size - old_size)) return false;
  if (!os_resize(p, old_size, new_size)) {
    if (new_size > old_size) unreserve_bytes(new_size - old_size);
    return false;
  }
  if (new_size < old_size) unreserve_bytes(old_size - new_size);
  return true;
}

/* target came from _bk_memory_map with new_size bytes, counted there. */
bool _bk_memory_move(void *p, size_t old_size, void *target, size_t new_size) {
  bool moved = BRISK_SECURE ? os_move_guarded(p, old_size, target, new_size)
                            : _bk_os_move(p, old_size, target, new_size);
  if (!moved) return false;
  unreserve_bytes(old_size);
  return true;
}

/* A cap set too low shows up as failures far from where it was set (often
 * a program's own "out of memory" and exit): the first refusal says why. */
void _bk_memory_cap_refused(size_t size) {
  static _Atomic(bool) warned;
  if (atomic_exchange_explicit(&warned, true, memory_order_relaxed)) return;
  _bk_warning("BRISK_MAX_BYTES: the cap of %zu bytes refused a mapping of %zu bytes (%zu mapped now); "
              "allocations past the cap fail with ENOMEM (said once)",
              atomic_load_explicit(&max_bytes, memory_order_relaxed), size,
              atomic_load_explicit(&mapped_bytes, memory_order_relaxed));
}

void _bk_memory_set_cap(size_t bytes) { atomic_store(&max_bytes, bytes); }
size_t _bk_memory_cap(void) { return atomic_load(&max_bytes); }
size_t _bk_memory_mapped(void) { return atomic_load(&mapped_bytes); }
size_t _bk_memory_peak(void) { return atomic_load_explicit(&peak_mapped, memory_order_relaxed); }
