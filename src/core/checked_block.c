/* What the checked library keeps in a block (core.h draws it): the trailer
 * and its seal, the canary, the free pattern; the check of every block a
 * page hands out; and the report of a misuse, with its stacks.
 *
 * The seal is a hash of the trailer's fields, the block's address and size,
 * its state (live, freed, dropped with its heap) and how it was allocated
 * (malloc, new, new[]: state_of finds which), so a trailer says
 * which of these the block is only when it is whole and was written for
 * this very block: memory a block of another size class left behind, or a
 * block brisk never handed out, reads as "unknown". */
#include "core/core.h"

#if BRISK_CHECKED

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define FREED_COOKIE ((uintptr_t)0x6272697366726565ull) /* "brisfree" */

__thread const checked_call_t *_bk_checked_call BRISK_TLS;

static const uint32_t state_mark[] = {
    [BLOCK_UNKNOWN] = 0, [BLOCK_LIVE] = 0x4c495645, [BLOCK_FREED] = 0x46524545, [BLOCK_DROPPED] = 0x44524f50};
static const uint32_t kind_mark[] = {[ALLOC_MALLOC] = 0, [ALLOC_NEW] = 0x3a4e4557, [ALLOC_NEW_ARRAY] = 0x5b4e4557};

/* A trailer is written on one thread and read on any: the check of the
 * block after it (check_block_before, checked.c) runs in that block's
 * free, while this block's own malloc or free may be rewriting it. So
 * its writes are a seqlock: the seal is set to SEAL_WRITING first, the
 * fields are stored with release (none is seen before that mark), the
 * seal last with release. A reader loads the seal (acquire), the fields
 * (acquire: the second load of the seal is not done before them) and the
 * seal again: the same seal twice, not the mark, means the fields are
 * the ones it seals. Else the view is in_flux and the reader reads again;
 * a writer preempted in between (a loaded machine) can take milliseconds,
 * and "does not check" must not be said of a trailer being written. */
static void trailer_write_begin(trailer_t *t) { PUBLISH(t->seal, SEAL_WRITING); }

static uint32_t seal_base(const block_view_t *v, const trailer_t *t) {
  uint64_t x = (uint64_t)(uintptr_t)v->start ^ CHECKED_PEEK(t->requested) * 0x9e3779b97f4a7c15ull;
  x ^= ((uint64_t)CHECKED_PEEK(t->offset) << 32 | CHECKED_PEEK(t->alloc_stack)) * 0xc2b2ae3d27d4eb4full;
  /* Every byte of the trailer counts: an underflow of the block after
   * this one lands in it. */
  x ^= ((uint64_t)CHECKED_PEEK(t->free_stack) << 32 ^ (uint64_t)v->size) * 0x165667b19e3779f9ull;
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 29;
  return (uint32_t)x;
}

/* The seal of a trailer whose fields hash to base; never the mark. */
static uint32_t seal_of(uint32_t base, enum block_state state, enum alloc_kind kind) {
  uint32_t seal = base ^ state_mark[state] ^ kind_mark[kind];
  return seal == SEAL_WRITING ? seal ^ 1 : seal;
}

static enum block_state state_of(block_view_t *v) {
  const trailer_t *t = v->trailer;
  uint32_t seal = CHECKED_PEEK(t->seal);
  uint32_t offset = CHECKED_PEEK(t->offset);
  uint64_t requested = CHECKED_PEEK(t->requested);
  uint32_t base = seal_base(v, t);
  v->in_flux = seal == SEAL_WRITING || PEEK(t->seal) != seal;
  if (v->in_flux || v->size < CHECKED_MIN_BLOCK || offset > v->size - CHECKED_OVERHEAD ||
      requested > v->size - CHECKED_OVERHEAD - offset)
    return BLOCK_UNKNOWN;
  for (int k = 0; k < ALLOC_KINDS; k++)
    for (int s = BLOCK_LIVE; s <= BLOCK_DROPPED; s++)
      if (seal == seal_of(base, (enum block_state)s, (enum alloc_kind)k)) {
        v->kind = (enum alloc_kind)k;
        return (enum block_state)s;
      }
  return BLOCK_UNKNOWN;
}

