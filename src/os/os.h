/* The OS layer: everything brisk asks of the kernel, and nothing else.
 *
 * One file implements it per OS (linux.c). Every call reports failure to
 * its caller and never acts on it: what to release and retry when memory
 * runs out is decided by the layer that owns the memory (core). Nothing
 * here reads brisk's options or knows what a segment is. */
#ifndef BRISK_OS_H
#define BRISK_OS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BRISK_INTERNAL __attribute__((visibility("hidden")))

/* The TLS model of every thread-local variable of brisk's (BRISK_TLS).
 * initial-exec, the default, makes the fast path's heap lookup one load,
 * with no call into the dynamic loader. But a library built so must sit in
 * the static TLS block the loader sizes at start: loaded later with dlopen
 * (a Rust cdylib, a Python extension) it may fail with "cannot allocate
 * memory in static TLS block". Such a build takes a dynamic model
 * (-DBRISK_TLS_MODEL=global-dynamic with -ftls-model=global-dynamic, which
 * CMake's BRISK_TLS_MODEL and brisk-sys's dynamic-tls feature set) and pays
 * a call to __tls_get_addr per access. A build that replaces malloc keeps
 * initial-exec: glibc allocates a late-loaded library's TLS with malloc at
 * a thread's first access, which would come back into brisk. */
#ifndef BRISK_TLS_MODEL
#define BRISK_TLS_MODEL initial - exec
#endif
#define BRISK_STRINGIFY_(x) #x
#define BRISK_STRINGIFY(x) BRISK_STRINGIFY_(x)
#define BRISK_TLS __attribute__((tls_model(BRISK_STRINGIFY(BRISK_TLS_MODEL))))

/* The OS page size, read from the kernel (sysconf) the first time anything
 * asks, before brisk maps memory; never assumed. The core's geometry holds
 * for pages of 4 KiB up to OS_PAGE_MAX (its small pages are 64 KiB): brisk
 * refuses to start on a bigger one. */
#define OS_PAGE_MAX ((size_t)64 * 1024)
BRISK_INTERNAL extern size_t _bk_os_page;
BRISK_INTERNAL size_t _bk_os_page_init(void);
static inline size_t os_page_size(void) {
  size_t page = __atomic_load_n(&_bk_os_page, __ATOMIC_RELAXED);
  return __builtin_expect(page != 0, 1) ? page : _bk_os_page_init();
}
#define OS_PAGE_SIZE os_page_size()
/* For tests only: brisk works in pages of `size` bytes (a power of two, a
 * multiple of the real page, at most OS_PAGE_MAX) from now on. Called
 * before brisk maps anything, it lets a machine with 4 KiB pages run the
 * code as on one with 16 or 64 KiB pages. Hidden: not in libbrisk.so's
 * exports, local in the archives; tests link the objects. */
BRISK_INTERNAL bool _bk_os_page_size_force(size_t size);

/* ---- Address space ------------------------------------------------------ */

/* Every address brisk maps is below 2^OS_ADDRESS_BITS. Linux hands out
 * addresses above 2^47 on x86-64 (5-level paging) and above 2^48 on arm64
 * (52-bit VA) only to an mmap whose hint lies above, and brisk passes none;
 * _bk_os_map refuses a mapping past it all the same. One bit fewer on
 * x86-64 halves the chunk map (types.h), address space that counts against
 * RLIMIT_AS. */
#if defined(__x86_64__)
#define OS_ADDRESS_BITS 47
#else
#define OS_ADDRESS_BITS 48
#endif

/* Maps `size` bytes (a multiple of the OS page), readable and writable, at
 * an address p such that p + skew is a multiple of align (align and skew
 * multiples of the OS page, skew < align; align <= OS_PAGE_SIZE means any
 * page), below 2^OS_ADDRESS_BITS. NULL when the kernel refuses. */
BRISK_INTERNAL void *_bk_os_map(size_t size, size_t align, size_t skew);
BRISK_INTERNAL void _bk_os_unmap(void *p, size_t size);
/* Memory for brisk's own records (heap structs, the checked library's
 * stacks), between two PROT_NONE zones of a few MiB, kept for the life of the process
 * (_bk_os_unmap_records only undoes a map that lost a race) and left out
 * of the call counts, which count what the allocator does for the
 * program's blocks. */
BRISK_INTERNAL void *_bk_os_map_records(size_t size);
BRISK_INTERNAL void _bk_os_unmap_records(void *p, size_t size);
/* Gives the pages in [p, p + size) back; they read as zero afterwards.
 * Only whole pages inside the range are given back. False when the kernel
 * refused (locked pages): the contents are then unchanged. */
BRISK_INTERNAL bool _bk_os_purge(void *p, size_t size);
/* Grows or shrinks a mapping in place (false, unchanged, past
 * 2^OS_ADDRESS_BITS). */
