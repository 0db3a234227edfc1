/* sizecat.c: workload 4, size categories with and without fill (after the
 * tests of the Kaname-Shiki allocator).
 *
 * Sizes drawn at random within one category: 0-1 KiB, 2-32 KiB, 32 KiB-1 MiB,
 * 2-32 MiB, for ms milliseconds per case, on `threads` threads.
 *   mode=window: each thread keeps a window of `live` blocks (8) and replaces
 *                a random one per step;
 *   mode=bulk:   many blocks live: each thread allocates `live` blocks, then
 *                frees them all, round after round; the frees go in
 *                allocation order, then in reverse, then in random order.
 * `live` is one number, or one per range listed in `ranges`.
 *   free (fill=0): malloc + free only (just the first and last 8 bytes are tagged);
 *   fill (fill=1): every byte written after malloc and checked before free.
 * Figures: thousands of ops/s, one op = one malloc + one free (+ fill + check);
 * k rather than M, as the 2-32 MiB cases with fill do a few hundred a second;
 * `mallocs`, the mallocs of the case (run.py divides syscall counts by it).
 *
 *   sizecat threads=2 ms=200 ranges=0,1,2,3
 *   sizecat mode=bulk ranges=2 live=256 fill=0 threads=1 ms=300 */
#include "common.h"

static const struct {
  const char *name;
  size_t lo, hi;
} ranges[] = {
    {"0-1 KiB", 0, 1 * KiB},
    {"2-32 KiB", 2 * KiB, 32 * KiB},
    {"32 KiB-1 MiB", 32 * KiB, 1 * MiB},
    {"2-32 MiB", 2 * MiB, 32 * MiB},
};

typedef struct {
  wstat_t st;
  int id, filled, bulk;
  size_t lo, hi, live;
  check_t c;
} arg_t;

static void put(arg_t *a, slots_t *s, size_t i, rng_t *r, uint64_t *seq) {
  size_t n = rng_range(r, a->lo, a->hi);
  s->len[i] = n;
  s->tag[i] = make_tag(++*seq);
  s->blk[i] = malloc(n);
  if (!s->blk[i]) {
    if (n) die("malloc returned NULL");
    return; /* malloc(0) may return NULL */
  }
  if (a->filled)
    fill(s->blk[i], n, s->tag[i], &a->c);
  else
    stamp(s->blk[i], n, s->tag[i], &a->c);
}

static void drop(arg_t *a, slots_t *s, size_t i) {
  if (s->blk[i]) {
    if (a->filled)
      fill_ok(s->blk[i], s->len[i], s->tag[i], &a->c);
    else
      stamp_ok(s->blk[i], s->len[i], s->tag[i], &a->c);
  }
  free(s->blk[i]);
  s->blk[i] = NULL;
}

static void *worker(void *v) {
  arg_t *a = v;
  rng_t r = {(uint64_t)a->id * 1009 + 3};
  size_t live = a->live;
  slots_t s;
  slots_init(&s, live);
  size_t *order = calloc(live, sizeof(size_t));
  if (!order) die("calloc");
  uint64_t ops = 0, seq = (uint64_t)a->id << 40;

  gate();
  if (a->bulk)
    for (unsigned round = 0; !stopped(); round++) {
      for (size_t i = 0; i < live; i++) put(a, &s, i, &r, &seq);
      for (size_t i = 0; i < live; i++) order[i] = round % 3 == 1 ? live - 1 - i : i;
      if (round % 3 == 2)
        for (size_t i = live; i > 1; i--) { /* shuffle */
          size_t k = rng_next(&r) % i, t = order[k];
          order[k] = order[i - 1];
          order[i - 1] = t;
        }
      for (size_t i = 0; i < live; i++) drop(a, &s, order[i]);
      ops += live;
    }
  else
    while (!stopped()) {
      for (int k = 0; k < 8; k++) {
        size_t i = rng_next(&r) % live;
        drop(a, &s, i);
        put(a, &s, i, &r, &seq);
      }
      ops += 8;
    }
  a->st.ops = ops;
  a->st.t_end = now_ns();
  slots_done(&s, a->filled ? fill_ok : stamp_ok, &a->c);
  free(order);
  return NULL;
}

int main(int argc, char **argv) {
  args_init(argc, argv);
  int threads = (int)arg_int("threads", 1);
  long ms = (long)arg_int("ms", 200);
  long long which[4], live[4], fills[2];
  int nranges = arg_list("ranges", "0,1,2,3", which, 4);
  int nlive = arg_list("live", "8", live, 4);
  int nfills = arg_list("fill", "0,1", fills, 2);
  const char *mode = arg_str("mode", "window");
  args_done();
  int bulk = strcmp(mode, "bulk") == 0;
  if ((!bulk && strcmp(mode, "window") != 0) || (nlive != 1 && nlive != nranges)) {
    fprintf(stderr, "mode must be window or bulk; live: one number or one per range\n");
    return 64;
  }

  json_begin("sizecat");
  arg_t *args = xcalloc64((size_t)threads, sizeof *args);
  for (int f = 0; f < nfills; f++)
    for (int k = 0; k < nranges; k++) {
      if (which[k] < 0 || which[k] > 3) die("ranges: 0..3");
      int filled = fills[f] != 0;
      size_t n = (size_t)live[nlive == 1 ? 0 : k];
      if (n < 1) die("live: at least 1");
      memset(args, 0, sizeof *args * (size_t)threads);
      for (int t = 0; t < threads; t++) {
        args[t].id = t;
        args[t].filled = filled;
        args[t].bulk = bulk;
        args[t].live = n;
        args[t].lo = ranges[which[k]].lo;
        args[t].hi = ranges[which[k]].hi;
      }
      uint64_t ops;
      double secs = run_timed(threads, worker, args, sizeof *args, ms, &ops);
      for (int t = 0; t < threads; t++) check_merge(&args[t].c);

      char label[64], many[32] = "";
      if (bulk)
        snprintf(many, sizeof many, ", %zu live", n);
      else if (n != 8)
        snprintf(many, sizeof many, ", window %zu", n);
      snprintf(label, sizeof label, "%s, %s%s, %d thr", ranges[which[k]].name,
               filled ? "fill" : "free", many, threads);
      json_case(label, threads, (long long)ranges[which[k]].hi);
      json_metric("kops", (double)ops / secs / 1e3);
      json_metric("mallocs", (double)(ops + (bulk ? 0 : n * (size_t)threads)));
      json_case_end();
    }
  free(args);
  return bench_finish();
}
