/* Between the two halves of the trace reader: trace_reader.c decodes the
 * chunks into events, trace_blocks.c turns them into ops and blocks. */
#ifndef BRISK_TRACE_READER_IMPL_H
#define BRISK_TRACE_READER_IMPL_H

#include "trace_reader.h"

typedef struct {
  trace_event *events; /* as read: chunk after chunk; .thread indexes thread_ids */
  size_t events_n, events_cap;
  uint32_t *thread_ids; /* the thread numbers of the file, as first seen */
  size_t thread_ids_n, thread_ids_cap;
} trace_parse;

/* Sets t->error; returns -1. */
int trace_fail(trace *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Orders the events, names the blocks, makes t's ops and thread lists. */
int trace_build(trace_parse *ps, trace *t);

#endif
