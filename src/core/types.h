/* The core's data: geometry, pages, segments, heaps, and the small inline
 * lookups every core file shares (where a pointer lies: locate.h).
 * Functions are declared in core.h.
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
 * collects in batches. docs/design.md tells the whole story. */
#ifndef BRISK_CORE_TYPES_H
#define BRISK_CORE_TYPES_H

#include <pthread.h>

#include "brisk.h"
#include "core/memcheck.h"
#include "ds/ds.h"
#include "ds/list.h"

#ifndef BRISK_CHECKED
#define BRISK_CHECKED 0
#endif
/* The secure library's checks (secure.h); the checked library has them too. */
#ifndef BRISK_SECURE
#define BRISK_SECURE BRISK_CHECKED
#endif

/* ---- Geometry ----------------------------------------------------------- */

#define SEGMENT_SHIFT 22 /* 4 MiB */
#define SEGMENT_SIZE ((size_t)1 << SEGMENT_SHIFT)
#define SEGMENT_MASK (SEGMENT_SIZE - 1)

#define SMALL_PAGE_SHIFT 16                                      /* 64 KiB pages */
#define MEDIUM_PAGE_SHIFT 19                                     /* 512 KiB pages */
#define LARGE_PAGE_SHIFT SEGMENT_SHIFT                           /* one page spans the segment */
#define MAX_PAGES_PER_SEGMENT (SEGMENT_SIZE >> SMALL_PAGE_SHIFT) /* 64 */

#define SMALL_SIZE_MAX (8 * 1024)    /* classes in 64 KiB pages */
#define MEDIUM_SIZE_MAX (64 * 1024)  /* classes in 512 KiB pages */
#define LARGE_SIZE_MAX (1024 * 1024) /* largest size class */

#define DIRECT_SIZE_MAX 1024 /* sizes served by heap->direct[] */
#define DIRECT_SLOTS (DIRECT_SIZE_MAX / 16 + 1)
#define CLASS_COUNT 64 /* classes 1..63; 0 is unused */
/* The doublings above 2, 4 and 8 KiB have a fifth class, an eighth above the
 * power of two (2304, 4608, 9216 B): a page-sized buffer with a header (a
 * database's page cache entry, an I/O buffer and its bookkeeping) took the
 * next class, a quarter above, and wasted up to a fifth of its memory
 * (sqlite's 4368-byte page cache entries in 5120-byte blocks). */
#define SPLIT_FIRST_SHIFT 11
#define SPLIT_LAST_SHIFT 13

#define BLOCK_ALIGN 16

enum segment_kind { SEG_SMALL = 0, SEG_MEDIUM = 1, SEG_LARGE = 2, SEG_HUGE = 3 };
enum segment_state { SEG_STATE_OWNED = 0, SEG_STATE_ABANDONED = 1, SEG_STATE_CACHED = 2, SEG_STATE_HUGE = 3 };
#define PAGED_KINDS 3

/* ---- Blocks and pages --------------------------------------------------- */

typedef struct block {
  struct block *next;
} block_t;

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

/* PAGE_HOT: its owner's frees go to the heap's hot list (hot.c), PAGE_COLD's
 * not; PAGE_BIG: a hot list whose bytes count against the heap's bound.
 * PAGE_CURRENT: the page its class allocates from (a direct size's, set with
 * the direct slots). free_fast tests bits; page_flags_set's alarm, states. */
enum page_flags { PAGE_IN_FULL = 1, PAGE_HAS_ALIGNED = 2, PAGE_HOT = 4, PAGE_CURRENT = 8 };
enum { PAGE_BIG = 16, PAGE_COLD = 32 }; /* page_flags too */

struct heap;
struct segment;

/* Owner-only fields are read and written by the owning thread alone; the
 * PUBLISHed ones are also PEEKed by statistics and checks (ds.h). */
