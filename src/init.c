/* Process setup: options from the environment, the thread-exit hook, and
 * fork handling. Runs from a constructor, or from the first allocation when
 * that comes earlier (the loader and libc allocate before constructors run). */
#include "internal.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

BRISK_INTERNAL brisk_options_t brisk_opt = {
    .purge_delay_ms = 500,
    .cache_cap = (size_t)512 << 20,
    .max_bytes = 0,
    .verbose = false,
};

BRISK_INTERNAL _Atomic(int) brisk_process_ready;
static _Atomic(int) init_started;
static __thread int init_running __attribute__((tls_model("initial-exec")));

/* "512M", "4G", "65536", "1.5G" is not accepted (whole numbers only). */
static bool parse_size(const char *s, size_t *out) {
  char *end;
  if (!s || !*s) return false;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s || *s == '-') return false;
  unsigned shift = 0;
  switch (*end) {
  case 'k': case 'K': shift = 10; end++; break;
  case 'm': case 'M': shift = 20; end++; break;
  case 'g': case 'G': shift = 30; end++; break;
  case 't': case 'T': shift = 40; end++; break;
  default: break;
  }
  if (shift && (*end == 'i' || *end == 'I')) end++;
  if (*end == 'b' || *end == 'B') end++;
  if (*end) return false;
  if (shift && v > (~0ULL >> shift)) return false;
  *out = (size_t)(v << shift);
  return true;
}

static void option_size(const char *name, size_t *target) {
  const char *v = getenv(name);
  if (!v) return;
  if (!parse_size(v, target))
    brisk_warning("ignoring %s=\"%s\": expected a byte count such as 65536, 512M or 4G", name, v);
}

static void option_number(const char *name, uint64_t *target) {
  const char *v = getenv(name);
  if (!v) return;
  char *end;
  errno = 0;
  unsigned long long n = strtoull(v, &end, 10);
  if (errno || end == v || *end || *v == '-')
    brisk_warning("ignoring %s=\"%s\": expected a whole number", name, v);
  else
    *target = n;
}

static void option_bool(const char *name, bool *target) {
  const char *v = getenv(name);
  if (!v) return;
  if (!strcmp(v, "1") || !strcmp(v, "yes") || !strcmp(v, "on") || !strcmp(v, "true")) *target = true;
  else if (!strcmp(v, "0") || !strcmp(v, "no") || !strcmp(v, "off") || !strcmp(v, "false")) *target = false;
  else brisk_warning("ignoring %s=\"%s\": expected 1 or 0", name, v);
}

static void read_options(void) {
  option_bool("BRISK_VERBOSE", &brisk_opt.verbose);
  option_number("BRISK_PURGE_DELAY_MS", &brisk_opt.purge_delay_ms);
  option_size("BRISK_CACHE_CAP", &brisk_opt.cache_cap);
  size_t max = 0;
  option_size("BRISK_MAX_BYTES", &max);
  if (max) brisk_set_max_bytes(max);
}

void process_init(void) {
  if (likely(atomic_load_explicit(&brisk_process_ready, memory_order_acquire))) return;
  if (init_running) return; /* an allocation made by the setup itself */
  int expected = 0;
  if (!atomic_compare_exchange_strong(&init_started, &expected, 1)) {
    while (!atomic_load_explicit(&brisk_process_ready, memory_order_acquire)) sched_yield();
    return;
  }
  init_running = 1;
  read_options();
  heap_process_init();
  init_running = 0;
  atomic_store_explicit(&brisk_process_ready, 1, memory_order_release);
}

/* fork: no lock of brisk's may be held by a thread that will not exist in
 * the child, and the child has no purge thread. */
static void fork_prepare(void) {
  heap_registry_lock();
  segment_abandoned_lock();
  segments_lock();
}

static void fork_parent(void) {
  segments_unlock();
  segment_abandoned_unlock();
  heap_registry_unlock();
}

static void fork_child(void) {
  segment_abandoned_reset_after_fork();
  heap_registry_reset_after_fork();
  purge_reset_after_fork();
}

__attribute__((constructor)) static void brisk_constructor(void) {
  process_init();
  pthread_atfork(fork_prepare, fork_parent, fork_child);
}
