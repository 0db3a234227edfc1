/* Statistics printed: the table (brisk_stats_print, BRISK_SHOW_STATS), the
 * JSON (brisk_stats_json, BRISK_STATS_JSON), glibc's malloc_stats, and the
 * reports at exit. Printed with one formatter into a stack buffer and
 * written in one go: no stdio locks, no allocation. */
#include "extra/extra.h"

#include <stdarg.h>
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *const tier_names[BRISK_TIER_COUNT] = {"small", "medium", "large", "huge"};

/* The one formatter behind both the table and the JSON. `labelled`: the
 * JSON names the process (the reports at exit, one file per process). */
typedef struct out {
  char *buf;
  size_t len, pos;
  bool labelled;
} out_t;

static void put(out_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(out_t *o, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(o->pos < o->len ? o->buf + o->pos : NULL, o->pos < o->len ? o->len - o->pos : 0, fmt, ap);
  va_end(ap);
  if (n > 0) o->pos += (size_t)n;
}

/* Sizes in tables read as people write them: 512 B, 12.5 KiB, 3.0 MiB. */
typedef struct human {
  char s[24];
} human_t;

static human_t human(size_t bytes) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  human_t h;
  double v = (double)bytes;
  unsigned u = 0;
  while (v >= 1024 && u + 1 < sizeof units / sizeof *units) {
    v /= 1024;
    u++;
  }
  if (u == 0) snprintf(h.s, sizeof h.s, "%zu B", bytes);
  else snprintf(h.s, sizeof h.s, "%.1f %s", v, units[u]);
  return h;
}

/* The process a report comes from: its id and the name it was started as
 * (glibc's program_invocation_short_name, no system call), JSON-safe. */
static const char *command_name(void) {
  static char name[64];
  const char *c = program_invocation_short_name ? program_invocation_short_name : "?";
  size_t n = 0;
  for (; c[n] && n + 1 < sizeof name; n++)
    name[n] = c[n] == '"' || c[n] == '\\' || (unsigned char)c[n] < 0x20 ? '?' : c[n];
  name[n] = '\0';
  return name;
}

static void format_json(out_t *o, const brisk_stats_t *st) {
  if (o->labelled) put(o, "{\"pid\":%ld,\"command\":\"%s\",", _bk_os_process_id(), command_name());
  put(o,
      "%s\"version\":%u,\"requested\":%llu,\"in_use\":%zu,\"committed\":%zu,\"reserved\":%zu,"
      "\"cached\":%zu,\"mapped\":%zu,\"peak_reserved\":%zu,\"tiers\":{",
      o->labelled ? "" : "{", st->version, (unsigned long long)st->requested, st->in_use, st->committed,
      st->reserved, st->cached, st->mapped, st->peak_reserved);
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
      "\"abandoned_segments\":%u,\"abandoned_bytes\":%zu,\"thread_cached\":%zu}}",
      (unsigned long long)st->mmap_calls, (unsigned long long)st->munmap_calls,
      (unsigned long long)st->madvise_calls, (unsigned long long)st->mremap_calls,
      (unsigned long long)st->cache_hits, (unsigned long long)st->cache_misses, st->thread_heaps,
      st->explicit_heaps, (unsigned long long)st->threads_exited, st->abandoned_segments, st->abandoned_bytes,
      st->thread_cached);
}

size_t brisk_stats_json(char *buf, size_t len) {
  brisk_stats_t st = {.version = BRISK_STATS_VERSION};
  brisk_stats_get(&st);
  if (!buf) len = 0; /* the length it needs, as snprintf(NULL, n) gives */
  out_t o = {buf, len, 0, false};
  format_json(&o, &st);
  if (buf && len) buf[o.pos < len ? o.pos : len - 1] = '\0';
  return o.pos;
}

static void format_table(out_t *o, const brisk_stats_t *st) {
  put(o, "brisk statistics: pid %ld (%s)\n", _bk_os_process_id(), command_name());
  put(o, "  %-8s %14s %14s %14s %14s\n", "tier", "live blocks", "in use", "committed", "reserved");
  for (int t = 0; t < BRISK_TIER_COUNT; t++)
    put(o, "  %-8s %14llu %14s %14s %14s\n", tier_names[t], (unsigned long long)st->tiers[t].live_blocks,
        human(st->tiers[t].in_use).s, human(st->tiers[t].committed).s, human(st->tiers[t].reserved).s);
  put(o, "  %-8s %14s %14s %14s %14s\n", "total", "", human(st->in_use).s, human(st->committed).s,
      human(st->reserved).s);
  put(o, "  requested %s in all; cached %s; mapped now %s, at peak %s\n", human((size_t)st->requested).s,
      human(st->cached).s, human(st->mapped).s, human(st->peak_reserved).s);
  put(o, "  os calls: mmap %llu, munmap %llu, madvise %llu, mremap %llu\n", (unsigned long long)st->mmap_calls,
      (unsigned long long)st->munmap_calls, (unsigned long long)st->madvise_calls,
      (unsigned long long)st->mremap_calls);
  put(o, "  recycle cache: %llu hits, %llu misses\n", (unsigned long long)st->cache_hits,
      (unsigned long long)st->cache_misses);
  put(o, "  heaps: %u thread, %u explicit; %llu threads exited; %u abandoned segments (%s); %s kept by threads\n",
      st->thread_heaps, st->explicit_heaps, (unsigned long long)st->threads_exited, st->abandoned_segments,
      human(st->abandoned_bytes).s, human(st->thread_cached).s);
  put(o, "  %10s %14s\n", "class", "live blocks");
  for (unsigned c = 1; c < st->class_count; c++)
    if (st->class_live_blocks[c])
      put(o, "  %10zu %14llu\n", st->class_size[c], (unsigned long long)st->class_live_blocks[c]);
}

