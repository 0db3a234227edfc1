/* Segments: 4 MiB-aligned mappings carved into pages, owned by one heap.
 * A segment is mapped (and marked in the chunk map and the registry), hands
 * its free pages to its heap, takes them back, and goes to the segment
 * cache when its last page is free. */
#include "core/core.h"

static const uint8_t kind_page_shift[PAGED_KINDS] = {SMALL_PAGE_SHIFT, MEDIUM_PAGE_SHIFT, LARGE_PAGE_SHIFT};

/* ---- Mapping ------------------------------------------------------------ */

/* When the OS or the cap refuses, cached memory is released and the map
 * retried once: the caches are the memory brisk may give up. */
static void *map_with_retry(size_t size, size_t align, size_t skew) {
  bool over_cap = false;
  void *p = _bk_memory_map(size, align, skew, &over_cap);
  if (p) return p;
  _bk_purge_release_all();
  over_cap = false;
  p = _bk_memory_map(size, align, skew, &over_cap);
  if (p) return p;
  if (over_cap) _bk_memory_cap_refused(size);
  errno = ENOMEM;
  return NULL;
}

void _bk_segment_mark(segment_t *seg, bool on) { _bk_chunk_map_mark(seg, 0, seg->mapped_size, on); }

/* A fresh segment-aligned mapping of `size` bytes, marked in the chunk map
 * and in the registry; placed so that seg + skew is a multiple of align
 * (a multiple of SEGMENT_SIZE). */
segment_t *_bk_segment_map(size_t size, size_t align, size_t skew) {
  segment_t *seg = map_with_retry(size, align, skew);
  if (!seg) return NULL;
  if (BRISK_SECURE && !_bk_secure_guard(seg, size)) {
    _bk_memory_unmap(seg, size);
    errno = ENOMEM;
    return NULL;
  }
  PUBLISH(seg->mapped_size, size);
  _bk_segment_mark(seg, true);
  _bk_segments_add(seg);
  return seg;
}

/* Segment-aligned space for a huge block to move onto (huge.c): counted,
 * but neither marked nor registered until the move is done. */
void *_bk_segment_map_space(size_t size) { return map_with_retry(size, SEGMENT_SIZE, 0); }

/* Out of the chunk map before the range is free for others to map. */
void _bk_segment_unmap(segment_t *seg) {
  _bk_segments_remove(seg);
  _bk_segment_mark(seg, false);
  _bk_memory_unmap(seg, seg->mapped_size);
}

/* ---- Pages of a heap's segments ----------------------------------------- *
 * A heap keeps its segments of each kind in a list, those with a free page
 * in front, so finding a free page looks at the first segment only. */

/* Bytes of blocks threaded in pages in use, in every segment (owned,
 * abandoned or of an explicit heap): the memory the program's blocks have
 * touched, by which the caches measure its working set (cache_policy.c).
 * Not pages: a page of 512 KiB may hold one block. Relaxed: a hint,
 * changed when a page threads more blocks or goes back to its segment. */
static _Atomic(size_t) threaded_bytes;

/* Stepped by each thread (counter_step: a locked add per page extension
 * cost 3-13% of a loop that refills many pages). */
#define THREADED_STEP ((long)256 << 10)
static __thread long threaded_pending BRISK_TLS;

void _bk_segment_threaded(long bytes) { counter_step(&threaded_bytes, &threaded_pending, bytes, THREADED_STEP); }

void _bk_segment_threaded_flush(void) { counter_flush(&threaded_bytes, &threaded_pending); }

/* (Below zero for a moment when one thread's frees are added before the
 * extensions another still holds back.) */
size_t _bk_segment_threaded_bytes(void) {
  size_t bytes = atomic_load_explicit(&threaded_bytes, memory_order_relaxed);
  return (ptrdiff_t)bytes < 0 ? 0 : bytes;
}

static long page_threaded(const page_t *pg) { return (long)((size_t)pg->capacity * pg->block_size); }

/* A heap's mapped_bytes counts the pages (and huge blocks) it holds. */
void _bk_segment_pages_delta(segment_t *seg, long pages) {
  if (seg->heap)
    atomic_fetch_add_explicit(&seg->heap->mapped_bytes, (size_t)(pages * ((long)1 << seg->page_shift)),
                              memory_order_relaxed);
}

/* ---- What a segment may hold resident ----------------------------------- *
 * In 64ths of the segment (64 KiB), whatever its pages' size: a segment
 * taken from the cache for another kind keeps what it touched before. */
#define RESIDENT_SHIFT (SEGMENT_SHIFT - 6)

static uint64_t resident_bits(const segment_t *seg, const uint8_t *start, size_t len, bool whole) {
  if (len == 0) return 0;
  size_t from = (size_t)(start - (const uint8_t *)seg), to = from + len; /* [from, to) */
  size_t first = whole ? (from + ((size_t)1 << RESIDENT_SHIFT) - 1) >> RESIDENT_SHIFT : from >> RESIDENT_SHIFT;
  size_t last = whole ? to >> RESIDENT_SHIFT : (to + ((size_t)1 << RESIDENT_SHIFT) - 1) >> RESIDENT_SHIFT;
  if (last <= first) return 0;
  uint64_t upto = last >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << last) - 1;
  return upto & ~(((uint64_t)1 << first) - 1);
}

