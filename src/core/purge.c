/* Giving memory back to the OS after it sat unused for the purge delay.
 *
 * Each heap purges its own free pages from its slow path. Memory no thread
 * owns (the segment cache, every heap's warm huge blocks, abandoned
 * segments) is purged by a shared pass. By default brisk has no thread of
 * its own: the program's slow paths (allocation, huge frees, segments going
 * to the cache, thread exit) run the pass when it is due, so a program that
 * keeps working gets its memory back and a single-threaded program stays
 * single-threaded. BRISK_BACKGROUND_PURGE adds a helper thread that runs
 * the passes too, for programs that go idle holding freed memory. */
#include "core/core.h"

#include <signal.h>

/* Relaxed throughout: these are hints. A stale read runs a pass one check
 * early or late; what a pass reads and changes is ordered by pass_lock. */
static _Atomic(int) purger_state; /* 0 none, 1 starting, 2 running */
static _Atomic(int) purge_pending;
static _Atomic(uint64_t) last_pass_ms;
/* The helper thread wanted without the option (below): seq_cst, as the
 * option, in purger_state's pairing (design.md). */
static _Atomic(bool) purger_auto;

/* Held through each shared pass, so that turning realtime mode on can wait
 * out a pass already under way, and brisk_collect runs beside none. */
static pthread_mutex_t pass_lock = PTHREAD_MUTEX_INITIALIZER;

static void purge_heap_warm(heap_t *h, void *now) { _bk_huge_purge_warm(h, *(uint64_t *)now, false); }

static void purge_shared(uint64_t now) {
  atomic_store_explicit(&purge_pending, 0, memory_order_relaxed);
  _bk_transfer_drain(false);
  _bk_segment_cache_purge(now, false);
  if (_bk_segment_cache_bytes()) atomic_store_explicit(&purge_pending, 1, memory_order_relaxed);
  _bk_heap_foreach(purge_heap_warm, &now);
  _bk_abandoned_drain(false);
}

/* A pass is due half a delay after the last while memory waits to be
 * purged, else a second after it (abandoned segments that remote frees
 * emptied are drained at that pace). Measured from the last pass, so a
 * shorter delay set at run time applies at once. */
static bool pass_due(uint64_t now) {
  uint64_t interval = atomic_load_explicit(&purge_pending, memory_order_relaxed) ? _bk_opt.purge_delay_ms / 2
                                                                                 : 1000;
  if (interval < 10) interval = 10;
  return ms_since(now, atomic_load_explicit(&last_pass_ms, memory_order_relaxed)) >= interval;
}

/* Runs a pass (purge_shared, or a group's end below). The caller holds
 * pass_lock. Realtime mode is read under it: once brisk_set_realtime has
 * waited out the lock, no pass starts. */
static void run_pass(uint64_t now, void (*pass)(uint64_t)) {
  if (_bk_opt.realtime) return;
  _bk_locks_held++; /* memory the pass frees into the caches starts no pass */
  pass(now);
  _bk_locks_held--;
  atomic_store_explicit(&last_pass_ms, now, memory_order_relaxed);
}

/* Runs the shared pass if it is due, unless the caller holds a lock of
 * brisk's (a pass takes the heap registry and segment locks) or another
 * thread runs one: never waits. */
static void pass_if_due(uint64_t now) {
  if (!pass_due(now) || _bk_opt.realtime || _bk_locks_held ||
      !atomic_load_explicit(&_bk_process_ready, memory_order_acquire))
    return;
  if (pthread_mutex_trylock(&pass_lock) != 0) return;
  run_pass(now, purge_shared);
  pthread_mutex_unlock(&pass_lock);
}

void _bk_purge_tick(uint64_t now) { pass_if_due(now); }

