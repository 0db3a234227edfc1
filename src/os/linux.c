/* The OS layer on Linux: every system call brisk makes. */
#include "os/os.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* The kernel orders a range one thread gives up (munmap, mremap) before
 * another thread maps it again. ThreadSanitizer does not see that order
 * through mremap, so the sanitized build states it: giving address space up
 * releases, getting it acquires. */
#if defined(__SANITIZE_THREAD__)
#define BRISK_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define BRISK_TSAN 1
#endif
#endif
#ifdef BRISK_TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
static char address_space_order;
static void space_given_up(void) { __tsan_release(&address_space_order); }
static void space_taken(void) { __tsan_acquire(&address_space_order); }
#else
static void space_given_up(void) {}
static void space_taken(void) {}
#endif

/* Relaxed: counters for statistics, read without ordering. */
static _Atomic(uint64_t) os_calls[OS_CALL_KINDS];

static void count(enum os_call which) { atomic_fetch_add_explicit(&os_calls[which], 1, memory_order_relaxed); }

uint64_t _bk_os_call_count(enum os_call which) {
  return atomic_load_explicit(&os_calls[which], memory_order_relaxed);
}

void _bk_os_unmap(void *p, size_t size) {
  count(OS_MUNMAP);
  space_given_up();
  munmap(p, size);
}

/* Whether [p, p + size) lies below 2^OS_ADDRESS_BITS (os.h). */
static bool below_address_bound(const void *p, size_t size) {
  uintptr_t bound = (uintptr_t)1 << OS_ADDRESS_BITS;
  return (uintptr_t)p <= bound && size <= bound - (uintptr_t)p;
}

/* No MAP_NORESERVE: a request the kernel's overcommit policy refuses fails
 * here, as with glibc, instead of at first touch. Alignment comes from
 * mapping `align` bytes more and trimming the slack on both sides. */
void *_bk_os_map(size_t size, size_t align, size_t skew) {
  size_t over = align > OS_PAGE_SIZE ? align : 0;
  size_t span = size + over;
  if (span < size) return NULL;
  count(OS_MMAP);
  uint8_t *m = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return NULL;
  if (!below_address_bound(m, span)) { /* (a kernel that broke its rule) */
    _bk_os_unmap(m, span);
    return NULL;
  }
  space_taken();
  uint8_t *p = m;
  if (over) p = (uint8_t *)((((uintptr_t)m + skew + align - 1) & ~(uintptr_t)(align - 1)) - skew);
  if (p > m) _bk_os_unmap(m, (size_t)(p - m));
  if (m + span > p + size) _bk_os_unmap(p + size, (size_t)(m + span - (p + size)));
  return p;
}

/* PROT_NONE zones of RECORD_GUARD bytes around them (address space only):
 * a program's overflow or underflow out of a neighbouring mapping (a huge
 * block, or a segment, which the kernel often places right beside) faults
 * before it reaches brisk's records, also a write that lands a few MiB off.
 * Written 1 MiB below its first block, a program rewrote the checked
 * library's stack depot unnoticed. */
#define RECORD_GUARD ((size_t)4 << 20)

static size_t records_inner(size_t size) { return (size + OS_PAGE_SIZE - 1) & ~(OS_PAGE_SIZE - 1); }

