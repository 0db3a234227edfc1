/* What the secure library (BRISK_SECURE, libbrisk-secure) adds to the
 * allocator, and what every build calls in its place:
 *
 *   - free-list links (the first word of a free block) are stored encoded
 *     with a per-process secret mixed with the link's own address, and a
 *     link popped must decode to a block of the same page (or, on the lists
 *     that span pages, of the same class or heap): a link overwritten by an
 *     overflow or a write after free aborts instead of handing out an
 *     address the attacker chose;
 *   - a freed block carries a keyed mark in its second word, so a second
 *     free of it, from any thread, aborts; so does a free of a pointer that
 *     is not the start of a live block;
 *   - guard pages (PROT_NONE) after each segment's header and at the end of
 *     each mapping, so an underflow cannot reach a header and an overflow
 *     cannot run into the next mapping;
 *   - fresh blocks are threaded in random order.
 * In the release library every helper here compiles to the plain
 * operation. The checked library (BRISK_CHECKED) is secure too. */
#ifndef BRISK_CORE_SECURE_H
#define BRISK_CORE_SECURE_H

#include "core/types.h"

/* Set once, before the first block is threaded (process.c), never changed:
 * every link ever stored was encoded with them. */
typedef struct secure_keys {
  uintptr_t link_xor, link_add, freed;
} secure_keys_t;
extern BRISK_INTERNAL secure_keys_t _bk_keys;

BRISK_INTERNAL void _bk_secure_init(void);
BRISK_INTERNAL _Noreturn void _bk_secure_corrupted_link(const void *at, const void *link);
BRISK_INTERNAL _Noreturn void _bk_secure_bad_free(const char *call, const void *p, const char *misuse);
BRISK_INTERNAL bool _bk_secure_guard(segment_t *seg, size_t size);
/* (Not in the checked library, which hands fresh blocks out in order.) */
BRISK_INTERNAL block_t *_bk_secure_thread_shuffled(uint8_t *first, size_t count, size_t bsize, block_t *tail);
/* The secure checks of a free (freeing) or realloc of p, in full: p must
 * be the start of a live block (or inside one, on a page that handed out
 * over-aligned blocks); a free marks it free. Aborts with the misuse. */
BRISK_INTERNAL void _bk_secure_check_block(const char *call, const void *p, bool freeing);

/* ---- Links -------------------------------------------------------------- */

static inline uintptr_t rotate_left(uintptr_t x, unsigned r) {
  r &= 63;
  return (x << r) | (x >> ((64 - r) & 63));
}

static inline uintptr_t rotate_right(uintptr_t x, unsigned r) {
  r &= 63;
  return (x >> r) | (x << ((64 - r) & 63));
}

/* The stored form of a link from `at` to `next`, under keys k. */
static inline block_t *link_encode(const secure_keys_t k, const block_t *at, const block_t *next) {
  uintptr_t x = (uintptr_t)next ^ (uintptr_t)at ^ k.link_xor;
  return (block_t *)(rotate_left(x, (unsigned)k.link_xor) + k.link_add);
}

static inline void link_set(block_t *b, const block_t *next) {
#if BRISK_SECURE
  b->next = link_encode(_bk_keys, b, next);
#else
  b->next = (block_t *)next;
#endif
}

/* The link as stored, decoded but not checked (walks that report). */
static inline block_t *link_get(const block_t *b) {
#if BRISK_SECURE
  uintptr_t x = (uintptr_t)b->next - _bk_keys.link_add;
  return (block_t *)(rotate_right(x, (unsigned)_bk_keys.link_xor) ^ (uintptr_t)b ^ _bk_keys.link_xor);
#else
  return b->next;
#endif
}

/* Inside the blocks the page has threaded (no division: a same-page
 * target is what an attacker cannot forge without the secret). */
static inline bool page_holds(const page_t *pg, const void *p) {
#if BRISK_SECURE
  uintptr_t end = pg->secure_end;
#else
  uintptr_t end = (uintptr_t)pg->capacity * pg->block_size;
#endif
  return (uintptr_t)p - (uintptr_t)pg->start < end && ((uintptr_t)p & (BLOCK_ALIGN - 1)) == 0;
}

