/* Multi-thread fuzzer: the input is a program for two threads. Thread A
 * (the fuzzer's) allocates across every tier, from its heap, an explicit
 * heap and a pool, frees and reallocates some blocks itself and hands
 * others to thread B through a queue. B checks each block's pattern, then
 * frees it (free, free_sized, pool free), or reallocates it and frees it or
 * hands it back to A, which frees it later: remote frees, reallocs of
 * another thread's blocks, and, as B ends with each input, frees into
 * abandoned segments. Contents are checked on both sides; blocks come back
 * to A checked against A's live ones for overlap. Orders between the two
 * threads vary from run to run: reproduce a crash with -runs=N. */
#include "fuzz_check.h"
#include "fuzz_common.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#define MAX_LIVE 128 /* blocks anywhere: A's, queued, B's, on the way back */
#define LIVE_BYTES_CAP (192 * FZ_MIB)
#define HUGE_PER_INPUT 6

#define OWN_THREAD 0
#define OWN_HEAP 1
#define OWN_POOL 2
#define MAYBE_THREAD 1 /* a heap block B reallocated: in the heap or moved to B's */

enum act { ACT_FREE, ACT_FREE_SIZED, ACT_REALLOC_BACK, ACT_REALLOC_FREE, ACT_STOP };

typedef struct {
  fz_block b;
  enum act act;
  size_t arg; /* the new size, or the size given to free_sized */
} item;

/* A ring with room for every block there is, so B never waits on A. */
typedef struct {
  item q[MAX_LIVE + 1];
  unsigned head, tail;
  pthread_mutex_t mu;
  pthread_cond_t cv;
} queue;

static void push(queue *q, item it) {
  pthread_mutex_lock(&q->mu);
  q->q[q->tail++ % (MAX_LIVE + 1)] = it;
  pthread_cond_signal(&q->cv);
  pthread_mutex_unlock(&q->mu);
}

static bool pop(queue *q, item *it, bool wait) {
  pthread_mutex_lock(&q->mu);
  while (wait && q->head == q->tail) pthread_cond_wait(&q->cv, &q->mu);
  bool got = q->head != q->tail;
  if (got) *it = q->q[q->head++ % (MAX_LIVE + 1)];
  pthread_mutex_unlock(&q->mu);
  return got;
}

static queue to_b = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
static queue to_a = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
static atomic_int blocks;  /* every block of this input not yet freed */
static brisk_heap_t *heap; /* A's explicit heap */
static brisk_pool_t *pool; /* any thread frees its objects */
static size_t pool_size = 48, pool_align = 16;
static atomic_uint seed;

static struct {
  fz_set set; /* its bytes: A's accounting, blocks on their way back included */
  int huge_left;
} A;

static long long saved_options[BRISK_OPTION_COUNT];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fz_setup();
  for (int i = 0; i < BRISK_OPTION_COUNT; i++) saved_options[i] = brisk_option_get((brisk_option_t)i);
  return 0;
}

static void verify(const char *what, const fz_block *b) { fz_verify(what, b->p, b->size, b->size, b->seed); }
static bool counted(const fz_block *b) { return b->owner != OWN_POOL; }

static void release(const fz_block *b) {
  if (b->owner == OWN_POOL) brisk_pool_free(pool, b->p);
  else brisk_free(b->p);
  atomic_fetch_sub(&blocks, 1);
}

/* A reallocated block: as big as asked and aligned, holding what it held. */
static fz_block reallocated(const char *who, const fz_block *b, size_t size) {
  uint8_t *q = brisk_realloc(b->p, size);
  size_t span = brisk_usable_size(q);
  fz_check_new(who, NULL, 0, q, size, fz_malloc_align(size, 1), span);
  fz_verify(who, q, b->size, b->size < size ? b->size : size, b->seed);
  fz_fill(q, size, b->seed);
  return (fz_block){q, size, span, b->seed, b->owner, b->owner == OWN_HEAP ? MAYBE_THREAD : 0};
}

static void *thread_b(void *arg) {
  (void)arg;
  item it;
  while (pop(&to_b, &it, true) && it.act != ACT_STOP) {
    verify("B: handed over", &it.b);
    switch (it.act) {
    case ACT_FREE: release(&it.b); break;
    case ACT_FREE_SIZED:
      brisk_free_sized(it.b.p, it.arg);
      atomic_fetch_sub(&blocks, 1);
      break;
    case ACT_REALLOC_BACK: push(&to_a, (item){reallocated("B: realloc", &it.b, it.arg), ACT_FREE, 0}); break;
    default: {
      fz_block q = reallocated("B: realloc", &it.b, it.arg);
      brisk_free(q.p);
      atomic_fetch_sub(&blocks, 1);
      break;
    }
    }
  }
  return NULL;
}

/* ---- Thread A -------------------------------------------------------------- */

static fz_block drop(int i) { return fz_drop(&A.set, i); }

/* Blocks B handed back join A's, apart from every one of them. */
static void take_back(void) {
  item it;
  while (pop(&to_a, &it, false)) {
    fz_check_new("B's realloc, back in A", A.set.b, A.set.n, it.b.p, it.b.size, 1, it.b.span);
    verify("back in A", &it.b);
    A.set.b[A.set.n++] = it.b;
  }
}

