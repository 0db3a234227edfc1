/* The replay: one thread per thread of the trace, each making its calls in
 * its order. A thread that frees (or reallocates) a block another thread
 * made waits until that block exists. Threads start in the order their
 * first calls came, and a thread whose last call came before another's
 * first is joined before that one starts, so threads come and go as they
 * did. Every figure is the bench suite's (bench/common.h, bench/latency.h):
 * time, RSS over the baseline of the loaded trace, page faults, one call
 * in 16 timed. */
#include "replay.h"
#include "latency.h"

#include <malloc.h>
#include <sched.h>

#define NO_POINTER ((uintptr_t)1) /* the allocator returned NULL */

/* How far (in calls of the trace) a thread may run ahead of the slowest:
 * the trace's interleaving, within a window. Without it a thread that made
 * blocks for another to free would make all of them first, and the heap
 * would peak far above the program's. */
typedef struct {
  _Atomic uint64_t next; /* the index of the thread's next call; UINT64_MAX once done */
  char pad[56];
} progress;

typedef struct {
  pthread_t id;
  const trace *t;
  progress *progress;
  uint64_t window, bound; /* runs calls up to bound without looking at the others */
  uint32_t thread;
  _Atomic uintptr_t *blocks;
  uint64_t *asked; /* what each of the thread's ops asked, in its order */
  size_t asked_cap;
  size_t ran;
  uint64_t calls, allocs, waits, failed, extra_frees;
  hist_t malloc_hist, free_hist;
} replayer;

/* A wait that lasts this long is a replay that cannot go on (a driver
 * bug: the maker of a block never made it): fail, do not hang. */
#define STUCK_NS (60 * 1000000000ull)

/* Yields first: on a machine with fewer cores than threads the thread
 * waited for may be waiting for this core. */
static void wait_a_little(unsigned spins, uint64_t since, const char *what) {
  if (spins < 100) {
    sched_yield();
    return;
  }
  nanosleep(&(struct timespec){0, 20000}, NULL);
  if ((spins & 1023) == 0 && now_ns() - since > STUCK_NS) {
    fprintf(stderr, "CHECK FAILED: the replay is stuck: %s for 60 s\n", what);
    exit(2);
  }
}

static void *block_pointer(replayer *r, const trace_op *op) {
  if (op->block == TRACE_NO_BLOCK) return NULL;
  uintptr_t v = atomic_load_explicit(&r->blocks[op->block], memory_order_acquire);
  if (!v && (op->mark & OP_WAIT)) {
    r->waits++;
    uint64_t since = now_ns();
    for (unsigned spins = 0; !(v = atomic_load_explicit(&r->blocks[op->block], memory_order_acquire)); spins++)
      wait_a_little(spins, since, "a thread waited for a block another thread makes");
  }
  return v == NO_POINTER ? NULL : (void *)v;
}

/* A program writes what it allocates: one byte a page, so that RSS and
 * page faults count what it would (not timed). */
static void touch(void *p, uint64_t n) {
  volatile char *c = p;
  if (!p || !n) return;
  for (uint64_t i = 0; i < n; i += 4096) c[i] = 1;
  c[n - 1] = 1;
}

static void made(replayer *r, uint32_t block, void *p) {
  if (block == TRACE_NO_BLOCK) {
    if (p) r->extra_frees++, free(p); /* the trace's call failed; this one did not */
    return;
  }
  if (!p) r->failed++;
  atomic_store_explicit(&r->blocks[block], p ? (uintptr_t)p : NO_POINTER, memory_order_release);
}

static void *allocate(const trace_op *op) {
  void *p = NULL;
  size_t align = (size_t)op->aux, size = (size_t)op->size;
  switch (op->kind) {
  case TK_MALLOC: return malloc(size);
  case TK_CALLOC: return calloc((size_t)op->aux, size);
  case TK_POSIX_MEMALIGN: return posix_memalign(&p, align, size) ? NULL : p;
  case TK_ALIGNED_ALLOC: return aligned_alloc(align, size);
  case TK_MEMALIGN: return memalign(align, size);
  case TK_VALLOC: return valloc(size);
  case TK_PVALLOC: return pvalloc(size);
  default:
    return replay_new(op->kind == TK_NEW_ARRAY, (op->flags & TF_NOTHROW) != 0, size,
                      (op->flags & TF_ALIGNED) ? align : 0);
  }
}

