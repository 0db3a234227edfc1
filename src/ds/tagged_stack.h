/* A lock-free LIFO stack of nodes that are never freed while the stack is
 * in use (pools keep their batch records until the pool is destroyed). The
 * top word holds the node's address in its low 48 bits and a counter,
 * bumped on every change, in the high 16: a pop that read a stale `next`
 * (the node was popped and pushed again meanwhile, ABA) fails its CAS. */
#ifndef BRISK_TAGGED_STACK_H
#define BRISK_TAGGED_STACK_H

#include <stdatomic.h>
#include <stdint.h>

typedef struct tagged_node {
  _Atomic(struct tagged_node *) next;
} tagged_node_t;
typedef _Atomic(uint64_t) tagged_stack_t;

#define TAGGED_SHIFT 48
#define TAGGED_PTR_MASK (((uint64_t)1 << TAGGED_SHIFT) - 1)

static inline tagged_node_t *tagged_ptr_(uint64_t top) {
  return (tagged_node_t *)(uintptr_t)(top & TAGGED_PTR_MASK);
}
static inline uint64_t tagged_next_(uint64_t old, tagged_node_t *n) {
  return (uint64_t)(uintptr_t)n | (((old >> TAGGED_SHIFT) + 1) << TAGGED_SHIFT);
}

/* Release: a popper that acquires the new top sees what the pusher wrote
 * into the node (and the payload it points to) before the push. */
static inline void tagged_push(tagged_stack_t *top, tagged_node_t *n) {
  uint64_t old = atomic_load_explicit(top, memory_order_relaxed), new_top;
  do {
    atomic_store_explicit(&n->next, tagged_ptr_(old), memory_order_relaxed);
    new_top = tagged_next_(old, n);
  } while (!atomic_compare_exchange_weak_explicit(top, &old, new_top, memory_order_release, memory_order_relaxed));
}

/* Acquire on both the load and a failed CAS: `next` is read from the node
 * the latest push published. A node popped by another thread meanwhile is
 * still mapped (never freed while in use), and the tag makes the CAS fail. */
static inline tagged_node_t *tagged_pop(tagged_stack_t *top) {
  uint64_t old = atomic_load_explicit(top, memory_order_acquire), new_top;
  tagged_node_t *n;
  do {
    n = tagged_ptr_(old);
    if (!n) return NULL;
    new_top = tagged_next_(old, atomic_load_explicit(&n->next, memory_order_relaxed));
  } while (!atomic_compare_exchange_weak_explicit(top, &old, new_top, memory_order_acquire, memory_order_acquire));
  return n;
}

#endif
