//! Raw bindings to [brisk](https://crates.io/crates/brisk)'s C API,
//! `include/brisk.h`: the prefixed malloc family, explicit heaps,
//! fixed-size pools, statistics, options and heap checks.
//!
//! The build script compiles brisk's C core from the repository's `src/`
//! (or the copy a packaged crate carries) with the `cc` crate: no CMake and
//! no installed library are needed. It leaves out brisk's override of the
//! system `malloc` and of C++ `new`/`delete`: linking this crate changes
//! nothing for code that calls `malloc`, nor for Rust's `System` allocator.
//! brisk serves exactly what is allocated through these functions, for
//! example by the `brisk` crate's `GlobalAlloc`.
//!
//! Features: `checked` builds the checked library (misuse aborts with a
//! message; the usable size of a block is the size asked), `secure` the
//! hardened one. `checked` has the protections of `secure` too.
//! `dynamic-tls` compiles the core with the global-dynamic TLS model, for a
//! `cdylib` (a Python extension, say) that is loaded with `dlopen` after its
//! process started.
//!
//! Every function is documented in `brisk.h`; the comments here are short.
#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_int, c_longlong, c_void};

/// The version of the C library these bindings were built from.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Which library the features selected: `"release"`, `"checked"` or
/// `"secure"`.
pub const VARIANT: &str = if cfg!(feature = "checked") {
    "checked"
} else if cfg!(feature = "secure") {
    "secure"
} else {
    "release"
};

/// `true` when the checked library is linked: a block's usable size is then
/// exactly the size asked.
pub const CHECKED: bool = cfg!(feature = "checked");

/// The TLS model the C core was compiled with: `"global-dynamic"` with the
/// `dynamic-tls` feature (for a library loaded late with `dlopen`),
/// `"initial-exec"` otherwise.
pub const TLS_MODEL: &str = if cfg!(feature = "dynamic-tls") {
    "global-dynamic"
} else {
    "initial-exec"
};

/// Blocks of this many bytes or more from `brisk_malloc` are aligned to it.
pub const BLOCK_ALIGN: usize = 16;

/// An explicit heap (`brisk_heap_new`).
#[repr(C)]
pub struct brisk_heap_t {
    _private: [u8; 0],
}

/// A fixed-size object pool (`brisk_pool_new`).
#[repr(C)]
pub struct brisk_pool_t {
    _private: [u8; 0],
}

/// `brisk_pool_stats`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct brisk_pool_stats_t {
    pub object_size: usize,
    pub alignment: usize,
    pub max_objects: usize,
    pub live_objects: usize,
    pub capacity: usize,
    pub bytes_held: usize,
    pub allocs: u64,
    pub frees: u64,
    pub exhausted: u64,
}

pub const BRISK_STATS_VERSION: u32 = 2;
pub const BRISK_STATS_MAX_CLASSES: usize = 64;

pub const BRISK_TIER_SMALL: usize = 0;
pub const BRISK_TIER_MEDIUM: usize = 1;
pub const BRISK_TIER_LARGE: usize = 2;
pub const BRISK_TIER_HUGE: usize = 3;
pub const BRISK_TIER_COUNT: usize = 4;

/// One tier's figures in `brisk_stats_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct brisk_tier_stats_t {
    pub live_blocks: u64,
    pub in_use: usize,
    pub committed: usize,
    pub reserved: usize,
}

/// `brisk_stats_get`'s snapshot; set `version` to `BRISK_STATS_VERSION`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct brisk_stats_t {
    pub version: u32,
    pub class_count: u32,
    pub requested: u64,
    pub in_use: usize,
    pub committed: usize,
    pub reserved: usize,
    pub cached: usize,
    pub peak_reserved: usize,
    pub mapped: usize,
    pub tiers: [brisk_tier_stats_t; BRISK_TIER_COUNT],
    pub class_size: [usize; BRISK_STATS_MAX_CLASSES],
    pub class_live_blocks: [u64; BRISK_STATS_MAX_CLASSES],
    pub mmap_calls: u64,
    pub munmap_calls: u64,
    pub madvise_calls: u64,
    pub mremap_calls: u64,
    pub cache_hits: u64,
    pub cache_misses: u64,
    pub thread_heaps: u32,
    pub explicit_heaps: u32,
    pub abandoned_segments: u32,
    pub abandoned_bytes: usize,
    pub threads_exited: u64,
    pub thread_cached: usize,
}

impl Default for brisk_stats_t {
    fn default() -> Self {
        brisk_stats_t {
            version: BRISK_STATS_VERSION,
            class_count: 0,
            requested: 0,
            in_use: 0,
            committed: 0,
            reserved: 0,
            cached: 0,
            peak_reserved: 0,
            mapped: 0,
            tiers: [brisk_tier_stats_t::default(); BRISK_TIER_COUNT],
            class_size: [0; BRISK_STATS_MAX_CLASSES],
            class_live_blocks: [0; BRISK_STATS_MAX_CLASSES],
            mmap_calls: 0,
            munmap_calls: 0,
            madvise_calls: 0,
            mremap_calls: 0,
            cache_hits: 0,
            cache_misses: 0,
            thread_heaps: 0,
            explicit_heaps: 0,
            abandoned_segments: 0,
            abandoned_bytes: 0,
            threads_exited: 0,
            thread_cached: 0,
        }
    }
}