void *_bk_os_map_records(size_t size) {
  size_t inner = records_inner(size);
  uint8_t *m = mmap(NULL, inner + 2 * RECORD_GUARD, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return NULL;
  if (mprotect(m + RECORD_GUARD, inner, PROT_READ | PROT_WRITE) != 0) {
    munmap(m, inner + 2 * RECORD_GUARD);
    return NULL;
  }
  return m + RECORD_GUARD;
}

void _bk_os_unmap_records(void *p, size_t size) {
  munmap((uint8_t *)p - RECORD_GUARD, records_inner(size) + 2 * RECORD_GUARD);
}

bool _bk_os_purge(void *p, size_t size) {
  uintptr_t start = ((uintptr_t)p + OS_PAGE_SIZE - 1) & ~(uintptr_t)(OS_PAGE_SIZE - 1);
  uintptr_t end = ((uintptr_t)p + size) & ~(uintptr_t)(OS_PAGE_SIZE - 1);
  if (end <= start) return true;
  count(OS_MADVISE);
  return madvise((void *)start, end - start, MADV_DONTNEED) == 0;
}

bool _bk_os_resize(void *p, size_t old_size, size_t new_size) {
  if (!below_address_bound(p, new_size)) return false;
  count(OS_MREMAP);
  if (new_size < old_size) space_given_up();
  if (mremap(p, old_size, new_size, 0) == MAP_FAILED) return false;
  if (new_size > old_size) space_taken();
  return true;
}

bool _bk_os_move(void *p, size_t old_size, void *target, size_t new_size) {
  if (!below_address_bound(target, new_size)) return false;
  count(OS_MREMAP);
  space_given_up();
  if (mremap(p, old_size, new_size, MREMAP_MAYMOVE | MREMAP_FIXED, target) == MAP_FAILED) return false;
  space_taken();
  return true;
}

void _bk_os_advise_huge(void *p, size_t size) {
  count(OS_MADVISE);
  madvise(p, size, MADV_HUGEPAGE);
}

bool _bk_os_guard(void *p, size_t size) { return mprotect(p, size, PROT_NONE) == 0; }
bool _bk_os_unguard(void *p, size_t size) { return mprotect(p, size, PROT_READ | PROT_WRITE) == 0; }

bool _bk_os_random(void *buf, size_t size) {
  uint8_t *out = buf;
  while (size > 0) {
    ssize_t n = getrandom(out, size, GRND_NONBLOCK);
    if (n <= 0) return false;
    out += n;
    size -= (size_t)n;
  }
  return true;
}

size_t _bk_os_readable(const void *p, size_t want) {
  uintptr_t a = (uintptr_t)p, page = a & ~(uintptr_t)(OS_PAGE_SIZE - 1);
  size_t readable = 0;
  unsigned char vec;
  while (readable < want) {
    if (mincore((void *)page, OS_PAGE_SIZE, &vec) != 0) break;
    page += OS_PAGE_SIZE;
    readable = page - a;
  }
  return readable < want ? readable : want;
}

/* A line of /proc/self/maps: "start-end perms offset dev inode path". */
static bool parse_mapping(const char *line, uintptr_t *start, uintptr_t *end, bool *writable) {
  char *rest;
  *start = (uintptr_t)strtoull(line, &rest, 16);
  if (*rest != '-') return false;
  *end = (uintptr_t)strtoull(rest + 1, &rest, 16);
  if (*rest != ' ' || strlen(rest) < 5) return false;
  *writable = rest[1] == 'r' && rest[2] == 'w' && rest[4] == 'p';
  return true;
}

bool _bk_os_each_writable_mapping(void (*fn)(uintptr_t start, uintptr_t end, void *arg), void *arg) {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[4096];
  size_t have = 0;
  bool ok = true;
  for (;;) {
    ssize_t got = read(fd, buf + have, sizeof buf - 1 - have);
    if (got < 0) ok = false;
    if (got <= 0) break;
    have += (size_t)got;
    buf[have] = 0;
    char *line = buf, *nl;
    while ((nl = strchr(line, '\n'))) {
      *nl = 0;
      uintptr_t start, end;
      bool writable;
      if (parse_mapping(line, &start, &end, &writable) && writable) fn(start, end, arg);
      line = nl + 1;
    }
    have = (size_t)(buf + have - line);
    memmove(buf, line, have);
    if (have == sizeof buf - 1) have = 0; /* (no line is this long: drop it) */
  }
  close(fd);
  return ok;
}

size_t _bk_os_read_memory(void *buf, const void *from, size_t len) {
  struct iovec local = {buf, len}, remote = {(void *)from, len};
  ssize_t got = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
  if (got >= 0) return (size_t)got;
  /* Without the call (seccomp, an old kernel): memcpy what mincore says is
   * mapped, which a concurrent unmap could still pull away. */
  size_t mapped = _bk_os_readable(from, len);
  memcpy(buf, from, mapped);
  return mapped;
}

bool _bk_os_resident(const void *p, size_t len, unsigned char *vec) { return mincore((void *)p, len, vec) == 0; }

size_t _bk_os_page;

/* Threads that race here store the same value. */
size_t _bk_os_page_init(void) {
  long page = sysconf(_SC_PAGESIZE);
  if (page <= 0 || (size_t)page > OS_PAGE_MAX || (page & (page - 1)))
    _bk_fatal("the OS page size is %ld bytes: brisk supports powers of two up to %zu", page, OS_PAGE_MAX);
  __atomic_store_n(&_bk_os_page, (size_t)page, __ATOMIC_RELAXED);
  return (size_t)page;
}

bool _bk_os_page_size_force(size_t size) {
  size_t real = (size_t)sysconf(_SC_PAGESIZE);
  if (size < real || size > OS_PAGE_MAX || (size & (size - 1)) || size % real) return false;
  __atomic_store_n(&_bk_os_page, size, __ATOMIC_RELAXED);
  return true;
}

size_t _bk_os_page_size(void) { return os_page_size(); }

uint64_t _bk_os_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void _bk_os_yield(void) { sched_yield(); }

void _bk_os_sleep_ms(unsigned ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

long _bk_os_process_id(void) { return (long)getpid(); }

bool _bk_os_write_all(int fd, const void *buf, size_t len) {
  for (size_t done = 0; done < len;) {
    ssize_t w = write(fd, (const char *)buf + done, len - done);
    if (w <= 0) return false;
    done += (size_t)w;
  }
  return true;
}

int _bk_os_create_file(const char *path) { return open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644); }

int _bk_os_dup(int fd) { return fcntl(fd, F_DUPFD_CLOEXEC, 3); }

void _bk_os_close(int fd) { close(fd); }

int _bk_os_append_file(const char *path) { return open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644); }

