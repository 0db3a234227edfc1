/* The checks of the checked library (BRISK_CHECKED): every free is
 * validated before it touches brisk's lists, and a misuse aborts with a
 * message that names it. The release library compiles none of this. */
#include "core/core.h"

#if BRISK_CHECKED


static bool list_contains(const block_t *list, const block_t *b) {
  for (size_t n = 0; list && n < (1u << 20); list = link_get(list), n++)
    if (list == b) return true;
  return false;
}

void _bk_checked_free(void *p) {
  if (!p) return;
  segment_t *seg = segment_of(p);
  if (!seg) _bk_fatal("free(%p): pointer was not allocated by brisk (foreign or invalid pointer)", p);
  if (seg->kind == SEG_HUGE) {
    if ((uint8_t *)p != (uint8_t *)seg + seg->block_offset)
      _bk_fatal("free(%p): pointer is inside a block, not at its start", p);
    if (!seg->live) _bk_fatal("free(%p): double free (the block is already free)", p);
    seg->live = 0;
    _bk_heap_free_generic(seg, page_of(seg, p), p);
    return;
  }
  page_t *pg = page_of(seg, p);
  if (!pg->in_use) _bk_fatal("free(%p): double free or invalid pointer (its page holds no blocks)", p);
  block_t *b = _bk_page_block_start(pg, p);
  if ((void *)b != p && !(PEEK(pg->flags) & PAGE_HAS_ALIGNED))
    _bk_fatal("free(%p): pointer is inside a block, not at its start", p);
  uintptr_t *words = (uintptr_t *)b;
  if (words[1] == (freed_mark(b))) {
    /* Confirm on the owner's lists when this thread owns the page. */
    bool owner = atomic_load_explicit(&seg->owner_uid, memory_order_relaxed) == _bk_tls_heap->uid;
    if (!owner || list_contains(pg->free, b) || list_contains(pg->local_free, b) ||
        list_contains(tf_list(atomic_load(&pg->thread_free)), b))
      _bk_fatal("free(%p): double free (the block is already free)", p);
  }
  words[1] = freed_mark(b);
  _bk_heap_free_generic(seg, pg, p);
}

#endif
