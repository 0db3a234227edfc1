/* Run with LD_PRELOAD=libbrisk.so: checks that brisk really replaced the
 * whole malloc family of a program that was linked against nothing but libc,
 * including the allocations libc makes for itself, and that a pointer made by
 * glibc's own malloc (as happens before brisk is loaded) is handled safely. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static int (*owns)(const void *);

static void *worker(void *arg) {
  uintptr_t id = (uintptr_t)arg;
  void *keep[64] = {0};
  int bad = 0;
  for (unsigned i = 0; i < 20000; ++i) {
    size_t n = (i * 2654435761u + id) % (i % 100 == 0 ? 300000 : 2000) + 1;
    unsigned k = (i * 7 + (unsigned)id) % 64;
    free(keep[k]);
    keep[k] = malloc(n);
    if (!keep[k] || !owns(keep[k])) bad++;
    else memset(keep[k], (int)id, n);
  }
  for (int k = 0; k < 64; ++k) free(keep[k]);
  return (void *)(uintptr_t)bad;
}

int main(void) {
  owns = (int (*)(const void *))dlsym(RTLD_DEFAULT, "brisk_owns");
  if (!owns) {
    fprintf(stderr, "FAIL: brisk_owns not found: not running under LD_PRELOAD=libbrisk.so\n");
    return 1;
  }

  /* The symbols the program and libc bind to are brisk's. */
  const char *names[] = {"malloc", "free", "calloc", "realloc", "reallocarray",
                         "aligned_alloc", "posix_memalign", "memalign", "valloc",
                         "pvalloc", "malloc_usable_size"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; ++i) {
    void *s = dlsym(RTLD_DEFAULT, names[i]);
    CHECK(s && from_brisk(s), "%s resolves to %s", names[i], s ? object_of(s) : "(null)");
  }
  CHECK(from_brisk((void *)&malloc), "&malloc is in %s", object_of((void *)&malloc));
  CHECK(from_brisk((void *)&free), "&free is in %s", object_of((void *)&free));
  void *cfree_sym = dlsym(RTLD_DEFAULT, "cfree");
  if (cfree_sym) {
    CHECK(from_brisk(cfree_sym), "cfree resolves to %s", object_of(cfree_sym));
    void *p = malloc(10);
    ((void (*)(void *))cfree_sym)(p);
  }

  /* realloc(p, 0) frees p and returns NULL, as glibc's does (a program
   * written for glibc frees with it and drops the result). */
  for (size_t n = 1; n <= (8u << 20); n *= 8) {
    size_t before = mallinfo2().uordblks;
    void *p = malloc(n);
    CHECK(p && owns(p), "malloc(%zu)", n);
    errno = 0;
    void *q = realloc(p, 0);
    CHECK(q == NULL && errno == 0, "realloc(malloc(%zu), 0) returned %p, errno %d, not NULL", n, q, errno);
    CHECK(mallinfo2().uordblks <= before, "realloc(malloc(%zu), 0) did not free it: %zu bytes in use, %zu before", n,
          mallinfo2().uordblks, before);
  }

  /* Every function returns brisk's memory. */
  size_t sizes[] = {0, 1, 24, 1000, 40000, 300000, 3u << 20};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; ++i) {
    size_t n = sizes[i];
    void *p = malloc(n);
    CHECK(p && owns(p), "malloc(%zu)", n);
    CHECK(malloc_usable_size(p) >= n, "malloc_usable_size(malloc(%zu)) = %zu", n,
          malloc_usable_size(p));
    if (n) memset(p, 1, n);
    p = realloc(p, n * 2 + 10);
    CHECK(p && owns(p), "realloc to %zu", n * 2 + 10);
    free(p);
    p = calloc(n, 1);
    CHECK(p && owns(p), "calloc(%zu, 1)", n);
    free(p);
    p = reallocarray(NULL, n, 2);
    CHECK(p && owns(p), "reallocarray(NULL, %zu, 2)", n);
    free(p);
    p = aligned_alloc(256, n);
    CHECK(p && owns(p) && ((uintptr_t)p & 255) == 0, "aligned_alloc(256, %zu)", n);
    free(p);
    p = NULL;
    int rc = posix_memalign(&p, 4096, n);
    CHECK(rc == 0 && p && owns(p) && ((uintptr_t)p & 4095) == 0, "posix_memalign(4096, %zu)", n);
    free(p);
    p = memalign(64, n);
    CHECK(p && owns(p) && ((uintptr_t)p & 63) == 0, "memalign(64, %zu)", n);
    free(p);
    p = valloc(n);
    CHECK(p && owns(p) && ((uintptr_t)p & 4095) == 0, "valloc(%zu)", n);
    free(p);
    p = pvalloc(n);
    CHECK(p && owns(p) && ((uintptr_t)p & 4095) == 0, "pvalloc(%zu)", n);
    CHECK(malloc_usable_size(p) >= ((n + 4095) & ~(size_t)4095), "pvalloc(%zu) usable %zu", n,
          malloc_usable_size(p));
    free(p);
  }
  volatile size_t huge = SIZE_MAX;
  errno = 0;
  CHECK(malloc(huge) == NULL && errno == ENOMEM, "malloc(SIZE_MAX)");
  errno = 0;
  CHECK(calloc(huge / 2, 3) == NULL && errno == ENOMEM, "calloc overflow");
  errno = 0;
  volatile size_t not_power_of_two = 24; /* (compilers warn about a constant one) */
  CHECK(aligned_alloc(not_power_of_two, 100) == NULL && errno == EINVAL, "aligned_alloc(24)");
  void *pm = (void *)&failures;
  CHECK(posix_memalign(&pm, 12, 100) == EINVAL, "posix_memalign(12)");

  /* libc allocates for itself through brisk too. */
  char *d = strdup("brisk");
  CHECK(d && owns(d), "strdup");
  free(d);
  char *s = NULL;
  CHECK(asprintf(&s, "%d-%s", 42, "x") > 0 && owns(s), "asprintf");
  free(s);
  FILE *f = fopen("/proc/self/maps", "r");
  CHECK(f != NULL, "fopen");
  int mapped = 0;
  if (f) {
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0)
      if (strstr(line, "libbrisk")) mapped = 1;
    CHECK(line && owns(line), "getline buffer");
    free(line);
    fclose(f);
  }
  CHECK(mapped, "libbrisk not in /proc/self/maps");

  /* A block from glibc's own malloc (as made before brisk was loaded) is
   * recognised as foreign; free and realloc handle it without corrupting
   * anything. */
  void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  void *(*libc_malloc)(size_t) = libc ? (void *(*)(size_t))dlsym(libc, "malloc") : NULL;
  CHECK(libc_malloc != NULL && !from_brisk((void *)libc_malloc), "libc's malloc");
  if (libc_malloc) {
    char *g = libc_malloc(100);
    CHECK(g && !owns(g), "glibc block owned by brisk?");
    free(g); /* brisk's free on a foreign block: must not crash */
    char *h = libc_malloc(200);
    for (int i = 0; i < 200; ++i) h[i] = (char)i;
    char *r = realloc(h, 5000); /* brisk's realloc on a foreign block */
    CHECK(r != NULL, "realloc of a foreign block");
    int same = 1;
    for (int i = 0; r && i < 200; ++i) same &= r[i] == (char)i;
    CHECK(same, "realloc of a foreign block lost its contents");
    free(r);
  }

  /* Threads. */
  pthread_t t[4];
  for (uintptr_t i = 0; i < 4; ++i) pthread_create(&t[i], NULL, worker, (void *)(i + 1));
  for (int i = 0; i < 4; ++i) {
    void *bad;
    pthread_join(t[i], &bad);
    CHECK(bad == NULL, "thread %d: %zu bad blocks", i, (size_t)(uintptr_t)bad);
  }

  printf("preload_check: %d passed, %d failed\n", passes, failures);
  return failures ? 1 : 0;
}