/* The 64ths the page's threaded blocks reach (it touches no further). */
uint64_t _bk_page_resident_bits(segment_t *seg, const page_t *pg) {
  size_t area, used = (size_t)pg->capacity * pg->block_size;
  uint8_t *start = page_area(seg, (size_t)(pg - seg->pages), &area);
  return resident_bits(seg, start, used < area ? used : area, false);
}

static void segment_setup(segment_t *seg, heap_t *h, unsigned kind) {
  seg->page_shift = kind_page_shift[kind];
  seg->page_count = (uint32_t)(SEGMENT_SIZE >> seg->page_shift);
  seg->pages_in_use = 0;
  seg->free_page_mask = seg->page_count == 64 ? ~(uint64_t)0 : (((uint64_t)1 << seg->page_count) - 1);
  segment_free_class_clear(seg);
  for (uint32_t i = 0; i < seg->page_count; i++) {
    PUBLISH(seg->pages[i].in_use, 0);
    PUBLISH(seg->pages[i].needs_purge, 0);
    page_secure_update(&seg->pages[i]);
    if (!page_is_usable(seg, i)) seg->free_page_mask &= ~((uint64_t)1 << i);
  }
  PUBLISH(seg->heap, h);
  PUBLISH(seg->of_explicit_heap, (uint8_t)h->is_explicit);
  PUBLISH(seg->kind, (uint8_t)kind);
  PUBLISH(seg->state, SEG_STATE_OWNED);
  atomic_store_explicit(&seg->owner_uid, h->uid, memory_order_release);
}

static segment_t *segment_new(heap_t *h, unsigned kind) {
  segment_t *seg = _bk_segment_cache_take(SEGMENT_SIZE, SEGMENT_SIZE, kind, 0);
  stat_add(seg ? &h->stat_cache_hits : &h->stat_cache_misses, 1);
  bool fresh = !seg;
  if (fresh && !(seg = _bk_segment_map(SEGMENT_SIZE, SEGMENT_SIZE, 0))) return NULL;
  seg->block_offset = 0;
  if (fresh || seg->purged) seg->resident_mask = 1; /* the header's 64th */
  PUBLISH(seg->purged, 0);
  segment_setup(seg, h, kind);
  list_push_front(&h->segments[kind], &seg->link);
  return seg;
}

/* A free page of `kind` from h's segments, or from a new segment. */
page_t *_bk_segment_page_alloc(heap_t *h, unsigned kind) {
  if (!heap_may_map(h, (size_t)1 << kind_page_shift[kind])) return NULL;
  segment_t *seg = LIST_FIRST(&h->segments[kind], segment_t, link);
  if (!seg || !seg->free_page_mask) seg = segment_new(h, kind);
  if (!seg) return NULL;
  unsigned idx = (unsigned)__builtin_ctzll(seg->free_page_mask);
  seg->free_page_mask &= ~((uint64_t)1 << idx);
  seg->pages_in_use++;
  _bk_segment_pages_delta(seg, 1);
  if (!seg->free_page_mask) list_move_to_back(&h->segments[kind], &seg->link);
  page_t *pg = &seg->pages[idx];
  BRISK_ASSERT(!pg->in_use);
  PUBLISH(pg->needs_purge, 0);
  return pg;
}

/* The page holds no block any more: it is free in its segment, dirty until
 * a purge gives its memory back. */
void _bk_segment_page_freed(segment_t *seg, page_t *pg) {
  size_t idx = (size_t)(pg - seg->pages);
  BRISK_ASSERT(pg->in_use && !((seg->free_page_mask >> idx) & 1) && seg->pages_in_use > 0);
  PUBLISH(pg->in_use, 0);
  segment_free_class_set(seg, idx, FREE_CODE_SLOW); /* a free into a free page goes the slow way */
  page_secure_update(pg);
  PUBLISH(pg->needs_purge, 1);
  seg->resident_mask |= _bk_page_resident_bits(seg, pg);
  pg->idle_since_ms = _bk_os_now_ms();
  pg->free = pg->local_free = NULL;
  seg->free_page_mask |= (uint64_t)1 << idx;
  seg->pages_in_use--;
  _bk_segment_pages_delta(seg, -1);
  _bk_segment_threaded(-page_threaded(pg));
}

/* For the full assertions: a page given back holds every block it threaded
 * on its lists. A link that leads out of the page is the program's doing
 * (a write after free), reported as the secure library reports it when it
 * pops such a link, not as brisk's own failure. */
static inline bool lists_hold_every_block(const page_t *pg) {
  const void *bad = NULL;
  long n = _bk_page_list_walk(pg, pg->free, NULL, &bad);
  long m = bad ? 0 : _bk_page_list_walk(pg, pg->local_free, NULL, &bad);
  if (BRISK_SECURE && bad) _bk_secure_corrupted_link(pg->start, bad);
  return n + m == (long)pg->capacity;
}

/* Gives the page back to its segment, and the segment to the cache once
 * empty (keeping one per kind for reuse). */
