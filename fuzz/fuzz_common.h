/* What the harnesses share: reading the input as numbers, sizes across
 * brisk's tiers, the per-block pattern and the checks every new block gets.
 * Header-only, so each harness is one translation unit. */
#ifndef BRISK_FUZZ_COMMON_H
#define BRISK_FUZZ_COMMON_H

#include <brisk.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#define FZ_KIB ((size_t)1024)
#define FZ_MIB ((size_t)1024 * 1024)
/* A request never goes past this (brisk maps 4 MiB segments; 64 MiB blocks
 * reach several of its huge-block paths without letting the fuzzer OOM). */
#define FZ_MAX_SIZE (64 * FZ_MIB)

/* A harness's verdict on brisk: the process must stop where the fault is
 * seen, with the input saved. fuzz_corrupt.c, whose checks run in a child
 * process, defines FZ_DIE to report through its exit status instead. */
#ifndef FZ_DIE
#define FZ_DIE() __builtin_trap()
#endif
#define FZ_FAIL(...)                                                                                              \
  do {                                                                                                            \
    fprintf(stderr, "fuzz: " __VA_ARGS__);                                                                        \
    fputc('\n', stderr);                                                                                          \
    FZ_DIE();                                                                                                     \
  } while (0)
#define FZ_CHECK(cond, ...)                                                                                       \
  do {                                                                                                            \
    if (!(cond)) FZ_FAIL(__VA_ARGS__);                                                                            \
  } while (0)

/* ---- The input ----------------------------------------------------------- */

/* Past its end the input reads as zeros, so every prefix of an input is a
 * valid input and the fuzzer's mutations never fall out of the grammar. */
typedef struct {
  const uint8_t *p;
  size_t n;
} fz_input;

static inline int fz_more(const fz_input *in) { return in->n > 0; }
static inline uint8_t fz_u8(fz_input *in) {
  if (!in->n) return 0;
  in->n--;
  return *in->p++;
}
static inline uint32_t fz_u16(fz_input *in) { return (uint32_t)fz_u8(in) | (uint32_t)fz_u8(in) << 8; }
static inline uint32_t fz_u32(fz_input *in) { return fz_u16(in) | fz_u16(in) << 16; }
/* 0 .. n-1 (n > 0), from as few bytes as n needs. */
static inline size_t fz_below(fz_input *in, size_t n) {
  if (n <= 256) return fz_u8(in) % n;
  if (n <= 65536) return fz_u16(in) % n;
  return fz_u32(in) % n;
}

/* ---- Sizes ---------------------------------------------------------------- */

/* A size class's bytes (multiples of 16 up to 128, then four classes per
 * doubling up to 1 MiB) or a tier's edge: where off-by-one mistakes live. */
static inline size_t fz_edge_size(fz_input *in) {
  static const size_t edges[] = {0, 8192, 65536, FZ_MIB, 2 * FZ_MIB, 4 * FZ_MIB, 8 * FZ_MIB};
  uint8_t pick = fz_u8(in);
  int delta = (int)(fz_u8(in) % 9) - 4;
  size_t base;
  if (pick < 8) base = 16 * (size_t)(pick + 1);
  else if (pick < 8 + 52) base = ((size_t)128 << ((pick - 8) / 4)) / 4 * (4 + (pick - 8) % 4);
  else base = edges[pick % (sizeof edges / sizeof edges[0])];
  if (delta < 0 && base < (size_t)-delta) return 0;
  return base + (size_t)(ptrdiff_t)delta;
}

/* A request size: every tier (small <= 8 KiB, medium <= 64 KiB, large
 * <= 1 MiB, huge above) and the edges between them, smaller ones more
 * often: each page a block touches costs a fault, and the fuzzer's time
 * goes where the bytes are. huge_ok = 0 keeps it at most 1 MiB (a
 * harness's budget of huge blocks is spent). */
