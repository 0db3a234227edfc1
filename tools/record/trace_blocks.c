/* From events to ops: every event is put in the order of the global
 * sequence (a radix sort), then walked in that order with a table from
 * address to block id, so that a block freed and its address handed out
 * again become two blocks. A realloc releases its old address at the
 * number it took before the real call, and makes its new block at the one
 * it took after. The walk also counts what --info tells. */
#include "trace_reader_impl.h"

#include <string.h>

/* ---- address -> block id: open addressing, linear probing --------------------- */

typedef struct {
  uint64_t *keys; /* 0 = empty */
  uint32_t *values;
  size_t keys_cap, values_cap, mask, used;
} block_table;

static size_t slot_of(const block_table *m, uint64_t key) {
  key ^= key >> 33;
  key *= 0xff51afd7ed558ccdull;
  key ^= key >> 33;
  return (size_t)key & m->mask;
}

static int table_put(block_table *m, uint64_t key, uint32_t value);

static int table_grow(block_table *m) {
  block_table bigger = {0};
  size_t n = m->mask ? (m->mask + 1) * 2 : 4096;
  if (trace_array_grow(&bigger.keys, &bigger.keys_cap, sizeof(uint64_t), n) ||
      trace_array_grow(&bigger.values, &bigger.values_cap, sizeof(uint32_t), n))
    return -1;
  memset(bigger.keys, 0, n * sizeof(uint64_t));
  bigger.mask = n - 1;
  for (size_t i = 0; m->mask && i <= m->mask; i++)
    if (m->keys[i]) table_put(&bigger, m->keys[i], m->values[i]);
  trace_array_free(&m->keys, &m->keys_cap, sizeof(uint64_t));
  trace_array_free(&m->values, &m->values_cap, sizeof(uint32_t));
  *m = bigger;
  return 0;
}

/* Puts key; returns 1 when it was there already (its value replaced). */
static int table_put(block_table *m, uint64_t key, uint32_t value) {
  size_t i = slot_of(m, key);
  while (m->keys[i] && m->keys[i] != key) i = (i + 1) & m->mask;
  int was = m->keys[i] == key;
  m->keys[i] = key;
  m->values[i] = value;
  m->used += !was;
  return was;
}

/* The block at key, removed when `take`; TRACE_NO_BLOCK when none. */
static uint32_t table_get(block_table *m, uint64_t key, int take) {
  if (!m->mask) return TRACE_NO_BLOCK;
  size_t i = slot_of(m, key);
  while (m->keys[i] != key) {
    if (!m->keys[i]) return TRACE_NO_BLOCK;
    i = (i + 1) & m->mask;
  }
  uint32_t value = m->values[i];
  if (!take) return value;
  /* Backward-shift deletion: no tombstones, so lookups stay short. */
  size_t hole = i;
  for (size_t j = (i + 1) & m->mask; m->keys[j]; j = (j + 1) & m->mask) {
    size_t home = slot_of(m, m->keys[j]);
    if (((j - home) & m->mask) >= ((j - hole) & m->mask)) {
      m->keys[hole] = m->keys[j];
      m->values[hole] = m->values[j];
      hole = j;
    }
  }
  m->keys[hole] = 0;
  m->used--;
  return value;
}

/* ---- ordering --------------------------------------------------------------------- */

typedef struct {
  uint64_t seq;
  uint32_t event; /* top bit: the release half of a realloc */
} point;
#define RELEASE_HALF 0x80000000u

/* LSD radix sort by seq, 11 bits a pass, as many passes as the largest
 * number needs. */
