/* Reading a trace of libbrisk-record.so (trace_format.h) into what a replay
 * needs: every call in the order the program made them (the global
 * sequence), each block named by an id instead of its address, and each
 * thread's list of calls. Never trusts the file: a damaged or foreign one
 * gives an error message, a file cut short inside a chunk reads up to its
 * last whole chunk (and says so). The reader's arrays are mapped with mmap
 * (or malloc'd with TRACE_READER_MALLOC, for the sanitizers and the
 * fuzzer), so that a replay leaves the allocator under test alone. */
#ifndef BRISK_TRACE_READER_H
#define BRISK_TRACE_READER_H

#include "trace_format.h"

#include <stddef.h>
#include <stdint.h>

#define TRACE_NO_BLOCK UINT32_MAX
/* trace_op.mark */
#define OP_WAIT 1 /* its block came from another thread: wait until it exists */
#define OP_UNKNOWN                                                                                                \
  2                 /* its block is not in the trace (allocated before recording began,
                        or in a chunk that was never written): replayed as NULL */
#define OP_REUSED 4 /* handed out an address that was still live in the trace */
#define OP_SHARED                                                                                                 \
  8 /* malloc_usable_size of a block another thread gives back later: replayed on
                        NULL, since nothing orders it before that free in a replay */

typedef struct {
  uint64_t size; /* bytes asked; calloc and reallocarray: per element */
  uint64_t aux;  /* alignment, or calloc's and reallocarray's element count */
  uint64_t time_ns;
  uint32_t block;  /* the block made (allocations) or given (free, realloc, usable size) */
  uint32_t block2; /* realloc: the block it makes (TRACE_NO_BLOCK when it failed or freed) */
  uint32_t thread; /* 0 .. threads-1, in order of each thread's first call */
  uint8_t kind, flags, mark;
} trace_op;

#define TRACE_SIZE_BUCKETS 42 /* 0 B, then powers of two up to 2^40 and above */

typedef struct {
  /* the header */
  char program[TRACE_PROGRAM_MAX + 1];
  uint32_t version, page_size, pid, parent_pid;
  uint64_t start_ns;

  trace_op *ops; /* in the order of the global sequence */
  size_t op_count;
  uint32_t thread_count;
  uint32_t *thread_ops;   /* op indices, thread after thread */
  size_t *thread_first;   /* thread t's ops: thread_ops[thread_first[t] .. thread_first[t + 1]) */
  uint64_t *block_bytes;  /* bytes each block holds (what live bytes count) */
  uint32_t *block_thread; /* the thread that made each block */
  uint32_t block_count;
  size_t ops_cap, thread_ops_cap, thread_first_cap, block_bytes_cap, block_thread_cap;

  /* what --info tells */
  uint64_t calls[TK_KIND_COUNT];
  uint64_t size_histogram[TRACE_SIZE_BUCKETS]; /* allocations by size asked */
  uint64_t peak_live_bytes, final_live_bytes, peak_at_ns, duration_ns;
  uint64_t cross_thread, unknown_blocks, reused_addresses, failed_calls;
  size_t chunks, bytes_read, file_bytes;
  int cut_short; /* the file ends inside a chunk */
  char warning[160];
  char error[200];
} trace;

/* Reads `len` bytes of a trace. 0 on success; -1 with t->error set. Either
 * way trace_release() frees what was made. */
int trace_read(trace *t, const uint8_t *data, size_t len);
/* The same from a file (mapped, not copied). */
int trace_read_file(trace *t, const char *path);
void trace_release(trace *t);

/* The bytes an allocation op asks for (calloc: nmemb * size, saturated). */
uint64_t trace_op_bytes(const trace_op *op);
/* Is the op an allocation, a release, or a realloc? */
int trace_kind_allocates(unsigned kind);
int trace_kind_releases(unsigned kind);
/* Arrays of `elem`-byte items that grow to at least `need` (*array is
 * NULL or from here; *cap counts items). 0, or -1 out of memory. */
int trace_array_grow(void *array, size_t *cap, size_t elem, size_t need);
void trace_array_free(void *array, size_t *cap, size_t elem);

/* Live bytes (the bytes asked of every block not yet given back) in the
 * order of the trace. asked[i]: what op i asked for in a replay
 * (TRACE_NOT_RUN: it did not run), or NULL for what the trace says.
 * series (points entries, or NULL): the most live in each of `points`
 * equal stretches of the trace's time. 0, or -1 out of memory. */
#define TRACE_NOT_RUN UINT64_MAX
typedef struct {
  uint64_t peak, peak_at_ns, final;
} trace_live;
int trace_live_walk(const trace *t, const uint64_t *asked, trace_live *out, uint64_t *series, size_t points);

/* 0 for 0 B, else 1 + floor(log2(n)), at most TRACE_SIZE_BUCKETS - 1. */
int trace_size_bucket(uint64_t n);

#endif
