/* pairs.c: workload 13, the loop that callgrind counts instructions in.
 *
 * `live` blocks of `size` bytes are allocated and tagged first (the blocks
 * "live" beside the loop), then `iters` times: p = malloc(size), write p[0],
 * read it back, free(p). Then the live blocks are checked and freed.
 * alloc=none calls two empty stand-in functions instead of malloc and free
 * (through the same function pointers, so the loop's code is the same): its
 * instruction count is the loop's own. bench/run.py runs this under
 * `valgrind --tool=callgrind` at two iteration counts, for each allocator and
 * for alloc=none, and reports (difference of the malloc runs - difference of
 * the stand-in runs) / difference of iterations, + the stand-ins' own 3
 * instructions: the instructions of one malloc + free pair, start-up, exit
 * and the loop excluded (see bench/probes.py). Run alone it just times the
 * loop (ns per pair), a figure run.py does not use.
 *
 *   valgrind --tool=callgrind bench/build/pairs size=32 live=1000 iters=20000 */
#include "common.h"

static unsigned char g_standin[64];

__attribute__((noinline)) static void *standin_malloc(size_t n) {
  (void)n;
  return g_standin;
}

__attribute__((noinline)) static void standin_free(void *p) { (void)p; }

int main(int argc, char **argv) {
  args_init(argc, argv);
  size_t size = (size_t)arg_int("size", 32);
  size_t live = (size_t)arg_int("live", 0);
  long iters = (long)arg_int("iters", 20000);
  const char *how = arg_str("alloc", "malloc");
  args_done();
  int none = strcmp(how, "none") == 0;
  if ((!none && strcmp(how, "malloc") != 0) || size < 1 || size > sizeof g_standin) {
    fprintf(stderr, "alloc must be malloc or none; size 1-%zu\n", sizeof g_standin);
    return 64;
  }
  /* volatile: the compiler must call through the pointers either way */
  void *(*volatile do_malloc)(size_t) = none ? standin_malloc : malloc;
  void (*volatile do_free)(void *) = none ? standin_free : free;
  void *(*m)(size_t) = do_malloc;
  void (*f)(void *) = do_free;

  check_t c = {0};
  void **keep = xmalloc((live ? live : 1) * sizeof *keep);
  for (size_t i = 0; i < live; i++) {
    keep[i] = xmalloc(size);
    stamp(keep[i], size, make_tag(i + 1), &c);
  }
  uint64_t t0 = now_ns();
  for (long i = 0; i < iters; i++) {
    volatile unsigned char *p = m(size);
    unsigned char v = (unsigned char)i | 1;
    p[0] = v;
    c.written += v;
    c.read += p[0];
    f((void *)p);
  }
  double ns = (double)(now_ns() - t0) / (double)(iters ? iters : 1);
  for (size_t i = 0; i < live; i++) {
    stamp_ok(keep[i], size, make_tag(i + 1), &c);
    free(keep[i]);
  }
  free(keep);
  check_merge(&c);

  json_begin("pairs");
  char label[64], sz[32];
  snprintf(label, sizeof label, "%s, %zu other blocks live", size_label(sz, sizeof sz, (long long)size),
           live);
  json_case(label, 1, (long long)size);
  json_metric("ns_per_pair", ns);
  json_metric("iters", (double)iters);
  json_case_end();
  return bench_finish();
}
