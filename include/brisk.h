/* brisk: a fast, general-purpose memory allocator.
 *
 * Every function here is safe to call from any thread. Blocks from any
 * brisk_* allocation function are released with brisk_free (or plain free()
 * when libbrisk replaces malloc, as it does under LD_PRELOAD or when linked).
 *
 * Errors follow POSIX: allocation failure returns NULL with errno = ENOMEM,
 * a bad alignment returns NULL (or the error code for posix_memalign) with
 * EINVAL.
 *
 * A NULL heap or pool handle (or visitor) is an error, never a crash: a
 * function returning a pointer returns NULL with errno = EINVAL, one
 * returning a count returns 0 with errno = EINVAL, one returning an int
 * returns EINVAL, and one returning nothing does nothing and sets errno =
 * EINVAL. Destroying NULL is a no-op, as free(NULL) is. A handle used after
 * it was destroyed is undefined behaviour; the checked library
 * (libbrisk-checked) names the function and the misuse ("heap was
 * destroyed") and aborts. */
#ifndef BRISK_H
#define BRISK_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* BRISK_VERSION_MAJOR, _MINOR, _PATCH and BRISK_VERSION_STRING: generated
 * by the build (cmake/brisk_version.h.in) and installed beside this file. */
#include "brisk_version.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define BRISK_API __attribute__((visibility("default")))
#define BRISK_MALLOC_ATTR BRISK_API __attribute__((malloc, warn_unused_result))
#else
#define BRISK_API
#define BRISK_MALLOC_ATTR
#endif

/* ---- Version ------------------------------------------------------------ */

/* The version of the library loaded ("0.1.0"), which may differ from the
 * BRISK_VERSION_STRING the program was compiled with; the major versions
 * match when the dynamic linker accepted the SONAME. */
BRISK_API const char *brisk_version(void);

/* ---- The malloc family -------------------------------------------------- */

/* malloc(0) returns a unique pointer that must be freed. Blocks of 16 bytes
 * or more are aligned to 16 bytes. Memory is mapped without MAP_NORESERVE,
 * so a request the kernel's overcommit policy refuses (vm.overcommit_memory
 * 0 or 2) fails here with ENOMEM, as with glibc, instead of killing the
 * program at first touch. */
BRISK_MALLOC_ATTR void *brisk_malloc(size_t size);
/* The block reads as zero in every mode and tier (realtime mode included:
 * memory whose purge was skipped is cleared, not trusted). */
BRISK_MALLOC_ATTR void *brisk_calloc(size_t count, size_t size);
/* On failure the old block is left untouched and NULL is returned. A huge
 * block (above 1 MiB) is grown or shrunk with mremap, without copying,
 * while other threads allocate and free: the address space it gives up may
 * be reused at once by anyone.
 * realloc(p, 0) frees nothing: it returns a minimal block (glibc frees and
 * returns NULL; both are allowed, and a unique pointer is the safer one). */
BRISK_API void *brisk_realloc(void *ptr, size_t size);
BRISK_API void *brisk_reallocarray(void *ptr, size_t count, size_t size);
BRISK_API void brisk_free(void *ptr);
/* size may be any value between the requested size and the usable size. */
BRISK_API void brisk_free_sized(void *ptr, size_t size);
/* alignment: a power of two. size need not be a multiple of it. Every
 * alignment (tested up to 1 GiB) and every size, 0 included, gives a usable
 * block (at least one byte; the checked library: the size asked) that free
 * releases and the reports walk;
 * aligned blocks above 1 MiB are recycled through the same caches as other
 * huge blocks. Alignments above 4 MiB cost address space (the 4 MiB before
 * the block), not memory. A grown huge block (realloc) keeps 4 MiB
 * alignment only. */
