/* brisk.h compiles on its own as strict ISO C (built as -std=c99 and
 * -std=c11, -pedantic -Werror) and its functions link and run from C. */
#include "brisk.h"

#include <stdio.h>
#include <string.h>

int main(void) {
  brisk_heap_t *heap;
  brisk_pool_t *pool;
  brisk_pool_stats_t st;
  char *p = (char *)brisk_malloc(100);
  void *a = brisk_aligned_alloc(256, 1000);
  void *h;
  void *o;
  int ok = 1;

  if (!p || !brisk_owns(p) || brisk_usable_size(p) < 100) ok = 0;
  if (p) memset(p, 1, 100);
  if (!a || ((uintptr_t)a & 255) != 0) ok = 0;
  a = brisk_realloc_aligned(a, 4096, 5000);
  if (!a || ((uintptr_t)a & 4095) != 0) ok = 0;
  brisk_free(p);
  brisk_free(a);
  p = (char *)brisk_calloc_aligned(10, 10, 64);
  if (!p || ((uintptr_t)p & 63) != 0 || p[99] != 0) ok = 0;
  brisk_free(p);

  heap = brisk_heap_new();
  h = heap ? brisk_heap_malloc(heap, 64) : NULL;
  if (!h || brisk_heap_held_bytes(heap) == 0) ok = 0;
  h = heap ? brisk_heap_realloc_aligned(heap, h, 128, 1000) : NULL;
  if (!h || ((uintptr_t)h & 127) != 0) ok = 0;
  h = heap ? brisk_heap_calloc_aligned(heap, 1, 100, 32) : NULL;
  if (!h || ((uintptr_t)h & 31) != 0) ok = 0;
  brisk_heap_destroy(heap);

  pool = brisk_pool_new(24, 8, 0);
  o = pool ? brisk_pool_alloc(pool) : NULL;
  if (!o) ok = 0;
  if (pool) {
    brisk_pool_free(pool, o);
    brisk_pool_stats(pool, &st);
    if (st.live_objects != 0 || st.object_size < 24) ok = 0;
    brisk_pool_destroy(pool);
  }

  if (!ok) fprintf(stderr, "brisk C API check failed\n");
  return ok ? 0 : 1;
}
