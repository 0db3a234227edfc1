/* The core layer: the allocator itself. Data in types.h, the fast path in
 * fast_path.h; this header declares every core function, by file, roughly
 * lowest first (docs/design.md has the exact order and the one cycle,
 * around purge.c, that scripts/layers.py reports). The layers above
 * (extra/, api/) use what is marked "for the layers above"; the rest is
 * core's own. Core defines no public symbol: brisk.h is implemented in
 * extra/ and api/. */
#ifndef BRISK_CORE_H
#define BRISK_CORE_H

#include "core/types.h"
#include "core/locate.h"
#include "core/secure.h"
#include "core/checked_block.h"

/* ---- state.c: what every file reads (types.h declares it) -------------- */

/* ---- size_class.c: the size classes ------------------------------------- */
BRISK_INTERNAL size_t _bk_class_size(unsigned cls);
BRISK_INTERNAL unsigned _bk_class_segment_kind(unsigned cls);
BRISK_INTERNAL void _bk_size_class_init(void);

/* ---- chunk_map.c: which addresses are brisk's ---------------------------- */
BRISK_INTERNAL void _bk_chunk_map_mark(const void *header, size_t from, size_t to, bool on);

/* ---- memory.c: mapped bytes, within the cap (BRISK_MAX_BYTES) ----------- */
/* NULL when the cap (then *over_cap) or the OS refuses; nothing released. */
BRISK_INTERNAL void *_bk_memory_map(size_t size, size_t align, size_t skew, bool *over_cap);
BRISK_INTERNAL void _bk_memory_unmap(void *p, size_t size);
BRISK_INTERNAL bool _bk_memory_purge(void *p, size_t size);
/* A segment's mapping resized in place, or moved (no copy) onto target, a
 * fresh mapping of new_size, with the secure library's guards. False: no change. */
BRISK_INTERNAL bool _bk_memory_resize(void *p, size_t old_size, size_t new_size);
BRISK_INTERNAL bool _bk_memory_move(void *p, size_t old_size, void *target, size_t new_size);
BRISK_INTERNAL void _bk_memory_cap_refused(size_t size);
BRISK_INTERNAL void _bk_memory_set_cap(size_t bytes); /* for the layers above */
BRISK_INTERNAL size_t _bk_memory_cap(void);           /* for the layers above */
BRISK_INTERNAL size_t _bk_memory_mapped(void);        /* for the layers above */
BRISK_INTERNAL size_t _bk_memory_peak(void);          /* for the layers above */

/* ---- registry.c: every mapped segment (for the layers above: walks) ---- */
BRISK_INTERNAL void _bk_segments_add(segment_t *seg);
BRISK_INTERNAL void _bk_segments_remove(segment_t *seg);
BRISK_INTERNAL void _bk_segments_lock(void);
BRISK_INTERNAL void _bk_segments_unlock(void);
BRISK_INTERNAL segment_t *_bk_segments_first(void);
BRISK_INTERNAL segment_t *_bk_segments_next(segment_t *seg);

/* ---- page.c: a page's blocks and its owner's lists ---------------------- */
BRISK_INTERNAL void _bk_page_init(page_t *pg, segment_t *seg, unsigned cls, heap_t *h);
BRISK_INTERNAL void _bk_page_extend(page_t *pg);
BRISK_INTERNAL void _bk_page_collect(page_t *pg);
BRISK_INTERNAL block_t *_bk_page_block_start(const page_t *pg, const void *p);
/* p is the start of one of the blocks the page has threaded so far. */
static inline bool page_has_block_at(const page_t *pg, const void *p) {
  const uint8_t *q = (const uint8_t *)p;
  return q >= pg->start && q < pg->start + (size_t)pg->capacity * pg->block_size &&
      (size_t)(q - pg->start) % pg->block_size == 0;
}
enum { PAGE_LIST_OUTSIDE = -1, PAGE_LIST_LOOPS = -2 };
BRISK_INTERNAL long _bk_page_list_walk(const page_t *pg, const block_t *b, uint64_t *free_bits, const void **bad);

/* ---- remote_free.c: blocks freed by other threads ----------------------- */
BRISK_INTERNAL bool _bk_page_set_delayed(page_t *pg, enum delayed_state want, bool only_if_empty);
BRISK_INTERNAL void _bk_page_free_remote(page_t *pg, block_t *b);
BRISK_INTERNAL void _bk_page_fork_gate_close(void);
BRISK_INTERNAL void _bk_page_fork_gate_open(bool in_child);

