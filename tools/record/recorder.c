/* The trace writer of libbrisk-record.so (docs/record.md): one file per
 * process, named by BRISK_RECORD (the process whose pid is
 * BRISK_RECORD_ROOT, the one brisk-run started) or BRISK_RECORD.<pid>
 * (every other process, forked or exec'd). Each thread encodes its events
 * into a buffer of its own and writes it as one chunk with one write(2):
 * when it is nearly full, when its oldest event is 100 ms old, when the
 * thread exits, and at process exit. A process killed by a signal leaves
 * every chunk written so far. Uses libc only, and never malloc. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "recorder.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define BUFFER_BYTES (64 * 1024)
/* Room left for the last event when a buffer is flushed. */
#define FLUSH_AT (BUFFER_BYTES - TRACE_CHUNK_HEADER - 2 * TRACE_EVENT_MAX)
#define FLUSH_NS 100000000ull

typedef struct rec_buffer {
  struct rec_buffer *next; /* in the registry of live threads, or the pool */
  /* Held by the owner while it appends and by the exit flush: the only
   * time another thread touches the buffer. */
  atomic_int lock;
  int closed; /* flushed at process exit: later events are written alone */
  uint32_t thread, events;
  uint64_t first_ns; /* time of the oldest event not yet written */
  trace_cursor cursor;
  uint8_t *end;
  uint8_t data[]; /* chunk header, then the payload */
} rec_buffer;

enum { OFF, UNSET, STARTING, RECORDING };
static atomic_int state = UNSET;
static int constructed; /* the environment is surely readable */
static int trace_fd = -1;
static uint64_t start_ns;
static atomic_uint_fast64_t next_seq;
static atomic_uint next_thread;
static pthread_key_t exit_key;
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static rec_buffer *registry, *pool;

static __thread rec_buffer *my_buffer __attribute__((tls_model("initial-exec")));
static __thread int my_busy __attribute__((tls_model("initial-exec")));
static __thread int my_saved_errno __attribute__((tls_model("initial-exec")));
static __thread int my_exit_rounds __attribute__((tls_model("initial-exec")));
/* Past its last destructor round: the thread's events go out alone. */
static __thread int my_done __attribute__((tls_model("initial-exec")));
static __thread uint32_t my_thread __attribute__((tls_model("initial-exec")));

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void write_all(const uint8_t *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(trace_fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return; /* disk full: the trace ends here */
    p += w;
    n -= (size_t)w;
  }
}

/* ---- the file ------------------------------------------------------------- */

static char *put_decimal(char *p, unsigned long v) {
  char digits[24];
  int n = 0;
  do digits[n++] = (char)('0' + v % 10);
  while (v /= 10);
  while (n) *p++ = digits[--n];
  return p;
}

/* A trace of that name exists: an earlier image of this process (it
 * exec'd this one). The name goes to the last image, the program a
 * wrapper (env, sh -c 'exec ...') starts: the earlier trace becomes
 * name.2 (.3, ...), or goes when it holds no call. */
static void move_aside(const char *name, size_t len) {
  uint8_t head[TRACE_HEADER_FIXED];
  struct stat st;
  int fd = open(name, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t got = read(fd, head, sizeof head);
  int empty = fstat(fd, &st) == 0 && got == (ssize_t)sizeof head &&
      st.st_size <= (off_t)(TRACE_HEADER_FIXED + (head[32] | head[33] << 8));
  close(fd);
  if (empty) {
    unlink(name);
    return;
  }
  char other[PATH_MAX];
  memcpy(other, name, len);
  for (unsigned k = 2; k < 100; k++) {
    *put_decimal(other + len + 1, k) = 0;
    other[len] = '.';
    if (link(name, other) == 0) {
      unlink(name);
      return;
    }
  }
}

/* Opens this process's trace: BRISK_RECORD for the root process, else
 * BRISK_RECORD.<pid>. Returns -1, with one line on stderr, when no file
 * can be made. */
static int open_trace(const char *base) {
  char name[PATH_MAX];
  size_t len = strlen(base);
  if (len + 40 > sizeof name) return -1;
  const char *root = getenv("BRISK_RECORD_ROOT");
  long pid = getpid();
  memcpy(name, base, len);
  char *end = name + len;
  if (!root || strtol(root, NULL, 10) != pid) {
    *end++ = '.';
    end = put_decimal(end, (unsigned long)pid);
  }
  *end = 0;
  for (int again = 0; again < 3; again++) {
    int fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
      /* Far from the low numbers a program or its shell redirects
       * (exec 3>file), which would send chunks into the program's files. */
      int high = fcntl(fd, F_DUPFD_CLOEXEC, 700);
      if (high >= 0) {
        close(fd);
        fd = high;
      }
      return fd;
    }
    if (errno != EEXIST) break;
    move_aside(name, (size_t)(end - name));
  }
  static const char msg[] = "brisk-record: cannot create the trace file; not recording\n";
  if (write(2, msg, sizeof msg - 1) < 0) { /* nothing more to say */
  }
  return -1;
}

