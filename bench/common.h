/* common.h: the few helpers every brisk benchmark program shares.
 *
 *   time        now_ns(), sleep_ms() (single calls: ticks() in latency.h)
 *   randomness  rng_t (splitmix64): the same seed gives every allocator the
 *               same sequence of sizes and slots
 *   arguments   key=value pairs: arg_int("threads", 1), arg_list("sizes", ...)
 *   memory      rss_now_kb() (/proc/self/statm), rss_peak_kb() (VmHWM),
 *               rss_peak_reset(), minor_faults()
 *   checking    stamp()/stamp_ok() tag a block's first and last bytes,
 *               fill()/fill_ok() write and verify every byte; check_t keeps
 *               the checksum of what was written against what was read back
 *   blocks      slots_t: the blocks a thread holds; handoff_t: blocks handed
 *               to another thread in batches
 *   threads     run_timed(): start workers together, stop them after N ms
 *   output      json_*(): one JSON line on stdout, printed by bench_finish()
 *
 * Programs use only plain malloc/free so that LD_PRELOAD picks the allocator,
 * and are built with -fno-builtin-malloc (see Makefile) so the compiler cannot
 * remove a malloc/free pair. */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

/* ---- failure ---------------------------------------------------------- */

static atomic_long g_errors;

/* A wrong result: counted, the first few printed; the program exits 2. */
static void bench_error(const char *fmt, ...) {
  if (atomic_fetch_add(&g_errors, 1) < 10) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "CHECK FAILED: %s\n", msg); /* one write: threads do not interleave */
  }
}

/* Out of memory or a broken setup: nothing to measure, exit 3 at once. */
static void die(const char *what) {
  fprintf(stderr, "fatal: %s (errno %d: %s)\n", what, errno, strerror(errno));
  exit(3);
}

static void *xmalloc(size_t n) {
  void *p = malloc(n);
  if (!p && n) die("malloc returned NULL");
  return p;
}

/* A zeroed array of per-thread structs, 64-byte aligned: structs that sit side
 * by side must not share a cache line (wstat_t makes their size a multiple). */
static void *xcalloc64(size_t n, size_t size) {
  size_t bytes = (n * size + 63) & ~(size_t)63;
  void *p = aligned_alloc(64, bytes);
  if (!p) die("aligned_alloc returned NULL");
  memset(p, 0, bytes);
  return p;
}

/* ---- time --------------------------------------------------------------- */

static inline uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* ---- randomness ------------------------------------------------------- */

typedef struct {
  uint64_t s;
} rng_t;

