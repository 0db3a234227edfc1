/* Remote frees: blocks freed by a thread that does not own their page.
 *
 * The freeing thread pushes the block onto the page's thread_free word (an
 * atomic LIFO whose low bits hold the page's delayed state and whose high
 * bits count the blocks). The owner takes the whole list in one exchange
 * when it runs out of blocks. A page its owner parked as full is in
 * DELAYED_USE: the next remote free instead pushes the block onto the
 * owner's heap->delayed_free list, so that the owner learns the page has
 * room without scanning its full pages.
 *
 * Orders: a push is a release CAS, so the owner's acquire exchange sees the
 * link the pusher wrote into the block; state changes are acq_rel CASes on
 * the same word, so they are totally ordered with the pushes. */
#include "core/core.h"

/* Moves the page's delayed state to `want`, waiting out a remote thread that
 * is in the middle of a delayed free. With only_if_empty, it fails (returns
 * false) when remote frees are pending: the caller should collect them. */
bool _bk_page_set_delayed(page_t *pg, enum delayed_state want, bool only_if_empty) {
  uintptr_t tf = atomic_load_explicit(&pg->thread_free, memory_order_relaxed);
  for (;;) {
    enum delayed_state cur = (enum delayed_state)(tf & TF_STATE_MASK);
    if (cur == DELAYED_FREEING) {
      _bk_os_yield();
      tf = atomic_load_explicit(&pg->thread_free, memory_order_relaxed);
      continue;
    }
    if (only_if_empty && (tf & ~TF_STATE_MASK)) return false;
    if (cur == want) return true;
    if (atomic_compare_exchange_weak_explicit(&pg->thread_free, &tf, (tf & ~TF_STATE_MASK) | want,
                                              memory_order_acq_rel, memory_order_relaxed))
      return true;
  }
}

/* A page left in the FREEING state by a fork would make the child's owner
 * wait for it forever: fork_prepare closes this gate and waits until no
 * thread is between FREEING and NONE. Only the rare path that hands a block
 * of a parked page to its owner pays for it.
 * Sequentially consistent: the gate is a Dekker pair (each side stores its
 * word, then loads the other's), which needs a single total order of the
 * four accesses; acquire/release would let both sides miss each other. */
static _Atomic(int) fork_gate_closed;
static _Atomic(int) freeing_now;

void _bk_page_fork_gate_close(void) {
  atomic_store(&fork_gate_closed, 1);
  while (atomic_load(&freeing_now)) _bk_os_yield();
}

/* In the child, threads caught between their count and its undo are gone. */
void _bk_page_fork_gate_open(bool in_child) {
  if (in_child) atomic_store(&freeing_now, 0);
  atomic_store(&fork_gate_closed, 0);
}

static void freeing_enter(void) {
  for (;;) {
    atomic_fetch_add(&freeing_now, 1);
    if (!atomic_load(&fork_gate_closed)) return;
    atomic_fetch_sub(&freeing_now, 1);
    while (atomic_load(&fork_gate_closed)) _bk_os_yield();
  }
}

void _bk_page_free_remote(page_t *pg, block_t *b) {
  uintptr_t tf = atomic_load_explicit(&pg->thread_free, memory_order_relaxed);
  for (;;) {
    if ((tf & TF_STATE_MASK) == DELAYED_USE) {
      /* The owner parked this page as full: hand the block to the owner's
       * heap so it sees the page has room again. */
      freeing_enter();
      uintptr_t busy = (tf & ~TF_STATE_MASK) | DELAYED_FREEING;
      if (!atomic_compare_exchange_weak_explicit(&pg->thread_free, &tf, busy, memory_order_acquire,
                                                 memory_order_relaxed)) {
        atomic_fetch_sub(&freeing_now, 1);
        continue;
      }
      heap_t *h = atomic_load_explicit(&pg->heap, memory_order_acquire);
      block_t *head = atomic_load_explicit(&h->delayed_free, memory_order_relaxed);
      do {
        link_set(b, head);
      } while (!atomic_compare_exchange_weak_explicit(&h->delayed_free, &head, b, memory_order_release,
                                                      memory_order_relaxed));
      /* Only this thread may leave the FREEING state. */
      tf = atomic_load_explicit(&pg->thread_free, memory_order_relaxed);
      while (!atomic_compare_exchange_weak_explicit(&pg->thread_free, &tf, (tf & ~TF_STATE_MASK) | DELAYED_NONE,
                                                    memory_order_release, memory_order_relaxed)) {
      }
      atomic_fetch_sub(&freeing_now, 1);
      return;
    }
    link_set(b, tf_list(tf));
    uintptr_t pushed = (uintptr_t)b | (tf & TF_STATE_MASK) | ((tf & TF_COUNT_MASK) + TF_COUNT_ONE);
    if (atomic_compare_exchange_weak_explicit(&pg->thread_free, &tf, pushed, memory_order_release,
                                              memory_order_relaxed))
      return;
  }
}
