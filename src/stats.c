/* Statistics: a snapshot assembled on request from what the allocator keeps
 * anyway (page counts, segment states, per-heap counters, OS call counts),
 * so the fast path pays nothing for it. */
#include "internal.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static unsigned tier_of_kind(unsigned kind) {
  return kind == SEG_SMALL ? BRISK_TIER_SMALL : kind == SEG_MEDIUM ? BRISK_TIER_MEDIUM
       : kind == SEG_LARGE ? BRISK_TIER_LARGE : BRISK_TIER_HUGE;
}

static void add_heap(heap_t *h, void *arg) {
  brisk_stats_t *st = arg;
  st->requested += PEEK(h->stat_requested);
  st->cache_hits += PEEK(h->stat_cache_hits);
  st->cache_misses += PEEK(h->stat_cache_misses);
  if (h->is_explicit) st->explicit_heaps++;
  else st->thread_heaps++;
}

/* free_chunks (mallinfo's ordblks): free slots of pages holding blocks, plus
 * one per free page not yet purged. */
static void add_paged_segment(brisk_stats_t *st, uint64_t *free_chunks, segment_t *seg, unsigned kind,
                              unsigned state) {
  brisk_tier_stats_t *t = &st->tiers[tier_of_kind(kind)];
  t->reserved += SEGMENT_SIZE;
  uint32_t pages = (uint32_t)(SEGMENT_SIZE >> (kind == SEG_SMALL ? SMALL_PAGE_SHIFT : kind == SEG_MEDIUM ? MEDIUM_PAGE_SHIFT : LARGE_PAGE_SHIFT));
  for (uint32_t i = 0; i < pages; i++) {
    page_t *pg = &seg->pages[i];
    size_t area;
    page_area(seg, i, &area);
    if (!PEEK(pg->in_use)) {
      if (PEEK(pg->needs_purge)) {
        t->committed += area;
        ++*free_chunks;
      }
      continue;
    }
    unsigned cls = PEEK(pg->size_class);
    uint64_t used = PEEK(pg->used), slots = PEEK(pg->reserved);
    if (slots > used) *free_chunks += slots - used;
    t->committed += area;
    t->live_blocks += used;
    t->in_use += used * PEEK(pg->block_size);
    if (cls < BRISK_STATS_MAX_CLASSES) st->class_live_blocks[cls] += used;
    if (state == SEG_STATE_ABANDONED && used) st->abandoned_bytes += area;
  }
  if (state == SEG_STATE_ABANDONED) st->abandoned_segments++;
}

/* brisk_stats_get, also counting free chunks (cached segments count one each). */
static int stats_collect(brisk_stats_t *st, uint64_t *free_chunks) {
  if (!st || st->version != BRISK_STATS_VERSION) return EINVAL;
  memset(st, 0, sizeof *st);
  st->version = BRISK_STATS_VERSION;
  st->class_count = CLASS_COUNT;
  for (unsigned c = 1; c < CLASS_COUNT; c++) st->class_size[c] = _bk_class_size(c);

  _bk_heap_foreach(add_heap, st);
  uint64_t retired[4];
  _bk_heap_stats_retired(retired);
  st->requested += retired[0];
  st->cache_hits += retired[1];
  st->cache_misses += retired[2];
  st->threads_exited = retired[3];

  _bk_segments_lock();
  for (segment_t *seg = _bk_segments_first(); seg; seg = seg->all_next) {
    unsigned state = PEEK(seg->state), kind = PEEK(seg->kind);
    size_t mapped = PEEK(seg->mapped_size);
    if (state == SEG_STATE_CACHED) {
      st->cached += mapped;
      ++*free_chunks;
      if (!PEEK(seg->purged)) st->committed += mapped;
    } else if (state == SEG_STATE_HUGE) {
      brisk_tier_stats_t *t = &st->tiers[BRISK_TIER_HUGE];
      t->live_blocks++;
      t->in_use += mapped - PEEK(seg->block_offset);
      t->committed += mapped;
      t->reserved += mapped;
    } else {
      add_paged_segment(st, free_chunks, seg, kind, state);
    }
  }
  _bk_segments_unlock();

  for (int t = 0; t < BRISK_TIER_COUNT; t++) {
    st->in_use += st->tiers[t].in_use;
    st->committed += st->tiers[t].committed;
    st->reserved += st->tiers[t].reserved;
  }
  st->reserved += st->cached;
  st->mapped = brisk_mapped_bytes();
  st->peak_reserved = _bk_os_peak_mapped();
  st->mmap_calls = _bk_os_call_count(OS_MMAP);
  st->munmap_calls = _bk_os_call_count(OS_MUNMAP);
  st->madvise_calls = _bk_os_call_count(OS_MADVISE);
  st->mremap_calls = _bk_os_call_count(OS_MREMAP);
  return 0;
}

int brisk_stats_get(brisk_stats_t *st) {
  uint64_t free_chunks = 0;
  return stats_collect(st, &free_chunks);
}

