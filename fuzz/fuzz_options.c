/* Option fuzzer: the strings brisk reads from its BRISK_* environment
 * variables, and the values brisk_option_set takes. brisk reads the
 * environment once, at start; the two halves of that reading are hidden
 * functions of src/core/options.c, called here on the input's strings:
 *   - a value for an option (_bk_option_parse_env): the verdict must be the
 *     documented grammar's (brisk.h: booleans 1/0, yes/no, on/off,
 *     true/false in any case; whole numbers; sizes with K, M, G, T, and an
 *     optional i and B), in the option's range; a refused value prints
 *     exactly one warning line; an accepted one, set with brisk_option_set,
 *     reads back the same from brisk_option_get;
 *   - NAME=VALUE strings (_bk_options_check_names): one warning line for
 *     each BRISK_ name that brisk or its tools do not read, none otherwise;
 *   - brisk_option_set/get/name with any option number and value: EINVAL
 *     outside the ranges, with nothing changed.
 * Warnings are captured (stderr goes to a memfd around each call) and
 * checked; sanitizer reports still go to the real stderr. */
#define _GNU_SOURCE /* memfd_create */
#include "fuzz_common.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <sanitizer/common_interface_defs.h>
#include <stdbool.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>

int _bk_option_parse_env(brisk_option_t opt, const char *v, long long *value);
int _bk_options_check_names(char *const *env);

enum kind { BOOL, NUMBER, SIZE };
/* What brisk.h documents, written down again. */
static const struct {
  const char *name;
  enum kind kind;
  long long min, max;
  bool zero_ok;
} ref[BRISK_OPTION_COUNT] = {
    [BRISK_OPTION_SHOW_STATS] = {"BRISK_SHOW_STATS", BOOL, 0, 1, false},
    [BRISK_OPTION_VERBOSE] = {"BRISK_VERBOSE", BOOL, 0, 1, false},
    [BRISK_OPTION_PURGE_DELAY_MS] = {"BRISK_PURGE_DELAY_MS", NUMBER, 0, 3600000, false},
    [BRISK_OPTION_MAX_BYTES] = {"BRISK_MAX_BYTES", SIZE, 16LL << 20, 128LL << 40, true},
    [BRISK_OPTION_CACHE_CAP] = {"BRISK_CACHE_CAP", SIZE, 0, 128LL << 40, false},
    [BRISK_OPTION_HUGEPAGES] = {"BRISK_HUGEPAGES", BOOL, 0, 1, false},
    [BRISK_OPTION_RESERVE] = {"BRISK_RESERVE", SIZE, 0, 1LL << 30, false},
    [BRISK_OPTION_REALTIME] = {"BRISK_REALTIME", BOOL, 0, 1, false},
    [BRISK_OPTION_LEAK_REPORT] = {"BRISK_LEAK_REPORT", BOOL, 0, 1, false},
    [BRISK_OPTION_BACKGROUND_PURGE] = {"BRISK_BACKGROUND_PURGE", BOOL, 0, 1, false},
};
/* Read by brisk at exit, or by its tools and tests: never warned about. */
static const char *const quiet[] = {
    "BRISK_STATS_JSON", "BRISK_REPORT_FILE", "BRISK_REPORT_ROOT", "BRISK_REPORT_CHILDREN", "BRISK_LEAK_EXIT_CODE",
    "BRISK_LIB",        "BRISK_BUILD_DIR",   "BRISK_ASAN_SCALE",  "BRISK_TSAN_SCALE",      "BRISK_STACK_DEPTH",
    "BRISK_RECORD",     "BRISK_RECORD_ROOT", "BRISK_EXIT_CHECK"};
#define RESERVE_APPLY_MAX (64LL << 20) /* larger reserves are parsed, not mapped */

static long long saved[BRISK_OPTION_COUNT];
static int capture_fd, real_stderr;
static char out[1 << 16];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  for (int i = 0; i < BRISK_OPTION_COUNT; i++) saved[i] = brisk_option_get((brisk_option_t)i);
  capture_fd = memfd_create("brisk-fuzz-stderr", 0);
  real_stderr = dup(2);
  if (capture_fd < 0 || real_stderr < 0) abort();
  __sanitizer_set_report_fd((void *)(intptr_t)real_stderr);
  return 0;
}

