/* ring.c: workload 2, the mixed ring.
 *
 * Each thread fills a ring of `slots` blocks, then replaces random slots for
 * ms milliseconds: check the old block's tags, free it, malloc a new size,
 * memset all of it. Sizes: 60% 16-256 B, 30% 512 B-2 KiB, 10% 4-32 KiB.
 * One replacement in 16 is timed: malloc and free each go into a latency
 * histogram of raw clock readings; the percentiles are interpolated between
 * the clock's steps and the timer's own cost is subtracted (see latency.h).
 * Figures: M replacements/s, malloc/free P50, P99, P99.9, max and mean in ns,
 * peak RSS (VmHWM) and the bytes live in the rings at the end. Cases are
 * named by threads ("2 thr"), and by slots too when not 100 000
 * ("2 thr, 4000 live").
 *
 *   ring threads=4 slots=100000 ms=1000 */
#include "latency.h"

typedef struct {
  wstat_t st;
  int id;
  size_t slots, live;
  hist_t hm, hf;
  check_t c;
} arg_t;

static void *worker(void *v) {
  arg_t *a = v;
  rng_t r = {(uint64_t)a->id * 7919 + 1};
  size_t slots = a->slots;
  slots_t s;
  slots_init(&s, slots);
  void **blk = s.blk;
  size_t *len = s.len;
  uint64_t *tag = s.tag;
  uint64_t seq = (uint64_t)a->id << 40, ops = 0;
  size_t live = 0;

  for (size_t i = 0; i < slots; i++) {
    len[i] = mixed_size(&r);
    tag[i] = make_tag(++seq);
    blk[i] = xmalloc(len[i]);
    fill(blk[i], len[i], tag[i], &a->c);
    live += len[i];
  }
  gate();
  while (!stopped()) {
    for (int k = 0; k < 16; k++) {
      size_t i = rng_next(&r) % slots, n = mixed_size(&r);
      stamp_ok(blk[i], len[i], tag[i], &a->c);
      if (k == 0) { /* the sampled one */
        uint64_t t0 = ticks();
        free(blk[i]);
        uint64_t t1 = ticks();
        blk[i] = malloc(n);
        uint64_t t2 = ticks();
        hist_add(&a->hf, t1 - t0);
        hist_add(&a->hm, t2 - t1);
      } else {
        free(blk[i]);
        blk[i] = malloc(n);
      }
      if (!blk[i]) die("malloc returned NULL");
      live += n - len[i];
      len[i] = n;
      tag[i] = make_tag(++seq);
      fill(blk[i], n, tag[i], &a->c);
    }
    ops += 16;
  }
  a->st.ops = ops;
  a->st.t_end = now_ns();
  a->live = live;

  slots_done(&s, stamp_ok, &a->c);
  return NULL;
}

int main(int argc, char **argv) {
  args_init(argc, argv);
  int threads = (int)arg_int("threads", 1);
  size_t slots = (size_t)arg_int("slots", 100000);
  long ms = (long)arg_int("ms", 1000);
  args_done();

  ticks_to_ns(); /* calibrate before anything is timed */
  ticks_quantum();
  ticks_overhead();
  rss_peak_reset();
  json_begin("ring");
  arg_t *args = xcalloc64((size_t)threads, sizeof *args);
  for (int t = 0; t < threads; t++) {
    args[t].id = t;
    args[t].slots = slots;
  }
  uint64_t ops;
  double secs = run_timed(threads, worker, args, sizeof *args, ms, &ops);
  long peak_kb = rss_peak_kb();

  hist_t *hm = calloc(1, sizeof *hm), *hf = calloc(1, sizeof *hf);
  if (!hm || !hf) die("calloc");
  size_t live = 0;
  for (int t = 0; t < threads; t++) {
    hist_merge(hm, &args[t].hm);
    hist_merge(hf, &args[t].hf);
    check_merge(&args[t].c);
    live += args[t].live;
  }
  char label[32];
  if (slots == 100000)
    snprintf(label, sizeof label, "%d thr", threads);
  else
    snprintf(label, sizeof label, "%d thr, %zu live", threads, slots);
  json_case(label, threads, -1);
  json_metric("mops", (double)ops / secs / 1e6);
  json_metric("malloc_p50", hist_ns(hm, 0.50));
  json_metric("malloc_p99", hist_ns(hm, 0.99));
  json_metric("malloc_p999", hist_ns(hm, 0.999));
  json_metric("malloc_max", hist_ns(hm, 1));
  json_metric("malloc_mean", hist_mean_ns(hm));
  json_metric("free_p50", hist_ns(hf, 0.50));
  json_metric("free_p99", hist_ns(hf, 0.99));
  json_metric("free_p999", hist_ns(hf, 0.999));
  json_metric("free_max", hist_ns(hf, 1));
  json_metric("free_mean", hist_mean_ns(hf));
  json_metric("clock_step_ns", ticks_quantum() * ticks_to_ns());
  json_metric("samples", (double)hm->n);
  json_metric("peak_rss_mb", (double)peak_kb / 1024);
  json_metric("live_mb", (double)live / (double)MiB);
  json_metric("rss_per_live", (double)peak_kb * 1024 / (double)(live ? live : 1));
  json_case_end();
  free(hm);
  free(hf);
  free(args);
  return bench_finish();
}
