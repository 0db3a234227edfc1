/* API-sequence fuzzer: the input is a program of calls to brisk's prefixed
 * API (the malloc family, aligned forms, aligned realloc and calloc,
 * free_sized, usable_size, explicit heaps, pools, collect, checks and
 * visits, and calls that must fail), run against a shadow model of the
 * live blocks. Every block holds a pattern of
 * its own, verified before it is freed or reallocated; every new block must
 * be brisk's, aligned, as big as asked and apart from every live block; each
 * error must be the documented one. Any difference traps (fuzz/README.md).
 *
 * The first byte picks the options the program runs under (purge delay 0,
 * no cache, realtime mode, a mapped-bytes cap, huge pages), restored when it
 * ends; everything is freed and brisk_collect() run at the end of each
 * input, so an input behaves the same whatever ran before it. */
#include "fuzz_common.h"
#include "fuzz_check.h"

#include <errno.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <unistd.h>

#define MAX_HEAPS 4
#define MAX_POOLS 4
#define LIVE_BYTES_CAP (256 * FZ_MIB) /* requested bytes live at once */
#define HUGE_PER_INPUT 12             /* blocks above 1 MiB asked per input */

#define OWN_THREAD (-1) /* the thread's heap; 0 .. MAX_HEAPS-1: an explicit heap */
#define OWN_POOL 100    /* + the pool's slot */
#define MAYBE_THREAD 1  /* flags: in its explicit heap, or moved to the thread's (realloc) */

typedef struct {
  brisk_pool_t *pool;
  size_t size, align, max; /* what brisk_pool_stats must say */
  size_t live, refused;
} pool_slot;

static struct {
  fz_set set;
  int huge_left;
  uint32_t seed;
  bool capped; /* a mapped-bytes cap is on: any allocation may fail with ENOMEM */
  brisk_heap_t *heap[MAX_HEAPS];
  size_t heap_max[MAX_HEAPS];
  pool_slot pool[MAX_POOLS];
} S;