/* A child's report under BRISK_REPORT_CHILDREN=summary: one line. */
static void format_summary(out_t *o, const brisk_stats_t *st) {
  put(o, "brisk: pid %ld (%s): %s in use in %llu blocks at exit, %s mapped at peak\n", _bk_os_process_id(),
      command_name(), human(st->in_use).s,
      (unsigned long long)(st->tiers[0].live_blocks + st->tiers[1].live_blocks + st->tiers[2].live_blocks +
                           st->tiers[3].live_blocks),
      human(st->peak_reserved).s);
}

/* Printed with write(2) from a stack buffer: no stdio locks, no allocation
 * (this also runs at exit, after stdio may be gone). */
static void emit(int fd, void (*format)(out_t *, const brisk_stats_t *), const brisk_stats_t *st) {
  char buf[8192];
  out_t o = {buf, sizeof buf, 0, true};
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

/* A decimal number from the environment; -1 when unset or not a number. */
static long env_number(const char *name) {
  const char *v = getenv(name);
  if (!v || !*v) return -1;
  long n = 0;
  for (; *v; v++) {
    if (*v < '0' || *v > '9' || n > 100000000) return -1;
    n = n * 10 + (*v - '0');
  }
  return n;
}

/* Which reports this process writes at exit. The top process of a tree
 * (BRISK_REPORT_ROOT, the pid brisk-run execs into; every process when
 * unset) writes them all; the others follow BRISK_REPORT_CHILDREN: "all"
 * the same, "none" nothing, "summary" (the default) one line. */
enum report_scope { REPORT_FULL, REPORT_SUMMARY, REPORT_NONE };

static enum report_scope report_scope(void) {
  long root = env_number("BRISK_REPORT_ROOT");
  if (root < 0 || root == _bk_os_process_id()) return REPORT_FULL;
  const char *children = getenv("BRISK_REPORT_CHILDREN");
  if (children && strcmp(children, "all") == 0) return REPORT_FULL;
  if (children && strcmp(children, "none") == 0) return REPORT_NONE;
  return REPORT_SUMMARY;
}

/* "%p" in a path becomes the process id: one file per process of a tree. */
static const char *path_for_process(const char *pattern) {
  static char path[4096];
  size_t n = 0;
  for (const char *c = pattern; *c && n + 24 < sizeof path; c++) {
    if (c[0] == '%' && c[1] == 'p') {
      n += (size_t)snprintf(path + n, sizeof path - n, "%ld", _bk_os_process_id());
      c++;
    } else {
      path[n++] = *c;
    }
  }
  path[n] = '\0';
  return path;
}

static void write_json_file(const char *pattern) {
  brisk_stats_t st = {.version = BRISK_STATS_VERSION};
  brisk_stats_get(&st);
  const char *path = path_for_process(pattern);
  int fd = _bk_os_create_file(path);
  if (fd >= 0) {
    emit(fd, format_json, &st);
    _bk_os_close(fd);
  } else {
    _bk_warning("cannot write the stats to %s", path);
  }
}

/* BRISK_SHOW_STATS, BRISK_STATS_JSON and BRISK_LEAK_REPORT at exit; to
 * BRISK_REPORT_FILE (appended: every process of a tree adds its part)
 * instead of stderr when set. With BRISK_LEAK_EXIT_CODE, the top process
 * exits with that status when it leaked, as LeakSanitizer's exitcode. */
void _bk_report_at_exit(void) {
  _bk_exit_check();
  enum report_scope scope = report_scope();
  if (scope == REPORT_NONE) return;
  const char *json = getenv("BRISK_STATS_JSON");
  if (json && *json) write_json_file(json);
  if (!_bk_opt.show_stats && !_bk_opt.leak_report) return;
  int fd = report_fd >= 0 ? report_fd : 2, file = -1;
  const char *to = getenv("BRISK_REPORT_FILE");
  if (to && *to) {
    file = _bk_os_append_file(path_for_process(to));
    if (file >= 0) fd = file;
    else _bk_warning("cannot write the report to %s", to);
  }
  brisk_stats_t st = {.version = BRISK_STATS_VERSION};
  brisk_stats_get(&st);
  uint64_t leaked = 0;
  if (scope == REPORT_SUMMARY) {
    emit(fd, format_summary, &st);
  } else {
    if (_bk_opt.show_stats) emit(fd, format_table, &st);
    if (_bk_opt.leak_report) leaked = _bk_leak_report(fd, _bk_os_process_id(), command_name());
  }
  if (file >= 0) _bk_os_close(file);
  long code = env_number("BRISK_LEAK_EXIT_CODE");
  if (leaked && code > 0 && scope == REPORT_FULL && env_number("BRISK_REPORT_ROOT") == _bk_os_process_id()) {
    fflush(NULL); /* what exit() would still have written */
    _bk_os_exit((int)(code & 255));
  }
}
