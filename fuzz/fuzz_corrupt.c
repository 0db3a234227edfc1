/* Corruption fuzzer for the secure library (brisk_core_secure, issue #13):
 * the input is a program that allocates blocks, frees some, then writes
 * bytes of its choosing into freed blocks (the free-list links among them)
 * and before huge blocks (their headers), frees a freed block again or a
 * pointer inside a live one, and keeps allocating and freeing. What is
 * allowed to happen:
 *   - correct behaviour: every block handed out is brisk's, aligned, as big
 *     as asked, apart from every live block, and live blocks keep their
 *     bytes;
 *   - an abort (SIGABRT) after brisk printed a line starting "brisk:" (not
 *     an internal assertion: the release build has none);
 *   - a fault on a guard page (a PROT_NONE mapping of at most 1 MiB next to
 *     brisk's memory).
 * Anything else is a finding: a wrong block, a double or interior free
 * that returns, a fault elsewhere, a sanitizer report, a hang.
 *
 * Corrupted memory cannot be trusted after the input, and an abort ends a
 * process, so each input runs in a child (fork); the parent, which never
 * calls brisk, judges how it ended and traps on a finding, so libFuzzer
 * keeps the input. The child hands its coverage counters back through
 * shared memory, so the fuzzer still steers by what the child reached. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sanitizer/common_interface_defs.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static void child_wrong(void);
#define FZ_DIE() child_wrong()
#include "fuzz_common.h"

#define EXIT_WRONG 87 /* the child saw brisk misbehave (its message says how) */
#define EXIT_GUARD 86 /* the child faulted on a guard page: allowed */
#define CHILD_SECONDS 20
#define FREED_MAX 64
#define HUGE_PER_INPUT 4
#define MAX_HUGE (8 * FZ_MIB)

/* ---- Coverage of the child, handed back ---------------------------------- */

/* The counters of -fsanitize=fuzzer, as the module constructor hands them
 * to libFuzzer: fuzz/CMakeLists.txt links this harness with
 * --wrap=__sanitizer_cov_8bit_counters_init. (Naming the section's bounds,
 * __start___sancov_cntrs, in C makes the compiler's own references miss them.) */
void __real___sanitizer_cov_8bit_counters_init(uint8_t *start, uint8_t *stop);
static uint8_t *counters, *shared_counters;
static size_t counters_len;

void __wrap___sanitizer_cov_8bit_counters_init(uint8_t *start, uint8_t *stop) {
  if (!counters) counters = start, counters_len = (size_t)(stop - start); /* one module: this program */
  __real___sanitizer_cov_8bit_counters_init(start, stop);
}

static void counters_out(void) {
  if (counters_len) memcpy(shared_counters, counters, counters_len);
}

static void counters_in(void) {
  for (size_t i = 0; i < counters_len; i++)
    if (shared_counters[i] > counters[i]) counters[i] = shared_counters[i];
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fz_setup();
  shared_counters = mmap(NULL, counters_len + 1, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared_counters == MAP_FAILED) abort();
  return 0;
}

/* ---- The child: faults and endings ---------------------------------------- */

static void say(const char *fmt, uintptr_t a) {
  char buf[160];
  int n = snprintf(buf, sizeof buf, fmt, (void *)a);
  if (n > 0 && write(2, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1) < 0) _exit(EXIT_WRONG);
}

static void child_wrong(void) {
  counters_out();
  _exit(EXIT_WRONG);
}

static sigjmp_buf poke_env;
static volatile sig_atomic_t poking;
static char maps[1 << 20];

/* A guard page: a small PROT_NONE mapping next to (or in) brisk's memory;
 * ASan's shadow gap, also PROT_NONE, is terabytes. */
static bool on_guard_page(uintptr_t a) {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  size_t len = 0;
  ssize_t n;
  while (fd >= 0 && len < sizeof maps - 1 && (n = read(fd, maps + len, sizeof maps - 1 - len)) > 0)
    len += (size_t)n;
  if (fd >= 0) close(fd);
  maps[len] = '\0';
  for (char *line = maps; *line;) {
    char *next = strchr(line, '\n');
    uintptr_t lo = (uintptr_t)strtoull(line, &line, 16), hi = (uintptr_t)strtoull(line + 1, &line, 16);
    if (lo <= a && a < hi)
      return !strncmp(line + 1, "---", 3) && hi - lo <= FZ_MIB &&
          (brisk_owns((void *)a) || brisk_owns((void *)(lo - 1)) || brisk_owns((void *)hi));
    if (!next) break;
    line = next + 1;
  }
  return false;
}

static void on_fault(int sig, siginfo_t *si, void *ctx) {
  (void)ctx;
  if (poking) siglongjmp(poke_env, 1); /* the harness's own write: the memory is gone, skip it */
  uintptr_t a = (uintptr_t)si->si_addr;
  counters_out();
  if (on_guard_page(a)) {
    say("corrupt: fault on the guard page at %p (allowed)\n", a);
    _exit(EXIT_GUARD);
  }
  say("corrupt: fault at %p, not on a guard page\n", a);
  signal(sig, SIG_DFL);
  raise(sig);
}