static void capture(void) {
  if (ftruncate(capture_fd, 0) || lseek(capture_fd, 0, SEEK_SET) || dup2(capture_fd, 2) < 0) abort();
}

/* What brisk wrote since capture(), NUL-terminated. */
static size_t captured(void) {
  dup2(real_stderr, 2);
  ssize_t n = pread(capture_fd, out, sizeof out - 1, 0);
  out[n > 0 ? n : 0] = '\0';
  return n > 0 ? (size_t)n : 0;
}

/* n warnings, each starting with `start` (after the prefix), ended by a
 * newline and fitting brisk's 1 KiB message buffer. A value may hold
 * newlines: its one warning is taken whole (n = -1 means one such). */
static void expect_lines(size_t len, int n, const char *start, const char *context) {
  int lines = 0;
  const char *head = "brisk: warning: ";
  bool whole = n < 0;
  if (whole) n = 1;
  for (size_t at = 0; at < len; lines++) {
    const char *nl = whole ? (len && out[len - 1] == '\n' ? out + len - 1 : NULL)
                           : memchr(out + at, '\n', len - at);
    size_t line = nl ? (size_t)(nl - (out + at)) + 1 : len - at;
    FZ_CHECK(nl && line <= 1024, "%s: an unended or overlong warning line (%zu bytes)", context, line);
    FZ_CHECK(!strncmp(out + at, head, strlen(head)) && !strncmp(out + at + strlen(head), start, strlen(start)),
             "%s: a line that is not a warning starting with '%s': %.200s", context, start, out + at);
    at += line;
  }
  FZ_CHECK(lines == n, "%s: %d warning lines, expected %d: %.300s", context, lines, n, out);
}

/* ---- The documented grammar ---------------------------------------------- */

static bool ref_parse(enum kind kind, const char *s, long long *v) {
  static const char *const words[] = {"0", "no", "off", "false", "1", "yes", "on", "true"};
  if (kind == BOOL) {
    for (int i = 0; i < 8; i++)
      if (!strcasecmp(s, words[i])) return *v = i / 4, true;
    return false;
  }
  unsigned long long n = 0;
  const char *c = s;
  if (!isdigit((unsigned char)*c)) return false;
  for (; isdigit((unsigned char)*c); c++) {
    if (n > (ULLONG_MAX - 9) / 10) return false;
    n = n * 10 + (unsigned)(*c - '0');
  }
  unsigned shift = 0;
  if (kind == SIZE) {
    const char *units = "KMGT", *u = *c ? strchr(units, toupper((unsigned char)*c)) : NULL;
    if (u) {
      shift = 10 * (unsigned)(u - units + 1);
      c++;
      if (*c == 'i' || *c == 'I') c++;
    }
    if (*c == 'b' || *c == 'B') c++;
  }
  if (*c || n > (unsigned long long)(LLONG_MAX >> shift)) return false;
  *v = (long long)(n << shift);
  return true;
}

static bool ref_in_range(int opt, long long v) {
  return (v >= ref[opt].min && v <= ref[opt].max) || (v == 0 && ref[opt].zero_ok);
}

/* Sets an accepted value and reads it back; then puts the old one back. */
static void apply(brisk_option_t opt, long long v) {
  if (opt == BRISK_OPTION_RESERVE && v > RESERVE_APPLY_MAX) return;
  int rc = brisk_option_set(opt, v);
  long long now = brisk_option_get(opt);
  if (opt == BRISK_OPTION_RESERVE && rc == ENOMEM) FZ_CHECK(now <= v, "RESERVE %lld fell short to %lld", v, now);
  else FZ_CHECK(rc == 0 && now == v, "%s: set %lld gave %d, reads %lld", ref[opt].name, v, rc, now);
  FZ_CHECK(brisk_option_set(opt, saved[opt]) == 0, "%s: setting %lld back failed", ref[opt].name, saved[opt]);
  if (opt == BRISK_OPTION_RESERVE) brisk_collect();
}

/* ---- The three entry points ------------------------------------------------ */

