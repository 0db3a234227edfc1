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

#include "core/locate.h"

/* Set once, before the first block is threaded (process.c), never changed:
 * every link ever stored was encoded with them. */
typedef struct secure_keys {
  uintptr_t link_xor, link_add, freed;
} secure_keys_t;
extern BRISK_INTERNAL secure_keys_t _bk_keys;

BRISK_INTERNAL void _bk_secure_init(void);
BRISK_INTERNAL _Noreturn void _bk_secure_corrupted_link(const void *at, const void *link);
/* The link at b failed its check: the same, declared to return what a
 * fast path returns (it never does), so that the fast path calls it as its
 * last act, a jump, and passes no more than it must (no stack frame, no
 * register kept for the report). */
BRISK_INTERNAL block_t *_bk_secure_corrupted_link_jump(const block_t *at);
/* The same, for a list whose head is checked as it is popped: the link
 * that led to it is not known any more. */
BRISK_INTERNAL block_t *_bk_secure_corrupted_head_jump(const block_t *head);
BRISK_INTERNAL _Noreturn void _bk_secure_bad_free(const char *call, const void *p, const char *misuse);
/* free(p) of a block its list is about to hand out (fast_path.h): aborts,
 * but is declared to return, as _bk_secure_corrupted_link_jump. */
BRISK_INTERNAL void _bk_double_free_jump(const void *p);
/* A hot block held off its list (hot_push) holds in its link word the
 * complement of the mark its free wrote: a write after the free changes
 * one of them, and a fill of both words with one value breaks the pair. */
static inline void hot_held_seal(block_t *b) { ((uintptr_t *)b)[0] = ~((uintptr_t *)b)[1]; }
static inline bool hot_held_intact(const block_t *b) {
  return ((const uintptr_t *)b)[0] == ~((const uintptr_t *)b)[1];
}
/* A hot block held off its list was written after its free. */
BRISK_INTERNAL _Noreturn void _bk_secure_corrupted_held(const void *b);
/* free_fast's free of a block of a hot class of h's own (hot.c). */
BRISK_INTERNAL void _bk_hot_free(heap_t *h, page_t *pg, block_t *b);
/* Stops the program if the block hl holds was written after its free: on
 * the slow paths of its class, a free's (hot_push sends it there) and a
 * malloc's (the hold keeps the block from the fast path's pops). */
static inline void hot_held_check(const hot_list_t *hl) {
#if BRISK_SECURE
  if (hl->held && !hot_held_intact(hl->held)) _bk_secure_corrupted_held(hl->held);
#else
  (void)hl;
#endif
}
/* A sized free (fn) of p naming `size` bytes, more than its block holds. */
BRISK_INTERNAL _Noreturn void _bk_secure_wrong_size(const char *fn, const void *p, size_t size, size_t holds);
BRISK_INTERNAL bool _bk_secure_guard(segment_t *seg, size_t size);
/* (Not in the checked library, which hands fresh blocks out in order.) */
BRISK_INTERNAL block_t *_bk_secure_thread_shuffled(uint8_t *first, size_t count, size_t bsize, block_t *tail);
/* The secure checks of a free (freeing) or realloc of p, in full: p must
 * be the start of a live block (or inside one, on a page that handed out
 * over-aligned blocks); a free marks it free. Aborts with the misuse, else
 * returns p's segment (NULL for NULL). */
BRISK_INTERNAL segment_t *_bk_secure_check_block(const char *call, const void *p, bool freeing);
/* free(p), where the free fast path found p in the first chunk of seg but
 * not a plain free of a live block: checked in full as above (without a
 * second lookup of seg), then freed. */
BRISK_INTERNAL void _bk_secure_free_in(segment_t *seg, void *p);

/* A free (freeing) or realloc of p in the huge block of seg: aborts unless
 * the block is live and p its start. Every library checks huge blocks,
 * whose frees are out of line anyway: freed twice, a huge block went to the
 * caches twice, and two later mallocs got the same block. */
BRISK_INTERNAL void _bk_huge_check(const char *call, segment_t *seg, const void *p, bool freeing);

/* p's segment (NULL for NULL and foreign pointers), checked in full first
 * in the secure library, which looks it up once for both (frees that do not
 * start at a segment's first chunk, and reallocs, come here; the fast
 * path's out-of-line frees go to _bk_secure_free_in). The
 * release library checks a huge block's realloc here; its frees, from here
 * and from the fast path, meet in _bk_heap_free_generic, which checks them. */
static inline segment_t *segment_checked(const char *call, const void *p, bool freeing) {
#if BRISK_SECURE
  return _bk_secure_check_block(call, p, freeing);
#else
  segment_t *seg = segment_of(p);
  if (!freeing && seg && PEEK(seg->kind) == SEG_HUGE) _bk_huge_check(call, seg, p, false);
  return seg;
#endif
}