static int sort_points(point **pts, size_t *cap, size_t n) {
  point *tmp = NULL;
  size_t tmp_cap = 0;
  uint64_t most = 0;
  for (size_t i = 0; i < n; i++)
    if ((*pts)[i].seq > most) most = (*pts)[i].seq;
  if (trace_array_grow(&tmp, &tmp_cap, sizeof(point), n ? n : 1)) return -1;
  point *from = *pts, *to = tmp;
  for (unsigned shift = 0; shift < 64 && (most >> shift); shift += 11) {
    size_t count[2049] = {0};
    for (size_t i = 0; i < n; i++) count[((from[i].seq >> shift) & 2047) + 1]++;
    for (int d = 0; d < 2048; d++) count[d + 1] += count[d];
    for (size_t i = 0; i < n; i++) to[count[(from[i].seq >> shift) & 2047]++] = from[i];
    point *swap = from;
    from = to;
    to = swap;
  }
  if (from != *pts) memcpy(*pts, from, n * sizeof(point));
  trace_array_free(&tmp, &tmp_cap, sizeof(point));
  (void)cap;
  return 0;
}

/* ---- the walk ------------------------------------------------------------------------ */

uint64_t trace_op_bytes(const trace_op *op) {
  uint64_t n = op->size;
  if (op->kind == TK_CALLOC || op->kind == TK_REALLOCARRAY)
    if (__builtin_mul_overflow(op->size, op->aux, &n)) n = UINT64_MAX;
  return n;
}

int trace_kind_allocates(unsigned kind) {
  return kind == TK_MALLOC || kind == TK_CALLOC || (kind >= TK_POSIX_MEMALIGN && kind <= TK_PVALLOC) ||
      kind == TK_NEW || kind == TK_NEW_ARRAY;
}
int trace_kind_releases(unsigned kind) {
  return kind == TK_FREE || kind == TK_DELETE || kind == TK_DELETE_ARRAY || kind == TK_USABLE_SIZE;
}

int trace_size_bucket(uint64_t n) {
  int b = n ? 64 - __builtin_clzll(n) : 0;
  return b < TRACE_SIZE_BUCKETS ? b : TRACE_SIZE_BUCKETS - 1;
}

typedef struct {
  trace *t;
  block_table table;
} walk;

static uint32_t new_block(walk *w, uint64_t addr, uint64_t bytes, uint32_t thread, trace_op *op) {
  trace *t = w->t;
  if (t->block_count == TRACE_NO_BLOCK - 1) return TRACE_NO_BLOCK;
  if (trace_array_grow(&t->block_bytes, &t->block_bytes_cap, sizeof(uint64_t), t->block_count + 1) ||
      trace_array_grow(&t->block_thread, &t->block_thread_cap, sizeof(uint32_t), t->block_count + 1) ||
      ((w->table.used + 1) * 2 > w->table.mask && table_grow(&w->table)))
    return TRACE_NO_BLOCK;
  uint32_t b = t->block_count++;
  t->block_bytes[b] = bytes;
  t->block_thread[b] = thread;
  if (table_put(&w->table, addr, b)) { /* a free of it was never written */
    op->mark |= OP_REUSED;
    t->reused_addresses++;
  }
  t->size_histogram[trace_size_bucket(bytes)]++;
  return b;
}

/* The block an op gives back (free, delete, usable size, realloc). */
static void consume(walk *w, trace_op *op, uint32_t b) {
  trace *t = w->t;
  op->block = b;
  if (b == TRACE_NO_BLOCK) {
    op->mark |= OP_UNKNOWN;
    t->unknown_blocks++;
  } else if (t->block_thread[b] != op->thread) {
    op->mark |= OP_WAIT;
    t->cross_thread += op->kind != TK_USABLE_SIZE;
  }
}

/* Makes the op of event e (with its dense thread number); 0 or -1. */
static int make_op(walk *w, const trace_event *e, uint32_t thread, uint32_t released) {
  trace *t = w->t;
  trace_op *op = &t->ops[t->op_count++];
  *op = (trace_op){.size = e->size,
                   .aux = e->aux,
                   .time_ns = e->time_ns,
                   .block = TRACE_NO_BLOCK,
                   .block2 = TRACE_NO_BLOCK,
                   .thread = thread,
                   .kind = e->kind,
                   .flags = e->flags};
  t->calls[e->kind]++;
  if (trace_kind_allocates(e->kind)) {
    if (!e->addr) {
      t->failed_calls++;
      return 0;
    }
    op->block = new_block(w, e->addr, trace_op_bytes(op), thread, op);
    return op->block == TRACE_NO_BLOCK ? -1 : 0;
  }
  if (trace_kind_releases(e->kind)) {
    if (e->addr) consume(w, op, table_get(&w->table, e->addr, e->kind != TK_USABLE_SIZE));
    return 0;
  }
  /* realloc, reallocarray */
  if (e->addr) consume(w, op, released);
  if (e->addr2) {
    op->block2 = new_block(w, e->addr2, trace_op_bytes(op), thread, op);
    return op->block2 == TRACE_NO_BLOCK ? -1 : 0;
  }
  if (trace_op_bytes(op) != 0 || !e->addr) { /* failed: the old block stays */
    t->failed_calls++;
    if (op->block != TRACE_NO_BLOCK) table_put(&w->table, e->addr, op->block);
  }
  return 0;
}

