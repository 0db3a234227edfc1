/* brisk internals: the data structures every other file shares.
 *
 * Memory comes from the OS in segments: 4 MiB-aligned mappings whose header
 * (struct segment) sits at the aligned start, so the owner of any block is
 * found by masking the pointer. A segment is carved into pages of one size
 * (64 KiB, 512 KiB or the whole segment); a page holds blocks of one size
 * class. Blocks above the largest class live alone in a "huge" segment.
 *
 * Each thread has a heap: per size class a queue of pages it allocates from.
 * Only the owning thread touches a page's free lists; other threads push
 * freed blocks onto the page's atomic thread_free list, which the owner
 * collects in batches. */
#ifndef BRISK_INTERNAL_H
#define BRISK_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <pthread.h>

#include "brisk.h"

#ifndef BRISK_CHECKED
#define BRISK_CHECKED 0
#endif

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define BRISK_INTERNAL __attribute__((visibility("hidden")))
#define BRISK_NOINLINE __attribute__((noinline))

/* ---- Geometry ----------------------------------------------------------- */

#define SEGMENT_SHIFT 22                     /* 4 MiB */
#define SEGMENT_SIZE ((size_t)1 << SEGMENT_SHIFT)
#define SEGMENT_MASK (SEGMENT_SIZE - 1)

#define SMALL_PAGE_SHIFT 16                  /* 64 KiB pages */
#define MEDIUM_PAGE_SHIFT 19                 /* 512 KiB pages */
#define LARGE_PAGE_SHIFT SEGMENT_SHIFT       /* one page spans the segment */
#define MAX_PAGES_PER_SEGMENT (SEGMENT_SIZE >> SMALL_PAGE_SHIFT) /* 64 */

#define SMALL_SIZE_MAX (8 * 1024)            /* classes in 64 KiB pages */
#define MEDIUM_SIZE_MAX (64 * 1024)          /* classes in 512 KiB pages */
#define LARGE_SIZE_MAX (1024 * 1024)         /* largest size class */

#define DIRECT_SIZE_MAX 1024                 /* sizes served by heap->direct[] */
#define DIRECT_SLOTS (DIRECT_SIZE_MAX / 16 + 1)
#define CLASS_COUNT 61                       /* classes 1..60; 0 is unused */

#define OS_PAGE_SIZE 4096
#define BLOCK_ALIGN 16

enum segment_kind { SEG_SMALL = 0, SEG_MEDIUM = 1, SEG_LARGE = 2, SEG_HUGE = 3 };
enum segment_state { SEG_STATE_OWNED = 0, SEG_STATE_ABANDONED = 1, SEG_STATE_CACHED = 2, SEG_STATE_HUGE = 3 };
#define PAGED_KINDS 3

/* ---- Blocks and pages --------------------------------------------------- */

typedef struct block { struct block *next; } block_t;

/* States kept in the low bits of page->thread_free (blocks are 16-aligned).
 * They let a remote free tell the owner that a page it had set aside as full
 * has room again, without the owner scanning its full pages. */
enum delayed_state {
  DELAYED_NONE = 0,    /* remote frees go to the page's thread_free list */
  DELAYED_USE = 1,     /* page is full: the next remote free goes to the heap */
  DELAYED_FREEING = 2, /* a remote thread is pushing to the heap right now */
  DELAYED_NEVER = 3,   /* page is abandoned or being abandoned */
};
#define TF_STATE_MASK ((uintptr_t)3)
/* The high 16 bits count the blocks on the list (a page holds at most 4096),
 * so the owner takes the list without walking it. */
#define TF_COUNT_SHIFT 48
#define TF_COUNT_ONE ((uintptr_t)1 << TF_COUNT_SHIFT)
#define TF_COUNT_MASK (~(TF_COUNT_ONE - 1))
#define TF_PTR_MASK ((TF_COUNT_ONE - 1) & ~TF_STATE_MASK)
static inline struct block *tf_list(uintptr_t tf) { return (struct block *)(tf & TF_PTR_MASK); }

enum page_flags { PAGE_IN_FULL = 1, PAGE_HAS_ALIGNED = 2 };

struct heap;
struct segment;