/* ---- Links -------------------------------------------------------------- */

static inline uintptr_t rotate_left(uintptr_t x, unsigned r) {
  r &= 63;
  return (x << r) | (x >> ((64 - r) & 63));
}

static inline uintptr_t rotate_right(uintptr_t x, unsigned r) {
  r &= 63;
  return (x >> r) | (x << ((64 - r) & 63));
}

/* The stored form of a link from `at` to `next`, under keys k: the link
 * xored with its own address and link_xor, rotated, plus link_add. The
 * strength against forging is in the xor and the add with two secret
 * 64-bit words: the add's carries depend on the link and the key together,
 * so two stored links do not give away the difference of their targets,
 * and forging one takes both keys. The rotation (by a constant: it used to
 * be by link_xor's low 6 bits, which sat in every decode's chain of loads,
 * for 6 bits of secret) adds nothing there, but it is what stops a partial
 * overwrite: an overflow into the stored word's low bytes changes the
 * decoded link's bits 29 and up, far out of the page, where without it the
 * link decodes a few blocks from its target, in the same page, and passes
 * the pop's check (PartialOverwriteOfALinkAborts fails without it; the
 * corruption fuzzer found such a link of a hot list in its segment,
 * misaligned, whose mark link_ok_across_pages then read).
 * at ^ link_xor does not wait for next (the list's head, loaded just
 * before): the chain gets the xor with it, the rotation and the add, as
 * link_get's decode gets three steps. The empty asm keeps the compiler
 * from reassociating the xors back onto the chain. */
#define LINK_ROTATION 29
static inline block_t *link_encode(const secure_keys_t k, const block_t *at, const block_t *next) {
  uintptr_t pad = (uintptr_t)at ^ k.link_xor;
  __asm__("" : "+r"(pad));
  return (block_t *)(rotate_left((uintptr_t)next ^ pad, LINK_ROTATION) + k.link_add);
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
  /* b ^ link_xor does not wait for the load of the link, so the decode
   * adds three steps to a pop's chain of loads (the next pop waits for it),
   * not four. The empty asm keeps the compiler from folding link_xor back
   * in as a memory operand of a fourth step. */
  uintptr_t pad = (uintptr_t)b ^ _bk_keys.link_xor;
  __asm__("" : "+r"(pad));
  return (block_t *)(rotate_right(x, LINK_ROTATION) ^ pad);
#else
  return b->next;
#endif
}

/* Inside the blocks the page has threaded, at a multiple of BLOCK_ALIGN
 * (no division: a same-page target is what an attacker cannot forge
 * without the secret). Rotating the offset right by 4 moves a misaligned
 * offset's low bits to the top, past any count: one compare tests both. */
static inline bool page_holds(const page_t *pg, const void *p) {
  uintptr_t off = (uintptr_t)p - (uintptr_t)pg->start;
#if BRISK_SECURE
  _Static_assert(BLOCK_ALIGN == 16, "secure_granules counts 16-byte units");
  return rotate_right(off, 4) < pg->secure_granules;
#else
  return off < (uintptr_t)pg->capacity * pg->block_size && (off & (BLOCK_ALIGN - 1)) == 0;
#endif
}

/* The next block of a page's list, which must be in the same page. NULL
 * (the list's end) fails page_holds too, and is told apart only then. */
static inline block_t *link_get_in_page(const page_t *pg, const block_t *b) {
  block_t *next = link_get(b);
  /* (The checked library checks it where the block is handed out, and
   * reports it with stacks: checked_block.c.) */
#if BRISK_SECURE && !BRISK_CHECKED
  if (unlikely(!page_holds(pg, next)) && next) _bk_secure_corrupted_link(b, next);
#else
  (void)pg;
#endif
  return next;
}

/* The secure library's list of a page's own frees, made the list malloc
 * pops, with its first two blocks swapped: the block freed last comes out
 * second, so a free and a malloc of its size right after it do not get the
 * same block back (the use after free an attacker arranges by freeing an
 * object and allocating one of its size in its place). A list of one block
 * is not taken (NULL): that block is the one freed last, and it waits on
 * local_free for the next free of the page, while malloc threads fresh
 * blocks or takes another page (the page parks as full: a heap sprayed to
 * fill a page, then one free and one malloc, got the freed block back).
 * Once per cycle of the page's lists. */
static inline block_t *secure_last_freed_second(const page_t *pg, block_t *list) {
#if BRISK_SECURE && !BRISK_CHECKED
  block_t *second = list ? link_get_in_page(pg, list) : NULL;
  if (!second) return NULL;
  link_set(list, link_get_in_page(pg, second));
  link_set(second, list);
  return second;
#else
  (void)pg;
  return list;
#endif
}

