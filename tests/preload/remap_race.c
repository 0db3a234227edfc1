/* Regression test for the huge-realloc race (run with remap_race_shim.so
 * preloaded, linked with libbrisk, BRISK_CACHE_CAP=0): a segment mapped into
 * the range a huge realloc just gave up must stay brisk's. Exit 0 = good. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brisk.h"

#define MiB ((size_t)1 << 20)

static int *armed, *placed;
static size_t *victim_size;
static void **victim;

static int failures;
#define EXPECT(cond, ...)                                                                                         \
  do {                                                                                                            \
    if (!(cond)) {                                                                                                \
      fprintf(stderr, "FAIL: " __VA_ARGS__);                                                                      \
      fputc('\n', stderr);                                                                                        \
      failures++;                                                                                                 \
    }                                                                                                             \
  } while (0)

/* reallocs p to n while the shim allocates a block of `size` bytes in the
 * freed range: at the first mremap that frees some, or with `arm` 2 at the
 * first munmap too. Nothing is cached, so the block's segment is fresh when
 * none of its tier has room: a block of the large tier the first time, a
 * huge one (a mapping of its own) after that. */
static void *realloc_racing(void *p, size_t n, void **block, int arm, size_t size) {
  *victim_size = size;
  *victim = NULL;
  *placed = 0;
  *armed = arm;
  void *q = realloc(p, n);
  EXPECT(q != NULL, "realloc(%zu) failed", n);
  EXPECT(*armed == 0, "realloc(%zu) freed no address space; the test proves nothing", n);
  *block = *victim;
  EXPECT(*block != NULL, "no block was allocated in the freed range");
  EXPECT(brisk_owns(*block), "block %p in the range freed by realloc(%zu) is not brisk's any more", *block, n);
  EXPECT(brisk_check_heap() == BRISK_CHECK_OK, "%s", brisk_check_message());
  EXPECT(*placed, "the block's segment was not mapped in the freed range; the test proves nothing");
  if (*block) memset(*block, 0x11, *victim_size);
  return q;
}

int main(void) {
  armed = dlsym(RTLD_DEFAULT, "remap_race_armed");
  victim_size = dlsym(RTLD_DEFAULT, "remap_race_size");
  victim = dlsym(RTLD_DEFAULT, "remap_race_victim");
  placed = dlsym(RTLD_DEFAULT, "remap_race_placed");
  if (!armed || !victim_size || !victim || !placed) {
    fprintf(stderr, "remap_race_shim.so is not preloaded\n");
    return 2;
  }
  size_t before = brisk_mapped_bytes();
  char *p = malloc(64 * MiB);
  p[0] = 7;
  void *shrunk_into, *moved_into;
  p = realloc_racing(p, 24 * MiB, &shrunk_into, 2, 800 * 1024); /* shrinks in place */
  /* Cannot grow in place: moves (mapping the space to move into unmaps
   * the slack of an aligned mapping, which must not set the race off). */
  p = realloc_racing(p, 60 * MiB, &moved_into, 1, 2 * MiB);
  EXPECT(p[0] == 7, "realloc lost the block's contents");
  free(shrunk_into);
  free(moved_into);
  free(p);
  brisk_collect();
  EXPECT(brisk_mapped_bytes() <= before + 8 * MiB, "%zu bytes still mapped after freeing all: a block was lost",
         brisk_mapped_bytes() - before);
  if (failures) return 1;
  puts("remap race: ok");
  return 0;
}
