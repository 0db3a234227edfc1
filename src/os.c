/* The OS layer: every mmap, munmap, mremap and madvise brisk makes, the
 * mapped-bytes cap, and the chunk map that tells brisk's pointers from
 * foreign ones. */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define CHUNK_MAP_ENTRIES ((size_t)1 << (48 - SEGMENT_SHIFT))

/* 64 MiB of zero-initialized address space: only the pages whose chunks
 * hold segments are ever touched, so it costs a few KiB of memory. Being
 * static, it is valid before any initialization runs. */
BRISK_INTERNAL _Atomic(uint8_t) _bk_chunk_map[CHUNK_MAP_ENTRIES];

/* The kernel orders a range one thread gives up (munmap, mremap) before
 * another thread maps it again. ThreadSanitizer does not see that order
 * through mremap, so the sanitized build states it: giving address space up
 * releases, getting it acquires. */
#if defined(__SANITIZE_THREAD__)
#define BRISK_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define BRISK_TSAN 1
#endif
#endif
#ifdef BRISK_TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
static char address_space_order;
static void space_given_up(void) { __tsan_release(&address_space_order); }
static void space_taken(void) { __tsan_acquire(&address_space_order); }
#else
static void space_given_up(void) {}
static void space_taken(void) {}
#endif

static _Atomic(size_t) mapped_bytes;
static _Atomic(size_t) max_bytes;
static _Atomic(uint64_t) os_calls[4]; /* enum os_call */
static _Atomic(size_t) peak_mapped;

/* Marks (or clears) the chunks of a mapping that starts at a segment header
 * (always chunk-aligned) from its byte `from` up to `to`: the header's chunk
 * gets 1, each later chunk the distance back to it plus one, capped at 255
 * (then the lookup hops back 254 chunks and looks again). A chunk belongs to
 * the mapping when the mapping covers the chunk's first byte.
 *
 * Callers keep the map right at every instant another thread may look: they
 * mark chunks after the memory is mapped and clear them before it is given
 * back, since another thread may map the range the moment it is free. */
void _bk_os_map_range(const void *header, size_t from, size_t to, bool on) {
  size_t base = (uintptr_t)header >> SEGMENT_SHIFT;
  size_t first = (from + SEGMENT_SIZE - 1) >> SEGMENT_SHIFT;
  size_t end = (to + SEGMENT_SIZE - 1) >> SEGMENT_SHIFT;
  for (size_t i = first; i < end; i++)
    atomic_store_explicit(&_bk_chunk_map[base + i], on ? (uint8_t)(i + 1 > 255 ? 255 : i + 1) : 0,
                          memory_order_release);
}

static void unmap_raw(void *base, size_t size) {
  atomic_fetch_add_explicit(&os_calls[OS_MUNMAP], 1, memory_order_relaxed);
  space_given_up();
  munmap(base, size);
}

static bool reserve_bytes(size_t size) {
  size_t cap = atomic_load_explicit(&max_bytes, memory_order_relaxed);
  size_t cur = atomic_fetch_add_explicit(&mapped_bytes, size, memory_order_relaxed);
  if (cap && cur + size > cap) {
    atomic_fetch_sub_explicit(&mapped_bytes, size, memory_order_relaxed);
    return false;
  }
  size_t peak = atomic_load_explicit(&peak_mapped, memory_order_relaxed);
  while (cur + size > peak &&
         !atomic_compare_exchange_weak_explicit(&peak_mapped, &peak, cur + size, memory_order_relaxed,
                                                memory_order_relaxed)) {
  }
  return true;
}

/* Maps `size` bytes at an address p that is a multiple of SEGMENT_SIZE
 * (or of the OS page when align is smaller) and makes p + skew a multiple
 * of align. No MAP_NORESERVE: a request the kernel's overcommit policy
 * refuses fails here, as with glibc, instead of at first touch. */
static void *map_once(size_t size, size_t align, size_t skew, uint8_t **base, size_t *mapped, bool *over_cap) {
  if (!reserve_bytes(size)) {
    *over_cap = true;
    return NULL;
  }
  size_t over = align > OS_PAGE_SIZE ? align : 0;
  size_t span = size + over;
  if (span < size) goto fail;
  atomic_fetch_add_explicit(&os_calls[OS_MMAP], 1, memory_order_relaxed);
  uint8_t *m = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) goto fail;
  space_taken();
  uint8_t *p = over ? (uint8_t *)(align_up((uintptr_t)m + skew, align) - skew) : m;
  /* Trim the slack so that only `size` bytes stay mapped. */
  if (p > m) unmap_raw(m, (size_t)(p - m));
  if (m + span > p + size) unmap_raw(p + size, (size_t)(m + span - (p + size)));
  /* Segments are 4 MiB-aligned: two whole huge pages each. */
  if (_bk_opt.hugepages) {
    atomic_fetch_add_explicit(&os_calls[OS_MADVISE], 1, memory_order_relaxed);
    madvise(p, size, MADV_HUGEPAGE);
  }
  *base = p;
  *mapped = size;
  return p;
fail:
  atomic_fetch_sub_explicit(&mapped_bytes, size, memory_order_relaxed);
  return NULL;
}

/* A cap set too low shows up as failures far from where it was set (often
 * a program's own "out of memory" and exit): the first refusal says why. */
