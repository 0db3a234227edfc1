/* The allocation trace of brisk-run --record (docs/record.md): what
 * libbrisk-record.so writes and brisk-replay-driver reads.
 *
 *   file   = header chunk*
 *   header = "BRISKTRC" u32 version u32 page_size u32 pid u32 parent_pid
 *            u64 start_ns u16 program_length program[program_length]
 *   chunk  = u32 CHUNK_MAGIC u32 payload_bytes u32 thread u32 events
 *            u32 checksum(payload) u32 reserved, payload[payload_bytes]
 *
 * Integers are little-endian. A chunk holds the events of one thread in the
 * order it made them, each an op byte and varints (below); every chunk
 * starts its deltas from zero, so each one decodes alone and a file cut
 * short (a program killed by a signal) reads up to its last whole chunk.
 * Events carry a global sequence number, taken after the real malloc
 * returned and before the real free ran: ordered by it, an address is freed
 * before it is handed out again, which lets the reader give every block a
 * stable id. The thread count is derived (the distinct thread numbers).
 *
 * Header-only, shared by the recorder, the reader and the tests' writer. */
#ifndef BRISK_TRACE_FORMAT_H
#define BRISK_TRACE_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define TRACE_MAGIC "BRISKTRC"
#define TRACE_VERSION 1u
#define TRACE_CHUNK_MAGIC 0x4b434842u /* "BHCK" */
#define TRACE_HEADER_FIXED 34         /* bytes before the program name */
#define TRACE_PROGRAM_MAX 1024
#define TRACE_CHUNK_HEADER 24
/* A chunk's payload is at most this (the recorder flushes well before). */
#define TRACE_CHUNK_MAX (1u << 20)
/* The most bytes one event takes: op byte + 7 varints of 10 bytes. */
#define TRACE_EVENT_MAX 72

/* Op byte: kind in the low 5 bits, then three flags. */
enum trace_kind {
  TK_MALLOC = 1,     /* size -> addr */
  TK_CALLOC,         /* nmemb, size -> addr */
  TK_REALLOC,        /* addr, size -> addr2, seq_before */
  TK_REALLOCARRAY,   /* addr, nmemb, size -> addr2, seq_before */
  TK_FREE,           /* addr */
  TK_POSIX_MEMALIGN, /* align, size -> addr */
  TK_ALIGNED_ALLOC,  /* align, size -> addr */
  TK_MEMALIGN,       /* align, size -> addr */
  TK_VALLOC,         /* size -> addr */
  TK_PVALLOC,        /* size -> addr */
  TK_USABLE_SIZE,    /* addr */
  TK_NEW,            /* size [align] -> addr; flags: nothrow, aligned */
  TK_NEW_ARRAY,      /* the same for new[] */
  TK_DELETE,         /* addr [size] [align]; flags: sized, aligned */
  TK_DELETE_ARRAY,   /* the same for delete[] */
  TK_KIND_COUNT
};
#define TF_KIND_MASK 0x1fu
#define TF_NULL 0x20u    /* the (first) address is NULL */
#define TF_NULL2 0x40u   /* realloc: the result is NULL; new: nothrow; delete: sized */
#define TF_ALIGNED 0x80u /* new/delete: the aligned form (an alignment follows) */
#define TF_NOTHROW TF_NULL2
#define TF_SIZED TF_NULL2

/* One event. addr is the block passed in (free, realloc) or returned;
 * addr2 the realloc result; aux the alignment or the element count. A
 * realloc takes two sequence numbers: seq_before before the real call (the
 * old block may be released from then on, and its address handed to
 * another thread) and seq after it (when the new block exists). */
typedef struct {
  uint64_t seq, seq_before, time_ns, size, aux, addr, addr2;
  uint32_t thread;
  uint8_t kind, flags;
} trace_event;

static inline const char *trace_kind_name(unsigned kind) {
  static const char *const names[TK_KIND_COUNT] = {"?",
                                                   "malloc",
                                                   "calloc",
                                                   "realloc",
                                                   "reallocarray",
                                                   "free",
                                                   "posix_memalign",
                                                   "aligned_alloc",
                                                   "memalign",
                                                   "valloc",
                                                   "pvalloc",
                                                   "malloc_usable_size",
                                                   "new",
                                                   "new[]",
                                                   "delete",
                                                   "delete[]"};
  return kind < TK_KIND_COUNT ? names[kind] : "?";
}

/* ---- integers ------------------------------------------------------------ */

static inline void trace_put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void trace_put64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint32_t trace_get32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t trace_get64(const uint8_t *p) {
  return (uint64_t)trace_get32(p) | (uint64_t)trace_get32(p + 4) << 32;
}

static inline uint8_t *trace_put_varint(uint8_t *p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *p++ = (uint8_t)v;
  return p;
}

/* Reads a varint at *p, never past end; 0 when it is cut short or longer
 * than 64 bits. */
static inline int trace_get_varint(const uint8_t **p, const uint8_t *end, uint64_t *out) {
  uint64_t v = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    if (*p >= end) return 0;
    uint8_t b = *(*p)++;
    if (shift == 63 && b > 1) return 0;
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *out = v;
      return 1;
    }
  }
  return 0;
}

