/* The checked library's view of a block (checked_block.c), and how its
 * checks report a misuse. Part of core.h, which includes it. */
#ifndef BRISK_CORE_CHECKED_BLOCK_H
#define BRISK_CORE_CHECKED_BLOCK_H

#include "core/locate.h"

/* ---- checked_block.c: what the checked library keeps in a block --------- *
 * A block of the checked library ends with a trailer; between the bytes
 * asked for and the trailer lies a canary. A freed block keeps its link
 * and the freed cookie in its first two words and the free pattern up to
 * the trailer. Huge blocks have a trailer and a canary, no pattern. */
typedef struct trailer {
  uint64_t requested;   /* the size asked for: what malloc_usable_size says */
  uint32_t offset;      /* of the pointer handed out, from the block's start */
  uint32_t alloc_stack; /* stack depot ids; 0 when none was recorded */
  uint32_t free_stack;
  uint32_t seal; /* a hash of the fields above, the block and its state */
} trailer_t;
/* The seal while a thread writes the fields (checked_block.c). */
#define SEAL_WRITING 0x7f3c91d5u
/* Stores and loads of the checked library's fields that other threads
 * read in order: a trailer's (a seqlock, checked_block.c) and a page's
 * handed_out count, published after the trailer of the block it counts
 * is marked as being written. */
#define CHECKED_PUBLISH(field, value) __atomic_store_n(&(field), (value), __ATOMIC_RELEASE)
#define CHECKED_PEEK(field) __atomic_load_n(&(field), __ATOMIC_ACQUIRE)
#define CANARY_BYTE 0xab
#define CANARY_MAX 4096 /* canary bytes written and checked at most */
#define FREED_BYTE 0xdf
/* Bytes a block needs beyond those asked for (one canary byte at least);
 * and at least two words before the trailer for a freed block's link and
 * cookie. */
#define CHECKED_OVERHEAD (sizeof(trailer_t) + 1)
#define CHECKED_MIN_BLOCK (2 * sizeof(void *) + sizeof(trailer_t))

enum block_state { BLOCK_UNKNOWN, BLOCK_LIVE, BLOCK_FREED, BLOCK_DROPPED };
/* How a block was allocated, which says how it must be freed (free, delete,
 * delete[]). Kept in the seal, not in a field of its own: a trailer checks
 * under one kind only. */
enum alloc_kind { ALLOC_MALLOC, ALLOC_NEW, ALLOC_NEW_ARRAY, ALLOC_KINDS };

/* One block seen by the checks. */
typedef struct block_view {
  segment_t *seg;
  page_t *pg;     /* NULL for a huge block */
  uint8_t *start; /* the block */
  size_t size;    /* its size class, or a huge block's bytes to the mapping's end */
  trailer_t *trailer;
  enum block_state state;
  enum alloc_kind kind; /* known with the state */
  bool in_flux;         /* the trailer was being written: read it again */
} block_view_t;

/* The entry point a check runs under: its name for the messages and the
 * frame the reported stack starts above. */
typedef struct checked_call {
  const char *fn;
  const void *frame;
} checked_call_t;
/* The entry point this thread is in (for the check of blocks handed out). */
extern __thread const checked_call_t *_bk_checked_call BRISK_TLS BRISK_INTERNAL;

/* The block holding p; false when p is not in a block of brisk's. */
BRISK_INTERNAL bool _bk_block_view(const void *p, block_view_t *v);
/* A block handed out as p with `requested` bytes: trailer and canary. */
BRISK_INTERNAL void _bk_block_set_live(block_view_t *v, const void *p, size_t requested, uint32_t alloc_stack,
                                       enum alloc_kind kind);
/* The first canary byte of a live block that changed, or NULL. */
BRISK_INTERNAL const uint8_t *_bk_block_canary_broken(const block_view_t *v);
/* A freed block: the free pattern (paged blocks), the cookie, the stack. */
BRISK_INTERNAL void _bk_block_mark_freed(block_view_t *v, enum block_state state, uint32_t free_stack);
/* A freed block of a page holds its cookie and free pattern still, or the
 * report of a write after free aborts. */
BRISK_INTERNAL void _bk_checked_verify_freed(const checked_call_t *call, const block_view_t *v);
/* "N bytes, size class M" for the messages. */
BRISK_INTERNAL const char *_bk_block_describe(const block_view_t *v, char *buf, size_t len);
/* Prints "brisk: error: <message>", the stack of call, and the stacks the
 * block recorded; aborts. */
BRISK_INTERNAL _Noreturn void _bk_checked_fail(const checked_call_t *call, const block_view_t *v, const char *fmt,
                                               ...) __attribute__((format(printf, 3, 4)));

/* A misuse found outside a block's checks (heaps, pools): the message and,
 * in the checked library, the stack above the function it is in. */
#if BRISK_CHECKED
#define CHECKED_FAIL(...) _bk_checked_fail(&(checked_call_t){"", STACK_HERE()}, NULL, __VA_ARGS__)
#else
#define CHECKED_FAIL(...) _bk_fatal(__VA_ARGS__)
#endif

#endif