void _bk_segment_page_release(heap_t *h, page_t *pg) {
  segment_t *seg = segment_of(pg);
  list_t *list = &h->segments[seg->kind];
  BRISK_ASSERT(page_used(pg) == 0);
  BRISK_ASSERT_FULL(lists_hold_every_block(pg));
  _bk_segment_page_freed(seg, pg);
  list_move_to_front(list, &seg->link);
  if (seg->pages_in_use == 0 && seg->link.next) {
    list_remove(list, &seg->link);
    _bk_segment_release(seg);
  }
}

/* ---- Segments without a heap -------------------------------------------- */

/* To the segment cache, or to the OS when the cache is full. */
void _bk_segment_release(segment_t *seg) {
  /* Relaxed: nobody owns it now, and whoever takes it next from the cache
   * gets it through the cache slot's acquire. */
  atomic_store_explicit(&seg->owner_uid, 0, memory_order_relaxed);
  _bk_segment_pages_delta(seg, -(long)seg->pages_in_use);
  /* (An explicit heap's destroy releases segments with pages in use.) */
  if (seg->kind != SEG_HUGE)
    for (uint32_t i = 0; seg->pages_in_use && i < seg->page_count; i++)
      if (seg->pages[i].in_use) _bk_segment_threaded(-page_threaded(&seg->pages[i]));
  PUBLISH(seg->heap, NULL);
  if (!_bk_segment_cache_put(seg)) _bk_segment_unmap(seg);
}

/* A large page's blocks (80 KiB to 1 MiB, up to 51 in its 4 MiB) that sit
 * free while others of the page stay live: the page is never free, so
 * the purge of free pages below never gives them back, and a program that freed
 * nine in ten of its 300 KiB buffers kept 224 of its 298 MiB resident (the
 * pages of the live tenth; glibc, whose mmap serves such sizes, 32). Each
 * purge tick of the owner gives back, past the first OS page (the lists'
 * and the secure library's words), the blocks that were free on the
 * page's lists at the tick before too and were not handed out since
 * (page_pop_slow, heap.c): idle for half a purge delay to a whole one. The
 * class's current page too: it stays in use when its last block is freed,
 * and perl, whose strings grow through these classes, held 6 MiB more than
 * glibc at its peak in such pages while they held no live block; a block
 * that the class's mallocs keep taking is never idle for a tick. Not in the
 * checked library: its freed blocks keep a pattern that it verifies when
 * it hands them out again. */
static void purge_free_blocks(segment_t *seg, bool force) {
  page_t *pg = &seg->pages[0];
  if (BRISK_CHECKED || seg->kind != SEG_LARGE || !pg->in_use) return;
  BRISK_ASSERT(pg->capacity <= 64);
  uint64_t free_bits = 0;
  if (_bk_page_list_walk(pg, pg->free, &free_bits, NULL) < 0 ||
      _bk_page_list_walk(pg, pg->local_free, &free_bits, NULL) < 0)
    return; /* (a corrupted list: the secure library reports it where it is used) */
  uint64_t due = free_bits & ~seg->blocks_purged & (force ? ~(uint64_t)0 : seg->blocks_free_seen);
  size_t kept = 4 * sizeof(void *);
  for (; due; due &= due - 1) {
    unsigned i = (unsigned)__builtin_ctzll(due);
    uint8_t *b = pg->start + (size_t)i * pg->block_size;
    if (_bk_memory_purge(b + kept, pg->block_size - kept)) seg->blocks_purged |= (uint64_t)1 << i;
  }
  seg->blocks_free_seen = free_bits;
  seg->blocks_purged &= free_bits;
}

/* Purges free pages that have been idle for the purge delay (all with force).
 * Neighbouring pages are given back in one call. With h, the segment's
 * owner, also the idle free blocks of a large page. */
void _bk_segment_purge_pages(heap_t *h, segment_t *seg, uint64_t now, bool force) {
  if (h) purge_free_blocks(seg, force);
  uint32_t run_first = 0;
  uint8_t *run = NULL;
  size_t run_len = 0;
  for (uint32_t i = 0; i <= seg->page_count; i++) {
    page_t *pg = i < seg->page_count ? &seg->pages[i] : NULL;
    if (pg && !pg->in_use && pg->needs_purge &&
        (force || ms_since(now, pg->idle_since_ms) >= _bk_opt.purge_delay_ms)) {
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
    if (run && _bk_memory_purge(run, run_len)) {
      for (uint32_t k = run_first; k < i; k++) PUBLISH(seg->pages[k].needs_purge, 0);
      seg->resident_mask &= ~resident_bits(seg, run, run_len, true);
    }
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
      for (size_t off = 0; off < SEGMENT_SIZE - guard_size(); off += OS_PAGE_SIZE)
        if (off < sizeof(segment_t) || off >= segment_data_offset(false)) ((volatile uint8_t *)seg)[off] = 0;
    if (!_bk_segment_cache_put(seg)) {
      _bk_segment_unmap(seg);
      break;
    }
    placed += SEGMENT_SIZE;
  }
  return placed < bytes ? placed : bytes;
}
