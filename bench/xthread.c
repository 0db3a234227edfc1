/* xthread.c: workload 3, blocks freed by a thread that did not allocate them.
 *
 * mode=pc64 / mode=pcmixed: threads/2 producer-consumer pairs. A producer
 *   allocates batches of 256 blocks (64 B, or the mixed distribution of the
 *   ring), tags them and hands each batch over a lock-free queue to its
 *   consumer, which checks and frees them. Figure: M blocks/s.
 * mode=larson: a server loop after Larson & Krishnan. `threads` workers share
 *   one table of `slots` blocks; each step puts a new block (16-1024 B) into
 *   a random slot with an atomic exchange and frees the block it displaced,
 *   usually another thread's. Every `rounds` steps a worker thread is
 *   replaced by a new one, which goes on where it left off. Figures: M ops/s,
 *   worker threads replaced per second.
 *
 *   xthread mode=pcmixed threads=2 ms=500 */
#include "common.h"
#include <sched.h>

#define QSLOTS 64
#define BATCH 256

typedef struct {
  void *p[BATCH];
} batch_t;

typedef struct {
  _Alignas(64) atomic_size_t head; /* consumer position */
  _Alignas(64) atomic_size_t tail; /* producer position */
  _Alignas(64) atomic_int done;    /* producer stopped */
  batch_t q[QSLOTS];
} pair_t;

typedef struct {
  wstat_t st;
  int id, mixed;
  pair_t *pair;
  check_t c;
} pc_arg_t;

static void produce(pc_arg_t *a) {
  pair_t *pr = a->pair;
  rng_t r = {(uint64_t)a->id + 1};
  uint64_t seq = (uint64_t)a->id << 40;
  gate();
  while (!stopped()) {
    size_t t = atomic_load_explicit(&pr->tail, memory_order_relaxed);
    while (t - atomic_load_explicit(&pr->head, memory_order_acquire) >= QSLOTS) {
      if (stopped()) goto out;
      sched_yield();
    }
    batch_t *b = &pr->q[t % QSLOTS];
    for (int i = 0; i < BATCH; i++) {
      size_t n = a->mixed ? mixed_size(&r) : 64;
      b->p[i] = xmalloc(n);
      stamp(b->p[i], n, sized_tag(++seq, n), &a->c);
    }
    atomic_store_explicit(&pr->tail, t + 1, memory_order_release);
  }
out:
  a->st.t_end = now_ns();
  atomic_store_explicit(&pr->done, 1, memory_order_release);
}

static void consume(pc_arg_t *a) {
  pair_t *pr = a->pair;
  uint64_t ops = 0;
  gate();
  for (;;) {
    size_t h = atomic_load_explicit(&pr->head, memory_order_relaxed);
    if (h == atomic_load_explicit(&pr->tail, memory_order_acquire)) {
      if (atomic_load_explicit(&pr->done, memory_order_acquire) &&
          h == atomic_load_explicit(&pr->tail, memory_order_acquire))
        break;
      sched_yield();
      continue;
    }
    batch_t *b = &pr->q[h % QSLOTS];
    for (int i = 0; i < BATCH; i++) {
      sized_ok(b->p[i], &a->c);
      free(b->p[i]);
    }
    ops += BATCH;
    atomic_store_explicit(&pr->head, h + 1, memory_order_release);
  }
  a->st.ops = ops;
  a->st.t_end = now_ns();
}

/* Even ids produce, odd ids consume; pair i is threads 2i and 2i+1. */
static void *pc_worker(void *v) {
  pc_arg_t *a = v;
  if (a->id % 2 == 0)
    produce(a);
  else
    consume(a);
  return NULL;
}

/* ---- larson ---- */

static _Atomic(void *) *g_slots;
static size_t g_nslots;

typedef struct {
  wstat_t st;
  int id;
  long rounds;
  uint64_t seq, generations;
  rng_t r;
  check_t c;
} chain_t;

