/* Giving memory back to the OS after it sat unused for the purge delay.
 *
 * Each heap purges its own free pages from its slow path. Memory no thread
 * owns (the segment cache, warm huge blocks, abandoned segments) is purged by
 * a background thread, started only once such memory is waiting, so that a
 * program that frees most of its memory and goes quiet still shrinks. */
#include "internal.h"

#include <pthread.h>
#include <signal.h>
#include <time.h>

static _Atomic(int) purger_state; /* 0 none, 1 starting, 2 running */
static _Atomic(int) purge_pending;

static void purge_heap_cache(heap_t *h, void *now) { huge_flush_thread_cache(h, *(uint64_t *)now, false); }

static void purge_shared(uint64_t now) {
  atomic_store_explicit(&purge_pending, 0, memory_order_relaxed);
  cache_purge(now, false);
  if (cache_bytes()) atomic_store_explicit(&purge_pending, 1, memory_order_relaxed);
  heap_foreach(purge_heap_cache, &now);
  segment_drain_abandoned();
}

/* Held through each background pass, so that turning realtime mode on can
 * wait out a pass already under way. */
static pthread_mutex_t pass_lock = PTHREAD_MUTEX_INITIALIZER;

void purge_quiesce(void) {
  pthread_mutex_lock(&pass_lock);
  pthread_mutex_unlock(&pass_lock);
}

static void *purger_main(void *arg) {
  (void)arg;
  for (;;) {
    uint64_t delay = brisk_opt.purge_delay_ms;
    uint64_t nap = atomic_load_explicit(&purge_pending, memory_order_relaxed) ? delay / 2 : 1000;
    if (nap < 10) nap = 10;
    struct timespec ts = {(time_t)(nap / 1000), (long)(nap % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    pthread_mutex_lock(&pass_lock);
    if (!brisk_opt.realtime) purge_shared(os_now_ms());
    pthread_mutex_unlock(&pass_lock);
  }
  return NULL;
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

void purge_note_pending(void) {
  if (!atomic_load_explicit(&purge_pending, memory_order_relaxed))
    atomic_store_explicit(&purge_pending, 1, memory_order_relaxed);
  if (likely(atomic_load_explicit(&purger_state, memory_order_relaxed) != 0)) return;
  /* pthread_create allocates: not while brisk holds a lock, nor before the
   * process is set up. */
  if (brisk_opt.realtime || brisk_tls_heap == &brisk_heap_empty || heap_registry_held() ||
      !atomic_load_explicit(&brisk_process_ready, memory_order_acquire))
    return;
  purger_start();
}

/* From a heap's slow path, every so often. */
void purge_maybe(heap_t *h) {
  if (brisk_opt.realtime) return;
  uint64_t now = os_now_ms();
  if (now < h->next_purge_ms) return;
  h->next_purge_ms = now + brisk_opt.purge_delay_ms / 2;
  heap_collect_caches(h, now, false);
}

void purge_reset_after_fork(void) {
  atomic_store(&purger_state, 0);
  pthread_mutex_init(&pass_lock, NULL); /* the purger is not in the child */
}

static void flush_heap_cache(heap_t *h, void *arg) {
  (void)arg;
  huge_flush_thread_cache(h, 0, true);
}

/* Everything cached goes back to the OS. Changes no heap's page lists, so it
 * is safe in the middle of an allocation that ran out of memory. */
void purge_release_all(void) {
  heap_t *h = brisk_tls_heap;
  uint64_t now = os_now_ms();
  if (h != &brisk_heap_empty) heap_collect_caches(h, now, true);
  heap_foreach(flush_heap_cache, NULL);
  cache_purge(now, true);
  segment_drain_abandoned();
  cache_purge(now, true);
}

/* Not beside a background pass: the pass holds abandoned segments off their
 * list for a while, and those would be missed. */
void brisk_collect(void) {
  heap_collect_own(true);
  pthread_mutex_lock(&pass_lock);
  purge_release_all();
  pthread_mutex_unlock(&pass_lock);
}
