/* The checked library's entry points (BRISK_CHECKED): every allocation,
 * free, realloc and size query comes here (fast_path.h, alloc.c), is
 * checked before it touches brisk's lists, and a misuse aborts with a
 * message that names it, the address, the block's size class and the
 * stacks (checked_block.c). The release library compiles none of this.
 *
 * A block of the checked library is asked of brisk with room for a canary
 * and a trailer (core.h): malloc_usable_size says the size asked for, and
 * writing up to it never touches the canary. */
#include "core/fast_path.h"

#if BRISK_CHECKED

#include <stdio.h>
#include <string.h>

static heap_t *heap_ready(heap_t *h) { return h != &_bk_heap_empty ? h : _bk_heap_get_initialized(); }

/* "double free", "realloc of a freed block", ... */
static const char *freed_misuse(const checked_call_t *call, char *buf, size_t len) {
  if (strcmp(call->fn, "free") == 0) return "double free";
  snprintf(buf, len, "%s of a freed block", call->fn);
  return buf;
}

/* p is a block already freed, or dropped with its heap. */
static _Noreturn void freed_fail(const checked_call_t *call, const block_view_t *v, void *p) {
  char what[96], misuse[64];
  if (v->state == BLOCK_DROPPED)
    _bk_checked_fail(call, v,
                     "%s(%p): block of a destroyed heap: the block (%s) was freed when its heap was destroyed or "
                     "reset",
                     call->fn, p, _bk_block_describe(v, what, sizeof what));
  _bk_checked_fail(call, v, "%s(%p): %s: the block (%s) was already freed", call->fn, p,
                   freed_misuse(call, misuse, sizeof misuse), _bk_block_describe(v, what, sizeof what));
}

static const char *const kind_alloc_name[] = {"malloc", "operator new", "operator new[]"};
static const char *const kind_free_name[] = {"free", "operator delete", "operator delete[]"};

/* The live block in v is freed (or resized) the way it was allocated: a
 * block of new by delete, of new[] by delete[], of the malloc family by
 * free or realloc. */
static void check_kind(const checked_call_t *call, const block_view_t *v, const void *p, enum alloc_kind kind) {
  char what[96];
  if (v->kind != kind)
    _bk_checked_fail(
        call, v, "%s(%p): alloc-dealloc mismatch: the block (%s) was allocated with %s: free it with %s", call->fn,
        p, _bk_block_describe(v, what, sizeof what), kind_alloc_name[v->kind], kind_free_name[v->kind]);
}

/* The live block in v has its canary whole. */
static void check_canary(const checked_call_t *call, const block_view_t *v) {
  const uint8_t *bad = _bk_block_canary_broken(v), *user = v->start + v->trailer->offset;
  char what[96];
  if (bad)
    _bk_checked_fail(call, v,
                     "%s(%p): heap buffer overflow: the block (%s) was written past its end: byte %zu after it is "
                     "0x%02x, not the canary 0x%02x",
                     call->fn, (const void *)user, _bk_block_describe(v, what, sizeof what),
                     (size_t)(bad - user) - (size_t)v->trailer->requested, *bad, CANARY_BYTE);
}

/* Whether the block in v was handed out in its page's present life (a huge
 * block: always). Acquire: a block counted is one whose trailer reads as
 * being written or written (_bk_checked_handed_out). */
static bool handed_out_before(const block_view_t *v) {
  return !v->pg || (size_t)(v->start - v->pg->start) / v->size < CHECKED_PEEK(v->pg->handed_out);
}

/* The trailer of the block before v's in its page ends where v's block
 * starts: an underflow of v's block breaks it (or an overflow of that
 * block past its canary). Checked when that block was handed out in the
 * page's present life, so its trailer must check, live or freed. Another
 * thread may be writing it at this moment (a malloc or free of that
 * block): while it reads as being written it is read again, for up to 10
 * seconds (a writer preempted mid-way stalls it for milliseconds on a
 * loaded machine; 100 yields once were not enough). */
static void check_block_before(const checked_call_t *call, const block_view_t *v, const void *p) {
  block_view_t before;
  if (!v->pg || v->start == v->pg->start || !_bk_block_view(v->start - 1, &before) || !handed_out_before(&before))
    return;
  for (int tries = 0; before.in_flux && tries < 100 + 10000; tries++) {
    if (tries < 100) _bk_os_yield();
    else _bk_os_sleep_ms(1); /* 10 000 naps of 1 ms or more: 10 s at least */
    _bk_block_view(v->start - 1, &before);
  }
  if (before.state != BLOCK_UNKNOWN) return;
  char what[96];
  _bk_checked_fail(call, v,
                   "%s(%p): heap buffer underflow: the bytes before the block (%s) were overwritten: the trailer "
                   "of the block before it, at %p, does not check (an underflow of this block, or an overflow of "
                   "that one past its canary)",
                   call->fn, p, _bk_block_describe(v, what, sizeof what), (void *)before.start);
}

