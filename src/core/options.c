/* Options: one table of names, kinds and ranges; read once from the
 * environment, readable and settable at run time (brisk_option_*). */
#include "core/core.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum option_kind { OPT_BOOL, OPT_NUMBER, OPT_SIZE };

#define ADDRESS_SPACE (1LL << 47)       /* a 48-bit user address space */
#define MAX_BYTES_MIN (16LL << 20)      /* below this, programs cannot even start */
#define PURGE_DELAY_MAX (3600LL * 1000) /* an hour; for "never", realtime mode says it */

/* One line per option. Booleans take 0 or 1 and need no range here; a
 * number is refused outside min..max, except that zero_means, when set,
 * allows 0 too and says what it means. */
static const struct option_info {
  const char *env;
  enum option_kind kind;
  long long min, max;
  const char *zero_means;
} options[BRISK_OPTION_COUNT] = {
    [BRISK_OPTION_SHOW_STATS] = {.env = "BRISK_SHOW_STATS", .kind = OPT_BOOL},
    [BRISK_OPTION_VERBOSE] = {.env = "BRISK_VERBOSE", .kind = OPT_BOOL},
    [BRISK_OPTION_PURGE_DELAY_MS] = {.env = "BRISK_PURGE_DELAY_MS",
                                     .kind = OPT_NUMBER,
                                     .min = 0,
                                     .max = PURGE_DELAY_MAX},
    [BRISK_OPTION_MAX_BYTES] = {.env = "BRISK_MAX_BYTES",
                                .kind = OPT_SIZE,
                                .min = MAX_BYTES_MIN,
                                .max = ADDRESS_SPACE,
                                .zero_means = "no cap"},
    [BRISK_OPTION_CACHE_CAP] = {.env = "BRISK_CACHE_CAP", .kind = OPT_SIZE, .min = 0, .max = ADDRESS_SPACE},
    [BRISK_OPTION_HUGEPAGES] = {.env = "BRISK_HUGEPAGES", .kind = OPT_BOOL},
    [BRISK_OPTION_RESERVE] = {.env = "BRISK_RESERVE", .kind = OPT_SIZE, .min = 0, .max = (long long)RESERVE_MAX},
    [BRISK_OPTION_REALTIME] = {.env = "BRISK_REALTIME", .kind = OPT_BOOL},
    [BRISK_OPTION_LEAK_REPORT] = {.env = "BRISK_LEAK_REPORT", .kind = OPT_BOOL},
    [BRISK_OPTION_BACKGROUND_PURGE] = {.env = "BRISK_BACKGROUND_PURGE", .kind = OPT_BOOL},
};

/* Read by the library but not options: read at exit by extra/report.c
 * (set by brisk-run, documented with it), and the checked library's depth
 * of recorded stacks (core/stack.c) and its check at exit
 * (extra/exit_check.c). */
static const char *const other_variables[] = {
    "BRISK_STATS_JSON",     "BRISK_REPORT_FILE", "BRISK_REPORT_ROOT", "BRISK_REPORT_CHILDREN",
    "BRISK_LEAK_EXIT_CODE", "BRISK_STACK_DEPTH", "BRISK_EXIT_CHECK",  NULL};
/* Variables of brisk's own tools and test suite: not warned about. */
static const char *const tool_variables[] = {
    "BRISK_LIB", "BRISK_BUILD_DIR", "BRISK_ASAN_SCALE", "BRISK_TSAN_SCALE", "BRISK_RECORD", "BRISK_RECORD_ROOT",
    NULL};
#define TOOL_PREFIX "BRISK_TEST_"

static const char *const accepted_form[] = {
    [OPT_BOOL] = "1 or 0 (also yes/no, on/off, true/false)",
    [OPT_NUMBER] = "a whole number such as 250",
    [OPT_SIZE] = "a byte count such as 65536, 512M or 4G",
};

static bool in_range(const struct option_info *o, long long v) {
  if (o->kind == OPT_BOOL) return v == 0 || v == 1;
  return (v >= o->min && v <= o->max) || (v == 0 && o->zero_means);
}

/* A bound as the warnings show it: sizes with the largest exact suffix ("16M"). */
static void value_text(char *buf, size_t len, long long v, enum option_kind kind) {
  static const char units[] = "KMGT";
  int u = 0;
  while (kind == OPT_SIZE && u < 4 && v && v % 1024 == 0) {
    v /= 1024;
    u++;
  }
  if (u) snprintf(buf, len, "%lld%c", v, units[u - 1]);
  else snprintf(buf, len, "%lld", v);
}

/* "0 .. 3600000", "0 (no cap) or 16M .. 128T"; empty for booleans. */
static void range_text(const struct option_info *o, char *buf, size_t len) {
  char lo[24], hi[24];
  buf[0] = '\0';
  if (o->kind == OPT_BOOL) return;
  value_text(lo, sizeof lo, o->min, o->kind);
  value_text(hi, sizeof hi, o->max, o->kind);
  if (o->zero_means) snprintf(buf, len, "0 (%s) or %s .. %s", o->zero_means, lo, hi);
  else snprintf(buf, len, "%s .. %s", lo, hi);
}

