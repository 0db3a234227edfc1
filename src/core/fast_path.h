/* The allocation fast path, shared by brisk_malloc/brisk_free and the
 * malloc/free overrides (inlined into both so neither pays a jump).
 *
 *   malloc: pop the class's hot stack (hot.c; heap->direct_hot[size/16]
 *           up to 1 KiB), else heap->direct[size/16] -> page -> pop
 *           page->free (the secure library: no stack up to 1 KiB)
 *   free:   chunk map says "ours" -> segment (mask) -> the page's byte
 *           in seg->free_class; owned by this thread? push on that class's
 *           hot stack, or when it is full push page->free (the secure
 *           library reads the page: up to 1 KiB it pushes its local_free)
 * No lock and no atomic read-modify-write on either; everything else is in
 * _bk_heap_malloc_generic (heap.c) and _bk_free_slow (alloc.c). */
#ifndef BRISK_FAST_PATH_H
#define BRISK_FAST_PATH_H

#include "core/core.h"

/* The one way a block leaves a page: pg->free is not empty. */
static inline __attribute__((always_inline)) block_t *page_pop(heap_t *h, page_t *pg, size_t size) {
  block_t *b = pg->free;
  block_t *next = link_get(b);
#if BRISK_SECURE && !BRISK_CHECKED
  /* As link_get_in_page, but the report is this function's last act (a
   * jump): malloc then needs no stack frame for a call. The empty asm
   * hides how next was computed, so that the rare test for NULL reads
   * next, not a copy of a step before it that the compiler would keep. */
  __asm__("" : "+r"(next));
  if (unlikely(!page_holds(pg, next)) && next) return _bk_secure_corrupted_link_jump(b);
#endif
  pg->free = next;
  /* The next block's link is read by the next pop of this page: start the
   * load now, so that a list of blocks freed long ago (cold in the cache)
   * costs the program's time between two mallocs, not the malloc itself. */
  __builtin_prefetch(next);
  PUBLISH_ADD(pg->used_past_alarm, 1);
  block_handed_out(b);
  if (unlikely(heap_count_request(h, size))) return _bk_heap_heartbeat(h, b);
  return b;
}

/* The links of lists that span pages (the transfer cache's batches,
 * transfer.c) are checked without a page: a link must lead into a segment
 * (the chunk map), to a block that holds the mark its free wrote, keyed by
 * its address and the class's size, which no one forges without the key.
 * (The hot stacks hold pointers in the heap: nothing there to check.) */
static inline bool link_ok_across_pages(size_t block_size, const block_t *next) {
#if BRISK_SECURE
  /* (On a block boundary before the mark is read: a corrupted link may
   * decode to any byte of a segment.) */
  return !next ||
      (likely(chunk_starts_segment(next)) && likely(((uintptr_t)next & (BLOCK_ALIGN - 1)) == 0) &&
       likely(((const uintptr_t *)next)[1] == freed_mark(next, block_size)));
#else
  (void)block_size, (void)next;
  return true;
#endif
}

/* The block on top of hl's stack (hot.c), or NULL: a free of it is a
 * double free. */
static inline block_t *hot_top(const hot_list_t *hl) { return hl->top[-1]; }

/* The block on top of hl's stack, taken off: there is one. large: the
 * class's bytes count against the heap's bound (PAGE_BIG). */
static inline __attribute__((always_inline)) block_t *hot_unlink(heap_t *h, hot_list_t *hl, bool large) {
  block_t *b = hl->top[-1];
  PUBLISH_ADD(hl->top, -1);
  if (large) h->hot_bytes -= hl->block_size;
  return b;
}

/* (No check of the block: the stack holds pointers, out of reach of a
 * write to a freed block.) */
static inline __attribute__((always_inline)) block_t *hot_pop(heap_t *h, hot_list_t *hl, size_t size) {
  block_t *b = hot_unlink(h, hl, size > HOT_BOUNDED_MIN);
  block_handed_out(b);
  /* (A malloc-free loop of one size is served here alone: the heartbeat
   * must come from here too, or its pages would never be purged.) */
  if (unlikely(heap_count_request(h, size))) return _bk_heap_heartbeat(h, b);
  return b;
}

/* b on top of hl's stack, which has room. */
static inline __attribute__((always_inline)) void hot_link(hot_list_t *hl, block_t *b) {
  *hl->top = b;
  PUBLISH_ADD(hl->top, 1);
}

/* b, a block of hl's class, on hl's stack if there is room (large: as in
 * hot_unlink). */
