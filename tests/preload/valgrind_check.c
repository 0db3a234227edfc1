/* Run under valgrind with LD_PRELOAD=libbrisk.so (tests/preload/valgrind.sh):
 * allocates through every allocation entry point libbrisk exports and frees
 * each block through every release entry point of its family, so that an
 * entry point valgrind does not redirect, and does not reach one it does,
 * shows as "Invalid free" or a definitely lost block. Linked against libc
 * only; the names glibc's headers do not declare (free_sized, __libc_*, C++
 * operators) are looked up, and each must come from libbrisk, or the run
 * proves nothing. */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>

#include "check.h"

/* brisk's definition of `name` (NULL, with a failure, when it is not). */
static void *brisk_sym(const char *name) {
  void *s = dlsym(RTLD_DEFAULT, name);
  int ok = s && from_brisk(s);
  CHECK(ok, "%s does not come from libbrisk: run with LD_PRELOAD=libbrisk.so", name);
  return ok ? s : NULL;
}

static void *(*libc_malloc)(size_t), *(*libc_calloc)(size_t, size_t), *(*libc_realloc)(void *, size_t);
static void *(*libc_memalign)(size_t, size_t), *(*libc_valloc)(size_t), *(*libc_pvalloc)(size_t);
static int (*posix_memalign2)(void **, size_t, size_t);
static void (*libc_free)(void *), (*cfree_)(void *), (*free_sized)(void *, size_t);
static void (*free_aligned_sized)(void *, size_t, size_t);
static void *(*new_)(size_t), *(*new_array)(size_t);
static void *(*new_aligned)(size_t, size_t), *(*new_array_aligned)(size_t, size_t);
static void (*delete_)(void *), (*delete_array)(void *), (*delete_sized)(void *, size_t);
static void (*delete_array_sized)(void *, size_t), (*delete_aligned)(void *, size_t);
static void (*delete_array_aligned)(void *, size_t), (*delete_sized_aligned)(void *, size_t, size_t);
static void (*delete_array_sized_aligned)(void *, size_t, size_t);

#define LOOK_UP(var, name) (*(void **)&(var) = brisk_sym(name))

static void look_up_all(void) {
  const char *declared[] = {"malloc", "free", "calloc", "realloc", "reallocarray", "aligned_alloc",
                            "posix_memalign", "memalign", "valloc", "pvalloc", "malloc_usable_size"};
  for (size_t i = 0; i < sizeof declared / sizeof declared[0]; ++i) brisk_sym(declared[i]);
  LOOK_UP(libc_malloc, "__libc_malloc");
  LOOK_UP(libc_calloc, "__libc_calloc");
  LOOK_UP(libc_realloc, "__libc_realloc");
  LOOK_UP(libc_memalign, "__libc_memalign");
  LOOK_UP(libc_valloc, "__libc_valloc");
  LOOK_UP(libc_pvalloc, "__libc_pvalloc");
  LOOK_UP(posix_memalign2, "__posix_memalign");
  LOOK_UP(libc_free, "__libc_free");
  LOOK_UP(cfree_, "cfree");
  LOOK_UP(free_sized, "free_sized");
  LOOK_UP(free_aligned_sized, "free_aligned_sized");
  LOOK_UP(new_, "_Znwm");
  LOOK_UP(new_array, "_Znam");
  LOOK_UP(new_aligned, "_ZnwmSt11align_val_t");
  LOOK_UP(new_array_aligned, "_ZnamSt11align_val_t");
  LOOK_UP(delete_, "_ZdlPv");
  LOOK_UP(delete_array, "_ZdaPv");
  LOOK_UP(delete_sized, "_ZdlPvm");
  LOOK_UP(delete_array_sized, "_ZdaPvm");
  LOOK_UP(delete_aligned, "_ZdlPvSt11align_val_t");
  LOOK_UP(delete_array_aligned, "_ZdaPvSt11align_val_t");
  LOOK_UP(delete_sized_aligned, "_ZdlPvmSt11align_val_t");
  LOOK_UP(delete_array_sized_aligned, "_ZdaPvmSt11align_val_t");
}

/* ---- The malloc family: any maker with any releaser ---------------------- */

/* realloc-like makers grow a small block, so the old one is freed inside. */
static void *grown(void *(*grow)(void *, size_t), size_t n) {
  void *p = malloc(1);
  if (p) *(char *)p = 1;
  return grow(p, n);
}
static void *by_reallocarray(void *p, size_t n) { return reallocarray(p, n, 1); }
static void *by_posix_memalign(int (*fn)(void **, size_t, size_t), size_t align, size_t n) {
  void *p = NULL;
  return fn(&p, align, n) == 0 ? p : NULL;
}

