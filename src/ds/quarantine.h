/* A quarantine: structs waiting to be reused, oldest first, of which the
 * newest `keep` are never handed out. Destroyed heap and pool handles wait
 * here, so a handle used after its destroy still reads a struct marked
 * dead for at least that long. The caller holds the quarantine's lock. */
#ifndef BRISK_QUARANTINE_H
#define BRISK_QUARANTINE_H

#include "ds/list.h"

typedef struct quarantine {
  list_t items;
  size_t count;
} quarantine_t;

static inline void quarantine_put(quarantine_t *q, list_node_t *n) {
  list_push_back(&q->items, n);
  q->count++;
}

/* The oldest item, or NULL while no more than `keep` wait. */
static inline list_node_t *quarantine_take(quarantine_t *q, size_t keep) {
  if (q->count <= keep) return NULL;
  q->count--;
  return list_pop_front(&q->items);
}

#endif