static void on_abort(int sig) {
  (void)sig;
  counters_out(); /* abort() then ends the process with SIGABRT */
}

static void on_sanitizer_death(void) { counters_out(); }

static struct {
  uint8_t *p;
  size_t len;
} poked[256]; /* bytes written: calloc may hand them out unzeroed */
static int poked_n;

static bool was_poked(const uint8_t *q) {
  for (int k = 0; k < poked_n; k++)
    if (q >= poked[k].p && q < poked[k].p + poked[k].len) return true;
  return false;
}

/* Writes len input bytes at p, unless the memory is gone (brisk gave it
 * back to the OS, or it is not brisk's any more: writing there would be
 * the harness's own wild write). */
static void poke(uint8_t *p, size_t len, fz_input *in) {
  uint8_t bytes[8];
  for (size_t i = 0; i < len; i++) bytes[i] = fz_u8(in);
  if (poked_n < 256) poked[poked_n].p = p, poked[poked_n++].len = len;
  if (!brisk_owns(p) || !brisk_owns(p + len - 1)) return;
  poking = 1;
  if (!sigsetjmp(poke_env, 1)) memcpy(p, bytes, len);
  poking = 0;
}

/* ---- The child's program --------------------------------------------------- */

static fz_set live;
static fz_block freed[FREED_MAX];
static int freed_n, huge_left;
static uint32_t seed;

static bool overlaps(const fz_block *b, const void *q, size_t len) {
  return (uintptr_t)q < (uintptr_t)b->p + b->span && (uintptr_t)b->p < (uintptr_t)q + len;
}

static void forget_freed(void *q, size_t span) {
  for (int i = 0; i < freed_n;)
    if (overlaps(&freed[i], q, span)) freed[i] = freed[--freed_n];
    else i++;
}

static void take(const char *what, uint8_t *q, size_t size, size_t align, bool zeroed) {
  size_t span = brisk_usable_size(q);
  fz_check_new(what, live.b, live.n, q, size, fz_malloc_align(size, align), span);
  if (zeroed)
    for (size_t i = 0; i < size; i += i < 4096 || size - i <= 4096 ? 1 : 4096)
      FZ_CHECK(!q[i] || was_poked(q + i), "%s(%zu) = %p: byte %zu is 0x%02x, not 0", what, size, (void *)q, i,
               q[i]);
  forget_freed(q, span);
  fz_add(&live, q, size, span, 0, 0, seed++);
}

static void alloc(fz_input *in) {
  size_t size = fz_size(in, huge_left > 0), align = 1;
  if (size > MAX_HUGE) size = MAX_HUGE;
  if (size > FZ_MIB) huge_left--;
  if (live.n == FZ_MAX_LIVE) return;
  uint8_t how = fz_u8(in) % 4;
  if (how == 3 && live.n) {
    int i = (int)fz_below(in, (size_t)live.n);
    fz_block b = fz_drop(&live, i);
    fz_verify("before realloc", b.p, b.size, b.size, b.seed);
    uint8_t *q = brisk_realloc(b.p, size);
    size_t span = brisk_usable_size(q);
    fz_check_new("brisk_realloc", live.b, live.n, q, size, fz_malloc_align(size, 1), span);
    fz_verify("realloc kept", q, b.size, b.size < size ? b.size : size, b.seed);
    b.flags = 0;
    if (q != b.p) freed[freed_n < FREED_MAX ? freed_n++ : 0] = b;
    forget_freed(q, span);
    fz_add(&live, q, size, span, 0, 0, b.seed);
    return;
  }
  if (how == 2) align = (size_t)1 << (fz_u8(in) % 13);
  uint8_t *q = how == 1 ? brisk_calloc(1, size) : how == 2 ? brisk_aligned_alloc(align, size) : brisk_malloc(size);
  take(how == 1 ? "brisk_calloc" : "brisk_malloc", q, size, align, how == 1);
}

static void free_one(int i) {
  fz_block b = fz_drop(&live, i);
  fz_verify("before free", b.p, b.size, b.size, b.seed);
  brisk_free(b.p);
  b.flags = 0;
  freed[freed_n < FREED_MAX ? freed_n++ : (int)(seed % FREED_MAX)] = b;
}

/* A freed block whose second word (the secure library's keyed free mark)
 * was overwritten: nothing in the block tells it is free any more, so a
 * second free of it goes unseen (README, Security: what it does not do). */
#define MARK_HIT 1

/* Bytes of a freed block, its first 16 (the links) most often. */
static void corrupt(fz_input *in) {
  if (!freed_n) return;
  fz_block *b = &freed[fz_below(in, (size_t)freed_n)];
  size_t span = b->span < 16 || (fz_u8(in) & 1) ? b->span : 16;
  size_t at = fz_below(in, span), len = 1 + fz_u8(in) % 8;
  if (len > b->span - at) len = b->span - at;
  if (at < 16 && at + len > 8) b->flags |= MARK_HIT;
  poke(b->p + at, len, in);
}

