/* server.c: a server-style producer/consumer (a thread pool serving requests).
 *
 * `acceptors` threads (2) build requests until the timed window ends: a
 * request object, a body of 64 B-16 KiB (log-uniform, every byte written) and
 * 1-8 header strings of 16-256 B, pushed in batches of 16 requests (a block
 * too) to a bounded queue (`queue`, 32 batches; a full queue makes the
 * acceptor wait, as a server stops reading its sockets). `workers` threads
 * (4) take a batch and for each request read and check every byte of it,
 * allocate 1-4 scratch buffers (32 B-4 KiB, freed at once) and a response of
 * 64 B-16 KiB (written in full), and free the request; the responses go in a
 * batch to a second queue. One writer thread checks and frees the responses.
 * So nearly every block is freed by a thread that did not allocate it.
 * Queues are a mutex and two condition variables each; batches keep the
 * threads (7 on 2 cores) from spending the run waking each other.
 * Figures: k requests/s (completed by the writer), peak RSS (VmHWM),
 * mallocs per request (about 10).
 *
 *   server acceptors=2 workers=4 queue=32 ms=1000 */
#include "common.h"

typedef struct {
  pthread_mutex_t lock;
  pthread_cond_t not_empty, not_full;
  void **slot;
  size_t cap, head, count;
  int closed;
} queue_t;

static void q_init(queue_t *q, size_t cap) {
  pthread_mutex_init(&q->lock, NULL);
  pthread_cond_init(&q->not_empty, NULL);
  pthread_cond_init(&q->not_full, NULL);
  q->slot = xmalloc(cap * sizeof(void *));
  q->cap = cap;
}

static void q_push(queue_t *q, void *p) {
  pthread_mutex_lock(&q->lock);
  while (q->count == q->cap) pthread_cond_wait(&q->not_full, &q->lock);
  q->slot[(q->head + q->count++) % q->cap] = p;
  pthread_cond_signal(&q->not_empty);
  pthread_mutex_unlock(&q->lock);
}

/* NULL once the queue is closed and empty. */
static void *q_pop(queue_t *q) {
  pthread_mutex_lock(&q->lock);
  while (!q->count && !q->closed) pthread_cond_wait(&q->not_empty, &q->lock);
  void *p = NULL;
  if (q->count) {
    p = q->slot[q->head];
    q->head = (q->head + 1) % q->cap;
    q->count--;
    pthread_cond_signal(&q->not_full);
  }
  pthread_mutex_unlock(&q->lock);
  return p;
}

static void q_close(queue_t *q) {
  pthread_mutex_lock(&q->lock);
  q->closed = 1;
  pthread_cond_broadcast(&q->not_empty);
  pthread_mutex_unlock(&q->lock);
}

#define MAX_HEADERS 8
#define BATCH 16 /* requests or responses per queue entry */

typedef struct {
  int n;
  void *p[BATCH];
} batch_t;

typedef struct {
  uint64_t tag; /* sized_tag of the request object itself */
  unsigned char *body;
  int nheaders;
  char *header[MAX_HEADERS];
} request_t;

typedef struct {
  wstat_t st;
  int id;
  uint64_t mallocs;
  check_t c;
} arg_t;

static queue_t g_requests, g_responses;
static int g_acceptors, g_workers;
static atomic_int g_acceptors_left, g_workers_left;

/* log-uniform in [lo, 2^k * lo] */
static size_t log_size(rng_t *r, size_t lo, unsigned octaves) {
  size_t base = lo << (rng_next(r) % octaves);
  return base + rng_next(r) % base;
}

/* A block whose tag carries its size, written in full. */
static void *sized_block(size_t n, uint64_t seq, arg_t *a) {
  void *p = xmalloc(n);
  fill(p, n, sized_tag(seq, n), &a->c);
  a->mallocs++;
  return p;
}

static void free_sized(void *p, check_t *c) {
  uint64_t head;
  memcpy(&head, p, 8);
  fill_ok(p, (uint32_t)head, head, c);
  free(p);
}

static batch_t *new_batch(arg_t *a) {
  batch_t *b = xmalloc(sizeof *b);
  b->n = 0;
  a->mallocs++;
  return b;
}

