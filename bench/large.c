/* large.c: workload 5, large buffers.
 *
 * Buffers of min-max bytes (1-32 MiB; random sizes), each written in full (memset) and
 * checked (its tags and one byte per page) before it is freed.
 *   first touch: `count` buffers allocated and written while all stay live,
 *                so every page is new to the process; then all freed.
 *   recycled:    for ms milliseconds, one buffer at a time: malloc, write,
 *                check, free. An allocator that keeps freed memory warm
 *                serves these without page faults.
 * Figures: GB/s written (malloc, memset, check and free all timed), minor page faults
 * per MiB, and the RSS once everything is freed: at once and after settle_ms.
 * Cases are named by the phase and the size range ("recycled, 5-25 MiB").
 *
 *   large count=16 ms=1000 settle_ms=1000
 *   large min=5M max=25M count=8 ms=1000 settle_ms=1000 */
#include "common.h"

static size_t g_page;

/* Written by fill(); spot-check one byte per page besides the tags. */
static int buffer_ok(const unsigned char *p, size_t n, uint64_t tag, check_t *c) {
  unsigned char want = (unsigned char)(tag >> 56);
  for (size_t i = g_page; i + 8 < n; i += g_page)
    if (p[i] != want) {
      bench_error("buffer %p of %zu bytes: byte %zu overwritten", (void *)p, n, i);
      return 0;
    }
  return stamp_ok(p, n, tag, c);
}

static char g_range[64]; /* "1-32 MiB" */

static void start_case(const char *phase) {
  char name[96];
  snprintf(name, sizeof name, "%s, %s", phase, g_range);
  json_case(name, 1, -1);
}

static void report(const char *phase, double bytes, double secs, long faults) {
  start_case(phase);
  json_metric("gbps", bytes / secs / 1e9);
  json_metric("faults_per_mib", (double)faults / (bytes / (double)MiB));
  json_case_end();
}

int main(int argc, char **argv) {
  args_init(argc, argv);
  int count = (int)arg_int("count", 16);
  long ms = (long)arg_int("ms", 1000);
  long settle = (long)arg_int("settle_ms", 1000);
  size_t lo = (size_t)arg_int("min", 1 * MiB), hi = (size_t)arg_int("max", 32 * MiB);
  args_done();

  g_page = (size_t)sysconf(_SC_PAGESIZE);
  if (lo < 16 || hi < lo) {
    fprintf(stderr, "need 16 <= min <= max\n");
    return 64;
  }
  char a[32], b[32];
  if (lo % MiB == 0 && hi % MiB == 0)
    snprintf(g_range, sizeof g_range, "%zu-%zu MiB", lo / MiB, hi / MiB);
  else
    snprintf(g_range, sizeof g_range, "%s-%s", size_label(a, sizeof a, (long long)lo),
             size_label(b, sizeof b, (long long)hi));
  check_t c = {0};
  rng_t r = {99};
  size_t *size = xmalloc(sizeof *size * (size_t)count);
  unsigned char **buf = xmalloc(sizeof *buf * (size_t)count);
  for (int i = 0; i < count; i++) size[i] = rng_range(&r, lo, hi);
  json_begin("large");

  /* first touch */
  double bytes = 0;
  long f0 = minor_faults();
  uint64_t t0 = now_ns();
  for (int i = 0; i < count; i++) {
    buf[i] = xmalloc(size[i]);
    fill(buf[i], size[i], make_tag((uint64_t)i + 1), &c);
    bytes += (double)size[i];
  }
  for (int i = 0; i < count; i++) {
    buffer_ok(buf[i], size[i], make_tag((uint64_t)i + 1), &c);
    free(buf[i]);
  }
  report("first touch", bytes, (double)(now_ns() - t0) / 1e9, minor_faults() - f0);

  /* recycled */
  bytes = 0;
  f0 = minor_faults();
  t0 = now_ns();
  uint64_t deadline = t0 + (uint64_t)ms * 1000000u, seq = 1000;
  do {
    for (int i = 0; i < count; i++) {
      uint64_t tag = make_tag(++seq);
      unsigned char *p = xmalloc(size[i]);
      fill(p, size[i], tag, &c);
      buffer_ok(p, size[i], tag, &c);
      free(p);
      bytes += (double)size[i];
      if (now_ns() >= deadline) break;
    }
  } while (now_ns() < deadline);
  report("recycled", bytes, (double)(now_ns() - t0) / 1e9, minor_faults() - f0);

  /* what stays resident once the phase is over */
  free(size);
  free(buf);
  start_case("after the phase");
  json_metric("rss_after_mb", (double)rss_now_kb() / 1024);
  sleep_ms(settle);
  json_metric("rss_settled_mb", (double)rss_now_kb() / 1024);
  json_metric("peak_rss_mb", (double)rss_peak_kb() / 1024);
  json_case_end();
  check_merge(&c);
  return bench_finish();
}
