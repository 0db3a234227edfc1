/* brisk-replay-driver: reads a trace of libbrisk-record.so and replays it
 * under whatever allocator is preloaded (replay_run.c), or summarises it
 * (replay_info.c). tools/brisk-replay runs it once per allocator. */
#ifndef BRISK_REPLAY_H
#define BRISK_REPLAY_H

#include "trace_reader.h"

#include <stdio.h>

/* mode=info: the summary of --info, on stdout. */
void replay_info(const trace *t, const char *path, FILE *out);
/* mode=replay: one JSON line on stdout (bench/common.h's format), the heap
 * over time to series_path when given; no thread runs more than `window`
 * calls ahead of another (0: no bound). Returns the exit status. */
int replay_run(const trace *t, const char *name, const char *series_path, long sample_ms, uint64_t window);

/* "12.3 MiB" */
const char *replay_bytes(char *buf, size_t len, double bytes);

/* C++ operators (replay_new.cpp). */
void *replay_new(int array, int nothrow, size_t size, size_t align);
void replay_delete(int array, void *p, int sized, size_t size, size_t align);

#endif
