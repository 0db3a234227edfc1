/* The secure library's keys, guard pages, shuffled pages and the messages
 * of its aborts (secure.h says what it guards against). The release
 * library compiles the keys only: its links are stored plain. */
#include "core/core.h"

secure_keys_t _bk_keys;

/* Called once, before any block is threaded. Without a random source the
 * keys still differ from run to run (addresses under ASLR and the clock),
 * only less unpredictably. */
void _bk_secure_init(void) {
  if (!BRISK_SECURE) return;
  secure_keys_t k;
  if (!_bk_os_random(&k, sizeof k)) {
    uintptr_t seed = (uintptr_t)&k ^ ((uintptr_t)&_bk_keys << 17) ^
        (uintptr_t)_bk_os_now_ms() * 0x9E3779B97F4A7C15ull;
    k.link_xor = seed * 0xBF58476D1CE4E5B9ull;
    k.link_add = (seed ^ (seed >> 31)) * 0x94D049BB133111EBull;
    k.freed = k.link_xor ^ (k.link_add >> 7) ^ (uintptr_t)_bk_os_process_id();
  }
  k.freed |= 1; /* a freed block's second word is never 0 (which hand-out writes) */
  _bk_keys = k;
}

void _bk_secure_corrupted_link(const void *at, const void *link) {
  _bk_fatal("corrupted free list at %p: its link leads to %p, not a free block of its kind "
            "(heap overflow or write after free?)",
            at, link);
}

block_t *_bk_secure_corrupted_link_jump(const block_t *at) { _bk_secure_corrupted_link(at, link_get(at)); }

block_t *_bk_secure_corrupted_head_jump(const block_t *head) {
  _bk_fatal("corrupted free list: a link leads to %p, not a free block of its kind "
            "(heap overflow or write after free?)",
            (const void *)head);
}

void _bk_secure_bad_free(const char *call, const void *p, const char *misuse) {
  _bk_fatal("%s(%p): %s", call, p, misuse);
}

void _bk_double_free_jump(const void *p) {
  _bk_secure_bad_free("free", p, "double free (the block is the next its list hands out)");
}

void _bk_secure_corrupted_held(const void *b) {
  _bk_fatal("corrupted free list at %p: a freed block written after its free (use after free)", b);
}

void _bk_secure_wrong_size(const char *fn, const void *p, size_t size, size_t holds) {
  _bk_fatal(
      "%s(%p, %zu): the block holds %zu bytes: a size it was not allocated with (wrong type or wrong pointer)", fn,
      p, size, holds);
}

void _bk_huge_check(const char *call, segment_t *seg, const void *p, bool freeing) {
  if (PEEK(seg->state) != SEG_STATE_HUGE || !seg->live)
    _bk_secure_bad_free(call, p, "double free or invalid pointer (its block is not live)");
  if ((const uint8_t *)p != (uint8_t *)seg + PEEK(seg->block_offset))
    _bk_secure_bad_free(call, p, "pointer is inside a block, not at its start");
  if (freeing) seg->live = 0;
}

#if BRISK_SECURE

static void check_paged(const char *call, page_t *pg, const void *p, bool freeing) {
  uintptr_t off = (uintptr_t)p - (uintptr_t)pg->start;
  if (off >= (uintptr_t)PEEK(pg->secure_granules) * BLOCK_ALIGN)
    _bk_secure_bad_free(call, p, "not a block brisk handed out (invalid pointer)");
  uint32_t inside = (uint32_t)off % (uint32_t)pg->block_size;
  /* Over-aligned blocks (alignment 32 and up) start inside their blocks,
   * at the pointer their mark names (block_aligned_inside). */
  const char *interior = "pointer is inside a block, not at its start";
  if (inside && (!(PEEK(pg->flags) & PAGE_HAS_ALIGNED) || ((uintptr_t)p & (2 * BLOCK_ALIGN - 1))))
    _bk_secure_bad_free(call, p, interior);
  uintptr_t *words = (uintptr_t *)((uintptr_t)p - inside);
  if (words[1] == freed_mark((block_t *)words, pg->block_size))
    _bk_secure_bad_free(call, p, "double free, or a free of a block never handed out (the block is free)");
  if (inside && words[0] != aligned_mark(p)) _bk_secure_bad_free(call, p, interior);
  if (freeing) words[1] = freed_mark((block_t *)words, pg->block_size);
}

static void check_in(const char *call, segment_t *seg, const void *p, bool freeing) {
  if (PEEK(seg->kind) == SEG_HUGE) _bk_huge_check(call, seg, p, freeing);
  else check_paged(call, page_of(seg, p), p, freeing);
}

segment_t *_bk_secure_check_block(const char *call, const void *p, bool freeing) {
  if (!p) return NULL;
  segment_t *seg = segment_of(p);
  if (!seg) _bk_secure_bad_free(call, p, "pointer was not allocated by brisk (foreign or invalid pointer)");
  check_in(call, seg, p, freeing);
  return seg;
}

void _bk_secure_free_in(segment_t *seg, void *p) {
  check_in("free", seg, p, true);
  _bk_heap_free_generic(seg, p);
}
#endif

