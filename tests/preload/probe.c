/* brisk_probe: a small C program the preload scripts run under libbrisk.so
 * (LD_PRELOAD or tools/brisk-run). It is linked with libc only and finds
 * brisk's API with dlsym, so it runs (and says so) without brisk too.
 *
 *   brisk_probe loaded        "brisk: yes" when brisk_malloc is in the process
 *   brisk_probe options       every option as NAME=value, one a line
 *   brisk_probe leak          leaks known blocks (below), then exits
 *   brisk_probe close-stderr  closes fd 2, then exits
 *   brisk_probe realtime      warm-up; brisk_set_realtime(1); the same work
 *                             between two markers written to fd 2
 *   brisk_probe cold          fresh huge blocks between the markers (the
 *                             scripts' proof that they see system calls)
 *   brisk_probe reserve       40 MiB of small blocks between the markers
 *   brisk_probe double-free   frees a block twice
 *   brisk_probe over-cap      three 64 MiB mallocs (each line says whether it
 *                             got NULL with ENOMEM), then small ones, then the
 *                             options as for "options"
 *   brisk_probe vm            one malloc, then "vm_kb=N": the address space
 *                             the process has mapped (VmSize)
 *   brisk_probe big-touch     a 16 MiB malloc, every page written: "ok", or
 *                             "NULL, errno N"
 *
 * The markers are single write(2) calls ("@@BRISK-PROBE-START@@" and
 * "@@BRISK-PROBE-END@@"), so strace shows where the measured part begins and
 * ends; nothing but malloc/free/realloc and brisk_stats_get runs between them.
 * After the end marker the modes print brisk's own counts of the OS calls it
 * made in between ("os_calls_between=N"). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "brisk.h"

#define MiB ((size_t)1 << 20)

static struct {
  int (*stats_get)(brisk_stats_t *);
  long long (*option_get)(brisk_option_t);
  const char *(*option_name)(brisk_option_t);
  void (*set_realtime)(int);
  void (*collect)(void);
} api;

static int load_api(void) {
  *(void **)&api.stats_get = dlsym(RTLD_DEFAULT, "brisk_stats_get");
  *(void **)&api.option_get = dlsym(RTLD_DEFAULT, "brisk_option_get");
  *(void **)&api.option_name = dlsym(RTLD_DEFAULT, "brisk_option_name");
  *(void **)&api.set_realtime = dlsym(RTLD_DEFAULT, "brisk_set_realtime");
  *(void **)&api.collect = dlsym(RTLD_DEFAULT, "brisk_collect");
  return api.stats_get && api.option_get && api.option_name && api.set_realtime && api.collect;
}

static void need_brisk(void) {
  if (!load_api()) {
    fprintf(stderr, "brisk_probe: brisk is not loaded\n");
    exit(3);
  }
}

static void marker(const char *m) {
  if (write(2, m, strlen(m)) < 0) _exit(4);
}

/* brisk's own count of the OS calls it has made (mmap + munmap + madvise + mremap). */
static unsigned long long os_calls(unsigned long long *mmap_calls, unsigned long long *munmap_calls) {
  brisk_stats_t st;
  memset(&st, 0, sizeof st);
  st.version = BRISK_STATS_VERSION;
  if (api.stats_get(&st) != 0) return ~0ull;
  if (mmap_calls) *mmap_calls = st.mmap_calls;
  if (munmap_calls) *munmap_calls = st.munmap_calls;
  return st.mmap_calls + st.munmap_calls + st.madvise_calls + st.mremap_calls;
}

static void *volatile keep[2048];

/* ---- leak ------------------------------------------------------------------ */

/* Leaked for real: only the complement of each address is kept, which
 * points nowhere. */
static volatile uintptr_t lost[2048];

static void *lose(size_t size) {
  void *p = malloc(size);
  lost[size % 2048] = ~(uintptr_t)p;
  return p;
}

/* Dead frames below the caller's keep what malloc computed: cleared, so
 * that no stale copy of a lost address is left for the report's scan. */
static __attribute__((noinline)) void clear_stack(void) {
  char junk[64 * 1024];
  memset(junk, 0, sizeof junk);
  __asm__ volatile("" : : "r"(junk) : "memory");
}

static void *leak_thread(void *arg) {
  (void)arg;
  for (int i = 0; i < 300; i++) lose(3000); /* class 3072 */
  clear_stack();
  return NULL;
}

