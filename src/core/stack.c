/* Call stacks for the checked library: taken with the toolchain's unwinder
 * (_Unwind_Backtrace reads the DWARF unwind tables every object carries,
 * so it needs no frame pointers), each kept once in a depot so that a
 * block's trailer holds a stack in 32 bits, and printed as addresses with
 * module and offset, and a symbol where dladdr knows one.
 *
 * The checked library links the unwinder statically (-static-libgcc,
 * CMakeLists.txt): it needs no library beyond libc. Nothing here allocates:
 * an unwinder or loader that did would come back into malloc, which takes
 * no stack while one is being taken on its thread, and none while a brisk
 * lock is held (a malloc under the unwinder's own lock could otherwise wait
 * for that brisk lock). */
#include "core/core.h"

#if BRISK_CHECKED

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unwind.h>

/* ---- Taking a stack ------------------------------------------------------ */

static __thread bool busy BRISK_TLS;

typedef struct walk {
  uintptr_t entry; /* the entry point's frame address */
  uintptr_t *pc;
  size_t n, max;
} walk_t;

/* At each frame the unwinder shows the stack pointer the frame had at its
 * call (the CFA of the function it called). The entry point's frame
 * address lies between its own stack pointer and its CFA: the entry point
 * and the functions it called show a value at or below it, its callers
 * one above. */
static _Unwind_Reason_Code walk_frame(struct _Unwind_Context *ctx, void *arg) {
  walk_t *w = arg;
  if (_Unwind_GetCFA(ctx) <= w->entry) return _URC_NO_REASON;
  uintptr_t ip = _Unwind_GetIP(ctx);
  if (!ip) return _URC_END_OF_STACK;
  w->pc[w->n++] = ip;
  return w->n < w->max ? _URC_NO_REASON : _URC_END_OF_STACK;
}

size_t _bk_stack_capture(const void *entry, uintptr_t *pc, size_t max) {
  if (busy || !max) return 0;
  busy = true;
  walk_t w = {.entry = (uintptr_t)entry, .pc = pc, .max = max};
  _Unwind_Backtrace(walk_frame, &w);
  busy = false;
  return w.n;
}

/* BRISK_STACK_DEPTH, read once: frames kept per allocation and free. */
#define DEPTH_DEFAULT 12
static int record_depth = -1;

static size_t depth_wanted(void) {
  int depth = __atomic_load_n(&record_depth, __ATOMIC_RELAXED);
  if (depth >= 0) return (size_t)depth;
  depth = DEPTH_DEFAULT;
  const char *v = getenv("BRISK_STACK_DEPTH");
  if (v && *v) {
    char *end;
    long n = strtol(v, &end, 10);
    if (*end || n < 0 || n > STACK_RECORD_MAX)
      _bk_warning("ignoring BRISK_STACK_DEPTH=\"%s\": out of range (allowed: 0 (no stacks) .. %d)", v,
                  STACK_RECORD_MAX);
    else depth = (int)n;
  }
  __atomic_store_n(&record_depth, depth, __ATOMIC_RELAXED); /* racing threads store the same */
  return (size_t)depth;
}

/* ---- The depot ------------------------------------------------------------ *
 * An open-addressing table of stacks, claimed slot by slot with a CAS and
 * never emptied: an id is its slot + 1. A slot's key is 0 (empty), WRITING,
 * or the stack's hash, stored with release once the frames are in, so a
 * reader that acquires a hash sees them. Two threads storing one stack at
 * once may give it two slots; nothing waits for a slot being written (a
 * fork cannot strand a waiter). */
#define DEPOT_SLOTS ((size_t)1 << 17)
#define DEPOT_PROBES 64
#define WRITING 1u

typedef struct depot_slot {
  _Atomic(uint32_t) key;
  uint32_t depth;
  uintptr_t pc[STACK_RECORD_MAX];
} depot_slot_t;

static _Atomic(depot_slot_t *) depot;

/* Mapped at the first stack, kept for the life of the process. */
static depot_slot_t *depot_get(void) {
  depot_slot_t *d = atomic_load_explicit(&depot, memory_order_acquire);
  if (d) return d;
  depot_slot_t *mine = _bk_os_map_records(DEPOT_SLOTS * sizeof *mine);
  if (!mine) return NULL;
  if (atomic_compare_exchange_strong_explicit(&depot, &d, mine, memory_order_acq_rel, memory_order_acquire))
    return mine;
  _bk_os_unmap_records(mine, DEPOT_SLOTS * sizeof *mine);
  return d;
}