static void fuzz_value(int opt, const char *s) {
  long long got = LLONG_MIN, want = 0;
  capture();
  int rc = _bk_option_parse_env((brisk_option_t)opt, s, &got);
  size_t len = captured();
  if (opt < 0 || opt >= BRISK_OPTION_COUNT) {
    FZ_CHECK(rc == EINVAL && len == 0, "option %d: verdict %d, %zu bytes of warning", opt, rc, len);
    return;
  }
  bool ok = ref_parse(ref[opt].kind, s, &want) && ref_in_range(opt, want);
  FZ_CHECK((rc == 0) == ok, "%s=\"%s\": brisk says %s, the grammar %s", ref[opt].name, s, rc ? "no" : "yes",
           ok ? "yes" : "no");
  if (ok) {
    FZ_CHECK(got == want && len == 0, "%s=\"%s\": %lld, expected %lld; %zu bytes of warning", ref[opt].name, s,
             got, want, len);
    apply((brisk_option_t)opt, got);
  } else {
    expect_lines(len, -1, "ignoring ", ref[opt].name);
  }
}

static bool ref_quiet(const char *e) {
  size_t len = strcspn(e, "=");
  if (strncmp(e, "BRISK_", 6) || !strncmp(e, "BRISK_TEST_", 11)) return true;
  for (int i = 0; i < BRISK_OPTION_COUNT; i++)
    if (strlen(ref[i].name) == len && !strncmp(e, ref[i].name, len)) return true;
  for (size_t i = 0; i < sizeof quiet / sizeof quiet[0]; i++)
    if (strlen(quiet[i]) == len && !strncmp(e, quiet[i], len)) return true;
  return false;
}

/* Up to 64 strings, cut at newlines and NULs; a leading '!' stands for
 * "BRISK_", which the fuzzer would take long to spell. */
static void fuzz_names(char *text, size_t len) {
  char *env[65], *copies[64];
  int n = 0, want = 0;
  for (char *at = text; n < 64 && at < text + len; n++) {
    size_t k = strcspn(at, "\n");
    at[k] = '\0';
    bool prefix = *at == '!';
    copies[n] = malloc(k + 7);
    snprintf(copies[n], k + 7, "%s%s", prefix ? "BRISK_" : "", at + prefix);
    env[n] = copies[n];
    want += !ref_quiet(env[n]);
    at += k + 1;
  }
  env[n] = NULL;
  capture();
  int unknown = _bk_options_check_names(env);
  size_t out_len = captured();
  FZ_CHECK(unknown == want, "%d unknown names, expected %d", unknown, want);
  expect_lines(out_len, want, "unknown variable BRISK_", "names");
  for (int i = 0; i < n; i++) free(copies[i]);
}

static void fuzz_set(fz_input *in) {
  int opt = (int8_t)fz_u8(in);
  long long v = (long long)((uint64_t)fz_u32(in) | (uint64_t)fz_u32(in) << 32);
  if (fz_u8(in) & 1) v = (long long)((uint64_t)v >> (fz_u8(in) % 64)); /* small ones too */
  const char *name = brisk_option_name((brisk_option_t)opt);
  if (opt < 0 || opt >= BRISK_OPTION_COUNT) {
    FZ_CHECK(!name && brisk_option_set((brisk_option_t)opt, v) == EINVAL &&
                 brisk_option_get((brisk_option_t)opt) == -1,
             "option %d is not one, yet answers", opt);
    return;
  }
  FZ_CHECK(name && !strcmp(name, ref[opt].name), "brisk_option_name(%d) = %s", opt, name ? name : "NULL");
  long long before = brisk_option_get((brisk_option_t)opt);
  if (ref_in_range(opt, v)) {
    apply((brisk_option_t)opt, v);
    return;
  }
  FZ_CHECK(brisk_option_set((brisk_option_t)opt, v) == EINVAL && brisk_option_get((brisk_option_t)opt) == before,
           "%s: %lld is out of range, yet was taken", name, v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_input in = {data, size};
  uint8_t mode = fz_u8(&in);
  if (mode % 4 == 3) {
    while (fz_more(&in)) fuzz_set(&in);
    return 0;
  }
  char *text = malloc(in.n + 1);
  memcpy(text, in.p, in.n);
  text[in.n] = '\0';
  if (mode % 4 == 2) {
    fuzz_names(text, in.n);
  } else {
    /* The option, then its value. */
    int opt = (mode >> 2) % 16 - (mode & 0x80 ? 16 : 0);
    fuzz_value(opt, text);
  }
  free(text);
  return 0;
}