/* ---- Counters every thread steps ---------------------------------------- *
 * A sum that threads change often and that the caches read as a hint (the
 * bytes blocks have touched): a thread with a heap adds its changes to
 * *pending, its own, and to *total only once they reach `step` either way
 * (and at its exit), so that no malloc or free waits for a shared line: an
 * add per huge block alloc and free took 83% of a 4 MiB malloc-free loop on
 * two threads. The error is below `step` per live thread. */
static inline void counter_step(_Atomic(size_t) *total, long *pending, long delta, long step) {
  if (_bk_tls_heap != &_bk_heap_empty) {
    long held = *pending + delta;
    if (held > -step && held < step) {
      *pending = held;
      return;
    }
    *pending = 0;
    delta = held;
  }
  atomic_fetch_add_explicit(total, (size_t)delta, memory_order_relaxed);
}

/* The thread's changes not yet added (at its exit). */
static inline void counter_flush(_Atomic(size_t) *total, long *pending) {
  atomic_fetch_add_explicit(total, (size_t)*pending, memory_order_relaxed);
  *pending = 0;
}

/* ---- segment.c: segments and the pages in them -------------------------- */
BRISK_INTERNAL segment_t *_bk_segment_map(size_t size, size_t align, size_t skew);
BRISK_INTERNAL void *_bk_segment_map_space(size_t size);
BRISK_INTERNAL void _bk_segment_mark(segment_t *seg, bool on);
BRISK_INTERNAL void _bk_segment_unmap(segment_t *seg);
BRISK_INTERNAL page_t *_bk_segment_page_alloc(heap_t *h, unsigned kind);
BRISK_INTERNAL void _bk_segment_page_release(heap_t *h, page_t *pg);
BRISK_INTERNAL void _bk_segment_page_freed(segment_t *seg, page_t *pg);
BRISK_INTERNAL void _bk_segment_pages_delta(segment_t *seg, long pages);
BRISK_INTERNAL void _bk_segment_threaded(long bytes);
BRISK_INTERNAL size_t _bk_segment_threaded_bytes(void);
BRISK_INTERNAL void _bk_segment_threaded_flush(void);
BRISK_INTERNAL uint64_t _bk_page_resident_bits(segment_t *seg, const page_t *pg);
BRISK_INTERNAL void _bk_segment_release(segment_t *seg);
BRISK_INTERNAL void _bk_segment_purge_pages(heap_t *h, segment_t *seg, uint64_t now, bool force);
BRISK_INTERNAL size_t _bk_segment_reserve(size_t bytes);

/* ---- cache_policy.c: how much the caches keep unpurged ------------------ */
BRISK_INTERNAL void _bk_cache_note_huge_live(long delta);
BRISK_INTERNAL void _bk_cache_huge_live_flush(void);
BRISK_INTERNAL size_t _bk_cache_in_use_recently(uint64_t now, size_t cached, size_t *touched);
/* A block of `bytes` taken back from a cache: purged or not, cached when. */
BRISK_INTERNAL void _bk_cache_note_reuse(bool purged, size_t bytes, uint64_t cached_at, uint64_t now);
BRISK_INTERNAL bool _bk_cache_group_end_purges(uint64_t now); /* a group's end purges now (purge.c) */
BRISK_INTERNAL void _bk_cache_group_end_purged(uint64_t now);
BRISK_INTERNAL void _bk_cache_rebuild_end(void);
/* What a cache may keep unpurged: `times` the live huge bytes, at least `floor`; rebuilding, `rebuilding`. */
BRISK_INTERNAL size_t _bk_cache_dirty_allowance(size_t floor, unsigned times, size_t rebuilding, uint64_t now);

/* ---- segment_cache.c: free segments any thread may take ---------------- */
/* The shared cache holds BRISK_RESERVE in a quarter of its slots at most,
 * leaving the rest to a working set of huge blocks freed and built again. */
#define SEGMENT_CACHE_SLOTS 1024
#define RESERVE_MAX ((size_t)SEGMENT_CACHE_SLOTS / 4 * SEGMENT_SIZE)
/* Unpurged, the shared cache holds at least this share of the cap (and the
 * reserve); a thread's warm huge blocks, its hot block and at least this
 * much beside it. More while huge blocks are live (_bk_cache_dirty_allowance). */
