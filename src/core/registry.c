/* The segment registry: every segment brisk has mapped, in one list under
 * one lock, so that statistics, checks and visits can walk them all. A
 * walker holds the lock for the whole walk; segments are added right after
 * they are mapped and removed right before they are unmapped, so a walker
 * never reads an unmapped header. */
#include "core/core.h"

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static list_t all_segments;

void _bk_segments_lock(void) { pthread_mutex_lock(&registry_lock); }
void _bk_segments_unlock(void) { pthread_mutex_unlock(&registry_lock); }
segment_t *_bk_segments_first(void) { return LIST_FIRST(&all_segments, segment_t, registry_link); }
segment_t *_bk_segments_next(segment_t *seg) { return LIST_NEXT(seg, segment_t, registry_link); }

void _bk_segments_add(segment_t *seg) {
  _bk_segments_lock();
  list_push_front(&all_segments, &seg->registry_link);
  _bk_segments_unlock();
}

void _bk_segments_remove(segment_t *seg) {
  _bk_segments_lock();
  list_remove(&all_segments, &seg->registry_link);
  _bk_segments_unlock();
}
