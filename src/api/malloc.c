/* The public prefixed API of brisk.h for the thread's heap: the malloc
 * family as brisk_*, and the process-wide knobs (options, realtime mode,
 * the mapped-bytes cap, collect). The fast paths are in core/fast_path.h;
 * the overrides (override.c) call these. */
#include "api/api.h"

const char *brisk_version(void) { return BRISK_VERSION_STRING; }

void *brisk_malloc(size_t size) { return malloc_fast(size); }
void brisk_free(void *p) { free_fast(p); }

void brisk_free_sized(void *p, size_t size) { free_sized_fast(p, size, "brisk_free_sized"); }

size_t brisk_usable_size(const void *p) { return _bk_usable_size(p); }
int brisk_owns(const void *p) { return segment_of(p) != NULL; }

void *brisk_calloc(size_t count, size_t size) { return _bk_calloc_in(_bk_tls_heap, count, size); }
void *brisk_realloc(void *p, size_t size) { return _bk_realloc_in(_bk_tls_heap, p, size); }

void *brisk_calloc_aligned(size_t count, size_t size, size_t align) {
  return _bk_calloc_aligned_in(_bk_tls_heap, count, size, align);
}

void *brisk_realloc_aligned(void *p, size_t align, size_t size) {
  return _bk_realloc_aligned_in(_bk_tls_heap, p, align, size);
}

void *brisk_reallocarray(void *p, size_t count, size_t size) {
  size_t total;
  if (!size_product(count, size, &total)) return NULL;
  return brisk_realloc(p, total);
}

void *brisk_aligned_alloc(size_t align, size_t size) {
  return alignment_valid(align) ? _bk_aligned_in(_bk_tls_heap, align, size) : NULL;
}

int brisk_posix_memalign(void **out, size_t align, size_t size) {
  if (!is_power_of_two(align) || align % sizeof(void *) != 0) return EINVAL;
  int saved = errno;
  void *p = _bk_aligned_in(_bk_tls_heap, align, size);
  errno = saved;
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}

/* glibc's memalign rounds a non-power-of-two alignment up. */
void *brisk_memalign(size_t align, size_t size) {
  if (align > ((size_t)1 << (sizeof(size_t) * 8 - 2))) {
    errno = EINVAL;
    return NULL;
  }
  if (!is_power_of_two(align)) align = align < 2 ? 1 : (size_t)1 << (64 - __builtin_clzl(align));
  return _bk_aligned_in(_bk_tls_heap, align, size);
}

/* ---- Process-wide knobs ------------------------------------------------- */

/* Not beside a shared purge pass (core/purge.c says why). */
void brisk_collect(void) { _bk_collect(); }

int brisk_option_set(brisk_option_t opt, long long v) { return _bk_option_set(opt, v); }
long long brisk_option_get(brisk_option_t opt) { return _bk_option_get(opt); }
const char *brisk_option_name(brisk_option_t opt) { return _bk_option_name(opt); }
void brisk_set_realtime(int on) { _bk_set_realtime(on != 0); }

void brisk_set_max_bytes(size_t n) { _bk_memory_set_cap(n); }
size_t brisk_get_max_bytes(void) { return _bk_memory_cap(); }
size_t brisk_mapped_bytes(void) { return _bk_memory_mapped(); }
