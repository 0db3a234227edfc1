/* The leak report at exit (BRISK_LEAK_REPORT, brisk-run --leaks): the blocks
 * still live that nothing reachable points to (reach.c), grouped by size
 * class, the most bytes first, and one line for the blocks still
 * reachable, which are not leaks (what the C and C++ runtimes keep until
 * the process ends is among them); the checked library groups the leaks by
 * the stack that allocated them and prints each stack. The tables are
 * static or mapped, and every line is formatted on the stack: nothing is
 * allocated at exit. */
#include "extra/extra.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool put(int fd, const char *line, int n, size_t len) {
  return n <= 0 || _bk_os_write_all(fd, line, (size_t)n < len ? (size_t)n : len - 1);
}

static bool put_header(int fd, uint64_t blocks, size_t bytes, long pid, const char *command) {
  char line[160];
  return put(fd, line,
             snprintf(line, sizeof line, "brisk leak report: %llu leaked blocks, %zu bytes (pid %ld, %s)\n",
                      (unsigned long long)blocks, bytes, pid, command),
             sizeof line);
}

typedef struct reachable {
  uint64_t blocks;
  size_t bytes;
  bool known; /* false: memory could not be scanned, every block counts as leaked */
} reachable_t;

/* Calls add for every live block nothing reachable points to, and counts
 * the rest. */
static void each_leak(int (*add)(void *p, size_t size, void *arg), void *arg, reachable_t *kept) {
  bool complete;
  reach_t *r = _bk_reach_begin(&complete);
  kept->known = r && complete;
  if (!r) {
    brisk_visit_blocks(add, arg);
    return;
  }
  for (size_t i = 0; i < _bk_reach_count(r); i++) {
    void *p;
    size_t size;
    if (!_bk_reach_block(r, i, &p, &size)) {
      add(p, size, arg);
    } else {
      kept->blocks++;
      kept->bytes += size; /* (as the visit gives it: asked for, in the checked library) */
    }
  }
  _bk_reach_end(r);
}

static void put_reachable(int fd, const reachable_t *kept) {
  char line[200];
  if (!kept->known)
    put(fd, line, snprintf(line, sizeof line, "  (memory could not be scanned: every live block is listed)\n"),
        sizeof line);
  else if (kept->blocks)
    put(fd, line,
        snprintf(line, sizeof line, "  and %llu blocks, %zu bytes, still reachable (not leaks)\n",
                 (unsigned long long)kept->blocks, kept->bytes),
        sizeof line);
}

#if !BRISK_CHECKED

/* ---- By size class -------------------------------------------------------- */

typedef struct leak_group {
  size_t size;
  uint64_t count;
  size_t bytes;
} leak_group_t;
typedef struct leak_table {
  leak_group_t group[CLASS_COUNT + 1];
} leak_table_t;

static int count_leak(void *p, size_t size, void *arg) {
  (void)p;
  leak_table_t *t = arg;
  unsigned g = size > LARGE_SIZE_MAX ? CLASS_COUNT : size_to_class(size);
  t->group[g].size = g == CLASS_COUNT ? 0 : size;
  t->group[g].count++;
  t->group[g].bytes += size;
  return 0;
}