BRISK_MALLOC_ATTR void *brisk_aligned_alloc(size_t alignment, size_t size);
/* realloc to a block aligned to `alignment` (a power of two; otherwise NULL
 * with errno = EINVAL, ptr untouched). The block stays where it is when ptr
 * is aligned to it and size fits its usable size without wasting most of it
 * (at least half of it is used, not counting the padding a new aligned
 * block would need too); an aligned huge block is resized with mremap as in
 * brisk_realloc (when aligned to more than 4 MiB, only where it lies).
 * Otherwise a new aligned block gets min(usable size, size) bytes of the old
 * one, which is freed; on failure NULL with ENOMEM, ptr untouched. ptr
 * NULL: aligned_alloc. size 0 frees nothing, as brisk_realloc(ptr, 0): the
 * result is an aligned block to free (ptr, or a minimal new block). Every
 * tier and alignment of brisk_aligned_alloc. The checked library checks ptr
 * as realloc does (its messages say "realloc_aligned"), and the usable size
 * is then exactly size. The arguments are in brisk_aligned_alloc's order
 * (alignment, size); mimalloc's mi_realloc_aligned(p, newsize, alignment)
 * puts the alignment last. */
BRISK_API void *brisk_realloc_aligned(void *ptr, size_t alignment, size_t size);
/* calloc aligned to `alignment` (a power of two; otherwise NULL, EINVAL):
 * count * size zero bytes, NULL with ENOMEM when the product overflows.
 * The arguments are in the order of mimalloc's mi_calloc_aligned (and
 * brisk_calloc_aligned(1, n, a) is its mi_zalloc_aligned(n, a)). As
 * brisk_calloc, a fresh huge block's pages are not written: the kernel
 * gives them zeroed. */
BRISK_MALLOC_ATTR void *brisk_calloc_aligned(size_t count, size_t size, size_t alignment);
/* alignment: a power of two that is a multiple of sizeof(void*). */
BRISK_API int brisk_posix_memalign(void **out, size_t alignment, size_t size);
BRISK_MALLOC_ATTR void *brisk_memalign(size_t alignment, size_t size);
/* Bytes that may be used at ptr (at least the requested size; in the
 * checked library exactly the requested size, a canary lies past it); 0 for
 * NULL or a pointer brisk did not allocate. */
BRISK_API size_t brisk_usable_size(const void *ptr);

/* ---- Limits -------------------------------------------------------------- */

/* Cap the memory brisk maps from the OS (0 = no cap). Allocations that would
 * pass it first release cached memory, then fail with ENOMEM. The first
 * mapping the cap refuses in a process prints one warning on stderr naming
 * BRISK_MAX_BYTES, the cap and the size asked (later ones are silent). Any
 * value is taken here; BRISK_OPTION_MAX_BYTES and the environment variable
 * accept only 0 or 16 MiB .. 128 TiB. */
BRISK_API void brisk_set_max_bytes(size_t max_bytes);
BRISK_API size_t brisk_get_max_bytes(void);

/* Release every cached block and purge unused memory to the OS now, and
 * end a rebuild (the frees that follow purge as if none had happened).
 * Waits for a purge pass under way on another thread to end, and runs
 * beside none. */
BRISK_API void brisk_collect(void);

/* Nonzero when ptr lies in memory brisk allocated (cheap; no locks). */
BRISK_API int brisk_owns(const void *ptr);

/* Bytes currently mapped from the OS by brisk (reserved address space that
 * is backed by a mapping, whether or not it is resident). */
BRISK_API size_t brisk_mapped_bytes(void);

