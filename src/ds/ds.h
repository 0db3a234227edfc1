/* The data-structure layer: what every layer above shares and that holds
 * no allocator policy. This header: compiler hints, the two ways a field is
 * shared between threads, arithmetic helpers and assertions. The lists
 * are in list.h, quarantine.h and tagged_stack.h. */
#ifndef BRISK_DS_H
#define BRISK_DS_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "os/os.h"

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define BRISK_NOINLINE __attribute__((noinline))

/* Fields one thread writes and other threads only read for statistics,
 * checks and visits, where a stale value is fine: the writer stores with
 * PUBLISH (a relaxed atomic store, a plain store on x86 and arm64) and
 * reads its own field plainly; other threads read with PEEK (relaxed).
 * Relaxed is enough because no reader acts on the value beyond reporting
 * it, and the readers that must see a consistent state (visits, checks)
 * take the lock or ownership that orders it. */
#define PUBLISH(field, value) __atomic_store_n(&(field), (value), __ATOMIC_RELAXED)
#define PEEK(field) __atomic_load_n(&(field), __ATOMIC_RELAXED)

/* A PEEK of a field one operation uses once (a compare of the secure free
 * check, which other threads make while the owner PUBLISHes): outside
 * ThreadSanitizer's builds a plain read, which the compiler may take as
 * the operation's memory operand instead of a load of its own (it folds no
 * atomic load). The machine load is the same aligned word either way. */
#if defined(__SANITIZE_THREAD__)
#define PEEK_OPERAND(field) PEEK(field)
#else
#define PEEK_OPERAND(field) (field)
#endif

/* The owner's counter steps on the fast paths (a page's used count, the
 * heap's counters): PUBLISH(field, field + d), but in one instruction. A
 * relaxed atomic store keeps the compiler from fusing the load, the add
 * and the store, which costs two instructions per malloc and per free; so
 * outside ThreadSanitizer's builds the step is a plain add to memory. It is
 * the same machine store PUBLISH makes (an aligned word, never torn on the
 * targets brisk supports), and the readers' PEEKs stay relaxed loads.
 * Evaluates to the new value. */
#if defined(__SANITIZE_THREAD__)
/* (A statement expression: a step whose value is not used raises no
 * "comma expression has no effect" warning.) */
#define PUBLISH_ADD(field, d)                                                                                     \
  __extension__({                                                                                                 \
    PUBLISH(field, (field) + (d));                                                                                \
    (field);                                                                                                      \
  })
#else
#define PUBLISH_ADD(field, d) ((field) += (d))
#endif

static inline size_t align_up(size_t n, size_t a) { return (n + a - 1) & ~(a - 1); }
static inline bool is_power_of_two(size_t n) { return n && !(n & (n - 1)); }

/* An alignment the aligned functions accept: a power of two; otherwise
 * false, errno = EINVAL. */
static inline bool alignment_valid(size_t align) {
  if (likely(is_power_of_two(align))) return true;
  errno = EINVAL;
  return false;
}

/* count * size for calloc and reallocarray; on overflow false, errno = ENOMEM. */
static inline bool size_product(size_t count, size_t size, size_t *total) {
  if (likely(!__builtin_mul_overflow(count, size, total))) return true;
  errno = ENOMEM;
  return false;
}

/* The first byte of [from, to) that is not `byte`, or NULL: the checked
 * library's patterns, compared a word at a time. */
static inline const uint8_t *first_byte_not(const uint8_t *from, const uint8_t *to, uint8_t byte) {
  uint64_t word = 0x0101010101010101ull * byte;
  while (from < to && ((uintptr_t)from & 7)) {
    if (*from != byte) return from;
    from++;
  }
  for (uint64_t w; from + 8 <= to; from += 8) {
    memcpy(&w, from, sizeof w); /* a load: the bytes may hold any type */
    if (w != word) break;
  }
  for (; from < to; from++)
    if (*from != byte) return from;
  return NULL;
}

/* Assertions in two tiers. BRISK_ASSERT: cheap invariants (a comparison or
 * two), on in debug builds (BRISK_DEBUG). BRISK_ASSERT_FULL: checks that
 * walk lists or pages, on only with BRISK_DEBUG_FULL. The sanitizer builds
 * turn both on; release builds compile neither. */
#ifndef BRISK_DEBUG
#define BRISK_DEBUG 0
#endif
#ifndef BRISK_DEBUG_FULL
#define BRISK_DEBUG_FULL 0
#endif
#define BRISK_ASSERT_IF(on, cond)                                                                                 \
  do {                                                                                                            \
    if ((on) && unlikely(!(cond))) _bk_fatal("internal check failed: %s (%s:%d)", #cond, __FILE__, __LINE__);     \
  } while (0)
#define BRISK_ASSERT(cond) BRISK_ASSERT_IF(BRISK_DEBUG || BRISK_DEBUG_FULL, cond)
#define BRISK_ASSERT_FULL(cond) BRISK_ASSERT_IF(BRISK_DEBUG_FULL, cond)

#endif