/* The live block p starts, in *v; anything else aborts naming the misuse. */
static void check_live(const checked_call_t *call, void *p, block_view_t *v) {
  char what[96], misuse[64];
  if (!_bk_block_view(p, v))
    _bk_checked_fail(call, NULL,
                     "%s(%p): pointer was not allocated by brisk (foreign or invalid pointer, or a block freed "
                     "and given back to the OS)",
                     call->fn, p);
  if (PEEK(v->seg->state) == SEG_STATE_CACHED)
    _bk_checked_fail(call, v, "%s(%p): %s, or a block of a destroyed heap: its memory is free in brisk's cache",
                     call->fn, p, freed_misuse(call, misuse, sizeof misuse));
  /* A page's blocks it never handed out (or not since its memory held
   * blocks of another class) may hold any bytes, a trailer included. */
  if (v->pg && (!PEEK(v->pg->in_use) || !handed_out_before(v))) {
    if (v->state == BLOCK_FREED || v->state == BLOCK_DROPPED) freed_fail(call, v, p);
    v->state = BLOCK_UNKNOWN;
    _bk_checked_fail(call, v, "%s(%p): pointer is not a live block (%s): brisk has not handed out this block",
                     call->fn, p, _bk_block_describe(v, what, sizeof what));
  }
  if (v->state == BLOCK_UNKNOWN) {
    if ((uint8_t *)p != v->start)
      _bk_checked_fail(call, v, "%s(%p): pointer is inside a block, not at its start (%s at %p, not a live block)",
                       call->fn, p, _bk_block_describe(v, what, sizeof what), (void *)v->start);
    _bk_checked_fail(call, v,
                     "%s(%p): corrupt block or invalid pointer: the trailer of the block (%s) does not check (a "
                     "heap overflow wrote past its canary, or brisk never handed this block out)",
                     call->fn, p, _bk_block_describe(v, what, sizeof what));
  }
  uint8_t *user = v->start + v->trailer->offset;
  if ((uint8_t *)p != user)
    _bk_checked_fail(
        call, v, "%s(%p): pointer is inside a block, not at its start (the block of %s starts at %p%s)", call->fn,
        p, _bk_block_describe(v, what, sizeof what), (void *)user, v->state == BLOCK_LIVE ? "" : "; it was freed");
  if (v->state != BLOCK_LIVE) freed_fail(call, v, p);
  check_canary(call, v);
  check_block_before(call, v, p);
}

/* The block in v, live, was asked with size bytes (a sized deallocation). */
static void check_size(const checked_call_t *call, const block_view_t *v, const void *p, size_t size) {
  char what[96];
  if (v->trailer->requested != size)
    _bk_checked_fail(call, v,
                     "%s(%p, %zu): size mismatch: the block (%s) was allocated with %zu bytes (a sized delete of "
                     "another type, or another block's size)",
                     call->fn, p, size, _bk_block_describe(v, what, sizeof what), (size_t)v->trailer->requested);
}

/* The checks of every deallocation (and of realloc) of p, in *v: a live
 * block, freed the way it was allocated, of the size named (size: NULL
 * where none is). */
static void check_dealloc(const checked_call_t *call, void *p, block_view_t *v, enum alloc_kind kind,
                          const size_t *size) {
  check_live(call, p, v);
  check_kind(call, v, p, kind);
  if (size) check_size(call, v, p, *size);
}

/* The block becomes free: marked, then handed to brisk. */
static void release(const checked_call_t *call, block_view_t *v, void *p) {
  _bk_block_mark_freed(v, BLOCK_FREED, _bk_stack_record(call->frame));
  VG_BLOCK_FREE(p);
  if (v->pg) VG_DEFINED(v->start, 2 * sizeof(void *));
  _bk_heap_free_generic(v->seg, p);
}

