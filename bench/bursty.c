/* bursty.c: bursty cross-thread transfer, after mimalloc-bench's xmalloc-test
 * and the sh6bench/sh8bench pattern.
 *
 * `threads` thread slots run `rounds` rounds each, all at once. A round:
 *   1. check and free what other slots handed over (the slot's inbox, a
 *      lock-free stack of batches; a sender that finds 8 batches waiting
 *      frees them itself, so a lagging slot cannot pile memory up);
 *   2. allocate a burst of `burst` blocks of mixed sizes (70% 16-256 B,
 *      25% 256 B-8 KiB, 5% 8-64 KiB), each tagged with its size;
 *   3. keep% of them replace random blocks of the slot's kept set (4 rounds'
 *      worth of kept blocks; the ones replaced are checked and freed, so a
 *      kept block lives a few rounds), give% go in one batch to another slot's
 *      inbox, and the rest are checked and freed in random order.
 * generations=G: each slot's rounds are split among G threads in turn: a
 * thread runs its share and exits, and a new one takes over its kept set and
 * inbox. Same work for any G; only the threads' lives differ, so memory a
 * dead thread held must be reused or given back, or RSS grows with G.
 * The run is a fixed amount of work. Figures: seconds, M blocks/s (blocks
 * allocated), peak RSS (VmHWM), RSS at the end (every block freed, every
 * thread joined), and the peak of the bytes live (sampled every ms by the main
 * thread: what an allocator with no overhead at all would hold).
 *
 *   bursty threads=8 rounds=1000 burst=200 keep=25 give=50 generations=200 */
#include "common.h"

typedef struct {
  _Alignas(64) _Atomic(handoff_t *) inbox; /* pushed by others, taken whole */
  atomic_long pending;                   /* batches in the inbox, about */
  _Alignas(64) int id;
  long rounds_left, per_gen;
  rng_t r;
  uint64_t seq, blocks, gens;
  _Atomic int64_t bytes; /* allocated minus freed by this slot (summed: live) */
  size_t nkept;
  void **kept;
  check_t c;
} slot_t;

static slot_t *g_slot;
static int g_threads;
static size_t g_burst, g_keep, g_give;

/* 70% 16-256 B, 25% 256 B-8 KiB, 5% 8-64 KiB */
static size_t burst_size(rng_t *r) {
  uint64_t pick = rng_next(r) % 100;
  if (pick < 70) return rng_range(r, 16, 256);
  if (pick < 95) return rng_range(r, 257, 8 * KiB);
  return rng_range(r, 8 * KiB + 1, 64 * KiB);
}

static atomic_int g_chains_done;

static void count_bytes(slot_t *s, int64_t n) {
  atomic_store_explicit(&s->bytes, atomic_load_explicit(&s->bytes, memory_order_relaxed) + n,
                        memory_order_relaxed);
}

/* s: the slot whose thread frees it (its byte count goes down). */
static void free_checked(slot_t *s, void *p, check_t *c) {
  uint64_t head;
  memcpy(&head, p, 8);
  if (sized_ok(p, c)) count_bytes(s, -(int64_t)(uint32_t)head);
  free(p);
}

/* Check and free all of s's inbox, as slot `by` (its thread does it). */
static void drain(slot_t *s, slot_t *by) {
  long n;
  handoff_t *b = atomic_exchange_explicit(&s->inbox, NULL, memory_order_acquire);
  count_bytes(by, -(int64_t)handoff_free(b, &by->c, &n));
  atomic_fetch_sub_explicit(&s->pending, n, memory_order_relaxed);
}

/* Into to's inbox. A slot that lags (descheduled, or done with its rounds)
 * must not pile up memory without bound: past INBOX_MAX batches the sender
 * empties the inbox itself (still a thread that did not allocate them). */
#define INBOX_MAX 8
static void push(slot_t *to, handoff_t *b, slot_t *by) {
  if (atomic_fetch_add_explicit(&to->pending, 1, memory_order_relaxed) >= INBOX_MAX) drain(to, by);
  handoff_t *head = atomic_load_explicit(&to->inbox, memory_order_relaxed);
  do
    b->next = head;
  while (!atomic_compare_exchange_weak_explicit(&to->inbox, &head, b, memory_order_release,
                                                memory_order_relaxed));
}

