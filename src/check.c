/* Looking inside: brisk_check_heap (metadata consistency), brisk_visit_blocks
 * (every live block) and the leak report at exit. All of it reads only what
 * no other thread is changing: the calling thread's own heaps, segments
 * taken off the abandoned list for the walk, and the headers of segments
 * held in place by the segment registry's lock. */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static __thread char check_message[256] __attribute__((tls_model("initial-exec")));

const char *brisk_check_message(void) { return check_message; }

static int failure(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int failure(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(check_message, sizeof check_message, fmt, ap);
  va_end(ap);
  return code;
}

/* ---- Free lists --------------------------------------------------------- */

#define MAX_BLOCKS_PER_PAGE ((1u << SMALL_PAGE_SHIFT) / 16)

/* Walks one free list of a page, checking every link; sets the blocks' bits
 * in `free_bits` when given. Returns the count, or -1 with the message set. */
static long walk_list(const page_t *pg, const block_t *b, uint64_t *free_bits, const char *which) {
  long n = 0;
  const uint8_t *end = pg->start + (size_t)pg->capacity * pg->block_size;
  for (; b; b = b->next) {
    const uint8_t *p = (const uint8_t *)b;
    if (p < pg->start || p >= end || (size_t)(p - pg->start) % pg->block_size) {
      failure(BRISK_CHECK_FREE_LIST, "page %p (blocks of %zu): %s list holds %p, outside the page's blocks",
              (void *)pg->start, pg->block_size, which, (void *)p);
      return -1;
    }
    if (++n > (long)pg->capacity) {
      failure(BRISK_CHECK_FREE_LIST, "page %p (blocks of %zu): %s list loops", (void *)pg->start,
              pg->block_size, which);
      return -1;
    }
    if (free_bits) {
      size_t i = (size_t)(p - pg->start) / pg->block_size;
      free_bits[i / 64] |= (uint64_t)1 << (i % 64);
    }
  }
  return n;
}

/* The page's free blocks (all three lists); -1 on a broken list. */
static long page_free_blocks(const page_t *pg, uint64_t *free_bits) {
  const block_t *remote = tf_list(atomic_load(&((page_t *)pg)->thread_free));
  long a = walk_list(pg, pg->free, free_bits, "free");
  long b = a < 0 ? -1 : walk_list(pg, pg->local_free, free_bits, "local free");
  long c = b < 0 ? -1 : walk_list(pg, remote, free_bits, "thread free");
  return c < 0 ? -1 : a + b + c;
}

static int check_page(const page_t *pg) {
  if (pg->capacity > pg->reserved || pg->capacity > MAX_BLOCKS_PER_PAGE)
    return failure(BRISK_CHECK_PAGE, "page %p: capacity %u above its %u blocks", (void *)pg->start, pg->capacity,
                   pg->reserved);
  long free_blocks = page_free_blocks(pg, NULL);
  if (free_blocks < 0) return BRISK_CHECK_FREE_LIST;
  /* Remote frees not yet collected still count in `used`. */
  long remote = 0;
  for (const block_t *b = tf_list(atomic_load(&((page_t *)pg)->thread_free)); b; b = b->next)
    remote++;
  if ((long)pg->used + free_blocks - remote > (long)pg->capacity)
    return failure(BRISK_CHECK_PAGE, "page %p (blocks of %zu): %u used + %ld free exceed its %u blocks",
                   (void *)pg->start, pg->block_size, pg->used, free_blocks - remote, pg->capacity);
  return BRISK_CHECK_OK;
}

/* A paged segment that the calling thread may read in full. */
static int check_segment_pages(segment_t *seg) {
  uint32_t in_use = 0;
  for (uint32_t i = 0; i < seg->page_count; i++) {
    bool free_bit = (seg->free_page_mask >> i) & 1;
    if (free_bit == (bool)seg->pages[i].in_use)
      return failure(BRISK_CHECK_SEGMENT, "segment %p: page %u is %s but its free bit says otherwise", (void *)seg, i,
                     seg->pages[i].in_use ? "in use" : "free");
    if (!seg->pages[i].in_use) continue;
    in_use++;
    int rc = check_page(&seg->pages[i]);
    if (rc) return rc;
  }
  if (in_use != seg->pages_in_use)
    return failure(BRISK_CHECK_SEGMENT, "segment %p: %u pages in use, header says %u", (void *)seg, in_use,
                   seg->pages_in_use);
  return BRISK_CHECK_OK;
}

/* Calls fn on each abandoned segment, taken off the list meanwhile so that
 * nobody else changes it, until fn returns nonzero (which it returns). */
static int for_each_abandoned(int (*fn)(segment_t *, void *), void *arg) {
  segment_t *taken = NULL, *seg;
  int rc = 0;
  while (!rc && (seg = _bk_segment_abandoned_pop())) {
    rc = fn(seg, arg);
    seg->next = taken;
    taken = seg;
  }
  while (taken) {
    seg = taken->next;
    _bk_segment_abandoned_push(taken);
    taken = seg;
  }
  return rc;
}

static int check_segment_abandoned(segment_t *seg, void *arg) {
  (void)arg;
  return check_segment_pages(seg);
}

static bool owned_by_caller(segment_t *seg) {
  heap_t *h = _bk_tls_heap;
  return h != &_bk_heap_empty && atomic_load_explicit(&seg->owner_uid, memory_order_acquire) == h->uid;
}

int brisk_check_heap(void) {
  check_message[0] = '\0';
  int rc = BRISK_CHECK_OK;
  _bk_segments_lock();
  for (segment_t *seg = _bk_segments_first(); seg && !rc; seg = seg->all_next) {
    if (segment_of((uint8_t *)seg + (PEEK(seg->kind) == SEG_HUGE ? PEEK(seg->block_offset) : 0)) != seg) {
      rc = failure(BRISK_CHECK_CHUNK_MAP, "segment %p: the chunk map does not lead to it", (void *)seg);
      break;
    }
    unsigned state = PEEK(seg->state), kind = PEEK(seg->kind);
    size_t mapped = PEEK(seg->mapped_size);
    if (kind > SEG_HUGE || state > SEG_STATE_HUGE || mapped == 0 || mapped % OS_PAGE_SIZE)
      rc = failure(state == SEG_STATE_CACHED ? BRISK_CHECK_CACHE : BRISK_CHECK_SEGMENT,
                   "segment %p: kind %u, state %u, mapped size %zu make no sense", (void *)seg, kind, state, mapped);
    else if (kind != SEG_HUGE && state == SEG_STATE_OWNED && owned_by_caller(seg))
      rc = check_segment_pages(seg);
  }
  _bk_segments_unlock();
  if (rc) return rc;
  return for_each_abandoned(check_segment_abandoned, NULL);
}

/* ---- Visiting live blocks ----------------------------------------------- */

/* A huge block to visit, or (size 0) a paged segment to walk. Huge blocks
 * are at least a byte, so the two never mix. */
typedef struct block_ref { void *p; size_t size; } block_ref_t;

/* Calls visit on each live block of a page the caller may read. */
static int visit_page(page_t *pg, brisk_block_visitor visit, void *arg) {
  uint64_t free_bits[MAX_BLOCKS_PER_PAGE / 64] = {0};
  uint32_t capacity = pg->capacity;
  if (capacity > MAX_BLOCKS_PER_PAGE || page_free_blocks(pg, free_bits) < 0) return 0;
  size_t bsize = pg->block_size;
  uint8_t *start = pg->start;
  for (uint32_t i = 0; i < capacity; i++)
    if (!((free_bits[i / 64] >> (i % 64)) & 1) && visit(start + (size_t)i * bsize, bsize, arg)) return 1;
  return 0;
}

static int visit_segment(segment_t *seg, brisk_block_visitor visit, void *arg) {
  for (uint32_t i = 0; i < seg->page_count; i++)
    if (seg->pages[i].in_use && visit_page(&seg->pages[i], visit, arg)) return 1;
  return 0;
}

struct visit_args { brisk_block_visitor visit; void *arg; };

static int visit_abandoned(segment_t *seg, void *p) {
  struct visit_args *va = p;
  return visit_segment(seg, va->visit, va->arg);
}

/* The heaps whose segments the calling thread may read: its own and the
 * explicit heaps it owns. */
typedef struct owner_set { uint64_t *uid; size_t n, cap; pthread_t self; } owner_set_t;

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
  for (segment_t *seg = _bk_segments_first(); seg; seg = seg->all_next) {
    unsigned state = PEEK(seg->state);
    bool mine = state == SEG_STATE_OWNED && in_set(own, atomic_load(&seg->owner_uid));
    if (state != SEG_STATE_HUGE && !mine) continue;
    /* A huge block being set up by its thread may show a size from its last
     * use; skip it rather than walk past its mapping. */
    if (state == SEG_STATE_HUGE && PEEK(seg->mapped_size) <= PEEK(seg->block_offset)) continue;
    if (count < cap) {
      uint8_t *block = (uint8_t *)seg + PEEK(seg->block_offset);
      refs[count].p = state == SEG_STATE_HUGE ? block : (void *)seg;
      refs[count].size = state == SEG_STATE_HUGE ? PEEK(seg->mapped_size) - PEEK(seg->block_offset) : 0;
    }
    count++;
  }
  _bk_segments_unlock();
  return count;
}