static uint32_t stack_hash(const uintptr_t *pc, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) h = (h ^ pc[i]) * 0x100000001b3ull;
  uint32_t key = (uint32_t)(h ^ (h >> 32));
  return key <= WRITING ? key + 2 : key;
}

static uint32_t depot_put(const uintptr_t *pc, size_t n) {
  depot_slot_t *d = depot_get();
  if (!d) return 0;
  uint32_t key = stack_hash(pc, n);
  size_t s = key & (DEPOT_SLOTS - 1);
  for (int probe = 0; probe < DEPOT_PROBES; probe++, s = (s + 1) & (DEPOT_SLOTS - 1)) {
    uint32_t k = atomic_load_explicit(&d[s].key, memory_order_acquire);
    if (k == 0 &&
        atomic_compare_exchange_strong_explicit(&d[s].key, &k, WRITING, memory_order_acquire,
                                                memory_order_acquire)) {
      d[s].depth = (uint32_t)n;
      memcpy(d[s].pc, pc, n * sizeof *pc);
      atomic_store_explicit(&d[s].key, key, memory_order_release);
      return (uint32_t)s + 1;
    }
    if (k == key && d[s].depth == n && memcmp(d[s].pc, pc, n * sizeof *pc) == 0) return (uint32_t)s + 1;
  }
  return 0; /* full around this hash: not recorded */
}

uint32_t _bk_stack_record(const void *entry) {
  size_t depth = depth_wanted();
  if (!depth || _bk_locks_held) return 0;
  uintptr_t pc[STACK_RECORD_MAX];
  size_t n = _bk_stack_capture(entry, pc, depth);
  return n ? depot_put(pc, n) : 0;
}

size_t _bk_stack_get(uint32_t id, uintptr_t *pc, size_t max) {
  depot_slot_t *d = atomic_load_explicit(&depot, memory_order_acquire);
  if (!d || id == 0 || id > DEPOT_SLOTS) return 0;
  depot_slot_t *slot = &d[id - 1];
  if (atomic_load_explicit(&slot->key, memory_order_acquire) <= WRITING) return 0;
  size_t n = slot->depth < max ? slot->depth : max;
  memcpy(pc, slot->pc, n * sizeof *pc);
  return n;
}

/* ---- Printing -------------------------------------------------------------- */

/* A return address points after its call: the call is the byte before. */
static int format_frame(char *line, size_t len, size_t i, uintptr_t ret) {
  uintptr_t at = ret - 1;
  Dl_info info;
  if (!dladdr((void *)at, &info) || !info.dli_fname)
    return snprintf(line, len, "    #%zu 0x%012lx (unknown module)\n", i, (unsigned long)at);
  const char *module = *info.dli_fname ? info.dli_fname : program_invocation_name;
  unsigned long offset = (unsigned long)(at - (uintptr_t)info.dli_fbase);
  if (info.dli_sname && info.dli_saddr)
    return snprintf(line, len, "    #%zu 0x%012lx %s+0x%lx (%s+0x%lx)\n", i, (unsigned long)at, info.dli_sname,
                    (unsigned long)(at - (uintptr_t)info.dli_saddr), module, offset);
  return snprintf(line, len, "    #%zu 0x%012lx (%s+0x%lx)\n", i, (unsigned long)at, module, offset);
}

static void put_line(int fd, const char *line, int n, size_t len) {
  if (n > 0) _bk_os_write_all(fd, line, (size_t)n < len ? (size_t)n : len - 1);
}

void _bk_stack_print(int fd, const char *title, const uintptr_t *pc, size_t n) {
  char line[512];
  put_line(fd, line, snprintf(line, sizeof line, "  %s:%s\n", title, n ? "" : " (no stack)"), sizeof line);
  bool was_busy = busy;
  busy = true; /* the loader, if it allocated, takes no stack */
  for (size_t i = 0; i < n; i++) put_line(fd, line, format_frame(line, sizeof line, i, pc[i]), sizeof line);
  busy = was_busy;
}

void _bk_stack_print_id(int fd, const char *title, uint32_t id) {
  uintptr_t pc[STACK_RECORD_MAX];
  size_t n = _bk_stack_get(id, pc, STACK_RECORD_MAX);
  if (n) _bk_stack_print(fd, title, pc, n);
}

#endif