typedef struct page {
  block_t *free;       /* next blocks to hand out (owner) */
  block_t *local_free; /* collected remote frees; the secure library's owner frees (owner) */
  /* Blocks handed out and not yet known to be free (page_used), kept as
   * the count less free_alarm: an owner's free that takes it below 0 takes
   * the slow path (page_flags_set says when). Both PUBLISHed. */
  int32_t used_past_alarm;
  uint32_t free_alarm;
  uint16_t capacity; /* blocks threaded into lists so far (PUBLISHed; a page holds at most 4096) */
  uint16_t reserved; /* blocks the page can hold */
  uint8_t flags;     /* page_flags, written by page_flags_set alone (PUBLISHed) */
  uint8_t size_class;
  uint8_t in_use;      /* assigned to a size class (vs free in segment) */
  uint8_t needs_purge; /* free in its segment, dirty, not yet purged */
  size_t block_size;
  uint8_t *start; /* first block */
#if BRISK_SECURE
  /* What the secure checks read (secure.h), kept beside start so that they
   * load no more than the lines a malloc or free touches anyway. All 0
   * while the page is not in use (and on a huge segment's pages[0]: such a
   * free fails the test and goes out of line). PUBLISHed by the owner.
   *   secure_granules  16-byte units of threaded blocks from start (links)
   *   secure_inverse,  the block size is odd * 2^shift: the odd factor's
   *   secure_mask,     inverse mod 2^64, 2^shift - 1, and the count of
   *   secure_limit     threaded blocks shifted left by shift (frees)
   *   secure_mark_key  the key of a freed block's mark, with the block
   *                    size in it (freed_mark; frees) */
  uint64_t secure_granules; /* (64-bit: compared with a 64-bit value, */
  uint64_t secure_limit;    /* the checks load them as the compare's operand) */
  uint64_t secure_inverse;
  uint64_t secure_mask;
  uint64_t secure_mark_key;
#endif
  /* Remote frees: an atomic LIFO with state bits (remote_free.c says how
   * each step is ordered). */
  _Atomic(uintptr_t) thread_free;
  /* The heap a remote free hands a block of a full page to: stored with
   * release by whoever gives the page a heap, loaded with acquire by the
   * remote thread, so it sees an initialized heap. */
  _Atomic(struct heap *) heap;
  list_node_t link; /* in the heap's queue for its class, or its full list (owner) */
  /* When the page last went idle. Free in its segment: when it went back
   * there (for purging). In use: when its last block came back while it
   * waits, empty, in its queue (page_queue.c keeps it there); 0 while it
   * is not waiting so. Owner only. */
  uint64_t idle_since_ms;
#if !BRISK_SECURE
  /* What a free by another thread reads of the page, copied here off the
   * first line, which the owner writes on every malloc and free: read
   * there, each such free waited for the line to come from the owner's
   * core, and the owner's next step for it to come back (2 threads handing
   * each other blocks, bench/bursty: 55% of the remote free's time). Set
   * by the owner from the originals (page_copy_for_others). */
  uint8_t remote_class, remote_has_aligned;
  uint8_t pad[38]; /* to 128 bytes, as the secure fields make it there */
#endif
#if BRISK_CHECKED
  /* Blocks handed out since the page's init, counted in address order: a
   * page hands out its fresh blocks in that order (_bk_page_extend threads
   * them only when its free list is empty), so a block below the count was
   * handed out and, if handed out again, freed meanwhile; one at or above
   * it never was. PUBLISHed by the owner (page_initialized,
   * checked_block.c), PEEKed by frees on any thread. */
  uint32_t handed_out;
#endif
} page_t;
/* The fewest bytes a block has in the pages with the most blocks: */
_Static_assert((1u << SMALL_PAGE_SHIFT) / BLOCK_ALIGN <= UINT16_MAX, "a page's block counts fit 16 bits");
/* 128 bytes (a free finds its page with one shift; in the release library
 * the fields a malloc or free touches share one line), but in the checked library: the
 * segment header takes 8.1 KiB, 12 KiB in the secure library with its
 * guard, of the 4 MiB segment. */
_Static_assert(BRISK_CHECKED || sizeof(page_t) == 128, "page_t: 128 bytes");

/* The copies of the release library (above), from the originals: by the
 * owner, once the class is set and once a block is carved aligned. */
static inline void page_copy_for_others(page_t *pg) {
#if BRISK_SECURE
  (void)pg;
#else
  PUBLISH(pg->remote_class, pg->size_class);
  PUBLISH(pg->remote_has_aligned, (pg->flags & PAGE_HAS_ALIGNED) != 0);
#endif
}

/* What a free by a thread that does not own the page reads of it. */
static inline unsigned page_class_for_others(const page_t *pg) {
#if BRISK_SECURE
  return PEEK(pg->size_class);
#else
  return PEEK(pg->remote_class);
#endif
}
static inline bool page_has_aligned_for_others(const page_t *pg) {
#if BRISK_SECURE
  return PEEK(pg->flags) & PAGE_HAS_ALIGNED;
#else
  return PEEK(pg->remote_has_aligned);
#endif
}