/* When the last of a group of threads exits, what the group freed is more
 * than the one thread left needs: the memory of threads gone (their
 * segments that other threads' frees emptied, and the cache's unpurged
 * segments) goes back to the OS at once, as glibc's arenas trim as they
 * empty, not at a pass that a slow path may not run for long. (Thread
 * churn, 2 threads at a time and a survivor: 10-12 MiB resident right
 * after the last join, 2.1 with this; glibc 2.0.) A program that runs one
 * short thread after another would fault in again, in each, what the one
 * before freed (purged at every exit: 1.9x the time), so such purges are
 * bounded: GROUP_END_PURGES in a purge delay, more only after
 * GROUP_END_EXITS exits since the last (each thread then pays at most a
 * sixty-fourth of a purge, and a group that ends after many threads have
 * come and gone, even soon after another, gives back). What the remaining
 * thread keeps (its pages, its warm huge blocks) is its own and stays. */
#define GROUP_END_PURGES 4
#define GROUP_END_EXITS 64
static uint64_t group_end_window_ms; /* under pass_lock, as the count */
static unsigned group_end_purges;
static _Atomic(unsigned) exits_since_purge; /* relaxed: a count, read under pass_lock */

static void purge_group_end(uint64_t now) {
  (void)now;
  _bk_transfer_drain_orphans();
  _bk_abandoned_drain(true);
  _bk_cache_rebuild_end();
  _bk_segment_cache_purge_all();
}

void _bk_purge_thread_exited(bool group_ended) {
  unsigned exits = atomic_fetch_add_explicit(&exits_since_purge, 1, memory_order_relaxed) + 1;
  if (!group_ended || _bk_locks_held) return;
  if (pthread_mutex_trylock(&pass_lock) != 0) return; /* a pass under way purges too */
  uint64_t now = _bk_os_now_ms();
  if (!_bk_cache_group_end_purges(now)) {
    /* Rounds of threads (cache_policy.c): what they freed waits for the
     * passes, which the helper thread runs from the next time memory
     * waits (not from here: this thread's heap is gone, and
     * pthread_create allocates), until nothing does. */
    atomic_store(&purger_auto, true);
    pthread_mutex_unlock(&pass_lock);
    return;
  }
  if (!group_end_window_ms || ms_since(now, group_end_window_ms) >= _bk_opt.purge_delay_ms) {
    group_end_window_ms = now;
    group_end_purges = 0;
  }
  if (group_end_purges < GROUP_END_PURGES || exits >= GROUP_END_EXITS) {
    group_end_purges++;
    atomic_store_explicit(&exits_since_purge, 0, memory_order_relaxed);
    run_pass(now, purge_group_end);
    _bk_cache_group_end_purged(now);
  }
  pthread_mutex_unlock(&pass_lock);
}

void _bk_purge_quiesce(void) {
  pthread_mutex_lock(&pass_lock);
  pthread_mutex_unlock(&pass_lock);
}

/* ---- The opt-in helper thread ------------------------------------------ */

/* The helper runs while the option is on, or, started on its own for
 * rounds of threads (_bk_purge_thread_exited), until no memory waits. */
static bool purger_wanted(void) { return _bk_opt.background_purge || atomic_load(&purger_auto); }

static void *purger_main(void *arg) {
  (void)arg;
  for (;;) {
    while (purger_wanted()) {
      /* Short naps: a pass may come due sooner (a shorter delay, memory
       * newly waiting), and turning the option off ends the thread. */
      uint64_t nap = _bk_opt.purge_delay_ms / 4;
      nap = nap < 5 ? 5 : nap > 250 ? 250 : nap;
      _bk_os_sleep_ms((unsigned)nap);
      uint64_t now = _bk_os_now_ms();
      if (!_bk_opt.background_purge && !atomic_load_explicit(&purge_pending, memory_order_relaxed)) {
        atomic_store(&purger_auto, false);
        break;
      }
      if (!pass_due(now)) continue;
      pthread_mutex_lock(&pass_lock);
      run_pass(now, purge_shared);
      pthread_mutex_unlock(&pass_lock);
    }
    /* Sequentially consistent with brisk_option_set: if the option came
     * back on after the loop read it off, this thread sees it here, or the
     * setter sees state 0 and starts a new thread. */
    atomic_store(&purger_state, 0);
    int expected = 0;
    if (!purger_wanted() || !atomic_compare_exchange_strong(&purger_state, &expected, 2)) return NULL;
  }
}

