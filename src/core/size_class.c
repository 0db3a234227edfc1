/* Size classes: multiples of 16 up to 128 bytes, then four classes per
 * doubling (waste at most 25%, about 12.5% on average) up to 1 MiB, and a
 * fifth in the doublings above 2, 4 and 8 KiB (types.h).
 * size_to_class() itself is inline in types.h: it is on the fast path. */
#include "core/core.h"

uint8_t _bk_large_class[LARGE_SIZE_MAX >> LARGE_CLASS_STEP_SHIFT];
uint8_t _bk_direct_class[DIRECT_SLOTS];

/* Each class fills the steps of the sizes it serves: a walk of the classes,
 * not a size_to_class per step (4096 of them, 28 instructions each, at the
 * start of every process). */
void _bk_size_class_init(void) {
  _Static_assert(DIRECT_SIZE_MAX % (1 << LARGE_CLASS_STEP_SHIFT) == 0, "a table step spans two classes");
  for (size_t slot = 0; slot < DIRECT_SLOTS; slot++) _bk_direct_class[slot] = (uint8_t)size_to_class(slot * 16);
  size_t i = DIRECT_SIZE_MAX >> LARGE_CLASS_STEP_SHIFT;
  for (unsigned cls = size_to_class(DIRECT_SIZE_MAX + 1); cls < CLASS_COUNT; cls++)
    for (size_t end = _bk_class_size(cls) >> LARGE_CLASS_STEP_SHIFT; i < end; i++)
      _bk_large_class[i] = (uint8_t)cls;
}

size_t _bk_class_size(unsigned cls) {
  if (cls <= 8) return (size_t)cls * 16;
  /* The split class of doubling b is the one after 2^b's. */
  unsigned splits = 0;
  for (unsigned b = SPLIT_FIRST_SHIFT; b <= SPLIT_LAST_SHIFT; b++) {
    unsigned at = size_to_class((size_t)1 << b) + 1;
    if (cls == at) return ((size_t)1 << b) + ((size_t)1 << (b - 3));
    splits += cls > at;
  }
  unsigned quarter = cls - splits - 9;
  unsigned b = 7 + quarter / 4, k = quarter % 4;
  return ((size_t)1 << b) + (size_t)(k + 1) * ((size_t)1 << (b - 2));
}

/* Each page holds at least 8 blocks, except in the 4 MiB large pages. */
unsigned _bk_class_segment_kind(unsigned cls) {
  size_t size = _bk_class_size(cls);
  if (size <= SMALL_SIZE_MAX) return SEG_SMALL;
  if (size <= MEDIUM_SIZE_MAX) return SEG_MEDIUM;
  return SEG_LARGE;
}