/* The walk's own memory comes from scratch mappings, not from brisk's heaps:
 * allocating would change what is walked (or create a heap that adopts the
 * very segments being visited). */
void brisk_visit_blocks(brisk_block_visitor visit, void *arg) {
  if (!visit) {
    errno = EINVAL;
    return;
  }
  _bk_heap_collect_own(false); /* blocks other threads handed back are free */
  owner_set_t own = {.self = pthread_self()};
  _bk_heap_foreach(add_own_heap, &own); /* counts: only this thread adds its heaps */
  size_t set_bytes = align_up((own.n ? own.n : 1) * sizeof *own.uid, OS_PAGE_SIZE);
  own.uid = _bk_os_scratch_map(set_bytes);
  if (!own.uid) return;
  own.cap = own.n;
  own.n = 0;
  _bk_heap_foreach(add_own_heap, &own);

  /* What to visit is listed under the registry lock; visit calls happen
   * after it is released, since they may allocate. */
  size_t cap = 0, ref_bytes = 0, count;
  block_ref_t *refs = NULL;
  while ((count = list_blocks(&own, refs, cap)) > cap) {
    _bk_os_scratch_unmap(refs, ref_bytes);
    ref_bytes = align_up((count + 64) * sizeof *refs, OS_PAGE_SIZE);
    cap = ref_bytes / sizeof *refs;
    if (!(refs = _bk_os_scratch_map(ref_bytes))) break;
  }
  int stop = !refs && count;
  for (size_t i = 0; i < count && !stop; i++) {
    if (refs[i].size) stop = visit(refs[i].p, refs[i].size, arg);
    else if (in_set(&own, atomic_load(&((segment_t *)refs[i].p)->owner_uid))) /* still ours */
      stop = visit_segment(refs[i].p, visit, arg);
  }
  _bk_os_scratch_unmap(refs, ref_bytes);
  _bk_os_scratch_unmap(own.uid, set_bytes);
  if (!stop) {
    struct visit_args va = {visit, arg};
    for_each_abandoned(visit_abandoned, &va);
  }
}