BRISK_INTERNAL bool _bk_os_resize(void *p, size_t old_size, size_t new_size);
/* Moves a mapping's pages onto target (a mapping of new_size that the move
 * replaces): no byte is copied. */
BRISK_INTERNAL bool _bk_os_move(void *p, size_t old_size, void *target, size_t new_size);
/* Asks for transparent huge pages in the range. */
BRISK_INTERNAL void _bk_os_advise_huge(void *p, size_t size);
/* Makes [p, p + size) inaccessible (guard pages); false when refused. */
BRISK_INTERNAL bool _bk_os_guard(void *p, size_t size);
/* Makes guard pages in [p, p + size) readable and writable again. */
BRISK_INTERNAL bool _bk_os_unguard(void *p, size_t size);
/* size bytes from the kernel's random source; false when it has none. */
BRISK_INTERNAL bool _bk_os_random(void *buf, size_t size);
/* How many bytes from p, up to want, are mapped. */
BRISK_INTERNAL size_t _bk_os_readable(const void *p, size_t want);
BRISK_INTERNAL size_t _bk_os_page_size(void);

/* ---- Reading the process's own memory (the leak report) ------------------ */

/* Calls fn for each private mapping of the process that is readable and
 * writable, in address order (/proc/self/maps); false when the list could
 * not be read. */
BRISK_INTERNAL bool _bk_os_each_writable_mapping(void (*fn)(uintptr_t start, uintptr_t end, void *arg), void *arg);
/* Copies up to len bytes at from into buf, stopping at the first byte that
 * is not mapped (another thread may unmap memory meanwhile): the count
 * copied. */
BRISK_INTERNAL size_t _bk_os_read_memory(void *buf, const void *from, size_t len);
/* One byte per OS page of [p, p + len) in vec, bit 0 set where the page is
 * resident (mincore); false when the range is not all mapped. */
BRISK_INTERNAL bool _bk_os_resident(const void *p, size_t len, unsigned char *vec);

enum os_call { OS_MMAP, OS_MUNMAP, OS_MADVISE, OS_MREMAP, OS_CALL_KINDS };
/* Calls made so far, of each kind (for statistics). */
BRISK_INTERNAL uint64_t _bk_os_call_count(enum os_call which);

/* ---- Time and threads --------------------------------------------------- */

/* A coarse monotonic clock (a few ms resolution, no system call on Linux). */
BRISK_INTERNAL uint64_t _bk_os_now_ms(void);
/* The milliseconds from `then` to `now`, 0 when `then` is later: a stamp
 * another thread wrote may come from a clock read after this thread read
 * `now` (subtracted unsigned, that made an age of 584 million years, and a
 * purge pass purged at once a segment another thread had just cached). */
static inline uint64_t ms_since(uint64_t now, uint64_t then) { return now > then ? now - then : 0; }
BRISK_INTERNAL void _bk_os_yield(void);
BRISK_INTERNAL void _bk_os_sleep_ms(unsigned ms);
BRISK_INTERNAL long _bk_os_process_id(void);

/* ---- Files and messages ------------------------------------------------- */

/* Writes all of buf (retrying short writes); false on an error. */
BRISK_INTERNAL bool _bk_os_write_all(int fd, const void *buf, size_t len);
/* Creates or truncates path for writing (close-on-exec); -1 on failure. */
BRISK_INTERNAL int _bk_os_create_file(const char *path);
/* A close-on-exec copy of fd numbered 3 or above; -1 on failure. */
BRISK_INTERNAL int _bk_os_dup(int fd);
BRISK_INTERNAL void _bk_os_close(int fd);
/* Opens path for appending (created if missing, close-on-exec); -1 on failure. */
BRISK_INTERNAL int _bk_os_append_file(const char *path);
/* Calls report with the address of a SIGSEGV, then lets the fault take
 * its default action (the process ends as it would have). Installed only
 * when the program left SIGSEGV at its default, and for one fault: a
 * handler the program installs later replaces it. False when not
 * installed. */
BRISK_INTERNAL bool _bk_os_on_fault(void (*report)(const void *addr));

/* Ends the process at once with status (no more atexit handlers). */
BRISK_INTERNAL _Noreturn void _bk_os_exit(int status);
/* Ends the process with SIGABRT, as a failed check does. */
BRISK_INTERNAL _Noreturn void _bk_os_abort(void);
/* Called by a failed check before its report: the first thread to fail
 * writes its report and aborts; any other thread that fails meanwhile
 * waits here (up to 10 s) for the abort, so that reports do not
 * interleave. A thread that fails again inside its own report goes on. */
BRISK_INTERNAL void _bk_os_report_failure_begin(void);

/* One line "brisk: warning: ..." / "brisk: error: ..." on stderr, written
 * without stdio and without allocating; fatal then aborts. */
BRISK_INTERNAL void _bk_warning(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
BRISK_INTERNAL void _bk_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
BRISK_INTERNAL _Noreturn void _bk_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