/* The header: the command line as /proc/self/cmdline has it, spaces for
 * its NULs. */
static void write_header(void) {
  uint8_t header[TRACE_HEADER_FIXED + TRACE_PROGRAM_MAX];
  char program[TRACE_PROGRAM_MAX];
  ssize_t n = 0;
  int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    n = read(fd, program, sizeof program);
    close(fd);
  }
  if (n < 0) n = 0;
  while (n > 0 && program[n - 1] == 0) n--;
  for (ssize_t i = 0; i < n; i++)
    if (!program[i]) program[i] = ' ';
  start_ns = now_ns();
  size_t len = trace_file_header(header, (uint32_t)sysconf(_SC_PAGESIZE), (uint32_t)getpid(), (uint32_t)getppid(),
                                 start_ns, program, (size_t)n);
  write_all(header, len);
}

/* ---- buffers ------------------------------------------------------------- */

static void reset(rec_buffer *b) {
  b->events = 0;
  b->cursor = (trace_cursor){0, 0, 0};
  b->end = b->data + TRACE_CHUNK_HEADER;
}

static void flush(rec_buffer *b) {
  if (!b->events) return;
  uint32_t bytes = (uint32_t)(b->end - b->data - TRACE_CHUNK_HEADER);
  trace_chunk_header(b->data, b->thread, b->events, b->data + TRACE_CHUNK_HEADER, bytes);
  write_all(b->data, TRACE_CHUNK_HEADER + bytes);
  reset(b);
}

/* An event of a thread without a buffer, in a chunk of its own. */
static void write_alone(uint32_t thread, const trace_event *e) {
  uint8_t chunk[TRACE_CHUNK_HEADER + TRACE_EVENT_MAX];
  trace_cursor c = {0, 0, 0};
  uint8_t *end = trace_encode(chunk + TRACE_CHUNK_HEADER, &c, e);
  uint32_t bytes = (uint32_t)(end - chunk - TRACE_CHUNK_HEADER);
  trace_chunk_header(chunk, thread, 1, chunk + TRACE_CHUNK_HEADER, bytes);
  write_all(chunk, TRACE_CHUNK_HEADER + bytes);
}

static void lock_buffer(rec_buffer *b) {
  while (atomic_exchange_explicit(&b->lock, 1, memory_order_acquire)) sched_yield();
}
static void unlock_buffer(rec_buffer *b) { atomic_store_explicit(&b->lock, 0, memory_order_release); }

/* For the flushes of other threads' buffers: a buffer whose owner does not
 * let go within a few milliseconds (it called exit from a signal handler
 * in the middle of an event) is left as it is rather than waited for. */
static int try_lock_buffer(rec_buffer *b) {
  for (int i = 0; i < 2000; i++) {
    if (!atomic_exchange_explicit(&b->lock, 1, memory_order_acquire)) return 1;
    sched_yield();
  }
  return 0;
}

/* A buffer for this thread, from the pool or mapped; registered for the
 * exit flush, and with the key whose destructor flushes it at thread exit. */
