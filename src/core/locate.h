/* Where an address lies: the chunk map that says which addresses are
 * brisk's, and a segment's geometry (its pages, their bytes, the guards of
 * the secure library). Every lookup from a pointer to its segment and page
 * starts here. */
#ifndef BRISK_CORE_LOCATE_H
#define BRISK_CORE_LOCATE_H

#include "core/types.h"

/* One byte per 4 MiB chunk below 2^OS_ADDRESS_BITS (chunk_map.c): 0 =
 * not brisk's, 1 = a segment header starts here, k > 1 = this chunk belongs
 * to the segment whose header is k - 1 chunks lower (huge blocks span
 * many). Relaxed loads: a thread looks up only pointers it holds, whose
 * mapping was marked before the pointer was handed out. */
#define CHUNK_MAP_ENTRIES ((size_t)1 << (OS_ADDRESS_BITS - SEGMENT_SHIFT))
extern BRISK_INTERNAL _Atomic(uint8_t) _bk_chunk_map[CHUNK_MAP_ENTRIES];

/* Whether a segment header starts in p's own chunk (tag 1), at p's address
 * masked to SEGMENT_SIZE: the one lookup of the fast paths, with no walk
 * to a huge block's header (NULL, foreign and huge-interior pointers: no). */
static inline bool chunk_starts_segment(const void *p) {
  uintptr_t chunk = (uintptr_t)p >> SEGMENT_SHIFT;
  return chunk < CHUNK_MAP_ENTRIES && atomic_load_explicit(&_bk_chunk_map[chunk], memory_order_relaxed) == 1;
}

/* The segment whose header is at p's address masked to SEGMENT_SIZE: for
 * a p known to lie in a segment's first chunk (chunk_starts_segment said
 * so, or p is a page or a block of a paged segment). */
static inline segment_t *segment_base(const void *p) {
  return (segment_t *)((uintptr_t)p & ~(uintptr_t)SEGMENT_MASK);
}

static inline segment_t *segment_of(const void *p) {
  uintptr_t a = (uintptr_t)p;
  if (unlikely(a >> OS_ADDRESS_BITS)) return NULL;
  size_t idx = a >> SEGMENT_SHIFT;
  uint8_t tag = atomic_load_explicit(&_bk_chunk_map[idx], memory_order_relaxed);
  segment_t *seg;
  if (likely(tag == 1)) {
    seg = segment_base(p);
  } else {
    if (tag == 0) return NULL;
    while (tag > 1) {
      idx -= (size_t)tag - 1;
      tag = atomic_load_explicit(&_bk_chunk_map[idx], memory_order_relaxed);
    }
    if (tag != 1) return NULL;
    seg = (segment_t *)(idx << SEGMENT_SHIFT);
  }
  /* A huge block's mapping may end inside its last 4 MiB chunk, and the OS
   * may map anything after it (found by fuzz/fuzz_api.c): past the mapping
   * nothing is brisk's. */
  if (unlikely(PEEK(seg->kind) == SEG_HUGE) && a - (uintptr_t)seg >= PEEK(seg->mapped_size)) return NULL;
  return seg;
}

static inline page_t *page_of(segment_t *seg, const void *p) {
  /* Huge segments use a shift of 63: every offset maps to pages[0]. */
  return &seg->pages[((uintptr_t)p - (uintptr_t)seg) >> seg->page_shift];
}

/* Bytes of PROT_NONE after a segment's header and at a mapping's end, in
 * the secure library (secure.h): an underflow cannot reach a header, an
 * overflow cannot run into the next mapping. */
static inline size_t guard_size(void) { return BRISK_SECURE ? OS_PAGE_SIZE : 0; }

/* The bytes of a huge block: from its start to the guard. */
static inline size_t huge_block_size(const segment_t *seg) {
  return PEEK(seg->mapped_size) - PEEK(seg->block_offset) - guard_size();
}

/* In the secure library, where the guard page after a segment's header
 * starts: the header's last OS page ends there. */
static inline size_t segment_header_guard_offset(void) { return align_up(sizeof(segment_t), OS_PAGE_SIZE); }

/* Where a segment's blocks may start: after the header (and its guard). */
static inline size_t segment_data_offset(bool huge) {
  if (BRISK_SECURE) return segment_header_guard_offset() + OS_PAGE_SIZE;
  return huge ? HUGE_BLOCK_OFFSET : ((sizeof(segment_t) + 127) & ~(size_t)127);
}

/* The bytes of page idx that hold blocks (page 0 starts after the header,
 * the last ends before the guard); none when the header covers it (pages
 * of 64 KiB beside a secure header on a 64 KiB OS page). */
static inline uint8_t *page_area(segment_t *seg, size_t idx, size_t *size) {
  size_t psize = (size_t)1 << seg->page_shift;
  uint8_t *start = (uint8_t *)seg + idx * psize;
  uint8_t *end = start + psize;
  uint8_t *data = (uint8_t *)seg + segment_data_offset(false);
  if (start < data) start = data < end ? data : end;
  if (idx + 1 == seg->page_count) end -= guard_size();
  *size = (size_t)(end - start);
  return start;
}

/* The pages of seg that may be in use: those its free mask does not name
 * (a walk over its pages in use visits these, not all 64: a short thread's
 * exit touched every page's line). */
static inline uint64_t segment_pages_not_free(const segment_t *seg) {
  uint64_t all = seg->page_count >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << seg->page_count) - 1;
  return all & ~seg->free_page_mask;
}

/* A page the header and its guard leave less than half of is not used. */
static inline bool page_is_usable(segment_t *seg, size_t idx) {
  size_t area;
  page_area(seg, idx, &area);
  return area >= ((size_t)1 << seg->page_shift) / 2;
}

/* A free_class code (segment_t): odd sends an owner's free the slow way,
 * through the page; FREE_CODE_SLOW alone, all the way (_bk_heap_free_generic). */
#define FREE_CODE_SLOW 1

/* No 64 KiB of seg holds a page whose frees go on a hot stack by its byte
 * (segment free_class): a paged segment set up anew, of any kind (a cached
 * one's bytes were its last life's). */
static inline void segment_free_class_clear(segment_t *seg) {
  for (size_t i = 0; i < MAX_PAGES_PER_SEGMENT; i++) PUBLISH(seg->free_class[i], FREE_CODE_SLOW);
}

/* The bytes of the 64 KiBs page idx of seg spans (one, eight or all 64),
 * set to code. They are only ever set together, so the first tells whether
 * they hold it already: a large page, parked as full and taken back again
 * and again, rewrites its line only when its class's path changes. */
static inline void segment_free_class_set(segment_t *seg, size_t idx, uint8_t code) {
  if (BRISK_SECURE) return;
  unsigned per_page = seg->page_shift - SMALL_PAGE_SHIFT;
  uint8_t *bytes = &seg->free_class[idx << per_page];
  if (PEEK(bytes[0]) == code) return;
  for (size_t i = 0; i < (size_t)1 << per_page; i++) PUBLISH(bytes[i], code);
}

/* A page (re)initialized for a size class (page.c): its memory may hold
 * blocks of another class, freed (no access for memcheck). */
static inline void page_initialized(page_t *pg) {
#if BRISK_CHECKED
  PUBLISH(pg->handed_out, 0);
  VG_DEFINED(pg->start, (size_t)pg->reserved * pg->block_size);
#else
  (void)pg;
#endif
}

#endif