static void purger_start(void) {
  int expected = 0;
  if (!atomic_compare_exchange_strong(&purger_state, &expected, 1)) return;
  /* The thread must not take the program's signals. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 128 * 1024);
  pthread_t tid;
  int rc = pthread_create(&tid, &attr, purger_main, NULL);
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  atomic_store(&purger_state, rc == 0 ? 2 : 0);
}

/* Memory waits in a cache: a pass is due within half a delay, and with the
 * option on, the helper thread runs. */
void _bk_purge_note_pending(void) {
  if (!atomic_load_explicit(&purge_pending, memory_order_relaxed))
    atomic_store_explicit(&purge_pending, 1, memory_order_relaxed);
  if (likely(!purger_wanted()) || atomic_load(&purger_state) != 0) return;
  /* pthread_create allocates: not while brisk holds a lock, nor before the
   * process is set up. */
  if (_bk_opt.realtime || _bk_tls_heap == &_bk_heap_empty || _bk_locks_held ||
      !atomic_load_explicit(&_bk_process_ready, memory_order_acquire))
    return;
  purger_start();
}

/* From a heap's slow path, every so often. */
void _bk_purge_maybe(heap_t *h) {
  if (_bk_opt.realtime) return;
  uint64_t now = _bk_os_now_ms(), half = _bk_opt.purge_delay_ms / 2;
  PUBLISH(h->active_ms, now);                                     /* (as its heartbeat: transfer.c) */
  if (now >= h->next_purge_ms || h->next_purge_ms > now + half) { /* (the delay may have shrunk) */
    h->next_purge_ms = now + half;
    _bk_hot_flush(h); /* (the caller has not started on its page lists yet) */
    _bk_heap_release_empty(h, now - half);
    _bk_heap_collect_idle(h, now, false);
  }
  pass_if_due(now);
}

/* fork: no pass is under way in either process after it. */
void _bk_purge_fork_lock(void) { pthread_mutex_lock(&pass_lock); }

void _bk_purge_fork_unlock(bool in_child) {
  if (in_child) {
    atomic_store(&purger_state, 0); /* the helper thread is not in the child */
    /* Nor does it start there on its own: a child of a threaded process
     * may call only async-signal-safe functions until it execs, and
     * pthread_create is none (ThreadSanitizer kills such a child; found by
     * Fork.PoolLockHeldAtForkDoesNotHangTheChild). */
    atomic_store(&purger_auto, false);
  }
  pthread_mutex_unlock(&pass_lock);
}

static void flush_heap_warm(heap_t *h, void *arg) {
  (void)arg;
  _bk_huge_purge_warm(h, 0, true);
}

/* Everything cached goes back to the OS. Changes no heap's page lists, so it
 * is safe in the middle of an allocation that ran out of memory. */
void _bk_purge_release_all(void) {
  heap_t *h = _bk_tls_heap;
  uint64_t now = _bk_os_now_ms();
  if (h != &_bk_heap_empty) _bk_heap_collect_idle(h, now, true);
  _bk_transfer_drain(true);
  _bk_heap_foreach(flush_heap_warm, NULL);
  _bk_segment_cache_purge(now, true);
  _bk_abandoned_drain(true);
  _bk_segment_cache_purge(now, true);
}

/* Not beside a shared pass: the pass holds abandoned segments off their
 * list for a while, and those would be missed. */
void _bk_collect(void) {
  /* (First: the blocks go back as remote frees, which the collect of the
   * thread's own heap then takes.) */
  _bk_transfer_drain(true);
  _bk_heap_collect_own(true);
  pthread_mutex_lock(&pass_lock);
  _bk_locks_held++;
  _bk_purge_release_all();
  _bk_cache_rebuild_end();
  _bk_locks_held--;
  pthread_mutex_unlock(&pass_lock);
}