/* The next block of a page's list, which must be in the same page. */
static inline block_t *link_get_in_page(const page_t *pg, const block_t *b) {
  block_t *next = link_get(b);
  /* (The checked library checks it where the block is handed out, and
   * reports it with stacks: checked_block.c.) */
#if BRISK_SECURE && !BRISK_CHECKED
  if (unlikely(next && !page_holds(pg, next))) _bk_secure_corrupted_link(b, next);
#else
  (void)pg;
#endif
  return next;
}

/* A block of `block_size` bytes in a page in use (the next block of a hot
 * list): what page_holding checks, with one lookup fewer. A page not in
 * use, and a huge segment's pages[0], have no blocks by their secure_end. */
static inline bool block_of_size(const void *p, size_t block_size) {
  if (!chunk_starts_segment(p)) return false;
  const page_t *pg = page_of((segment_t *)((uintptr_t)p & ~(uintptr_t)SEGMENT_MASK), p);
  return page_holds(pg, p) && pg->block_size == block_size;
}

/* The page of a block on a list that spans pages (hot lists, a heap's
 * delayed frees), or NULL when p is not in a page in use. */
static inline page_t *page_holding(const void *p) {
  segment_t *seg = segment_of(p);
  if (!seg || seg->kind == SEG_HUGE) return NULL;
  page_t *pg = page_of(seg, p);
  return pg->in_use && page_holds(pg, p) ? pg : NULL;
}

/* ---- Marks of freed blocks ---------------------------------------------- */

static inline uintptr_t freed_mark(const block_t *b) { return (uintptr_t)b ^ _bk_keys.freed; }

/* Every block a page hands out (page_pop, hot_pop) loses the mark. The
 * checked library verifies there first that a freed block was not written
 * since its free (checked_block.c). */
#if BRISK_CHECKED
BRISK_INTERNAL void _bk_checked_handed_out(block_t *b);
#endif
static inline void block_handed_out(block_t *b) {
#if BRISK_CHECKED
  _bk_checked_handed_out(b);
#endif
#if BRISK_SECURE
  ((uintptr_t *)b)[1] = 0;
#else
  (void)b;
#endif
}

/* An over-aligned block placed inside a page's block (heap_aligned_block)
 * starts 32 bytes or more into it: the block's first word, which the
 * program does not own, holds a keyed mark of the pointer handed out, so
 * that a free inside a block is taken only at that very pointer (the
 * checked library keeps the offset in its trailer instead). The first free
 * overwrites the mark with a link. */
static inline uintptr_t aligned_mark(const void *p) { return (uintptr_t)p ^ rotate_left(_bk_keys.freed, 29); }

static inline void block_aligned_inside(void *block, const void *p) {
#if BRISK_SECURE && !BRISK_CHECKED
  ((uintptr_t *)block)[0] = aligned_mark(p);
#else
  (void)block, (void)p;
#endif
}

/* The secure fields of a page (types.h) as its blocks are threaded, and
 * when it leaves use (or is a huge segment's pages[0]). */
static inline void page_secure_update(page_t *pg) {
#if BRISK_SECURE
  /* c = 2^64 / size + 1 tests "offset is a multiple of the size" as
   * offset * c <= c - 1 (mod 2^64) for 32-bit offsets (Lemire, Kaser and
   * Kurz): a multiply instead of a division on every free. */
  if (pg->in_use) PUBLISH(pg->secure_multiple, UINT64_MAX / pg->block_size + 1);
  PUBLISH(pg->secure_end, pg->in_use ? (uint32_t)(pg->capacity * pg->block_size) : 0);
#else
  (void)pg;
#endif
}

/* The free fast path's check: true when p is the start of a block of pg
 * that is not free, now marked free. False for anything else (a huge
 * segment's block, a pointer inside a block, a block already free, a page
 * not in use), which the caller sends to _bk_free_slow to be checked in
 * full (_bk_secure_check_block): the fast path then calls nothing, and
 * keeps no register across a call. */
static inline bool secure_free_quick(page_t *pg, void *p) {
#if BRISK_SECURE
  /* Within a segment, offsets fit 32 bits. */
  uintptr_t off = (uintptr_t)p - (uintptr_t)pg->start;
  uint64_t c = PEEK(pg->secure_multiple);
  uintptr_t *words = p, mark = freed_mark(p);
  if (unlikely(off >= PEEK(pg->secure_end) || (uint64_t)(uint32_t)off * c > c - 1 || words[1] == mark))
    return false;
  words[1] = mark;
#else
  (void)pg, (void)p;
#endif
  return true;
}

#endif