/* ---- Leak report --------------------------------------------------------- */

typedef struct leak_group { size_t size; uint64_t count; size_t bytes; } leak_group_t;
typedef struct leak_table { leak_group_t group[CLASS_COUNT + 1]; } leak_table_t;

static int count_leak(void *p, size_t size, void *arg) {
  (void)p;
  leak_table_t *t = arg;
  unsigned g = size > LARGE_SIZE_MAX ? CLASS_COUNT : size_to_class(size);
  t->group[g].size = g == CLASS_COUNT ? 0 : size;
  t->group[g].count++;
  t->group[g].bytes += size;
  return 0;
}

static int by_bytes_desc(const void *a, const void *b) {
  const leak_group_t *x = a, *y = b;
  return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

/* Live blocks at exit, grouped by size class, the most bytes first. */
void _bk_leak_report(int fd) {
  static leak_table_t table; /* no allocation at exit */
  memset(&table, 0, sizeof table);
  brisk_visit_blocks(count_leak, &table);
  qsort(table.group, CLASS_COUNT + 1, sizeof table.group[0], by_bytes_desc);
  char line[160];
  uint64_t blocks = 0;
  size_t bytes = 0;
  for (int i = 0; i <= CLASS_COUNT; i++) {
    blocks += table.group[i].count;
    bytes += table.group[i].bytes;
  }
  int n = snprintf(line, sizeof line, "brisk leak report: %llu live blocks, %zu bytes\n", (unsigned long long)blocks, bytes);
  if (write(fd, line, (size_t)n) < 0) return;
  for (int i = 0; i <= CLASS_COUNT && table.group[i].count; i++) {
    if (table.group[i].size)
      n = snprintf(line, sizeof line, "  %8llu blocks of %8zu bytes  %12zu bytes\n",
                   (unsigned long long)table.group[i].count, table.group[i].size, table.group[i].bytes);
    else
      n = snprintf(line, sizeof line, "  %8llu huge blocks            %12zu bytes\n",
                   (unsigned long long)table.group[i].count, table.group[i].bytes);
    if (write(fd, line, (size_t)n) < 0) return;
  }
}