static void view_finish(block_view_t *v) {
  v->trailer = (trailer_t *)(v->start + v->size - sizeof(trailer_t));
  v->kind = ALLOC_MALLOC;
  v->state = state_of(v);
}

/* Reads only what a free of p reads in the release library, and the
 * block's own bytes. A page with no blocks keeps its last class, so a
 * double free after its page was given back still finds its trailer. */
bool _bk_block_view(const void *p, block_view_t *v) {
  segment_t *seg = segment_of(p);
  if (!seg) return false;
  const uint8_t *q = p;
  v->seg = seg;
  if (PEEK(seg->kind) == SEG_HUGE) {
    size_t offset = PEEK(seg->block_offset), mapped = PEEK(seg->mapped_size);
    if (mapped < offset + guard_size() + CHECKED_MIN_BLOCK || q < (uint8_t *)seg + offset) return false;
    v->pg = NULL;
    v->start = (uint8_t *)seg + offset;
    v->size = huge_block_size(seg); /* up to the guard page */
  } else {
    page_t *pg = page_of(seg, p);
    size_t bsize = PEEK(pg->block_size);
    uint8_t *start = pg->start;
    if (bsize < CHECKED_MIN_BLOCK || !start || q < start || q >= start + (size_t)PEEK(pg->capacity) * bsize)
      return false;
    v->pg = pg;
    v->start = start + (size_t)(q - start) / bsize * bsize;
    v->size = bsize;
  }
  view_finish(v);
  return true;
}

static void block_seal(block_view_t *v, enum block_state state) {
  CHECKED_PUBLISH(v->trailer->seal, seal_of(seal_base(v, v->trailer), state, v->kind));
  v->state = state;
}

void _bk_block_set_live(block_view_t *v, const void *p, size_t requested, uint32_t alloc_stack,
                        enum alloc_kind kind) {
  trailer_t *t = v->trailer;
  v->kind = kind;
  trailer_write_begin(t);
  CHECKED_PUBLISH(t->requested, requested);
  CHECKED_PUBLISH(t->offset, (uint32_t)((const uint8_t *)p - v->start));
  CHECKED_PUBLISH(t->alloc_stack, alloc_stack);
  CHECKED_PUBLISH(t->free_stack, 0);
  block_seal(v, BLOCK_LIVE);
  uint8_t *end = (uint8_t *)p + requested;
  size_t room = (size_t)((uint8_t *)t - end);
  memset(end, CANARY_BYTE, room < CANARY_MAX ? room : CANARY_MAX);
}

const uint8_t *_bk_block_canary_broken(const block_view_t *v) {
  const uint8_t *end = v->start + v->trailer->offset + v->trailer->requested;
  size_t room = (size_t)((const uint8_t *)v->trailer - end);
  return first_byte_not(end, end + (room < CANARY_MAX ? room : CANARY_MAX), CANARY_BYTE);
}

void _bk_block_mark_freed(block_view_t *v, enum block_state state, uint32_t free_stack) {
  trailer_t *t = v->trailer;
  trailer_write_begin(t);
  CHECKED_PUBLISH(t->free_stack, free_stack);
  block_seal(v, state);
  if (!v->pg) {
    v->seg->live = 0;
    return;
  }
  uint8_t *from = v->start + 2 * sizeof(uintptr_t);
  memset(from, FREED_BYTE, (size_t)((uint8_t *)t - from));
  ((uintptr_t *)v->start)[1] = FREED_COOKIE ^ (uintptr_t)v->start;
}

const char *_bk_block_describe(const block_view_t *v, char *buf, size_t len) {
  unsigned long long requested = v->trailer->requested;
  bool known = v->state != BLOCK_UNKNOWN;
  if (v->pg && known) snprintf(buf, len, "%llu bytes, size class %zu", requested, v->size);
  else if (v->pg) snprintf(buf, len, "size class %zu", v->size);
  else if (known) snprintf(buf, len, "%llu bytes, a huge block of %zu", requested, v->size);
  else snprintf(buf, len, "a huge block of %zu bytes", v->size);
  return buf;
}