#define SHARED_DIRTY_SHARE 128
#define WARM_DIRTY ((size_t)4 << 20)
/* Returns 1 + the slot's index, or 0 when all n are taken. */
BRISK_INTERNAL size_t _bk_slots_put(cache_slot_t *slots, size_t n, segment_t *seg, uint64_t since);
/* flags: SLOTS_COUNTED (the shared cache's slots), SLOTS_UNPURGED_ONLY,
 * SLOTS_LARGEST (the biggest huge block in the range, not the smallest). */
#define SLOTS_COUNTED 1u
#define SLOTS_UNPURGED_ONLY 2u
#define SLOTS_LARGEST 4u
BRISK_INTERNAL segment_t *_bk_slots_take(cache_slot_t *slots, size_t n, size_t min_size, size_t max_size,
                                         unsigned kind, unsigned flags);
BRISK_INTERNAL void _bk_slots_trim_dirty(cache_slot_t *slots, size_t n, size_t budget);

BRISK_INTERNAL bool _bk_slots_purge(cache_slot_t *slots, size_t n, uint64_t now, bool force, bool counted);
BRISK_INTERNAL bool _bk_segment_cache_put(segment_t *seg);
/* flags: SLOTS_LARGEST or 0 */
BRISK_INTERNAL segment_t *_bk_segment_cache_take(size_t min_size, size_t max_size, unsigned kind, unsigned flags);
BRISK_INTERNAL void _bk_segment_cache_purge(uint64_t now, bool force);
BRISK_INTERNAL void _bk_segment_cache_purge_all(void);
BRISK_INTERNAL size_t _bk_segment_cache_bytes(void);

/* ---- abandon.c: segments of exited threads ------------------------------ */
BRISK_INTERNAL void _bk_abandon(segment_t *seg);
BRISK_INTERNAL segment_t *_bk_abandoned_pop(unsigned kind);
BRISK_INTERNAL void _bk_abandoned_trim(size_t keep);
BRISK_INTERNAL void _bk_abandoned_push(segment_t *seg);
BRISK_INTERNAL uint32_t _bk_segment_collect_pages(segment_t *seg, heap_t *adopter);
BRISK_INTERNAL bool _bk_abandoned_adopt(heap_t *h, unsigned kind);
BRISK_INTERNAL size_t _bk_abandoned_drain(bool force);
/* For the layers above: fn on each abandoned segment, held off the list
 * meanwhile, until fn returns nonzero (which this returns). */
BRISK_INTERNAL int _bk_abandoned_foreach(int (*fn)(segment_t *, void *), void *arg);
BRISK_INTERNAL void _bk_abandoned_lock(void);
BRISK_INTERNAL void _bk_abandoned_unlock(void);

/* ---- page_queue.c: a heap's pages and frees of its own blocks ---------- */
static inline page_t *heap_queue_first(heap_t *h, unsigned cls) {
  return LIST_FIRST(&h->queues[cls], page_t, link);
}
/* The page its class allocates from (a compare of links, on the free path). */
static inline bool heap_is_current(heap_t *h, page_t *pg) { return h->queues[pg->size_class].first == &pg->link; }
BRISK_INTERNAL void _bk_heap_queue_push(heap_t *h, page_t *pg);
BRISK_INTERNAL void _bk_heap_queue_push_front(heap_t *h, page_t *pg);
BRISK_INTERNAL void _bk_heap_queue_to_front(heap_t *h, page_t *pg);
BRISK_INTERNAL void _bk_heap_page_to_full(heap_t *h, page_t *pg);
BRISK_INTERNAL void _bk_heap_page_emptied(heap_t *h, page_t *pg);
BRISK_INTERNAL void _bk_heap_release_empty(heap_t *h, uint64_t kept_before);
BRISK_INTERNAL void _bk_heap_free_local(heap_t *h, page_t *pg, block_t *b);
/* A block of pg back from its owner's thread: true when that leaves the
 * blocks in use below the page's alarm. It is the next block the page hands
 * out (LIFO), while its lines are still in the cache (a 1 KiB malloc-free
 * loop cycling through the 16 KiB a page threads at a time took 0.41 s per
 * 100 M pairs, 0.28 reusing one block); in the secure library, once the
 * page's list runs dry: not next, as a use after free would count on. */
