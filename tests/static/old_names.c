/* A program that defines, for its own use, names brisk's internals once
 * exported from libbrisk.a. Linked statically with libbrisk.a it must link
 * (no "multiple definition") and run with brisk as its malloc. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brisk.h"

int page_init(int x) { return x + 1; }
int cache_put(int x) { return x * 2; }
int segment_map = 3;
long heap_create(void) { return 4; }
int os_purge(void) { return 5; }
int huge_alloc(void) { return 6; }
int class_size(int c) { return c; }
int purge_maybe = 7;
int brisk_opt = 8;
int brisk_chunk_map[4] = {9};
void brisk_fatal(const char *m) { fputs(m, stderr); }
void brisk_warning(const char *m) { fputs(m, stderr); }
int brisk_tls_heap = 10;
int process_init = 11;
int leak_report(void) { return 12; }

int main(void) {
  int sum = page_init(1) + cache_put(1) + segment_map + (int)heap_create() + os_purge() + huge_alloc() +
            class_size(0) + purge_maybe + brisk_opt + brisk_chunk_map[0] + brisk_tls_heap + process_init +
            leak_report();
  char *p = malloc(100);
  if (!p || !brisk_owns(p)) {
    fprintf(stderr, "malloc is not brisk's\n");
    return 1;
  }
  strcpy(p, "ok");
  void *big = malloc(8 << 20);
  if (!big || !brisk_owns(big)) return 1;
  free(big);
  free(p);
  printf("old names: %d\n", sum);
  return sum == 79 ? 0 : 1;
}