static inline __attribute__((always_inline)) bool hot_push(heap_t *h, hot_list_t *hl, block_t *b, bool large) {
#if BRISK_SECURE
  /* The block freed last is held off the list until the next free of its
   * class (counted as on it): a malloc right after its free gets another
   * block, not the one an attacker freed to have it handed out again in
   * its place (secure_last_freed_second). While it waits, its link word
   * holds the complement of the mark its free wrote (hot_held_seal): a
   * write after its free (the classic poisoning) sends the next free of
   * its class to _bk_heap_free_local, which stops the program (a jump: a
   * call here made every free keep registers on the stack). */
  block_t *was = hl->held;
  if (was && unlikely(!hot_held_intact(was))) return false;
#endif
  if (hl->top == hl->end) return false;
  if (large) {
    if (h->hot_bytes + hl->block_size > HOT_HEAP_BYTES) return false;
    h->hot_bytes += hl->block_size;
  }
#if BRISK_SECURE
  hot_held_seal(b);
  PUBLISH(hl->held, b); /* (read by statistics: _bk_hot_count) */
  if (was) hot_link(hl, was);
#else
  hot_link(hl, b);
#endif
  return true;
}

/* A block other threads freed, of those the heap took from the transfer
 * cache (transfer.c): they count as used in their pages already. */
static inline __attribute__((always_inline)) block_t *transfer_pop(heap_t *h, transfer_list_t *tl, size_t size) {
  block_t *b = tl->head;
  /* The secure library checks a block here, as the head, not as the link
   * that made it the head: its line comes from the core that freed it, and
   * the check then waits for a load this pop's prefetch began long before
   * (checked as the next block, 64 B producer/consumer ran at 44 M blocks
   * a second, not 90 as the release library does). The report is a jump,
   * as in page_pop. */
  if (unlikely(!link_ok_across_pages(tl->block_size, b))) return _bk_secure_corrupted_head_jump(b);
  block_t *next = link_get(b);
  tl->head = next;
  /* Another core wrote the links as a rule: the next one's load starts now,
   * as in page_pop (in the secure library, also the one TRANSFER_AHEAD
   * further). */
  __builtin_prefetch(next);
#if BRISK_SECURE
  block_t **ahead = (block_t **)b + TRANSFER_WORD; /* (_bk_transfer_free) */
  __builtin_prefetch(*ahead);
  *ahead = NULL; /* not handed out, as the link (block_handed_out) */
#endif
  PUBLISH(tl->count, (uint16_t)(tl->count - 1));
  block_handed_out(b);
  (void)heap_count_request(h, size);
  return b;
}

/* The heap's list of other threads' blocks that a malloc of `size` (class
 * cls) pops, or NULL: what it took from the cache, else from 256 B up what
 * its thread freed of them itself (below, those blocks share cache lines
 * with blocks their owner keeps: passive false sharing). */
static inline transfer_list_t *transfer_ready(heap_t *h, unsigned cls, size_t size) {
  if (h->transfer_take[cls].head) return &h->transfer_take[cls];
  if (h->transfer_fill[cls].head && size >= TRANSFER_REUSE_MIN) return &h->transfer_fill[cls];
  return NULL;
}

/* A block of at least `size` bytes: what malloc hands out, and what the
 * checked library's allocations (checked.c) are carved from. */
static inline __attribute__((always_inline)) void *heap_malloc_block(heap_t *h, size_t size) {
  if (likely(size <= DIRECT_SIZE_MAX)) {
    if (!BRISK_SECURE) { /* (whose small classes have no hot list: hot.c) */
      hot_list_t *hl = h->direct_hot[(size + 15) >> 4];
      if (hot_top(hl)) return hot_pop(h, hl, size);
    }
    page_t *pg = h->direct[(size + 15) >> 4];
    if (likely(pg->free != NULL)) return page_pop(h, pg, size);
    /* The page's other list is next (as in _bk_heap_malloc_generic): its
     * collected remote frees, and in the secure library its owner's. */
    if (pg->local_free && page_reuse_local(pg)) return page_pop(h, pg, size);
    transfer_list_t *tl = transfer_ready(h, _bk_direct_class[(size + 15) >> 4], size);
    if (tl) return transfer_pop(h, tl, size);
  } else if (size <= LARGE_SIZE_MAX) {
    hot_list_t *hl = &h->hot[large_size_to_class(size)];
    if (hot_top(hl)) return hot_pop(h, hl, size);
  }
  return _bk_heap_malloc_generic(h, size);
}

/* Whether a block of `size` bytes at a multiple of align (0 or a power of
 * two) is a huge block: pages serve alignments up to MEDIUM_SIZE_MAX, by
 * carving the block from one of size + align - 1 bytes. */
static inline bool aligned_block_is_huge(size_t align, size_t size) {
  if (size > LARGE_SIZE_MAX) return true;
  return align > BLOCK_ALIGN && (align > MEDIUM_SIZE_MAX || size + align - 1 > LARGE_SIZE_MAX);
}