static void round_once(slot_t *s, void **burst) {
  drain(s, s);
  size_t n = g_burst;
  for (size_t i = 0; i < n; i++) {
    size_t len = burst_size(&s->r);
    burst[i] = xmalloc(len);
    stamp(burst[i], len, sized_tag(++s->seq, len), &s->c);
    count_bytes(s, (int64_t)len);
  }
  s->blocks += n;
  size_t i = 0;
  for (; i < g_keep; i++) { /* kept: replaces a random older one */
    size_t k = rng_next(&s->r) % s->nkept;
    if (s->kept[k]) free_checked(s, s->kept[k], &s->c);
    s->kept[k] = burst[i];
  }
  if (g_give) {
    handoff_t *b = handoff_new(g_give);
    memcpy(b->p, burst + i, g_give * sizeof(void *));
    i += g_give;
    int to = g_threads > 1 ? (int)((s->id + 1 + rng_next(&s->r) % (uint64_t)(g_threads - 1)) %
                                   (uint64_t)g_threads)
                           : s->id;
    push(&g_slot[to], b, s);
  }
  for (size_t j = n; j > i + 1; j--) { /* the rest: freed in random order */
    size_t k = i + rng_next(&s->r) % (j - i);
    void *t = burst[k];
    burst[k] = burst[j - 1];
    burst[j - 1] = t;
  }
  for (; i < n; i++) free_checked(s, burst[i], &s->c);
}

/* One generation: its share of the slot's rounds, then it exits. */
static void *generation(void *v) {
  slot_t *s = v;
  void **burst = xmalloc(g_burst * sizeof *burst);
  for (long k = 0; k < s->per_gen && s->rounds_left > 0; k++, s->rounds_left--)
    round_once(s, burst);
  free(burst);
  return NULL;
}

/* A slot: its generations, one after the other. */
static void *chain(void *v) {
  slot_t *s = v;
  while (s->rounds_left > 0) {
    pthread_t t;
    spawn(&t, generation, s);
    pthread_join(t, NULL);
    s->gens++;
  }
  atomic_fetch_add(&g_chains_done, 1);
  return NULL;
}

int main(int argc, char **argv) {
  args_init(argc, argv);
  g_threads = (int)arg_int("threads", 8);
  long rounds = (long)arg_int("rounds", 1000);
  long gens = (long)arg_int("generations", 1);
  g_burst = (size_t)arg_int("burst", 200);
  long keep = (long)arg_int("keep", 25), give = (long)arg_int("give", 50);
  args_done();
  if (g_threads < 1 || rounds < 1 || gens < 1 || gens > rounds || g_burst < 1 || keep < 0 ||
      give < 0 || keep + give > 100) {
    fprintf(stderr, "need threads, rounds, burst >= 1, 1 <= generations <= rounds, "
                    "keep + give <= 100\n");
    return 64;
  }
  g_keep = g_burst * (size_t)keep / 100;
  g_give = g_burst * (size_t)give / 100;

  json_begin("bursty");
  rss_peak_reset();
  g_slot = xcalloc64((size_t)g_threads, sizeof *g_slot);
  pthread_t *t = xmalloc(sizeof *t * (size_t)g_threads);
  for (int i = 0; i < g_threads; i++) {
    slot_t *s = &g_slot[i];
    s->id = i;
    s->r.s = (uint64_t)i * 104729 + 11;
    s->seq = (uint64_t)(i + 1) << 40;
    s->rounds_left = rounds;
    s->per_gen = (rounds + gens - 1) / gens;
    s->nkept = g_keep ? 4 * g_keep : 1;
    s->kept = calloc(s->nkept, sizeof(void *));
    if (!s->kept) die("calloc");
  }
  uint64_t t0 = now_ns();
  for (int i = 0; i < g_threads; i++) spawn(&t[i], chain, &g_slot[i]);
  int64_t live_peak = 0;
  while (atomic_load(&g_chains_done) < g_threads) { /* sample the bytes live */
    int64_t live = 0;
    for (int i = 0; i < g_threads; i++) live += atomic_load_explicit(&g_slot[i].bytes, memory_order_relaxed);
    if (live > live_peak) live_peak = live;
    sleep_ms(1);
  }
  for (int i = 0; i < g_threads; i++) pthread_join(t[i], NULL);
  double secs = (double)(now_ns() - t0) / 1e9;
  long peak_kb = rss_peak_kb();

  uint64_t blocks = 0, started = 0;
  for (int i = 0; i < g_threads; i++) { /* what is left: inboxes and kept sets */
    slot_t *s = &g_slot[i];
    drain(s, s);
    for (size_t k = 0; k < s->nkept; k++)
      if (s->kept[k]) free_checked(s, s->kept[k], &s->c);
    free(s->kept);
    check_merge(&s->c);
    blocks += s->blocks;
    started += s->gens;
  }
  char label[64];
  snprintf(label, sizeof label, "%d thr, %ld generation%s", g_threads, gens, gens > 1 ? "s" : "");
  json_case(label, g_threads, -1);
  json_metric("secs", secs);
  json_metric("mops", (double)blocks / secs / 1e6);
  json_metric("peak_rss_mb", (double)peak_kb / 1024);
  json_metric("rss_end_mb", (double)rss_now_kb() / 1024);
  json_metric("live_peak_mb", (double)live_peak / (double)MiB);
  json_metric("threads_started", (double)started);
  json_case_end();
  free(t);
  free(g_slot);
  return bench_finish();
}
