/* brisk: a fast, general-purpose memory allocator.
 *
 * Every function here is safe to call from any thread. Blocks from any
 * brisk_* allocation function are released with brisk_free (or plain free()
 * when libbrisk replaces malloc, as it does under LD_PRELOAD or when linked).
 *
 * Errors follow POSIX: allocation failure returns NULL with errno = ENOMEM,
 * a bad alignment returns NULL (or the error code for posix_memalign) with
 * EINVAL. */
#ifndef BRISK_H
#define BRISK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BRISK_VERSION_MAJOR 0
#define BRISK_VERSION_MINOR 1

#if defined(__GNUC__)
#define BRISK_API __attribute__((visibility("default")))
#define BRISK_MALLOC_ATTR BRISK_API __attribute__((malloc, warn_unused_result))
#else
#define BRISK_API
#define BRISK_MALLOC_ATTR
#endif

/* ---- The malloc family -------------------------------------------------- */

/* malloc(0) returns a unique pointer that must be freed. Blocks of 16 bytes
 * or more are aligned to 16 bytes. */
BRISK_MALLOC_ATTR void *brisk_malloc(size_t size);
BRISK_MALLOC_ATTR void *brisk_calloc(size_t count, size_t size);
/* On failure the old block is left untouched and NULL is returned.
 * realloc(p, 0) frees nothing: it returns a minimal block (glibc frees and
 * returns NULL; both are allowed, and a unique pointer is the safer one). */
BRISK_API void *brisk_realloc(void *ptr, size_t size);
BRISK_API void *brisk_reallocarray(void *ptr, size_t count, size_t size);
BRISK_API void brisk_free(void *ptr);
/* size may be any value between the requested size and the usable size. */
BRISK_API void brisk_free_sized(void *ptr, size_t size);
/* alignment: a power of two. size need not be a multiple of it. */
BRISK_MALLOC_ATTR void *brisk_aligned_alloc(size_t alignment, size_t size);
/* alignment: a power of two that is a multiple of sizeof(void*). */
BRISK_API int brisk_posix_memalign(void **out, size_t alignment, size_t size);
BRISK_MALLOC_ATTR void *brisk_memalign(size_t alignment, size_t size);
/* Bytes that may be used at ptr (at least the requested size); 0 for NULL
 * or a pointer brisk did not allocate. */
BRISK_API size_t brisk_usable_size(const void *ptr);

/* ---- Limits -------------------------------------------------------------- */

/* Cap the memory brisk maps from the OS (0 = no cap). Allocations that would
 * pass it first release cached memory, then fail with ENOMEM. */
BRISK_API void brisk_set_max_bytes(size_t max_bytes);
BRISK_API size_t brisk_get_max_bytes(void);

/* Release every cached block and purge unused memory to the OS now. */
BRISK_API void brisk_collect(void);

/* Nonzero when ptr lies in memory brisk allocated (cheap; no locks). */
BRISK_API int brisk_owns(const void *ptr);

/* Bytes currently mapped from the OS by brisk (reserved address space that
 * is backed by a mapping, whether or not it is resident). */
BRISK_API size_t brisk_mapped_bytes(void);

#ifdef __cplusplus
}
#endif

#endif /* BRISK_H */
