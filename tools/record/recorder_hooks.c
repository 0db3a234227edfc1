/* What libbrisk-record.so interposes: the whole malloc family and every
 * C++ operator new and delete. Each records what the program asked and
 * forwards to glibc through the __libc_* names it exports, which avoids
 * dlsym (it allocates) on the way to the real malloc. The operators call
 * glibc's malloc themselves rather than the C++ runtime's, which would
 * call malloc and be recorded twice. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "recorder.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);

static int power_of_two(size_t a) { return a && !(a & (a - 1)); }

REC_EXPORT void *malloc(size_t n) {
  if (!rec_enter()) return __libc_malloc(n);
  void *p = __libc_malloc(n);
  rec_alloc(TK_MALLOC, 0, n, 0, p);
  rec_leave();
  return p;
}

REC_EXPORT void *calloc(size_t nmemb, size_t n) {
  if (!rec_enter()) return __libc_calloc(nmemb, n);
  void *p = __libc_calloc(nmemb, n);
  rec_alloc(TK_CALLOC, 0, n, nmemb, p);
  rec_leave();
  return p;
}

REC_EXPORT void free(void *p) {
  if (!rec_enter()) {
    __libc_free(p);
    return;
  }
  rec_release(TK_FREE, 0, p, 0, 0);
  __libc_free(p);
  rec_leave();
}

REC_EXPORT void cfree(void *p) { free(p); }

REC_EXPORT void *realloc(void *old, size_t n) {
  if (!rec_enter()) return __libc_realloc(old, n);
  uint64_t before = rec_seq();
  void *p = __libc_realloc(old, n);
  rec_realloc(TK_REALLOC, old, 0, n, p, before);
  rec_leave();
  return p;
}

static void *reallocarray_impl(void *old, size_t nmemb, size_t n) {
  size_t bytes;
  if (__builtin_mul_overflow(nmemb, n, &bytes)) {
    errno = ENOMEM;
    return NULL;
  }
  return __libc_realloc(old, bytes);
}

REC_EXPORT void *reallocarray(void *old, size_t nmemb, size_t n) {
  if (!rec_enter()) return reallocarray_impl(old, nmemb, n);
  uint64_t before = rec_seq();
  void *p = reallocarray_impl(old, nmemb, n);
  rec_realloc(TK_REALLOCARRAY, old, nmemb, n, p, before);
  rec_leave();
  return p;
}

/* glibc's rules: a power of two that is a multiple of sizeof(void *). */
static int posix_memalign_impl(void **out, size_t align, size_t n) {
  if (!power_of_two(align) || align % sizeof(void *)) return EINVAL;
  void *p = __libc_memalign(align, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}

REC_EXPORT int posix_memalign(void **out, size_t align, size_t n) {
  if (!rec_enter()) return posix_memalign_impl(out, align, n);
  int rc = posix_memalign_impl(out, align, n);
  rec_alloc(TK_POSIX_MEMALIGN, 0, n, align, rc ? NULL : *out);
  rec_leave();
  return rc;
}

static void *aligned_alloc_impl(size_t align, size_t n) {
  if (!power_of_two(align)) {
    errno = EINVAL;
    return NULL;
  }
  return __libc_memalign(align, n);
}

REC_EXPORT void *aligned_alloc(size_t align, size_t n) {
  if (!rec_enter()) return aligned_alloc_impl(align, n);
  void *p = aligned_alloc_impl(align, n);
  rec_alloc(TK_ALIGNED_ALLOC, 0, n, align, p);
  rec_leave();
  return p;
}

REC_EXPORT void *memalign(size_t align, size_t n) {
  if (!rec_enter()) return __libc_memalign(align, n);
  void *p = __libc_memalign(align, n);
  rec_alloc(TK_MEMALIGN, 0, n, align, p);
  rec_leave();
  return p;
}

REC_EXPORT void *valloc(size_t n) {
  if (!rec_enter()) return __libc_valloc(n);
  void *p = __libc_valloc(n);
  rec_alloc(TK_VALLOC, 0, n, 0, p);
  rec_leave();
  return p;
}

REC_EXPORT void *pvalloc(size_t n) {
  if (!rec_enter()) return __libc_pvalloc(n);
  void *p = __libc_pvalloc(n);
  rec_alloc(TK_PVALLOC, 0, n, 0, p);
  rec_leave();
  return p;
}

/* glibc exports no __libc_ name for it: looked up once, with recording
 * off, since dlsym may allocate. */
static size_t real_usable_size(void *p) {
  static size_t (*real)(void *);
  if (!real) real = (size_t(*)(void *))dlsym(RTLD_NEXT, "malloc_usable_size");
  return real ? real(p) : 0;
}

REC_EXPORT size_t malloc_usable_size(void *p) {
  if (!rec_enter()) return real_usable_size(p);
  rec_release(TK_USABLE_SIZE, 0, p, 0, 0);
  size_t n = real_usable_size(p);
  rec_leave();
  return n;
}

/* ---- C++ ------------------------------------------------------------------ */

typedef void (*new_handler_fn)(void);
/* From libstdc++, present only when the program uses it. */
extern new_handler_fn _ZSt15get_new_handlerv(void) __attribute__((weak));
extern void _ZSt17__throw_bad_allocv(void) __attribute__((weak, noreturn));

static void *new_alloc(size_t n, size_t align) {
  if (!n) n = 1;
  return align ? __libc_memalign(align, n) : __libc_malloc(n);
}

/* The standard's loop: the new_handler until memory comes or there is
 * none; then std::bad_alloc, or NULL for the nothrow forms. */
static void *new_impl(size_t n, size_t align, int nothrow) {
  void *p = new_alloc(n, align);
  while (!p) {
    new_handler_fn handler = _ZSt15get_new_handlerv ? _ZSt15get_new_handlerv() : NULL;
    if (!handler) {
      if (nothrow) return NULL;
      if (_ZSt17__throw_bad_allocv) _ZSt17__throw_bad_allocv();
      _exit(134); /* no C++ runtime to throw with */
    }
    handler();
    p = new_alloc(n, align);
  }
  return p;
}

/* A C++ exception may pass through rec_enter/rec_leave: new_impl runs
 * before the recorder is entered. */
static void *new_recorded(unsigned kind, size_t n, size_t align, int nothrow) {
  void *p = new_impl(n, align, nothrow);
  if (rec_enter()) {
    rec_alloc(kind, (nothrow ? TF_NOTHROW : 0) | (align ? TF_ALIGNED : 0), n, align, p);
    rec_leave();
  }
  return p;
}

static void delete_recorded(unsigned kind, void *p, size_t n, size_t align, int sized) {
  if (rec_enter()) {
    rec_release(kind, (sized ? TF_SIZED : 0) | (align ? TF_ALIGNED : 0), p, n, align);
    __libc_free(p);
    rec_leave();
    return;
  }
  __libc_free(p);
}

typedef struct nothrow_t nothrow_t;
#define NEW_FORMS(name, kind)                                                                                     \
  REC_EXPORT void *name##m(size_t n) { return new_recorded(kind, n, 0, 0); }                                      \
  REC_EXPORT void *name##mRKSt9nothrow_t(size_t n, const nothrow_t *t) {                                          \
    (void)t;                                                                                                      \
    return new_recorded(kind, n, 0, 1);                                                                           \
  }                                                                                                               \
  REC_EXPORT void *name##mSt11align_val_t(size_t n, size_t a) { return new_recorded(kind, n, a, 0); }             \
  REC_EXPORT void *name##mSt11align_val_tRKSt9nothrow_t(size_t n, size_t a, const nothrow_t *t) {                 \
    (void)t;                                                                                                      \
    return new_recorded(kind, n, a, 1);                                                                           \
  }