static long long saved_options[BRISK_OPTION_COUNT];
static uint8_t *foreign;          /* two mapped pages, then one that is not: never brisk's */
static uint8_t foreign_small[64]; /* ASan watches this one: brisk must not write it */
#define FOREIGN_SEED 777u

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fz_setup();
  for (int i = 0; i < BRISK_OPTION_COUNT; i++) saved_options[i] = brisk_option_get((brisk_option_t)i);
  long page = sysconf(_SC_PAGESIZE);
  foreign = mmap(NULL, 3 * (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (foreign == MAP_FAILED) abort();
  munmap(foreign + 2 * page, (size_t)page);
  fz_fill(foreign, 2 * (size_t)page, FOREIGN_SEED);
  fz_fill(foreign_small, sizeof foreign_small, FOREIGN_SEED);
  return 0;
}

/* ---- The shadow ----------------------------------------------------------- */

static void add(void *p, size_t size, size_t span, int owner, int flags, uint32_t seed) {
  fz_add(&S.set, p, size, span, owner, flags, seed);
}
static fz_block drop(int i) { return fz_drop(&S.set, i); }

static void verify(const char *what, const fz_block *b) { fz_verify(what, b->p, b->size, b->size, b->seed); }

static bool is_pool(const fz_block *b) { return b->owner >= OWN_POOL; }
static bool counted(const fz_block *b) { return !is_pool(b); } /* pool objects are not brisk blocks */

/* A live block, or -1 (none, or only pool objects when a malloc block is wanted). */
static int pick(fz_input *in, bool pools_too) {
  if (!S.set.n) return -1;
  int i = (int)fz_below(in, (size_t)S.set.n);
  for (int k = 0; k < S.set.n; k++, i = (i + 1) % S.set.n)
    if (pools_too || !is_pool(&S.set.b[i])) return i;
  return -1;
}

/* A request size within the input's budgets (huge blocks, live bytes). */
static size_t take_size(fz_input *in) {
  size_t s = fz_size(in, S.huge_left > 0);
  if (S.set.bytes + s > LIVE_BYTES_CAP) s %= FZ_MIB;
  if (s > FZ_MIB) S.huge_left--;
  return s;
}

/* Takes in what an allocation call returned. NULL is right only when the
 * call may fail (a bounded heap, a cap) and says ENOMEM. */
static bool take(const char *what, void *q, size_t size, size_t align, int owner, int flags, bool may_fail,
                 bool zeroed) {
  if (!q) {
    FZ_CHECK(may_fail || S.capped, "%s(%zu, align %zu): NULL (errno %d)", what, size, align, errno);
    FZ_CHECK(errno == ENOMEM, "%s(%zu): NULL with errno %d, not ENOMEM", what, size, errno);
    return false;
  }
  size_t span = brisk_usable_size(q);
  fz_check_new(what, S.set.b, S.set.n, q, size, fz_malloc_align(size, align), span);
  if (zeroed) fz_verify_zero(what, q, size);
  add(q, size, span, owner, flags, S.seed++);
  return true;
}

static bool heap_may_fail(int h) { return h >= 0 && S.heap_max[h] != 0; }

/* ---- The malloc family ---------------------------------------------------- */

static void op_malloc(fz_input *in) {
  size_t s = take_size(in);
  if (S.set.n == FZ_MAX_LIVE) return;
  errno = 0;
  if (fz_u8(in) & 1) {
    size_t count = 1 + fz_u8(in) % 8, each = s / count;
    take("brisk_calloc", brisk_calloc(count, each), count * each, 1, OWN_THREAD, 0, false, true);
  } else {
    take("brisk_malloc", brisk_malloc(s), s, 1, OWN_THREAD, 0, false, false);
  }
}

static void op_aligned(fz_input *in) {
  size_t s = take_size(in), align = fz_align(in);
  uint8_t how = fz_u8(in) % 6;
  if (S.set.n == FZ_MAX_LIVE) return;
  errno = 0;
  if (how >= 4) {
    size_t count = 1 + fz_u8(in) % 8, each = s / count;
    int h = (int)(fz_u8(in) % MAX_HEAPS);
    if (how == 4)
      take("brisk_calloc_aligned", brisk_calloc_aligned(count, each, align), count * each, align, OWN_THREAD, 0,
           false, true);
    else if (S.heap[h])
      take("brisk_heap_calloc_aligned", brisk_heap_calloc_aligned(S.heap[h], count, each, align), count * each,
           align, h, 0, heap_may_fail(h), true);
  } else if (how == 0) {
    take("brisk_aligned_alloc", brisk_aligned_alloc(align, s), s, align, OWN_THREAD, 0, false, false);
  } else if (how == 1) {
    void *q = NULL;
    if (align < sizeof(void *)) align = sizeof(void *);
    int rc = brisk_posix_memalign(&q, align, s);
    FZ_CHECK((rc == 0) == (q != NULL), "brisk_posix_memalign(%zu, %zu) = %d, block %p", align, s, rc, q);
    errno = rc;
    take("brisk_posix_memalign", q, s, align, OWN_THREAD, 0, false, false);
  } else if (how == 2) {
    /* memalign rounds an alignment that is no power of two up to one. */
    size_t asked = align > 2 ? align + fz_below(in, align) : align;
    take("brisk_memalign", brisk_memalign(asked, s), s, align, OWN_THREAD, 0, false, false);
  } else {
    int h = (int)(fz_u8(in) % MAX_HEAPS);
    if (!S.heap[h]) return;
    take("brisk_heap_aligned_alloc", brisk_heap_aligned_alloc(S.heap[h], align, s), s, align, h, 0,
         heap_may_fail(h), false);
  }
}

static void op_realloc(fz_input *in) {
  int i = pick(in, false);
  if (i < 0) return;
  fz_block old = S.set.b[i];
  size_t s = take_size(in);
  if (S.set.bytes - old.size + s > LIVE_BYTES_CAP) return;
  verify("before realloc", &old);
  uint8_t how = fz_u8(in) % 5;
  size_t align = how >= 3 ? fz_align(in) : 1; /* 3, 4: realloc_aligned */
  int owner = old.owner, flags = old.flags;
  void *q;
  errno = 0;
  if (how == 0 || how == 3) {
    q = how == 0 ? brisk_realloc(old.p, s) : brisk_realloc_aligned(old.p, align, s);
    if (owner != OWN_THREAD) flags = MAYBE_THREAD; /* moved to the thread's heap if it had to move */
  } else if (how == 1) {
    size_t count = 1 + fz_u8(in) % 4;
    s -= s % count;
    q = brisk_reallocarray(old.p, count, s / count);
    if (owner != OWN_THREAD) flags = MAYBE_THREAD;
  } else {
    int h = owner != OWN_THREAD ? owner : (int)(fz_u8(in) % MAX_HEAPS);
    if (!S.heap[h]) return;
    q = how == 2 ? brisk_heap_realloc(S.heap[h], old.p, s)
                 : brisk_heap_realloc_aligned(S.heap[h], old.p, align, s);
    if (owner == OWN_THREAD) owner = h, flags = MAYBE_THREAD;
  }
  if (!q) {
    FZ_CHECK(heap_may_fail(owner) || S.capped, "realloc(%p, %zu, align %zu): NULL (errno %d)", old.p, s, align,
             errno);
    FZ_CHECK(errno == ENOMEM, "realloc(%p, %zu): NULL with errno %d", old.p, s, errno);
    verify("after a failed realloc", &old);
    return;
  }
  drop(i);
  size_t span = brisk_usable_size(q);
  fz_check_new(how >= 3 ? "realloc_aligned" : "realloc", S.set.b, S.set.n, q, s, fz_malloc_align(s, align), span);
  fz_verify("realloc kept", q, old.size, old.size < s ? old.size : s, old.seed);
  add(q, s, span, owner, flags, old.seed);
}

static void op_free(fz_input *in) {
  int i = pick(in, true);
  if (i < 0) return;
  fz_block b = drop(i);
  verify("before free", &b);
  if (is_pool(&b)) {
    pool_slot *ps = &S.pool[b.owner - OWN_POOL];
    brisk_pool_free(ps->pool, b.p);
    ps->live--;
  } else if (fz_u8(in) & 1) {
    brisk_free_sized(b.p, b.size + fz_below(in, b.span - b.size + 1));
  } else {
    brisk_free(b.p);
  }
}

/* A block's usable size never changes, and brisk owns all of it. */
static void op_usable(fz_input *in) {
  int i = pick(in, false);
  if (i < 0) return;
  fz_block *b = &S.set.b[i];
  verify("usable_size", b);
  size_t now = brisk_usable_size(b->p), at = fz_below(in, b->span);
  FZ_CHECK(now == b->span, "brisk_usable_size(%p) went from %zu to %zu", b->p, b->span, now);
  FZ_CHECK(brisk_owns(b->p + at), "brisk_owns(%p + %zu) = 0 inside a live block", b->p, at);
}

/* ---- Explicit heaps and pools --------------------------------------------- */

/* Blocks of heap h: those that may have moved to the thread's heap are
 * freed, the others dropped (destroy and reset free them). */
static void heap_empty(int h) {
  for (int i = 0; i < S.set.n;) {
    if (S.set.b[i].owner != h) {
      i++;
      continue;
    }
    fz_block b = drop(i);
    verify("heap block", &b);
    if (b.flags & MAYBE_THREAD) brisk_free(b.p);
  }
}

static void op_heap(fz_input *in) {
  int h = (int)(fz_u8(in) % MAX_HEAPS);
  uint8_t what = fz_u8(in) % 6;
  if (!S.heap[h]) {
    errno = 0;
    S.heap[h] = brisk_heap_new();
    S.heap_max[h] = 0;
    FZ_CHECK(S.heap[h] || (S.capped && errno == ENOMEM), "brisk_heap_new: NULL (errno %d)", errno);
    return;
  }
  brisk_heap_t *heap = S.heap[h];
  if (what <= 1) {
    size_t s = take_size(in);
    if (S.set.n == FZ_MAX_LIVE) return;
    errno = 0;
    if (what == 0) take("brisk_heap_malloc", brisk_heap_malloc(heap, s), s, 1, h, 0, heap_may_fail(h), false);
    else take("brisk_heap_calloc", brisk_heap_calloc(heap, 1, s), s, 1, h, 0, heap_may_fail(h), true);
  } else if (what == 2) {
    heap_empty(h);
    brisk_heap_destroy(heap);
    S.heap[h] = NULL;
  } else if (what == 3) {
    heap_empty(h);
    brisk_heap_reset(heap);
  } else if (what == 4) {
    size_t held = brisk_heap_held_bytes(heap);
    S.heap_max[h] = (fz_u8(in) & 1) ? 0 : held + fz_below(in, 64) * 64 * FZ_KIB;
    brisk_heap_set_max_bytes(heap, S.heap_max[h]);
  } else {
    /* Its pages and huge blocks hold at least its blocks. */
    size_t held = brisk_heap_held_bytes(heap), sum = 0;
    for (int i = 0; i < S.set.n; i++)
      if (S.set.b[i].owner == h && !S.set.b[i].flags) sum += S.set.b[i].size;
    FZ_CHECK(held >= sum, "brisk_heap_held_bytes = %zu, but its blocks hold %zu", held, sum);
  }
}

static void pool_destroy(int k) {
  for (int i = 0; i < S.set.n;) {
    if (S.set.b[i].owner == OWN_POOL + k) {
      fz_block b = drop(i);
      verify("pool object", &b);
    } else {
      i++;
    }
  }
  brisk_pool_destroy(S.pool[k].pool);
  S.pool[k] = (pool_slot){0};
}

static void op_pool(fz_input *in) {
  int k = (int)(fz_u8(in) % MAX_POOLS);
  pool_slot *ps = &S.pool[k];
  uint8_t what = fz_u8(in) % 4;
  if (!ps->pool) {
    size_t size = (fz_u8(in) & 7) ? 1 + fz_below(in, 1024) : 1 + fz_below(in, FZ_MIB);
    size_t align = (fz_u8(in) & 3) ? 0 : (size_t)1 << fz_below(in, 15);
    size_t max = (fz_u8(in) & 1) ? 0 : 1 + fz_below(in, 16);
    errno = 0;
    ps->pool = brisk_pool_new(size, align, max);
    FZ_CHECK(ps->pool || (S.capped && errno == ENOMEM), "brisk_pool_new(%zu, %zu, %zu): NULL", size, align, max);
    ps->align = align == 0 ? 16 : align < 8 ? 8 : align;
    ps->size = ((size < 16 ? 16 : size) + ps->align - 1) & ~(ps->align - 1);
    ps->max = max;
    return;
  }
  if (what <= 1) {
    if (S.set.n == FZ_MAX_LIVE) return;
    errno = 0;
    void *q = brisk_pool_alloc(ps->pool);
    if (ps->max && ps->live == ps->max) {
      FZ_CHECK(!q && errno == ENOMEM, "brisk_pool_alloc: a pool of %zu gave a block past its bound", ps->max);
      ps->refused++;
      return;
    }
    if (!q) {
      FZ_CHECK(S.capped && errno == ENOMEM, "brisk_pool_alloc(%zu B): NULL (errno %d)", ps->size, errno);
      return;
    }
    fz_check_new("brisk_pool_alloc", S.set.b, S.set.n, q, ps->size, ps->align, ps->size);
    add(q, ps->size, ps->size, OWN_POOL + k, 0, S.seed++);
    ps->live++;
  } else if (what == 2) {
    pool_destroy(k);
  } else {
    brisk_pool_stats_t st;
    FZ_CHECK(brisk_pool_stats(ps->pool, &st) == 0, "brisk_pool_stats failed");
    FZ_CHECK(st.object_size == ps->size && st.alignment == ps->align && st.max_objects == ps->max &&
                 st.live_objects == ps->live && st.exhausted == ps->refused && st.allocs - st.frees == ps->live,
             "brisk_pool_stats: size %zu align %zu max %zu live %zu refused %llu, expected %zu %zu %zu %zu %zu",
             st.object_size, st.alignment, st.max_objects, st.live_objects, (unsigned long long)st.exhausted,
             ps->size, ps->align, ps->max, ps->live, ps->refused);
  }
}

/* ---- Calls that must fail, foreign pointers ------------------------------- */

static void op_bad(fz_input *in) {
  int i = pick(in, false);
  uint8_t what = fz_u8(in) % 11, k = fz_u8(in);
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  void *q = (void *)1;
  errno = 0;
  switch (what) {
  case 0: q = brisk_malloc(SIZE_MAX - k); break;
  case 1:
    q = k % 4 ? brisk_calloc(SIZE_MAX / 2 + 1 + k, 2 + k % 7)
              : brisk_calloc_aligned(SIZE_MAX / 2 + 1 + k, 2 + k % 7, (size_t)64 << (k % 16));
    break;
  case 2: {
    size_t bad = k % 2 ? 0 : 3 * ((size_t)1 << (k % 20));
    if (k % 3 == 0) {
      q = brisk_aligned_alloc(bad, 16);
    } else if (k % 3 == 1) {
      q = brisk_calloc_aligned(2, 8, bad);
    } else {
      q = brisk_realloc_aligned(i < 0 ? NULL : S.set.b[i].p, bad, 16);
      if (i >= 0) verify("after a realloc_aligned with a bad alignment", &S.set.b[i]);
    }
    break;
  }
  case 3:
    FZ_CHECK(brisk_posix_memalign(&q, k % 2 ? 4 : 24, 16) == EINVAL && q == (void *)1, "posix_memalign");
    return;
  case 4: q = brisk_memalign(((size_t)1 << 62) + 1 + k, 16); break;
  case 5: q = brisk_heap_malloc(NULL, k); break;
  case 6: q = brisk_pool_new(k % 2 ? 0 : FZ_MIB + 1 + k, 16, 0); break;
  case 7:
    if (i < 0) return;
    q = k % 2 ? brisk_reallocarray(S.set.b[i].p, SIZE_MAX / 4, 8)
              : brisk_realloc(S.set.b[i].p, (size_t)PTRDIFF_MAX + 1 + k);
    verify("after a realloc that must fail", &S.set.b[i]);
    break;
  case 8:
    /* Never brisk's: not owned, no size, left alone by free. */
    FZ_CHECK(!brisk_owns(foreign_small) && !brisk_usable_size(foreign_small) && !brisk_usable_size(NULL) &&
                 !brisk_owns(NULL) && !brisk_owns(foreign + k),
             "a foreign pointer is said to be brisk's");
    brisk_free(foreign_small + k % sizeof foreign_small);
    brisk_free(foreign + k);
    fz_verify("foreign memory after free", foreign_small, sizeof foreign_small, sizeof foreign_small,
              FOREIGN_SEED);
    fz_verify("foreign memory after free", foreign, 2 * page, 2 * page, FOREIGN_SEED);
    return;
  case 9: {
    /* Mapped now, they may fill the rest of a 4 MiB chunk a huge block ends in. */
    uint8_t *m[16];
    size_t len = page * (1 + 3 * (size_t)k); /* not 2 MiB: the kernel aligns those */
    for (int j = 0; j < 16; j++) {
      m[j] = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      FZ_CHECK(m[j] != MAP_FAILED, "mmap failed");
      FZ_CHECK(!brisk_owns(m[j]) && !brisk_usable_size(m[j]),
               "brisk_owns(%p) = %d, usable size %zu: a mapping "
               "made by the program is said to be brisk's",
               m[j], brisk_owns(m[j]), brisk_usable_size(m[j]));
      brisk_free(m[j]);
    }
    for (int j = 0; j < 16; j++) munmap(m[j], len);
    return;
  }
  default: {
    /* realloc of a foreign pointer copies what is mapped of the request. */
    size_t at = fz_below(in, 2 * page), s = fz_below(in, 3 * page);
    if (S.set.n == FZ_MAX_LIVE) return;
    q = brisk_realloc(foreign + at, s);
    if (!q && S.capped) return;
    size_t span = brisk_usable_size(q), kept = s < 2 * page - at ? s : 2 * page - at;
    fz_check_new("realloc(foreign)", S.set.b, S.set.n, q, s, fz_malloc_align(s, 1), span);
    FZ_CHECK(!memcmp(q, foreign + at, kept), "realloc(foreign + %zu, %zu) did not copy %zu bytes", at, s, kept);
    add(q, s, span, OWN_THREAD, 0, S.seed++);
    return;
  }
  }
  int want = what == 0 || what == 1 || what == 7 ? ENOMEM : EINVAL;
  FZ_CHECK(q == NULL && errno == want, "bad call %d (%d): %p, errno %d, expected NULL and %d", what, k, q, errno,
           want);
}

/* ---- The program ---------------------------------------------------------- */

static void set_options(uint8_t b) {
  if (b & 1) brisk_option_set(BRISK_OPTION_PURGE_DELAY_MS, 0);
  if (b & 2) brisk_option_set(BRISK_OPTION_CACHE_CAP, 0);
  if ((b & 12) == 12) brisk_set_realtime(1);
  if (b & 16) brisk_option_set(BRISK_OPTION_HUGEPAGES, 1);
  S.capped = (b & 0xe0) == 0xe0;
  if (S.capped) brisk_set_max_bytes(brisk_mapped_bytes() + ((size_t)16 << (b & 3)) * FZ_MIB);
}

static void restore_options(void) {
  brisk_set_realtime(0);
  brisk_set_max_bytes(0);
  for (int i = 0; i < BRISK_OPTION_COUNT; i++) brisk_option_set((brisk_option_t)i, saved_options[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_input in = {data, size};
  S.huge_left = HUGE_PER_INPUT;
  set_options(fz_u8(&in));
  while (fz_more(&in)) {
    switch (fz_u8(&in) % 12) {
    case 0:
    case 1:
    case 2: op_malloc(&in); break;
    case 3: op_aligned(&in); break;
    case 4: op_realloc(&in); break;
    case 5:
    case 6: op_free(&in); break;
    case 7: op_usable(&in); break;
    case 8: op_heap(&in); break;
    case 9: op_pool(&in); break;
    case 10: op_bad(&in); break;
    default:
      if (fz_u8(&in) & 1) fz_check_brisk(&S.set, counted);
      else brisk_collect();
      break;
    }
  }
  fz_check_brisk(&S.set, counted);
  for (int h = 0; h < MAX_HEAPS; h++) {
    if (!S.heap[h]) continue;
    heap_empty(h);
    brisk_heap_destroy(S.heap[h]);
    S.heap[h] = NULL;
  }
  for (int k = 0; k < MAX_POOLS; k++)
    if (S.pool[k].pool) pool_destroy(k);
  while (S.set.n) op_free(&in);
  restore_options();
  brisk_collect();
  FZ_CHECK(brisk_check_heap() == BRISK_CHECK_OK, "brisk_check_heap at the end: %s", brisk_check_message());
  return 0;
}