/* ---- Explicit heaps -------------------------------------------------------
 * A heap is a private set of pages: allocate related blocks from it, then
 * drop them all at once with brisk_heap_destroy (no per-block free needed)
 * or empty it for reuse with brisk_heap_reset.
 *
 * Rules:
 *  - Only the thread that created a heap allocates from it (the checked
 *    library, libbrisk-checked, aborts with a message when another thread
 *    does). Its blocks may be freed with brisk_free/free by any thread.
 *  - brisk_heap_destroy, brisk_heap_reset and brisk_heap_set_max_bytes may
 *    be called from any thread, provided no other thread allocates from the
 *    heap meanwhile (for example after its creator has exited).
 *  - brisk_realloc on a heap block moves it to the calling thread's default
 *    heap when it must move; brisk_heap_realloc keeps it in the heap.
 *  - After destroy or reset, the heap's blocks are gone: freeing or using
 *    one is an error, as with any freed block.
 *  - A heap never takes over blocks of exited threads, so destroying it
 *    releases only what was allocated from it. */
typedef struct brisk_heap brisk_heap_t;

/* NULL with errno = ENOMEM when no memory is left. */
BRISK_API brisk_heap_t *brisk_heap_new(void);
/* NULL: a no-op. */
BRISK_API void brisk_heap_destroy(brisk_heap_t *heap);
/* NULL: does nothing, errno = EINVAL. */
BRISK_API void brisk_heap_reset(brisk_heap_t *heap);
/* Bound the memory the heap holds (its pages and huge blocks); past it, its
 * allocations return NULL with errno = ENOMEM. 0 = unbounded.
 * NULL: does nothing, errno = EINVAL. */
BRISK_API void brisk_heap_set_max_bytes(brisk_heap_t *heap, size_t max_bytes);
/* Bytes of pages and huge blocks the heap holds now; NULL: 0, errno = EINVAL. */
BRISK_API size_t brisk_heap_held_bytes(const brisk_heap_t *heap);
/* The malloc family on a heap. A NULL heap: NULL, errno = EINVAL (realloc
 * leaves the block alone). */
BRISK_MALLOC_ATTR void *brisk_heap_malloc(brisk_heap_t *heap, size_t size);
BRISK_MALLOC_ATTR void *brisk_heap_calloc(brisk_heap_t *heap, size_t count, size_t size);
BRISK_API void *brisk_heap_realloc(brisk_heap_t *heap, void *ptr, size_t size);
BRISK_MALLOC_ATTR void *brisk_heap_aligned_alloc(brisk_heap_t *heap, size_t alignment, size_t size);
/* brisk_calloc_aligned and brisk_realloc_aligned on a heap (a block that
 * moves stays in the heap). */
BRISK_MALLOC_ATTR void *brisk_heap_calloc_aligned(brisk_heap_t *heap, size_t count, size_t size, size_t alignment);
BRISK_API void *brisk_heap_realloc_aligned(brisk_heap_t *heap, void *ptr, size_t alignment, size_t size);

/* ---- Fixed-size object pools ----------------------------------------------
 * O(1) allocation and free of objects of one size from an intrusive free
 * list. Any thread may allocate and free: each thread works from its own
 * cache without locks; objects freed by other threads return lock-free.
 * A bounded pool (max_objects > 0) returns NULL with errno = ENOMEM while
 * max_objects are live, and recovers as objects are freed.
 * The checked library fills freed objects with 0xDD and aborts with a
 * message on a double free, a pointer from another pool or from outside
 * any pool, and a write to a freed object (seen when it is handed out). */
typedef struct brisk_pool brisk_pool_t;

typedef struct brisk_pool_stats_s {
  size_t object_size;  /* bytes per object: the request, at least 16, rounded up to `alignment` */
  size_t alignment;    /* the alignment objects get: the one asked, at least 8 (see brisk_pool_new) */
  size_t max_objects;  /* 0 = unbounded */
  size_t live_objects; /* allocated and not yet freed */
  size_t capacity;     /* objects the pool's memory can hold now */
  size_t bytes_held;   /* memory the pool holds */
  uint64_t allocs;     /* total successful allocations */
  uint64_t frees;      /* total frees */
  uint64_t exhausted;  /* allocations refused because the bound was reached */
} brisk_pool_stats_t;

