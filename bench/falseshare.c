/* falseshare.c: does the allocator make threads share cache lines? After
 * Hoard's cache-thrash (active) and cache-scratch (passive) benchmarks.
 *
 * Each of `threads` threads, for ms milliseconds: malloc `hold` objects (4)
 * of `size` bytes (8), write every byte of them `writes` times (100; one
 * byte increment per write, through a volatile pointer), check them, free
 * them. Alone on their cache lines the writes run at the speed of the core;
 * if the allocator gave two threads objects on the same 64-byte line, a write
 * must take the line from the other core (2-3x slower on this machine, often
 * 10x on bare metal).
 *   active:  the threads allocate their own objects (an allocator that hands
 *            consecutive small blocks to different threads shares lines);
 *   passive: the main thread first allocates hold * threads objects side by
 *            side and deals them out like cards (thread t gets objects t,
 *            t + threads, ...); each thread frees its objects, then loops as
 *            above (an allocator that reuses a freed block on the thread that
 *            freed it hands the threads interleaved objects).
 * Figure: M writes/s per thread (1 thread is the yardstick: with more
 * threads and no false sharing it stays the same, as long as there are no
 * more threads than cores).
 *
 *   falseshare threads=2 size=8 hold=4 writes=100 ms=200 */
#include "common.h"

#define MAX_HOLD 64

typedef struct {
  wstat_t st;
  int id, hold;
  size_t size;
  long writes;
  void *handed[MAX_HOLD]; /* passive: from the main thread, freed first */
  check_t c;
} arg_t;

static void *worker(void *v) {
  arg_t *a = v;
  size_t n = a->size;
  int hold = a->hold;
  volatile unsigned char *p[MAX_HOLD];
  uint64_t tag[MAX_HOLD], seq = (uint64_t)(a->id + 1) << 40, ops = 0;
  gate();
  for (int j = 0; j < hold; j++) free(a->handed[j]); /* NULL when active */
  while (!stopped()) {
    for (int j = 0; j < hold; j++) {
      p[j] = xmalloc(n);
      tag[j] = make_tag(++seq);
      for (size_t k = 0; k < n; k++) p[j][k] = (unsigned char)(tag[j] >> (8 * (k % 8)));
    }
    for (long w = 0; w < a->writes; w++)
      for (int j = 0; j < hold; j++)
        for (size_t k = 0; k < n; k++) p[j][k]++;
    for (int j = 0; j < hold; j++) {
      int ok = 1;
      for (size_t k = 0; k < n; k++)
        ok &= p[j][k] == (unsigned char)((tag[j] >> (8 * (k % 8))) + (uint64_t)a->writes);
      a->c.written += tag[j];
      if (ok)
        a->c.read += tag[j];
      else
        bench_error("object %p of %zu bytes: a byte changed under a thread", (void *)p[j], n);
      free((void *)p[j]);
    }
    ops += (uint64_t)a->writes * n * (uint64_t)hold;
  }
  a->st.ops = ops;
  a->st.t_end = now_ns();
  return NULL;
}

int main(int argc, char **argv) {
  args_init(argc, argv);
  int threads = (int)arg_int("threads", 2);
  size_t size = (size_t)arg_int("size", 8);
  int hold = (int)arg_int("hold", 4);
  long writes = (long)arg_int("writes", 100);
  long ms = (long)arg_int("ms", 200);
  args_done();
  if (threads < 1 || size < 1 || size > 64 || writes < 1 || hold < 1 || hold > MAX_HOLD) {
    fprintf(stderr, "threads, writes >= 1; size 1-64; hold 1-%d\n", MAX_HOLD);
    return 64;
  }

  json_begin("falseshare");
  arg_t *args = xcalloc64((size_t)threads, sizeof *args);
  for (int passive = 0; passive <= 1; passive++) {
    memset(args, 0, sizeof *args * (size_t)threads);
    for (int t = 0; t < threads; t++) {
      args[t].id = t;
      args[t].size = size;
      args[t].hold = hold;
      args[t].writes = writes;
    }
    for (int j = 0; passive && j < hold * threads; j++) { /* side by side, dealt out */
      void *o = xmalloc(size);
      memset(o, j, size);
      args[j % threads].handed[j / threads] = o;
    }
    uint64_t ops;
    double secs = run_timed(threads, worker, args, sizeof *args, ms, &ops);
    for (int t = 0; t < threads; t++) check_merge(&args[t].c);

    char label[64];
    snprintf(label, sizeof label, "%s, %zu B, %d thr", passive ? "passive" : "active", size, threads);
    json_case(label, threads, (long long)size);
    json_metric("mwrites_per_thr", (double)ops / secs / 1e6 / threads);
    json_case_end();
  }
  free(args);
  return bench_finish();
}
