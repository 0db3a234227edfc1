/* Huge blocks (above the largest size class): one block per segment,
 * recycled warm: a few per thread (the heap's warm huge blocks), backed by
 * the shared segment cache, so a loop of big allocations makes no system call. Grown in
 * place, or moved without copying, with mremap. */
#include "core/core.h"
#include "core/memcheck.h"

#include <string.h>

#define HUGE_MIN_GRANULE ((size_t)64 * 1024)

/* Four mapping sizes per doubling: at most 25% of address space is slack,
 * and untouched slack costs no memory. */
static size_t huge_round(size_t need) {
  unsigned b = 63 - (unsigned)__builtin_clzl(need);
  size_t granule = (size_t)1 << (b >= 2 ? b - 2 : 0);
  if (granule < HUGE_MIN_GRANULE) granule = HUGE_MIN_GRANULE;
  return align_up(need, granule);
}

/* The offset is published before the state: a stats or visit walk that
 * sees a huge block sees where it starts. */
static void huge_setup(segment_t *seg, size_t offset) {
  PUBLISH(seg->kind, SEG_HUGE);
  PUBLISH(seg->block_offset, offset);
  PUBLISH(seg->state, SEG_STATE_HUGE);
  seg->page_shift = 63; /* every offset maps to pages[0] */
  seg->page_count = 1;
  PUBLISH(seg->pages[0].in_use, 0);
  /* (Its free_class bytes may be a paged life's: never acted on, as its
   * owner_uid, 0, matches no heap. Clearing them, a line no huge block
   * touches otherwise, halved the 4-64 MiB malloc-free loops.) */
  page_secure_update(&seg->pages[0]); /* its frees go out of line */
  PUBLISH(seg->heap, NULL);
  seg->link.next = seg->link.prev = NULL;
  atomic_store_explicit(&seg->owner_uid, 0, memory_order_relaxed);
}

/* The chunk map changes only where the mapping does, and in the order that
 * keeps it true for other threads: a tail is unmarked before mremap gives it
 * up (another thread may map a segment there at once), a growth is marked
 * after mremap has it. The chunks that stay are never touched. */
static bool resize_in_place(segment_t *seg, size_t size) {
  /* Under memcheck (the checked library built with BRISK_VALGRIND) a cut
   * would put the block's trailer among bytes memcheck holds as a freed
   * block's: mappings are not resized there, and realloc copies. */
  if (BRISK_VALGRIND) return false;
  size_t old = seg->mapped_size;
  if (size < old) _bk_chunk_map_mark(seg, size, old, false);
  if (!_bk_memory_resize(seg, old, size)) {
    if (size < old) _bk_chunk_map_mark(seg, size, old, true);
    return false;
  }
  if (size > old) _bk_chunk_map_mark(seg, old, size, true);
  PUBLISH(seg->mapped_size, size);
  return true;
}

/* Huge blocks of an explicit heap are listed in it, so that destroying the
 * heap frees them; any thread may free one, hence the lock. */
static void heap_link(heap_t *h, segment_t *seg) {
  if (!h->is_explicit) return;
  pthread_mutex_lock(&h->huge_lock);
  PUBLISH(seg->heap, h);
  list_push_front(&h->huge_blocks, &seg->link);
  pthread_mutex_unlock(&h->huge_lock);
  atomic_fetch_add_explicit(&h->mapped_bytes, seg->mapped_size, memory_order_relaxed);
}

static void heap_unlink(segment_t *seg) {
  heap_t *h = seg->heap;
  if (!h) return;
  pthread_mutex_lock(&h->huge_lock);
  list_remove(&h->huge_blocks, &seg->link);
  PUBLISH(seg->heap, NULL);
  pthread_mutex_unlock(&h->huge_lock);
  atomic_fetch_sub_explicit(&h->mapped_bytes, seg->mapped_size, memory_order_relaxed);
}

void _bk_huge_release_heap_blocks(heap_t *h) {
  for (;;) {
    pthread_mutex_lock(&h->huge_lock);
    segment_t *seg = LIST_FIRST(&h->huge_blocks, segment_t, link);
    pthread_mutex_unlock(&h->huge_lock);
    if (!seg) return;
    _bk_huge_free(seg);
  }
}

/* The thread's hot block is the biggest it freed lately, kept unpurged; the
 * block it displaces, or a smaller one freed, waits in a warm slot, where
 * at most WARM_DIRTY bytes stay unpurged. So a loop of buffers of varied
 * sizes reuses one block and its pages, and a program that frees many and
 * sleeps holds about one, not a slot's worth of each (no purge pass runs
 * while it sleeps). */