static inline __attribute__((always_inline)) bool page_take_back(page_t *pg, block_t *b) {
#if BRISK_SECURE
  link_set(b, pg->local_free);
  pg->local_free = b;
#else
  link_set(b, pg->free);
  pg->free = b;
#endif
  return PUBLISH_ADD(pg->used_past_alarm, -1) < 0;
}

/* pg's other list (remote frees; the secure library's owner's too) becomes its next blocks
 * (pg->free is empty), without atomics; false if not (secure_last_freed_second). */
static inline bool page_reuse_local(page_t *pg) {
  if (!(pg->free = secure_last_freed_second(pg, pg->local_free))) return false;
  pg->local_free = NULL;
  return true;
}

/* Blocks of pg handed out and not yet known to be free. */
static inline uint32_t page_used(const page_t *pg) {
  return (uint32_t)(PEEK(pg->used_past_alarm) + (int32_t)PEEK(pg->free_alarm));
}

/* Sets pg's flags, and with them the count of blocks in use below which
 * an owner's free takes the slow path (free_fast, _bk_heap_free_local):
 *   - on a page in its queue, 1: its last block came back;
 *   - on the current page, 0 (never): it stays anyway;
 *   - on a page parked as full, the count at which a sixteenth of its
 *     blocks (at least one) are free, and it goes back to its queue; not at
 *     the first: with many blocks live and frees scattered over the pages,
 *     a page back in its queue at each free held a block or two, and malloc
 *     took its slow path, moving pages between the lists, about once a
 *     call. Left unused meanwhile: at most a sixteenth of the full pages'
 *     blocks.
 * So a free tests the sign of the count it steps, whatever the page: a
 * branch on the flags went three ways at random where frees land on many
 * pages (a loop replacing random blocks of 1000 live, 8 B-1 KiB, took
 * twice mimalloc's time), and a compare with the alarm made the count a
 * load and a store where it is one add to memory (the secure library's
 * malloc-free loop took 20% longer). Another thread may read the count
 * and the alarm between the two stores here: statistics, which are a
 * moment's view anyway. */
/* The release library's free_class code of a page with these flags, of
 * class cls: the offset of the class's hot stack in heap_t.hot, in words
 * (even: a hot_list_t is a multiple of 4 words, and x86-64 and arm64 scale
 * an index by 8 in the address, so the free needs no multiply), plus
 * FREE_CODE_SLOW when its blocks count against the heap's bound
 * (PAGE_BIG); FREE_CODE_SLOW alone when they do not go on the stack as
 * they are (PAGE_COLD, PAGE_HAS_ALIGNED). */
#define HOT_LIST_WORDS (sizeof(hot_list_t) / sizeof(void *))
static inline uint8_t free_class_code(uint8_t flags, unsigned cls) {
#if !BRISK_SECURE
  _Static_assert(sizeof(hot_list_t) % (2 * sizeof(void *)) == 0, "codes of a hot stack are even");
  _Static_assert((CLASS_COUNT - 1) * HOT_LIST_WORDS + FREE_CODE_SLOW <= UINT8_MAX, "codes fit a byte");
#endif
  if (flags & (PAGE_COLD | PAGE_HAS_ALIGNED)) return FREE_CODE_SLOW;
  unsigned code = cls * (unsigned)HOT_LIST_WORDS;
  return (uint8_t)(flags & PAGE_BIG ? code | FREE_CODE_SLOW : code);
}

/* The hot stack an even free_class code names (an odd one's, less
 * FREE_CODE_SLOW). */
static inline hot_list_t *hot_of_code(heap_t *h, unsigned even_code) {
  return (hot_list_t *)((void **)h->hot + even_code);
}

static inline void page_flags_set(page_t *pg, uint8_t flags) {
  uint32_t n = pg->reserved, was = pg->free_alarm;
  uint32_t alarm = flags & PAGE_IN_FULL ? n - (n + 15) / 16 + 1 : flags & PAGE_CURRENT ? 0 : 1;
  PUBLISH(pg->flags, flags);
  segment_t *seg = segment_base(pg);
  segment_free_class_set(seg, (size_t)(pg - seg->pages), free_class_code(flags, pg->size_class));
  PUBLISH(pg->used_past_alarm, (int32_t)(pg->used_past_alarm + (int32_t)was - (int32_t)alarm));
  PUBLISH(pg->free_alarm, alarm);
}
BRISK_INTERNAL void _bk_heap_page_unfull(heap_t *h, page_t *pg);
BRISK_INTERNAL void _bk_heap_page_alarm(heap_t *h, page_t *pg);
BRISK_INTERNAL void _bk_heap_block_alarm(void *p);
BRISK_INTERNAL void _bk_heap_take_delayed(heap_t *h);