static void run_op(replayer *r, const trace_op *op) {
  int timed = (++r->calls & 15) == 0;
  uint64_t t0 = 0;
  void *p;
  if (trace_kind_allocates(op->kind)) {
    if (timed) t0 = ticks();
    p = allocate(op);
    if (timed) hist_add(&r->malloc_hist, ticks() - t0);
    r->allocs++;
    touch(p, trace_op_bytes(op));
    made(r, op->block, p);
    return;
  }
  void *old = (op->mark & OP_SHARED) ? NULL : block_pointer(r, op);
  switch (op->kind) {
  case TK_REALLOC:
  case TK_REALLOCARRAY:
    p = op->kind == TK_REALLOC ? realloc(old, (size_t)op->size)
                               : reallocarray(old, (size_t)op->aux, (size_t)op->size);
    r->allocs++;
    touch(p, trace_op_bytes(op));
    if (op->block2 != TRACE_NO_BLOCK) made(r, op->block2, p);
    else if (p && trace_op_bytes(op) == 0)
      r->extra_frees++, free(p); /* glibc's realloc(p, 0) frees; some allocators hand out a block */
    else if (p && op->block != TRACE_NO_BLOCK)
      atomic_store_explicit(&r->blocks[op->block], (uintptr_t)p, memory_order_release);
    return;
  case TK_USABLE_SIZE: {
    volatile size_t n = malloc_usable_size(old);
    (void)n;
    return;
  }
  default: break;
  }
  if (timed) t0 = ticks();
  if (op->kind == TK_FREE) free(old);
  else
    replay_delete(op->kind == TK_DELETE_ARRAY, old, (op->flags & TF_SIZED) != 0, (size_t)op->size,
                  (op->flags & TF_ALIGNED) ? (size_t)op->aux : 0);
  if (timed) hist_add(&r->free_hist, ticks() - t0);
}

/* Waits until every other thread is within the window of call `at`. The
 * thread furthest behind never waits here, so all go on. */
static void keep_pace(replayer *r, uint64_t at) {
  uint64_t since = now_ns();
  for (unsigned spins = 0;; spins++) {
    uint64_t least = UINT64_MAX;
    for (uint32_t i = 0; i < r->t->thread_count; i++) {
      uint64_t n = atomic_load_explicit(&r->progress[i].next, memory_order_relaxed);
      if (i != r->thread && n < least) least = n;
    }
    if (least == UINT64_MAX || least + r->window >= at) {
      r->bound = least == UINT64_MAX ? UINT64_MAX : least + r->window;
      return;
    }
    if (!spins) r->waits++;
    wait_a_little(spins, since, "a thread waited for the others to keep pace");
  }
}

static void *replay_thread(void *arg) {
  replayer *r = arg;
  const trace *t = r->t;
  size_t from = t->thread_first[r->thread], to = t->thread_first[r->thread + 1];
  for (size_t k = from; k < to; k++) {
    uint32_t at = t->thread_ops[k];
    const trace_op *op = &t->ops[at];
    atomic_store_explicit(&r->progress[r->thread].next, at, memory_order_relaxed);
    if (r->window && at > r->bound) keep_pace(r, at);
    run_op(r, op);
    r->asked[k - from] = trace_op_bytes(op);
    r->ran = k - from + 1;
  }
  atomic_store_explicit(&r->progress[r->thread].next, UINT64_MAX, memory_order_relaxed);
  return NULL;
}

/* ---- the heap over time ------------------------------------------------------- */

typedef struct {
  pthread_t id;
  atomic_int stop;
  long every_ms, baseline_kb, page_kb;
  uint64_t t0;
  uint32_t *ms, *kb;
  size_t n, ms_cap, kb_cap;
} sampler;

static long resident_kb(long page_kb) {
  char buf[128];
  long size = 0, res = 0;
  int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  buf[n > 0 ? n : 0] = 0;
  return sscanf(buf, "%ld %ld", &size, &res) == 2 ? res * page_kb : 0;
}

