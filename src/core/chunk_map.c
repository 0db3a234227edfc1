/* The chunk map: which 4 MiB chunks of the address space hold brisk's
 * segments, so that free can tell brisk's pointers from foreign ones and
 * find a huge block's header from any address inside it. The lookup
 * (segment_of) is inline in types.h. */
#include "core/core.h"

/* 32 MiB (x86-64) or 64 MiB of zero-initialized address space: only the pages whose chunks
 * hold segments are ever touched, so it costs a few KiB of memory. Being
 * static, it is valid before any initialization runs. */
BRISK_INTERNAL _Atomic(uint8_t) _bk_chunk_map[CHUNK_MAP_ENTRIES];

/* Marks (or clears) the chunks of a mapping that starts at a segment header
 * (always chunk-aligned) from its byte `from` up to `to`: the header's chunk
 * gets 1, each later chunk the distance back to it plus one, capped at 255
 * (then the lookup hops back 254 chunks and looks again). A chunk belongs to
 * the mapping when the mapping covers the chunk's first byte.
 *
 * Callers keep the map right at every instant another thread may look: they
 * mark chunks after the memory is mapped and clear them before it is given
 * back, since another thread may map the range the moment it is free. The
 * stores are release so that a thread that finds a chunk marked (through a
 * pointer it got by any synchronized means) sees the header written before. */
void _bk_chunk_map_mark(const void *header, size_t from, size_t to, bool on) {
  size_t base = (uintptr_t)header >> SEGMENT_SHIFT;
  size_t first = (from + SEGMENT_SIZE - 1) >> SEGMENT_SHIFT;
  size_t end = (to + SEGMENT_SIZE - 1) >> SEGMENT_SHIFT;
  for (size_t i = first; i < end; i++)
    atomic_store_explicit(&_bk_chunk_map[base + i], on ? (uint8_t)(i + 1 > 255 ? 255 : i + 1) : 0,
                          memory_order_release);
}
