/* The checked library's look at every block at exit: a block never freed
 * has its canary checked as free would have (an overflow of a block the
 * program kept, or leaked, is otherwise never seen), and a free block that
 * was handed out before has its free pattern checked as malloc would have
 * (a write after free into a block no malloc took again, likewise).
 * BRISK_EXIT_CHECK=0 turns it off. Only a process whose other threads
 * hold no heap is walked: a thread still running could be freeing a block
 * while it is read. */
#include "extra/extra.h"

#include <stdlib.h>

#if BRISK_CHECKED

static void check_used(void *block) { _bk_checked_at_exit(block, false); }

static void check_free(void *block) { _bk_checked_at_exit(block, true); }

static void list_broken(const page_t *pg) {
  (void)pg;
  CHECKED_FAIL("exit: write after free: %s (the first word of a free block, its link, was overwritten)",
               brisk_check_message());
}

static void count_other_thread_heaps(heap_t *h, void *arg) {
  if (!h->is_explicit && h != _bk_tls_heap) ++*(size_t *)arg;
}

void _bk_exit_check(void) {
  const char *on = getenv("BRISK_EXIT_CHECK");
  if (on && on[0] == '0') return;
  size_t others = 0;
  _bk_heap_foreach(count_other_thread_heaps, &others);
  if (others) return;
  block_walk_t walk = {.used = check_used, .free = check_free, .broken = list_broken};
  _bk_walk_blocks(&walk);
}

#else

void _bk_exit_check(void) {}

#endif