static bool parse_bool(const char *s, long long *out) {
  static const char *const yes[] = {"1", "yes", "on", "true"}, *const no[] = {"0", "no", "off", "false"};
  for (int i = 0; i < 4; i++) {
    if (!strcasecmp(s, yes[i])) {
      *out = 1;
      return true;
    }
    if (!strcasecmp(s, no[i])) {
      *out = 0;
      return true;
    }
  }
  return false;
}

/* Whole numbers, with a K/M/G/T (KiB, MB...) suffix for sizes. */
static bool parse_number(const char *s, bool size, long long *out) {
  char *end;
  /* strtoull would skip leading spaces and take a sign after them. */
  if (*s < '0' || *s > '9') return false;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s) return false;
  unsigned shift = 0;
  if (size) {
    /* (Upper-cased by the mask: a space masks to '\0', which strchr would
     * find at the string's end, so it is no unit.) */
    const char *units = "KMGT";
    char unit = (char)(*end & ~0x20);
    const char *u = unit ? strchr(units, unit) : NULL;
    if (u) {
      shift = 10 * (unsigned)(u - units + 1);
      end++;
      if (*end == 'i' || *end == 'I') end++;
      if (*end == 'b' || *end == 'B') end++;
    } else if (*end == 'b' || *end == 'B') {
      end++;
    }
  }
  if (*end || v > (unsigned long long)(LLONG_MAX >> shift)) return false;
  *out = (long long)(v << shift);
  return true;
}

static bool parse_option(brisk_option_t opt, const char *s, long long *out) {
  return options[opt].kind == OPT_BOOL ? parse_bool(s, out) : parse_number(s, options[opt].kind == OPT_SIZE, out);
}

const char *_bk_option_name(brisk_option_t opt) {
  return (unsigned)opt < BRISK_OPTION_COUNT ? options[opt].env : NULL;
}

/* The reserve goes into the cache, which makes room for it first. */
static int set_reserve(size_t want) {
  size_t old = _bk_opt.reserve;
  _bk_opt.reserve = want;
  if (want <= old) return 0;
  size_t placed = _bk_segment_reserve(want - old);
  if (placed == want - old) return 0;
  _bk_opt.reserve = old + placed;
  _bk_warning("BRISK_RESERVE: only %zu of the %zu bytes asked could be reserved (the OS, BRISK_MAX_BYTES or a "
              "full cache refused the rest)",
              old + placed, want);
  return ENOMEM;
}

int _bk_option_set(brisk_option_t opt, long long v) {
  if ((unsigned)opt >= BRISK_OPTION_COUNT || !in_range(&options[opt], v)) return EINVAL;
  switch (opt) {
  case BRISK_OPTION_SHOW_STATS: _bk_opt.show_stats = v; break;
  case BRISK_OPTION_VERBOSE: _bk_opt.verbose = v; break;
  case BRISK_OPTION_PURGE_DELAY_MS: _bk_opt.purge_delay_ms = (uint64_t)v; break;
  case BRISK_OPTION_MAX_BYTES: _bk_memory_set_cap((size_t)v); break;
  case BRISK_OPTION_CACHE_CAP: _bk_opt.cache_cap = (size_t)v; break;
  case BRISK_OPTION_HUGEPAGES: _bk_opt.hugepages = v; break;
  case BRISK_OPTION_RESERVE: return set_reserve((size_t)v);
  case BRISK_OPTION_REALTIME: _bk_set_realtime(v != 0); break;
  case BRISK_OPTION_LEAK_REPORT: _bk_opt.leak_report = v; break;
  case BRISK_OPTION_BACKGROUND_PURGE:
    _bk_opt.background_purge = v;
    if (v) _bk_purge_note_pending(); /* memory may be waiting already: start the thread now */
    break;
  default: return EINVAL;
  }
  return 0;
}

long long _bk_option_get(brisk_option_t opt) {
  switch (opt) {
  case BRISK_OPTION_SHOW_STATS: return _bk_opt.show_stats;
  case BRISK_OPTION_VERBOSE: return _bk_opt.verbose;
  case BRISK_OPTION_PURGE_DELAY_MS: return (long long)_bk_opt.purge_delay_ms;
  case BRISK_OPTION_MAX_BYTES: return (long long)_bk_memory_cap();
  case BRISK_OPTION_CACHE_CAP: return (long long)_bk_opt.cache_cap;
  case BRISK_OPTION_HUGEPAGES: return _bk_opt.hugepages;
  case BRISK_OPTION_RESERVE: return (long long)_bk_opt.reserve;
  case BRISK_OPTION_REALTIME: return _bk_opt.realtime;
  case BRISK_OPTION_LEAK_REPORT: return _bk_opt.leak_report;
  case BRISK_OPTION_BACKGROUND_PURGE: return _bk_opt.background_purge;
  default: return -1;
  }
}

