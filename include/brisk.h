/* brisk: a fast, general-purpose memory allocator.
 *
 * Every function here is safe to call from any thread. Blocks from any
 * brisk_* allocation function are released with brisk_free (or plain free()
 * when libbrisk replaces malloc, as it does under LD_PRELOAD or when linked).
 *
 * Errors follow POSIX: allocation failure returns NULL with errno = ENOMEM,
 * a bad alignment returns NULL (or the error code for posix_memalign) with
 * EINVAL. */
#ifndef BRISK_H
#define BRISK_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BRISK_VERSION_MAJOR 0
#define BRISK_VERSION_MINOR 1

#if defined(__GNUC__)
#define BRISK_API __attribute__((visibility("default")))
#define BRISK_MALLOC_ATTR BRISK_API __attribute__((malloc, warn_unused_result))
#else
#define BRISK_API
#define BRISK_MALLOC_ATTR
#endif

/* ---- The malloc family -------------------------------------------------- */

/* malloc(0) returns a unique pointer that must be freed. Blocks of 16 bytes
 * or more are aligned to 16 bytes. */
BRISK_MALLOC_ATTR void *brisk_malloc(size_t size);
BRISK_MALLOC_ATTR void *brisk_calloc(size_t count, size_t size);
/* On failure the old block is left untouched and NULL is returned.
 * realloc(p, 0) frees nothing: it returns a minimal block (glibc frees and
 * returns NULL; both are allowed, and a unique pointer is the safer one). */
BRISK_API void *brisk_realloc(void *ptr, size_t size);
BRISK_API void *brisk_reallocarray(void *ptr, size_t count, size_t size);
BRISK_API void brisk_free(void *ptr);
/* size may be any value between the requested size and the usable size. */
BRISK_API void brisk_free_sized(void *ptr, size_t size);
/* alignment: a power of two. size need not be a multiple of it. */
BRISK_MALLOC_ATTR void *brisk_aligned_alloc(size_t alignment, size_t size);
/* alignment: a power of two that is a multiple of sizeof(void*). */
BRISK_API int brisk_posix_memalign(void **out, size_t alignment, size_t size);
BRISK_MALLOC_ATTR void *brisk_memalign(size_t alignment, size_t size);
/* Bytes that may be used at ptr (at least the requested size); 0 for NULL
 * or a pointer brisk did not allocate. */
BRISK_API size_t brisk_usable_size(const void *ptr);

/* ---- Limits -------------------------------------------------------------- */

/* Cap the memory brisk maps from the OS (0 = no cap). Allocations that would
 * pass it first release cached memory, then fail with ENOMEM. */
BRISK_API void brisk_set_max_bytes(size_t max_bytes);
BRISK_API size_t brisk_get_max_bytes(void);

/* Release every cached block and purge unused memory to the OS now. Waits
 * for a purge pass under way on another thread to end, and runs beside none. */
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

BRISK_API brisk_heap_t *brisk_heap_new(void);
BRISK_API void brisk_heap_destroy(brisk_heap_t *heap);
BRISK_API void brisk_heap_reset(brisk_heap_t *heap);
/* Bound the memory the heap holds (its pages and huge blocks); past it, its
 * allocations return NULL with errno = ENOMEM. 0 = unbounded. */
BRISK_API void brisk_heap_set_max_bytes(brisk_heap_t *heap, size_t max_bytes);
/* Bytes of pages and huge blocks the heap holds now. */
BRISK_API size_t brisk_heap_held_bytes(const brisk_heap_t *heap);
BRISK_MALLOC_ATTR void *brisk_heap_malloc(brisk_heap_t *heap, size_t size);
BRISK_MALLOC_ATTR void *brisk_heap_calloc(brisk_heap_t *heap, size_t count, size_t size);
BRISK_API void *brisk_heap_realloc(brisk_heap_t *heap, void *ptr, size_t size);
BRISK_MALLOC_ATTR void *brisk_heap_aligned_alloc(brisk_heap_t *heap, size_t alignment, size_t size);

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
  size_t object_size;   /* bytes per object (the request, rounded up to the alignment) */
  size_t alignment;
  size_t max_objects;   /* 0 = unbounded */
  size_t live_objects;  /* allocated and not yet freed */
  size_t capacity;      /* objects the pool's memory can hold now */
  size_t bytes_held;    /* memory the pool holds */
  uint64_t allocs;      /* total successful allocations */
  uint64_t frees;       /* total frees */
  uint64_t exhausted;   /* allocations refused because the bound was reached */
} brisk_pool_stats_t;

/* object_size: 1 B .. 1 MiB; alignment: a power of two up to 16 KiB
 * (0 = 16). NULL with errno = EINVAL outside those limits. */
BRISK_API brisk_pool_t *brisk_pool_new(size_t object_size, size_t alignment, size_t max_objects);
/* Frees every object of the pool at once. */
BRISK_API void brisk_pool_destroy(brisk_pool_t *pool);
BRISK_MALLOC_ATTR void *brisk_pool_alloc(brisk_pool_t *pool);
BRISK_API void brisk_pool_free(brisk_pool_t *pool, void *object);
BRISK_API void brisk_pool_stats(const brisk_pool_t *pool, brisk_pool_stats_t *out);

