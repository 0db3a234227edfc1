/* brisk soak: many threads allocate random sizes over every tier (16 B to
 * 64 MiB), random alignments (up to 1 GiB), calloc, realloc up and down,
 * free their own blocks and other threads' blocks, and exit to be replaced
 * by new threads, for a given number of seconds. Every block carries a
 * pattern that is checked before it is freed or resized; any mismatch, a
 * calloc block that is not zero, a misaligned block or an inconsistent heap
 * ends the run with exit status 1. Run by scripts/soak.sh.
 *
 *   brisk_soak SECONDS [THREADS]          (default 6 threads) */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "brisk.h"

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)
#define LIVE_PER_THREAD 256
#define HANDOFF_SLOTS 1024

typedef struct block { unsigned char *p; size_t n; uint64_t seed; } block_t;

static _Atomic(int) failed;
static _Atomic(uint64_t) ops_done, threads_done;
static _Atomic(block_t *) handoff[HANDOFF_SLOTS]; /* blocks waiting for another thread to free them */
static double deadline;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t next(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static size_t below(uint64_t *s, size_t n) { return n ? (size_t)(next(s) % n) : 0; }

static void fail(const char *what, const block_t *b) {
  fprintf(stderr, "soak: %s: block %p of %zu bytes\n", what, (void *)b->p, b->n);
  atomic_store(&failed, 1);
}

/* The pattern covers the first and last 4 KiB: enough to catch a block
 * handed out twice, a lost or moved page, or a wrong realloc copy. */
static unsigned char pattern_byte(uint64_t seed, size_t i) { return (unsigned char)((seed >> (i % 56)) + i * 131); }

static void mark(const block_t *b) {
  size_t head = b->n < 4 * KiB ? b->n : 4 * KiB;
  for (size_t i = 0; i < head; i++) b->p[i] = pattern_byte(b->seed, i);
  for (size_t i = b->n > 4 * KiB ? b->n - 4 * KiB : head; i < b->n; i++) b->p[i] = pattern_byte(b->seed, i);
}

static int intact(const block_t *b, size_t upto) {
  size_t n = upto < b->n ? upto : b->n;
  size_t head = n < 4 * KiB ? n : 4 * KiB;
  for (size_t i = 0; i < head; i++)
    if (b->p[i] != pattern_byte(b->seed, i)) return 0;
  if (n == b->n)
    for (size_t i = n > 4 * KiB ? n - 4 * KiB : head; i < n; i++)
      if (b->p[i] != pattern_byte(b->seed, i)) return 0;
  return 1;
}

static size_t random_size(uint64_t *s) {
  size_t k = below(s, 10000);
  if (k < 7000) return below(s, 513);
  if (k < 9000) return 513 + below(s, 32 * KiB);
  if (k < 9800) return 32 * KiB + below(s, 1 * MiB);
  if (k < 9990) return 1 * MiB + below(s, 8 * MiB);
  return 8 * MiB + below(s, 56 * MiB);
}

static void release(block_t *b) {
  if (!intact(b, b->n)) fail("pattern broken before free", b);
  brisk_free(b->p);
  b->p = NULL;
}

/* One operation on slot i of the thread's live set. */
static void step(block_t *live, size_t i, uint64_t *s) {
  block_t *b = &live[i];
  if (b->p) {
    unsigned what = (unsigned)below(s, 10);
    if (what < 5) {
      release(b);
    } else if (what < 8) { /* resize: the kept prefix must survive */
      size_t m = random_size(s);
      block_t old = *b;
      if (!intact(&old, old.n)) fail("pattern broken before realloc", &old);
      unsigned char *q = brisk_realloc(b->p, m);
      if (!q) { if (m) fail("realloc failed", b); return; }
      b->p = q;
      size_t keep = old.n < m ? old.n : m;
      block_t kept = {q, keep, old.seed};
      if (keep && !intact(&kept, keep < 4 * KiB ? keep : 4 * KiB)) fail("realloc lost the contents", &kept);
      b->n = m;
      b->seed = next(s);
      mark(b);
    } else { /* hand it to whichever thread comes by */
      block_t *box = malloc(sizeof *box);
      if (!box) return;
      *box = *b;
      box = atomic_exchange(&handoff[below(s, HANDOFF_SLOTS)], box);
      b->p = NULL;
      if (box) {
        release(box);
        free(box);
      }
    }
    return;
  }
  unsigned what = (unsigned)below(s, 10);
  size_t n = random_size(s);
  if (what < 6) {
    b->p = brisk_malloc(n);
  } else if (what < 8) {
    b->p = brisk_calloc(1, n);
    for (size_t k = 0; b->p && k < n; k += (k < 8 * KiB ? 1 : 4093))
      if (b->p[k]) {
        block_t z = {b->p, n, 0};
        fail("calloc block is not zero", &z);
        break;
      }
  } else {
    unsigned shift = (unsigned)below(s, 100) < 97 ? (unsigned)below(s, 17) : 17 + (unsigned)below(s, 14);
    size_t align = (size_t)1 << shift;
    b->p = brisk_aligned_alloc(align, n);
    if (b->p && ((uintptr_t)b->p & (align - 1))) {
      block_t z = {b->p, n, 0};
      fail("aligned_alloc block is misaligned", &z);
    }
  }
  if (!b->p) {
    block_t z = {NULL, n, 0};
    fail("allocation failed", &z);
    return;
  }
  b->n = n;
  b->seed = next(s);
  mark(b);
}

static void *worker(void *arg) {
  uint64_t s = (uint64_t)(uintptr_t)arg * 0x9E3779B97F4A7C15ull | 1;
  block_t live[LIVE_PER_THREAD] = {{0}};
  size_t ops = 2000 + below(&s, 50000); /* then the thread exits and is replaced */
  for (size_t k = 0; k < ops && !atomic_load(&failed); k++) step(live, below(&s, LIVE_PER_THREAD), &s);
  /* Some blocks outlive their thread: the next threads free them. */
  for (size_t i = 0; i < LIVE_PER_THREAD; i++) {
    if (!live[i].p) continue;
    if (below(&s, 4) == 0) {
      block_t *box = malloc(sizeof *box);
      if (box) {
        *box = live[i];
        box = atomic_exchange(&handoff[below(&s, HANDOFF_SLOTS)], box);
        if (box) {
          release(box);
          free(box);
        }
        continue;
      }
    }
    release(&live[i]);
  }
  atomic_fetch_add(&ops_done, ops);
  atomic_fetch_add(&threads_done, 1);
  return NULL;
}

int main(int argc, char **argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 10;
  int threads = argc > 2 ? atoi(argv[2]) : 6;
  if (threads < 1 || threads > 256 || seconds <= 0) {
    fprintf(stderr, "usage: brisk_soak SECONDS [THREADS]\n");
    return 2;
  }
  deadline = now() + seconds;
  pthread_t *tid = calloc((size_t)threads, sizeof *tid);
  uint64_t spawned = 0;
  for (int i = 0; i < threads; i++) pthread_create(&tid[i], NULL, worker, (void *)(uintptr_t)++spawned);
  /* Thread churn: each worker that ends is replaced until time is up. */
  for (int i = 0; now() < deadline && !atomic_load(&failed); i = (i + 1) % threads) {
    pthread_join(tid[i], NULL);
    pthread_create(&tid[i], NULL, worker, (void *)(uintptr_t)++spawned);
  }
  for (int i = 0; i < threads; i++) pthread_join(tid[i], NULL);
  for (size_t i = 0; i < HANDOFF_SLOTS; i++) {
    block_t *box = atomic_exchange(&handoff[i], NULL);
    if (box) {
      release(box);
      free(box);
    }
  }
  free(tid);
  if (brisk_check_heap() != BRISK_CHECK_OK) {
    fprintf(stderr, "soak: heap check: %s\n", brisk_check_message());
    atomic_store(&failed, 1);
  }
  brisk_collect();
  printf("soak: %.0f s, %llu threads, %llu operations, %zu bytes mapped at the end: %s\n", seconds,
         (unsigned long long)atomic_load(&threads_done), (unsigned long long)atomic_load(&ops_done),
         brisk_mapped_bytes(), atomic_load(&failed) ? "FAILED" : "clean");
  return atomic_load(&failed) ? 1 : 0;
}