/// `enum brisk_option` (`brisk_option_t`).
pub type brisk_option_t = c_int;
pub const BRISK_OPTION_SHOW_STATS: brisk_option_t = 0;
pub const BRISK_OPTION_VERBOSE: brisk_option_t = 1;
pub const BRISK_OPTION_PURGE_DELAY_MS: brisk_option_t = 2;
pub const BRISK_OPTION_MAX_BYTES: brisk_option_t = 3;
pub const BRISK_OPTION_CACHE_CAP: brisk_option_t = 4;
pub const BRISK_OPTION_HUGEPAGES: brisk_option_t = 5;
pub const BRISK_OPTION_RESERVE: brisk_option_t = 6;
pub const BRISK_OPTION_REALTIME: brisk_option_t = 7;
pub const BRISK_OPTION_LEAK_REPORT: brisk_option_t = 8;
pub const BRISK_OPTION_BACKGROUND_PURGE: brisk_option_t = 9;
pub const BRISK_OPTION_COUNT: brisk_option_t = 10;

/// `enum brisk_check_error`.
pub const BRISK_CHECK_OK: c_int = 0;
pub const BRISK_CHECK_CHUNK_MAP: c_int = 1;
pub const BRISK_CHECK_SEGMENT: c_int = 2;
pub const BRISK_CHECK_PAGE: c_int = 3;
pub const BRISK_CHECK_FREE_LIST: c_int = 4;
pub const BRISK_CHECK_CACHE: c_int = 5;

/// `brisk_block_visitor`: called with a live block, its size and `arg`;
/// nonzero stops the visit.
pub type brisk_block_visitor =
    Option<unsafe extern "C" fn(block: *mut c_void, size: usize, arg: *mut c_void) -> c_int>;

