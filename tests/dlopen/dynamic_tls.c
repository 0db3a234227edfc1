/* brisk built with a dynamic TLS model (BRISK_TLS_MODEL=global-dynamic:
 * CMake's cache variable, brisk-sys's dynamic-tls feature) can be loaded
 * with dlopen after the program started: the library asks for no static
 * TLS (no DF_STATIC_TLS in its dynamic section, which initial-exec sets),
 * and threads started before and after the load allocate from it.
 *   dynamic_tls <libbrisk built with global-dynamic>.so */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static void *(*b_malloc)(size_t);
static void *(*b_realloc_aligned)(void *, size_t, size_t);
static void (*b_free)(void *);
static int (*b_owns)(const void *);

/* Whether the loaded object asks for static TLS (-1: cannot tell). */
static int wants_static_tls(void *handle) {
  struct link_map *map;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0) return -1;
  for (const ElfW(Dyn) *d = map->l_ld; d->d_tag != DT_NULL; d++)
    if (d->d_tag == DT_FLAGS) return (d->d_un.d_val & DF_STATIC_TLS) != 0;
  return 0;
}

/* Blocks of many sizes from this thread's brisk heap, checked and freed;
 * returns the number of failures. */
static void *work(void *arg) {
  uintptr_t failures = 0;
  (void)arg;
  for (int round = 0; round < 200; round++) {
    void *blocks[16];
    for (int i = 0; i < 16; i++) {
      size_t n = (size_t)16 << (i % 12);
      blocks[i] = b_malloc(n);
      if (!blocks[i] || !b_owns(blocks[i])) {
        failures++;
        continue;
      }
      memset(blocks[i], i, n);
      blocks[i] = b_realloc_aligned(blocks[i], 256, n + 100);
      if (!blocks[i] || ((uintptr_t)blocks[i] & 255) != 0 || ((unsigned char *)blocks[i])[n - 1] != i) failures++;
    }
    for (int i = 0; i < 16; i++) b_free(blocks[i]);
  }
  return (void *)failures;
}

static pthread_mutex_t gate = PTHREAD_MUTEX_INITIALIZER;

/* A thread that exists before the library is loaded, and allocates after. */
static void *early(void *arg) {
  pthread_mutex_lock(&gate);
  pthread_mutex_unlock(&gate);
  return work(arg);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: dynamic_tls library.so\n");
    return 2;
  }
  pthread_mutex_lock(&gate);
  pthread_t before;
  if (pthread_create(&before, NULL, early, NULL) != 0) return 2;
  void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "FAIL: dlopen(%s): %s\n", argv[1], dlerror());
    return 1;
  }
  int fail = 0;
  int static_tls = wants_static_tls(lib);
  if (static_tls != 0) {
    fprintf(stderr, "FAIL: %s %s\n", argv[1],
            static_tls < 0 ? "cannot be inspected" : "asks for static TLS (DF_STATIC_TLS): initial-exec is in it");
    fail = 1;
  }
  *(void **)&b_malloc = dlsym(lib, "brisk_malloc");
  *(void **)&b_realloc_aligned = dlsym(lib, "brisk_realloc_aligned");
  *(void **)&b_free = dlsym(lib, "brisk_free");
  *(void **)&b_owns = dlsym(lib, "brisk_owns");
  if (!b_malloc || !b_realloc_aligned || !b_free || !b_owns) {
    fprintf(stderr, "FAIL: the brisk_* functions are not in %s\n", argv[1]);
    return 1;
  }
  pthread_mutex_unlock(&gate);
  pthread_t after[3];
  for (int i = 0; i < 3; i++)
    if (pthread_create(&after[i], NULL, work, NULL) != 0) return 2;
  uintptr_t failures = (uintptr_t)work(NULL);
  void *r;
  pthread_join(before, &r);
  failures += (uintptr_t)r;
  for (int i = 0; i < 3; i++) {
    pthread_join(after[i], &r);
    failures += (uintptr_t)r;
  }
  if (failures) {
    fprintf(stderr, "FAIL: %lu allocations went wrong\n", (unsigned long)failures);
    fail = 1;
  }
  if (!fail) printf("ok: %s loaded late with dlopen, no static TLS, 5 threads allocated\n", argv[1]);
  return fail;
}