/* On return, no purge pass is under way on any thread: none starts in
 * realtime mode. */
void _bk_set_realtime(bool on) {
  _bk_opt.realtime = on;
  if (on) _bk_purge_quiesce();
}

static bool name_is(const char *name, size_t len, const char *known) {
  return strlen(known) == len && !strncmp(known, name, len);
}

static bool in_list(const char *name, size_t len, const char *const *list) {
  for (; *list; list++)
    if (name_is(name, len, *list)) return true;
  return false;
}

static char upper(char c) { return c >= 'a' && c <= 'z' ? (char)(c - 'a' + 'A') : c; }

/* Levenshtein distance between name[0..len) and known, ignoring case. */
static size_t edit_distance(const char *name, size_t len, const char *known) {
  size_t row[64], n = strlen(known);
  if (n >= sizeof row / sizeof row[0]) return SIZE_MAX;
  for (size_t j = 0; j <= n; j++) row[j] = j;
  for (size_t i = 1; i <= len; i++) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= n; j++) {
      size_t up = row[j], best = diag + (upper(name[i - 1]) != upper(known[j - 1]));
      if (up + 1 < best) best = up + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      row[j] = best;
      diag = up;
    }
  }
  return row[n];
}

/* Names a user may mean: the options, then the other variables. */
static const char *valid_name(int i) {
  return i < BRISK_OPTION_COUNT ? options[i].env : other_variables[i - BRISK_OPTION_COUNT];
}

/* One line: the name, the closest valid name when it is close (at most
 * half its letters after BRISK_ differ), and every valid name. */
static void warn_unknown(const char *name, size_t len) {
  char list[768], hint[96] = "";
  size_t pos = 0, best = SIZE_MAX;
  const char *closest = NULL;
  for (int i = 0; valid_name(i); i++) {
    const char *known = valid_name(i);
    size_t d = edit_distance(name, len, known);
    if (d < best && 2 * d <= strlen(known) - 6) best = d, closest = known;
    int n = snprintf(list + pos, sizeof list - pos, "%s%s", i ? ", " : "", known);
    if (n > 0 && (size_t)n < sizeof list - pos) pos += (size_t)n;
  }
  if (closest) snprintf(hint, sizeof hint, "; did you mean %s?", closest);
  _bk_warning("unknown variable %.*s ignored%s (valid names: %s)", (int)len, name, hint, list);
}

int _bk_option_parse_env(brisk_option_t opt, const char *v, long long *value) {
  if ((unsigned)opt >= BRISK_OPTION_COUNT) return EINVAL;
  const struct option_info *o = &options[opt];
  char range[96];
  range_text(o, range, sizeof range);
  if (!parse_option(opt, v, value)) {
    _bk_warning("ignoring %s=\"%s\": expected %s%s%s", o->env, v, accepted_form[o->kind], *range ? ", in " : "",
                range);
    return EINVAL;
  }
  if (!in_range(o, *value)) {
    _bk_warning("ignoring %s=\"%s\": out of range (allowed: %s)", o->env, v, range);
    return EINVAL;
  }
  return 0;
}

static void apply_environment(brisk_option_t opt) {
  const char *v = getenv(options[opt].env);
  long long value;
  if (v && !_bk_option_parse_env(opt, v, &value)) _bk_option_set(opt, value); /* RESERVE warns when short */
}

int _bk_options_check_names(char *const *env) {
  int unknown = 0;
  for (; env && *env; env++) {
    if (strncmp(*env, "BRISK_", 6)) continue;
    const char *eq = strchr(*env, '=');
    size_t len = eq ? (size_t)(eq - *env) : strlen(*env);
    bool known = !strncmp(*env, TOOL_PREFIX, strlen(TOOL_PREFIX)) || in_list(*env, len, other_variables) ||
        in_list(*env, len, tool_variables);
    for (int i = 0; i < BRISK_OPTION_COUNT && !known; i++) known = name_is(*env, len, options[i].env);
    if (!known) {
      warn_unknown(*env, len);
      unknown++;
    }
  }
  return unknown;
}

/* Each variable once, at start: a malformed or out-of-range value or an
 * unknown BRISK_ name gets one warning line and changes nothing. */
void _bk_options_read_environment(void) {
  extern char **environ;
  /* Realtime first: a reserve made under it is touched up front. */
  apply_environment(BRISK_OPTION_REALTIME);
  for (int i = 0; i < BRISK_OPTION_COUNT; i++)
    if (i != BRISK_OPTION_REALTIME) apply_environment((brisk_option_t)i);
  _bk_options_check_names(environ);
}
