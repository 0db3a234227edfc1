/* What the two override files (override.c: the malloc family, new_delete.c:
 * C++ operators) share. Built into libbrisk.so and libbrisk.a only; the
 * prefixed-only library (brisk_core) leaves malloc alone. */
#ifndef BRISK_OVERRIDE_H
#define BRISK_OVERRIDE_H

#include "api/api.h"

#define EXPORT __attribute__((visibility("default")))

/* valgrind and other tools that bring their own allocator swap these names,
 * in any library, for theirs, by address; not the others exported here
 * (valgrind 3.19: reallocarray, free_sized, pvalloc, __libc_*, ...). Those
 * others are therefore built only from calls to these, so a tool sees every
 * block come and go through functions it replaced. noipa keeps each body at
 * its own address, never inlined into a caller nor folded with an identical
 * twin (free and operator delete share a body); the hot paths keep their
 * code, only the rare entry points pay a jump. */
#if defined(__clang__)
#define REPLACEABLE EXPORT __attribute__((noinline))
#else
#define REPLACEABLE EXPORT __attribute__((noipa))
#endif

#endif