static int mode_leak(void) {
  for (int i = 0; i < 1000; i++) lose(200);  /* class 224 */
  for (int i = 0; i < 50; i++) lose(5000);   /* class 5120 */
  for (int i = 0; i < 3; i++) lose(3 * MiB); /* huge */
  /* A leaked block that points to another: both leaked. */
  void **chain = lose(40); /* class 48 */
  chain[0] = malloc(40);
  /* Still reachable, not leaked: 20 blocks of 100 bytes (class 112), one
   * of them pointing to a block of 60 (class 64). */
  for (int i = 0; i < 20; i++) keep[i] = malloc(100);
  *(void **)keep[0] = malloc(60);
  pthread_t t;
  if (pthread_create(&t, NULL, leak_thread, NULL) != 0) return 5;
  pthread_join(t, NULL); /* its blocks stay behind in abandoned segments */
  /* Allocated and freed: must not be reported. */
  for (int i = 0; i < 100; i++) free(malloc(700));
  chain = NULL;
  clear_stack();
  puts("leaked");
  return 0;
}

/* A worker still running at exit holds, in a block of its own heap, the
 * only pointer to a block of the main thread's: not a leak. */
static pthread_mutex_t worker_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t worker_cond = PTHREAD_COND_INITIALIZER;
static void *volatile handed;
static int worker_holds;
/* The worker's block escapes here, so that the store into it is kept; it is
 * not among the blocks the exiting thread visits, so this pointer alone
 * does not reach what it holds. */
static void **volatile worker_queue;

static void *holding_worker(void *arg) {
  (void)arg;
  void **queue = malloc(64 * sizeof(void *)); /* the worker's own block */
  worker_queue = queue;
  pthread_mutex_lock(&worker_lock);
  queue[0] = handed;
  handed = NULL;
  worker_holds = 1;
  pthread_cond_broadcast(&worker_cond);
  for (;;) pthread_cond_wait(&worker_cond, &worker_lock); /* until the process ends */
  return queue;
}

static int mode_leak_held(void) {
  handed = malloc(300); /* class 320: its only pointer ends up in the worker's block */
  pthread_t t;
  if (pthread_create(&t, NULL, holding_worker, NULL) != 0) return 5;
  pthread_mutex_lock(&worker_lock);
  while (!worker_holds) pthread_cond_wait(&worker_cond, &worker_lock);
  pthread_mutex_unlock(&worker_lock);
  lose(200); /* class 224: leaked */
  clear_stack();
  puts("held");
  exit(0); /* with the worker still running */
}

/* ---- realtime -------------------------------------------------------------- */

static const size_t work_sizes[] = {8,     24,    64,     100,    256,         700,     1024,    3000,    8000,
                                    20000, 60000, 200000, 900000, 1 * MiB + 1, 3 * MiB, 9 * MiB, 33 * MiB};
#define NSIZES (sizeof work_sizes / sizeof work_sizes[0])

static int work(void) {
  static void *blocks[NSIZES][64];
  for (int round = 0; round < 3; round++) {
    for (size_t s = 0; s < NSIZES; s++) {
      size_t count = work_sizes[s] > MiB ? 2 : work_sizes[s] > 65536 ? 8 : 64;
      for (size_t i = 0; i < count; i++) {
        unsigned char *p = malloc(work_sizes[s]);
        if (!p) return 0;
        p[0] = (unsigned char)i;
        p[work_sizes[s] - 1] = (unsigned char)s;
        blocks[s][i] = p;
      }
    }
    for (size_t i = 0; i < 64; i++) {
      void *q = realloc(blocks[3][i], 100 + 40 * (i % 6));
      if (!q) return 0;
      blocks[3][i] = q;
    }
    void *c = calloc(1000, 100);
    if (!c) return 0;
    free(c);
    for (size_t s = 0; s < NSIZES; s++) {
      size_t count = work_sizes[s] > MiB ? 2 : work_sizes[s] > 65536 ? 8 : 64;
      for (size_t i = 0; i < count; i++) free(blocks[s][(i * 5) % count]);
    }
  }
  return 1;
}

static int mode_realtime(void) {
  need_brisk();
  if (!work()) return 6; /* warm-up */
  api.set_realtime(1);
  unsigned long long before = os_calls(NULL, NULL);
  marker("@@BRISK-PROBE-START@@\n");
  int ok = 1;
  for (int i = 0; i < 5 && ok; i++) ok = work();
  unsigned long long after = os_calls(NULL, NULL);
  marker("@@BRISK-PROBE-END@@\n");
  if (!ok) return 6;
  printf("os_calls_between=%llu\n", after - before);
  /* brisk_collect still gives memory back on demand. */
  unsigned long long munmap_before, munmap_after;
  os_calls(NULL, &munmap_before);
  api.collect();
  os_calls(NULL, &munmap_after);
  printf("collect_munmap=%llu\n", munmap_after - munmap_before);
  return 0;
}