NEW_FORMS(_Znw, TK_NEW)
NEW_FORMS(_Zna, TK_NEW_ARRAY)

#define DELETE_FORMS(name, kind)                                                                                  \
  REC_EXPORT void name##Pv(void *p) { delete_recorded(kind, p, 0, 0, 0); }                                        \
  REC_EXPORT void name##PvRKSt9nothrow_t(void *p, const nothrow_t *t) {                                           \
    (void)t;                                                                                                      \
    delete_recorded(kind, p, 0, 0, 0);                                                                            \
  }                                                                                                               \
  REC_EXPORT void name##Pvm(void *p, size_t n) { delete_recorded(kind, p, n, 0, 1); }                             \
  REC_EXPORT void name##PvSt11align_val_t(void *p, size_t a) { delete_recorded(kind, p, 0, a, 0); }               \
  REC_EXPORT void name##PvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, const nothrow_t *t) {                  \
    (void)t;                                                                                                      \
    delete_recorded(kind, p, 0, a, 0);                                                                            \
  }                                                                                                               \
  REC_EXPORT void name##PvmSt11align_val_t(void *p, size_t n, size_t a) { delete_recorded(kind, p, n, a, 1); }
DELETE_FORMS(_Zdl, TK_DELETE)
DELETE_FORMS(_Zda, TK_DELETE_ARRAY)