static inline uint64_t rng_next(rng_t *r) {
  uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Uniform in [lo, hi]. */
static inline uint64_t rng_range(rng_t *r, uint64_t lo, uint64_t hi) {
  return lo + rng_next(r) % (hi - lo + 1);
}

/* The "mixed" distribution: 60% 16-256 B, 30% 512 B-2 KiB, 10% 4-32 KiB. */
static inline size_t mixed_size(rng_t *r) {
  uint64_t pick = rng_next(r) % 100;
  if (pick < 60) return rng_range(r, 16, 256);
  if (pick < 90) return rng_range(r, 512, 2 * KiB);
  return rng_range(r, 4 * KiB, 32 * KiB);
}

/* ---- arguments: key=value ---------------------------------------------- */

static int g_argc;
static char **g_argv;
static unsigned char g_arg_used[64];

static void args_init(int argc, char **argv) {
  g_argc = argc < 64 ? argc : 64;
  g_argv = argv;
}

static const char *arg_str(const char *key, const char *def) {
  size_t k = strlen(key);
  for (int i = 1; i < g_argc; i++)
    if (strncmp(g_argv[i], key, k) == 0 && g_argv[i][k] == '=') {
      g_arg_used[i] = 1;
      return g_argv[i] + k + 1;
    }
  return def;
}

/* "64", "4K", "16M", "1G" */
static long long parse_size(const char *s) {
  char *end;
  long long v = strtoll(s, &end, 10);
  switch (*end) {
  case 'k': case 'K': v <<= 10; end++; break;
  case 'm': case 'M': v <<= 20; end++; break;
  case 'g': case 'G': v <<= 30; end++; break;
  }
  if (end == s || *end) {
    fprintf(stderr, "bad number: %s\n", s);
    exit(64);
  }
  return v;
}

static long long arg_int(const char *key, long long def) {
  const char *s = arg_str(key, NULL);
  return s ? parse_size(s) : def;
}

/* Comma-separated numbers; returns how many were stored. */
static int arg_list(const char *key, const char *def, long long *out, int max) {
  char buf[512];
  snprintf(buf, sizeof buf, "%s", arg_str(key, def));
  int n = 0;
  for (char *save, *tok = strtok_r(buf, ",", &save); tok && n < max; tok = strtok_r(NULL, ",", &save))
    out[n++] = parse_size(tok);
  return n;
}

/* Call after reading every argument: a typo must not go unnoticed. */
static void args_done(void) {
  for (int i = 1; i < g_argc; i++)
    if (!g_arg_used[i]) {
      fprintf(stderr, "unknown argument: %s\n", g_argv[i]);
      exit(64);
    }
}

static int ncpus(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

/* ---- memory figures --------------------------------------------------- */

/* Resident set now, from /proc/self/statm. */
static long rss_now_kb(void) {
  long size = 0, res = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (f) {
    if (fscanf(f, "%ld %ld", &size, &res) != 2) res = 0;
    fclose(f);
  }
  return res * (sysconf(_SC_PAGESIZE) / 1024);
}

/* Peak resident set (VmHWM), falling back to getrusage. */
static long rss_peak_kb(void) {
  char line[128];
  long kb = -1;
  FILE *f = fopen("/proc/self/status", "r");
  if (f) {
    while (fgets(line, sizeof line, f))
      if (sscanf(line, "VmHWM: %ld", &kb) == 1) break;
    fclose(f);
  }
  if (kb < 0) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    kb = ru.ru_maxrss;
  }
  return kb;
}

/* Start the peak over from the current RSS (Linux >= 4.0). */
static void rss_peak_reset(void) {
  int fd = open("/proc/self/clear_refs", O_WRONLY);
  if (fd >= 0) {
    if (write(fd, "5", 1) != 1) { /* old kernel: the peak keeps counting from start */ }
    close(fd);
  }
}

static long minor_faults(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

/* ---- checking what was written ------------------------------------------- */

/* Sum of the tags written and of the tags read back intact before free;
 * a correct allocator makes them equal. One per thread, merged at the end. */
typedef struct {
  uint64_t written, read;
} check_t;

static check_t g_check;
static pthread_mutex_t g_check_lock = PTHREAD_MUTEX_INITIALIZER;

static void check_merge(const check_t *c) {
  pthread_mutex_lock(&g_check_lock);
  g_check.written += c->written;
  g_check.read += c->read;
  pthread_mutex_unlock(&g_check_lock);
}

/* A tag from a counter: well mixed, and never a run of zero bytes. */
static inline uint64_t make_tag(uint64_t seq) {
  rng_t r = {seq};
  return rng_next(&r) | 0x0101010101010101ull;
}

/* Write tag into the first and last 8 bytes; a block under 16 bytes gets
 * the tag's bytes over and over, all of it. */
static inline void stamp(void *p, size_t n, uint64_t tag, check_t *c) {
  unsigned char *b = p;
  if (n >= 16) {
    memcpy(b, &tag, 8);
    memcpy(b + n - 8, &tag, 8);
  } else {
    for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(tag >> (8 * (i % 8)));
  }
  c->written += tag;
}

static inline int stamp_ok(const void *p, size_t n, uint64_t tag, check_t *c) {
  const unsigned char *b = p;
  int ok = 1;
  if (n >= 16)
    ok = memcmp(b, &tag, 8) == 0 && memcmp(b + n - 8, &tag, 8) == 0;
  else
    for (size_t i = 0; i < n; i++) ok &= b[i] == (unsigned char)(tag >> (8 * (i % 8)));
  if (!ok) {
    uint64_t head = 0;
    memcpy(&head, b, n < 8 ? n : 8);
    bench_error("block %p of %zu bytes: tag %016llx, found %016llx", p, n,
                (unsigned long long)tag, (unsigned long long)head);
    return 0;
  }
  c->read += tag;
  return 1;
}

/* Blocks whose size the reader cannot know (handed between threads): the
 * tag's low 32 bits carry the size, so the block describes itself. n >= 16. */
static inline uint64_t sized_tag(uint64_t seq, size_t n) {
  return (make_tag(seq) & ~0xffffffffull) | (uint32_t)n;
}

static inline int sized_ok(const void *p, check_t *c) {
  uint64_t head;
  memcpy(&head, p, 8);
  size_t n = (uint32_t)head;
  if (n < 16 || n > 64 * MiB) {
    bench_error("block %p: header %016llx is not a tag", p, (unsigned long long)head);
    return 0;
  }
  return stamp_ok(p, n, head, c);
}

/* Write every byte (a pattern byte, then the tag at both ends). */
static inline void fill(void *p, size_t n, uint64_t tag, check_t *c) {
  memset(p, (int)(tag >> 56), n);
  stamp(p, n, tag, c);
}

/* Verify every byte written by fill(). */
static inline int fill_ok(const void *p, size_t n, uint64_t tag, check_t *c) {
  if (!stamp_ok(p, n, tag, c)) return 0;
  const unsigned char *b = p;
  uint64_t want = 0x0101010101010101ull * (tag >> 56), w;
  size_t i = 8, end = n > 16 ? n - 8 : 8;
  for (; i + 8 <= end; i += 8) {
    memcpy(&w, b + i, 8);
    if (w != want) goto bad;
  }
  for (; i < end; i++)
    if (b[i] != (unsigned char)(tag >> 56)) goto bad;
  return 1;
bad:
  bench_error("block %p of %zu bytes: byte %zu overwritten", p, n, i);
  c->read -= tag;
  return 0;
}

/* ---- blocks a thread holds -------------------------------------------------- */

/* Slot i holds blk[i], len[i] bytes, tagged tag[i] (NULL: empty). */
typedef struct {
  void **blk;
  size_t *len;
  uint64_t *tag;
  size_t n;
} slots_t;

typedef int (*block_ok_fn)(const void *p, size_t n, uint64_t tag, check_t *c);

static void slots_init(slots_t *s, size_t n) {
  s->n = n;
  s->blk = calloc(n ? n : 1, sizeof *s->blk);
  s->len = calloc(n ? n : 1, sizeof *s->len);
  s->tag = calloc(n ? n : 1, sizeof *s->tag);
  if (!s->blk || !s->len || !s->tag) die("calloc");
}

/* Check (with ok) and free every block still held, then the slots. */
static void slots_done(slots_t *s, block_ok_fn ok, check_t *c) {
  for (size_t i = 0; i < s->n; i++)
    if (s->blk[i]) {
      ok(s->blk[i], s->len[i], s->tag[i], c);
      free(s->blk[i]);
    }
  free(s->blk);
  free(s->len);
  free(s->tag);
}

/* Blocks handed to another thread in one go, a list of them; the blocks
 * carry sized tags, so the receiver can check them. */
typedef struct handoff {
  struct handoff *next;
  size_t n;
  void *p[];
} handoff_t;

static handoff_t *handoff_new(size_t n) {
  handoff_t *b = xmalloc(sizeof *b + n * sizeof(void *));
  b->next = NULL;
  b->n = n;
  return b;
}

/* Check and free a list of handoffs and their blocks; returns the bytes of
 * the blocks, *batches (if not NULL) gets how many handoffs there were. */
static size_t handoff_free(handoff_t *b, check_t *c, long *batches) {
  size_t bytes = 0;
  long n = 0;
  for (; b; n++) {
    handoff_t *next = b->next;
    for (size_t i = 0; i < b->n; i++) {
      uint64_t head;
      memcpy(&head, b->p[i], 8);
      if (sized_ok(b->p[i], c)) bytes += (uint32_t)head;
      free(b->p[i]);
    }
    free(b);
    b = next;
  }
  if (batches) *batches = n;
  return bytes;
}

/* ---- threads ------------------------------------------------------------ */

/* Each worker's argument starts with this; the worker fills it in. The
 * alignment keeps each worker's struct on cache lines of its own. */
typedef struct {
  _Alignas(64) uint64_t ops; /* operations done inside the timed window */
  uint64_t t_end; /* now_ns() when it saw the stop flag */
} wstat_t;

static atomic_int g_stop;
static pthread_barrier_t g_gate;

static inline int stopped(void) { return atomic_load_explicit(&g_stop, memory_order_relaxed); }

/* Every worker of run_timed() calls this once, after its untimed setup. */
static void gate(void) { pthread_barrier_wait(&g_gate); }

static void spawn(pthread_t *t, void *(*fn)(void *), void *arg) {
  errno = pthread_create(t, NULL, fn, arg);
  if (errno) die("pthread_create");
}

/* Runs fn on n threads (argument i at base + i * stride). They set up, meet
 * at gate(), work until stopped() turns true ms milliseconds later, and
 * report in their wstat_t. Returns the seconds from the gate to the last
 * worker's stop; *ops gets the total operations. */
static double run_timed(int n, void *(*fn)(void *), void *base, size_t stride, long ms,
                        uint64_t *ops) {
  pthread_t *t = xmalloc(sizeof *t * (size_t)n);
  atomic_store(&g_stop, 0);
  pthread_barrier_init(&g_gate, NULL, (unsigned)n + 1);
  for (int i = 0; i < n; i++) spawn(&t[i], fn, (char *)base + (size_t)i * stride);
  gate();
  uint64_t t0 = now_ns(), t_end = t0;
  sleep_ms(ms);
  atomic_store(&g_stop, 1);
  *ops = 0;
  for (int i = 0; i < n; i++) {
    pthread_join(t[i], NULL);
    wstat_t *w = (wstat_t *)((char *)base + (size_t)i * stride);
    *ops += w->ops;
    if (w->t_end > t_end) t_end = w->t_end;
  }
  pthread_barrier_destroy(&g_gate);
  free(t);
  return (double)(t_end - t0) / 1e9;
}

/* ---- JSON output ----------------------------------------------------------- */

/* {"bench":..,"cases":[{"case":..,"threads":..,"size":..,"metrics":{..}},..],
 *  "ok":..,"errors":..,"written":..,"read":..,"peak_rss_kb":..,"malloc_from":..}
 * Printed on one line; stdout is only flushed at exit, so a crash leaves no
 * half-valid line. */
static int g_json_cases, g_json_metrics;

static void json_begin(const char *bench) {
  setvbuf(stdout, NULL, _IOFBF, 1 << 16);
  printf("{\"bench\":\"%s\",\"cases\":[", bench);
}

/* size: bytes, or -1 when the case has none. */
static void json_case(const char *name, int threads, long long size) {
  printf("%s{\"case\":\"%s\",\"threads\":%d", g_json_cases++ ? "," : "", name, threads);
  if (size >= 0) printf(",\"size\":%lld", size);
  printf(",\"metrics\":{");
  g_json_metrics = 0;
}

static void json_metric(const char *key, double v) {
  if (v != v || v - v != 0) /* NaN or infinite: not JSON */
    printf("%s\"%s\":null", g_json_metrics++ ? "," : "", key);
  else
    printf("%s\"%s\":%.6g", g_json_metrics++ ? "," : "", key, v);
}

static void json_case_end(void) { printf("}}"); }

/* The library that really serves malloc: proves LD_PRELOAD took effect. */
static const char *malloc_origin(void) {
  Dl_info info;
  void *sym = dlsym(RTLD_DEFAULT, "malloc");
  return sym && dladdr(sym, &info) && info.dli_fname ? info.dli_fname : "?";
}

/* Ends the JSON line; returns the exit status: 0, or 2 on a failed check. */
static int bench_finish(void) {
  long errors = atomic_load(&g_errors);
  if (g_check.written != g_check.read && errors == 0)
    bench_error("checksum: wrote %llx, read back %llx", (unsigned long long)g_check.written,
                (unsigned long long)g_check.read);
  errors = atomic_load(&g_errors);
  printf("],\"ok\":%s,\"errors\":%ld,\"written\":\"%016llx\",\"read\":\"%016llx\","
         "\"peak_rss_kb\":%ld,\"malloc_from\":\"%s\"}\n",
         errors ? "false" : "true", errors, (unsigned long long)g_check.written,
         (unsigned long long)g_check.read, rss_peak_kb(), malloc_origin());
  fflush(stdout);
  return errors ? 2 : 0;
}

/* "64 B", "4 KiB", "32 MiB" */
static const char *size_label(char *buf, size_t len, long long n) {
  if (n >= (long long)MiB && n % (long long)MiB == 0)
    snprintf(buf, len, "%lld MiB", n >> 20);
  else if (n >= (long long)KiB && n % (long long)KiB == 0)
    snprintf(buf, len, "%lld KiB", n >> 10);
  else
    snprintf(buf, len, "%lld B", n);
  return buf;
}

#endif