static void accept_loop(arg_t *a) {
  rng_t r = {(uint64_t)a->id * 7349 + 1};
  uint64_t seq = (uint64_t)(a->id + 1) << 40;
  while (!stopped()) {
    batch_t *b = new_batch(a);
    while (b->n < BATCH) {
      request_t *q = xmalloc(sizeof *q);
      q->tag = sized_tag(++seq, sizeof *q);
      a->c.written += q->tag;
      q->body = sized_block(log_size(&r, 64, 8), ++seq, a); /* 64 B-16 KiB */
      q->nheaders = 1 + (int)(rng_next(&r) % MAX_HEADERS);
      for (int i = 0; i < q->nheaders; i++)
        q->header[i] = sized_block(rng_range(&r, 16, 256), ++seq, a);
      a->mallocs++;
      b->p[b->n++] = q;
    }
    q_push(&g_requests, b);
  }
  if (atomic_fetch_sub(&g_acceptors_left, 1) == 1) q_close(&g_requests);
}

/* One request: its response, the request freed. */
static void *serve(arg_t *a, request_t *q, rng_t *r, uint64_t *seq) {
  int scratch = 1 + (int)(rng_next(r) % 4);
  for (int i = 0; i < scratch; i++) free_sized(sized_block(log_size(r, 32, 7), ++*seq, a), &a->c);
  void *resp = sized_block(log_size(r, 64, 8), ++*seq, a);
  for (int i = 0; i < q->nheaders; i++) free_sized(q->header[i], &a->c);
  free_sized(q->body, &a->c);
  if ((uint32_t)q->tag != sizeof *q)
    bench_error("request %p: tag %016llx", (void *)q, (unsigned long long)q->tag);
  else
    a->c.read += q->tag;
  free(q);
  return resp;
}

static void work_loop(arg_t *a) {
  rng_t r = {(uint64_t)a->id * 7919 + 2};
  uint64_t seq = (uint64_t)(a->id + 1) << 40;
  batch_t *in;
  while ((in = q_pop(&g_requests))) {
    batch_t *out = new_batch(a);
    for (int i = 0; i < in->n; i++) out->p[out->n++] = serve(a, in->p[i], &r, &seq);
    free(in);
    q_push(&g_responses, out);
  }
  if (atomic_fetch_sub(&g_workers_left, 1) == 1) q_close(&g_responses);
}

static void write_loop(arg_t *a) {
  batch_t *b;
  uint64_t done = 0;
  while ((b = q_pop(&g_responses))) {
    for (int i = 0; i < b->n; i++) free_sized(b->p[i], &a->c);
    done += (uint64_t)b->n;
    free(b);
  }
  a->st.ops = done;
}

/* ids: acceptors first, then workers, then the writer */
static void *thread_main(void *v) {
  arg_t *a = v;
  gate();
  if (a->id < g_acceptors)
    accept_loop(a);
  else if (a->id < g_acceptors + g_workers)
    work_loop(a);
  else
    write_loop(a);
  a->st.t_end = now_ns();
  return NULL;
}

int main(int argc, char **argv) {
  args_init(argc, argv);
  g_acceptors = (int)arg_int("acceptors", 2);
  g_workers = (int)arg_int("workers", 4);
  size_t cap = (size_t)arg_int("queue", 32);
  long ms = (long)arg_int("ms", 1000);
  args_done();
  if (g_acceptors < 1 || g_workers < 1 || cap < 1) {
    fprintf(stderr, "acceptors, workers, queue: at least 1\n");
    return 64;
  }

  json_begin("server");
  rss_peak_reset();
  q_init(&g_requests, cap);
  q_init(&g_responses, cap);
  atomic_store(&g_acceptors_left, g_acceptors);
  atomic_store(&g_workers_left, g_workers);
  int n = g_acceptors + g_workers + 1;
  arg_t *args = xcalloc64((size_t)n, sizeof *args);
  for (int i = 0; i < n; i++) args[i].id = i;
  uint64_t done, mallocs = 0;
  double secs = run_timed(n, thread_main, args, sizeof *args, ms, &done);
  for (int i = 0; i < n; i++) {
    check_merge(&args[i].c);
    mallocs += args[i].mallocs;
  }
  char label[64];
  snprintf(label, sizeof label, "%d acceptors, %d workers", g_acceptors, g_workers);
  json_case(label, n, -1);
  json_metric("kreqs", (double)done / secs / 1e3);
  json_metric("peak_rss_mb", (double)rss_peak_kb() / 1024);
  json_metric("mallocs_per_req", done ? (double)mallocs / (double)done : 0);
  json_case_end();
  free(args);
  free(g_requests.slot);
  free(g_responses.slot);
  return bench_finish();
}
