/* fixed.c: workload 7, fixed-size objects (the pool case).
 *
 * For each object size (32-256 B), for ms milliseconds: allocate `count`
 * objects of that one size, tag each, then check and free them all in the
 * order they were allocated. Figure: M objects/s (one alloc + one free).
 *
 * The objects come from a backend. "malloc" is plain malloc/free, so the
 * allocator under LD_PRELOAD is measured. A dedicated pool (brisk's pool API
 * once it exists) joins by adding an entry to `backends` below, e.g. one
 * built when BRISK_POOL is defined and linked against libbrisk; the runner
 * then passes backend=<name> (see bench/README.md).
 *
 *   fixed sizes=32,64,128,256 count=100000 ms=200 backend=malloc */
#include "common.h"

typedef struct {
  const char *name;
  void *(*open)(size_t size);             /* a pool for objects of `size` */
  void *(*alloc)(void *pool);
  void (*release)(void *pool, void *obj);
  void (*close)(void *pool);
} backend_t;

/* malloc backend: the "pool" is just the object size. */
static void *malloc_open(size_t size) { return (void *)(uintptr_t)size; }
static void *malloc_alloc(void *pool) { return malloc((size_t)(uintptr_t)pool); }
static void malloc_release(void *pool, void *obj) { (void)pool; free(obj); }
static void malloc_close(void *pool) { (void)pool; }

static const backend_t backends[] = {
    {"malloc", malloc_open, malloc_alloc, malloc_release, malloc_close},
    /* {"brisk_pool", ...}: add here, under #ifdef BRISK_POOL */
};

int main(int argc, char **argv) {
  args_init(argc, argv);
  long long sizes[16];
  int nsizes = arg_list("sizes", "32,64,128,256", sizes, 16);
  size_t count = (size_t)arg_int("count", 100000);
  long ms = (long)arg_int("ms", 200);
  const char *name = arg_str("backend", "malloc");
  args_done();

  const backend_t *be = NULL;
  for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++)
    if (strcmp(backends[i].name, name) == 0) be = &backends[i];
  if (!be) {
    fprintf(stderr, "unknown backend %s\n", name);
    return 64;
  }

  check_t c = {0};
  void **obj = xmalloc(count * sizeof *obj);
  json_begin("fixed");
  for (int s = 0; s < nsizes; s++) {
    size_t size = (size_t)sizes[s];
    void *pool = be->open(size);
    uint64_t seq = (uint64_t)s << 40, done = 0, t0 = now_ns(), deadline = t0 + (uint64_t)ms * 1000000u;
    do {
      for (size_t i = 0; i < count; i++) {
        obj[i] = be->alloc(pool);
        if (!obj[i]) die("allocation returned NULL");
        stamp(obj[i], size, make_tag(seq + i), &c);
      }
      for (size_t i = 0; i < count; i++) {
        stamp_ok(obj[i], size, make_tag(seq + i), &c);
        be->release(pool, obj[i]);
      }
      seq += count;
      done += count;
    } while (now_ns() < deadline);
    double secs = (double)(now_ns() - t0) / 1e9;
    be->close(pool);

    char label[64], sz[32];
    snprintf(label, sizeof label, "%s, %s", size_label(sz, sizeof sz, (long long)size), be->name);
    json_case(label, 1, (long long)size);
    json_metric("mops", (double)done / secs / 1e6);
    json_case_end();
  }
  free(obj);
  check_merge(&c);
  return bench_finish();
}