static size_t take_size(fz_input *in) {
  size_t s = fz_size(in, A.huge_left > 0);
  if (A.set.bytes + s > LIVE_BYTES_CAP) s %= FZ_MIB;
  if (s > FZ_MIB) A.huge_left--;
  return s;
}

static void op_alloc(fz_input *in) {
  size_t s = take_size(in);
  uint8_t how = fz_u8(in) % 5;
  size_t align = how == 2 ? fz_align(in) : 1;
  if (atomic_load(&blocks) >= MAX_LIVE) return;
  void *q;
  int owner = OWN_THREAD;
  switch (how) {
  case 0: q = brisk_malloc(s); break;
  case 1: q = brisk_calloc(1, s); break;
  case 2: q = brisk_aligned_alloc(align, s); break;
  case 3:
    q = brisk_heap_malloc(heap, s);
    owner = OWN_HEAP;
    break;
  default:
    q = brisk_pool_alloc(pool);
    s = pool_size;
    align = pool_align;
    owner = OWN_POOL;
    break;
  }
  size_t span = owner == OWN_POOL ? pool_size : brisk_usable_size(q);
  fz_check_new("A: alloc", A.set.b, A.set.n, q, s, owner == OWN_POOL ? align : fz_malloc_align(s, align), span);
  if (how == 1) fz_verify_zero("A: calloc", q, s);
  atomic_fetch_add(&blocks, 1);
  fz_add(&A.set, q, s, span, owner, 0, atomic_fetch_add(&seed, 1));
}

static void op_hand_over(fz_input *in) {
  if (!A.set.n) return;
  int i = (int)fz_below(in, (size_t)A.set.n);
  item it = {A.set.b[i], (enum act)(fz_u8(in) % 4), 0};
  if (it.b.owner == OWN_POOL) it.act = ACT_FREE;
  if (it.act == ACT_FREE_SIZED) it.arg = it.b.size + fz_below(in, it.b.span - it.b.size + 1);
  if (it.act >= ACT_REALLOC_BACK) {
    it.arg = take_size(in);
    if (A.set.bytes - it.b.size + it.arg > LIVE_BYTES_CAP) it.act = ACT_FREE;
  }
  drop(i);
  if (it.act == ACT_REALLOC_BACK) A.set.bytes += it.arg; /* counted until it is freed in A */
  push(&to_b, it);
}

static void op_own(fz_input *in) {
  if (!A.set.n) return;
  int i = (int)fz_below(in, (size_t)A.set.n);
  fz_block b = drop(i);
  verify("A: own block", &b);
  if (b.owner == OWN_POOL || !(fz_u8(in) & 1)) {
    release(&b);
    return;
  }
  size_t s = take_size(in);
  if (A.set.bytes + s > LIVE_BYTES_CAP) s = b.size;
  fz_block q = reallocated("A: realloc", &b, s);
  fz_check_new("A: realloc", A.set.b, A.set.n, q.p, q.size, 1, q.span);
  A.set.b[A.set.n++] = q;
  A.set.bytes += q.size;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_input in = {data, size};
  uint8_t opts = fz_u8(&in);
  if (opts & 1) brisk_option_set(BRISK_OPTION_PURGE_DELAY_MS, 0);
  if (opts & 2) brisk_option_set(BRISK_OPTION_CACHE_CAP, 0);
  pool_size = 16 + 16 * (size_t)(opts >> 4);
  pool_align = 16;
  heap = brisk_heap_new();
  pool = brisk_pool_new(pool_size, pool_align, 0);
  FZ_CHECK(heap && pool, "no heap or pool");
  A.huge_left = HUGE_PER_INPUT;
  pthread_t b;
  FZ_CHECK(pthread_create(&b, NULL, thread_b, NULL) == 0, "pthread_create");
  while (fz_more(&in)) {
    take_back();
    switch (fz_u8(&in) % 8) {
    case 0:
    case 1:
    case 2: op_alloc(&in); break;
    case 3:
    case 4:
    case 5: op_hand_over(&in); break;
    case 6: op_own(&in); break;
    default: brisk_collect(); break;
    }
  }
  push(&to_b, (item){.act = ACT_STOP});
  pthread_join(b, NULL);
  take_back();
  fz_check_brisk(&A.set, counted); /* B's blocks A holds are in abandoned segments now */
  /* Heap blocks a realloc may have moved are freed; destroy takes the rest. */
  for (int i = A.set.n - 1; i >= 0; i--) {
    if (A.set.b[i].owner != OWN_HEAP) continue;
    fz_block gone = drop(i);
    verify("A: heap block", &gone);
    if (gone.flags) brisk_free(gone.p);
    atomic_fetch_sub(&blocks, 1);
  }
  brisk_heap_destroy(heap);
  while (A.set.n) {
    fz_block gone = drop(A.set.n - 1);
    verify("A: at the end", &gone);
    release(&gone);
  }
  brisk_pool_destroy(pool);
  FZ_CHECK(atomic_load(&blocks) == 0 && A.set.bytes == 0, "%d blocks, %zu bytes left", atomic_load(&blocks),
           A.set.bytes);
  for (int i = 0; i < BRISK_OPTION_COUNT; i++) brisk_option_set((brisk_option_t)i, saved_options[i]);
  brisk_collect();
  FZ_CHECK(brisk_check_heap() == BRISK_CHECK_OK, "brisk_check_heap at the end: %s", brisk_check_message());
  return 0;
}