static void cap_refused(size_t size) {
  static _Atomic(bool) warned;
  if (atomic_exchange_explicit(&warned, true, memory_order_relaxed)) return;
  _bk_warning("BRISK_MAX_BYTES: the cap of %zu bytes refused a mapping of %zu bytes (%zu mapped now); "
                "allocations past the cap fail with ENOMEM (said once)",
                atomic_load_explicit(&max_bytes, memory_order_relaxed), size,
                atomic_load_explicit(&mapped_bytes, memory_order_relaxed));
}

/* Maps `size` bytes (a multiple of the OS page) at a multiple of align,
 * plus skew bytes (align and skew multiples of the OS page, skew < align).
 * When the OS or the cap says no, cached memory is released and the map
 * retried once. */
void *_bk_os_map_aligned(size_t size, size_t align, size_t skew, uint8_t **base, size_t *mapped) {
  bool over_cap = false;
  void *p = map_once(size, align, skew, base, mapped, &over_cap);
  if (p) return p;
  _bk_purge_release_all();
  over_cap = false;
  p = map_once(size, align, skew, base, mapped, &over_cap);
  if (p) return p;
  if (over_cap) cap_refused(size);
  errno = ENOMEM;
  return NULL;
}

/* Short-lived working memory for brisk's own walks, taken beside the heaps
 * so that walking them does not change them. Not counted as mapped bytes. */
void *_bk_os_scratch_map(size_t size) {
  atomic_fetch_add_explicit(&os_calls[OS_MMAP], 1, memory_order_relaxed);
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

void _bk_os_scratch_unmap(void *p, size_t size) {
  if (p) unmap_raw(p, size);
}

void _bk_os_unmap(void *base, size_t size) {
  unmap_raw(base, size);
  atomic_fetch_sub_explicit(&mapped_bytes, size, memory_order_relaxed);
}

/* Returns whether the pages now read as zero: realtime mode skips the call,
 * and the kernel may refuse it (locked pages), so callers that trust purged
 * memory to be zero must ask. */
bool _bk_os_purge(void *p, size_t size) {
  if (_bk_opt.realtime) return false;
  uintptr_t start = align_up((uintptr_t)p, OS_PAGE_SIZE);
  uintptr_t end = ((uintptr_t)p + size) & ~(uintptr_t)(OS_PAGE_SIZE - 1);
  if (end <= start) return true;
  atomic_fetch_add_explicit(&os_calls[OS_MADVISE], 1, memory_order_relaxed);
  return madvise((void *)start, end - start, MADV_DONTNEED) == 0;
}

/* Grows or shrinks a mapping in place. */
bool _bk_os_resize(void *base, size_t old_size, size_t new_size) {
  if (_bk_opt.realtime) return false;
  if (new_size > old_size && !reserve_bytes(new_size - old_size)) return false;
  atomic_fetch_add_explicit(&os_calls[OS_MREMAP], 1, memory_order_relaxed);
  if (new_size < old_size) space_given_up();
  if (mremap(base, old_size, new_size, 0) == MAP_FAILED) {
    if (new_size > old_size) atomic_fetch_sub_explicit(&mapped_bytes, new_size - old_size, memory_order_relaxed);
    return false;
  }
  if (new_size < old_size) atomic_fetch_sub_explicit(&mapped_bytes, old_size - new_size, memory_order_relaxed);
  else space_taken();
  return true;
}

/* Moves a mapping's pages onto target, a mapping of new_size from
 * _bk_os_map_aligned that the move replaces: no byte is copied. */
bool _bk_os_move(void *base, size_t old_size, void *target, size_t new_size) {
  atomic_fetch_add_explicit(&os_calls[OS_MREMAP], 1, memory_order_relaxed);
  space_given_up();
  if (mremap(base, old_size, new_size, MREMAP_MAYMOVE | MREMAP_FIXED, target) == MAP_FAILED) return false;
  space_taken();
  atomic_fetch_sub_explicit(&mapped_bytes, old_size, memory_order_relaxed);
  return true;
}

uint64_t _bk_os_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t _bk_os_call_count(int which) { return atomic_load_explicit(&os_calls[which], memory_order_relaxed); }
size_t _bk_os_peak_mapped(void) { return atomic_load_explicit(&peak_mapped, memory_order_relaxed); }

static void vmessage(const char *prefix, const char *fmt, va_list ap) {
  char buf[1024];
  int n = snprintf(buf, sizeof buf, "brisk: %s", prefix);
  if (n < 0) n = 0;
  int m = vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
  size_t len = (size_t)n + (m > 0 ? (size_t)m : 0);
  if (len > sizeof buf - 2) len = sizeof buf - 2;
  buf[len++] = '\n';
  ssize_t w = write(2, buf, len);
  (void)w;
}

void _bk_warning(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vmessage("warning: ", fmt, ap);
  va_end(ap);
}

void _bk_fatal(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vmessage("error: ", fmt, ap);
  va_end(ap);
  abort();
}

/* ---- Public limits ------------------------------------------------------ */

void brisk_set_max_bytes(size_t n) { atomic_store(&max_bytes, n); }
size_t brisk_get_max_bytes(void) { return atomic_load(&max_bytes); }
size_t brisk_mapped_bytes(void) { return atomic_load(&mapped_bytes); }