/* object_size: 1 B .. 1 MiB; alignment: a power of two up to 16 KiB
 * (0 = 16). NULL with errno = EINVAL outside those limits. Every size and
 * alignment in them works. A free object holds a pointer, so objects are
 * aligned to at least 8 bytes (alignments 1, 2 and 4 get 8) and are at
 * least 16 bytes apart; brisk_pool_stats reports these effective values. */
BRISK_API brisk_pool_t *brisk_pool_new(size_t object_size, size_t alignment, size_t max_objects);
/* Frees every object of the pool at once. NULL: a no-op. */
BRISK_API void brisk_pool_destroy(brisk_pool_t *pool);
/* NULL pool: NULL, errno = EINVAL. */
BRISK_MALLOC_ATTR void *brisk_pool_alloc(brisk_pool_t *pool);
/* A NULL object: a no-op. A NULL pool: the object is not freed, errno = EINVAL. */
BRISK_API void brisk_pool_free(brisk_pool_t *pool, void *object);
/* 0, or EINVAL (out zeroed when not NULL) for a NULL pool or out. */
BRISK_API int brisk_pool_stats(const brisk_pool_t *pool, brisk_pool_stats_t *out);

/* ---- Statistics ------------------------------------------------------------
 * brisk_stats_get fills a snapshot. Set `version` to BRISK_STATS_VERSION
 * first; a library that does not know that version returns EINVAL. Reading
 * costs the fast path nothing: counts come from the pages themselves and
 * per-thread counters, merged on read. Figures that other threads are
 * changing at that moment are approximate; blocks freed by another thread
 * count as live until their owner collects them. Version 1, the struct
 * without thread_cached, is still accepted and filled up to that field. */
#define BRISK_STATS_VERSION 2
#define BRISK_STATS_MAX_CLASSES 64

enum brisk_tier { BRISK_TIER_SMALL, BRISK_TIER_MEDIUM, BRISK_TIER_LARGE, BRISK_TIER_HUGE, BRISK_TIER_COUNT };

typedef struct brisk_tier_stats {
  uint64_t live_blocks;
  size_t in_use;    /* bytes in live blocks (whole blocks, not requests) */
  size_t committed; /* bytes of pages holding blocks or not yet purged */
  size_t reserved;  /* address space of the tier's segments */
} brisk_tier_stats_t;

typedef struct brisk_stats {
  uint32_t version;                   /* in: BRISK_STATS_VERSION */
  uint32_t class_count;               /* entries used in class_size / class_live_blocks */
  uint64_t requested;                 /* bytes asked of malloc & co. so far (cumulative) */
  size_t in_use, committed, reserved; /* sums over the tiers */
  size_t cached;                      /* free segments and huge blocks kept warm (in reserved) */
  size_t peak_reserved;               /* highest `reserved` so far */
  size_t mapped;                      /* bytes brisk has mapped from the OS now */
  brisk_tier_stats_t tiers[BRISK_TIER_COUNT];
  size_t class_size[BRISK_STATS_MAX_CLASSES];
  uint64_t class_live_blocks[BRISK_STATS_MAX_CLASSES];
  uint64_t mmap_calls, munmap_calls, madvise_calls, mremap_calls;
  uint64_t cache_hits, cache_misses; /* segment and huge-block recycling */
  uint32_t thread_heaps;             /* live per-thread heaps */
  uint32_t explicit_heaps;           /* live brisk_heap_new heaps */
  uint32_t abandoned_segments;       /* segments of exited threads still holding blocks */
  size_t abandoned_bytes;            /* bytes of the pages in them that still hold blocks */
  uint64_t threads_exited;
  size_t thread_cached; /* freed blocks heaps keep for their next mallocs (free, not in in_use); version 2 */
} brisk_stats_t;

/* 0, or EINVAL for NULL or an unknown version. */
BRISK_API int brisk_stats_get(brisk_stats_t *stats);
/* A readable table on `out` (stderr when NULL). */
BRISK_API void brisk_stats_print(FILE *out);
/* The same as JSON; returns the length it needs (like snprintf). A NULL buf
 * is taken as len 0: nothing is written, the length is still returned. */