/* ---- transfer.c: other threads' small blocks, shared in batches --------- */
BRISK_INTERNAL void _bk_transfer_classes_init(void); /* once, at process start */
/* Whether a free of a block of pg (in seg, which another heap owns) goes
 * to the transfer cache: then _bk_transfer_free(h, class, block) on the
 * freeing thread's heap h; else the caller frees it remotely. */
BRISK_INTERNAL bool _bk_transfer_wants(const segment_t *seg, const page_t *pg, const heap_t *freeing);
BRISK_INTERNAL void _bk_transfer_free(heap_t *h, unsigned cls, block_t *b);
/* A block of class cls from the transfer cache, or NULL. */
BRISK_INTERNAL void *_bk_transfer_malloc(heap_t *h, unsigned cls, size_t size);
BRISK_INTERNAL void _bk_transfer_flush_heap(heap_t *h);
BRISK_INTERNAL void _bk_transfer_drain(bool force);
BRISK_INTERNAL void _bk_transfer_drain_orphans(void);
BRISK_INTERNAL size_t _bk_transfer_cached_blocks(unsigned cls);
BRISK_INTERNAL void _bk_transfer_fork_lock(void);
BRISK_INTERNAL void _bk_transfer_fork_unlock(void);

/* ---- hot.c: a heap's recently freed blocks, reused first ---------------- */
BRISK_INTERNAL uint8_t _bk_hot_flags(unsigned cls); /* a fresh page's of cls */
BRISK_INTERNAL void _bk_hot_classes_init(void);     /* once, at process start */
BRISK_INTERNAL size_t _bk_hot_count(const hot_list_t *hl);
BRISK_INTERNAL void _bk_hot_init(heap_t *h);
BRISK_INTERNAL void _bk_hot_flush(heap_t *h);
BRISK_INTERNAL void _bk_free_to_page(void *p); /* a block of a paged segment the thread owns */
BRISK_INTERNAL long _bk_hot_walk(heap_t *h, unsigned cls, const void **bad);

/* ---- stack.c: call stacks (checked library) ----------------------------- */
/* The frame of an entry point of the checked library: a stack taken below
 * it starts at the entry point's caller. */
#define STACK_HERE() ((const void *)__builtin_frame_address(0))
#define STACK_MAX 32        /* frames printed for the call that found a misuse */
#define STACK_RECORD_MAX 16 /* frames kept for an allocation or a free */
/* The return addresses of the callers of `entry` (a STACK_HERE()), up to max. */
BRISK_INTERNAL size_t _bk_stack_capture(const void *entry, uintptr_t *pc, size_t max);
/* The stack of the callers of `entry`, kept once in a depot: its id, or 0
 * when none was recorded (BRISK_STACK_DEPTH=0, a full depot, or a brisk
 * lock held). */
BRISK_INTERNAL uint32_t _bk_stack_record(const void *entry);
BRISK_INTERNAL size_t _bk_stack_get(uint32_t id, uintptr_t *pc, size_t max);
/* "  title:" and a line per frame: address, symbol+offset, module+offset. */
BRISK_INTERNAL void _bk_stack_print(int fd, const char *title, const uintptr_t *pc, size_t n);
BRISK_INTERNAL void _bk_stack_print_id(int fd, const char *title, uint32_t id);

/* ---- checked_block.c: what the checked library keeps in a block: checked_block.h */

/* ---- heap.c: the allocation and free slow paths ------------------------- */
BRISK_INTERNAL void *_bk_heap_malloc_generic(heap_t *h, size_t size);
BRISK_INTERNAL void *_bk_heap_malloc_own_page(heap_t *h, size_t size); /* not other threads' blocks */
BRISK_INTERNAL void _bk_heap_free_generic(segment_t *seg, void *p);
/* The heap's periodic work, due after HEAP_BEAT_BYTES handed out by the
 * fast paths: returns b, the block malloc hands out (so that the fast path
 * jumps here as its last act, and keeps no register across a call). */