/* The page of a block on a list that spans pages (a heap's delayed
 * frees), or NULL when p is not in a page in use. */
static inline page_t *page_holding(const void *p) {
  segment_t *seg = segment_of(p);
  if (!seg || seg->kind == SEG_HUGE) return NULL;
  page_t *pg = page_of(seg, p);
  return pg->in_use && page_holds(pg, p) ? pg : NULL;
}

/* ---- Marks of freed blocks ---------------------------------------------- */

/* Keyed by the block's address and size: a free of the block while it is
 * free is told by its mark, and a transfer batch (which spans pages) tells
 * by it that a block it is to hand out was freed as one of its class
 * (link_ok_across_pages). */
static inline uintptr_t freed_mark(const block_t *b, size_t block_size) {
  return (uintptr_t)b ^ _bk_keys.freed ^ block_size;
}

/* Every block a page hands out (page_pop, hot_pop) loses the mark, and in
 * the secure library its link too: an encoded link read from a block the
 * program got uninitialised, beside the block's address, is material for
 * solving the keys (64 of them, read after malloc, gave a key pair that
 * predicted three links in four). The same line is written either way. The
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
  ((uintptr_t *)b)[0] = 0;
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

/* The fixed secure fields of a page (types.h), set where its block size is
 * (page init), before any of its blocks is handed out: a free on another
 * thread reads them, as it reads block_size and start, without an atomic
 * load (which the compiler would not fold into the multiply). */
static inline void page_secure_init(page_t *pg) {
#if BRISK_SECURE
  size_t size = pg->block_size;
  unsigned shift = (unsigned)__builtin_ctzl(size);
  uint64_t odd = size >> shift, inverse = odd;              /* right in 3 bits: odd * odd = 1 mod 8 */
  for (int i = 0; i < 5; i++) inverse *= 2 - odd * inverse; /* Newton: 6, 12, 24, 48, 96 bits */
  PUBLISH(pg->secure_inverse, inverse);
  PUBLISH(pg->secure_mask, ((uint64_t)1 << shift) - 1);
  PUBLISH(pg->secure_mark_key, freed_mark(NULL, size));
#else
  (void)pg;
#endif
}

/* The bounds of a page's threaded blocks, as its blocks are threaded, and
 * when it leaves use (or is a huge segment's pages[0]): 0, so that no free
 * passes the fast check (a page not in use keeps its last inverse). */
static inline void page_secure_update(page_t *pg) {
#if BRISK_SECURE
  uint64_t n = pg->in_use ? pg->capacity : 0;
  /* n << shift, from the mask page_secure_init set (a page never used has
   * neither, and no block: 0). */
  PUBLISH(pg->secure_limit, n * (pg->secure_mask + 1));
  PUBLISH(pg->secure_granules, n * pg->block_size / BLOCK_ALIGN);
#else
  (void)pg;
#endif
}

/* Whether p is the start of one of the blocks pg has threaded, with no
 * division. For a block size of odd * 2^shift, t = off * inverse(odd) (mod
 * 2^64, where the multiply is a bijection; Granlund and Montgomery) is the
 * block's index shifted left by shift exactly when off is a multiple of
 * the size: so off is the start of block u < n if and only if t < n << shift
 * and t's low shift bits are 0 (then off = t * odd = u * size, mod 2^64,
 * and u * size < 2^64). One multiply and two tests of its product; a
 * rotation by shift would fold them into one compare, but a rotation by a
 * variable count made the free of a malloc-free loop 10% slower. */
static inline bool secure_block_start(const page_t *pg, const void *p) {
#if BRISK_SECURE
  uint64_t t = ((uintptr_t)p - (uintptr_t)pg->start) * pg->secure_inverse;
  return t < PEEK_OPERAND(pg->secure_limit) && (t & pg->secure_mask) == 0;
#else
  (void)pg, (void)p;
  return true;
#endif
}

/* The free fast path's check: true when p is the start of a block of pg
 * that is not free, now marked free. False for anything else (a huge
 * segment's block, a pointer inside a block, a block already free, a page
 * not in use), which the caller sends to _bk_secure_free_in to be checked in
 * full (_bk_secure_check_block): the fast path then calls nothing, and
 * keeps no register across a call. */
static inline bool secure_free_quick(page_t *pg, void *p) {
#if BRISK_SECURE
  if (unlikely(!secure_block_start(pg, p))) return false;
  uintptr_t *words = p, mark = (uintptr_t)p ^ pg->secure_mark_key; /* freed_mark(p, block_size) */
  if (unlikely(words[1] == mark)) return false;
  words[1] = mark;
#else
  (void)pg, (void)p;
#endif
  return true;
}

#endif