/* Bytes before a live huge block, in its segment (a huge header), then free it. */
static void underflow(fz_input *in) {
  for (int i = 0; i < live.n; i++) {
    uintptr_t p = (uintptr_t)live.b[i].p, room = p & (4 * FZ_MIB - 1);
    if (live.b[i].size <= FZ_MIB || !room) continue;
    size_t back = 1 + fz_below(in, room < 4096 ? room : 4096), len = 1 + fz_u8(in) % 8;
    poke((uint8_t *)(p - back), len < back ? len : back, in);
    free_one(i);
    return;
  }
}

/* Misuse the secure library must stop: it returns only when brisk missed it. */
static void misuse(fz_input *in) {
#ifdef FZ_SECURE
  if (fz_u8(in) & 1) {
    for (int i = 0; i < freed_n; i++) {
      bool reused = false;
      for (int k = 0; k < live.n && !reused; k++) reused = overlaps(&live.b[k], freed[i].p, freed[i].span);
      /* Memory brisk gave back is foreign now, which free leaves alone (the
       * dynamic loader's blocks are freed so). */
      if (reused || !brisk_owns(freed[i].p) || (freed[i].flags & MARK_HIT)) continue;
      brisk_free(freed[i].p);
      FZ_FAIL("a double free of %p (%zu bytes) was not stopped", (void *)freed[i].p, freed[i].size);
    }
  } else if (live.n) {
    fz_block *b = &live.b[fz_below(in, (size_t)live.n)];
    if (b->size < 2) return;
    size_t at = 1 + fz_below(in, b->size - 1);
    brisk_free(b->p + at);
    FZ_FAIL("free(%p), %zu bytes into the live block %p, was not stopped", (void *)(b->p + at), at, (void *)b->p);
  }
#else
  (void)in; /* the release core does not promise to stop it */
#endif
}

static void child_program(fz_input *in) {
  huge_left = HUGE_PER_INPUT;
  while (fz_more(in)) {
    switch (fz_u8(in) % 10) {
    case 0:
    case 1:
    case 2: alloc(in); break;
    case 3:
    case 4:
      if (live.n) free_one((int)fz_below(in, (size_t)live.n));
      break;
    case 5:
    case 6: corrupt(in); break;
    case 7: underflow(in); break;
    case 8: misuse(in); break;
    default:
      for (int i = 0; i < live.n; i++)
        fz_verify("live block", live.b[i].p, live.b[i].size, live.b[i].size, live.b[i].seed);
      break;
    }
  }
  /* Pop what the freed blocks' lists hold: corrupted links come out here. */
  for (int i = 0; i < freed_n && i < 16; i++)
    for (int k = 0; k < 4 && live.n < FZ_MAX_LIVE; k++)
      take("brisk_malloc", brisk_malloc(freed[i].size), freed[i].size, 1, false);
  while (live.n) free_one(live.n - 1);
}

/* ---- The parent ------------------------------------------------------------ */

static char out[1 << 16];

static void run_child(const uint8_t *data, size_t size, int err_fd) {
  dup2(err_fd, 2);
  struct sigaction sa = {0};
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigaction(SIGSEGV, &sa, NULL);
  sigaction(SIGBUS, &sa, NULL);
  signal(SIGABRT, on_abort);
  signal(SIGALRM, SIG_DFL);
  __sanitizer_set_death_callback(on_sanitizer_death);
  alarm(CHILD_SECONDS);
  fz_input in = {data, size};
  child_program(&in);
  counters_out();
  _exit(0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC)) abort();
  memset(shared_counters, 0, counters_len);
  pid_t pid = fork();
  if (pid < 0) abort();
  if (pid == 0) run_child(data, size, fds[1]);
  close(fds[1]);
  size_t len = 0;
  ssize_t n;
  char sink[4096];
  while ((n = read(fds[0], len < sizeof out - 1 ? out + len : sink,
                   len < sizeof out - 1 ? sizeof out - 1 - len : sizeof sink)) > 0 ||
         (n < 0 && errno == EINTR))
    if (n > 0 && len < sizeof out - 1) len += (size_t)n;
  close(fds[0]);
  out[len] = '\0';
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) abort();
  counters_in();
  bool said = !strncmp(out, "brisk: ", 7) || strstr(out, "\nbrisk: ");
  bool sanitizer = strstr(out, "Sanitizer") || strstr(out, "runtime error") ||
      strstr(out, "internal check failed");
  if (WIFEXITED(status) && (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == EXIT_GUARD)) return 0;
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT && said && !sanitizer) return 0;
  fprintf(stderr, "%s\nfuzz: the child %s %d: a finding (the input ran in a child; its stderr is above)\n", out,
          WIFSIGNALED(status) ? "was killed by signal" : "exited with status",
          WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
  __builtin_trap();
}