/* Guard pages after the header and at the end of a fresh mapping; a huge
 * block's mapping that grows, shrinks or moves keeps them (memory.c). */
bool _bk_secure_guard(segment_t *seg, size_t size) {
  uint8_t *header_end = (uint8_t *)seg + segment_header_guard_offset();
  return _bk_os_guard(header_end, OS_PAGE_SIZE) &&
      _bk_os_guard((uint8_t *)seg + size - OS_PAGE_SIZE, OS_PAGE_SIZE);
}

/* ---- Fresh blocks in random order --------------------------------------- */
#if BRISK_SECURE && !BRISK_CHECKED

static __thread uint64_t shuffle_state BRISK_TLS;

static uint64_t next_random(void) {
  if (!shuffle_state) shuffle_state = (_bk_keys.link_add ^ (uintptr_t)&shuffle_state) | 1;
  uint64_t x = shuffle_state; /* xorshift64: a few cycles, never 0 */
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return shuffle_state = x;
}

/* Fresh blocks are handed out through a window of the next WINDOW blocks
 * in address order: each next block is one of the window picked at random,
 * and the block after the window takes its place. Which block comes next
 * is one of WINDOW (until the last few), yet the blocks handed out stay
 * within a few windows of each other, so a loop that touches its fresh
 * blocks walks memory nearly in order, as the CPU's prefetchers and the
 * TLB like (a full shuffle of the extension made such a loop 3x slower,
 * and 8 interleaved runs 1.5-3x). A block may wait in the window for many
 * picks: with 16 blocks the walk strayed up to 65 blocks back and lost
 * the prefetchers (bench/fixed, 64 B: 0.37x the release library's
 * objects/s; with 8, 0.74x). */
#define WINDOW_BITS 3
#define WINDOW (1 << WINDOW_BITS)

/* One block threaded behind *prev, marked free as a freed block is: a
 * page's memory may have been purged (zero) or held other blocks before,
 * and a free of a block that was never handed out is a double free too. */
static inline void thread_one(const secure_keys_t keys, uintptr_t freed, block_t **prev, uint8_t *at) {
  block_t *b = (block_t *)at;
  ((uintptr_t *)b)[1] = (uintptr_t)b ^ freed;
  (*prev)->next = link_encode(keys, *prev, b);
  *prev = b;
}

/* Threads count (2 or more) blocks of bsize at first through the window,
 * behind the anchor; returns the last. */
static BRISK_NOINLINE block_t *thread_window(block_t *anchor, uint8_t *first, size_t count, size_t bsize) {
  const secure_keys_t keys = _bk_keys;        /* not reloaded after each store */
  const uintptr_t freed = keys.freed ^ bsize; /* freed_mark(b, bsize) is b ^ freed */
  block_t *prev = anchor;
  uint8_t *window[WINDOW];
  size_t filled = count < WINDOW ? count : WINDOW;
  /* Each block is fetched for writing as it enters the window: its link
   * and mark are stored some picks later, in an order the CPU's
   * prefetchers do not follow, to memory not in the cache as a rule (the
   * blocks of a page emptied earlier). Without it, bench/fixed's 128 B
   * objects: 57 M/s, and 30% of the time here; with it 76. */
  for (size_t i = 0; i < filled; i++) {
    window[i] = first + i * bsize;
    __builtin_prefetch(window[i], 1);
  }
  uint8_t *after = first + filled * bsize, *end = first + count * bsize;
  /* While blocks remain beyond a full window, a pick is WINDOW_BITS random
   * bits (60 under a marker bit: twenty picks a number); then the window
   * drains, each pick 8 bits scaled to the blocks left in it. */
  uint64_t bits = 0;
  for (; after < end; after += bsize) {
    if (bits < WINDOW) bits = next_random() >> 4 | (uint64_t)1 << 60;
    size_t pick = bits & (WINDOW - 1);
    bits >>= WINDOW_BITS;
    thread_one(keys, freed, &prev, window[pick]);
    __builtin_prefetch(after, 1);
    window[pick] = after;
  }
  for (size_t left = filled; left > 1;) {
    if (bits < 256) bits = next_random() >> 8 | (uint64_t)1 << 56;
    size_t pick = (size_t)((bits & 255) * left >> 8);
    bits >>= 8;
    thread_one(keys, freed, &prev, window[pick]);
    window[pick] = window[--left];
  }
  thread_one(keys, freed, &prev, window[0]); /* the last one: no choice left */
  return prev;
}

/* Threads the count (1 or more) blocks of bsize at first, in the window's
 * random order and each marked free, ahead of tail; returns the first. */
block_t *_bk_secure_thread_shuffled(uint8_t *first, size_t count, size_t bsize, block_t *tail) {
  block_t *b = (block_t *)first;
  if (count == 1) { /* (blocks of 16 KiB and up come one at a time) */
    ((uintptr_t *)b)[1] = freed_mark(b, bsize);
    link_set(b, tail);
    return b;
  }
  /* The list starts at an anchor (its link decoded at the end), so that
   * each block is threaded without a test for the first. */
  block_t anchor;
  link_set(thread_window(&anchor, first, count, bsize), tail);
  return link_get(&anchor);
}
#endif
