/* wide.c: wide random sizes, 16 B to 4 MiB, many blocks live.
 *
 * `threads` threads (2), each with a window of `window` live blocks (256).
 * A step replaces a random block of the window: check and free the old one,
 * malloc a new size, touch it. Sizes are log-uniform: one of the 18 powers of
 * two from 16 B to 2 MiB chosen evenly, then a size uniform between it and
 * twice it (so a third of the blocks are 64 KiB or more, a ninth 1 MiB or
 * more; the mean is about 350 KiB and the window holds about 90 MiB per
 * thread). Drawing sizes uniformly in 16 B-4 MiB instead would make nearly
 * every block a large one.
 *   touch=ends:  the tag in the first and last 8 bytes only;
 *   touch=pages: also one 8-byte word on every 4 KiB page, so every page is
 *                faulted in; every word is checked before the free.
 * Figures: k ops/s (one op = free + malloc + touch), peak RSS (VmHWM), and
 * `mallocs` (every malloc of the run, the window's too: run.py divides the
 * syscall counts of its strace run by it).
 *
 *   wide threads=2 window=256 touch=pages ms=1000 */
#include "common.h"

#define PAGE 4096

typedef struct {
  wstat_t st;
  int id, pages;
  size_t window;
  uint64_t mallocs;
  check_t c;
} arg_t;

static size_t wide_size(rng_t *r) {
  unsigned k = 4 + (unsigned)(rng_next(r) % 18); /* 16 B .. 2 MiB */
  return ((size_t)1 << k) + rng_next(r) % ((size_t)1 << k);
}

static void touch(unsigned char *p, size_t n, uint64_t tag, int pages, check_t *c) {
  stamp(p, n, tag, c);
  if (pages)
    for (size_t off = PAGE; off + 8 <= n - 8; off += PAGE) {
      uint64_t w = tag ^ off;
      memcpy(p + off, &w, 8);
    }
}

/* touch=pages: the word on every page, then the tags. */
static int pages_ok(const void *v, size_t n, uint64_t tag, check_t *c) {
  const unsigned char *p = v;
  for (size_t off = PAGE; off + 8 <= n - 8; off += PAGE) {
    uint64_t w;
    memcpy(&w, p + off, 8);
    if (w != (tag ^ off)) {
      bench_error("block %p of %zu bytes: page at %zu overwritten", v, n, off);
      return 0;
    }
  }
  return stamp_ok(p, n, tag, c);
}

static void *worker(void *v) {
  arg_t *a = v;
  rng_t r = {(uint64_t)a->id * 6151 + 5};
  size_t w = a->window;
  block_ok_fn ok = a->pages ? pages_ok : stamp_ok;
  slots_t s;
  slots_init(&s, w);
  void **blk = s.blk;
  size_t *len = s.len;
  uint64_t *tag = s.tag, seq = (uint64_t)a->id << 40, ops = 0;
  for (size_t i = 0; i < w; i++) {
    len[i] = wide_size(&r);
    tag[i] = make_tag(++seq);
    blk[i] = xmalloc(len[i]);
    touch(blk[i], len[i], tag[i], a->pages, &a->c);
  }
  gate();
  while (!stopped()) {
    size_t i = rng_next(&r) % w;
    ok(blk[i], len[i], tag[i], &a->c);
    free(blk[i]);
    len[i] = wide_size(&r);
    tag[i] = make_tag(++seq);
    blk[i] = xmalloc(len[i]);
    touch(blk[i], len[i], tag[i], a->pages, &a->c);
    ops++;
  }
  a->st.ops = ops;
  a->st.t_end = now_ns();
  a->mallocs = w + ops;
  slots_done(&s, ok, &a->c);
  return NULL;
}

int main(int argc, char **argv) {
  args_init(argc, argv);
  int threads = (int)arg_int("threads", 2);
  size_t window = (size_t)arg_int("window", 256);
  long ms = (long)arg_int("ms", 1000);
  const char *how = arg_str("touch", "ends");
  args_done();
  int pages = strcmp(how, "pages") == 0;
  if ((!pages && strcmp(how, "ends") != 0) || threads < 1 || window < 1) {
    fprintf(stderr, "touch must be ends or pages; threads, window >= 1\n");
    return 64;
  }

  json_begin("wide");
  rss_peak_reset();
  arg_t *args = xcalloc64((size_t)threads, sizeof *args);
  for (int t = 0; t < threads; t++) {
    args[t].id = t;
    args[t].pages = pages;
    args[t].window = window;
  }
  uint64_t ops, mallocs = 0;
  double secs = run_timed(threads, worker, args, sizeof *args, ms, &ops);
  for (int t = 0; t < threads; t++) {
    check_merge(&args[t].c);
    mallocs += args[t].mallocs;
  }
  char label[64];
  snprintf(label, sizeof label, "touch %s, %d thr", how, threads);
  json_case(label, threads, -1);
  json_metric("kops", (double)ops / secs / 1e3);
  json_metric("peak_rss_mb", (double)rss_peak_kb() / 1024);
  json_metric("mallocs", (double)mallocs);
  json_case_end();
  free(args);
  return bench_finish();
}