static void warm_put(heap_t *h, segment_t *seg) {
  /* Taken before its size is read: a purge pass on another thread may take
   * the hot block and unmap it at any moment (found by fuzz/fuzz_threads.c).
   * Only this thread, the heap's, puts one there. */
  PUBLISH(seg->cached_dirty, seg->mapped_size); /* (what _bk_slots_put and trimming weigh) */
  /* Empty, the slot stays empty until this thread fills it (a pass only
   * takes): the exchange, a locked instruction that was a fifth of a loop
   * of 32 MiB blocks, is needed only when there is a block to take. */
  segment_t *hot = atomic_load_explicit(&h->huge_hot, memory_order_relaxed);
  if (hot) hot = atomic_exchange_explicit(&h->huge_hot, NULL, memory_order_acquire);
  if (hot && seg->mapped_size < hot->mapped_size) {
    atomic_store_explicit(&h->huge_hot, hot, memory_order_release);
  } else {
    PUBLISH(seg->state, SEG_STATE_CACHED);
    atomic_store_explicit(&h->huge_hot_seen, 0, memory_order_relaxed);
    h->huge_hot_size = seg->mapped_size;
    atomic_store_explicit(&h->huge_hot, seg, memory_order_release);
    if (!(seg = hot)) return;
  }
  if (!_bk_slots_put(h->warm_huge, WARM_HUGE_SLOTS, seg, _bk_os_now_ms())) _bk_segment_release(seg);
  if (!_bk_opt.realtime)
    _bk_slots_trim_dirty(h->warm_huge, WARM_HUGE_SLOTS,
                         _bk_cache_dirty_allowance(WARM_DIRTY, 1, SIZE_MAX, _bk_os_now_ms()));
}

/* The thread's own warm blocks (the hot one first) of a size in [min, max]. */
static segment_t *take_hot_within(heap_t *h, size_t min, size_t max) {
  /* Taken before its size is read, as in warm_put; put back if it misses. */
  segment_t *seg = atomic_exchange_explicit(&h->huge_hot, NULL, memory_order_acquire);
  if (!seg || (seg->mapped_size >= min && seg->mapped_size <= max)) return seg;
  atomic_store_explicit(&h->huge_hot, seg, memory_order_release);
  return NULL;
}

static segment_t *take_warm_within(heap_t *h, size_t min, size_t max) {
  segment_t *seg = take_hot_within(h, min, max);
  return seg ? seg : _bk_slots_take(h->warm_huge, WARM_HUGE_SLOTS, min, max, SEG_HUGE, 0);
}

static segment_t *take_cached_within(heap_t *h, size_t min, size_t max) {
  segment_t *seg = take_warm_within(h, min, max);
  return seg ? seg : _bk_segment_cache_take(min, max, SEG_HUGE, 0);
}

/* A purge pass (on any thread) over a heap's hot block: taken (and purged,
 * or with force released) once it sat idle through a whole pass. */
static bool hot_purge(heap_t *h, uint64_t now, bool force) {
  segment_t *seg = atomic_load_explicit(&h->huge_hot, memory_order_acquire);
  if (!seg) return false;
  if (!force && !atomic_exchange_explicit(&h->huge_hot_seen, 1, memory_order_relaxed)) return true;
  if (!atomic_compare_exchange_strong_explicit(&h->huge_hot, &seg, NULL, memory_order_acquire,
                                               memory_order_relaxed))
    return false;
  /* Dated one delay back: the slots' pass purges it at once. */
  if (force || !_bk_slots_put(h->warm_huge, WARM_HUGE_SLOTS, seg, now - _bk_opt.purge_delay_ms))
    _bk_segment_release(seg);
  return !force;
}

/* Grows a block's mapping to `bigger`: in place, else moved (without
 * copying) onto a new aligned mapping. Returns the block's segment, or NULL
 * with the block unchanged. The old range leaves the chunk map before the
 * move frees it; the new one joins after. */
static segment_t *huge_grow(segment_t *seg, size_t bigger) {
  if (resize_in_place(seg, bigger)) return seg;
  if (BRISK_VALGRIND) return NULL; /* (as in resize_in_place) */
  segment_t *target = _bk_segment_map_space(bigger);
  if (!target) return NULL;
  size_t old_size = seg->mapped_size;
  _bk_segments_remove(seg);
  _bk_segment_mark(seg, false);
  if (!_bk_memory_move(seg, old_size, target, bigger)) {
    _bk_segment_mark(seg, true);
    _bk_segments_add(seg);
    _bk_memory_unmap(target, bigger);
    return NULL;
  }
  PUBLISH(target->mapped_size, bigger);
  _bk_segment_mark(target, true);
  _bk_segments_add(target);
  return target;
}

/* The thread's hot block, whole, up to HOT_WHOLE_MAX times the size: a
 * loop of buffers of varied sizes reuses one block and its pages, which
 * are resident whether the block waits or serves (glibc's heap top serves
 * such a loop the same way). */
