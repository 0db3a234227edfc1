/* libbrisk-record.so's two halves: recorder.c (the trace file, the
 * per-thread buffers, threads, fork and exit) and recorder_hooks.c (the
 * malloc family and C++ operators it interposes, which forward to glibc's
 * __libc_* entry points). Not part of libbrisk. */
#ifndef BRISK_RECORDER_H
#define BRISK_RECORDER_H

#include "trace_format.h"

#include <stddef.h>
#include <stdint.h>

#define REC_EXPORT __attribute__((visibility("default")))

/* True when this call is to be recorded: the recorder is on and this
 * thread is not already inside it (its own calls into libc, a signal
 * handler's malloc in the middle of an event). Then rec_leave() must
 * follow. Saves errno for rec_leave() to put back. */
int rec_enter(void);
void rec_leave(void);

/* An allocation that returned p (NULL when it failed): its sequence number
 * is taken now, after the real call returned. */
void rec_alloc(unsigned kind, unsigned flags, size_t size, uint64_t aux, void *p);
/* A release (free, delete, malloc_usable_size) of p: call it before the
 * real free, so that the number comes before any reuse of p. */
void rec_release(unsigned kind, unsigned flags, void *p, size_t size, uint64_t aux);
/* A realloc: seq_before from rec_seq() before the real call. */
uint64_t rec_seq(void);
void rec_realloc(unsigned kind, void *old, size_t nmemb, size_t size, void *result, uint64_t seq_before);

#endif
