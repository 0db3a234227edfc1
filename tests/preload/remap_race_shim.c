/* A shim preloaded before libbrisk that opens the window of the huge-realloc
 * race wide: right after an mremap gives up address space (a shrink in
 * place, or a move), and before brisk returns from it, it makes brisk map a
 * new segment exactly in the range just freed. An allocator that fixes its
 * chunk map only after the mremap wipes the new segment's entries. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#define CHUNK ((uintptr_t)4 << 20)

/* Set by the test program (found with dlsym): the next mremap that frees
 * address space (and with remap_race_armed 2, the next munmap: the secure
 * library shrinks a huge block's mapping with munmap) allocates a block of
 * `remap_race_size` bytes, whose segment is placed in the freed range; the
 * block goes to remap_race_victim. */
int remap_race_armed;
size_t remap_race_size;
void *remap_race_victim;
/* Set when the victim's segment was mapped in the freed range. */
int remap_race_placed;

/* Volatile: set around a call to malloc, which the compiler may take for
 * one that cannot read a static whose address never escapes. */
static volatile uintptr_t place_at;

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
  static void *(*real)(void *, size_t, int, int, int, off_t);
  if (!real) real = (void *(*)(void *, size_t, int, int, int, off_t))dlsym(RTLD_NEXT, "mmap");
  if (place_at && !addr && (flags & MAP_ANONYMOUS)) {
    void *want = (void *)place_at;
    place_at = 0;
    void *p = real(want, len, prot, flags | MAP_FIXED_NOREPLACE, fd, off);
    if (p == want) remap_race_placed = 1;
    if (p != MAP_FAILED) return p;
  }
  return real(addr, len, prot, flags, fd, off);
}

static void race_into(uintptr_t freed) {
  remap_race_armed = 0;
  place_at = (freed + CHUNK - 1) & ~(CHUNK - 1);
  remap_race_victim = malloc(remap_race_size);
  place_at = 0; /* (unused when the block needed no new segment) */
}

int munmap(void *addr, size_t len) {
  static int (*real)(void *, size_t);
  if (!real) real = (int (*)(void *, size_t))dlsym(RTLD_NEXT, "munmap");
  int r = real(addr, len);
  if (r == 0 && remap_race_armed == 2) race_into((uintptr_t)addr);
  return r;
}

void *mremap(void *old, size_t old_size, size_t new_size, int flags, ...) {
  static void *(*real)(void *, size_t, size_t, int, ...);
  if (!real) real = (void *(*)(void *, size_t, size_t, int, ...))dlsym(RTLD_NEXT, "mremap");
  void *target = NULL;
  if (flags & MREMAP_FIXED) {
    va_list ap;
    va_start(ap, flags);
    target = va_arg(ap, void *);
    va_end(ap);
  }
  void *r = (flags & MREMAP_FIXED) ? real(old, old_size, new_size, flags, target)
                                   : real(old, old_size, new_size, flags);
  if (r == MAP_FAILED || !remap_race_armed) return r;
  uintptr_t freed = 0;
  if (r != old) freed = (uintptr_t)old;
  else if (new_size < old_size) freed = (uintptr_t)old + new_size;
  if (freed) race_into(freed);
  return r;
}