/* ---- glibc's mallinfo2 and malloc_stats (meanings in brisk.h) ------------ */

static void mallinfo_from(const brisk_stats_t *st, uint64_t free_chunks, mallinfo_fields_t *mi) {
  const brisk_tier_stats_t *huge = &st->tiers[BRISK_TIER_HUGE];
  size_t tiers_committed = 0;
  for (int t = 0; t < BRISK_TIER_COUNT; t++) tiers_committed += st->tiers[t].committed;
  mi->keepcost = st->committed - tiers_committed; /* cached, not yet purged */
  mi->arena = st->committed - huge->committed;
  mi->uordblks = st->in_use - huge->in_use;
  /* Other threads change the pages while the snapshot is taken. */
  mi->fordblks = mi->arena > mi->uordblks ? mi->arena - mi->uordblks : 0;
  mi->ordblks = (size_t)free_chunks;
  mi->hblks = (size_t)huge->live_blocks;
  mi->hblkhd = huge->committed;
  mi->usmblks = st->peak_reserved;
}

void _bk_stats_mallinfo(mallinfo_fields_t *mi) {
  brisk_stats_t st = {.version = BRISK_STATS_VERSION};
  uint64_t free_chunks = 0;
  stats_collect(&st, &free_chunks);
  mallinfo_from(&st, free_chunks, mi);
}

/* ---- Printing ------------------------------------------------------------ */

static const char *const tier_names[BRISK_TIER_COUNT] = {"small", "medium", "large", "huge"};

/* The one formatter behind both the table and the JSON. */
typedef struct out { char *buf; size_t len, pos; } out_t;

