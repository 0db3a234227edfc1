/* Size classes: multiples of 16 up to 128 bytes, then four classes per
 * doubling (waste at most 25%, about 12.5% on average) up to 1 MiB.
 * size_to_class() itself is inline in types.h: it is on the fast path. */
#include "core/core.h"

uint8_t _bk_large_class[LARGE_SIZE_MAX >> LARGE_CLASS_STEP_SHIFT];

void _bk_size_class_init(void) {
  _Static_assert(DIRECT_SIZE_MAX % (1 << LARGE_CLASS_STEP_SHIFT) == 0, "a table step spans two classes");
  for (size_t i = DIRECT_SIZE_MAX >> LARGE_CLASS_STEP_SHIFT; i < sizeof _bk_large_class; i++)
    _bk_large_class[i] = (uint8_t)size_to_class((i << LARGE_CLASS_STEP_SHIFT) + 1);
}

size_t _bk_class_size(unsigned cls) {
  if (cls <= 8) return (size_t)cls * 16;
  unsigned b = 7 + (cls - 9) / 4;
  unsigned k = (cls - 9) % 4;
  return ((size_t)1 << b) + (size_t)(k + 1) * ((size_t)1 << (b - 2));
}

/* Each page holds at least 8 blocks, except in the 4 MiB large pages. */
unsigned _bk_class_segment_kind(unsigned cls) {
  size_t size = _bk_class_size(cls);
  if (size <= SMALL_SIZE_MAX) return SEG_SMALL;
  if (size <= MEDIUM_SIZE_MAX) return SEG_MEDIUM;
  return SEG_LARGE;
}