/* Marks OP_SHARED: a malloc_usable_size whose block another thread gives
 * back (a replay orders a free after the block's making, not after its
 * other uses). */
static int mark_shared(trace *t) {
  uint32_t *consumer = NULL;
  size_t cap = 0;
  if (trace_array_grow(&consumer, &cap, sizeof(uint32_t), t->block_count + 1)) return -1;
  memset(consumer, 0xff, (t->block_count + 1) * sizeof(uint32_t));
  for (size_t i = 0; i < t->op_count; i++)
    if (t->ops[i].kind != TK_USABLE_SIZE && !trace_kind_allocates(t->ops[i].kind) &&
        t->ops[i].block != TRACE_NO_BLOCK)
      consumer[t->ops[i].block] = t->ops[i].thread;
  for (size_t i = 0; i < t->op_count; i++) {
    trace_op *op = &t->ops[i];
    if (op->kind == TK_USABLE_SIZE && op->block != TRACE_NO_BLOCK && consumer[op->block] != TRACE_NO_BLOCK &&
        consumer[op->block] != op->thread)
      op->mark |= OP_SHARED;
  }
  trace_array_free(&consumer, &cap, sizeof(uint32_t));
  return 0;
}

static int thread_lists(trace *t) {
  size_t n = t->op_count, threads = t->thread_count;
  if (trace_array_grow(&t->thread_first, &t->thread_first_cap, sizeof(size_t), threads + 1) ||
      trace_array_grow(&t->thread_ops, &t->thread_ops_cap, sizeof(uint32_t), n ? n : 1))
    return -1;
  memset(t->thread_first, 0, (threads + 1) * sizeof(size_t));
  for (size_t i = 0; i < n; i++) t->thread_first[t->ops[i].thread + 1]++;
  for (size_t i = 0; i < threads; i++) t->thread_first[i + 1] += t->thread_first[i];
  for (size_t i = 0; i < n; i++) t->thread_ops[t->thread_first[t->ops[i].thread]++] = (uint32_t)i;
  for (size_t i = threads; i > 0; i--) t->thread_first[i] = t->thread_first[i - 1];
  t->thread_first[0] = 0;
  return 0;
}