/* ---- Segments ----------------------------------------------------------- */

typedef struct segment {
  /* Heap uid of the owning thread; 0 = none. Compared on every free: a
   * thread sees its own uid only if it stored it, so relaxed loads suffice
   * to tell "mine" from "not mine"; taking ownership (adoption, setup)
   * stores with release so the new owner's later plain writes cannot be
   * mistaken for an older owner's. */
  _Atomic(uint64_t) owner_uid;
  uint8_t kind;
  uint8_t page_shift;
  uint8_t purged;           /* huge/cached: contents were given back */
  uint8_t live;             /* huge: handed out and not freed (checked library) */
  uint8_t state;            /* segment_state (PUBLISHed) */
  uint8_t of_explicit_heap; /* owned by an explicit heap (PUBLISHed; transfer.c) */
  uint32_t page_count;
  uint32_t pages_in_use;
  uint64_t free_page_mask; /* bit i: page i is free */
  size_t mapped_size;      /* bytes of the mapping, which starts at the header */
  size_t block_offset;     /* huge: block start relative to the segment */
  uint64_t cached_at_ms;   /* huge/empty: when it entered a cache */
  size_t cached_dirty;     /* in a cache: the bytes it holds resident (segment_cache.c) */
  /* Paged: bit i when the i-th 64th may be resident (touched since its
   * last purge); large, bit i for block i: free at the last purge tick and
   * not handed out since, given back while free (segment.c). Owner only. */
  uint64_t resident_mask, blocks_free_seen, blocks_purged;
  struct heap *heap; /* owning heap; PUBLISHed, PEEKed by other threads' frees (transfer.c) */
  /* In its heap's segment list (owner), the abandoned list or an explicit
   * heap's huge blocks (under their locks). */
  list_node_t link;
  list_node_t registry_link; /* every mapped segment (under the registry lock) */
  /* Byte i, for the segment's i-th 64 KiB: how the release library's
   * owner frees a block of the page that spans it (free_class_code: the
   * offset of the class's hot stack in the heap, odd for the slow path),
   * written with the flags (page_flags_set) into every 64 KiB of the page,
   * so that a free finds its byte without the segment's page shift. The
   * free reads it, not the page's line: in a large working set that line
   * left the cache long ago, and these 64 bytes serve all the segment's
   * pages. PUBLISHed by the owner, PEEKed by every free before its owner
   * test. (Not kept by the secure library, whose free reads the page.) */
  _Alignas(64) uint8_t free_class[MAX_PAGES_PER_SEGMENT];
  _Alignas(64) page_t pages[MAX_PAGES_PER_SEGMENT]; /* a page's hot fields on one line */
} segment_t;

#define HUGE_BLOCK_OFFSET (((offsetof(segment_t, pages) + sizeof(page_t)) + 63) & ~(size_t)63)

/* ---- Heaps -------------------------------------------------------------- */

/* The per-thread cache of warm huge blocks has this many slots. */
#define WARM_HUGE_SLOTS 4

/* A slot of a lock-free set of free segments (segment_cache.c). The segment
 * pointer is claimed by CAS; size and time are hints, checked after the
 * claim. */
typedef struct cache_slot {
  _Atomic(segment_t *) seg;
  _Atomic(size_t) size_kind; /* mapped size | kind | purged bit */
  _Atomic(size_t) dirty;     /* the segment's cached_dirty */
  _Atomic(uint64_t) since_ms;
} cache_slot_t;

/* A heap's recently freed blocks of a class (hot.c): a stack of pointers in hot_slots. */
typedef struct hot_list {
  block_t **top, **end, **base; /* top PUBLISHed; top[-1]: the block freed last, or NULL */
  uint32_t block_size;
#if BRISK_SECURE
  block_t *held; /* the block freed last, off the list (hot_push), counted; PUBLISHed */
#endif
} hot_list_t;
#define HOT_SLOTS 2048                   /* every class's limit, and a NULL below each (hot.c) */
#define HOT_HEAP_BYTES ((size_t)4 << 20) /* the hot lists of classes above HOT_BOUNDED_MIN */
/* Classes above it hold their hot blocks against the heap's HOT_HEAP_BYTES
 * (PAGE_BIG); those below, in 64 KiB pages, are bounded per class alone,
 * and neither their frees nor their mallocs keep a count of the heap's
 * bytes. The secure library's classes above the direct sizes all go
 * through its hold (_bk_hot_free). */