/* One generation of a worker: `rounds` steps, then it exits. */
static void *larson_generation(void *v) {
  chain_t *ch = v;
  for (long i = 0; i < ch->rounds && !stopped(); i++) {
    size_t n = rng_range(&ch->r, 16, 1024);
    void *p = xmalloc(n);
    stamp(p, n, sized_tag(++ch->seq, n), &ch->c);
    void *old = atomic_exchange_explicit(&g_slots[rng_next(&ch->r) % g_nslots], p,
                                         memory_order_acq_rel);
    if (old) {
      sized_ok(old, &ch->c);
      free(old);
    }
    ch->st.ops++;
  }
  return NULL;
}

/* A worker slot: runs generation after generation until stopped. */
static void *larson_chain(void *v) {
  chain_t *ch = v;
  ch->r.s = (uint64_t)ch->id * 31 + 7;
  ch->seq = (uint64_t)(ch->id + 1) << 40;
  gate();
  while (!stopped()) {
    pthread_t t;
    spawn(&t, larson_generation, ch);
    pthread_join(t, NULL);
    ch->generations++;
  }
  ch->st.t_end = now_ns();
  return NULL;
}

static void run_larson(int threads, long ms, long rounds, size_t slots) {
  check_t c = {0};
  g_nslots = slots;
  g_slots = calloc(slots, sizeof *g_slots);
  if (!g_slots) die("calloc");
  rng_t r = {12345};
  for (size_t i = 0; i < slots; i++) { /* the first frees are cross-thread too */
    size_t n = rng_range(&r, 16, 1024);
    void *p = xmalloc(n);
    stamp(p, n, sized_tag(i + 1, n), &c);
    atomic_store(&g_slots[i], p);
  }
  chain_t *ch = xcalloc64((size_t)threads, sizeof *ch);
  for (int t = 0; t < threads; t++) {
    ch[t].id = t;
    ch[t].rounds = rounds;
  }
  uint64_t ops, gens = 0;
  double secs = run_timed(threads, larson_chain, ch, sizeof *ch, ms, &ops);
  for (int t = 0; t < threads; t++) {
    gens += ch[t].generations;
    check_merge(&ch[t].c);
  }
  for (size_t i = 0; i < slots; i++) {
    void *p = atomic_load(&g_slots[i]);
    sized_ok(p, &c);
    free(p);
  }
  check_merge(&c);
  free(ch);
  free(g_slots);

  char label[64];
  snprintf(label, sizeof label, "larson, %d thr", threads);
  json_case(label, threads, -1);
  json_metric("mops", (double)ops / secs / 1e6);
  json_metric("threads_per_s", (double)gens / secs);
  json_case_end();
}

static void run_pc(int threads, long ms, int mixed) {
  int pairs = threads / 2 > 0 ? threads / 2 : 1;
  pair_t *pair = xcalloc64((size_t)pairs, sizeof *pair);
  pc_arg_t *args = xcalloc64((size_t)pairs * 2, sizeof *args);
  for (int i = 0; i < pairs * 2; i++) {
    args[i].id = i;
    args[i].mixed = mixed;
    args[i].pair = &pair[i / 2];
  }
  uint64_t ops;
  double secs = run_timed(pairs * 2, pc_worker, args, sizeof *args, ms, &ops);
  for (int i = 0; i < pairs * 2; i++) check_merge(&args[i].c);
  free(args);
  free(pair);

  char label[64];
  snprintf(label, sizeof label, "%s, %d+%d thr", mixed ? "mixed sizes" : "64 B", pairs, pairs);
  json_case(label, pairs * 2, mixed ? -1 : 64);
  json_metric("mops", (double)ops / secs / 1e6);
  json_case_end();
}

int main(int argc, char **argv) {
  args_init(argc, argv);
  const char *mode = arg_str("mode", "pc64");
  int threads = (int)arg_int("threads", 2);
  long ms = (long)arg_int("ms", 500);
  long rounds = (long)arg_int("rounds", 20000);
  size_t slots = (size_t)arg_int("slots", 10000);
  args_done();

  json_begin("xthread");
  if (strcmp(mode, "pc64") == 0)
    run_pc(threads, ms, 0);
  else if (strcmp(mode, "pcmixed") == 0)
    run_pc(threads, ms, 1);
  else if (strcmp(mode, "larson") == 0)
    run_larson(threads, ms, rounds, slots);
  else {
    fprintf(stderr, "mode must be pc64, pcmixed or larson\n");
    return 64;
  }
  return bench_finish();
}
