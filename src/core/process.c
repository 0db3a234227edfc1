/* Process setup: options from the environment, once, before the first heap.
 * Runs from the constructor (api/process.c), or from the first allocation
 * when that comes earlier (the loader and libc allocate before constructors
 * run). */
#include "core/core.h"

static _Atomic(int) init_started;
static __thread int init_running BRISK_TLS;

void _bk_process_init(void) {
  if (likely(atomic_load_explicit(&_bk_process_ready, memory_order_acquire))) return;
  if (init_running) return; /* an allocation made by the setup itself */
  int expected = 0;
  if (!atomic_compare_exchange_strong(&init_started, &expected, 1)) {
    while (!atomic_load_explicit(&_bk_process_ready, memory_order_acquire)) _bk_os_yield();
    return;
  }
  init_running = 1;
  _bk_secure_init();     /* before any block is threaded */
  _bk_size_class_init(); /* before the first heap */
  _bk_hot_classes_init();
  _bk_transfer_classes_init();
  _bk_options_read_environment();
  init_running = 0;
  atomic_store_explicit(&_bk_process_ready, 1, memory_order_release);
}