#define HOT_BOUNDED_MIN (BRISK_SECURE ? DIRECT_SIZE_MAX : SMALL_SIZE_MAX)
/* A heap's blocks of one class on their way through the transfer cache
 * (transfer.c): other threads' blocks it freed, or took to hand out. A
 * batch's first block links to the next batch in word TRANSFER_WORD while
 * it waits in the shared list (the third in the secure library, whose
 * second holds the freed mark; there the other blocks of a list hold in it
 * the block TRANSFER_AHEAD places after them, for the pop to prefetch). */
#define TRANSFER_WORD (BRISK_SECURE ? 2 : 1)
/* Requests this big take back their thread's frees of other threads' blocks (transfer_fill). */
#define TRANSFER_REUSE_MIN 256
#define TRANSFER_AHEAD 4
typedef struct transfer_list {
  block_t *head;
  uint16_t count;      /* PUBLISHed: statistics count these blocks as free */
  uint32_t block_size; /* of a taken batch's blocks (the secure library checks them by it) */
#if BRISK_SECURE
  block_t *after[TRANSFER_AHEAD - 1]; /* a list being filled: the blocks 1, 2, ... after head */
#endif
} transfer_list_t;
/* A heap's empty pages kept in their queues (page_queue.c): a working set
 * of small blocks past it is threaded anew each time it is rebuilt (at 8
 * MiB, 100 000 objects of 128 B were, and ran 15% slower); a thread that
 * frees and then blocks holds them (test_rss.cpp's idle thread: 8 MiB more
 * resident with 16 than with 8, 24 more with 32). */
#define KEPT_EMPTY_BYTES ((size_t)16 << 20)
#define HEAP_BEAT_BYTES ((int64_t)4 << 20) /* bytes handed out between two heartbeats */

typedef struct heap {
  page_t *direct[DIRECT_SLOTS];              /* size/16 -> page to allocate from */
  struct hot_list *direct_hot[DIRECT_SLOTS]; /* size/16 -> its class's hot list */
  uint64_t uid;                              /* unique per heap lifetime, never reused */
  int64_t beat_budget;                       /* bytes the fast paths hand out before the heartbeat (core.h) */
  uint64_t stat_requested;                   /* counters PUBLISHed by the owner, summed by stats */
  uint64_t stat_cache_hits, stat_cache_misses;
  list_t queues[CLASS_COUNT];  /* pages with (possibly) free blocks */
  list_t full;                 /* pages with no free block */
  hot_list_t hot[CLASS_COUNT]; /* recently freed blocks, per class */
  size_t hot_bytes;
  transfer_list_t transfer_fill[CLASS_COUNT], transfer_take[CLASS_COUNT];
  size_t kept_empty_bytes; /* pages kept empty in their queues (page_queue.c; owner) */
  /* Blocks other threads freed into this heap's full pages: a LIFO they
   * push with release, taken whole by the owner with acquire. */
  _Atomic(block_t *) delayed_free;
  list_t segments[PAGED_KINDS];            /* segments this heap owns, by kind */
  cache_slot_t warm_huge[WARM_HUGE_SLOTS]; /* recently freed huge blocks */
  /* The most recently freed huge block: only the owner puts one here, the
   * purge passes (any thread's) may only take it, so the owner needs one
   * exchange, no clock. Put with release and taken with acquire (exchange
   * or CAS), so the taker sees the header the freeing thread wrote. */
  _Atomic(segment_t *) huge_hot;
  /* The mapped size of the block the owner put there last (owner only):
   * whether to try the slot, read without taking it. */
  size_t huge_hot_size;
  _Atomic(uint8_t) huge_hot_seen; /* a purge pass saw it idle once (relaxed: a hint) */
  uint32_t slow_calls;
  uint64_t next_purge_ms;
  list_node_t registry_link; /* live heaps, or the quarantine once gone */
  /* Segments and huge blocks it holds. Relaxed: a count kept exact by
   * atomic adds; the bound it enforces is checked, not ordered. */
  _Atomic(size_t) mapped_bytes;
  /* Explicit heaps (brisk_heap_new) only: */
  uint32_t magic; /* HEAP_MAGIC while live, HANDLE_DEAD once destroyed */
  bool is_explicit;
  pthread_t owner_thread;
  size_t max_bytes;          /* 0 = unbounded */
  pthread_mutex_t huge_lock; /* huge blocks may be freed by any thread */
  list_t huge_blocks;
  /* When the owner last allocated (its heartbeat's clock, ms), on a line of
   * its own: read by other threads' frees (_bk_transfer_wants). PUBLISHed;
   * relaxed: a hint. */
  _Alignas(64) uint64_t active_ms;
  block_t *hot_slots[HOT_SLOTS]; /* (not cleared: _bk_hot_init) */
} heap_t;