static int mode_cold(void) {
  need_brisk();
  free(malloc(64)); /* the thread's heap exists before the marker */
  unsigned long long before = os_calls(NULL, NULL);
  marker("@@BRISK-PROBE-START@@\n");
  for (int i = 0; i < 4; i++) keep[i] = malloc((size_t)(5 + 3 * i) * MiB);
  unsigned long long after = os_calls(NULL, NULL);
  marker("@@BRISK-PROBE-END@@\n");
  printf("os_calls_between=%llu\n", after - before);
  return 0;
}

static int mode_reserve(void) {
  need_brisk();
  free(malloc(64)); /* the thread's heap exists before the marker */
  static const size_t sizes[] = {16, 32, 48, 64, 96, 128, 200, 256, 512, 1000};
  struct rusage r0, r1;
  getrusage(RUSAGE_SELF, &r0);
  unsigned long long before = os_calls(NULL, NULL);
  marker("@@BRISK-PROBE-START@@\n");
  void *list = NULL;
  size_t total = 0, n = 0;
  while (total < 40 * MiB) {
    size_t sz = sizes[n++ % 10];
    void **p = malloc(sz);
    if (!p) return 7;
    *p = list;
    list = p;
    total += sz;
  }
  unsigned long long after = os_calls(NULL, NULL);
  marker("@@BRISK-PROBE-END@@\n");
  getrusage(RUSAGE_SELF, &r1);
  printf("os_calls_between=%llu\n", after - before);
  printf("minflt_between=%ld\n", r1.ru_minflt - r0.ru_minflt);
  while (list) {
    void *next = *(void **)list;
    free(list);
    list = next;
  }
  return 0;
}

/* ---- the rest ------------------------------------------------------------------ */

static int mode_options(void) {
  need_brisk();
  for (int i = 0; i < BRISK_OPTION_COUNT; i++)
    printf("%s=%lld\n", api.option_name((brisk_option_t)i), api.option_get((brisk_option_t)i));
  return 0;
}

/* Under a small BRISK_MAX_BYTES: big blocks are refused, small ones still
 * come, and the program goes on. */
static int mode_over_cap(void) {
  need_brisk();
  for (int i = 0; i < 3; i++) {
    errno = 0;
    void *p = malloc(64 * MiB);
    printf("big %d: %s\n", i, p ? "allocated" : errno == ENOMEM ? "NULL, ENOMEM" : "NULL, other errno");
    free(p);
  }
  int ok = 1;
  for (int i = 0; i < 100; i++) ok &= (keep[i] = malloc(100)) != NULL;
  printf("small: %s\n", ok ? "ok" : "failed");
  return mode_options();
}

/* The address space mapped once the allocator is set up (what RLIMIT_AS
 * counts), and a big block under such a limit. */
static int mode_vm(void) {
  keep[0] = malloc(100);
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return 7;
  char line[256];
  long kb = -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "VmSize: %ld kB", &kb) == 1) break;
  fclose(f);
  printf("vm_kb=%ld\n", kb);
  return kb < 0 ? 7 : 0;
}

static int mode_big_touch(void) {
  errno = 0;
  char *p = malloc(16 * MiB);
  if (!p) {
    printf("NULL, errno %d\n", errno);
    return 0;
  }
  memset(p, 1, 16 * MiB);
  keep[0] = p;
  puts("ok");
  return 0;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  if (!strcmp(mode, "loaded")) {
    printf("brisk: %s\n", load_api() ? "yes" : "no");
    return 0;
  }
  if (!strcmp(mode, "options")) return mode_options();
  if (!strcmp(mode, "leak")) return mode_leak();
  if (!strcmp(mode, "leak_held")) return mode_leak_held();
  if (!strcmp(mode, "realtime")) return mode_realtime();
  if (!strcmp(mode, "cold")) return mode_cold();
  if (!strcmp(mode, "reserve")) return mode_reserve();
  if (!strcmp(mode, "over-cap")) return mode_over_cap();
  if (!strcmp(mode, "vm")) return mode_vm();
  if (!strcmp(mode, "big-touch")) return mode_big_touch();
  if (!strcmp(mode, "close-stderr")) {
    keep[0] = malloc(100);
    puts("closing stderr");
    fflush(stdout);
    close(2);
    return 0;
  }
  if (!strcmp(mode, "double-free")) {
    void *p = malloc(48);
    keep[0] = p;
    free(p);
    free(keep[0]);
    puts("survived a double free");
    return 0;
  }
  fprintf(stderr,
          "usage: brisk_probe loaded|options|leak|close-stderr|realtime|cold|reserve|double-free|over-cap|vm|big-touch\n");
  return 64;
}
