/* brisk's own view of its heap must agree with a harness's live blocks:
 * brisk_check_heap finds nothing, brisk_visit_blocks sees every live block
 * once and apart from the others, and the statistics add up. Call it with
 * no other thread allocating (visits skip other live threads' heaps). */
#ifndef BRISK_FUZZ_CHECK_H
#define BRISK_FUZZ_CHECK_H

#include "fuzz_common.h"

typedef struct {
  uintptr_t at;
  size_t size;
} fz_visited;
static fz_visited fz_seen[8192];
static size_t fz_seen_n;

static int fz_visit(void *block, size_t size, void *arg) {
  (void)arg;
  if (fz_seen_n < sizeof fz_seen / sizeof fz_seen[0]) fz_seen[fz_seen_n++] = (fz_visited){(uintptr_t)block, size};
  return 0;
}

static int fz_by_address(const void *a, const void *b) {
  uintptr_t x = ((const fz_visited *)a)->at, y = ((const fz_visited *)b)->at;
  return x < y ? -1 : x > y;
}

/* The visited block that holds [p, p + size), or NULL. */
static const fz_visited *fz_visited_holding(uintptr_t p, size_t size) {
  size_t lo = 0, hi = fz_seen_n; /* the last visited block at or below p */
  while (hi - lo > 1) {
    size_t mid = (lo + hi) / 2;
    if (fz_seen[mid].at <= p) lo = mid;
    else hi = mid;
  }
  return fz_seen_n && fz_seen[lo].at <= p && p + size <= fz_seen[lo].at + fz_seen[lo].size ? &fz_seen[lo] : NULL;
}

/* counted(b): b is a block of brisk's (not an object of a pool's slab). */
static void fz_check_brisk(const fz_set *live, bool (*counted)(const fz_block *)) {
  FZ_CHECK(brisk_check_heap() == BRISK_CHECK_OK, "brisk_check_heap: %s", brisk_check_message());
  fz_seen_n = 0;
  brisk_visit_blocks(fz_visit, NULL);
  FZ_CHECK(fz_seen_n < sizeof fz_seen / sizeof fz_seen[0], "brisk_visit_blocks: more than %zu blocks", fz_seen_n);
  qsort(fz_seen, fz_seen_n, sizeof fz_seen[0], fz_by_address);
  for (size_t k = 1; k < fz_seen_n; k++)
    FZ_CHECK(fz_seen[k - 1].at + fz_seen[k - 1].size <= fz_seen[k].at,
             "visited blocks %#lx (%zu B) and %#lx overlap", (unsigned long)fz_seen[k - 1].at, fz_seen[k - 1].size,
             (unsigned long)fz_seen[k].at);
  size_t in_use = 0, blocks = 0;
  for (int i = 0; i < live->n; i++) {
    const fz_block *b = &live->b[i];
    if (!counted(b)) continue;
    FZ_CHECK(fz_visited_holding((uintptr_t)b->p, b->size),
             "brisk_visit_blocks did not visit the live block %p (%zu B)", (void *)b->p, b->size);
    in_use += b->span;
    blocks++;
  }
  brisk_stats_t st = {.version = BRISK_STATS_VERSION};
  FZ_CHECK(brisk_stats_get(&st) == 0, "brisk_stats_get failed");
  uint64_t count = 0;
  for (int t = 0; t < BRISK_TIER_COUNT; t++) {
    const brisk_tier_stats_t *ts = &st.tiers[t];
    FZ_CHECK(ts->in_use <= ts->committed && ts->committed <= ts->reserved,
             "stats tier %d: in use %zu, committed %zu, reserved %zu", t, ts->in_use, ts->committed, ts->reserved);
    count += ts->live_blocks;
  }
  FZ_CHECK(st.in_use >= in_use && count >= blocks, "stats: %zu B in %llu blocks in use, but %zu B in %zu are live",
           st.in_use, (unsigned long long)count, in_use, blocks);
}

#endif
