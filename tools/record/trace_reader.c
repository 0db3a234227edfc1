/* Reading a trace: the header, then chunk after chunk, each checked whole
 * (its length, its checksum, its event count) before its events are
 * decoded; trace_blocks.c then orders the events and names the blocks. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "trace_reader_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- arrays outside the allocator under test ------------------------------- */

#ifndef TRACE_READER_MALLOC
static size_t array_bytes(size_t count, size_t elem) { return (count * elem + 4095) & ~(size_t)4095; }
#endif

int trace_array_grow(void *array, size_t *cap, size_t elem, size_t need) {
  void **p = array;
  if (need <= *cap) return 0;
  size_t grown = *cap ? *cap : 1024;
  while (grown < need) {
    if (grown > SIZE_MAX / 4 / elem) return -1;
    grown *= 2;
  }
#ifdef TRACE_READER_MALLOC
  void *q = realloc(*p, grown * elem);
  if (!q) return -1;
#else
  void *q = *p ? mremap(*p, array_bytes(*cap, elem), array_bytes(grown, elem), MREMAP_MAYMOVE)
               : mmap(NULL, array_bytes(grown, elem), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (q == MAP_FAILED) return -1;
#endif
  *p = q;
  *cap = grown;
  return 0;
}

void trace_array_free(void *array, size_t *cap, size_t elem) {
  void **p = array;
  if (*p) {
#ifdef TRACE_READER_MALLOC
    free(*p);
    (void)elem;
#else
    munmap(*p, array_bytes(*cap, elem));
#endif
  }
  *p = NULL;
  *cap = 0;
}

int trace_fail(trace *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(t->error, sizeof t->error, fmt, ap);
  va_end(ap);
  return -1;
}

/* ---- events ------------------------------------------------------------------ */

static int get_addr(const uint8_t **p, const uint8_t *end, trace_cursor *c, int null, uint64_t *out) {
  uint64_t z;
  if (null) {
    *out = 0;
    return 1;
  }
  if (!trace_get_varint(p, end, &z)) return 0;
  *out = c->addr = trace_unzigzag(z, c->addr);
  return *out != 0;
}

/* One event at *p, the inverse of trace_encode; 0 when the bytes are not
 * an event. */
static int decode(const uint8_t **p, const uint8_t *end, trace_cursor *c, trace_event *e) {
  uint64_t d;
  if (*p >= end) return 0;
  uint8_t op = *(*p)++;
  unsigned kind = op & TF_KIND_MASK, flags = op & ~TF_KIND_MASK;
  if (kind == 0 || kind >= TK_KIND_COUNT) return 0;
  *e = (trace_event){.kind = (uint8_t)kind, .flags = (uint8_t)flags};
  if (!trace_get_varint(p, end, &d)) return 0;
  e->seq = c->seq += d;
  if (!trace_get_varint(p, end, &d)) return 0;
  e->time_ns = c->time_ns += d;
  int null = (flags & TF_NULL) != 0;
  switch (kind) {
  case TK_CALLOC:
    if (!trace_get_varint(p, end, &e->aux)) return 0;
    /* fall through */
  case TK_MALLOC:
  case TK_VALLOC:
  case TK_PVALLOC: return trace_get_varint(p, end, &e->size) && get_addr(p, end, c, null, &e->addr);
  case TK_POSIX_MEMALIGN:
  case TK_ALIGNED_ALLOC:
  case TK_MEMALIGN:
    return trace_get_varint(p, end, &e->aux) && trace_get_varint(p, end, &e->size) &&
        get_addr(p, end, c, null, &e->addr);
  case TK_REALLOC:
  case TK_REALLOCARRAY:
    if (!get_addr(p, end, c, null, &e->addr)) return 0;
    if (kind == TK_REALLOCARRAY && !trace_get_varint(p, end, &e->aux)) return 0;
    if (!trace_get_varint(p, end, &e->size) || !get_addr(p, end, c, (flags & TF_NULL2) != 0, &e->addr2) ||
        !trace_get_varint(p, end, &d))
      return 0;
    if (d == 0 || d > e->seq) return 0; /* seq_before comes before seq */
    e->seq_before = e->seq - d;
    return 1;
  case TK_NEW:
  case TK_NEW_ARRAY:
    return trace_get_varint(p, end, &e->size) && (!(flags & TF_ALIGNED) || trace_get_varint(p, end, &e->aux)) &&
        get_addr(p, end, c, null, &e->addr);
  case TK_DELETE:
  case TK_DELETE_ARRAY:
    return get_addr(p, end, c, null, &e->addr) && (!(flags & TF_SIZED) || trace_get_varint(p, end, &e->size)) &&
        (!(flags & TF_ALIGNED) || trace_get_varint(p, end, &e->aux));
  default: return get_addr(p, end, c, null, &e->addr); /* free, malloc_usable_size */
  }
}

/* ---- the file ------------------------------------------------------------------ */

static int read_header(trace *t, const uint8_t *data, size_t len, size_t *at) {
  if (len < 8 || memcmp(data, TRACE_MAGIC, 8) != 0)
    return trace_fail(t, "not a brisk trace (it does not start with \"%s\")", TRACE_MAGIC);
  if (len < TRACE_HEADER_FIXED) return trace_fail(t, "the trace is cut short inside its header (%zu bytes)", len);
  t->version = trace_get32(data + 8);
  if (t->version != TRACE_VERSION)
    return trace_fail(t, "trace format version %u; this reader knows version %u", t->version, TRACE_VERSION);
  t->page_size = trace_get32(data + 12);
  t->pid = trace_get32(data + 16);
  t->parent_pid = trace_get32(data + 20);
  t->start_ns = trace_get64(data + 24);
  size_t name = (size_t)data[32] | (size_t)data[33] << 8;
  if (name > TRACE_PROGRAM_MAX) return trace_fail(t, "damaged header: a program name of %zu bytes", name);
  if (len < TRACE_HEADER_FIXED + name) return trace_fail(t, "the trace is cut short inside its header");
  memcpy(t->program, data + TRACE_HEADER_FIXED, name);
  t->program[name] = 0;
  for (size_t i = 0; i < name; i++)
    if ((unsigned char)t->program[i] < 32) t->program[i] = '?';
  *at = TRACE_HEADER_FIXED + name;
  return 0;
}

/* The index of a thread number of the file in ps->thread_ids (added when
 * new); -1 out of memory. The last one found is tried first: a thread
 * writes its chunks one after the other. */
static long thread_index(trace_parse *ps, uint32_t id) {
  static __thread size_t last;
  if (last < ps->thread_ids_n && ps->thread_ids[last] == id) return (long)last;
  for (size_t i = ps->thread_ids_n; i-- > 0;)
    if (ps->thread_ids[i] == id) return (long)(last = i);
  if (trace_array_grow(&ps->thread_ids, &ps->thread_ids_cap, sizeof(uint32_t), ps->thread_ids_n + 1)) return -1;
  ps->thread_ids[ps->thread_ids_n] = id;
  return (long)(last = ps->thread_ids_n++);
}

static int read_chunks(trace_parse *ps, trace *t, const uint8_t *data, size_t len, size_t at) {
  while (at < len) {
    if (len - at < TRACE_CHUNK_HEADER) break;
    const uint8_t *h = data + at;
    if (trace_get32(h) != TRACE_CHUNK_MAGIC)
      return trace_fail(t, "damaged trace: no chunk starts at byte %zu (after %zu good chunks)", at, t->chunks);
    uint32_t bytes = trace_get32(h + 4), thread = trace_get32(h + 8), count = trace_get32(h + 12);
    if (bytes > TRACE_CHUNK_MAX || count > bytes)
      return trace_fail(t, "damaged trace: the chunk at byte %zu claims %u events in %u bytes", at, count, bytes);
    if (len - at - TRACE_CHUNK_HEADER < bytes) break;
    const uint8_t *p = h + TRACE_CHUNK_HEADER, *end = p + bytes;
    if (trace_checksum(p, bytes) != trace_get32(h + 16))
      return trace_fail(t, "damaged trace: the chunk at byte %zu fails its checksum", at);
    long index = thread_index(ps, thread);
    if (index < 0 || trace_array_grow(&ps->events, &ps->events_cap, sizeof(trace_event), ps->events_n + count))
      return trace_fail(t, "out of memory reading the trace");
    trace_cursor c = {0, 0, 0};
    for (uint32_t i = 0; i < count; i++) {
      trace_event *e = &ps->events[ps->events_n + i];
      if (!decode(&p, end, &c, e))
        return trace_fail(t, "damaged trace: event %u of the chunk at byte %zu cannot be read", i, at);
      e->thread = (uint32_t)index;
    }
    if (p != end)
      return trace_fail(t, "damaged trace: the chunk at byte %zu holds more than its %u events", at, count);
    ps->events_n += count;
    t->chunks++;
    at += TRACE_CHUNK_HEADER + bytes;
  }
  t->bytes_read = at;
  if (at < len) {
    t->cut_short = 1;
    snprintf(t->warning, sizeof t->warning,
             "the trace ends inside a chunk (byte %zu of %zu): read up to its last whole chunk", at, len);
  }
  return 0;
}

int trace_read(trace *t, const uint8_t *data, size_t len) {
  trace_parse ps;
  size_t at = 0;
  memset(t, 0, sizeof *t);
  memset(&ps, 0, sizeof ps);
  t->file_bytes = len;
  int rc = read_header(t, data, len, &at);
  if (rc == 0) rc = read_chunks(&ps, t, data, len, at);
  if (rc == 0) rc = trace_build(&ps, t);
  trace_array_free(&ps.events, &ps.events_cap, sizeof(trace_event));
  trace_array_free(&ps.thread_ids, &ps.thread_ids_cap, sizeof(uint32_t));
  return rc;
}

int trace_read_file(trace *t, const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  memset(t, 0, sizeof *t);
  if (fd < 0) return trace_fail(t, "cannot open %s: %s", path, strerror(errno));
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return trace_fail(t, "%s is not a regular file", path);
  }
  if (st.st_size == 0) {
    close(fd);
    return trace_fail(t, "%s is empty: not a brisk trace", path);
  }
  void *data = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (data == MAP_FAILED) return trace_fail(t, "cannot map %s: %s", path, strerror(errno));
  int rc = trace_read(t, data, (size_t)st.st_size);
  munmap(data, (size_t)st.st_size);
  return rc;
}

void trace_release(trace *t) {
  trace_array_free(&t->ops, &t->ops_cap, sizeof(trace_op));
  trace_array_free(&t->thread_ops, &t->thread_ops_cap, sizeof(uint32_t));
  trace_array_free(&t->thread_first, &t->thread_first_cap, sizeof(size_t));
  trace_array_free(&t->block_bytes, &t->block_bytes_cap, sizeof(uint64_t));
  trace_array_free(&t->block_thread, &t->block_thread_cap, sizeof(uint32_t));
}