static void put(out_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(out_t *o, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(o->pos < o->len ? o->buf + o->pos : NULL, o->pos < o->len ? o->len - o->pos : 0, fmt, ap);
  va_end(ap);
  if (n > 0) o->pos += (size_t)n;
}

static void format_json(out_t *o, const brisk_stats_t *st) {
  put(o, "{\"version\":%u,\"requested\":%llu,\"in_use\":%zu,\"committed\":%zu,\"reserved\":%zu,"
         "\"cached\":%zu,\"mapped\":%zu,\"peak_reserved\":%zu,\"tiers\":{",
      st->version, (unsigned long long)st->requested, st->in_use, st->committed, st->reserved, st->cached,
      st->mapped, st->peak_reserved);
  for (int t = 0; t < BRISK_TIER_COUNT; t++)
    put(o, "%s\"%s\":{\"live_blocks\":%llu,\"in_use\":%zu,\"committed\":%zu,\"reserved\":%zu}", t ? "," : "",
        tier_names[t], (unsigned long long)st->tiers[t].live_blocks, st->tiers[t].in_use,
        st->tiers[t].committed, st->tiers[t].reserved);
  put(o, "},\"classes\":[");
  bool first = true;
  for (unsigned c = 1; c < st->class_count; c++) {
    if (!st->class_live_blocks[c]) continue;
    put(o, "%s{\"size\":%zu,\"live_blocks\":%llu}", first ? "" : ",", st->class_size[c],
        (unsigned long long)st->class_live_blocks[c]);
    first = false;
  }
  put(o, "],\"os\":{\"mmap\":%llu,\"munmap\":%llu,\"madvise\":%llu,\"mremap\":%llu},"
         "\"cache\":{\"hits\":%llu,\"misses\":%llu},"
         "\"heaps\":{\"thread\":%u,\"explicit\":%u,\"threads_exited\":%llu,"
         "\"abandoned_segments\":%u,\"abandoned_bytes\":%zu}}",
      (unsigned long long)st->mmap_calls, (unsigned long long)st->munmap_calls,
      (unsigned long long)st->madvise_calls, (unsigned long long)st->mremap_calls,
      (unsigned long long)st->cache_hits, (unsigned long long)st->cache_misses, st->thread_heaps,
      st->explicit_heaps, (unsigned long long)st->threads_exited, st->abandoned_segments, st->abandoned_bytes);
}

size_t brisk_stats_json(char *buf, size_t len) {
  brisk_stats_t st = {.version = BRISK_STATS_VERSION};
  brisk_stats_get(&st);
  if (!buf) len = 0; /* the length it needs, as snprintf(NULL, n) gives */
  out_t o = {buf, len, 0};
  format_json(&o, &st);
  if (buf && len) buf[o.pos < len ? o.pos : len - 1] = '\0';
  return o.pos;
}

static void format_table(out_t *o, const brisk_stats_t *st) {
  put(o, "brisk statistics\n");
  put(o, "  %-8s %14s %14s %14s %14s\n", "tier", "live blocks", "in use", "committed", "reserved");
  for (int t = 0; t < BRISK_TIER_COUNT; t++)
    put(o, "  %-8s %14llu %14zu %14zu %14zu\n", tier_names[t], (unsigned long long)st->tiers[t].live_blocks,
        st->tiers[t].in_use, st->tiers[t].committed, st->tiers[t].reserved);
  put(o, "  %-8s %14s %14zu %14zu %14zu\n", "total", "", st->in_use, st->committed, st->reserved);
  put(o, "  requested %llu bytes in all; cached %zu; mapped now %zu, at peak %zu\n",
      (unsigned long long)st->requested, st->cached, st->mapped, st->peak_reserved);
  put(o, "  os calls: mmap %llu, munmap %llu, madvise %llu, mremap %llu\n", (unsigned long long)st->mmap_calls,
      (unsigned long long)st->munmap_calls, (unsigned long long)st->madvise_calls,
      (unsigned long long)st->mremap_calls);
  put(o, "  recycle cache: %llu hits, %llu misses\n", (unsigned long long)st->cache_hits,
      (unsigned long long)st->cache_misses);
  put(o, "  heaps: %u thread, %u explicit; %llu threads exited; %u abandoned segments (%zu bytes)\n",
      st->thread_heaps, st->explicit_heaps, (unsigned long long)st->threads_exited, st->abandoned_segments,
      st->abandoned_bytes);
  put(o, "  %10s %14s\n", "class", "live blocks");
  for (unsigned c = 1; c < st->class_count; c++)
    if (st->class_live_blocks[c])
      put(o, "  %10zu %14llu\n", st->class_size[c], (unsigned long long)st->class_live_blocks[c]);
}

/* Printed with write(2) from a stack buffer: no stdio locks, no allocation
 * (this also runs at exit, after stdio may be gone). */
static void emit(int fd, void (*format)(out_t *, const brisk_stats_t *), const brisk_stats_t *st) {
  char buf[8192];
  out_t o = {buf, sizeof buf, 0};
  format(&o, st);
  size_t n = o.pos < sizeof buf ? o.pos : sizeof buf - 1;
  for (size_t done = 0; done < n;) {
    ssize_t w = write(fd, buf + done, n - done);
    if (w <= 0) break;
    done += (size_t)w;
  }
}

/* glibc's lines first, for readers that know them, then brisk's table. */
static void format_malloc_stats(out_t *o, const brisk_stats_t *st) {
  mallinfo_fields_t mi;
  mallinfo_from(st, 0, &mi);
  put(o, "Arena 0:\nsystem bytes     = %10zu\nin use bytes     = %10zu\n", mi.arena, mi.uordblks);
  put(o, "Total (incl. mmap):\nsystem bytes     = %10zu\nin use bytes     = %10zu\n", mi.arena + mi.hblkhd,
      mi.uordblks + mi.hblkhd);
  put(o, "mmap regions     = %10zu\nmmap bytes       = %10zu\n", mi.hblks, mi.hblkhd);
  format_table(o, st);
}

void _bk_stats_print_malloc_stats(void) {
  brisk_stats_t st = {.version = BRISK_STATS_VERSION};
  brisk_stats_get(&st);
  fflush(stderr);
  emit(2, format_malloc_stats, &st);
}

void brisk_stats_print(FILE *out) {
  brisk_stats_t st = {.version = BRISK_STATS_VERSION};
  brisk_stats_get(&st);
  FILE *f = out ? out : stderr;
  fflush(f);
  emit(fileno(f), format_table, &st);
}

/* Programs may close stderr on their way out (coreutils do): the report
 * at exit writes to a copy of it taken at start when a report is wanted. */
static int report_fd = -1;

void _bk_report_prepare(void) {
  if (_bk_opt.show_stats || _bk_opt.leak_report) report_fd = fcntl(2, F_DUPFD_CLOEXEC, 3);
}

/* BRISK_SHOW_STATS, BRISK_STATS_JSON and BRISK_LEAK_REPORT at exit. */
void _bk_report_at_exit(void) {
  int fd = report_fd >= 0 ? report_fd : 2;
  if (_bk_opt.show_stats) {
    brisk_stats_t st = {.version = BRISK_STATS_VERSION};
    brisk_stats_get(&st);
    emit(fd, format_table, &st);
  }
  const char *json = getenv("BRISK_STATS_JSON");
  if (json && *json) {
    brisk_stats_t st = {.version = BRISK_STATS_VERSION};
    brisk_stats_get(&st);
    /* "%p" becomes the process id: one file per process of a tree. */
    static char path[4096];
    size_t n = 0;
    for (const char *c = json; *c && n + 24 < sizeof path; c++) {
      if (c[0] == '%' && c[1] == 'p') {
        n += (size_t)snprintf(path + n, sizeof path - n, "%ld", (long)getpid());
        c++;
      } else {
        path[n++] = *c;
      }
    }
    path[n] = '\0';
    json = path;
    int fd = open(json, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
      emit(fd, format_json, &st);
      close(fd);
    } else {
      _bk_warning("cannot write the stats to %s", json);
    }
  }
  if (_bk_opt.leak_report) _bk_leak_report(fd);
}
