/* churn.c: workload 6, thread churn.
 *
 * For ms milliseconds the main thread starts `conc` short-lived threads at a
 * time and waits for them. Each allocates `blocks` blocks (the mixed sizes of
 * the ring), tags them, hands half of them in one batch to one of
 * `survivors` long-lived threads, frees the other half itself, and exits.
 * The survivor checks and frees its batches, usually after the thread that
 * allocated them is gone, so the allocator must cope with memory whose owner
 * has exited.
 * Figures: short threads per second, M blocks/s, RSS after the first quarter
 * of the run and at the end (an allocator that leaks per thread keeps
 * growing), peak RSS.
 *
 *   churn ms=1000 conc=2 blocks=1000 survivors=1 */
#include "common.h"

typedef struct {
  _Alignas(64) pthread_t thread; /* a cache line of its own */
  pthread_mutex_t lock;
  pthread_cond_t wake;
  handoff_t *queue;
  int done;
  check_t c;
} survivor_t;

static survivor_t *g_surv;
static int g_nsurv;
static size_t g_blocks;

static void *survivor_main(void *v) {
  survivor_t *s = v;
  pthread_mutex_lock(&s->lock);
  for (;;) {
    while (!s->queue && !s->done) pthread_cond_wait(&s->wake, &s->lock);
    handoff_t *b = s->queue;
    s->queue = NULL;
    if (!b) break; /* done and drained */
    pthread_mutex_unlock(&s->lock);
    handoff_free(b, &s->c, NULL);
    pthread_mutex_lock(&s->lock);
  }
  pthread_mutex_unlock(&s->lock);
  return NULL;
}

typedef struct {
  _Alignas(64) uint64_t id; /* a cache line of its own */
  check_t c;
} short_arg_t;

static void *short_main(void *v) {
  short_arg_t *a = v;
  rng_t r = {a->id * 2654435761u + 1};
  size_t half = g_blocks / 2;
  handoff_t *b = handoff_new(half);
  void **mine = xmalloc((g_blocks - half) * sizeof(void *));
  for (size_t i = 0; i < g_blocks; i++) {
    size_t n = mixed_size(&r);
    void *p = xmalloc(n);
    stamp(p, n, sized_tag((a->id << 24) + i, n), &a->c);
    if (i < half)
      b->p[i] = p;
    else
      mine[i - half] = p;
  }
  survivor_t *s = &g_surv[a->id % (uint64_t)g_nsurv];
  pthread_mutex_lock(&s->lock);
  b->next = s->queue;
  s->queue = b;
  pthread_cond_signal(&s->wake);
  pthread_mutex_unlock(&s->lock);
  for (size_t i = 0; i < g_blocks - half; i++) {
    sized_ok(mine[i], &a->c);
    free(mine[i]);
  }
  free(mine);
  return NULL;
}

int main(int argc, char **argv) {
  args_init(argc, argv);
  long ms = (long)arg_int("ms", 1000);
  int conc = (int)arg_int("conc", ncpus());
  g_blocks = (size_t)arg_int("blocks", 1000);
  g_nsurv = (int)arg_int("survivors", 1);
  args_done();

  json_begin("churn");
  rss_peak_reset();
  g_surv = xcalloc64((size_t)g_nsurv, sizeof *g_surv);
  short_arg_t *args = xcalloc64((size_t)conc, sizeof *args);
  pthread_t *t = xcalloc64((size_t)conc, sizeof *t);
  for (int i = 0; i < g_nsurv; i++) {
    pthread_mutex_init(&g_surv[i].lock, NULL);
    pthread_cond_init(&g_surv[i].wake, NULL);
    spawn(&g_surv[i].thread, survivor_main, &g_surv[i]);
  }

  uint64_t t0 = now_ns(), quarter = t0 + (uint64_t)ms * 250000u, deadline = t0 + (uint64_t)ms * 1000000u;
  uint64_t started = 0;
  long rss_early = -1;
  while (now_ns() < deadline) {
    for (int j = 0; j < conc; j++) {
      args[j].id = ++started;
      spawn(&t[j], short_main, &args[j]);
    }
    for (int j = 0; j < conc; j++) {
      pthread_join(t[j], NULL);
      check_merge(&args[j].c);
      memset(&args[j].c, 0, sizeof args[j].c);
    }
    if (rss_early < 0 && now_ns() >= quarter) rss_early = rss_now_kb();
  }
  for (int i = 0; i < g_nsurv; i++) {
    pthread_mutex_lock(&g_surv[i].lock);
    g_surv[i].done = 1;
    pthread_cond_signal(&g_surv[i].wake);
    pthread_mutex_unlock(&g_surv[i].lock);
    pthread_join(g_surv[i].thread, NULL);
    check_merge(&g_surv[i].c);
  }
  double secs = (double)(now_ns() - t0) / 1e9;
  if (rss_early < 0) rss_early = rss_now_kb();

  char label[64];
  snprintf(label, sizeof label, "%d at a time, %zu blocks each", conc, g_blocks);
  json_case(label, conc, -1);
  json_metric("threads_per_s", (double)started / secs);
  json_metric("mops", (double)(started * g_blocks) / secs / 1e6);
  json_metric("rss_early_mb", (double)rss_early / 1024);
  json_metric("rss_end_mb", (double)rss_now_kb() / 1024);
  json_metric("peak_rss_mb", (double)rss_peak_kb() / 1024);
  json_metric("threads", (double)started);
  json_case_end();
  free(args);
  free(t);
  free(g_surv);
  return bench_finish();
}