/* A handle's struct starts its life with a magic of its kind and gets
 * HANDLE_DEAD when destroyed. The structs are never given back to the OS,
 * and the checked library reuses one only after HANDLE_QUARANTINE others
 * were destroyed (ds/quarantine.h). */
#define HEAP_MAGIC 0x48454150u  /* "HEAP" */
#define POOL_MAGIC 0x42504f4fu  /* "BPOO" */
#define HANDLE_DEAD 0x44454144u /* "DEAD" */
#define HANDLE_QUARANTINE (BRISK_CHECKED ? 64 : 0)

/* ---- Process state ------------------------------------------------------ */

/* Options (options.c). Atomic: any thread may change them at run time;
 * every read is a hint for the next decision, so sequential consistency on
 * these rare accesses costs nothing worth saving. */
typedef struct brisk_options {
  _Atomic(uint64_t) purge_delay_ms;
  _Atomic(size_t) cache_cap; /* bytes kept in the huge/segment caches */
  _Atomic(size_t) reserve;
  _Atomic(bool) verbose, show_stats, hugepages, realtime, leak_report, background_purge;
} brisk_options_t;

extern BRISK_INTERNAL brisk_options_t _bk_opt;
extern BRISK_INTERNAL heap_t _bk_heap_empty;
extern BRISK_INTERNAL page_t _bk_page_empty;
extern __thread heap_t *_bk_tls_heap BRISK_TLS BRISK_INTERNAL;

/* ---- Inline lookups ----------------------------------------------------- */

static inline unsigned size_to_class(size_t size) {
  if (size <= 128) return size <= 16 ? 1 : (unsigned)((size + 15) >> 4);
  size_t n = size - 1;
  unsigned b = 63 - (unsigned)__builtin_clzl(n); /* 2^b <= n < 2^(b+1) */
  unsigned k = (unsigned)((n >> (b - 2)) & 3);
  unsigned cls = 8 + (b - 7) * 4 + k + 1;
  if (b < SPLIT_FIRST_SHIFT) return cls;
  /* The split classes at or below this doubling come before it, but its
   * own comes before its first quarter's class, and takes sizes up to an
   * eighth above 2^b. */
  unsigned splits = (b < SPLIT_LAST_SHIFT ? b : SPLIT_LAST_SHIFT) - SPLIT_FIRST_SHIFT + 1;
  if (b <= SPLIT_LAST_SHIFT && ((n >> (b - 3)) & 7) == 0) splits--;
  return cls + splits;
}

/* The class of a size above DIRECT_SIZE_MAX, up to LARGE_SIZE_MAX, from a
 * table (size_class.c): classes there are at least 256 bytes apart, so one
 * byte per 256 bytes of size holds them. A load where size_to_class takes
 * ten steps, on malloc's hot-list path. Filled before the first heap
 * exists; until then every entry is 0, whose hot list stays empty. */
#define LARGE_CLASS_STEP_SHIFT 8
extern BRISK_INTERNAL uint8_t _bk_large_class[LARGE_SIZE_MAX >> LARGE_CLASS_STEP_SHIFT];
/* The class of the sizes of a direct slot (heap->direct[(size + 15) / 16]),
 * for malloc's transfer-cache path (fast_path.h). */
extern BRISK_INTERNAL uint8_t _bk_direct_class[DIRECT_SLOTS];
static inline unsigned large_size_to_class(size_t size) {
  return _bk_large_class[(size - 1) >> LARGE_CLASS_STEP_SHIFT];
}

static inline void stat_add(uint64_t *counter, uint64_t n) { (void)PUBLISH_ADD(*counter, n); }

#endif