/* Addresses are stored as the difference from the thread's previous one,
 * zigzagged so that small steps down are small too. */
static inline uint64_t trace_zigzag(uint64_t now, uint64_t before) {
  int64_t d = (int64_t)(now - before);
  return ((uint64_t)d << 1) ^ (uint64_t)(d >> 63);
}
static inline uint64_t trace_unzigzag(uint64_t z, uint64_t before) {
  return before + ((z >> 1) ^ (uint64_t) - (int64_t)(z & 1));
}

/* FNV-1a over the payload: catches a damaged chunk before it is decoded. */
static inline uint32_t trace_checksum(const uint8_t *p, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 16777619u;
  return h;
}

/* ---- writing ------------------------------------------------------------- */

/* The running deltas of one thread within one chunk. */
typedef struct {
  uint64_t seq, time_ns, addr;
} trace_cursor;

static inline uint8_t *trace_put_addr(uint8_t *p, trace_cursor *c, uint64_t addr) {
  if (!addr) return p; /* TF_NULL / TF_NULL2 say so */
  p = trace_put_varint(p, trace_zigzag(addr, c->addr));
  c->addr = addr;
  return p;
}

/* Encodes one event at p (room for TRACE_EVENT_MAX bytes); returns the end.
 * The fields each kind stores are those listed in enum trace_kind. */
static inline uint8_t *trace_encode(uint8_t *p, trace_cursor *c, const trace_event *e) {
  unsigned kind = e->kind, flags = e->flags & ~(TF_NULL | TF_KIND_MASK);
  int realloc_like = kind == TK_REALLOC || kind == TK_REALLOCARRAY;
  if (!e->addr) flags |= TF_NULL;
  if (realloc_like) flags = (flags & ~TF_NULL2) | (e->addr2 ? 0 : TF_NULL2) | (e->addr ? 0 : TF_NULL);
  *p++ = (uint8_t)(kind | flags);
  p = trace_put_varint(p, e->seq - c->seq);
  p = trace_put_varint(p, e->time_ns - c->time_ns);
  c->seq = e->seq;
  c->time_ns = e->time_ns;
  switch (kind) {
  case TK_CALLOC: p = trace_put_varint(p, e->aux); /* fall through */
  case TK_MALLOC:
  case TK_VALLOC:
  case TK_PVALLOC: p = trace_put_varint(p, e->size); return trace_put_addr(p, c, e->addr);
  case TK_POSIX_MEMALIGN:
  case TK_ALIGNED_ALLOC:
  case TK_MEMALIGN:
    p = trace_put_varint(p, e->aux);
    p = trace_put_varint(p, e->size);
    return trace_put_addr(p, c, e->addr);
  case TK_REALLOC:
  case TK_REALLOCARRAY:
    p = trace_put_addr(p, c, e->addr);
    if (kind == TK_REALLOCARRAY) p = trace_put_varint(p, e->aux);
    p = trace_put_varint(p, e->size);
    p = trace_put_addr(p, c, e->addr2);
    return trace_put_varint(p, e->seq - e->seq_before);
  case TK_NEW:
  case TK_NEW_ARRAY:
    p = trace_put_varint(p, e->size);
    if (flags & TF_ALIGNED) p = trace_put_varint(p, e->aux);
    return trace_put_addr(p, c, e->addr);
  case TK_DELETE:
  case TK_DELETE_ARRAY:
    p = trace_put_addr(p, c, e->addr);
    if (flags & TF_SIZED) p = trace_put_varint(p, e->size);
    if (flags & TF_ALIGNED) p = trace_put_varint(p, e->aux);
    return p;
  default: /* TK_FREE, TK_USABLE_SIZE */ return trace_put_addr(p, c, e->addr);
  }
}

/* The chunk header in front of `events` events of `payload` bytes. */
static inline void trace_chunk_header(uint8_t *h, uint32_t thread, uint32_t events, const uint8_t *payload,
                                      uint32_t bytes) {
  trace_put32(h, TRACE_CHUNK_MAGIC);
  trace_put32(h + 4, bytes);
  trace_put32(h + 8, thread);
  trace_put32(h + 12, events);
  trace_put32(h + 16, trace_checksum(payload, bytes));
  trace_put32(h + 20, 0);
}

/* The file header; returns its length (at most TRACE_HEADER_FIXED +
 * TRACE_PROGRAM_MAX). */
static inline size_t trace_file_header(uint8_t *h, uint32_t page_size, uint32_t pid, uint32_t parent,
                                       uint64_t start_ns, const char *program, size_t program_len) {
  if (program_len > TRACE_PROGRAM_MAX) program_len = TRACE_PROGRAM_MAX;
  memcpy(h, TRACE_MAGIC, 8);
  trace_put32(h + 8, TRACE_VERSION);
  trace_put32(h + 12, page_size);
  trace_put32(h + 16, pid);
  trace_put32(h + 20, parent);
  trace_put64(h + 24, start_ns);
  h[32] = (uint8_t)program_len;
  h[33] = (uint8_t)(program_len >> 8);
  memcpy(h + TRACE_HEADER_FIXED, program, program_len);
  return TRACE_HEADER_FIXED + program_len;
}

#endif
