/* Statistics printed: the table (brisk_stats_print, BRISK_SHOW_STATS), the
 * JSON (brisk_stats_json, BRISK_STATS_JSON), glibc's malloc_stats, and the
 * reports at exit. Printed with one formatter into a stack buffer and
 * written in one go: no stdio locks, no allocation. */
#include "extra/extra.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static const char *const tier_names[BRISK_TIER_COUNT] = {"small", "medium", "large", "huge"};

/* The one formatter behind both the table and the JSON. */
typedef struct out {
  char *buf;
  size_t len, pos;
} out_t;

static void put(out_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(out_t *o, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(o->pos < o->len ? o->buf + o->pos : NULL, o->pos < o->len ? o->len - o->pos : 0, fmt, ap);
  va_end(ap);
  if (n > 0) o->pos += (size_t)n;
}

static void format_json(out_t *o, const brisk_stats_t *st) {
  put(o,
      "{\"version\":%u,\"requested\":%llu,\"in_use\":%zu,\"committed\":%zu,\"reserved\":%zu,"
      "\"cached\":%zu,\"mapped\":%zu,\"peak_reserved\":%zu,\"tiers\":{",
      st->version, (unsigned long long)st->requested, st->in_use, st->committed, st->reserved, st->cached,
      st->mapped, st->peak_reserved);
  for (int t = 0; t < BRISK_TIER_COUNT; t++)
    put(o, "%s\"%s\":{\"live_blocks\":%llu,\"in_use\":%zu,\"committed\":%zu,\"reserved\":%zu}", t ? "," : "",
        tier_names[t], (unsigned long long)st->tiers[t].live_blocks, st->tiers[t].in_use, st->tiers[t].committed,
        st->tiers[t].reserved);
  put(o, "},\"classes\":[");
  bool first = true;
  for (unsigned c = 1; c < st->class_count; c++) {
    if (!st->class_live_blocks[c]) continue;
    put(o, "%s{\"size\":%zu,\"live_blocks\":%llu}", first ? "" : ",", st->class_size[c],
        (unsigned long long)st->class_live_blocks[c]);
    first = false;
  }
  put(o,
      "],\"os\":{\"mmap\":%llu,\"munmap\":%llu,\"madvise\":%llu,\"mremap\":%llu},"
      "\"cache\":{\"hits\":%llu,\"misses\":%llu},"
      "\"heaps\":{\"thread\":%u,\"explicit\":%u,\"threads_exited\":%llu,"
      "\"abandoned_segments\":%u,\"abandoned_bytes\":%zu}}",
      (unsigned long long)st->mmap_calls, (unsigned long long)st->munmap_calls,
      (unsigned long long)st->madvise_calls, (unsigned long long)st->mremap_calls,
      (unsigned long long)st->cache_hits, (unsigned long long)st->cache_misses, st->thread_heaps,
      st->explicit_heaps, (unsigned long long)st->threads_exited, st->abandoned_segments, st->abandoned_bytes);
}

size_t brisk_stats_json(char *buf, size_t len) {
  brisk_stats_t st = {.version = BRISK_STATS_VERSION};
  brisk_stats_get(&st);
  if (!buf) len = 0; /* the length it needs, as snprintf(NULL, n) gives */
  out_t o = {buf, len, 0};
  format_json(&o, &st);
  if (buf && len) buf[o.pos < len ? o.pos : len - 1] = '\0';
  return o.pos;
}

static void format_table(out_t *o, const brisk_stats_t *st) {
  put(o, "brisk statistics\n");
  put(o, "  %-8s %14s %14s %14s %14s\n", "tier", "live blocks", "in use", "committed", "reserved");
  for (int t = 0; t < BRISK_TIER_COUNT; t++)
    put(o, "  %-8s %14llu %14zu %14zu %14zu\n", tier_names[t], (unsigned long long)st->tiers[t].live_blocks,
        st->tiers[t].in_use, st->tiers[t].committed, st->tiers[t].reserved);
  put(o, "  %-8s %14s %14zu %14zu %14zu\n", "total", "", st->in_use, st->committed, st->reserved);
  put(o, "  requested %llu bytes in all; cached %zu; mapped now %zu, at peak %zu\n",
      (unsigned long long)st->requested, st->cached, st->mapped, st->peak_reserved);
  put(o, "  os calls: mmap %llu, munmap %llu, madvise %llu, mremap %llu\n", (unsigned long long)st->mmap_calls,
      (unsigned long long)st->munmap_calls, (unsigned long long)st->madvise_calls,
      (unsigned long long)st->mremap_calls);
  put(o, "  recycle cache: %llu hits, %llu misses\n", (unsigned long long)st->cache_hits,
      (unsigned long long)st->cache_misses);
  put(o, "  heaps: %u thread, %u explicit; %llu threads exited; %u abandoned segments (%zu bytes)\n",
      st->thread_heaps, st->explicit_heaps, (unsigned long long)st->threads_exited, st->abandoned_segments,
      st->abandoned_bytes);
  put(o, "  %10s %14s\n", "class", "live blocks");
  for (unsigned c = 1; c < st->class_count; c++)
    if (st->class_live_blocks[c])
      put(o, "  %10zu %14llu\n", st->class_size[c], (unsigned long long)st->class_live_blocks[c]);
}

/* Printed with write(2) from a stack buffer: no stdio locks, no allocation
 * (this also runs at exit, after stdio may be gone). */
static void emit(int fd, void (*format)(out_t *, const brisk_stats_t *), const brisk_stats_t *st) {
  char buf[8192];
  out_t o = {buf, sizeof buf, 0};
  format(&o, st);
  _bk_os_write_all(fd, buf, o.pos < sizeof buf ? o.pos : sizeof buf - 1);
}

/* glibc's lines first, for readers that know them, then brisk's table. */
static void format_malloc_stats(out_t *o, const brisk_stats_t *st) {
  mallinfo_fields_t mi;
  _bk_stats_mallinfo_from(st, 0, &mi);
  put(o, "Arena 0:\nsystem bytes     = %10zu\nin use bytes     = %10zu\n", mi.arena, mi.uordblks);
  put(o, "Total (incl. mmap):\nsystem bytes     = %10zu\nin use bytes     = %10zu\n", mi.arena + mi.hblkhd,
      mi.uordblks + mi.hblkhd);
  put(o, "mmap regions     = %10zu\nmmap bytes       = %10zu\n", mi.hblks, mi.hblkhd);
  format_table(o, st);
}

void _bk_stats_print_malloc_stats(void) {
  brisk_stats_t st = {.version = BRISK_STATS_VERSION};
  brisk_stats_get(&st);
  fflush(stderr);
  emit(2, format_malloc_stats, &st);
}

void brisk_stats_print(FILE *out) {
  brisk_stats_t st = {.version = BRISK_STATS_VERSION};
  brisk_stats_get(&st);
  FILE *f = out ? out : stderr;
  fflush(f);
  emit(fileno(f), format_table, &st);
}

/* Programs may close stderr on their way out (coreutils do): the report
 * at exit writes to a copy of it taken at start when a report is wanted. */
static int report_fd = -1;

void _bk_report_prepare(void) {
  if (_bk_opt.show_stats || _bk_opt.leak_report) report_fd = _bk_os_dup(2);
}

/* BRISK_SHOW_STATS, BRISK_STATS_JSON and BRISK_LEAK_REPORT at exit. */
void _bk_report_at_exit(void) {
  int fd = report_fd >= 0 ? report_fd : 2;
  if (_bk_opt.show_stats) {
    brisk_stats_t st = {.version = BRISK_STATS_VERSION};
    brisk_stats_get(&st);
    emit(fd, format_table, &st);
  }
  const char *json = getenv("BRISK_STATS_JSON");
  if (json && *json) {
    brisk_stats_t st = {.version = BRISK_STATS_VERSION};
    brisk_stats_get(&st);
    /* "%p" becomes the process id: one file per process of a tree. */
    static char path[4096];
    size_t n = 0;
    for (const char *c = json; *c && n + 24 < sizeof path; c++) {
      if (c[0] == '%' && c[1] == 'p') {
        n += (size_t)snprintf(path + n, sizeof path - n, "%ld", _bk_os_process_id());
        c++;
      } else {
        path[n++] = *c;
      }
    }
    path[n] = '\0';
    json = path;
    int fd = _bk_os_create_file(json);
    if (fd >= 0) {
      emit(fd, format_json, &st);
      _bk_os_close(fd);
    } else {
      _bk_warning("cannot write the stats to %s", json);
    }
  }
  if (_bk_opt.leak_report) _bk_leak_report(fd);
}