/* p (a block of a page, or NULL), its first `size` bytes cleared with zero. */
static inline void *cleared_if(bool zero, void *p, size_t size) {
  if (zero && p) memset(p, 0, size);
  return p;
}

static inline __attribute__((always_inline)) void free_fast(void *p);

/* A block of `size` bytes at a multiple of align (a power of two above
 * BLOCK_ALIGN): from a page when the alignment allows, else a huge block.
 * With zero its bytes read as zero: a page's block is cleared, a huge
 * block only where its mapping is not known to be zero (_bk_huge_alloc). */
static __attribute__((noinline)) void *heap_aligned_block_slow(heap_t *h, size_t align, size_t size, bool zero) {
  if (size > PTRDIFF_MAX) {
    errno = ENOMEM;
    return NULL;
  }
  if (size <= DIRECT_SIZE_MAX) {
    /* (heap_aligned_block, its one caller, found the class's next block
     * missing or misaligned.) */
    page_t *pg = h->direct[(size + 15) >> 4];
    /* A class with no page at hand (a program whose blocks of this size
     * all come aligned: aligned_alloc(64, 64) in a loop carved a 127-byte
     * block every time, 153 instructions a pair against malloc's 66) gets
     * one the way malloc does, and keeps the block when it is aligned, as
     * every block is where the class's size is a multiple of the
     * alignment (up to 128 B: page starts are aligned so). Not in the
     * checked library, whose free takes only its own allocations. */
    if (!BRISK_CHECKED && !pg->free) {
      void *p = heap_malloc_block(h, size);
      if (!p || ((uintptr_t)p & (align - 1)) == 0) return cleared_if(zero, p, size);
      free_fast(p); /* (the next call finds it at the top, misaligned, and carves) */
    }
  }
  if (!aligned_block_is_huge(align, size)) {
    /* From a page of the heap's own: only the owner writes a page's flags
     * (page_flags_set steps the count its frees step too). */
    uint8_t *b = _bk_heap_malloc_own_page(h, size + align - 1);
    if (!b) return NULL;
    uint8_t *p = (uint8_t *)align_up((uintptr_t)b, align);
    if (p != b) {
      page_t *pg = page_of(segment_of(b), b);
      page_flags_set(pg, (uint8_t)(pg->flags | PAGE_HAS_ALIGNED));
      page_copy_for_others(pg);
      block_aligned_inside(b, p);
    }
    return cleared_if(zero, p, size);
  }
  if (h == &_bk_heap_empty && !(h = _bk_heap_get_initialized())) return NULL;
  return _bk_huge_alloc(h, size, align, zero);
}

/* Its common case inline, where the next block of the size's own class is
 * aligned already: the rest, out of line, kept six registers on the stack for
 * every call (108 -> 81 instructions for aligned_alloc(64, 64) and free). */
static inline __attribute__((always_inline)) void *heap_aligned_block(heap_t *h, size_t align, size_t size,
                                                                      bool zero) {
  if (likely(size <= DIRECT_SIZE_MAX)) {
    if (!BRISK_SECURE) { /* (as in heap_malloc_block) */
      hot_list_t *hl = h->direct_hot[(size + 15) >> 4];
      block_t *b = hot_top(hl);
      if (likely(b && ((uintptr_t)b & (align - 1)) == 0)) return cleared_if(zero, hot_pop(h, hl, size), size);
    }
    page_t *pg = h->direct[(size + 15) >> 4];
    if (likely(pg->free && ((uintptr_t)pg->free & (align - 1)) == 0))
      return cleared_if(zero, page_pop(h, pg, size), size);
  }
  return heap_aligned_block_slow(h, align, size, zero);
}

/* The checked library sends every allocation through checked.c. */
static inline __attribute__((always_inline)) void *heap_malloc_fast(heap_t *h, size_t size) {
#if BRISK_CHECKED
  return _bk_checked_alloc(h, size, 0, false);
#endif
  return heap_malloc_block(h, size);
}

static inline __attribute__((always_inline)) void *malloc_fast(size_t size) {
  return heap_malloc_fast(_bk_tls_heap, size);
}

/* The release library's one check of a free: a block freed twice in a row
 * is the head of the list it went on (what glibc's tcache stops too), so a
 * compare with a word the push loads anyway stops the commonest double free
 * before it makes the list hand the block out twice. The caller then jumps
 * to _bk_double_free_jump, which aborts (a jump: free keeps no stack frame).
 * (The secure library checks every free in full: secure_free_quick.) */
static inline bool release_freed_twice(const block_t *head, const void *p) {
#if BRISK_SECURE
  (void)head, (void)p;
  return false;
#else
  return head == p;
#endif
}

