/* The intrusive doubly linked list every brisk list is made of: a node
 * embedded in the listed struct, a list that knows both ends. Not
 * thread-safe: each list is owned by one thread or guarded by one lock
 * (the list's declaration says which). */
#ifndef BRISK_LIST_H
#define BRISK_LIST_H

#include "ds/ds.h"

typedef struct list_node {
  struct list_node *next, *prev;
} list_node_t;
typedef struct list {
  list_node_t *first, *last;
} list_t;

/* The struct of `type` that holds node as its `member`; NULL for NULL. */
#define LIST_ENTRY(node, type, member) ((type *)list_container_((node), offsetof(type, member)))
#define LIST_FIRST(list, type, member) LIST_ENTRY((list)->first, type, member)
#define LIST_LAST(list, type, member) LIST_ENTRY((list)->last, type, member)
#define LIST_NEXT(item, type, member) LIST_ENTRY((item)->member.next, type, member)

static inline void *list_container_(list_node_t *node, size_t offset) {
  return node ? (char *)node - offset : NULL;
}

static inline bool list_is_empty(const list_t *l) { return l->first == NULL; }

static inline void list_push_front(list_t *l, list_node_t *n) {
  n->prev = NULL;
  n->next = l->first;
  if (l->first) l->first->prev = n;
  else l->last = n;
  l->first = n;
}

static inline void list_push_back(list_t *l, list_node_t *n) {
  n->next = NULL;
  n->prev = l->last;
  if (l->last) l->last->next = n;
  else l->first = n;
  l->last = n;
}

static inline void list_remove(list_t *l, list_node_t *n) {
  BRISK_ASSERT(n->prev ? n->prev->next == n : l->first == n);
  BRISK_ASSERT(n->next ? n->next->prev == n : l->last == n);
  if (n->prev) n->prev->next = n->next;
  else l->first = n->next;
  if (n->next) n->next->prev = n->prev;
  else l->last = n->prev;
  n->next = n->prev = NULL;
}

static inline list_node_t *list_pop_front(list_t *l) {
  list_node_t *n = l->first;
  if (n) list_remove(l, n);
  return n;
}

static inline void list_move_to_front(list_t *l, list_node_t *n) {
  if (l->first == n) return;
  list_remove(l, n);
  list_push_front(l, n);
}

static inline void list_move_to_back(list_t *l, list_node_t *n) {
  if (l->last == n) return;
  list_remove(l, n);
  list_push_back(l, n);
}

/* Every link agrees with its neighbour's and the ends are right (a walk:
 * for BRISK_ASSERT_FULL). */
static inline bool list_is_consistent(const list_t *l) {
  const list_node_t *prev = NULL;
  for (const list_node_t *n = l->first; n; prev = n, n = n->next)
    if (n->prev != prev) return false;
  return l->last == prev;
}

#endif
