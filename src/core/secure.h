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

/* Per size class, the constant c = 2^64 / size + 1 that tests "offset is
 * a multiple of the size" as offset * c <= c - 1 (mod 2^64) for 32-bit
 * offsets (Lemire, Kaser and Kurz): a multiply instead of a division on
 * every free. */
extern BRISK_INTERNAL uint64_t _bk_class_multiple_test[CLASS_COUNT];

BRISK_INTERNAL void _bk_secure_init(void);
BRISK_INTERNAL _Noreturn void _bk_secure_corrupted_link(const void *at, const void *link);
BRISK_INTERNAL _Noreturn void _bk_secure_bad_free(const char *call, const void *p, const char *misuse);
BRISK_INTERNAL bool _bk_secure_guard(segment_t *seg, size_t size);
/* (Not in the checked library, which hands fresh blocks out in order.) */
BRISK_INTERNAL block_t *_bk_secure_thread_shuffled(uint8_t *first, size_t count, size_t bsize, block_t *tail);
/* The secure checks of a free or realloc of p in a huge segment or
 * outside brisk (paged blocks are checked inline, secure_page_check). */
BRISK_INTERNAL void _bk_secure_check_huge(const char *call, segment_t *seg, const void *p, bool freeing);
BRISK_INTERNAL void _bk_secure_check_block(const char *call, const void *p, bool freeing);

/* ---- Links -------------------------------------------------------------- */

static inline uintptr_t rotate_left(uintptr_t x, unsigned r) {
  r &= 63;
  return (x << r) | (x >> ((64 - r) & 63));
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
  return (block_t *)(rotate_left(x, 64 - ((unsigned)_bk_keys.link_xor & 63)) ^ (uintptr_t)b ^ _bk_keys.link_xor);
#else
  return b->next;
#endif
}

/* Inside the blocks the page has threaded (no division: a same-page
 * target is what an attacker cannot forge without the secret). */
static inline bool page_holds(const page_t *pg, const void *p) {
  return (uintptr_t)p - (uintptr_t)pg->start < (uintptr_t)pg->capacity * pg->block_size &&
      ((uintptr_t)p & (BLOCK_ALIGN - 1)) == 0;
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

/* A free (freeing) or realloc of p, in pg: p must be the start of a live
 * block (or inside one, on a page that handed out over-aligned blocks). */
static inline void secure_page_check(const char *call, page_t *pg, const void *p, bool freeing) {
#if BRISK_SECURE
  uintptr_t off = (uintptr_t)p - (uintptr_t)pg->start;
  if (unlikely(!PEEK(pg->in_use) || off >= (uintptr_t)PEEK(pg->capacity) * pg->block_size))
    _bk_secure_bad_free(call, p, "not a block brisk handed out (invalid pointer)");
  /* Within a segment, offsets fit 32 bits. */
  uint64_t c = _bk_class_multiple_test[pg->size_class];
  uint32_t inside = 0;
  if (unlikely((uint64_t)(uint32_t)off * c > c - 1)) {
    /* Over-aligned blocks (alignment 32 and up) start inside their blocks. */
    if (!(PEEK(pg->flags) & PAGE_HAS_ALIGNED) || ((uintptr_t)p & (2 * BLOCK_ALIGN - 1)))
      _bk_secure_bad_free(call, p, "pointer is inside a block, not at its start");
    inside = (uint32_t)off % (uint32_t)pg->block_size;
  }
  uintptr_t *words = (uintptr_t *)((uintptr_t)p - inside);
  if (unlikely(words[1] == freed_mark((block_t *)words)))
    _bk_secure_bad_free(call, p, "double free (the block is already free)");
  if (freeing) words[1] = freed_mark((block_t *)words);
#else
  (void)call, (void)pg, (void)p, (void)freeing;
#endif
}

/* A free or realloc of p in seg (at pg): the huge and the paged checks. */
static inline void secure_block_check(const char *call, segment_t *seg, page_t *pg, const void *p, bool freeing) {
  if (!BRISK_SECURE) return;
  if (unlikely(PEEK(seg->kind) == SEG_HUGE)) _bk_secure_check_huge(call, seg, p, freeing);
  else secure_page_check(call, pg, p, freeing);
}

#endif
