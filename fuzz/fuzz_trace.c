/* The trace reader of brisk-replay (tools/record/trace_reader.c) on any
 * bytes. The first input byte picks the form:
 *   even: the rest is a trace file as it stands (headers, chunk lengths,
 *         checksums: what a damaged file offers);
 *   odd:  the rest is cut into chunks that the harness wraps in a valid
 *         header and valid chunk headers, checksums included, so that the
 *         fuzzer's bytes reach the event decoder and the block naming:
 *         per chunk a thread byte, an event-count byte, a length byte,
 *         then that many payload bytes.
 * What must hold: no crash, no sanitizer report, no hang; a refusal says
 * why; what is read is consistent (every op's block is one the trace made,
 * the thread lists hold every op once, live bytes walk without error). */
#include "fuzz_common.h"
#include "trace_reader.h"

#define FAIL FZ_FAIL

/* The odd form: a well-formed envelope around the fuzzer's payloads. */
static size_t wrap(const uint8_t *in, size_t n, uint8_t *out) {
  static const char program[] = "fuzz";
  size_t len = trace_file_header(out, 4096, 1, 0, 0, program, sizeof program - 1);
  while (n >= 3) {
    uint32_t thread = in[0] % 4, events = in[1], bytes = in[2];
    in += 3, n -= 3;
    if (bytes > n) bytes = (uint32_t)n;
    trace_chunk_header(out + len, thread, events, in, bytes);
    memcpy(out + len + TRACE_CHUNK_HEADER, in, bytes);
    len += TRACE_CHUNK_HEADER + bytes;
    in += bytes, n -= bytes;
  }
  return len;
}

static void check(const trace *t) {
  uint64_t calls = 0;
  for (int k = 0; k < TK_KIND_COUNT; k++) calls += t->calls[k];
  if (calls != t->op_count) FAIL("%llu calls counted, %zu ops", (unsigned long long)calls, t->op_count);
  if (t->thread_first[t->thread_count] != t->op_count) FAIL("the thread lists do not hold every op");
  for (uint32_t th = 0; th < t->thread_count; th++)
    for (size_t k = t->thread_first[th]; k < t->thread_first[th + 1]; k++) {
      uint32_t i = t->thread_ops[k];
      if (i >= t->op_count || t->ops[i].thread != th) FAIL("op %u in the list of thread %u", i, th);
      if (k > t->thread_first[th] && t->thread_ops[k - 1] >= i) FAIL("thread %u's ops out of order", th);
    }
  for (size_t i = 0; i < t->op_count; i++) {
    const trace_op *op = &t->ops[i];
    if ((op->block != TRACE_NO_BLOCK && op->block >= t->block_count) ||
        (op->block2 != TRACE_NO_BLOCK && op->block2 >= t->block_count))
      FAIL("op %zu names a block the trace never made", i);
    if (op->kind == 0 || op->kind >= TK_KIND_COUNT) FAIL("op %zu of kind %u", i, op->kind);
  }
  trace_live live;
  if (trace_live_walk(t, NULL, &live, NULL, 0)) FAIL("live walk ran out of memory");
  if (live.peak != t->peak_live_bytes || live.final != t->final_live_bytes || live.peak < live.final)
    FAIL("live bytes disagree");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  trace t;
  uint8_t *buf = NULL;
  const uint8_t *bytes = data + 1;
  size_t len = size - 1;
  if (data[0] & 1) {
    /* at most one header and a chunk header per 3 input bytes */
    buf = malloc(TRACE_HEADER_FIXED + 8 + (len / 3 + 1) * TRACE_CHUNK_HEADER + len);
    if (!buf) return 0;
    len = wrap(bytes, len, buf);
    bytes = buf;
  }
  if (trace_read(&t, bytes, len) == 0) check(&t);
  else if (!t.error[0]) FAIL("refused without saying why");
  trace_release(&t);
  free(buf);
  return 0;
}