static rec_buffer *thread_start(void) {
  pthread_mutex_lock(&registry_lock);
  rec_buffer *b = pool;
  if (b) pool = b->next;
  pthread_mutex_unlock(&registry_lock);
  if (!b) {
    b = mmap(NULL, BUFFER_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (b == MAP_FAILED) return NULL;
  }
  atomic_store(&b->lock, 0);
  b->closed = 0;
  b->thread = my_thread = atomic_fetch_add(&next_thread, 1);
  reset(b);
  pthread_mutex_lock(&registry_lock);
  b->next = registry;
  registry = b;
  pthread_mutex_unlock(&registry_lock);
  my_buffer = b;
  pthread_setspecific(exit_key, b);
  return b;
}

/* The key's destructor. Other destructors of the exiting thread may still
 * free, so the buffer stays for every round glibc makes; at the last one
 * it is written and goes back to the pool. */
static void thread_end(void *arg) {
  rec_buffer *b = arg;
  if (++my_exit_rounds < PTHREAD_DESTRUCTOR_ITERATIONS) {
    pthread_setspecific(exit_key, b);
    return;
  }
  my_busy = 1;
  lock_buffer(b);
  flush(b);
  unlock_buffer(b);
  pthread_mutex_lock(&registry_lock);
  for (rec_buffer **at = &registry; *at; at = &(*at)->next)
    if (*at == b) {
      *at = b->next;
      break;
    }
  if (!b->closed) {
    b->next = pool;
    pool = b;
  }
  pthread_mutex_unlock(&registry_lock);
  my_buffer = NULL;
  my_done = 1;
  my_busy = 0;
}

static void record(trace_event *e) {
  rec_buffer *b = my_buffer;
  if (!b && !my_done) b = thread_start();
  if (!b) {
    write_alone(my_thread, e);
    return;
  }
  lock_buffer(b);
  if (b->closed) {
    unlock_buffer(b);
    write_alone(b->thread, e);
    return;
  }
  if (!b->events) b->first_ns = e->time_ns;
  b->end = trace_encode(b->end, &b->cursor, e);
  b->events++;
  if (b->end - b->data >= FLUSH_AT || e->time_ns - b->first_ns >= FLUSH_NS) flush(b);
  unlock_buffer(b);
}

/* ---- start, fork, exit ---------------------------------------------------- */

static void fork_prepare(void) { pthread_mutex_lock(&registry_lock); }
static void fork_parent(void) { pthread_mutex_unlock(&registry_lock); }

/* The child's events go to a file of its own, from sequence number 0; the
 * buffers of the parent's threads (copies of the parent's, which it
 * writes) become free buffers, and this thread starts afresh. */
static void fork_child(void) {
  pthread_mutex_init(&registry_lock, NULL);
  rec_buffer *b = registry;
  while (b) {
    rec_buffer *next = b->next;
    b->next = pool;
    pool = b;
    b = next;
  }
  registry = NULL;
  my_buffer = NULL;
  close(trace_fd);
  const char *base = getenv("BRISK_RECORD");
  trace_fd = base ? open_trace(base) : -1;
  if (trace_fd < 0) {
    atomic_store(&state, OFF);
    return;
  }
  atomic_store(&next_seq, 0);
  atomic_store(&next_thread, 0);
  write_header();
}

/* Runs at the first call of the malloc family (ld.so and libc allocate
 * before any constructor) and again from the constructor. Until the
 * constructor has run, a missing BRISK_RECORD may only mean the
 * environment is not set up yet: the decision waits. */
static void start(void) {
  int expected = UNSET;
  if (!atomic_compare_exchange_strong(&state, &expected, STARTING)) return;
  const char *base = getenv("BRISK_RECORD");
  if (!base || !*base) {
    atomic_store(&state, constructed ? OFF : UNSET);
    return;
  }
  trace_fd = open_trace(base);
  if (trace_fd < 0) {
    atomic_store(&state, OFF);
    return;
  }
  write_header();
  pthread_key_create(&exit_key, thread_end);
  pthread_atfork(fork_prepare, fork_parent, fork_child);
  atomic_store(&state, RECORDING);
}

__attribute__((constructor)) static void recorder_init(void) {
  constructed = 1;
  my_busy++;
  start();
  my_busy--;
}

/* Every thread's buffer is written. At exit (closing) the threads still
 * running go on writing each event alone until the process is gone. */
static void flush_all(int closing) {
  if (atomic_load(&state) != RECORDING) return;
  my_busy++;
  pthread_mutex_lock(&registry_lock);
  for (rec_buffer *b = registry; b; b = b->next) {
    if (!try_lock_buffer(b)) continue;
    flush(b);
    b->closed = closing;
    unlock_buffer(b);
  }
  pthread_mutex_unlock(&registry_lock);
  my_busy--;
}

__attribute__((destructor)) static void recorder_fini(void) { flush_all(1); }

/* A process that ends with _exit (a forked child, most often) runs no
 * destructor: its buffers are written here. */
REC_EXPORT void _exit(int status) {
  flush_all(1);
  for (;;) syscall(SYS_exit_group, status);
}
REC_EXPORT void _Exit(int status) { _exit(status); }

/* exec replaces the process without a destructor: what it recorded is
 * written first (the new image, recorded too, writes a trace of its own).
 * glibc's execl* and posix_spawn reach execve inside libc, unseen. */
static void *real(const char *name) {
  my_busy++;
  void *fn = dlsym(RTLD_NEXT, name);
  my_busy--;
  return fn;
}
REC_EXPORT int execve(const char *path, char *const argv[], char *const envp[]) {
  flush_all(0);
  return ((int (*)(const char *, char *const[], char *const[]))real("execve"))(path, argv, envp);
}
REC_EXPORT int execv(const char *path, char *const argv[]) {
  flush_all(0);
  return ((int (*)(const char *, char *const[]))real("execv"))(path, argv);
}
REC_EXPORT int execvp(const char *file, char *const argv[]) {
  flush_all(0);
  return ((int (*)(const char *, char *const[]))real("execvp"))(file, argv);
}
REC_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[]) {
  flush_all(0);
  return ((int (*)(const char *, char *const[], char *const[]))real("execvpe"))(file, argv, envp);
}

