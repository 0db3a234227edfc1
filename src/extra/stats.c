/* Statistics: a snapshot assembled on request from what the allocator keeps
 * anyway (page counts, segment states, per-heap counters, OS call counts),
 * so the fast path pays nothing for it. */
#include "extra/extra.h"

#include <string.h>

_Static_assert(CLASS_COUNT <= BRISK_STATS_MAX_CLASSES, "brisk_stats_t has a slot per size class");

static unsigned tier_of_kind(unsigned kind) {
  return kind == SEG_SMALL ? BRISK_TIER_SMALL
      : kind == SEG_MEDIUM ? BRISK_TIER_MEDIUM
      : kind == SEG_LARGE  ? BRISK_TIER_LARGE
                           : BRISK_TIER_HUGE;
}

/* Blocks free but counted as used in their pages (on hot lists, on their
 * way through the transfer cache): taken off, before the pages are added
 * (modulo 2^64; see clamp_live). */
static void take_off_live(brisk_stats_t *st, unsigned cls, uint64_t n) {
  if (!n) return;
  size_t bytes = n * _bk_class_size(cls);
  brisk_tier_stats_t *t = &st->tiers[tier_of_kind(_bk_class_segment_kind(cls))];
  t->live_blocks -= n;
  t->in_use -= bytes;
  st->class_live_blocks[cls] -= n;
  st->thread_cached += bytes;
}

static void add_heap(heap_t *h, void *arg) {
  brisk_stats_t *st = arg;
  st->requested += heap_requested(h);
  st->cache_hits += PEEK(h->stat_cache_hits);
  st->cache_misses += PEEK(h->stat_cache_misses);
  if (h->is_explicit) st->explicit_heaps++;
  else st->thread_heaps++;
  for (unsigned cls = 1; cls < CLASS_COUNT; cls++)
    take_off_live(st, cls,
                  (uint64_t)_bk_hot_count(&h->hot[cls]) + PEEK(h->transfer_fill[cls].count) +
                      PEEK(h->transfer_take[cls].count));
}

/* A hot list read before its blocks' page moved on can leave a count
 * "below zero": it reads as none. */
static void clamp_live(uint64_t *v) {
  if ((int64_t)*v < 0) *v = 0;
}

/* free_chunks (mallinfo's ordblks): free slots of pages holding blocks, plus
 * one per free page not yet purged. */
static void add_paged_segment(brisk_stats_t *st, uint64_t *free_chunks, segment_t *seg, unsigned kind,
                              unsigned state) {
  brisk_tier_stats_t *t = &st->tiers[tier_of_kind(kind)];
  t->reserved += SEGMENT_SIZE;
  uint32_t pages = (uint32_t)(SEGMENT_SIZE >> (kind == SEG_SMALL        ? SMALL_PAGE_SHIFT
                                                   : kind == SEG_MEDIUM ? MEDIUM_PAGE_SHIFT
                                                                        : LARGE_PAGE_SHIFT));
  for (uint32_t i = 0; i < pages; i++) {
    page_t *pg = &seg->pages[i];
    size_t area;
    page_area(seg, i, &area);
    if (!PEEK(pg->in_use)) {
      if (PEEK(pg->needs_purge)) {
        t->committed += area;
        ++*free_chunks;
      }
      continue;
    }
    unsigned cls = PEEK(pg->size_class);
    uint64_t used = page_used(pg), slots = PEEK(pg->reserved);
    if (slots > used) *free_chunks += slots - used;
    t->committed += area;
    t->live_blocks += used;
    t->in_use += used * PEEK(pg->block_size);
    if (cls < BRISK_STATS_MAX_CLASSES) st->class_live_blocks[cls] += used;
    if (state == SEG_STATE_ABANDONED && used) st->abandoned_bytes += area;
  }
  if (state == SEG_STATE_ABANDONED) st->abandoned_segments++;
}