int trace_build(trace_parse *ps, trace *t) {
  size_t n = ps->events_n, points_n = 0, points_cap = 0, dense_cap = 0, released_cap = 0;
  point *points = NULL;
  uint32_t *dense = NULL, *released = NULL;
  walk w = {.t = t};
  int rc = -1;
  if (n >= RELEASE_HALF) return trace_fail(t, "the trace has too many events (%zu)", n);
  if (trace_array_grow(&points, &points_cap, sizeof(point), 2 * n + 1) ||
      trace_array_grow(&dense, &dense_cap, sizeof(uint32_t), ps->thread_ids_n + 1) ||
      trace_array_grow(&released, &released_cap, sizeof(uint32_t), n + 1) ||
      trace_array_grow(&t->ops, &t->ops_cap, sizeof(trace_op), n + 1) || table_grow(&w.table))
    goto oom;
  for (size_t i = 0; i < n; i++) {
    const trace_event *e = &ps->events[i];
    points[points_n++] = (point){e->seq, (uint32_t)i};
    if ((e->kind == TK_REALLOC || e->kind == TK_REALLOCARRAY) && e->addr)
      points[points_n++] = (point){e->seq_before, (uint32_t)i | RELEASE_HALF};
  }
  if (sort_points(&points, &points_cap, points_n)) goto oom;
  for (size_t i = 0; i < ps->thread_ids_n; i++) dense[i] = TRACE_NO_BLOCK;
  for (size_t i = 0; i < points_n; i++) {
    if (i > 0 && points[i].seq == points[i - 1].seq) {
      trace_fail(t, "damaged trace: two calls have the sequence number %llu", (unsigned long long)points[i].seq);
      goto out;
    }
    uint32_t ev = points[i].event & ~RELEASE_HALF;
    const trace_event *e = &ps->events[ev];
    if (points[i].event & RELEASE_HALF) {
      released[ev] = table_get(&w.table, e->addr, 1);
      continue;
    }
    size_t k = e->thread; /* the index read_chunks gave it */
    if (dense[k] == TRACE_NO_BLOCK) dense[k] = t->thread_count++;
    if (make_op(&w, e, dense[k], released[ev])) goto oom;
    if (e->time_ns > t->duration_ns) t->duration_ns = e->time_ns;
  }
  trace_live live = {0};
  if (mark_shared(t) || thread_lists(t) || trace_live_walk(t, NULL, &live, NULL, 0)) goto oom;
  t->peak_live_bytes = live.peak;
  t->peak_at_ns = live.peak_at_ns;
  t->final_live_bytes = live.final;
  rc = 0;
  goto out;
oom:
  trace_fail(t, "out of memory reading the trace");
out:
  trace_array_free(&points, &points_cap, sizeof(point));
  trace_array_free(&dense, &dense_cap, sizeof(uint32_t));
  trace_array_free(&released, &released_cap, sizeof(uint32_t));
  trace_array_free(&w.table.keys, &w.table.keys_cap, sizeof(uint64_t));
  trace_array_free(&w.table.values, &w.table.values_cap, sizeof(uint32_t));
  return rc;
}

/* ---- live bytes --------------------------------------------------------------------- */

int trace_live_walk(const trace *t, const uint64_t *asked, trace_live *out, uint64_t *series, size_t points) {
  uint64_t *held = NULL, live = 0;
  size_t held_cap = 0;
  if (trace_array_grow(&held, &held_cap, sizeof(uint64_t), t->block_count + 1)) return -1;
  *out = (trace_live){0};
  if (series) memset(series, 0, points * sizeof(uint64_t));
  size_t bucket = 0;
  for (size_t i = 0; i < t->op_count; i++) {
    const trace_op *op = &t->ops[i];
    uint64_t bytes = asked ? asked[i] : trace_op_bytes(op);
    if (bytes == TRACE_NOT_RUN) continue;
    if (series && points) { /* a stretch without calls holds what the last one left */
      size_t at = t->duration_ns ? (size_t)((double)op->time_ns / (double)t->duration_ns * (double)(points - 1))
                                 : 0;
      for (at = at < points ? at : points - 1; bucket < at;) series[++bucket] = live;
    }
    if (trace_kind_allocates(op->kind)) {
      if (op->block != TRACE_NO_BLOCK) live += held[op->block] = bytes;
    } else if (op->kind == TK_REALLOC || op->kind == TK_REALLOCARRAY) {
      if (op->block != TRACE_NO_BLOCK) live -= held[op->block];
      if (op->block2 != TRACE_NO_BLOCK) live += held[op->block2] = bytes;
      else if (bytes != 0 && op->block != TRACE_NO_BLOCK)
        live += held[op->block]; /* failed: the old block stays */
    } else if (op->kind != TK_USABLE_SIZE && op->block != TRACE_NO_BLOCK) {
      live -= held[op->block];
    }
    if (live > out->peak) {
      out->peak = live;
      out->peak_at_ns = op->time_ns;
    }
    if (series && points && live > series[bucket]) series[bucket] = live;
  }
  out->final = live;
  trace_array_free(&held, &held_cap, sizeof(uint64_t));
  return 0;
}