BRISK_API size_t brisk_stats_json(char *buf, size_t len);

/* ---- glibc's statistics and tuning under libbrisk ---------------------------
 * When libbrisk replaces malloc (LD_PRELOAD or linked), <malloc.h>'s
 * mallinfo2, mallinfo, malloc_stats and mallopt answer for brisk:
 *   arena     bytes of brisk's segments that hold small, medium and large
 *             blocks and are committed (pages in use or not yet purged),
 *             plus the cached free memory in keepcost
 *   uordblks  bytes in live small, medium and large blocks (whole blocks)
 *   fordblks  arena - uordblks: committed and free
 *   ordblks   free chunks, approximately: free block slots of pages that
 *             hold blocks, plus one per free unpurged page and per cached
 *             segment or huge block
 *   hblks     live huge blocks (above 1 MiB, each its own mapping)
 *   hblkhd    bytes mapped for them
 *   keepcost  cached free segments and huge blocks not yet purged
 *             (malloc_trim or brisk_collect gives them back)
 *   usmblks   the most memory brisk has had mapped at once (glibc: 0)
 *   smblks, fsmblks  0 (no fastbins)
 * glibc's "in use" total is uordblks + hblkhd. mallinfo is mallinfo2 with
 * each field saturated at INT_MAX (glibc's wraps). malloc_stats prints
 * glibc's "Arena 0" and "Total (incl. mmap)" lines from these figures on
 * stderr, then brisk_stats_print's table. mallopt returns 1 for glibc's
 * tuning parameters (M_MXFAST, M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD,
 * M_MMAP_MAX, M_ARENA_TEST, M_ARENA_MAX, the SVID no-ops) and ignores them
 * (brisk is tuned by the options below); 0 for M_CHECK_ACTION and M_PERTURB
 * (use libbrisk-checked) and for unknown parameters. */

/* ---- Tools that replace malloc ----------------------------------------------
 * Under valgrind (LD_PRELOAD=libbrisk.so valgrind prog), valgrind's allocator
 * serves every malloc-family and operator new/delete entry point libbrisk
 * exports, so it reports no false errors; mallinfo2, which it does not
 * replace, then describes brisk's idle heap. The brisk_* functions are not
 * replaced: their blocks must not be passed to free() under valgrind. */

/* ---- Options -----------------------------------------------------------------
 * Each is read once at start from its environment variable (BRISK_<NAME>)
 * and can be read and changed at run time. Sizes accept K, M, G, T suffixes.
 * Booleans take 1 or 0 (also yes/no, on/off, true/false); the numbers take
 * the range given with each option below.
 *
 * From the environment, a malformed or out-of-range value is ignored with
 * one warning line on stderr naming the variable, the value and the allowed
 * range; an unknown BRISK_* name gets one line listing the valid names and,
 * when one is close, "did you mean BRISK_...?". Names used by brisk's tools
 * (BRISK_LIB, BRISK_BUILD_DIR, BRISK_ASAN_SCALE, BRISK_TSAN_SCALE,
 * BRISK_TEST_*) are not warned about. BRISK_STATS_JSON=file (not an option)
 * writes the stats as JSON at exit. */