/* Cached segments count one free chunk each. */
int _bk_stats_collect(brisk_stats_t *st, uint64_t *free_chunks) {
  if (!st || st->version != BRISK_STATS_VERSION) return EINVAL;
  memset(st, 0, sizeof *st);
  st->version = BRISK_STATS_VERSION;
  st->class_count = CLASS_COUNT;
  for (unsigned c = 1; c < CLASS_COUNT; c++) st->class_size[c] = _bk_class_size(c);

  _bk_heap_foreach(add_heap, st);
  for (unsigned c = 1; c < CLASS_COUNT; c++) take_off_live(st, c, _bk_transfer_cached_blocks(c));
  uint64_t retired[4];
  _bk_heap_exited_totals(retired);
  st->requested += retired[0];
  st->cache_hits += retired[1];
  st->cache_misses += retired[2];
  st->threads_exited = retired[3];

  _bk_segments_lock();
  for (segment_t *seg = _bk_segments_first(); seg; seg = _bk_segments_next(seg)) {
    unsigned state = PEEK(seg->state), kind = PEEK(seg->kind);
    size_t mapped = PEEK(seg->mapped_size);
    if (state == SEG_STATE_CACHED) {
      st->cached += mapped;
      ++*free_chunks;
      if (!PEEK(seg->purged)) st->committed += PEEK(seg->cached_dirty); /* (what it holds resident) */
    } else if (state == SEG_STATE_HUGE) {
      brisk_tier_stats_t *t = &st->tiers[BRISK_TIER_HUGE];
      t->live_blocks++;
      t->in_use += huge_block_size(seg);
      t->committed += mapped;
      t->reserved += mapped;
    } else {
      add_paged_segment(st, free_chunks, seg, kind, state);
    }
  }
  _bk_segments_unlock();

  for (unsigned c = 0; c < CLASS_COUNT; c++) clamp_live(&st->class_live_blocks[c]);
  for (int t = 0; t < BRISK_TIER_COUNT; t++) {
    clamp_live(&st->tiers[t].live_blocks);
    clamp_live(&st->tiers[t].in_use);
    st->in_use += st->tiers[t].in_use;
    st->committed += st->tiers[t].committed;
    st->reserved += st->tiers[t].reserved;
  }
  st->reserved += st->cached;
  st->mapped = _bk_memory_mapped();
  st->peak_reserved = _bk_memory_peak();
  st->mmap_calls = _bk_os_call_count(OS_MMAP);
  st->munmap_calls = _bk_os_call_count(OS_MUNMAP);
  st->madvise_calls = _bk_os_call_count(OS_MADVISE);
  st->mremap_calls = _bk_os_call_count(OS_MREMAP);
  return 0;
}

int brisk_stats_get(brisk_stats_t *st) {
  uint64_t free_chunks = 0;
  if (st && st->version == 1) { /* a program built before thread_cached: its struct ends there */
    brisk_stats_t full = {.version = BRISK_STATS_VERSION};
    _bk_stats_collect(&full, &free_chunks);
    full.version = 1;
    memcpy(st, &full, offsetof(brisk_stats_t, thread_cached));
    return 0;
  }
  return _bk_stats_collect(st, &free_chunks);
}

/* ---- glibc's mallinfo2 and malloc_stats (meanings in brisk.h) ------------ */

void _bk_stats_mallinfo_from(const brisk_stats_t *st, uint64_t free_chunks, mallinfo_fields_t *mi) {
  const brisk_tier_stats_t *huge = &st->tiers[BRISK_TIER_HUGE];
  size_t tiers_committed = 0;
  for (int t = 0; t < BRISK_TIER_COUNT; t++) tiers_committed += st->tiers[t].committed;
  mi->keepcost = st->committed - tiers_committed; /* cached, not yet purged */
  mi->arena = st->committed - huge->committed;
  mi->uordblks = st->in_use - huge->in_use;
  /* Other threads change the pages while the snapshot is taken. */
  mi->fordblks = mi->arena > mi->uordblks ? mi->arena - mi->uordblks : 0;
  mi->ordblks = (size_t)free_chunks;
  mi->hblks = (size_t)huge->live_blocks;
  mi->hblkhd = huge->committed;
  mi->usmblks = st->peak_reserved;
}

void _bk_stats_mallinfo(mallinfo_fields_t *mi) {
  brisk_stats_t st = {.version = BRISK_STATS_VERSION};
  uint64_t free_chunks = 0;
  _bk_stats_collect(&st, &free_chunks);
  _bk_stats_mallinfo_from(&st, free_chunks, mi);
}
