/* fixed.c: workload 7, fixed-size objects (the pool case).
 *
 * For each object size (32-256 B), for ms milliseconds: allocate `count`
 * objects of that one size, tag each, then check and free them all in the
 * order they were allocated. Figure: M objects/s (one alloc + one free).
 *
 * The objects come from a backend. "malloc" is plain malloc/free, so the
 * allocator under LD_PRELOAD is measured. "brisk_pool" is brisk's fixed-size
 * pool API (brisk_pool_new/alloc/free/destroy), looked up with dlsym at run
 * time: the program builds and runs without brisk, and that backend works
 * only when libbrisk is preloaded (otherwise it exits 64 with a message).
 * The runner passes backend=<name> (see bench/README.md).
 *
 *   fixed sizes=32,64,128,256 count=100000 ms=200 backend=malloc
 *   LD_PRELOAD=build/libbrisk.so fixed backend=brisk_pool */
#include "common.h"

typedef struct {
  const char *name;
  void *(*open)(size_t size);             /* a pool for objects of `size` */
  void *(*alloc)(void *pool);
  void (*release)(void *pool, void *obj);
  void (*close)(void *pool);
  const char *(*unavailable)(void);       /* NULL, or why it cannot run here */
} backend_t;

/* malloc backend: the "pool" is just the object size. */
static void *malloc_open(size_t size) { return (void *)(uintptr_t)size; }
static void *malloc_alloc(void *pool) { return malloc((size_t)(uintptr_t)pool); }
static void malloc_release(void *pool, void *obj) { (void)pool; free(obj); }
static void malloc_close(void *pool) { (void)pool; }

/* brisk_pool backend: brisk's pools, found in the process (libbrisk
 * preloaded or linked) by name, so nothing here needs brisk.h or libbrisk at
 * build time. One unbounded pool per object size, 16-byte alignment. */
static struct {
  void *(*pool_new)(size_t object_size, size_t alignment, size_t max_objects);
  void (*pool_destroy)(void *pool);
  void *(*pool_alloc)(void *pool);
  void (*pool_free)(void *pool, void *obj);
} brisk_api;

static const char *brisk_pool_unavailable(void) {
  *(void **)&brisk_api.pool_new = dlsym(RTLD_DEFAULT, "brisk_pool_new");
  *(void **)&brisk_api.pool_destroy = dlsym(RTLD_DEFAULT, "brisk_pool_destroy");
  *(void **)&brisk_api.pool_alloc = dlsym(RTLD_DEFAULT, "brisk_pool_alloc");
  *(void **)&brisk_api.pool_free = dlsym(RTLD_DEFAULT, "brisk_pool_free");
  if (brisk_api.pool_new && brisk_api.pool_destroy && brisk_api.pool_alloc && brisk_api.pool_free) return NULL;
  return "brisk's pool API is not in this process (run it with LD_PRELOAD=.../libbrisk.so)";
}

static void *brisk_pool_open(size_t size) {
  void *pool = brisk_api.pool_new(size, 0, 0);
  if (!pool) die("brisk_pool_new failed");
  return pool;
}
static void *brisk_pool_alloc_one(void *pool) { return brisk_api.pool_alloc(pool); }
static void brisk_pool_release(void *pool, void *obj) { brisk_api.pool_free(pool, obj); }
static void brisk_pool_close(void *pool) { brisk_api.pool_destroy(pool); }

static const backend_t backends[] = {
    {"malloc", malloc_open, malloc_alloc, malloc_release, malloc_close, NULL},
    {"brisk_pool", brisk_pool_open, brisk_pool_alloc_one, brisk_pool_release, brisk_pool_close,
     brisk_pool_unavailable},
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
  const char *why = be->unavailable ? be->unavailable() : NULL;
  if (why) {
    fprintf(stderr, "backend %s: %s\n", name, why);
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
