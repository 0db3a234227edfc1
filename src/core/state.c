/* The process-wide and per-thread state every core file reads: the
 * options' values, the thread's heap, and whether the process is set up.
 * Defined here, below every file that reads them; options.c, thread_exit.c
 * (and purge.c for _bk_locks_held) and process.c are the files that change
 * them. */
#include "core/core.h"

BRISK_INTERNAL brisk_options_t _bk_opt = {
    .purge_delay_ms = 500,
    .cache_cap = (size_t)512 << 20,
};

/* A thread's heap until its first allocation: every direct slot points to a
 * page with no free block, and every hot stack is empty with no room, so
 * the first malloc takes the slow path, which creates the thread's heap. */
BRISK_INTERNAL page_t _bk_page_empty;
static block_t *no_hot_blocks[1];
BRISK_INTERNAL heap_t _bk_heap_empty = {
    .direct = {[0 ... DIRECT_SLOTS - 1] = &_bk_page_empty},
    .direct_hot = {[0 ... DIRECT_SLOTS - 1] = &_bk_heap_empty.hot[0]},
    .hot = {[0 ... CLASS_COUNT -
             1] = {.top = no_hot_blocks + 1, .end = no_hot_blocks + 1, .base = no_hot_blocks + 1}},
    .uid = UINT64_MAX, /* matches no segment, so frees take the remote path */
    .beat_budget = HEAP_BEAT_BYTES,
};
__thread heap_t *_bk_tls_heap BRISK_TLS = &_bk_heap_empty;

BRISK_INTERNAL __thread int _bk_locks_held BRISK_TLS;

/* Release by the thread that set up, acquire by every thread that checks:
 * a thread that sees 1 sees the options in place. */
BRISK_INTERNAL _Atomic(int) _bk_process_ready;
