/* brisk-replay --info: what a trace holds, as text. */
#include "replay.h"

#include <string.h>

const char *replay_bytes(char *buf, size_t len, double bytes) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) bytes /= 1024, u++;
  snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", bytes, units[u]);
  return buf;
}

static void bar(FILE *out, double part) {
  int n = (int)(part * 40 + 0.5);
  for (int i = 0; i < n; i++) fputc('#', out);
  fputc('\n', out);
}

static void size_histogram(const trace *t, FILE *out) {
  uint64_t most = 1, total = 0;
  char lo[80], hi[32];
  for (int b = 0; b < TRACE_SIZE_BUCKETS; b++) {
    if (t->size_histogram[b] > most) most = t->size_histogram[b];
    total += t->size_histogram[b];
  }
  fprintf(out, "size histogram (blocks made, by bytes asked; from, up to but not including):\n");
  for (int b = 0; b < TRACE_SIZE_BUCKETS; b++) {
    uint64_t n = t->size_histogram[b];
    if (!n) continue;
    if (b == 0) {
      snprintf(lo, sizeof lo, "0 B");
    } else if (b == TRACE_SIZE_BUCKETS - 1) {
      snprintf(lo, sizeof lo, "%s and more", replay_bytes(hi, sizeof hi, (double)(1ull << (b - 1))));
    } else {
      replay_bytes(hi, sizeof hi, (double)(1ull << b));
      size_t used = strlen(replay_bytes(lo, sizeof lo, (double)(1ull << (b - 1))));
      snprintf(lo + used, sizeof lo - used, " - %s", hi);
    }
    fprintf(out, "  %-22s %10llu %5.1f%%  ", lo, (unsigned long long)n, 100.0 * (double)n / (double)total);
    bar(out, (double)n / (double)most);
  }
}

static void live_over_time(const trace *t, FILE *out) {
  enum { ROWS = 20 };
  uint64_t series[ROWS];
  trace_live live;
  char b[32];
  if (trace_live_walk(t, NULL, &live, series, ROWS)) return;
  fprintf(out, "live bytes over time (the most in each twentieth of the run):\n");
  for (int i = 0; i < ROWS; i++) {
    fprintf(out, "  %9.3f s %12s  ", (double)t->duration_ns * i / (ROWS - 1) / 1e9,
            replay_bytes(b, sizeof b, (double)series[i]));
    bar(out, live.peak ? (double)series[i] / (double)live.peak : 0);
  }
}

void replay_info(const trace *t, const char *path, FILE *out) {
  char a[32], b[32];
  uint64_t total = 0;
  for (int k = 1; k < TK_KIND_COUNT; k++) total += t->calls[k];
  fprintf(out, "trace: %s (%s, %zu chunks)\n", path, replay_bytes(a, sizeof a, (double)t->file_bytes), t->chunks);
  fprintf(out, "program: %s (pid %u, parent %u; page size %u)\n", t->program[0] ? t->program : "?", t->pid,
          t->parent_pid, t->page_size);
  if (t->cut_short) fprintf(out, "note: %s\n", t->warning);
  fprintf(out, "calls: %llu\n", (unsigned long long)total);
  for (int k = 1; k < TK_KIND_COUNT; k++)
    if (t->calls[k])
      fprintf(out, "  %-20s %12llu %5.1f%%\n", trace_kind_name((unsigned)k), (unsigned long long)t->calls[k],
              100.0 * (double)t->calls[k] / (double)total);
  fprintf(out, "threads: %u\n", t->thread_count);
  fprintf(out, "blocks: %u\n", t->block_count);
  fprintf(out, "cross-thread frees: %llu\n", (unsigned long long)t->cross_thread);
  fprintf(out,
          "frees of blocks not in the trace: %llu (allocated before recording began, or in a chunk "
          "that was never written)\n",
          (unsigned long long)t->unknown_blocks);
  if (t->reused_addresses)
    fprintf(out, "addresses handed out while still live: %llu (a free that was never written)\n",
            (unsigned long long)t->reused_addresses);
  fprintf(out, "failed calls (NULL): %llu\n", (unsigned long long)t->failed_calls);
  fprintf(out, "duration: %.3f s\n", (double)t->duration_ns / 1e9);
  fprintf(out, "live bytes: peak %s (%llu B) at %.3f s, at the end %s (%llu B)\n",
          replay_bytes(a, sizeof a, (double)t->peak_live_bytes), (unsigned long long)t->peak_live_bytes,
          (double)t->peak_at_ns / 1e9, replay_bytes(b, sizeof b, (double)t->final_live_bytes),
          (unsigned long long)t->final_live_bytes);
  size_histogram(t, out);
  live_over_time(t, out);
}