typedef struct page {
  block_t *free;            /* next blocks to hand out */
  block_t *local_free;      /* blocks freed by the owner since the last collect */
  uint32_t used;            /* blocks handed out and not yet known to be free */
  uint32_t capacity;        /* blocks threaded into lists so far */
  uint32_t reserved;        /* blocks the page can hold */
  uint8_t flags;            /* page_flags; 0 means the free fast path applies */
  uint8_t size_class;
  uint8_t in_use;           /* assigned to a size class (vs free in segment) */
  uint8_t needs_purge;      /* free in its segment, dirty, not yet purged */
  size_t block_size;
  uint8_t *start;           /* first block */
  _Atomic(uintptr_t) thread_free;
  _Atomic(struct heap *) heap;
  struct page *next, *prev; /* in the heap's queue for its class */
  uint64_t retired_at_ms;
} page_t;

/* ---- Segments ----------------------------------------------------------- */

typedef struct segment {
  _Atomic(uint64_t) owner_uid; /* heap uid of the owning thread; 0 = none */
  uint8_t kind;
  uint8_t page_shift;
  uint8_t purged;              /* huge/cached: contents were given back */
  uint8_t live;                /* huge: handed out and not freed (checked library) */
  uint8_t state;               /* segment_state (PUBLISHed) */
  uint32_t page_count;
  uint32_t pages_in_use;
  uint64_t free_page_mask;     /* bit i: page i is free */
  size_t mapped_size;          /* bytes of the mapping, which starts at the header */
  size_t block_offset;         /* huge: block start relative to the segment */
  uint64_t cached_at_ms;       /* huge/empty: when it entered a cache */
  struct heap *heap;           /* owning heap (only the owner reads it) */
  struct segment *next, *prev; /* in the heap's segment list, or abandoned list */
  struct segment *all_next, *all_prev; /* every mapped segment (segment registry) */
  page_t pages[MAX_PAGES_PER_SEGMENT];
} segment_t;

#define HUGE_BLOCK_OFFSET (((offsetof(segment_t, pages) + sizeof(page_t)) + 63) & ~(size_t)63)

/* ---- Heaps -------------------------------------------------------------- */

typedef struct page_queue { page_t *first, *last; } page_queue_t;

#define THREAD_CACHE_SLOTS 4

/* A slot of a lock-free cache of free segments. The segment pointer is
 * claimed by CAS; size and time are hints, checked after the claim. */
typedef struct cache_slot {
  _Atomic(segment_t *) seg;
  _Atomic(size_t) size_kind; /* mapped size | kind | purged bit */
  _Atomic(uint64_t) since_ms;
} cache_slot_t;

typedef struct heap {
  page_t *direct[DIRECT_SLOTS];       /* size/16 -> page to allocate from */
  uint64_t uid;                       /* unique per heap lifetime, never reused */
  uint64_t stat_requested;            /* counters PUBLISHed by the owner, summed by stats */
  uint64_t stat_cache_hits, stat_cache_misses;
  page_queue_t queues[CLASS_COUNT];   /* pages with (possibly) free blocks */
  page_queue_t full;                  /* pages with no free block */
  _Atomic(block_t *) delayed_free;    /* remote frees into full pages */
  segment_t *segments[PAGED_KINDS];   /* segments this heap owns, by kind */
  cache_slot_t huge_cache[THREAD_CACHE_SLOTS];        /* warm huge blocks */
  /* The most recently freed huge block: only the owner puts one here, the
   * purge passes (any thread's) may only take it, so the owner needs one
   * exchange, no clock. */
  _Atomic(segment_t *) huge_hot;
  _Atomic(uint8_t) huge_hot_seen;     /* a purge pass saw it idle once */
  uint32_t slow_calls;
  uint64_t next_purge_ms;
  struct heap *next_heap, *prev_heap; /* registry of live heaps */
  _Atomic(size_t) mapped_bytes;       /* segments and huge blocks it holds */
  /* Explicit heaps (brisk_heap_new) only: */
  uint32_t magic;                     /* HEAP_MAGIC while live, HANDLE_DEAD once destroyed */
  bool is_explicit;
  pthread_t owner_thread;
  size_t max_bytes;                   /* 0 = unbounded */
  pthread_mutex_t huge_lock;          /* huge blocks may be freed by any thread */
  segment_t *huge_list;
} heap_t;

/* ---- Process state ------------------------------------------------------ */