static void *alloc_block(const checked_call_t *call, heap_t *h, size_t size, size_t align, bool zero,
                         enum alloc_kind kind) {
  if (size > PTRDIFF_MAX) {
    errno = ENOMEM;
    return NULL;
  }
  size_t need = size + CHECKED_OVERHEAD < CHECKED_MIN_BLOCK ? CHECKED_MIN_BLOCK : size + CHECKED_OVERHEAD;
  const checked_call_t *outer = _bk_checked_call;
  _bk_checked_call = call; /* for the check of the block handed out */
  void *p;
  bool zeroed = false;
  if (align > BLOCK_ALIGN) {
    /* Under memcheck a block reused is no-access until VG_DEFINED below. */
    zeroed = zero && !BRISK_VALGRIND;
    p = heap_aligned_block(h, align, need, zeroed); /* zeroes only what it must */
  } else if (zero && need > LARGE_SIZE_MAX && !BRISK_VALGRIND) {
    p = (h = heap_ready(h)) ? _bk_huge_alloc(h, need, 0, true) : NULL; /* zeroes only what it must */
    zeroed = true;
  } else {
    p = heap_malloc_block(h, need);
  }
  _bk_checked_call = outer;
  if (!p) return NULL;
  block_view_t v;
  if (!_bk_block_view(p, &v)) _bk_checked_fail(call, NULL, "%s: internal error: no block at %p", call->fn, p);
  VG_DEFINED(v.start, v.size); /* a huge block may have been freed (no access) */
  _bk_block_set_live(&v, p, size, _bk_stack_record(call->frame), kind);
  if (zero && !zeroed) memset(p, 0, size);
  VG_BLOCK_ALLOC(p, size, zero);
  return p;
}

static const char *alloc_name(size_t align, bool zero) {
  if (align) return zero ? "calloc_aligned" : "aligned_alloc";
  return zero ? "calloc" : "malloc";
}

void *_bk_checked_alloc(heap_t *h, size_t size, size_t align, bool zero) {
  checked_call_t call = {alloc_name(align, zero), STACK_HERE()};
  return alloc_block(&call, h, size, align, zero, ALLOC_MALLOC);
}

void *_bk_checked_new(size_t size, size_t align, enum alloc_kind kind) {
  checked_call_t call = {kind_alloc_name[kind], STACK_HERE()};
  if (align && !is_power_of_two(align)) { /* (as aligned_alloc; new then throws) */
    errno = EINVAL;
    return NULL;
  }
  return alloc_block(&call, _bk_tls_heap, size, align, false, kind);
}

void _bk_checked_free(void *p) {
  if (!p) return;
  checked_call_t call = {"free", STACK_HERE()};
  block_view_t v;
  check_dealloc(&call, p, &v, ALLOC_MALLOC, NULL);
  release(&call, &v, p);
}


void _bk_checked_delete(void *p, size_t size, bool sized, enum alloc_kind kind) {
  if (!p) return;
  checked_call_t call = {kind_free_name[kind], STACK_HERE()};
  block_view_t v;
  check_dealloc(&call, p, &v, kind, sized ? &size : NULL);
  release(&call, &v, p);
}

/* A sized deallocation (C++ sized delete, C23 free_sized, brisk_free_sized)
 * must name the size the block was asked with: another size means a wrong
 * type or a wrong pointer (a block of another object), which the release
 * library would not notice. With release_it false only the size is
 * checked, and a pointer that is not brisk's is left to the caller's free
 * (valgrind's allocator made it: override.c). */
void _bk_checked_free_sized(void *p, size_t size, const char *fn, bool release_it) {
  if (!p || (!release_it && !segment_of(p))) return;
  checked_call_t call = {fn, STACK_HERE()};
  block_view_t v;
  check_dealloc(&call, p, &v, ALLOC_MALLOC, &size);
  if (release_it) release(&call, &v, p);
}

/* As in the release library: a huge block that stays huge resizes its
 * mapping; else the block stays when it is aligned to align (0: realloc)
 * and suits the size (realloc_in_place), or moves to a new block. Under
 * memcheck (BRISK_VALGRIND) always a new block: a copy carries what
 * memcheck knows of each byte. */
void *_bk_checked_realloc(heap_t *h, void *p, size_t align, size_t size) {
  checked_call_t call = {align ? "realloc_aligned" : "realloc", STACK_HERE()};
  if (!p) return alloc_block(&call, h, size, align, false, ALLOC_MALLOC);
  block_view_t v;
  check_dealloc(&call, p, &v, ALLOC_MALLOC, NULL);
  bool keep = !BRISK_VALGRIND && (!align || ((uintptr_t)p & (align - 1)) == 0);
  if (keep && !v.pg && size <= PTRDIFF_MAX && aligned_block_is_huge(align, size + CHECKED_OVERHEAD)) {
    void *q = _bk_huge_realloc(v.seg, p, size + CHECKED_OVERHEAD, align);
    block_view_t w;
    if (q && !_bk_block_view(q, &w))
      _bk_checked_fail(&call, NULL, "%s: internal error: no block at %p", call.fn, q);
    if (q) {
      _bk_block_set_live(&w, q, size, _bk_stack_record(call.frame), ALLOC_MALLOC);
      return q;
    }
  }
  /* A block resized to its own size stays, whatever room it has: that size
   * is its usable size here, and in the release library a block resized to
   * its usable size fills it. */
  size_t room = (size_t)((uint8_t *)v.trailer - (uint8_t *)p) - 1;
  if (keep && (size == (size_t)v.trailer->requested || realloc_in_place(room, align, size))) {
    _bk_block_set_live(&v, p, size, _bk_stack_record(call.frame), ALLOC_MALLOC);
    return p;
  }
  void *q = alloc_block(&call, h, size, align, false, ALLOC_MALLOC);
  if (!q) return NULL;
  size_t old = (size_t)v.trailer->requested;
  memcpy(q, p, size < old ? size : old);
  release(&call, &v, p);
  return q;
}