BRISK_INTERNAL block_t *_bk_heap_heartbeat(heap_t *h, block_t *b);

/* Counts a request of size bytes handed out by a fast path: true when the
 * heartbeat is due. One subtract from memory and a test of its sign: a
 * page's owner frees feed its next mallocs (page_take_back), so a program
 * may never reach the slow path, whose work (the purge timer) must still
 * run. */
static inline __attribute__((always_inline)) bool heap_count_request(heap_t *h, size_t size) {
  return PUBLISH_ADD(h->beat_budget, -(int64_t)size) < 0;
}

/* The bytes requested from h: those counted up to its last heartbeat, and
 * those since (exact on the owner's thread; another thread's read that
 * meets a heartbeat may be off by up to HEAP_BEAT_BYTES). */
static inline uint64_t heap_requested(const heap_t *h) {
  return PEEK(h->stat_requested) + (uint64_t)(HEAP_BEAT_BYTES - PEEK(h->beat_budget));
}

/* ---- heap_life.c: heaps created, registered, destroyed ------------------ */
BRISK_INTERNAL heap_t *_bk_heap_create(bool is_explicit);
BRISK_INTERNAL void _bk_heap_unregister(heap_t *h);
BRISK_INTERNAL size_t _bk_heaps_live(void);
BRISK_INTERNAL size_t _bk_thread_heaps_live(void); /* (explicit heaps not counted) */
BRISK_INTERNAL void _bk_heap_release_all(heap_t *h);
BRISK_INTERNAL void _bk_heap_collect_idle(heap_t *h, uint64_t now, bool force);
BRISK_INTERNAL void _bk_heap_collect_own(bool force);
BRISK_INTERNAL void _bk_heap_foreach(void (*fn)(heap_t *, void *), void *arg);
/* Counters of heaps gone: requested, cache hits, cache misses, thread exits. */
BRISK_INTERNAL void _bk_heap_exited_totals(uint64_t out[4]);
BRISK_INTERNAL void _bk_heap_fork_lock(void);
BRISK_INTERNAL void _bk_heap_fork_unlock(void);

/* A bounded (explicit) heap refuses to hold more than max_bytes. */
static inline bool heap_may_map(heap_t *h, size_t bytes) {
  if (!h->max_bytes) return true;
  if (atomic_load_explicit(&h->mapped_bytes, memory_order_relaxed) + bytes <= h->max_bytes) return true;
  errno = ENOMEM;
  return false;
}

/* ---- huge.c: blocks above the largest class ----------------------------- */
BRISK_INTERNAL void *_bk_huge_alloc(heap_t *h, size_t size, size_t align, bool zero);
BRISK_INTERNAL void _bk_huge_free(segment_t *seg);
BRISK_INTERNAL void *_bk_huge_realloc(segment_t *seg, void *p, size_t size, size_t align);
BRISK_INTERNAL void _bk_huge_purge_warm(heap_t *h, uint64_t now, bool force);
BRISK_INTERNAL void _bk_huge_release_heap_blocks(heap_t *h);

/* ---- purge.c: memory back to the OS ------------------------------------- */
/* Locks of brisk's this thread holds around calls that may allocate or free
 * (pool carving, a pool's thread exit, a purge pass, a walk of the heap
 * registry): no pass and no helper thread starts under them. */
extern __thread int _bk_locks_held BRISK_TLS BRISK_INTERNAL;
BRISK_INTERNAL void _bk_purge_note_pending(void);
BRISK_INTERNAL void _bk_purge_maybe(heap_t *h);
BRISK_INTERNAL void _bk_purge_tick(uint64_t now);
BRISK_INTERNAL void _bk_purge_thread_exited(bool group_ended);
BRISK_INTERNAL void _bk_purge_release_all(void);
BRISK_INTERNAL void _bk_purge_quiesce(void);
BRISK_INTERNAL void _bk_purge_fork_lock(void);
BRISK_INTERNAL void _bk_purge_fork_unlock(bool in_child);
BRISK_INTERNAL void _bk_collect(void); /* for the layers above */

/* ---- thread_exit.c: a thread's heap, made and ended -------------------- */
BRISK_INTERNAL heap_t *_bk_heap_get_initialized(void);
BRISK_INTERNAL void _bk_heap_thread_done(void *value);