static void *sample_heap(void *arg) {
  sampler *s = arg;
  while (!atomic_load(&s->stop)) {
    if (!trace_array_grow(&s->ms, &s->ms_cap, sizeof(uint32_t), s->n + 1) &&
        !trace_array_grow(&s->kb, &s->kb_cap, sizeof(uint32_t), s->n + 1)) {
      long kb = resident_kb(s->page_kb) - s->baseline_kb;
      s->ms[s->n] = (uint32_t)((now_ns() - s->t0) / 1000000);
      s->kb[s->n++] = (uint32_t)(kb > 0 ? kb : 0);
    }
    sleep_ms(s->every_ms);
  }
  return NULL;
}

static void write_series(const sampler *s, const char *path, double secs, long final_kb) {
  FILE *f = fopen(path, "w");
  if (!f) return;
  fprintf(f, "# ms heap_kb (RSS over the loaded trace's)\n");
  for (size_t i = 0; i < s->n; i++) fprintf(f, "%u %u\n", s->ms[i], s->kb[i]);
  fprintf(f, "%.0f %ld\n", secs * 1000, final_kb);
  fclose(f);
}

/* An exact count (json_metric prints 6 digits). */
static void json_count(const char *key, uint64_t v) {
  printf("%s\"%s\":%llu", g_json_metrics++ ? "," : "", key, (unsigned long long)v);
}

/* ---- the run ------------------------------------------------------------------- */