/* A free by its owner of p, a block of pg, to the page: a secure library's
 * block of the direct sizes, or one whose class's hot stack is full (a run
 * of frees past the stack, a structure torn down, costs what it did before
 * the stacks, and evicts nothing from it). When the blocks in use fall
 * below the page's alarm, the page moves (page_flags_set). */
static inline __attribute__((always_inline)) void free_to_page(page_t *pg, void *p) {
  if (unlikely(release_freed_twice(pg->free, p))) _bk_double_free_jump(p);
  else if (unlikely(page_take_back(pg, p))) _bk_heap_block_alarm(p);
}

/* The release library's free of p, a block of h's own whose class is hot, on
 * that class's stack hl (large: as in hot_unlink), or when it is
 * full to its page (_bk_free_to_page, a jump: inline, that second copy of
 * the page push made every free keep a stack frame). */
static inline __attribute__((always_inline)) void free_own_hot(heap_t *h, hot_list_t *hl, void *p, bool large) {
  if (unlikely(release_freed_twice(hot_top(hl), p))) _bk_double_free_jump(p);
  else if (!hot_push(h, hl, p, large)) _bk_free_to_page(p);
}

static inline __attribute__((always_inline)) void free_fast(void *p) {
#if BRISK_CHECKED
  _bk_checked_free(p);
  return;
#endif
  /* A segment header at the masked address (NULL, foreign pointers and
   * those inside a huge block's later chunks go the slow way). */
  if (likely(chunk_starts_segment(p))) {
    segment_t *seg = segment_base(p);
#if BRISK_SECURE
    page_t *pg = page_of(seg, p);
    /* Anything but a plain free of a live block is checked out of line. */
    if (unlikely(!secure_free_quick(pg, p))) {
      _bk_secure_free_in(seg, p);
      return;
    }
#else
    /* (Read before the owner test, which it does not depend on: the two
     * loads overlap. Another thread's value is never acted on. The byte
     * of p's 64 KiB needs no page shift: see free_class.) */
    unsigned code = PEEK(seg->free_class[((uintptr_t)p >> SMALL_PAGE_SHIFT) & (MAX_PAGES_PER_SEGMENT - 1)]);
#endif
    heap_t *h = _bk_tls_heap;
    if (likely(atomic_load_explicit(&seg->owner_uid, memory_order_relaxed) == h->uid)) {
#if BRISK_SECURE
      /* The secure library's blocks of the direct sizes go back to their
       * page: current, parked as full or neither, one sign test
       * (page_flags_set). */
      unsigned flags = pg->flags;
      if (likely(!(flags & (PAGE_HOT | PAGE_HAS_ALIGNED)))) {
        free_to_page(pg, p);
        return;
      }
      if ((flags & (PAGE_BIG | PAGE_HAS_ALIGNED)) == PAGE_BIG) {
        /* (Out of line, a jump: its hold, inline, made GCC save registers
         * on every free, the small blocks' too.) */
        _bk_hot_free(h, pg, p);
        return;
      }
#else
      /* Every class of the release library is hot: its block goes on the
       * class's stack, which the segment's byte names without a read of
       * the page (free_class_code; above 8 KiB counted against the heap's
       * bound). A page with over-aligned blocks, or a free page, goes the
       * generic way. */
      if (likely(!(code & FREE_CODE_SLOW))) {
        free_own_hot(h, hot_of_code(h, code), p, false);
        return;
      }
      if (code != FREE_CODE_SLOW) {
        free_own_hot(h, hot_of_code(h, code - FREE_CODE_SLOW), p, true);
        return;
      }
#endif
    }
    _bk_heap_free_generic(seg, p);
    return;
  }
  _bk_free_slow(p);
}

/* The secure library's check of a free that names the block's size (fn:
 * the entry point): a size past the block's is the wrong type or the wrong
 * pointer (a C++ delete through a pointer to another class), stopped before
 * the free, for one compare where the free looks the page up anyway. Other
 * pointers (huge blocks, aligned ones, invalid ones) are left to the free's
 * own checks. */
static inline __attribute__((always_inline)) void secure_check_size(void *p, size_t size, const char *fn) {
#if BRISK_SECURE
  if (likely(chunk_starts_segment(p))) {
    page_t *pg = page_of(segment_base(p), p);
    if (unlikely(size > pg->block_size) && secure_block_start(pg, p))
      _bk_secure_wrong_size(fn, p, size, pg->block_size);
  }
#else
  (void)p, (void)size, (void)fn;
#endif
}

/* A free that names the block's size (fn: the entry point, for the checked
 * library's message, which holds the size to the one asked for). */
static inline __attribute__((always_inline)) void free_sized_fast(void *p, size_t size, const char *fn) {
#if BRISK_CHECKED
  _bk_checked_free_sized(p, size, fn, true);
  return;
#endif
  secure_check_size(p, size, fn);
  free_fast(p);
}

#endif
