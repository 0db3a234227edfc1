/* Process setup: options from the environment, the thread-exit hook, fork
 * handling and the report at exit. Runs from a constructor, or from the first allocation when
 * that comes earlier (the loader and libc allocate before constructors run). */
#include "internal.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

BRISK_INTERNAL _Atomic(int) _bk_process_ready;
static _Atomic(int) init_started;
static __thread int init_running __attribute__((tls_model("initial-exec")));

void _bk_process_init(void) {
  if (likely(atomic_load_explicit(&_bk_process_ready, memory_order_acquire))) return;
  if (init_running) return; /* an allocation made by the setup itself */
  int expected = 0;
  if (!atomic_compare_exchange_strong(&init_started, &expected, 1)) {
    while (!atomic_load_explicit(&_bk_process_ready, memory_order_acquire)) sched_yield();
    return;
  }
  init_running = 1;
  _bk_options_read_environment();
  _bk_heap_process_init();
  init_running = 0;
  atomic_store_explicit(&_bk_process_ready, 1, memory_order_release);
}

/* fork: no lock of brisk's may be held by a thread that will not exist in
 * the child. Every lock brisk owns is taken here, in the one order all of
 * brisk keeps (docs/design.md, "Locks and their order"), and released in
 * both processes by the thread that took it. The page fork gate closes
 * last: a thread that holds one of these locks may be on its way through
 * it, and must get to its unlock first. */
static void fork_prepare(void) {
  _bk_purge_fork_lock();
  _bk_pool_fork_lock();
  _bk_heap_fork_lock();
  _bk_segment_abandoned_lock();
  _bk_segments_lock();
  _bk_page_fork_gate_close();
}

static void fork_release(bool in_child) {
  _bk_page_fork_gate_open(in_child);
  _bk_segments_unlock();
  _bk_segment_abandoned_unlock();
  _bk_heap_fork_unlock();
  _bk_pool_fork_unlock();
  _bk_purge_fork_unlock(in_child);
}

static void fork_parent(void) { fork_release(false); }
static void fork_child(void) { fork_release(true); }

__attribute__((constructor)) static void brisk_constructor(void) {
  _bk_process_init();
  pthread_atfork(fork_prepare, fork_parent, fork_child);
  _bk_report_prepare();
  atexit(_bk_report_at_exit);
}