/* Options (options.c). Atomic: any thread may change them at run time. */
typedef struct brisk_options {
  _Atomic(uint64_t) purge_delay_ms;
  _Atomic(size_t) cache_cap;  /* bytes kept in the huge/segment caches */
  _Atomic(size_t) reserve;
  _Atomic(bool) verbose, show_stats, hugepages, realtime, leak_report, background_purge;
} brisk_options_t;

extern BRISK_INTERNAL brisk_options_t _bk_opt;
extern BRISK_INTERNAL heap_t _bk_heap_empty;
extern BRISK_INTERNAL page_t _bk_page_empty;
extern __thread heap_t *_bk_tls_heap __attribute__((tls_model("initial-exec"))) BRISK_INTERNAL;

/* ---- Size classes (size_class.c) ---------------------------------------- */

static inline unsigned size_to_class(size_t size) {
  if (size <= 128) return size <= 16 ? 1 : (unsigned)((size + 15) >> 4);
  size_t n = size - 1;
  unsigned b = 63 - (unsigned)__builtin_clzl(n);      /* 2^b <= n < 2^(b+1) */
  unsigned k = (unsigned)((n >> (b - 2)) & 3);
  return 8 + (b - 7) * 4 + k + 1;
}
BRISK_INTERNAL size_t _bk_class_size(unsigned cls);
BRISK_INTERNAL unsigned _bk_class_segment_kind(unsigned cls);

/* ---- Address map and OS (os.c) ------------------------------------------ */

/* One byte per 4 MiB chunk of the 48-bit address space: 0 = not brisk's,
 * 1 = a segment header starts here, k > 1 = this chunk belongs to the
 * segment whose header is k - 1 chunks lower (huge blocks span many). */
extern BRISK_INTERNAL _Atomic(uint8_t) _bk_chunk_map[];

static inline segment_t *segment_of(const void *p) {
  uintptr_t a = (uintptr_t)p;
  if (unlikely(a >> 48)) return NULL;
  size_t idx = a >> SEGMENT_SHIFT;
  uint8_t tag = atomic_load_explicit(&_bk_chunk_map[idx], memory_order_relaxed);
  if (likely(tag == 1)) return (segment_t *)(a & ~(uintptr_t)SEGMENT_MASK);
  if (tag == 0) return NULL;
  while (tag > 1) {
    idx -= (size_t)tag - 1;
    tag = atomic_load_explicit(&_bk_chunk_map[idx], memory_order_relaxed);
  }
  return tag == 1 ? (segment_t *)(idx << SEGMENT_SHIFT) : NULL;
}

static inline page_t *page_of(segment_t *seg, const void *p) {
  /* Huge segments use a shift of 63: every offset maps to pages[0]. */
  return &seg->pages[((uintptr_t)p - (uintptr_t)seg) >> seg->page_shift];
}

BRISK_INTERNAL void *_bk_os_map_aligned(size_t size, size_t align, size_t skew, uint8_t **base, size_t *mapped);
BRISK_INTERNAL void _bk_os_unmap(void *base, size_t size);
BRISK_INTERNAL void *_bk_os_scratch_map(size_t size);
BRISK_INTERNAL void _bk_os_scratch_unmap(void *p, size_t size);
BRISK_INTERNAL bool _bk_os_purge(void *p, size_t size);
BRISK_INTERNAL bool _bk_os_resize(void *base, size_t old_size, size_t new_size);
BRISK_INTERNAL bool _bk_os_move(void *base, size_t old_size, void *target, size_t new_size);
BRISK_INTERNAL void _bk_os_map_range(const void *header, size_t from, size_t to, bool on);
BRISK_INTERNAL uint64_t _bk_os_now_ms(void);
enum os_call { OS_MMAP, OS_MUNMAP, OS_MADVISE, OS_MREMAP };
BRISK_INTERNAL uint64_t _bk_os_call_count(int which);
BRISK_INTERNAL size_t _bk_os_peak_mapped(void);
BRISK_INTERNAL void _bk_warning(const char *fmt, ...);
BRISK_INTERNAL _Noreturn void _bk_fatal(const char *fmt, ...);

/* ---- Pages (page.c) ----------------------------------------------------- */