/* 0 for NULL and pointers brisk did not hand out, as the release library. */
size_t _bk_checked_usable_size(const void *p) {
  if (!p || !segment_of(p)) return 0;
  checked_call_t call = {"malloc_usable_size", STACK_HERE()};
  block_view_t v;
  check_live(&call, (void *)p, &v);
  return (size_t)v.trailer->requested;
}

static void drop_if_live(uint8_t *block, uint32_t stack) {
  block_view_t v;
  if (!_bk_block_view(block, &v) || v.state != BLOCK_LIVE) return;
  _bk_block_mark_freed(&v, BLOCK_DROPPED, stack);
  VG_BLOCK_FREE(v.start + v.trailer->offset);
}

/* Its live blocks are marked freed by this call, so a later free, realloc
 * or write of one is named (the caller guarantees no thread uses the heap
 * meanwhile). */
void _bk_checked_heap_drop(heap_t *h) {
  uint32_t stack = _bk_stack_record(STACK_HERE());
  for (unsigned kind = 0; kind < PAGED_KINDS; kind++)
    for (segment_t *seg = LIST_FIRST(&h->segments[kind], segment_t, link); seg;
         seg = LIST_NEXT(seg, segment_t, link))
      for (uint32_t i = 0; i < seg->page_count; i++) {
        page_t *pg = &seg->pages[i];
        for (uint32_t k = 0; pg->in_use && k < pg->handed_out; k++)
          drop_if_live(pg->start + k * pg->block_size, stack);
      }
  pthread_mutex_lock(&h->huge_lock);
  for (segment_t *seg = LIST_FIRST(&h->huge_blocks, segment_t, link); seg; seg = LIST_NEXT(seg, segment_t, link))
    drop_if_live((uint8_t *)seg + seg->block_offset, stack);
  pthread_mutex_unlock(&h->huge_lock);
}

void _bk_checked_at_exit(void *block, bool is_free) {
  checked_call_t call = {"exit", STACK_HERE()};
  block_view_t v;
  if (!_bk_block_view(block, &v)) return;
  VG_DEFINED(v.start, v.size); /* (under memcheck: read here, as brisk's own bytes) */
  bool handed_out = handed_out_before(&v);
  char what[96];
  if (!is_free) {
    if (v.state == BLOCK_LIVE) check_canary(&call, &v);
    /* Every block handed out has a trailer that checks, live or dropped
     * with its heap, until it is free. */
    else if (v.state == BLOCK_UNKNOWN && handed_out)
      _bk_checked_fail(&call, &v,
                       "exit: corrupt block: the trailer of the block at %p (%s) does not check (a heap buffer "
                       "overflow of it past its canary, or an underflow of the block after it)",
                       (void *)v.start, _bk_block_describe(&v, what, sizeof what));
  } else if (v.pg && handed_out) {
    /* Freed since: its trailer says so, and its bytes hold the pattern. */
    if (v.state == BLOCK_UNKNOWN)
      _bk_checked_fail(&call, &v,
                       "exit: write after free: the trailer of the freed block at %p (%s) was overwritten (a "
                       "write after free, or an underflow of the block after it)",
                       (void *)v.start, _bk_block_describe(&v, what, sizeof what));
    if (v.state == BLOCK_FREED) _bk_checked_verify_freed(&call, &v);
  }
}

bool _bk_checked_user_block(void **block, size_t *size, uint32_t *alloc_stack) {
  block_view_t v;
  if (!_bk_block_view(*block, &v) || v.state != BLOCK_LIVE) return false;
  *block = v.start + v.trailer->offset;
  *size = (size_t)v.trailer->requested;
  if (alloc_stack) *alloc_stack = v.trailer->alloc_stack;
  return true;
}

#endif