/* ---- Faults ------------------------------------------------------------- */

static void (*fault_report)(const void *addr);

/* SA_RESETHAND made the action the default again: the instruction that
 * faulted faults again on return, now fatal. A SIGSEGV sent by kill or
 * raise (si_code <= 0, and no address) is sent again, delivered once this
 * handler returns. */
static void on_fault(int sig, siginfo_t *info, void *context) {
  (void)context;
  if (info->si_code > 0) fault_report(info->si_addr);
  else raise(sig);
}

bool _bk_os_on_fault(void (*report)(const void *addr)) {
  struct sigaction old;
  if (sigaction(SIGSEGV, NULL, &old) != 0 || (old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL)
    return false;
  fault_report = report;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  return sigaction(SIGSEGV, &sa, NULL) == 0;
}

void _bk_os_exit(int status) { _exit(status); }

void _bk_os_abort(void) { abort(); }

/* Relaxed: the flag only elects one reporter; nothing is published by it. */
static _Atomic(int) failure_reported;
static __thread int failing_here BRISK_TLS;

void _bk_os_report_failure_begin(void) {
  if (failing_here) return;
  failing_here = 1;
  /* The reporting thread aborts the process. (Should a SIGABRT handler of
   * the program's carry on instead, a later failure reports after a while.) */
  if (atomic_exchange_explicit(&failure_reported, 1, memory_order_relaxed))
    for (int i = 0; i < 100; i++) _bk_os_sleep_ms(100);
}

static void vmessage(const char *prefix, const char *fmt, va_list ap) {
  char buf[1024];
  int n = snprintf(buf, sizeof buf, "brisk: %s", prefix);
  if (n < 0) n = 0;
  int m = vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
  size_t len = (size_t)n + (m > 0 ? (size_t)m : 0);
  if (len > sizeof buf - 2) len = sizeof buf - 2;
  buf[len++] = '\n';
  _bk_os_write_all(2, buf, len);
}

void _bk_warning(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vmessage("warning: ", fmt, ap);
  va_end(ap);
}

void _bk_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vmessage("error: ", fmt, ap);
  va_end(ap);
}

void _bk_fatal(const char *fmt, ...) {
  _bk_os_report_failure_begin();
  va_list ap;
  va_start(ap, fmt);
  vmessage("error: ", fmt, ap);
  va_end(ap);
  _bk_os_abort();
}
