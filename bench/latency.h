/* latency.h: timing single calls (the ring's malloc and free latency).
 *
 *   ticks()            the cheapest clock there is (the TSC on x86-64)
 *   ticks_to_ns()      ns per tick, measured once over 20 ms
 *   ticks_overhead()   what a back-to-back pair of ticks() reads, in ticks
 *   ticks_quantum()    the clock's step: the TSC of some machines (VMs) does
 *                      not advance by 1 but by ~24 ticks at a time (10 ns)
 *   hist_t             raw tick differences, exact below 32 ticks, then 16
 *                      buckets per power of two; hist_ns() gives percentiles,
 *                      hist_mean_ns() the mean, both in ns, timer cost removed
 *
 * Why not just read the bucket a percentile falls in: with a clock that steps
 * by 10 ns, every sample is a multiple of 10 ns and P50 snaps to one of a few
 * values. A call that takes x ticks reads as the step below or the step above
 * x, with odds set by where x falls between them (the clock's phase at the
 * first reading is random), so the samples still carry x on average. hist_ns()
 * spreads each sample evenly over one step (or its bucket, if wider) around
 * its value and interpolates the percentile in that spread: P50 then moves
 * smoothly with the calls' real cost instead of jumping by a step. The mean
 * needs no such help. The timer's own cost is subtracted from the result (the
 * mean of back-to-back readings, not their minimum, which snaps too). */
#ifndef BENCH_LATENCY_H
#define BENCH_LATENCY_H

#include "common.h"
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

static inline uint64_t ticks(void) {
#if defined(__x86_64__)
  _mm_lfence();
  return __rdtsc();
#else
  return now_ns();
#endif
}

static double ticks_to_ns(void) {
  static double ratio;
  if (ratio == 0) {
    uint64_t n0 = now_ns(), t0 = ticks();
    sleep_ms(20);
    uint64_t n1 = now_ns(), t1 = ticks();
    ratio = t1 > t0 ? (double)(n1 - n0) / (double)(t1 - t0) : 1.0;
  }
  return ratio;
}

/* The largest step c (4 to 64 ticks) that 99% of readings of varied lengths
 * are a multiple of, within a tick; 1 when there is none (the clock counts
 * every tick). Measured once, before any thread starts. */
static double ticks_quantum(void) {
  static double quantum;
  enum { N = 4000 };
  if (quantum == 0) {
    static uint64_t d[N];
    volatile unsigned sink = 0;
    for (int i = 0; i < N; i++) {
      uint64_t a = ticks();
      for (int j = 0; j < i % 97; j++) sink += (unsigned)j;
      d[i] = ticks() - a;
      (void)sink; /* clang: set but never read (it is volatile: the loop stays) */
    }
    quantum = 1;
    for (double c = 64; c >= 4 && quantum == 1; c -= 0.05) {
      int fit = 0;
      for (int i = 0; i < N; i++) {
        double k = (double)(uint64_t)((double)d[i] / c + 0.5), off = (double)d[i] - k * c;
        fit += off <= 1.0 && off >= -1.0;
      }
      if (fit >= N * 99 / 100) quantum = c;
    }
  }
  return quantum;
}

/* The mean of back-to-back readings (outliers dropped): subtracted from
 * every figure. About 20 ns. */
static double ticks_overhead(void) {
  static double mean = -1;
  enum { N = 4000 };
  if (mean < 0) {
    static uint64_t d[N];
    uint64_t least = ~0ull, sum = 0, n = 0;
    for (int i = 0; i < N; i++) {
      uint64_t a = ticks(), b = ticks();
      d[i] = b - a;
      if (d[i] < least) least = d[i];
    }
    double cut = (double)least + 3 * ticks_quantum();
    if (cut < 2.0 * (double)least) cut = 2.0 * (double)least;
    for (int i = 0; i < N; i++)
      if ((double)d[i] <= cut) sum += d[i], n++;
    mean = (double)sum / (double)n;
  }
  return mean;
}

/* ---- histogram of raw tick differences ---- */

#define HIST_BUCKETS (32 + 16 * 60)
typedef struct {
  uint64_t count[HIST_BUCKETS];
  uint64_t n, max, sum;
} hist_t;

static inline int hist_bucket(uint64_t v) {
  if (v < 32) return (int)v;
  int e = 63 - __builtin_clzll(v); /* e >= 5 */
  return 32 + (e - 5) * 16 + (int)((v >> (e - 4)) & 15);
}

/* The values bucket b holds, [lo, lo + width), spread over at least one
 * clock step: the samples are taken to lie evenly in [*from, *to). */
static void hist_span(int b, double quantum, double *from, double *to) {
  double lo = b, width = 1;
  if (b >= 32) {
    int e = (b - 32) / 16 + 5, sub = (b - 32) % 16;
    lo = (double)((uint64_t)(16 + sub) << (e - 4));
    width = (double)((uint64_t)1 << (e - 4));
  }
  double mid = lo + (width - 1) / 2, s = width > quantum ? width : quantum;
  *from = mid - s / 2;
  *to = mid + s / 2;
}

static inline void hist_add(hist_t *h, uint64_t v) {
  h->count[hist_bucket(v)]++;
  h->n++;
  h->sum += v;
  if (v > h->max) h->max = v;
}

static void hist_merge(hist_t *into, const hist_t *h) {
  for (int i = 0; i < HIST_BUCKETS; i++) into->count[i] += h->count[i];
  into->n += h->n;
  into->sum += h->sum;
  if (h->max > into->max) into->max = h->max;
}

/* How many samples lie below x ticks, with each spread over its span. */
static double hist_below(const hist_t *h, double x, double quantum) {
  double below = 0, from, to;
  for (int b = 0; b < HIST_BUCKETS; b++) {
    if (!h->count[b]) continue;
    hist_span(b, quantum, &from, &to);
    if (x >= to)
      below += (double)h->count[b];
    else if (x > from)
      below += (double)h->count[b] * (x - from) / (to - from);
  }
  return below;
}

static double ticks_minus_overhead_ns(double t) {
  t -= ticks_overhead();
  return (t > 0 ? t : 0) * ticks_to_ns();
}

/* The q-quantile (0..1) in ns, interpolated as said at the top; q = 1 is
 * the largest sample as read. */
static double hist_ns(const hist_t *h, double q) {
  if (!h->n) return 0;
  if (q >= 1) return ticks_minus_overhead_ns((double)h->max);
  double quantum = ticks_quantum(), want = q * (double)h->n;
  double lo = -quantum, hi = (double)h->max + quantum;
  for (int i = 0; i < 64; i++) { /* bisection: hist_below() only grows with x */
    double mid = (lo + hi) / 2;
    if (hist_below(h, mid, quantum) < want)
      lo = mid;
    else
      hi = mid;
  }
  return ticks_minus_overhead_ns((lo + hi) / 2);
}

static double hist_mean_ns(const hist_t *h) {
  return h->n ? ticks_minus_overhead_ns((double)h->sum / (double)h->n) : 0;
}

#endif
