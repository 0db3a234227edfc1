/* Writes a synthetic trace with trace_format.h's encoder, as
 * libbrisk-record.so would (tests/record/format.sh damages it and reads it
 * back): three threads that allocate in every way, free each other's
 * blocks, reallocate in place and not, reuse freed addresses, ask usable
 * sizes, free NULL and fail an allocation; chunks of a few dozen events.
 * Prints what a reader must find: "calls: N", "threads: 3", "peak live
 * bytes: B", worked out here by its own bookkeeping.
 *
 *   trace_writer FILE [EVENTS]     (default 3000 operations) */
#include "trace_format.h"

#include <stdio.h>
#include <stdlib.h>

#define THREADS 3
#define MAX_LIVE 4096

typedef struct {
  uint8_t data[TRACE_CHUNK_HEADER + 64 * TRACE_EVENT_MAX];
  uint8_t *end;
  trace_cursor cursor;
  uint32_t events;
} chunk;

typedef struct {
  uint64_t addr, size, align; /* align: of an aligned new, which an aligned delete must free */
  unsigned kind;
} block;

static FILE *out;
static chunk chunks[THREADS];
static block live[MAX_LIVE];
static int live_n;
static uint64_t seq, now, calls, live_bytes, peak, next_addr = 0x100000, rng = 88172645463325252ull;
static uint64_t freed[64];
static int freed_n;

static uint64_t rnd(uint64_t below) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return rng % below;
}

static void flush(int t) {
  chunk *c = &chunks[t];
  uint32_t bytes = (uint32_t)(c->end - c->data - TRACE_CHUNK_HEADER);
  if (!c->events) return;
  trace_chunk_header(c->data, (uint32_t)t * 7 + 1, c->events, c->data + TRACE_CHUNK_HEADER, bytes);
  fwrite(c->data, 1, TRACE_CHUNK_HEADER + bytes, out);
  c->end = c->data + TRACE_CHUNK_HEADER;
  c->cursor = (trace_cursor){0, 0, 0};
  c->events = 0;
}

static void emit(int t, trace_event e) {
  chunk *c = &chunks[t];
  e.time_ns = now += 40 + rnd(100);
  if (!c->end) c->end = c->data + TRACE_CHUNK_HEADER;
  c->end = trace_encode(c->end, &c->cursor, &e);
  calls++;
  if (++c->events == 20 + (uint32_t)t * 9) flush(t);
}

/* A freed address comes back half the time: ids must not follow addresses. */
static uint64_t fresh_address(uint64_t align) {
  if (freed_n && rnd(2)) {
    uint64_t a = freed[--freed_n];
    if (a % align == 0) return a;
  }
  next_addr = (next_addr + 8192 + align - 1) & ~(align - 1);
  return next_addr;
}

static void account(int64_t delta) {
  live_bytes += (uint64_t)delta;
  if (live_bytes > peak) peak = live_bytes;
}

static void forget(int i) {
  if (freed_n < 64) freed[freed_n++] = live[i].addr;
  account(-(int64_t)live[i].size);
  live[i] = live[--live_n];
}

static void allocate(int t) {
  static const unsigned kinds[] = {TK_MALLOC, TK_CALLOC, TK_POSIX_MEMALIGN, TK_ALIGNED_ALLOC, TK_MEMALIGN,
                                   TK_VALLOC, TK_NEW,    TK_NEW_ARRAY};
  unsigned kind = kinds[rnd(8)];
  trace_event e = {.kind = (uint8_t)kind, .size = rnd(5000)};
  uint64_t align = 16, bytes = e.size;
  if (kind == TK_CALLOC) e.aux = 1 + rnd(4), bytes = e.size * e.aux;
  if (kind >= TK_POSIX_MEMALIGN && kind <= TK_MEMALIGN) e.aux = align = 64 << rnd(4);
  if (kind == TK_NEW && rnd(2)) e.flags = TF_ALIGNED, e.aux = align = 256;
  if (kind == TK_NEW_ARRAY && rnd(2)) e.flags = TF_NOTHROW;
  e.addr = fresh_address(align);
  e.seq = seq++;
  emit(t, e);
  live[live_n++] = (block){e.addr, bytes, (e.flags & TF_ALIGNED) ? align : 0, kind};
  account((int64_t)bytes);
}

static void release(int t) {
  int i = (int)rnd((uint64_t)live_n);
  trace_event e = {.addr = live[i].addr, .kind = TK_FREE};
  if (live[i].kind == TK_NEW || live[i].kind == TK_NEW_ARRAY) {
    e.kind = live[i].kind == TK_NEW ? TK_DELETE : TK_DELETE_ARRAY;
    if (rnd(2)) e.flags |= TF_SIZED, e.size = live[i].size;
    if (live[i].align) e.flags |= TF_ALIGNED, e.aux = live[i].align;
  }
  e.seq = seq++;
  emit(t, e);
  forget(i);
}

static void reallocate(int t) {
  int i = (int)rnd((uint64_t)live_n);
  if (live[i].kind != TK_MALLOC && live[i].kind != TK_CALLOC) return;
  trace_event e = {.kind = TK_REALLOC, .addr = live[i].addr, .size = rnd(9000)};
  e.seq_before = seq++;
  e.addr2 = rnd(3) ? e.addr : fresh_address(16); /* in place, or moved */
  e.seq = seq++;
  emit(t, e);
  account((int64_t)e.size - (int64_t)live[i].size);
  live[i].addr = e.addr2;
  live[i].size = e.size;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: trace_writer FILE [OPERATIONS]\n");
    return 64;
  }
  long ops = argc > 2 ? atol(argv[2]) : 3000;
  out = fopen(argv[1], "wb");
  if (!out) return 1;
  uint8_t header[TRACE_HEADER_FIXED + TRACE_PROGRAM_MAX];
  static const char program[] = "trace_writer (a synthetic trace)";
  fwrite(header, 1, trace_file_header(header, 4096, 4242, 1, 1, program, sizeof program - 1), out);
  for (long k = 0; k < ops; k++) {
    int t = (int)rnd(THREADS), pick = (int)rnd(100);
    if (live_n < 8 || (pick < 45 && live_n < MAX_LIVE)) {
      allocate(t);
    } else if (pick < 85) {
      release(t); /* often a block another thread made */
    } else if (pick < 93) {
      reallocate(t);
    } else if (pick < 96) {
      trace_event e = {.kind = TK_USABLE_SIZE, .addr = live[rnd((uint64_t)live_n)].addr, .seq = seq++};
      emit(t, e);
    } else if (pick < 98) {
      emit(t, (trace_event){.kind = TK_FREE, .seq = seq++}); /* free(NULL) */
    } else {
      emit(t, (trace_event){.kind = TK_MALLOC, .size = 1ull << 50, .seq = seq++}); /* failed */
    }
  }
  for (int t = 0; t < THREADS; t++) flush(t);
  fclose(out);
  printf("calls: %llu\nthreads: %d\npeak live bytes: %llu\n", (unsigned long long)calls, THREADS,
         (unsigned long long)peak);
  return 0;
}
