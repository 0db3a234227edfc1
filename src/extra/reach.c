/* Which blocks live at exit the program can still reach, for the leak
 * report: a block is reachable when a word of memory outside brisk's
 * segments (the program's globals, the thread stacks, what it mapped
 * itself, brisk's records of heaps and pools), or of a block reachable
 * already, points into it. The rest is leaked. This is how LeakSanitizer
 * and valgrind tell a leak from memory the C and C++ runtimes keep until
 * the process ends: libstdc++'s exception pool, stdio's buffers, the
 * thread-local blocks glibc keeps with the stacks of exited threads.
 *
 * Conservative, as they are: any word that looks like a pointer counts.
 * Memory is read with a copy that stops at an unmapped byte, so a thread
 * still running that unmaps memory meanwhile costs a missed pointer, not a
 * fault. The tables are mapped for the report and unmapped after it:
 * nothing is allocated at exit. */
#include "extra/extra.h"

typedef struct live_block {
  uintptr_t start;
  size_t size;
} live_block_t;

/* Everything the scan keeps lives in one mapping, which the scan skips:
 * its copies of block addresses would otherwise make every block
 * reachable. */
#define READ_STEP ((size_t)64 * 1024)
typedef struct reach {
  uintptr_t buf[READ_STEP / sizeof(uintptr_t)]; /* what was read last */
  unsigned char resident[READ_STEP];            /* mincore's answer for a window */
  live_block_t *block;
  uint8_t *reached;
  uint32_t *todo;
  size_t count, room, todo_count, mapped;
  uintptr_t low, high; /* [first block, end of the last) */
  uintptr_t stack_here;
  uint64_t own_uid; /* this thread's heap */
} reach_t;

/* Regions past this size are sanitizers' shadows and reserved address
 * space, not memory a program keeps pointers in; below it, regions past
 * SPARSE_REGION are read only where pages are resident (mincore). */
#define REGION_MAX ((uintptr_t)64 << 30)
#define SPARSE_REGION ((uintptr_t)256 << 20)

static int count_block(void *p, size_t size, void *arg) {
  (void)p, (void)size;
  ++*(size_t *)arg;
  return 0;
}

static int add_block(void *p, size_t size, void *arg) {
  reach_t *r = arg;
  if (r->count == r->room) return 1; /* (blocks allocated since the count) */
  r->block[r->count++] = (live_block_t){(uintptr_t)p, size};
  return 0;
}

/* The index of the first block that starts above a (r->count if none). */
static size_t first_block_after(const reach_t *r, uintptr_t a) {
  size_t lo = 0, hi = r->count;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (r->block[mid].start <= a) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* The index of the block holding address a, or -1. */
static long block_holding(const reach_t *r, uintptr_t a) {
  size_t lo = first_block_after(r, a);
  if (lo == 0) return -1;
  const live_block_t *b = &r->block[lo - 1];
  return a - b->start < (b->size ? b->size : 1) ? (long)(lo - 1) : -1;
}

static void scan_words(reach_t *r, const uintptr_t *w, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (w[i] < r->low || w[i] >= r->high) continue;
    long at = block_holding(r, w[i]);
    if (at >= 0 && !r->reached[at]) {
      r->reached[at] = 1;
      r->todo[r->todo_count++] = (uint32_t)at;
    }
  }
}

/* Reads [start, end) piece by piece and scans what could be read. */
static void scan_range(reach_t *r, uintptr_t start, uintptr_t end) {
  uintptr_t *buf = r->buf;
  start = (start + sizeof(uintptr_t) - 1) & ~(uintptr_t)(sizeof(uintptr_t) - 1);
  while (start < end) {
    size_t want = end - start < READ_STEP ? (size_t)(end - start) : READ_STEP;
    size_t got = _bk_os_read_memory(buf, (const void *)start, want);
    scan_words(r, buf, got / sizeof(uintptr_t));
    if (got < want) { /* unmapped from here: go on at the next page */
      start = (start + got + OS_PAGE_SIZE) & ~(uintptr_t)(OS_PAGE_SIZE - 1);
      continue;
    }
    start += want;
  }
}

/* A large region is read only where its pages are resident. */
static void scan_sparse(reach_t *r, uintptr_t start, uintptr_t end) {
  unsigned char *vec = r->resident;
  size_t window = sizeof r->resident * OS_PAGE_SIZE;
  for (uintptr_t w = start; w < end; w += window) {
    size_t len = end - w < window ? (size_t)(end - w) : window;
    if (!_bk_os_resident((const void *)w, len, vec)) continue;
    for (size_t i = 0; i * OS_PAGE_SIZE < len; i++)
      if (vec[i] & 1) scan_range(r, w + i * OS_PAGE_SIZE, w + (i + 1) * OS_PAGE_SIZE);
  }
}

