/* Run with LD_PRELOAD=libbrisk.so: brisk must not add a thread to a program
 * that has one (issue #10, item 7). The allocation work below (huge blocks
 * freed into brisk's caches, many small blocks) is what used to start
 * brisk's background purge thread; then, by mode:
 *   pthread_exit  the main thread calls pthread_exit with no other thread
 *                 alive: the process must exit (the caller runs it under a
 *                 timeout);
 *   tasks         /proc/self/task must have exactly one entry;
 *   unshare       unshare(CLONE_NEWUSER), which needs a single-threaded
 *                 process, must succeed (the caller first checks that it
 *                 succeeds without brisk).
 * Exit codes: 0 pass, 1 fail, 2 usage. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void allocation_work(void) {
  static const size_t huge[] = {8u << 20, 24u << 20, 64u << 20, 16u << 20, 40u << 20};
  for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
    char *p = malloc(huge[i]);
    if (!p) { perror("malloc"); exit(1); }
    memset(p, (int)i, huge[i]);
    free(p);
  }
  enum { SMALL = 20000 };
  static void *small[SMALL];
  for (int round = 0; round < 3; round++) {
    for (int i = 0; i < SMALL; i++) {
      small[i] = malloc((size_t)(16 + i % 2000));
      if (!small[i]) { perror("malloc"); exit(1); }
      memset(small[i], 1, 16);
    }
    for (int i = 0; i < SMALL; i++) free(small[i]);
  }
}

static int count_tasks(void) {
  DIR *d = opendir("/proc/self/task");
  if (!d) { perror("opendir /proc/self/task"); exit(1); }
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  allocation_work();
  if (!strcmp(mode, "pthread_exit")) {
    pthread_exit(NULL);
  } else if (!strcmp(mode, "tasks")) {
    int n = count_tasks();
    if (n != 1) { printf("FAIL: /proc/self/task has %d entries, expected 1\n", n); return 1; }
    return 0;
  } else if (!strcmp(mode, "unshare")) {
    if (unshare(CLONE_NEWUSER) != 0) {
      printf("FAIL: unshare(CLONE_NEWUSER): %s (threads: %d)\n", strerror(errno), count_tasks());
      return 1;
    }
    return 0;
  }
  fprintf(stderr, "usage: %s pthread_exit|tasks|unshare\n", argv[0]);
  return 2;
}
