/* The process around brisk: the constructor, fork, and the report at exit.
 * At the top of the layers because fork must take the locks of every layer
 * below, in the one order all of brisk keeps. */
#include "api/api.h"

#include <stdlib.h>

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
  _bk_abandoned_lock();
  _bk_segments_lock();
  _bk_transfer_fork_lock();
  _bk_page_fork_gate_close();
}

static void fork_release(bool in_child) {
  _bk_page_fork_gate_open(in_child);
  _bk_transfer_fork_unlock();
  _bk_segments_unlock();
  _bk_abandoned_unlock();
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
  _bk_guard_faults_install();
}