/* Whether the chunk at p is memory the scan takes as a root: not brisk's,
 * or a paged segment of another live thread's heap. The visit reads only
 * this thread's heaps (and abandoned segments and huge blocks), so the
 * blocks of other threads' segments are not in the table, and a block of
 * this thread that only such a block points to would be called leaked: a
 * worker still running at exit with a queue of the main thread's blocks.
 * Such a segment is read whole, free blocks too (conservative). */
static bool chunk_is_root(const reach_t *r, const void *p) {
  segment_t *seg = segment_of(p);
  if (!seg) return true;
  uint64_t owner = atomic_load_explicit(&seg->owner_uid, memory_order_relaxed);
  if (PEEK(seg->kind) == SEG_HUGE || owner == 0 || owner == r->own_uid) return false;
  /* (An explicit heap of this thread's is visited: its segments hold
   * blocks of the table.) */
  uintptr_t from = (uintptr_t)seg, to = from + PEEK(seg->mapped_size);
  size_t next = first_block_after(r, from);
  return next >= r->count || r->block[next].start >= to;
}

/* A mapping of the process, less brisk's segments (chunk by chunk: the
 * kernel merges neighbouring mappings) but those of other threads' heaps,
 * and below this thread's stack pointer (what lies there is dead frames). */
static void scan_mapping(uintptr_t start, uintptr_t end, void *arg) {
  reach_t *r = arg;
  if (end - start > REGION_MAX) return;
  uintptr_t own = (uintptr_t)r, own_end = own + r->mapped;
  if (own >= start && own < end) { /* the scan's own tables: around them */
    scan_mapping(start, own, arg);
    scan_mapping(own_end < end ? own_end : end, end, arg);
    return;
  }
  if (r->stack_here >= start && r->stack_here < end) start = r->stack_here;
  bool sparse = end - start > SPARSE_REGION;
  while (start < end) {
    uintptr_t chunk_end = (start | (SEGMENT_SIZE - 1)) + 1;
    if (chunk_end > end || chunk_end < start) chunk_end = end;
    if (chunk_is_root(r, (const void *)start)) {
      if (sparse) scan_sparse(r, start, chunk_end);
      else scan_range(r, start, chunk_end);
    }
    start = chunk_end;
  }
}

/* Marks r->reached; false when the blocks or the mappings could not be
 * listed (then nothing is known to be reachable). */
static bool mark_reachable(reach_t *r) {
  if (!_bk_os_each_writable_mapping(scan_mapping, r)) return false;
  while (r->todo_count) {
    const live_block_t *b = &r->block[r->todo[--r->todo_count]];
    scan_range(r, b->start, b->start + b->size);
  }
  return true;
}

/* An in-place heap sort by address: glibc's qsort may allocate. */
static void sift_down(live_block_t *b, size_t at, size_t n) {
  for (size_t child; (child = 2 * at + 1) < n; at = child) {
    if (child + 1 < n && b[child + 1].start > b[child].start) child++;
    if (b[at].start >= b[child].start) return;
    live_block_t t = b[at];
    b[at] = b[child];
    b[child] = t;
  }
}

static void sort_by_start(live_block_t *b, size_t n) {
  for (size_t i = n / 2; i-- > 0;) sift_down(b, i, n);
  for (size_t end = n; end > 1; end--) {
    live_block_t t = b[0];
    b[0] = b[end - 1];
    b[end - 1] = t;
    sift_down(b, 0, end - 1);
  }
}

reach_t *_bk_reach_begin(bool *complete) {
  *complete = false;
  size_t n = 0;
  brisk_visit_blocks(count_block, &n);
  size_t room = n + n / 8 + 64, per_block = sizeof(live_block_t) + sizeof(uint32_t) + 1;
  size_t mapped = align_up(sizeof(reach_t) + room * per_block, OS_PAGE_SIZE);
  reach_t *r = _bk_os_map(mapped, 0, 0);
  if (!r) return NULL;
  r->mapped = mapped;
  r->room = room;
  r->block = (live_block_t *)(r + 1);
  r->todo = (uint32_t *)(r->block + room);
  r->reached = (uint8_t *)(r->todo + room);
  brisk_visit_blocks(add_block, r);
  sort_by_start(r->block, r->count);
  if (r->count) {
    r->low = r->block[0].start;
    r->high = r->block[r->count - 1].start + r->block[r->count - 1].size;
  }
  r->stack_here = (uintptr_t)__builtin_frame_address(0);
  r->own_uid = _bk_tls_heap->uid;
  *complete = mark_reachable(r);
  return r;
}

size_t _bk_reach_count(const reach_t *r) { return r->count; }

bool _bk_reach_block(const reach_t *r, size_t i, void **p, size_t *size) {
  *p = (void *)r->block[i].start;
  *size = r->block[i].size;
  return r->reached[i];
}

void _bk_reach_end(reach_t *r) { _bk_os_unmap(r, r->mapped); }