#define HOT_WHOLE_MAX 16
static segment_t *take_hot(heap_t *h, size_t mapped) {
  size_t max = mapped > SIZE_MAX / HOT_WHOLE_MAX ? SIZE_MAX : mapped * HOT_WHOLE_MAX + (HOT_WHOLE_MAX - 1);
  return take_hot_within(h, mapped, max);
}

/* Where a block aligned to `align` (at least 64) starts in the huge segment
 * at seg: after the header, on the alignment. Up to a segment's alignment
 * this is the same for every segment; past it, it depends on the address. */
static size_t block_offset_for(const segment_t *seg, size_t align) {
  uintptr_t a = (uintptr_t)seg;
  return (size_t)(align_up(a + segment_data_offset(true), align) - a);
}

/* A warm block of about the right size, else a bigger one of the thread's
 * own, whole: cutting it would drop pages that the thread's next, bigger
 * request faults back in (a loop of buffers of varied sizes). Else a bigger
 * one from the shared cache, whole up to twice the size, else cut down to
 * size (one mremap, still cheaper than a new mapping and its first touch).
 * Else (unless the block must be zeroed) a smaller one grown to size, the
 * thread's own first: its pages stay warm, only the growth is new.
 * A bounded heap counts what it maps, so it takes only blocks of its size.
 * Past a segment's alignment only a block of about the right size at a
 * fitting address will do (one freed by the same kind of request). */
static segment_t *take_cached(heap_t *h, size_t mapped, bool zero, size_t align, size_t size) {
  bool exact = h->max_bytes != 0;
  segment_t *seg;
  size_t close_fit = mapped + mapped / 4;
  /* The hot block first when it fits as closely as a slot's must: a loop
   * of one size then takes it with no walk of the slots (an eighth of a
   * loop of 4 MiB blocks). Its size is the owner's note, read without
   * taking it: a pass may have taken it since, and the exchange says so. */
  if (!exact && align <= SEGMENT_SIZE) {
    bool hot_fits = h->huge_hot_size >= mapped && h->huge_hot_size <= close_fit;
    if ((hot_fits && (seg = take_hot_within(h, mapped, close_fit))) ||
        (seg = _bk_slots_take(h->warm_huge, WARM_HUGE_SLOTS, mapped, close_fit, SEG_HUGE, SLOTS_UNPURGED_ONLY)) ||
        (seg = take_hot(h, mapped)))
      return seg;
  }
  seg = take_cached_within(h, mapped, exact ? mapped : close_fit);
  if (align > SEGMENT_SIZE) {
    if (seg && block_offset_for(seg, align) + size + guard_size() > seg->mapped_size) {
      _bk_segment_release(seg);
      seg = NULL;
    }
    return seg;
  }
  if (seg || mapped > PTRDIFF_MAX / 8) return seg;
  /* Realtime mode cannot cut a bigger block down (no mremap): the smallest
   * that will do, whole. A warm-up leaves a block at least as big for every
   * request it made, though not always of its size (a warm-up serves a
   * loop from one block). */
  if (_bk_opt.realtime) {
    for (size_t factor = 2; !seg && factor <= 8; factor *= 2) seg = take_cached_within(h, mapped, mapped * factor);
    return seg ? seg : take_cached_within(h, mapped, SIZE_MAX);
  }
  if (!exact && (seg = take_warm_within(h, mapped, mapped * 8))) return seg;
  seg = _bk_segment_cache_take(mapped, mapped * 8, SEG_HUGE, 0);
  if (seg) {
    if (!exact) {
      if (seg->mapped_size > 2 * mapped) resize_in_place(seg, mapped);
      return seg;
    }
    if (resize_in_place(seg, mapped)) return seg;
    _bk_segment_release(seg);
    return NULL;
  }
  if (zero) return NULL;
  seg = atomic_exchange_explicit(&h->huge_hot, NULL, memory_order_acquire);
  if (!seg) seg = _bk_slots_take(h->warm_huge, WARM_HUGE_SLOTS, 0, mapped - 1, SEG_HUGE, SLOTS_LARGEST);
  /* A smaller one another thread left: its pages are kept by the move. */
  if (!seg && !exact) seg = _bk_segment_cache_take(mapped / 4, mapped - 1, SEG_HUGE, SLOTS_LARGEST);
  if (!seg) return NULL;
  segment_t *grown = huge_grow(seg, mapped);
  if (!grown) _bk_segment_release(seg);
  return grown;
}

/* Every alignment is served the same way: the block sits in a segment whose
 * header starts the mapping. Past a segment's alignment, the mapping is
 * placed so that one segment in lands on the alignment: the header's chunk
 * costs address space, not memory, and the block is cached like any other.
 * Size 0 gets a real byte, so the pointer is inside the mapping. */
