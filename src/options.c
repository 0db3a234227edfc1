/* Options: one table of names, kinds and defaults; read once from the
 * environment, readable and settable at run time (brisk_option_*). */
#include "internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

BRISK_INTERNAL brisk_options_t brisk_opt = {
    .purge_delay_ms = 500,
    .cache_cap = (size_t)512 << 20,
};

enum option_kind { OPT_BOOL, OPT_NUMBER, OPT_SIZE };

static const struct option_info {
  const char *env;
  enum option_kind kind;
} options[BRISK_OPTION_COUNT] = {
    [BRISK_OPTION_SHOW_STATS] = {"BRISK_SHOW_STATS", OPT_BOOL},
    [BRISK_OPTION_VERBOSE] = {"BRISK_VERBOSE", OPT_BOOL},
    [BRISK_OPTION_PURGE_DELAY_MS] = {"BRISK_PURGE_DELAY_MS", OPT_NUMBER},
    [BRISK_OPTION_MAX_BYTES] = {"BRISK_MAX_BYTES", OPT_SIZE},
    [BRISK_OPTION_CACHE_CAP] = {"BRISK_CACHE_CAP", OPT_SIZE},
    [BRISK_OPTION_HUGEPAGES] = {"BRISK_HUGEPAGES", OPT_BOOL},
    [BRISK_OPTION_RESERVE] = {"BRISK_RESERVE", OPT_SIZE},
    [BRISK_OPTION_REALTIME] = {"BRISK_REALTIME", OPT_BOOL},
    [BRISK_OPTION_LEAK_REPORT] = {"BRISK_LEAK_REPORT", OPT_BOOL},
    [BRISK_OPTION_BACKGROUND_PURGE] = {"BRISK_BACKGROUND_PURGE", OPT_BOOL},
};

/* Variables brisk's own tools use: known, so not warned about. */
static const char *const other_variables[] = {"BRISK_STATS_JSON", "BRISK_LIB", NULL};

static const char *const accepted_form[] = {
    [OPT_BOOL] = "1 or 0 (also yes/no, on/off, true/false)",
    [OPT_NUMBER] = "a whole number such as 250",
    [OPT_SIZE] = "a byte count such as 65536, 512M or 4G",
};

static bool parse_bool(const char *s, long long *out) {
  static const char *const yes[] = {"1", "yes", "on", "true"}, *const no[] = {"0", "no", "off", "false"};
  for (int i = 0; i < 4; i++) {
    if (!strcasecmp(s, yes[i])) { *out = 1; return true; }
    if (!strcasecmp(s, no[i])) { *out = 0; return true; }
  }
  return false;
}

/* Whole numbers, with a K/M/G/T (KiB, MB...) suffix for sizes. */
static bool parse_number(const char *s, bool size, long long *out) {
  char *end;
  if (!*s || *s == '-' || *s == '+') return false;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s) return false;
  unsigned shift = 0;
  if (size) {
    const char *units = "KMGT";
    const char *u = *end ? strchr(units, *end & ~0x20) : NULL;
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

const char *brisk_option_name(brisk_option_t opt) {
  return (unsigned)opt < BRISK_OPTION_COUNT ? options[opt].env : NULL;
}

int brisk_option_set(brisk_option_t opt, long long v) {
  if ((unsigned)opt >= BRISK_OPTION_COUNT || v < 0) return EINVAL;
  if (options[opt].kind == OPT_BOOL && v > 1) return EINVAL;
  switch (opt) {
  case BRISK_OPTION_SHOW_STATS: brisk_opt.show_stats = v; break;
  case BRISK_OPTION_VERBOSE: brisk_opt.verbose = v; break;
  case BRISK_OPTION_PURGE_DELAY_MS: brisk_opt.purge_delay_ms = (uint64_t)v; break;
  case BRISK_OPTION_MAX_BYTES: brisk_set_max_bytes((size_t)v); break;
  case BRISK_OPTION_CACHE_CAP: brisk_opt.cache_cap = (size_t)v; break;
  case BRISK_OPTION_HUGEPAGES: brisk_opt.hugepages = v; break;
  case BRISK_OPTION_RESERVE:
    if ((size_t)v > brisk_opt.reserve) segment_reserve((size_t)v - brisk_opt.reserve);
    brisk_opt.reserve = (size_t)v;
    break;
  case BRISK_OPTION_REALTIME: brisk_set_realtime((int)v); break;
  case BRISK_OPTION_LEAK_REPORT: brisk_opt.leak_report = v; break;
  case BRISK_OPTION_BACKGROUND_PURGE:
    brisk_opt.background_purge = v;
    if (v) purge_note_pending(); /* memory may be waiting already: start the thread now */
    break;
  default: return EINVAL;
  }
  return 0;
}

long long brisk_option_get(brisk_option_t opt) {
  switch (opt) {
  case BRISK_OPTION_SHOW_STATS: return brisk_opt.show_stats;
  case BRISK_OPTION_VERBOSE: return brisk_opt.verbose;
  case BRISK_OPTION_PURGE_DELAY_MS: return (long long)brisk_opt.purge_delay_ms;
  case BRISK_OPTION_MAX_BYTES: return (long long)brisk_get_max_bytes();
  case BRISK_OPTION_CACHE_CAP: return (long long)brisk_opt.cache_cap;
  case BRISK_OPTION_HUGEPAGES: return brisk_opt.hugepages;
  case BRISK_OPTION_RESERVE: return (long long)brisk_opt.reserve;
  case BRISK_OPTION_REALTIME: return brisk_opt.realtime;
  case BRISK_OPTION_LEAK_REPORT: return brisk_opt.leak_report;
  case BRISK_OPTION_BACKGROUND_PURGE: return brisk_opt.background_purge;
  default: return -1;
  }
}

/* On return, no purge pass is under way on any thread: none starts in
 * realtime mode. */
void brisk_set_realtime(int on) {
  brisk_opt.realtime = on != 0;
  if (on) purge_quiesce();
}

static bool is_known(const char *name, size_t len) {
  for (int i = 0; i < BRISK_OPTION_COUNT; i++)
    if (strlen(options[i].env) == len && !strncmp(options[i].env, name, len)) return true;
  for (int i = 0; other_variables[i]; i++)
    if (strlen(other_variables[i]) == len && !strncmp(other_variables[i], name, len)) return true;
  return !strncmp(name, "BRISK_TEST_", 11); /* the test suite's own */
}

static void apply_environment(brisk_option_t opt) {
  const char *v = getenv(options[opt].env);
  long long value;
  if (!v) return;
  if (!parse_option(opt, v, &value) || brisk_option_set(opt, value) != 0)
    brisk_warning("ignoring %s=\"%s\": expected %s", options[opt].env, v, accepted_form[options[opt].kind]);
}

/* Each variable once, at start: a malformed value or an unknown BRISK_ name
 * gets one warning and changes nothing. */
void options_read_environment(void) {
  extern char **environ;
  /* Realtime first: a reserve made under it is touched up front. */
  apply_environment(BRISK_OPTION_REALTIME);
  for (int i = 0; i < BRISK_OPTION_COUNT; i++)
    if (i != BRISK_OPTION_REALTIME) apply_environment((brisk_option_t)i);
  for (char **e = environ; e && *e; e++) {
    if (strncmp(*e, "BRISK_", 6)) continue;
    const char *eq = strchr(*e, '=');
    size_t len = eq ? (size_t)(eq - *e) : strlen(*e);
    if (!is_known(*e, len)) brisk_warning("unknown variable %.*s ignored (see brisk_option_name for the list)", (int)len, *e);
  }
}
