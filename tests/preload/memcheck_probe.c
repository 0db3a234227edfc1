/* Runs under valgrind's memcheck with libbrisk-checked.so (built with
 * -DBRISK_VALGRIND=ON) preloaded, which serves its malloc: memcheck must
 * see brisk's blocks (tests/preload/memcheck.sh). With "misuse" it reads a
 * freed block of 200 bytes at byte 100 and leaks one block of 77 bytes;
 * without, it uses every size and frees everything. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *volatile sink;

static void use(size_t n) {
  char *p = malloc(n);
  memset(p, 1, n);
  p = realloc(p, n * 2 + 1);
  memset(p, 2, n * 2 + 1);
  sink = p;
  free(p);
  p = calloc(1, n);
  if (p[n / 2]) abort(); /* zeroed: defined for memcheck too */
  free(p);
}

int main(int argc, char **argv) {
  for (size_t n = 1; n <= ((size_t)8 << 20); n = n * 3 + 1) use(n);
  if (argc > 1 && strcmp(argv[1], "misuse") == 0) {
    char *p = malloc(200);
    memset(p, 1, 200);
    free(p);
    volatile char c = ((volatile char *)p)[100]; /* a read after free */
    char *leaked = malloc(77);
    leaked[0] = c;
    sink = leaked;
    sink = NULL; /* definitely lost */
  }
  puts("memcheck_probe: done");
  return 0;
}