/* ---- alloc.c: calloc, realloc, aligned, sizes, foreign pointers --------- */
BRISK_INTERNAL void _bk_free_slow(void *p);
BRISK_INTERNAL size_t _bk_usable_size(const void *p);
BRISK_INTERNAL void *_bk_block_start_of(const void *p);
BRISK_INTERNAL void *_bk_calloc_in(heap_t *h, size_t count, size_t size);
BRISK_INTERNAL void *_bk_realloc_in(heap_t *h, void *p, size_t size);
/* align: a power of two. */
BRISK_INTERNAL void *_bk_aligned_in(heap_t *h, size_t align, size_t size);
/* Whether realloc keeps a block that is aligned as asked (align 0 or a
 * power of two) where it is, with `room` bytes from p to its end: size fits
 * and a move would not give much back: the block is not twice too big, or
 * only by the padding a new aligned block would cost as well. */
static inline bool realloc_in_place(size_t room, size_t align, size_t size) {
  size_t padding = align > BLOCK_ALIGN ? align - 1 : 0;
  return size <= room && size + padding >= room / 2;
}
/* align: anything; NULL with errno = EINVAL (and p untouched) when it is
 * not a power of two. */
BRISK_INTERNAL void *_bk_calloc_aligned_in(heap_t *h, size_t count, size_t size, size_t align);
BRISK_INTERNAL void *_bk_realloc_aligned_in(heap_t *h, void *p, size_t align, size_t size);

/* ---- checked.c: the checked library's entry points ---------------------- *
 * Every allocation, free, realloc and size query of the checked library
 * comes here (fast_path.h, alloc.c): the checks, then the plain code. */
BRISK_INTERNAL void *_bk_checked_alloc(heap_t *h, size_t size, size_t align, bool zero);
BRISK_INTERNAL void _bk_checked_free(void *p);
BRISK_INTERNAL void _bk_checked_free_sized(void *p, size_t size, const char *fn, bool release_it);
/* C++'s operator new and new[] (align 0 or a power of two; NULL when out
 * of memory), and every operator delete and delete[] (sized or not): a block
 * must be freed the way it was allocated. */
BRISK_INTERNAL void *_bk_checked_new(size_t size, size_t align, enum alloc_kind kind);
BRISK_INTERNAL void _bk_checked_delete(void *p, size_t size, bool sized, enum alloc_kind kind);
/* align: 0 for realloc, else the power of two of realloc_aligned. */
BRISK_INTERNAL void *_bk_checked_realloc(heap_t *h, void *p, size_t align, size_t size);
BRISK_INTERNAL size_t _bk_checked_usable_size(const void *p);
/* An explicit heap about to drop all its blocks (destroy, reset): its live
 * blocks are marked freed by that call. For the layers above. */
BRISK_INTERNAL void _bk_checked_heap_drop(heap_t *h);
/* For visits (the layers above): a live block seen from inside brisk (its
 * start and size) as the program sees it, with the stack that allocated it;
 * false when the block is not live. */
BRISK_INTERNAL bool _bk_checked_user_block(void **block, size_t *size, uint32_t *alloc_stack);
/* The check at exit (extra/exit_check.c) of a block a walk found, as a free
 * (a live block: its canary) or a malloc (a free block handed out before:
 * its free pattern) would check it. */
BRISK_INTERNAL void _bk_checked_at_exit(void *block, bool is_free);

/* ---- options.c and process.c: knobs and start-up ----------------------- */
BRISK_INTERNAL int _bk_option_set(brisk_option_t opt, long long v);
BRISK_INTERNAL long long _bk_option_get(brisk_option_t opt);
BRISK_INTERNAL const char *_bk_option_name(brisk_option_t opt);
BRISK_INTERNAL void _bk_set_realtime(bool on);
BRISK_INTERNAL void _bk_options_read_environment(void);
/* The two halves of reading the environment, for tests (fuzz/fuzz_options.c)
 * as for the start: the verdict on one option's value (0 and *value set
 * when it would be applied; else EINVAL, after the one warning line), and
 * the warnings about unknown BRISK_ names among env's NAME=VALUE strings
 * (NULL-ended; returns how many). */
BRISK_INTERNAL int _bk_option_parse_env(brisk_option_t opt, const char *v, long long *value);
BRISK_INTERNAL int _bk_options_check_names(char *const *env);
BRISK_INTERNAL void _bk_process_init(void);
BRISK_INTERNAL extern _Atomic(int) _bk_process_ready;

#endif
