/* Shared by the libc-only preload programs: CHECK counts, and reports a
 * failure with its condition and a printf-style detail on stderr;
 * from_brisk says whether an address lies in libbrisk. Needs _GNU_SOURCE. */
#ifndef BRISK_PRELOAD_CHECK_H
#define BRISK_PRELOAD_CHECK_H

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static int failures, passes;

#define CHECK(cond, ...)                                              \
  do {                                                                \
    if (cond) {                                                       \
      ++passes;                                                       \
    } else {                                                          \
      ++failures;                                                     \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                   \
      fputc('\n', stderr);                                            \
    }                                                                 \
  } while (0)

static inline const char *object_of(const void *addr) {
  Dl_info info;
  if (!dladdr(addr, &info) || !info.dli_fname) return "(unknown)";
  return info.dli_fname;
}

static inline int from_brisk(const void *addr) { return strstr(object_of(addr), "libbrisk") != NULL; }

#endif