static void *make_malloc(size_t n) { return malloc(n); }
static void *make_calloc(size_t n) { return calloc(n, 1); }
static void *make_realloc(size_t n) { return grown(realloc, n); }
static void *make_reallocarray(size_t n) { return grown(by_reallocarray, n); }
static void *make_aligned_alloc(size_t n) { return aligned_alloc(64, n); }
static void *make_posix_memalign(size_t n) { return by_posix_memalign(posix_memalign, 256, n); }
static void *make_memalign(size_t n) { return memalign(128, n); }
static void *make_valloc(size_t n) { return valloc(n); }
static void *make_pvalloc(size_t n) { return pvalloc(n); }
static void *make_libc_malloc(size_t n) { return libc_malloc(n); }
static void *make_libc_calloc(size_t n) { return libc_calloc(1, n); }
static void *make_libc_realloc(size_t n) { return grown(libc_realloc, n); }
static void *make_libc_memalign(size_t n) { return libc_memalign(4096, n); }
static void *make_libc_valloc(size_t n) { return libc_valloc(n); }
static void *make_libc_pvalloc(size_t n) { return libc_pvalloc(n); }
static void *make_posix_memalign2(size_t n) { return by_posix_memalign(posix_memalign2, 512, n); }

static void release_free(void *p, size_t n) { (void)n; free(p); }
static void release_libc_free(void *p, size_t n) { (void)n; libc_free(p); }
static void release_cfree(void *p, size_t n) { (void)n; cfree_(p); }
static void release_free_sized(void *p, size_t n) { free_sized(p, n); }
static void release_free_aligned_sized(void *p, size_t n) { free_aligned_sized(p, 64, n); }

static void *(*const makers[])(size_t) = {
    make_malloc, make_calloc, make_realloc, make_reallocarray, make_aligned_alloc,
    make_posix_memalign, make_memalign, make_valloc, make_pvalloc, make_libc_malloc,
    make_libc_calloc, make_libc_realloc, make_libc_memalign, make_libc_valloc, make_libc_pvalloc,
    make_posix_memalign2};
static void (*const releasers[])(void *, size_t) = {release_free, release_libc_free, release_cfree,
                                                     release_free_sized, release_free_aligned_sized};

/* ---- C++: each new with the deletes that may release it ------------------ */

static void *new_scalar(size_t n) { return new_(n); }
static void *new_vector(size_t n) { return new_array(n); }
static void *new_scalar_aligned(size_t n) { return new_aligned(n, 256); }
static void *new_vector_aligned(size_t n) { return new_array_aligned(n, 256); }
static void delete_scalar(void *p, size_t n) { (void)n; delete_(p); }
static void delete_scalar_sized(void *p, size_t n) { delete_sized(p, n); }
static void delete_vector(void *p, size_t n) { (void)n; delete_array(p); }
static void delete_vector_sized(void *p, size_t n) { delete_array_sized(p, n); }
static void delete_scalar_aligned(void *p, size_t n) { (void)n; delete_aligned(p, 256); }
static void delete_scalar_sized_aligned(void *p, size_t n) { delete_sized_aligned(p, n, 256); }
static void delete_vector_aligned(void *p, size_t n) { (void)n; delete_array_aligned(p, 256); }
static void delete_vector_sized_aligned(void *p, size_t n) { delete_array_sized_aligned(p, n, 256); }

static const struct {
  void *(*make)(size_t);
  void (*release[2])(void *, size_t);
} cxx_pairs[] = {
    {new_scalar, {delete_scalar, delete_scalar_sized}},
    {new_vector, {delete_vector, delete_vector_sized}},
    {new_scalar_aligned, {delete_scalar_aligned, delete_scalar_sized_aligned}},
    {new_vector_aligned, {delete_vector_aligned, delete_vector_sized_aligned}},
};

/* Makes a block, writes it whole, reads it back (valgrind checks both), frees it. */
static void cycle(void *(*make)(size_t), void (*release)(void *, size_t), size_t n, const char *what) {
  unsigned char *p = make(n);
  CHECK(p != NULL, "%s: %zu bytes", what, n);
  if (!p) return;
  CHECK(malloc_usable_size(p) >= n, "%s: usable size of %zu bytes", what, n);
  int fill = (int)(n % 251) + 1;
  for (size_t i = 0; i < n; ++i) p[i] = (unsigned char)fill;
  size_t same = 0;
  for (size_t i = 0; i < n; ++i) same += p[i] == (unsigned char)fill;
  CHECK(same == n, "%s: contents of %zu bytes", what, n);
  release(p, n);
}

int main(void) {
  look_up_all();
  if (failures) return 1;

  /* A size in each of brisk's tiers, small to huge. */
  const size_t sizes[] = {1, 100, 5000, 100000, 3u << 20};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; ++s) {
    for (size_t m = 0; m < sizeof makers / sizeof makers[0]; ++m)
      for (size_t r = 0; r < sizeof releasers / sizeof releasers[0]; ++r)
        cycle(makers[m], releasers[r], sizes[s], "malloc family");
    for (size_t c = 0; c < sizeof cxx_pairs / sizeof cxx_pairs[0]; ++c)
      for (size_t r = 0; r < 2; ++r) cycle(cxx_pairs[c].make, cxx_pairs[c].release[r], sizes[s], "new/delete");
    unsigned char *z = calloc(sizes[s], 1);
    CHECK(z && z[sizes[s] - 1] == 0, "calloc(%zu, 1) is zeroed", sizes[s]);
    free(z);
  }

  /* Statistics and tuning leave valgrind's bookkeeping alone. */
  struct mallinfo2 mi = mallinfo2();
  (void)mi;
  malloc_trim(0);
  mallopt(M_ARENA_MAX, 2);

  printf("valgrind_check: %d passed, %s\n", passes, failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}