/* ---- what the hooks call --------------------------------------------------- */

int rec_enter(void) {
  if (my_busy) return 0;
  int s = atomic_load_explicit(&state, memory_order_acquire);
  if (s != RECORDING) {
    if (s != UNSET) return 0;
    my_busy = 1;
    start();
    my_busy = 0;
    if (atomic_load(&state) != RECORDING) return 0;
  }
  my_busy = 1;
  return 1;
}

void rec_leave(void) {
  errno = my_saved_errno;
  my_busy = 0;
}

uint64_t rec_seq(void) { return atomic_fetch_add_explicit(&next_seq, 1, memory_order_relaxed); }

static void event(trace_event *e) {
  my_saved_errno = errno;
  e->time_ns = now_ns() - start_ns;
  record(e);
}

void rec_alloc(unsigned kind, unsigned flags, size_t size, uint64_t aux, void *p) {
  trace_event e = {.kind = (uint8_t)kind, .flags = (uint8_t)flags, .size = size, .aux = aux, .addr = (uintptr_t)p};
  e.seq = rec_seq();
  event(&e);
}

void rec_release(unsigned kind, unsigned flags, void *p, size_t size, uint64_t aux) {
  trace_event e = {.kind = (uint8_t)kind, .flags = (uint8_t)flags, .size = size, .aux = aux, .addr = (uintptr_t)p};
  e.seq = rec_seq();
  event(&e);
}

void rec_realloc(unsigned kind, void *old, size_t nmemb, size_t size, void *result, uint64_t seq_before) {
  trace_event e = {.kind = (uint8_t)kind,
                   .size = size,
                   .aux = nmemb,
                   .addr = (uintptr_t)old,
                   .addr2 = (uintptr_t)result,
                   .seq_before = seq_before};
  e.seq = rec_seq();
  event(&e);
}