void _bk_checked_fail(const checked_call_t *call, const block_view_t *v, const char *fmt, ...) {
  _bk_os_report_failure_begin();
  char line[1024];
  int n = snprintf(line, sizeof line, "brisk: error: ");
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
  va_end(ap);
  size_t len = (size_t)n + (m > 0 ? (size_t)m : 0);
  if (len > sizeof line - 2) len = sizeof line - 2;
  line[len++] = '\n';
  _bk_os_write_all(2, line, len);
  uintptr_t pc[STACK_MAX];
  _bk_stack_print(2, "detected at", pc, _bk_stack_capture(call->frame, pc, STACK_MAX));
  if (v && v->state != BLOCK_UNKNOWN) {
    _bk_stack_print_id(2, "allocated at", v->trailer->alloc_stack);
    if (v->state != BLOCK_LIVE)
      _bk_stack_print_id(2, v->state == BLOCK_DROPPED ? "freed with its heap at" : "freed at",
                         v->trailer->free_stack);
  }
  _bk_os_abort();
}

/* ---- Blocks handed out ------------------------------------------------------ */

void _bk_checked_verify_freed(const checked_call_t *call, const block_view_t *v) {
  const uint8_t *b = v->start, *bad = NULL;
  uintptr_t cookie = FREED_COOKIE ^ (uintptr_t)b;
  uint8_t want = FREED_BYTE;
  if (((const uintptr_t *)b)[1] != cookie) {
    for (size_t i = 0; i < sizeof cookie && !bad; i++)
      if (b[sizeof cookie + i] != ((const uint8_t *)&cookie)[i]) {
        bad = b + sizeof cookie + i;
        want = ((const uint8_t *)&cookie)[i];
      }
  } else {
    bad = first_byte_not(b + 2 * sizeof cookie, (const uint8_t *)v->trailer, FREED_BYTE);
  }
  if (!bad) return;
  char what[96];
  _bk_checked_fail(call, v,
                   "%s: write after free: the block %p (%s) was written after it was freed: byte %zu of the block "
                   "is 0x%02x, not 0x%02x",
                   call->fn, (void *)(b + v->trailer->offset), _bk_block_describe(v, what, sizeof what),
                   (size_t)(bad - b), *bad, want);
}

/* Every block a page hands out: its link must lead to a block of its page
 * (else the free list is corrupt: the block's first word was written after
 * its free), and a block handed out before must have been freed by the
 * checked library since, and hold the free pattern still. */
void _bk_checked_handed_out(block_t *b) {
  segment_t *seg = segment_base(b);
  page_t *pg = page_of(seg, b);
  checked_call_t here = {"malloc", STACK_HERE()};
  const checked_call_t *call = _bk_checked_call ? _bk_checked_call : &here;
  block_view_t v = {.seg = seg, .pg = pg, .start = (uint8_t *)b, .size = pg->block_size};
  VG_DEFINED(b, v.size);
  view_finish(&v);
  char what[96];
  block_t *next = link_get(b);
  if (next && (segment_base(next) != seg || page_of(seg, next) != pg || !page_has_block_at(pg, next)))
    _bk_checked_fail(
        call, &v,
        "%s: write after free: the first word of the free block %p (%s) was overwritten: it holds %p, "
        "not a block of its page (the free list is corrupt)",
        call->fn, (void *)b, _bk_block_describe(&v, what, sizeof what), (void *)b->next /* as stored */);
  uint32_t index = (uint32_t)((size_t)((uint8_t *)b - pg->start) / v.size);
  if (index >= pg->handed_out) { /* fresh: its bytes are whatever the page held before */
    /* Marked before it counts as handed out (release; handed_out_before
     * loads with acquire): a check of the block after it waits for its
     * trailer, where it would find the bytes of the page's past. */
    trailer_write_begin(v.trailer);
    CHECKED_PUBLISH(pg->handed_out, index + 1);
    return;
  }
  if (v.state != BLOCK_FREED)
    _bk_checked_fail(
        call, &v,
        "%s: write after free: the block %p (%s) was written after it was freed: the %zu bytes at its "
        "end (brisk's trailer) changed",
        call->fn, (void *)b, _bk_block_describe(&v, what, sizeof what), sizeof(trailer_t));
  _bk_checked_verify_freed(call, &v);
  ((uintptr_t *)b)[1] = 0;
}

#endif