typedef enum brisk_option {
  BRISK_OPTION_SHOW_STATS,     /* print stats at exit */
  BRISK_OPTION_VERBOSE,        /* warnings about odd input (foreign pointers, ...) */
  BRISK_OPTION_PURGE_DELAY_MS, /* idle time before memory goes back to the OS
                                  (purged by the program's own allocation and
                                  free calls): 0 .. 3600000 (one hour); default 500 */
  BRISK_OPTION_MAX_BYTES,      /* cap on mapped memory: 0 = none (default), or
                                  16 MiB (enough to start a program) .. 128 TiB */
  BRISK_OPTION_CACHE_CAP,      /* bytes of free memory kept in the shared caches:
                                  0 .. 128 TiB; default 512 MiB. The reserve is
                                  kept on top of it. */
  BRISK_OPTION_HUGEPAGES,      /* ask for transparent huge pages on segments */
  BRISK_OPTION_RESERVE,        /* bytes of segments mapped now into the shared
                                  cache: 0 .. 1 GiB (the cache's 256 slots of
                                  4 MiB). The cache holds up to CACHE_CAP +
                                  RESERVE, so the reserve never pushes out, nor
                                  is pushed out by, what CACHE_CAP allows; the
                                  options do not change each other. Raising it
                                  at run time maps the difference; lowering it
                                  unmaps nothing. */
  BRISK_OPTION_REALTIME,       /* no background or deferred OS work */
  BRISK_OPTION_LEAK_REPORT,    /* report live blocks at exit */
  /* A helper thread of brisk's purges freed memory while the program is
   * idle (default off: brisk then has no thread, and passes run from the
   * program's allocation and free calls). With it on, the thread exists
   * once memory waits to be purged: a process whose main thread calls
   * pthread_exit does not end, and unshare(CLONE_NEWUSER) fails. */
  BRISK_OPTION_BACKGROUND_PURGE,
  BRISK_OPTION_COUNT
} brisk_option_t;

/* 0; EINVAL (and nothing changes) for an unknown option or a value out of
 * its range; ENOMEM when a reserve could not be mapped in full (the option
 * then holds what was, and one warning says so). */
BRISK_API int brisk_option_set(brisk_option_t option, long long value);
BRISK_API long long brisk_option_get(brisk_option_t option);
/* The name of the option's environment variable ("BRISK_VERBOSE"). */
BRISK_API const char *brisk_option_name(brisk_option_t option);

/* Realtime mode: from this call on, brisk makes no system call of its own
 * accord (no purge, no thread-exit reclaim to the OS, no cache trimming,
 * no mremap): after a warm-up or BRISK_RESERVE, allocation makes none at
 * all. brisk_collect() still releases everything on demand. Turning it on
 * waits for a purge pass already under way to end, whichever thread runs
 * it (one of the program's, or the BRISK_OPTION_BACKGROUND_PURGE thread). */
BRISK_API void brisk_set_realtime(int on);

/* ---- Heap checks and visits ------------------------------------------------- */

enum brisk_check_error {
  BRISK_CHECK_OK = 0,
  BRISK_CHECK_CHUNK_MAP = 1, /* a segment is not where the chunk map says */
  BRISK_CHECK_SEGMENT = 2,   /* segment header fields disagree */
  BRISK_CHECK_PAGE = 3,      /* page counts disagree */
  BRISK_CHECK_FREE_LIST = 4, /* a free list points outside its page, or loops */
  BRISK_CHECK_CACHE = 5,     /* a cached segment is inconsistent */
};

/* Walks brisk's metadata (the calling thread's heap and free lists, all
 * segments' headers, the caches, abandoned segments) and returns
 * BRISK_CHECK_OK or the first error found; brisk_check_message() then says
 * what is inconsistent and where. */
BRISK_API int brisk_check_heap(void);
BRISK_API const char *brisk_check_message(void);

/* Calls visit(block, usable_size, arg) (the checked library: the pointer
 * handed out and the size asked) for each live block of the calling
 * thread's heap, its explicit heaps, exited threads' abandoned segments and
 * every huge block; stops early when visit returns nonzero. Blocks of other
 * live threads' heaps are not visited (their lists change under us). */
typedef int (*brisk_block_visitor)(void *block, size_t size, void *arg);
/* A NULL visit: does nothing, errno = EINVAL. */
BRISK_API void brisk_visit_blocks(brisk_block_visitor visit, void *arg);

#ifdef __cplusplus
}
#endif

#endif /* BRISK_H */
