/* sizecat.c: workload 4, size categories with and without fill (after the
 * tests of the Kaname-Shiki allocator).
 *
 * Sizes drawn at random within one category: 0-1 KiB, 2-32 KiB, 32 KiB-1 MiB,
 * 2-32 MiB. Each thread keeps a window of 8 blocks and replaces a random one
 * per step, for ms milliseconds per case.
 *   free: malloc + free only (just the first and last 8 bytes are tagged);
 *   fill: every byte written after malloc and every byte checked before free.
 * Figure: thousands of ops/s, one op = one malloc + one free (+ fill + check);
 * k rather than M, as the 2-32 MiB cases with fill do a few hundred a second.
 *
 *   sizecat threads=2 ms=200 ranges=0,1,2,3 */
#include "common.h"

#define WINDOW 8

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
  int id, filled;
  size_t lo, hi;
  check_t c;
} arg_t;

static void *worker(void *v) {
  arg_t *a = v;
  rng_t r = {(uint64_t)a->id * 1009 + 3};
  void *blk[WINDOW] = {0};
  size_t len[WINDOW] = {0};
  uint64_t tag[WINDOW], seq = (uint64_t)a->id << 40, ops = 0;

  gate();
  while (!stopped()) {
    for (int k = 0; k < 8; k++) {
      size_t i = rng_next(&r) % WINDOW, n = rng_range(&r, a->lo, a->hi);
      if (blk[i]) {
        if (a->filled)
          fill_ok(blk[i], len[i], tag[i], &a->c);
        else
          stamp_ok(blk[i], len[i], tag[i], &a->c);
      }
      free(blk[i]);
      blk[i] = malloc(n);
      len[i] = n;
      tag[i] = make_tag(++seq);
      if (!blk[i]) {
        if (n) die("malloc returned NULL");
        continue; /* malloc(0) may return NULL */
      }
      if (a->filled)
        fill(blk[i], n, tag[i], &a->c);
      else
        stamp(blk[i], n, tag[i], &a->c);
    }
    ops += 8;
  }
  a->st.ops = ops;
  a->st.t_end = now_ns();
  for (int i = 0; i < WINDOW; i++)
    if (blk[i]) {
      stamp_ok(blk[i], len[i], tag[i], &a->c);
      free(blk[i]);
    }
  return NULL;
}

int main(int argc, char **argv) {
  args_init(argc, argv);
  int threads = (int)arg_int("threads", 1);
  long ms = (long)arg_int("ms", 200);
  long long which[4];
  int nranges = arg_list("ranges", "0,1,2,3", which, 4);
  args_done();

  json_begin("sizecat");
  arg_t *args = xcalloc64((size_t)threads, sizeof *args);
  for (int filled = 0; filled <= 1; filled++)
    for (int k = 0; k < nranges; k++) {
      if (which[k] < 0 || which[k] > 3) die("ranges: 0..3");
      memset(args, 0, sizeof *args * (size_t)threads);
      for (int t = 0; t < threads; t++) {
        args[t].id = t;
        args[t].filled = filled;
        args[t].lo = ranges[which[k]].lo;
        args[t].hi = ranges[which[k]].hi;
      }
      uint64_t ops;
      double secs = run_timed(threads, worker, args, sizeof *args, ms, &ops);
      for (int t = 0; t < threads; t++) check_merge(&args[t].c);

      char label[64];
      snprintf(label, sizeof label, "%s, %s, %d thr", ranges[which[k]].name,
               filled ? "fill" : "free", threads);
      json_case(label, threads, (long long)ranges[which[k]].hi);
      json_metric("kops", (double)ops / secs / 1e3);
      json_case_end();
    }
  free(args);
  return bench_finish();
}
