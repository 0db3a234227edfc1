/* brisk-replay-driver: the program tools/brisk-replay runs under each
 * allocator (and bench/run.py, as the replay workload). key=value
 * arguments, as the benchmark programs take:
 *
 *   brisk-replay-driver trace=FILE [mode=replay] [name=LABEL] [series=FILE] [sample_ms=2] [window=1024]
 *   brisk-replay-driver trace=FILE mode=info
 *   brisk-replay-driver trace=FILE mode=check     read it, print "calls: N" (the format test)
 *
 * Exit status: 0; 1 the trace cannot be read (one line on stderr, starting
 * "brisk-replay: "); 2 the replay was not faithful; 3 out of memory;
 * 64 bad arguments. */
#include "replay.h"
#include "common.h"

#include <string.h>

int main(int argc, char **argv) {
  args_init(argc, argv);
  const char *path = arg_str("trace", NULL);
  const char *mode = arg_str("mode", "replay");
  const char *name = arg_str("name", NULL);
  const char *series = arg_str("series", NULL);
  long sample_ms = (long)arg_int("sample_ms", 2);
  long long window = arg_int("window", 1024);
  args_done();
  if (!path || (strcmp(mode, "replay") && strcmp(mode, "info") && strcmp(mode, "check"))) {
    fprintf(stderr,
            "usage: brisk-replay-driver trace=FILE [mode=replay|info|check] [name=LABEL] "
            "[series=FILE] [sample_ms=N] [window=CALLS]\n");
    return 64;
  }
  trace t;
  if (trace_read_file(&t, path) != 0) {
    fprintf(stderr, "brisk-replay: %s: %s\n", path, t.error);
    trace_release(&t);
    return 1;
  }
  if (t.cut_short) fprintf(stderr, "brisk-replay: warning: %s: %s\n", path, t.warning);
  int rc = 0;
  if (!strcmp(mode, "info")) {
    replay_info(&t, path, stdout);
  } else if (!strcmp(mode, "check")) {
    uint64_t calls = 0;
    for (int k = 1; k < TK_KIND_COUNT; k++) calls += t.calls[k];
    printf("calls: %llu\nthreads: %u\nblocks: %u\npeak live bytes: %llu\n", (unsigned long long)calls,
           t.thread_count, t.block_count, (unsigned long long)t.peak_live_bytes);
  } else {
    if (!name) name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    rc = replay_run(&t, name, series, sample_ms, window > 0 ? (uint64_t)window : 0);
  }
  trace_release(&t);
  return rc;
}