void *_bk_huge_alloc(heap_t *h, size_t size, size_t align, bool zero) {
  if (size == 0) size = 1;
  if (size > PTRDIFF_MAX - 2 * SEGMENT_SIZE || align > PTRDIFF_MAX / 4) {
    errno = ENOMEM;
    return NULL;
  }
  if (align < 64) align = 64;
  size_t skew = align > SEGMENT_SIZE ? SEGMENT_SIZE : 0;
  size_t mapped = huge_round((skew ? skew : block_offset_for(NULL, align)) + size + guard_size());
  if (!heap_may_map(h, mapped)) return NULL;
  segment_t *seg = take_cached(h, mapped, zero, align, size);
  stat_add(seg ? &h->stat_cache_hits : &h->stat_cache_misses, 1);
  stat_add(&h->stat_requested, size);
  bool fresh = !seg;
  if (!seg && !(seg = _bk_segment_map(mapped, skew ? align : SEGMENT_SIZE, skew))) return NULL;
  size_t offset = block_offset_for(seg, align);
  huge_setup(seg, offset);
  heap_link(h, seg);
  uint8_t *p = (uint8_t *)seg + offset;
  if (zero && !fresh) {
    /* A purged segment reads as zero past its header page. */
    uint8_t *dirty_end = seg->purged ? (uint8_t *)seg + align_up(HUGE_BLOCK_OFFSET, OS_PAGE_SIZE) : p + size;
    if (dirty_end > p) memset(p, 0, (size_t)(dirty_end - p) < size ? (size_t)(dirty_end - p) : size);
  }
  PUBLISH(seg->purged, 0);
  seg->live = 1;
  _bk_cache_note_huge_live((long)seg->mapped_size);
  return p;
}

void _bk_huge_free(segment_t *seg) {
  BRISK_ASSERT(seg->kind == SEG_HUGE && seg->block_offset < seg->mapped_size);
  _bk_cache_note_huge_live(-(long)seg->mapped_size);
  heap_unlink(seg);
  /* The thread's warm blocks are bounded by their slots and a per-block
   * cap, and are not counted against the segment cache's cap: no shared
   * counter here. */
  heap_t *h = _bk_tls_heap;
  if (h != &_bk_heap_empty && seg->mapped_size <= _bk_opt.cache_cap / WARM_HUGE_SLOTS) {
    warm_put(h, seg);
    /* A loop of huge blocks reaches the purge pass through its
     * allocations (every 64th enters _bk_purge_maybe). */
    _bk_purge_note_pending();
    return;
  }
  _bk_segment_release(seg);
}

/* Returns the (maybe moved) block, or NULL when the caller must copy. p is
 * aligned to `align` (0: nothing asked), and stays so: a move keeps the
 * block's offset in a new segment, which is aligned to SEGMENT_SIZE only,
 * so a block aligned to more grows in place or not at all. */
void *_bk_huge_realloc(segment_t *seg, void *p, size_t size, size_t align) {
  /* Explicit heaps' blocks are resized by copying within the heap; realtime
   * mode copies too, through the caches, rather than call mremap. */
  if (seg->heap || _bk_opt.realtime) return NULL;
  if (size == 0) size = 1; /* as in _bk_huge_alloc: p stays inside the mapping */
  size_t offset = (size_t)((uint8_t *)p - (uint8_t *)seg);
  if (size > PTRDIFF_MAX - 2 * SEGMENT_SIZE) return NULL;
  size_t need = offset + size + guard_size(), old_size = seg->mapped_size;
  if (need <= old_size) {
    if (need < old_size / 2 && resize_in_place(seg, huge_round(need)))
      _bk_cache_note_huge_live((long)seg->mapped_size - (long)old_size);
    return p;
  }
  segment_t *grown;
  if (align <= SEGMENT_SIZE) grown = huge_grow(seg, huge_round(need));
  else grown = resize_in_place(seg, huge_round(need)) ? seg : NULL;
  if (!grown) return NULL;
  _bk_cache_note_huge_live((long)grown->mapped_size - (long)old_size);
  return (uint8_t *)grown + offset;
}

/* Purges the thread's warm huge blocks that sat for the purge delay; with
 * force, hands all of them to the shared cache (or the OS). */
void _bk_huge_purge_warm(heap_t *h, uint64_t now, bool force) {
  bool pending = hot_purge(h, now, force);
  if (!force) {
    if (_bk_slots_purge(h->warm_huge, WARM_HUGE_SLOTS, now, false, false) || pending) _bk_purge_note_pending();
    return;
  }
  segment_t *seg;
  while ((seg = _bk_slots_take(h->warm_huge, WARM_HUGE_SLOTS, 0, SIZE_MAX, SEG_HUGE, 0))) _bk_segment_release(seg);
}