/* ---- Statistics ------------------------------------------------------------
 * brisk_stats_get fills a snapshot. Set `version` to BRISK_STATS_VERSION
 * first; a library that does not know that version returns EINVAL. Reading
 * costs the fast path nothing: counts come from the pages themselves and
 * per-thread counters, merged on read. Figures that other threads are
 * changing at that moment are approximate; blocks freed by another thread
 * count as live until their owner collects them. */
#define BRISK_STATS_VERSION 1
#define BRISK_STATS_MAX_CLASSES 64

enum brisk_tier { BRISK_TIER_SMALL, BRISK_TIER_MEDIUM, BRISK_TIER_LARGE, BRISK_TIER_HUGE, BRISK_TIER_COUNT };

typedef struct brisk_tier_stats {
  uint64_t live_blocks;
  size_t in_use;        /* bytes in live blocks (whole blocks, not requests) */
  size_t committed;     /* bytes of pages holding blocks or not yet purged */
  size_t reserved;      /* address space of the tier's segments */
} brisk_tier_stats_t;

typedef struct brisk_stats {
  uint32_t version;     /* in: BRISK_STATS_VERSION */
  uint32_t class_count; /* entries used in class_size / class_live_blocks */
  uint64_t requested;   /* bytes asked of malloc & co. so far (cumulative) */
  size_t in_use, committed, reserved; /* sums over the tiers */
  size_t cached;        /* free segments and huge blocks kept warm (in reserved) */
  size_t peak_reserved; /* highest `reserved` so far */
  size_t mapped;        /* bytes brisk has mapped from the OS now */
  brisk_tier_stats_t tiers[BRISK_TIER_COUNT];
  size_t class_size[BRISK_STATS_MAX_CLASSES];
  uint64_t class_live_blocks[BRISK_STATS_MAX_CLASSES];
  uint64_t mmap_calls, munmap_calls, madvise_calls, mremap_calls;
  uint64_t cache_hits, cache_misses; /* segment and huge-block recycling */
  uint32_t thread_heaps;     /* live per-thread heaps */
  uint32_t explicit_heaps;   /* live brisk_heap_new heaps */
  uint32_t abandoned_segments; /* segments of exited threads still holding blocks */
  size_t abandoned_bytes;    /* bytes of the pages in them that still hold blocks */
  uint64_t threads_exited;
} brisk_stats_t;

BRISK_API int brisk_stats_get(brisk_stats_t *stats);
/* A readable table on `out` (stderr when NULL). */
BRISK_API void brisk_stats_print(FILE *out);
/* The same as JSON; returns the length it needs (like snprintf). */
BRISK_API size_t brisk_stats_json(char *buf, size_t len);

/* ---- Options -----------------------------------------------------------------
 * Each is read once at start from its environment variable (BRISK_<NAME>)
 * and can be read and changed at run time. Sizes accept K, M, G, T suffixes. */
typedef enum brisk_option {
  BRISK_OPTION_SHOW_STATS,     /* print stats at exit */
  BRISK_OPTION_VERBOSE,        /* warnings about odd input (foreign pointers, ...) */
  BRISK_OPTION_PURGE_DELAY_MS, /* idle time before memory goes back to the OS (purged by
                                * the program's own allocation and free calls) */
  BRISK_OPTION_MAX_BYTES,      /* cap on mapped memory (0 = none) */
  BRISK_OPTION_CACHE_CAP,      /* bytes kept in the shared caches of free memory */
  BRISK_OPTION_HUGEPAGES,      /* ask for transparent huge pages on segments */
  BRISK_OPTION_RESERVE,        /* bytes of segments mapped at start */
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

/* 0, or EINVAL for an unknown option or a value out of range. */
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
  BRISK_CHECK_CHUNK_MAP = 1,  /* a segment is not where the chunk map says */
  BRISK_CHECK_SEGMENT = 2,    /* segment header fields disagree */
  BRISK_CHECK_PAGE = 3,       /* page counts disagree */
  BRISK_CHECK_FREE_LIST = 4,  /* a free list points outside its page, or loops */
  BRISK_CHECK_CACHE = 5,      /* a cached segment is inconsistent */
};

/* Walks brisk's metadata (the calling thread's heap and free lists, all
 * segments' headers, the caches, abandoned segments) and returns
 * BRISK_CHECK_OK or the first error found; brisk_check_message() then says
 * what is inconsistent and where. */
BRISK_API int brisk_check_heap(void);
BRISK_API const char *brisk_check_message(void);

/* Calls visit(block, usable_size, arg) for each live block of the calling
 * thread's heap, its explicit heaps, exited threads' abandoned segments and
 * every huge block; stops early when visit returns nonzero. Blocks of other
 * live threads' heaps are not visited (their lists change under us). */
typedef int (*brisk_block_visitor)(void *block, size_t size, void *arg);
BRISK_API void brisk_visit_blocks(brisk_block_visitor visit, void *arg);

#ifdef __cplusplus
}
#endif

#endif /* BRISK_H */
