/* Attacks on freed memory and misuse of free through the plain malloc API,
 * for the secure library under LD_PRELOAD (secure.sh). Each mode exits 0
 * when the attack "worked" (the allocator let it through), so a run that
 * ends any other way was stopped.
 *   poison      overwrite a freed 64 B block's first word with an address,
 *               then malloc 64 B until that address comes back
 *   double      free a block twice
 *   interior    free a pointer 16 bytes into a block
 *   underflow   write the 160 bytes before a 3 MiB block, then free it
 *   overflow    write on past the end of a 3 MiB block, up to 1 MiB
 *   raise       raise(SIGSEGV): brisk's handler of guard faults lets it kill
 *   own_handler the program's own SIGSEGV handler (exit 3) sees the underflow
 *               (expected: exit 3, brisk's handler replaced) */
#include <signal.h>
#include <unistd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char target[256] __attribute__((aligned(64)));
static void *volatile sink;
static void *launder(void *p) {
  sink = p;
  return sink;
}

static void on_segv(int sig) {
  (void)sig;
  _exit(3);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  if (!strcmp(mode, "poison")) {
    char *a = malloc(64);
    free(a);
    *(void *volatile *)launder(a) = target;
    for (int i = 0; i < 100000; i++)
      if (malloc(64) == (void *)target) {
        printf("exploited: malloc returned %p\n", (void *)target);
        return 0;
      }
    return 2;
  }
  if (!strcmp(mode, "double")) {
    void *p = malloc(100);
    free(p);
    free(launder(p));
    return 0;
  }
  if (!strcmp(mode, "interior")) {
    char *p = malloc(100);
    free(launder(p + 16));
    return 0;
  }
  if (!strcmp(mode, "underflow")) {
    char *p = malloc(3 << 20);
    memset(launder(p - 160), 0x41, 160);
    free(p);
    return 0;
  }
  if (!strcmp(mode, "overflow")) {
    char *p = launder(malloc(3 << 20));
    for (size_t i = 0; i < (4u << 20); i++) ((volatile char *)p)[i] = 0x41;
    free(p);
    return 0;
  }
  if (!strcmp(mode, "raise")) {
    raise(SIGSEGV);
    return 0;
  }
  if (!strcmp(mode, "own_handler")) {
    signal(SIGSEGV, on_segv);
    char *p = malloc(3 << 20);
    memset(launder(p - 160), 0x41, 160);
    free(p);
    return 0;
  }
  fprintf(stderr, "usage: %s poison|double|interior|underflow|overflow|raise|own_handler\n", argv[0]);
  return 64;
}