static inline size_t fz_size(fz_input *in, int huge_ok) {
  size_t s;
  switch (fz_u8(in) & 15) {
  case 0:
  case 1: s = fz_u8(in); break;
  case 2:
  case 3:
  case 4:
  case 5: s = fz_below(in, 8 * FZ_KIB + 1); break;
  case 6:
  case 7: s = 8 * FZ_KIB + 1 + fz_below(in, 56 * FZ_KIB); break;
  case 8:
  case 9: s = 64 * FZ_KIB + 1 + fz_below(in, FZ_MIB - 64 * FZ_KIB); break;
  case 10:
  case 11:
  case 12: s = fz_edge_size(in); break;
  case 13:
  case 14: s = FZ_MIB + 1 + fz_below(in, 7 * FZ_MIB); break;
  default: s = FZ_MIB + 1 + fz_below(in, FZ_MAX_SIZE - FZ_MIB); break;
  }
  if (s > FZ_MAX_SIZE) s = FZ_MAX_SIZE;
  if (!huge_ok && s > FZ_MIB) s = FZ_MIB;
  return s;
}

/* A power of two, mostly small, up to 1 GiB (brisk is tested to there;
 * above 4 MiB an alignment costs address space, not memory). */
static inline size_t fz_align(fz_input *in) {
  uint8_t b = fz_u8(in);
  unsigned shift = (b & 0xe0) ? b % 17 : b % 31;
  return (size_t)1 << shift;
}

/* ---- The pattern ---------------------------------------------------------- *
 * Byte i of a block with seed s is fz_pat[(i + rot(s)) % 4096]: blocks with
 * different seeds differ almost everywhere, and a range is written or
 * compared with memcpy and memcmp. Big blocks are sampled (their first and
 * last 4 KiB and 64 bytes of every 32 KiB): touching every page of a 64 MiB
 * block on each step would leave the fuzzer nothing else to do. */
static uint8_t fz_pat[8192];

static inline void fz_pattern_init(void) {
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (size_t i = 0; i < 4096; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    fz_pat[i] = fz_pat[i + 4096] = (uint8_t)(x >> 24);
  }
}

/* Each input starts from fresh mappings (the harnesses end it with
 * brisk_collect): with transparent huge pages (BRISK_HUGEPAGES asks for them), the first touch of each
 * 2 MiB of them cleared a huge page, most of the time the fuzzers had. */
static inline void fz_setup(void) {
  prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
  fz_pattern_init();
}

static inline size_t fz_rot(uint32_t seed) { return (seed * 2654435761u) & 4095; }

#define FZ_FULL_LIMIT (64 * FZ_KIB)
#define FZ_EDGE (4 * FZ_KIB)
#define FZ_STRIDE (32 * FZ_KIB)
#define FZ_SAMPLE 64

/* Calls fn on each sampled range of a block of n bytes that starts below
 * `limit`, clipped to it; stops at the first nonzero answer and returns it. */
typedef size_t (*fz_range_fn)(uint8_t *p, size_t from, size_t to, uint32_t seed);

static inline size_t fz_ranges(uint8_t *p, size_t n, size_t limit, uint32_t seed, fz_range_fn fn) {
  if (limit > n) limit = n;
  if (n <= FZ_FULL_LIMIT) return limit ? fn(p, 0, limit, seed) : 0;
  size_t r = fn(p, 0, FZ_EDGE < limit ? FZ_EDGE : limit, seed);
  for (size_t at = FZ_STRIDE; !r && at + FZ_SAMPLE <= n - FZ_EDGE && at < limit; at += FZ_STRIDE)
    r = fn(p, at, at + FZ_SAMPLE < limit ? at + FZ_SAMPLE : limit, seed);
  if (!r && n - FZ_EDGE < limit) r = fn(p, n - FZ_EDGE, limit, seed);
  return r;
}

static inline size_t fz_fill_range(uint8_t *p, size_t from, size_t to, uint32_t seed) {
  while (from < to) {
    size_t at = (from + fz_rot(seed)) & 4095, len = to - from < 4096 ? to - from : 4096;
    memcpy(p + from, fz_pat + at, len);
    from += len;
  }
  return 0;
}

/* The first wrong offset + 1, or 0. */
static inline size_t fz_check_range(uint8_t *p, size_t from, size_t to, uint32_t seed) {
  while (from < to) {
    size_t at = (from + fz_rot(seed)) & 4095, len = to - from < 4096 ? to - from : 4096;
    if (memcmp(p + from, fz_pat + at, len))
      for (size_t i = 0; i < len; i++)
        if (p[from + i] != fz_pat[at + i]) return from + i + 1;
    from += len;
  }
  return 0;
}

