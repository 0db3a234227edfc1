/* Visiting every live block (brisk_visit_blocks), on which the leak
 * report at exit (leaks.c) is built. Reads only what no other thread is
 * changing: the calling thread's own heaps, abandoned segments taken off
 * their list for the walk, and huge blocks' headers held in place by the
 * segment registry's lock. */
#include "extra/extra.h"

/* A huge block to visit, or (size 0) a paged segment to walk. Huge blocks
 * are at least a byte, so the two never mix. */
typedef struct block_ref {
  void *p;
  size_t size;
} block_ref_t;

/* The checked library shows a block as the program sees it: the pointer
 * it was given and the size it asked for (core/checked.c). */
static int visit_block(brisk_block_visitor visit, void *block, size_t size, void *arg) {
  if (BRISK_CHECKED && !_bk_checked_user_block(&block, &size, NULL)) return 0;
  return visit(block, size, arg);
}

/* Calls the visitors on each block of a page the caller may read. */
static int visit_page(page_t *pg, const block_walk_t *va) {
  uint64_t free_bits[MAX_BLOCKS_PER_PAGE / 64] = {0};
  uint32_t capacity = pg->capacity;
  if (capacity > MAX_BLOCKS_PER_PAGE) return 0;
  if (_bk_page_free_blocks(pg, free_bits) < 0) {
    if (va->broken) va->broken(pg);
    return 0;
  }
  size_t bsize = pg->block_size;
  uint8_t *start = pg->start;
  for (uint32_t i = 0; i < capacity; i++) {
    uint8_t *block = start + (size_t)i * bsize;
    if (!((free_bits[i / 64] >> (i % 64)) & 1)) {
      if (va->used) va->used(block);
      if (va->live && visit_block(va->live, block, bsize, va->arg)) return 1;
    } else if (va->free) {
      va->free(block);
    }
  }
  return 0;
}

static int visit_segment(segment_t *seg, const block_walk_t *va) {
  for (uint32_t i = 0; i < seg->page_count; i++)
    if (seg->pages[i].in_use && visit_page(&seg->pages[i], va)) return 1;
  return 0;
}

static int visit_abandoned(segment_t *seg, void *p) { return visit_segment(seg, p); }

/* The heaps whose segments the calling thread may read: its own and the
 * explicit heaps it owns. */
typedef struct owner_set {
  uint64_t *uid;
  size_t n, cap;
  pthread_t self;
} owner_set_t;

static void add_own_heap(heap_t *h, void *arg) {
  owner_set_t *o = arg;
  if (h != _bk_tls_heap && !(h->is_explicit && pthread_equal(h->owner_thread, o->self))) return;
  if (o->n < o->cap) o->uid[o->n] = h->uid;
  o->n++;
}

static bool in_set(const owner_set_t *o, uint64_t uid) {
  for (size_t i = 0; i < o->n; i++)
    if (o->uid[i] == uid) return true;
  return false;
}

/* Lists the caller's segments and every huge block into refs (up to cap);
 * returns how many there are. */
static size_t list_blocks(const owner_set_t *own, block_ref_t *refs, size_t cap) {
  size_t count = 0;
  _bk_segments_lock();
  for (segment_t *seg = _bk_segments_first(); seg; seg = _bk_segments_next(seg)) {
    unsigned state = PEEK(seg->state);
    bool mine = state == SEG_STATE_OWNED && in_set(own, atomic_load(&seg->owner_uid));
    if (state != SEG_STATE_HUGE && !mine) continue;
    /* A huge block being set up by its thread may show a size from its last
     * use; skip it rather than walk past its mapping. */
    if (state == SEG_STATE_HUGE && PEEK(seg->mapped_size) <= PEEK(seg->block_offset)) continue;
    if (count < cap) {
      uint8_t *block = (uint8_t *)seg + PEEK(seg->block_offset);
      refs[count].p = state == SEG_STATE_HUGE ? block : (void *)seg;
      refs[count].size = state == SEG_STATE_HUGE ? huge_block_size(seg) : 0;
    }
    count++;
  }
  _bk_segments_unlock();
  return count;
}

static void scratch_unmap(void *p, size_t size) {
  if (p) _bk_os_unmap(p, size);
}

/* The walk's own memory comes from scratch mappings, not from brisk's heaps:
 * allocating would change what is walked (or create a heap that adopts the
 * very segments being visited). */
void _bk_walk_blocks(const block_walk_t *va) {
  /* Blocks other threads handed back are free: those in the transfer
   * cache go back to their pages, and this thread's collect takes them. */
  _bk_transfer_drain(true);
  _bk_heap_collect_own(false);
  owner_set_t own = {.self = pthread_self()};
  _bk_heap_foreach(add_own_heap, &own); /* counts: only this thread adds its heaps */
  size_t set_bytes = align_up((own.n ? own.n : 1) * sizeof *own.uid, OS_PAGE_SIZE);
  own.uid = _bk_os_map(set_bytes, 0, 0);
  if (!own.uid) return;
  own.cap = own.n;
  own.n = 0;
  _bk_heap_foreach(add_own_heap, &own);

  /* What to visit is listed under the registry lock; visit calls happen
   * after it is released, since they may allocate. */
  size_t cap = 0, ref_bytes = 0, count;
  block_ref_t *refs = NULL;
  while ((count = list_blocks(&own, refs, cap)) > cap) {
    scratch_unmap(refs, ref_bytes);
    ref_bytes = align_up((count + 64) * sizeof *refs, OS_PAGE_SIZE);
    cap = ref_bytes / sizeof *refs;
    if (!(refs = _bk_os_map(ref_bytes, 0, 0))) break;
  }
  int stop = !refs && count;
  for (size_t i = 0; i < count && !stop; i++) {
    if (refs[i].size) {
      if (va->used) va->used(refs[i].p);
      stop = va->live && visit_block(va->live, refs[i].p, refs[i].size, va->arg);
    } else if (in_set(&own, atomic_load(&((segment_t *)refs[i].p)->owner_uid))) { /* still ours */
      stop = visit_segment(refs[i].p, va);
    }
  }
  scratch_unmap(refs, ref_bytes);
  scratch_unmap(own.uid, set_bytes);
  if (!stop) _bk_abandoned_foreach(visit_abandoned, (void *)va);
}

void brisk_visit_blocks(brisk_block_visitor visit, void *arg) {
  if (!visit) {
    errno = EINVAL;
    return;
  }
  block_walk_t walk = {.live = visit, .arg = arg};
  _bk_walk_blocks(&walk);
}