extern "C" {
    pub fn brisk_version() -> *const c_char;

    pub fn brisk_malloc(size: usize) -> *mut c_void;
    pub fn brisk_calloc(count: usize, size: usize) -> *mut c_void;
    pub fn brisk_realloc(ptr: *mut c_void, size: usize) -> *mut c_void;
    pub fn brisk_reallocarray(ptr: *mut c_void, count: usize, size: usize) -> *mut c_void;
    pub fn brisk_free(ptr: *mut c_void);
    pub fn brisk_free_sized(ptr: *mut c_void, size: usize);
    pub fn brisk_aligned_alloc(alignment: usize, size: usize) -> *mut c_void;
    /// realloc to a block aligned to `alignment` (alignment before size, as
    /// in `brisk_aligned_alloc`).
    pub fn brisk_realloc_aligned(ptr: *mut c_void, alignment: usize, size: usize) -> *mut c_void;
    /// Zeroed and aligned; the order of mimalloc's `mi_calloc_aligned`.
    pub fn brisk_calloc_aligned(count: usize, size: usize, alignment: usize) -> *mut c_void;
    pub fn brisk_posix_memalign(out: *mut *mut c_void, alignment: usize, size: usize) -> c_int;
    pub fn brisk_memalign(alignment: usize, size: usize) -> *mut c_void;
    pub fn brisk_usable_size(ptr: *const c_void) -> usize;

    pub fn brisk_set_max_bytes(max_bytes: usize);
    pub fn brisk_get_max_bytes() -> usize;
    pub fn brisk_collect();
    pub fn brisk_owns(ptr: *const c_void) -> c_int;
    pub fn brisk_mapped_bytes() -> usize;

    pub fn brisk_heap_new() -> *mut brisk_heap_t;
    pub fn brisk_heap_destroy(heap: *mut brisk_heap_t);
    pub fn brisk_heap_reset(heap: *mut brisk_heap_t);
    pub fn brisk_heap_set_max_bytes(heap: *mut brisk_heap_t, max_bytes: usize);
    pub fn brisk_heap_held_bytes(heap: *const brisk_heap_t) -> usize;
    pub fn brisk_heap_malloc(heap: *mut brisk_heap_t, size: usize) -> *mut c_void;
    pub fn brisk_heap_calloc(heap: *mut brisk_heap_t, count: usize, size: usize) -> *mut c_void;
    pub fn brisk_heap_realloc(
        heap: *mut brisk_heap_t,
        ptr: *mut c_void,
        size: usize,
    ) -> *mut c_void;
    pub fn brisk_heap_aligned_alloc(
        heap: *mut brisk_heap_t,
        alignment: usize,
        size: usize,
    ) -> *mut c_void;
    pub fn brisk_heap_calloc_aligned(
        heap: *mut brisk_heap_t,
        count: usize,
        size: usize,
        alignment: usize,
    ) -> *mut c_void;
    pub fn brisk_heap_realloc_aligned(
        heap: *mut brisk_heap_t,
        ptr: *mut c_void,
        alignment: usize,
        size: usize,
    ) -> *mut c_void;

    pub fn brisk_pool_new(
        object_size: usize,
        alignment: usize,
        max_objects: usize,
    ) -> *mut brisk_pool_t;
    pub fn brisk_pool_destroy(pool: *mut brisk_pool_t);
    pub fn brisk_pool_alloc(pool: *mut brisk_pool_t) -> *mut c_void;
    pub fn brisk_pool_free(pool: *mut brisk_pool_t, object: *mut c_void);
    pub fn brisk_pool_stats(pool: *const brisk_pool_t, out: *mut brisk_pool_stats_t) -> c_int;

    pub fn brisk_stats_get(stats: *mut brisk_stats_t) -> c_int;
    /// `out` is a C `FILE *`; NULL prints on stderr.
    pub fn brisk_stats_print(out: *mut c_void);
    pub fn brisk_stats_json(buf: *mut c_char, len: usize) -> usize;

    pub fn brisk_option_set(option: brisk_option_t, value: c_longlong) -> c_int;
    pub fn brisk_option_get(option: brisk_option_t) -> c_longlong;
    pub fn brisk_option_name(option: brisk_option_t) -> *const c_char;
    pub fn brisk_set_realtime(on: c_int);

    pub fn brisk_check_heap() -> c_int;
    pub fn brisk_check_message() -> *const c_char;
    pub fn brisk_visit_blocks(visit: brisk_block_visitor, arg: *mut c_void);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    #[test]
    fn the_c_library_is_this_crates_version() {
        // SAFETY: brisk_version returns a static NUL-terminated string.
        let v = unsafe { CStr::from_ptr(brisk_version()) };
        assert_eq!(v.to_str().unwrap(), VERSION);
    }

    #[test]
    fn stats_layout_matches_the_c_struct() {
        // A struct of the wrong size would make brisk_stats_get write past
        // it; the C library checks only the version field.
        let mut st = brisk_stats_t::default();
        // SAFETY: st is a valid, writable brisk_stats_t with its version set.
        assert_eq!(unsafe { brisk_stats_get(&mut st) }, 0);
        assert!(st.class_count as usize <= BRISK_STATS_MAX_CLASSES && st.class_count > 0);
        // Class sizes grow strictly, beginning with 16 bytes: the arrays
        // sit where the C struct has them.
        assert_eq!(st.class_size[0] % 16, 0);
        let sizes = &st.class_size[..st.class_count as usize];
        assert!(sizes.windows(2).all(|w| w[0] < w[1]), "{:?}", sizes);
        // The fields after the arrays: a live huge block and this thread's
        // heap are counted.
        // SAFETY: a plain allocation, freed below.
        let p = unsafe { brisk_malloc(3 << 20) };
        assert!(!p.is_null());
        // SAFETY: as above.
        assert_eq!(unsafe { brisk_stats_get(&mut st) }, 0);
        assert!(st.tiers[BRISK_TIER_HUGE].live_blocks >= 1);
        assert!(st.tiers[BRISK_TIER_HUGE].in_use >= 3 << 20);
        assert!(st.mapped >= 3 << 20 && st.thread_heaps >= 1 && st.mmap_calls >= 1);
        // SAFETY: p came from brisk_malloc and is freed once.
        unsafe { brisk_free(p) };
    }

    #[test]
    fn option_names_match_the_enum() {
        let names = [
            (BRISK_OPTION_SHOW_STATS, "BRISK_SHOW_STATS"),
            (BRISK_OPTION_VERBOSE, "BRISK_VERBOSE"),
            (BRISK_OPTION_PURGE_DELAY_MS, "BRISK_PURGE_DELAY_MS"),
            (BRISK_OPTION_MAX_BYTES, "BRISK_MAX_BYTES"),
            (BRISK_OPTION_CACHE_CAP, "BRISK_CACHE_CAP"),
            (BRISK_OPTION_HUGEPAGES, "BRISK_HUGEPAGES"),
            (BRISK_OPTION_RESERVE, "BRISK_RESERVE"),
            (BRISK_OPTION_REALTIME, "BRISK_REALTIME"),
            (BRISK_OPTION_LEAK_REPORT, "BRISK_LEAK_REPORT"),
            (BRISK_OPTION_BACKGROUND_PURGE, "BRISK_BACKGROUND_PURGE"),
        ];
        for (opt, name) in names {
            // SAFETY: a valid option gives a static NUL-terminated name.
            let got = unsafe { CStr::from_ptr(brisk_option_name(opt)) };
            assert_eq!(got.to_str().unwrap(), name);
        }
    }
}
