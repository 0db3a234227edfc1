/* The secure library's keys, guard pages, shuffled pages and the messages
 * of its aborts (secure.h says what it guards against). The release
 * library compiles the keys only: its links are stored plain. */
#include "core/core.h"

secure_keys_t _bk_keys;
uint64_t _bk_class_multiple_test[CLASS_COUNT];

/* Called once, before any block is threaded. Without a random source the
 * keys still differ from run to run (addresses under ASLR and the clock),
 * only less unpredictably. */
void _bk_secure_init(void) {
  if (!BRISK_SECURE) return;
  for (unsigned cls = 1; cls < CLASS_COUNT; cls++)
    _bk_class_multiple_test[cls] = UINT64_MAX / _bk_class_size(cls) + 1;
  secure_keys_t k;
  if (!_bk_os_random(&k, sizeof k)) {
    uintptr_t seed = (uintptr_t)&k ^ ((uintptr_t)&_bk_keys << 17) ^
        (uintptr_t)_bk_os_now_ms() * 0x9E3779B97F4A7C15ull;
    k.link_xor = seed * 0xBF58476D1CE4E5B9ull;
    k.link_add = (seed ^ (seed >> 31)) * 0x94D049BB133111EBull;
    k.freed = k.link_xor ^ (k.link_add >> 7) ^ (uintptr_t)_bk_os_process_id();
  }
  k.freed |= 1; /* a freed block's second word is never 0 (which hand-out writes) */
  _bk_keys = k;
}

void _bk_secure_corrupted_link(const void *at, const void *link) {
  _bk_fatal("corrupted free list at %p: its link leads to %p, not a free block of its kind "
            "(heap overflow or write after free?)",
            at, link);
}

void _bk_secure_bad_free(const char *call, const void *p, const char *misuse) {
  _bk_fatal("%s(%p): %s", call, p, misuse);
}

void _bk_secure_check_huge(const char *call, segment_t *seg, const void *p, bool freeing) {
  if (!BRISK_SECURE) return;
  if (PEEK(seg->state) != SEG_STATE_HUGE || !seg->live)
    _bk_secure_bad_free(call, p, "double free or invalid pointer (its block is not live)");
  if ((const uint8_t *)p != (uint8_t *)seg + PEEK(seg->block_offset))
    _bk_secure_bad_free(call, p, "pointer is inside a block, not at its start");
  if (freeing) seg->live = 0;
}

void _bk_secure_check_block(const char *call, const void *p, bool freeing) {
  if (!BRISK_SECURE || !p) return;
  segment_t *seg = segment_of(p);
  if (!seg) _bk_secure_bad_free(call, p, "pointer was not allocated by brisk (foreign or invalid pointer)");
  secure_block_check(call, seg, page_of(seg, p), p, freeing);
}

/* Guard pages after the header and at the end of a fresh mapping; they stay
 * for its life, since the secure library never resizes a mapping. */
bool _bk_secure_guard(segment_t *seg, size_t size) {
  uint8_t *header_end = (uint8_t *)seg + align_up(sizeof(segment_t), OS_PAGE_SIZE);
  return _bk_os_guard(header_end, OS_PAGE_SIZE) &&
      _bk_os_guard((uint8_t *)seg + size - OS_PAGE_SIZE, OS_PAGE_SIZE);
}

/* ---- Fresh blocks in random order --------------------------------------- */
#if BRISK_SECURE && !BRISK_CHECKED

static __thread uint64_t shuffle_state __attribute__((tls_model("initial-exec")));

static uint64_t next_random(void) {
  if (!shuffle_state) shuffle_state = (_bk_keys.link_add ^ (uintptr_t)&shuffle_state) | 1;
  uint64_t x = shuffle_state; /* xorshift64: a few cycles, never 0 */
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return shuffle_state = x;
}

/* The blocks are split into up to SHUFFLE_STREAMS runs, and each next block
 * is the next of a run picked at random, weighted by what the run has left
 * (so the runs drain together and no run is walked alone at the end):
 * which block comes next is not predictable (one of up to 8), yet each run
 * is walked in address order, which the CPU's prefetchers follow (a full
 * shuffle made a loop that touches its fresh blocks 3x slower). */
#define SHUFFLE_STREAMS 8

/* Threads the count blocks of bsize at first, in that order and each marked
 * free, ahead of tail; returns the first. */
block_t *_bk_secure_thread_shuffled(uint8_t *first, size_t count, size_t bsize, block_t *tail) {
  size_t next[SHUFFLE_STREAMS], end[SHUFFLE_STREAMS];
  size_t streams = count < SHUFFLE_STREAMS ? count : SHUFFLE_STREAMS;
  for (size_t i = 0; i < streams; i++) {
    next[i] = count * i / streams;
    end[i] = count * (i + 1) / streams;
  }
  const secure_keys_t keys = _bk_keys; /* not reloaded after each store */
  block_t *head = NULL, *prev = NULL;
  for (size_t left = count; left > 0; left--) {
    size_t pick = (size_t)(((next_random() >> 32) * left) >> 32), j = 0;
    while (pick >= end[j] - next[j]) {
      pick -= end[j] - next[j];
      j++;
    }
    block_t *b = (block_t *)(first + next[j]++ * bsize);
    /* Marked free, as a freed block is: a page's memory may have been
     * purged (zero) or held other blocks before, and a free of a block
     * that was never handed out is a double free too. */
    ((uintptr_t *)b)[1] = (uintptr_t)b ^ keys.freed;
    if (prev) prev->next = link_encode(keys, prev, b);
    else head = b;
    prev = b;
  }
  if (prev) prev->next = link_encode(keys, prev, tail);
  return head ? head : tail;
}
#endif