static inline size_t fz_zero_range(uint8_t *p, size_t from, size_t to, uint32_t seed) {
  (void)seed;
  for (size_t i = from; i < to; i++)
    if (p[i]) return i + 1;
  return 0;
}

static inline void fz_fill(void *p, size_t n, uint32_t seed) { fz_ranges(p, n, n, seed, fz_fill_range); }

/* The block holds its pattern up to `limit` (its first `limit` bytes are
 * what a realloc must keep). */
static inline void fz_verify(const char *what, void *p, size_t n, size_t limit, uint32_t seed) {
  size_t bad = fz_ranges(p, n, limit, seed, fz_check_range);
  if (bad) {
    uint8_t *b = p;
    size_t at = bad - 1;
    FZ_FAIL("%s: block %p of %zu bytes: byte %zu is 0x%02x, expected 0x%02x", what, p, n, at, b[at],
            fz_pat[(at + fz_rot(seed)) & 4095]);
  }
}

static inline void fz_verify_zero(const char *what, void *p, size_t n) {
  size_t bad = fz_ranges(p, n, n, 0, fz_zero_range);
  if (bad)
    FZ_FAIL("%s: block %p of %zu bytes: byte %zu is 0x%02x, not 0", what, p, n, bad - 1, ((uint8_t *)p)[bad - 1]);
}

/* ---- Live blocks ---------------------------------------------------------- */

typedef struct {
  uint8_t *p;
  size_t size; /* asked for: the bytes that hold the pattern */
  size_t span; /* bytes the block owns (usable size, or the pool's object size) */
  uint32_t seed;
  int owner; /* the harness's own meaning: which heap or pool */
  int flags;
} fz_block;

/* The blocks a harness holds, with their requested bytes in all. */
#define FZ_MAX_LIVE 192
typedef struct {
  fz_block b[FZ_MAX_LIVE];
  int n;
  size_t bytes;
} fz_set;

/* Fills the block with its pattern and holds it. */
static inline void fz_add(fz_set *s, void *p, size_t size, size_t span, int owner, int flags, uint32_t seed) {
  fz_fill(p, size, seed);
  s->b[s->n++] = (fz_block){p, size, span, seed, owner, flags};
  s->bytes += size;
}

static inline fz_block fz_drop(fz_set *s, int i) {
  fz_block gone = s->b[i];
  s->b[i] = s->b[--s->n];
  s->bytes -= gone.size;
  return gone;
}

/* The alignment malloc owes a block of `size` bytes: 16 from 16 bytes up
 * (brisk's promise, as glibc's), else the largest power of two in it. */
static inline size_t fz_malloc_align(size_t size, size_t asked) {
  size_t natural = size >= 16 ? 16 : size >= 8 ? 8 : size >= 4 ? 4 : size >= 2 ? 2 : 1;
  return asked > natural ? asked : natural;
}

/* A fresh block: in brisk's memory, aligned to `align`, as big as asked,
 * and overlapping no live block. */
static inline void fz_check_new(const char *what, const fz_block *live, int count, void *q, size_t size,
                                size_t align, size_t span) {
  uintptr_t a = (uintptr_t)q;
  FZ_CHECK(q != NULL, "%s(%zu): NULL", what, size);
  FZ_CHECK(brisk_owns(q), "%s(%zu) = %p: not brisk's memory", what, size, q);
  FZ_CHECK(a % align == 0, "%s(%zu) = %p: not aligned to %zu", what, size, q, align);
  FZ_CHECK(span >= (size ? size : 1), "%s(%zu) = %p: usable size %zu", what, size, q, span);
  for (int i = 0; i < count; i++) {
    uintptr_t b = (uintptr_t)live[i].p;
    if (a < b + live[i].span && b < a + span)
      FZ_FAIL("%s(%zu) = %p (%zu bytes) overlaps the live block %p (%zu bytes, asked %zu)", what, size, q, span,
              live[i].p, live[i].span, live[i].size);
  }
}

#endif
