/* sweep.c: workload 1, the size sweep.
 *
 * For each size N: malloc(N), write p[0], read it back, free. Repeated for
 * ms milliseconds per size on `threads` threads at once (each thread its own
 * loop, nothing shared). Figure: M ops/s, one op = one malloc+write+free.
 *
 *   sweep threads=2 ms=100 sizes=16,64,1K,64M */
#include "common.h"

typedef struct {
  wstat_t st;
  size_t size;
  check_t c;
} arg_t;

static void *worker(void *v) {
  arg_t *a = v;
  uint64_t ops = 0;
  gate();
  while (!stopped()) {
    for (int i = 0; i < 32; i++) {
      volatile unsigned char *p = malloc(a->size);
      if (!p) {
        bench_error("malloc(%zu) returned NULL", a->size);
        goto out;
      }
      unsigned char v = (unsigned char)(ops + (uint64_t)i) | 1;
      p[0] = v;
      a->c.written += v;
      a->c.read += p[0];
      free((void *)p);
    }
    ops += 32;
  }
out:
  a->st.ops = ops;
  a->st.t_end = now_ns();
  return NULL;
}

int main(int argc, char **argv) {
  args_init(argc, argv);
  int threads = (int)arg_int("threads", 1);
  long ms = (long)arg_int("ms", 100);
  long long sizes[32];
  int nsizes = arg_list("sizes", "16,64,256,1K,4K,16K,64K,256K,1M,4M,16M,32M,64M", sizes, 32);
  args_done();

  json_begin("sweep");
  arg_t *args = xcalloc64((size_t)threads, sizeof *args);
  for (int s = 0; s < nsizes; s++) {
    memset(args, 0, sizeof *args * (size_t)threads);
    for (int t = 0; t < threads; t++) args[t].size = (size_t)sizes[s];
    uint64_t ops;
    double secs = run_timed(threads, worker, args, sizeof *args, ms, &ops);
    for (int t = 0; t < threads; t++) check_merge(&args[t].c);

    char label[64], sz[32];
    snprintf(label, sizeof label, "%s, %d thr", size_label(sz, sizeof sz, sizes[s]), threads);
    json_case(label, threads, sizes[s]);
    json_metric("mops", (double)ops / secs / 1e6);
    json_case_end();
  }
  free(args);
  return bench_finish();
}