static uint64_t cpu_us(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000u +
      (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

static int later_end(const void *a, const void *b, void *arg) {
  const trace *t = arg;
  size_t ea = t->thread_ops[t->thread_first[*(const uint32_t *)a + 1] - 1];
  size_t eb = t->thread_ops[t->thread_first[*(const uint32_t *)b + 1] - 1];
  return ea < eb ? -1 : ea > eb;
}

/* Starts every thread in the order of its first call, after joining those
 * whose last call came before it (by_end: the threads by their last call). */
static void run_threads(const trace *t, replayer *rs, const uint32_t *by_end) {
  uint32_t joined = 0;
  for (uint32_t i = 0; i < t->thread_count; i++) {
    size_t first = t->thread_ops[t->thread_first[i]];
    while (joined < t->thread_count && t->thread_ops[t->thread_first[by_end[joined] + 1] - 1] < first)
      pthread_join(rs[by_end[joined++]].id, NULL);
    spawn(&rs[i].id, replay_thread, &rs[i]);
  }
  while (joined < t->thread_count) pthread_join(rs[by_end[joined++]].id, NULL);
}

int replay_run(const trace *t, const char *name, const char *series_path, long sample_ms, uint64_t window) {
  size_t blocks_cap = 0, rs_cap = 0, order_cap = 0, asked_cap = 0, progress_cap = 0;
  progress *pace = NULL;
  _Atomic uintptr_t *blocks = NULL;
  replayer *rs = NULL;
  uint32_t *by_end = NULL;
  uint64_t *asked = NULL;
  if (trace_array_grow(&blocks, &blocks_cap, sizeof *blocks, t->block_count + 1) ||
      trace_array_grow(&rs, &rs_cap, sizeof *rs, t->thread_count + 1) ||
      trace_array_grow(&by_end, &order_cap, sizeof *by_end, t->thread_count + 1) ||
      trace_array_grow(&asked, &asked_cap, sizeof *asked, t->op_count + 1) ||
      trace_array_grow(&pace, &progress_cap, sizeof *pace, t->thread_count + 1))
    die("cannot map the replay's tables");
  memset(rs, 0, (t->thread_count + 1) * sizeof *rs);
  memset((void *)blocks, 0, (t->block_count + 1) * sizeof *blocks);
  for (uint32_t i = 0; i < t->thread_count; i++) {
    size_t n = t->thread_first[i + 1] - t->thread_first[i];
    rs[i] = (replayer){.t = t, .thread = i, .blocks = blocks, .progress = pace, .window = window};
    atomic_store(&pace[i].next, t->thread_ops[t->thread_first[i]]);
    if (trace_array_grow(&rs[i].asked, &rs[i].asked_cap, sizeof(uint64_t), n + 1))
      die("cannot map a thread's table");
  }
  for (uint32_t i = 0; i < t->thread_count; i++) by_end[i] = i;
  qsort_r(by_end, t->thread_count, sizeof(uint32_t), later_end, (void *)t);
  ticks_to_ns(), ticks_quantum(), ticks_overhead(); /* measured before anything runs */

  json_begin("replay");
  long page_kb = sysconf(_SC_PAGESIZE) / 1024;
  sampler s = {.every_ms = sample_ms > 0 ? sample_ms : 2, .page_kb = page_kb};
  rss_peak_reset();
  s.baseline_kb = resident_kb(page_kb);
  long faults0 = minor_faults();
  uint64_t cpu0 = cpu_us();
  s.t0 = now_ns();
  spawn(&s.id, sample_heap, &s);
  run_threads(t, rs, by_end);
  double secs = (double)(now_ns() - s.t0) / 1e9;
  uint64_t cpu = cpu_us() - cpu0;
  long faults = minor_faults() - faults0;
  long final_kb = resident_kb(page_kb) - s.baseline_kb, peak_kb = rss_peak_kb() - s.baseline_kb;
  atomic_store(&s.stop, 1);
  pthread_join(s.id, NULL);
  if (series_path) write_series(&s, series_path, secs, final_kb);

  /* Faithful: every call made, each asking what the trace says, so that
   * live bytes in the trace's order peak where the trace's do. */
  hist_t mh = {0}, fh = {0};
  uint64_t calls = 0, allocs = 0, waits = 0, failed = 0, extra = 0;
  for (size_t i = 0; i < t->op_count; i++) asked[i] = TRACE_NOT_RUN;
  for (uint32_t i = 0; i < t->thread_count; i++) {
    replayer *r = &rs[i];
    for (size_t k = 0; k < r->ran; k++) asked[t->thread_ops[t->thread_first[i] + k]] = r->asked[k];
    calls += r->calls, allocs += r->allocs, waits += r->waits, failed += r->failed, extra += r->extra_frees;
    hist_merge(&mh, &r->malloc_hist);
    hist_merge(&fh, &r->free_hist);
  }
  trace_live live;
  if (trace_live_walk(t, asked, &live, NULL, 0)) die("cannot map the live-bytes table");
  int faithful = calls == t->op_count && live.peak == t->peak_live_bytes && live.final == t->final_live_bytes;
  if (!faithful)
    bench_error("the replay is not faithful: %llu calls of %zu, peak live %llu B (trace: %llu B)",
                (unsigned long long)calls, t->op_count, (unsigned long long)live.peak,
                (unsigned long long)t->peak_live_bytes);

  json_case(name, (int)t->thread_count, -1);
  json_metric("secs", secs);
  json_metric("cpu_secs", (double)cpu / 1e6);
  json_metric("peak_rss_mb", (double)(peak_kb > 0 ? peak_kb : 0) / 1024);
  json_metric("final_rss_mb", (double)(final_kb > 0 ? final_kb : 0) / 1024);
  json_count("faults", (uint64_t)faults);
  json_metric("malloc_p50", hist_ns(&mh, 0.5));
  json_metric("malloc_p99", hist_ns(&mh, 0.99));
  json_metric("malloc_p999", hist_ns(&mh, 0.999));
  json_metric("malloc_max", hist_ns(&mh, 1));
  json_metric("malloc_mean", hist_mean_ns(&mh));
  json_metric("free_p50", hist_ns(&fh, 0.5));
  json_metric("free_p99", hist_ns(&fh, 0.99));
  json_metric("free_mean", hist_mean_ns(&fh));
  json_count("calls", calls);
  json_count("calls_expected", t->op_count);
  json_count("mallocs", allocs);
  json_count("peak_live_bytes", live.peak);
  json_count("peak_live_bytes_expected", t->peak_live_bytes);
  json_count("final_live_bytes", live.final);
  json_count("faithful", (uint64_t)faithful);
  json_count("failed", failed);
  json_count("waits", waits);
  json_count("extra_frees", extra);
  json_case_end();
  return bench_finish();
}