static int by_bytes_desc(const void *a, const void *b) {
  const leak_group_t *x = a, *y = b;
  return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

uint64_t _bk_leak_report(int fd, long pid, const char *command) {
  static leak_table_t table;
  memset(&table, 0, sizeof table);
  reachable_t kept = {0};
  each_leak(count_leak, &table, &kept);
  qsort(table.group, CLASS_COUNT + 1, sizeof table.group[0], by_bytes_desc);
  uint64_t blocks = 0;
  size_t bytes = 0;
  for (int i = 0; i <= CLASS_COUNT; i++) {
    blocks += table.group[i].count;
    bytes += table.group[i].bytes;
  }
  if (!put_header(fd, blocks, bytes, pid, command)) return blocks;
  char line[160];
  for (int i = 0; i <= CLASS_COUNT && table.group[i].count; i++) {
    const leak_group_t *g = &table.group[i];
    int n = g->size ? snprintf(line, sizeof line, "  %8llu blocks of %8zu bytes  %12zu bytes\n",
                               (unsigned long long)g->count, g->size, g->bytes)
                    : snprintf(line, sizeof line, "  %8llu huge blocks            %12zu bytes\n",
                               (unsigned long long)g->count, g->bytes);
    if (!put(fd, line, n, sizeof line)) break;
  }
  put_reachable(fd, &kept);
  return blocks;
}

#else

/* ---- By allocation stack (checked library) --------------------------------- */

#define LEAK_SITES 4096
#define SITES_SHOWN 40

typedef struct leak_site {
  uint32_t stack; /* depot id (core/stack.c) */
  bool shown;
  uint64_t count;
  size_t bytes, min, max;
} leak_site_t;

typedef struct site_table {
  leak_site_t site[LEAK_SITES];
  leak_site_t unrecorded; /* blocks allocated with no stack recorded */
  leak_site_t other;      /* sites past the table's room */
} site_table_t;

static leak_site_t *site_for(site_table_t *t, uint32_t stack) {
  if (!stack) return &t->unrecorded;
  size_t s = (size_t)stack * 2654435761u % LEAK_SITES;
  for (int probe = 0; probe < LEAK_SITES / 4; probe++, s = (s + 1) % LEAK_SITES) {
    leak_site_t *site = &t->site[s];
    if (!site->count) site->stack = stack;
    if (site->stack == stack) return site;
  }
  return &t->other;
}

static void add_block(leak_site_t *s, size_t size) {
  if (!s->count || size < s->min) s->min = size;
  if (size > s->max) s->max = size;
  s->count++;
  s->bytes += size;
}

static int count_site(void *p, size_t size, void *arg) {
  uint32_t stack = 0;
  _bk_checked_user_block(&p, &size, &stack);
  add_block(site_for(arg, stack), size);
  return 0;
}

/* "1000 blocks of 200 bytes, 200000 bytes" or "3 blocks of 16-4096 bytes, ..." */
static void describe(const leak_site_t *s, const char *where, char *buf, size_t len) {
  if (s->min == s->max)
    snprintf(buf, len, "%llu blocks of %zu bytes, %zu bytes, %s", (unsigned long long)s->count, s->min, s->bytes,
             where);
  else
    snprintf(buf, len, "%llu blocks of %zu-%zu bytes, %zu bytes, %s", (unsigned long long)s->count, s->min, s->max,
             s->bytes, where);
}

static void print_site(int fd, const leak_site_t *s) {
  char title[160];
  describe(s, "allocated at", title, sizeof title);
  uintptr_t pc[STACK_RECORD_MAX];
  _bk_stack_print(fd, title, pc, _bk_stack_get(s->stack, pc, STACK_RECORD_MAX));
}

static void print_group(int fd, const leak_site_t *s, const char *where) {
  char line[320], what[256];
  describe(s, where, what, sizeof what);
  if (s->count) put(fd, line, snprintf(line, sizeof line, "  %s\n", what), sizeof line);
}

/* The sites with the most bytes first, SITES_SHOWN of them; the rest in
 * one line. */
uint64_t _bk_leak_report(int fd, long pid, const char *command) {
  static site_table_t table;
  memset(&table, 0, sizeof table);
  reachable_t kept = {0};
  each_leak(count_site, &table, &kept);
  leak_site_t rest = table.other;
  uint64_t blocks = table.unrecorded.count + table.other.count;
  size_t bytes = table.unrecorded.bytes + table.other.bytes;
  for (size_t i = 0; i < LEAK_SITES; i++) {
    blocks += table.site[i].count;
    bytes += table.site[i].bytes;
  }
  if (!put_header(fd, blocks, bytes, pid, command)) return blocks;
  for (int shown = 0;; shown++) {
    leak_site_t *top = NULL;
    for (size_t i = 0; i < LEAK_SITES; i++)
      if (table.site[i].count && !table.site[i].shown && (!top || table.site[i].bytes > top->bytes))
        top = &table.site[i];
    if (!top) break;
    top->shown = true;
    if (shown < SITES_SHOWN) {
      print_site(fd, top);
    } else {
      if (!rest.count || top->min < rest.min) rest.min = top->min;
      if (top->max > rest.max) rest.max = top->max;
      rest.count += top->count;
      rest.bytes += top->bytes;
    }
  }
  print_group(fd, &rest, "allocated at sites not shown");
  print_group(fd, &table.unrecorded,
              "allocated with no stack recorded (BRISK_STACK_DEPTH=0, or a brisk lock held)");
  put_reachable(fd, &kept);
  return blocks;
}

#endif
