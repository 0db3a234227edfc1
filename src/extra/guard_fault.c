/* The secure and checked libraries' guard pages (core/secure.h) stop a
 * linear overflow or underflow with a fault: this names it, as their checks
 * name other misuse, before the fault takes its default action (the process
 * still ends with SIGSEGV). Installed at start, only where the program left
 * SIGSEGV at its default; a handler the program installs later replaces
 * it. The release library has no guard pages and installs nothing. */
#include "extra/extra.h"

/* 0 leaves SIGSEGV alone (the Rust crate: its runtime reports a stack
 * overflow through a handler it installs only where SIGSEGV is still at
 * its default, after brisk's constructor has run). */
#ifndef BRISK_GUARD_FAULT_HANDLER
#define BRISK_GUARD_FAULT_HANDLER 1
#endif

#if BRISK_SECURE && BRISK_GUARD_FAULT_HANDLER

/* Names the fault when addr lies in a guard page of one of brisk's
 * mappings (after a segment's header, or at the end of its mapping). */
static bool report_guard(const void *addr) {
  segment_t *seg = segment_of(addr);
  if (!seg) return false;
  uintptr_t a = (uintptr_t)addr, s = (uintptr_t)seg;
  uintptr_t header_guard = s + segment_header_guard_offset();
  uintptr_t end_guard = s + PEEK(seg->mapped_size) - guard_size();
  bool huge = PEEK(seg->kind) == SEG_HUGE;
  void *block = (void *)(s + PEEK(seg->block_offset));
  if (a >= header_guard && a < header_guard + guard_size()) {
    if (huge)
      _bk_error("heap buffer underflow: an access at %p, %zu bytes before the huge block at %p, hit the guard "
                "page before it",
                addr, (size_t)((uintptr_t)block - a), block);
    else
      _bk_error("heap buffer underflow: an access at %p, %zu bytes before the first block of the segment at %p, "
                "hit the guard page before it",
                addr, (size_t)(s + segment_data_offset(false) - a), (void *)s);
    return true;
  }
  if (a >= end_guard && a < end_guard + guard_size()) {
    if (huge)
      _bk_error("heap buffer overflow: an access at %p, %zu bytes past the start of the huge block at %p, hit "
                "the guard page after its mapping",
                addr, (size_t)(a - (uintptr_t)block), block);
    else
      _bk_error("heap buffer overflow: an access at %p hit the guard page at the end of the segment at %p, after "
                "its last block",
                addr, (void *)s);
    return true;
  }
  return false;
}

static void report(const void *addr) {
  if (!report_guard(addr)) return;
#if BRISK_CHECKED
  uintptr_t pc[STACK_MAX];
  _bk_stack_print(2, "detected at (from brisk's signal handler)", pc,
                  _bk_stack_capture(STACK_HERE(), pc, STACK_MAX));
#endif
}

void _bk_guard_faults_install(void) { _bk_os_on_fault(report); }

#else

void _bk_guard_faults_install(void) {}

#endif