BRISK_INTERNAL void _bk_page_init(page_t *pg, segment_t *seg, unsigned cls, heap_t *h);
BRISK_INTERNAL void _bk_page_extend(page_t *pg);
BRISK_INTERNAL void _bk_page_collect(page_t *pg);
BRISK_INTERNAL bool _bk_page_set_delayed(page_t *pg, enum delayed_state want, bool only_if_empty);
BRISK_INTERNAL void _bk_page_free_remote(segment_t *seg, page_t *pg, block_t *b);
BRISK_INTERNAL void _bk_page_fork_gate_close(void);
BRISK_INTERNAL void _bk_page_fork_gate_open(bool in_child);
BRISK_INTERNAL block_t *_bk_page_block_start(const page_t *pg, const void *p);

static inline uint8_t *page_area(segment_t *seg, size_t idx, size_t *size) {
  size_t psize = (size_t)1 << seg->page_shift;
  uint8_t *start = (uint8_t *)seg + idx * psize;
  uint8_t *end = start + psize;
  if (idx == 0) start = (uint8_t *)seg + ((sizeof(segment_t) + 127) & ~(size_t)127);
  *size = (size_t)(end - start);
  return start;
}

/* ---- Segments (segment.c) ----------------------------------------------- */

BRISK_INTERNAL page_t *_bk_segment_page_alloc(heap_t *h, unsigned kind);
BRISK_INTERNAL void _bk_segment_page_retire(heap_t *h, page_t *pg);
BRISK_INTERNAL void _bk_segment_release(segment_t *seg);
BRISK_INTERNAL segment_t *_bk_segment_map(size_t size, size_t align, size_t skew);
BRISK_INTERNAL void _bk_segment_unmap(segment_t *seg);
BRISK_INTERNAL void _bk_segment_mark(segment_t *seg, bool on);
/* Every mapped segment, for stats, checks and visits (segment.c). */
BRISK_INTERNAL void _bk_segments_add(segment_t *seg);
BRISK_INTERNAL void _bk_segments_remove(segment_t *seg);
BRISK_INTERNAL void _bk_segments_lock(void);
BRISK_INTERNAL void _bk_segments_unlock(void);
BRISK_INTERNAL segment_t *_bk_segments_first(void);
BRISK_INTERNAL void _bk_segment_abandon(segment_t *seg);
BRISK_INTERNAL segment_t *_bk_segment_abandoned_pop(void);
BRISK_INTERNAL void _bk_segment_abandoned_push(segment_t *seg);
BRISK_INTERNAL void _bk_segment_purge_pages(segment_t *seg, uint64_t now, bool force);
BRISK_INTERNAL size_t _bk_segment_drain_abandoned(void);
BRISK_INTERNAL uint32_t _bk_segment_collect_pages(segment_t *seg, heap_t *adopter);
BRISK_INTERNAL void _bk_segment_abandoned_lock(void);
BRISK_INTERNAL void _bk_segment_abandoned_unlock(void);

/* A lock-free cache of whole free segments (empty paged segments and huge
 * blocks), shared by all threads. BRISK_RESERVE lives in it, so a reserve
 * can be no larger than its slots hold. */
#define CACHE_SLOTS 256
#define RESERVE_MAX ((size_t)CACHE_SLOTS * SEGMENT_SIZE)
BRISK_INTERNAL bool _bk_slots_put(cache_slot_t *slots, size_t n, segment_t *seg, uint64_t since);
BRISK_INTERNAL segment_t *_bk_slots_take(cache_slot_t *slots, size_t n, size_t min_size, size_t max_size,
                                     unsigned kind, bool counted);
BRISK_INTERNAL bool _bk_slots_purge(cache_slot_t *slots, size_t n, uint64_t now, bool force, bool counted);
BRISK_INTERNAL bool _bk_cache_reserve(size_t bytes);
BRISK_INTERNAL void _bk_cache_unreserve(size_t bytes);
BRISK_INTERNAL bool _bk_cache_put(segment_t *seg);
BRISK_INTERNAL segment_t *_bk_cache_take(size_t min_size, size_t max_size, unsigned kind);
BRISK_INTERNAL void _bk_cache_purge(uint64_t now, bool force);
BRISK_INTERNAL size_t _bk_cache_bytes(void);
BRISK_INTERNAL size_t _bk_cache_limit(void);

/* ---- Heaps (heap.c) ----------------------------------------------------- */

BRISK_INTERNAL heap_t *_bk_heap_get_initialized(void);
BRISK_INTERNAL heap_t *_bk_heap_create(bool is_explicit);
BRISK_INTERNAL void _bk_heap_retire_struct(heap_t *h);
BRISK_INTERNAL void _bk_heap_release_all(heap_t *h);
BRISK_INTERNAL bool _bk_heap_may_map(heap_t *h, size_t bytes);
BRISK_INTERNAL void *_bk_heap_malloc_generic(heap_t *h, size_t size);
BRISK_INTERNAL void _bk_heap_free_generic(segment_t *seg, page_t *pg, void *p);
BRISK_INTERNAL void _bk_heap_page_emptied(heap_t *h, page_t *pg);
BRISK_INTERNAL void _bk_heap_queue_push(heap_t *h, page_t *pg);
BRISK_INTERNAL void _bk_heap_thread_done(void *value);
BRISK_INTERNAL void _bk_heap_collect_caches(heap_t *h, uint64_t now, bool force);
BRISK_INTERNAL void _bk_heap_fork_lock(void);
BRISK_INTERNAL void _bk_heap_fork_unlock(void);
BRISK_INTERNAL void _bk_heap_process_init(void);
BRISK_INTERNAL void _bk_heap_collect_own(bool force);
BRISK_INTERNAL void _bk_heap_stats_retired(uint64_t out[4]);
BRISK_INTERNAL void _bk_heap_foreach(void (*fn)(heap_t *, void *), void *arg);

/* ---- Huge blocks (huge.c) ----------------------------------------------- */

BRISK_INTERNAL void *_bk_huge_alloc(heap_t *h, size_t size, size_t align, bool zero);
BRISK_INTERNAL void _bk_huge_free(segment_t *seg);
BRISK_INTERNAL void *_bk_huge_realloc(segment_t *seg, void *p, size_t size);
BRISK_INTERNAL void _bk_huge_flush_thread_cache(heap_t *h, uint64_t now, bool force);
BRISK_INTERNAL void _bk_huge_release_heap_blocks(heap_t *h);

/* ---- Purge passes and process setup (purge.c, init.c) ------------------- */

BRISK_INTERNAL void _bk_purge_note_pending(void);
BRISK_INTERNAL void _bk_purge_maybe(heap_t *h);
BRISK_INTERNAL void _bk_purge_tick(uint64_t now);
/* Locks of brisk's this thread holds around calls that may allocate or free
 * (pool carving, a pool's thread exit, a purge pass, a walk of the heap
 * registry): no pass and no helper thread starts under them. */
extern __thread int _bk_locks_held __attribute__((tls_model("initial-exec"))) BRISK_INTERNAL;
BRISK_INTERNAL void _bk_purge_release_all(void);
BRISK_INTERNAL void _bk_purge_fork_lock(void);
BRISK_INTERNAL void _bk_purge_fork_unlock(bool in_child);
BRISK_INTERNAL void _bk_pool_fork_lock(void);
BRISK_INTERNAL void _bk_pool_fork_unlock(void);
BRISK_INTERNAL void _bk_purge_quiesce(void);
BRISK_INTERNAL void _bk_process_init(void);
BRISK_INTERNAL void _bk_options_read_environment(void);
BRISK_INTERNAL size_t _bk_segment_reserve(size_t bytes);
BRISK_INTERNAL void _bk_report_at_exit(void);
BRISK_INTERNAL void _bk_report_prepare(void);
BRISK_INTERNAL void _bk_leak_report(int fd);
BRISK_INTERNAL extern _Atomic(int) _bk_process_ready;

/* ---- glibc's statistics (stats.c) -------------------------------------- */

/* glibc's struct mallinfo2 in brisk's terms (meanings in brisk.h), without
 * <malloc.h>: override.c copies it into that header's layouts. */
typedef struct mallinfo_fields {
  size_t arena, ordblks, hblks, hblkhd, usmblks, uordblks, fordblks, keepcost;
} mallinfo_fields_t;
BRISK_INTERNAL void _bk_stats_mallinfo(mallinfo_fields_t *mi);
BRISK_INTERNAL void _bk_stats_print_malloc_stats(void);

/* ---- Shared helpers ----------------------------------------------------- */

/* Fields the owner writes and the stats, checks and visits of other threads
 * read: the owner stores them atomically (a plain store on x86) and reads
 * them plainly; readers without a happens-before use PEEK. */
#define PUBLISH(field, value) __atomic_store_n(&(field), (value), __ATOMIC_RELAXED)
#define PEEK(field) __atomic_load_n(&(field), __ATOMIC_RELAXED)

static inline size_t align_up(size_t n, size_t a) { return (n + a - 1) & ~(a - 1); }

static inline void stat_add(uint64_t *counter, uint64_t n) { PUBLISH(*counter, *counter + n); }
static inline bool is_power_of_two(size_t n) { return n && !(n & (n - 1)); }

/* count * size for calloc and reallocarray; on overflow false, errno = ENOMEM. */
static inline bool size_product(size_t count, size_t size, size_t *total) {
  if (likely(!__builtin_mul_overflow(count, size, total))) return true;
  errno = ENOMEM;
  return false;
}

/* Foreign pointers: made before brisk was loaded (by the dynamic loader's
 * bootstrap malloc) or by glibc's malloc. */
BRISK_INTERNAL void _bk_foreign_free(void *p);
BRISK_INTERNAL void _bk_free_slow(void *p);
BRISK_INTERNAL void _bk_checked_free(void *p);

/* The checked library marks freed blocks (checked.c); a block handed out
 * loses the mark. */
static inline void block_handed_out(block_t *b) {
#if BRISK_CHECKED
  ((uintptr_t *)b)[1] = 0;
#else
  (void)b;
#endif
}
BRISK_INTERNAL void *_bk_block_start_of(const void *p);

/* ---- Handles (brisk_heap_t, brisk_pool_t) ------------------------------- */

/* A handle's struct starts its life with a magic of its kind and gets
 * HANDLE_DEAD when destroyed. The structs are never given back to the OS,
 * and the checked library reuses one only after HANDLE_QUARANTINE others
 * were destroyed, so a handle used after its destroy still reads a
 * mapped struct marked dead, for that long at least. */
#define HEAP_MAGIC 0x48454150u   /* "HEAP" */
#define POOL_MAGIC 0x42504f4fu   /* "BPOO" */
#define HANDLE_DEAD 0x44454144u  /* "DEAD" */
#define HANDLE_QUARANTINE (BRISK_CHECKED ? 64 : 0)

/* NULL is EINVAL in every build; the checked library aborts, naming fn and
 * the misuse, on a handle whose struct is not a live one of its kind. */
BRISK_INTERNAL _Noreturn void _bk_handle_fatal(const void *handle, uint32_t magic, const char *fn, const char *kind);
static inline bool handle_ok(const void *handle, size_t magic_offset, uint32_t live, const char *fn,
                             const char *kind) {
  if (unlikely(!handle)) {
    errno = EINVAL;
    return false;
  }
#if BRISK_CHECKED
  uint32_t magic = *(const uint32_t *)((const uint8_t *)handle + magic_offset);
  if (magic != live) _bk_handle_fatal(handle, magic, fn, kind);
#else
  (void)magic_offset, (void)live, (void)fn, (void)kind;
#endif
  return true;
}

/* Destroyed handles' structs waiting to be reused, oldest first, linked
 * through the pointer at link_offset; the caller holds the list's lock. */
typedef struct retired_list { void *first, *last; size_t count; } retired_list_t;

static inline void **retired_link(void *s, size_t link_offset) { return (void **)((uint8_t *)s + link_offset); }

static inline void retired_put(retired_list_t *r, void *s, size_t link_offset) {
  *retired_link(s, link_offset) = NULL;
  if (r->last) *retired_link(r->last, link_offset) = s;
  else r->first = s;
  r->last = s;
  r->count++;
}

/* NULL while no more than HANDLE_QUARANTINE wait. */
static inline void *retired_take(retired_list_t *r, size_t link_offset) {
  void *s = r->first;
  if (!s || r->count <= HANDLE_QUARANTINE) return NULL;
  r->first = *retired_link(s, link_offset);
  if (!r->first) r->last = NULL;
  r->count--;
  return s;
}
BRISK_INTERNAL void _bk_pool_thread_exit(void);
BRISK_INTERNAL void *_bk_calloc_in(heap_t *h, size_t count, size_t size);
BRISK_INTERNAL void *_bk_realloc_in(heap_t *h, void *p, size_t size);
BRISK_INTERNAL void *_bk_aligned_in(heap_t *h, size_t align, size_t size);
BRISK_INTERNAL size_t _bk_foreign_usable_size(const void *p, size_t want);

#endif
