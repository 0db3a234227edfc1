//! brisk, a fast general-purpose memory allocator, for Rust.
//!
//! [`Brisk`] is a zero-sized [`GlobalAlloc`](core::alloc::GlobalAlloc):
//!
//! ```
//! #[global_allocator]
//! static GLOBAL: brisk::Brisk = brisk::Brisk;
//!
//! fn main() {
//!     let before = brisk::stats().requested();
//!     let words: Vec<String> = (0..1000).map(|i| i.to_string()).collect();
//!     assert!(brisk::stats().requested() >= before + 1000);
//!     # drop(words);
//! }
//! ```
//!
//! Beyond `malloc`, brisk offers explicit heaps ([`Heap`]: allocate related
//! blocks, drop them all at once), typed fixed-size object pools
//! ([`Pool`]), statistics ([`stats`]), options and heap checks.
//!
//! The C core (the same sources as the C library, built by `brisk-sys` with
//! the `cc` crate) is linked without brisk's override of the system
//! `malloc`: C code in the process and Rust's [`System`](std::alloc::System)
//! allocator keep glibc's malloc, and brisk serves what goes through this
//! crate.
//!
//! Cargo features: `checked` (misuse aborts with a message naming it; a
//! block's usable size is exactly the size asked), `secure` (hardened free
//! lists, guard pages), `allocator_api` (nightly: [`Heap`] and [`Brisk`] as
//! `core::alloc::Allocator`).
#![cfg_attr(feature = "allocator_api", feature(allocator_api))]
#![warn(missing_docs)]

use core::fmt;
use std::ffi::CStr;
use std::os::raw::c_void;

pub use brisk_sys as sys;

/// Deref, DerefMut and Debug for a box type that owns a live `T` at its
/// `ptr: NonNull<T>` field (HeapBox, PoolBox).
macro_rules! owning_box_impls {
    ($name:ident) => {
        impl<T> core::ops::Deref for $name<'_, T> {
            type Target = T;
            fn deref(&self) -> &T {
                // SAFETY: the box owns a live, initialised T.
                unsafe { self.ptr.as_ref() }
            }
        }

        impl<T> core::ops::DerefMut for $name<'_, T> {
            fn deref_mut(&mut self) -> &mut T {
                // SAFETY: as in deref, and &mut self is exclusive.
                unsafe { self.ptr.as_mut() }
            }
        }

        impl<T: core::fmt::Debug> core::fmt::Debug for $name<'_, T> {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                core::fmt::Debug::fmt(&**self, f)
            }
        }
    };
}

mod global;
mod heap;
mod pool;
mod stats;

pub use global::Brisk;
pub use heap::{Heap, HeapBox};
pub use pool::{Pool, PoolBox, POOL_MAX_ALIGN, POOL_MAX_OBJECT_SIZE};
pub use stats::{print_stats, stats, stats_json, ClassStats, Stats, Tier, TierStats};

/// A pool's figures ([`Pool::stats`]).
pub type PoolStats = sys::brisk_pool_stats_t;

/// What a brisk call refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// No memory left (or a bound reached): `ENOMEM`.
    OutOfMemory,
    /// An argument out of range: `EINVAL`.
    InvalidArgument,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Error::OutOfMemory => "brisk: out of memory",
            Error::InvalidArgument => "brisk: invalid argument",
        })
    }
}

impl std::error::Error for Error {}

/// The version of the brisk C library linked in ("0.1.0"), the same as
/// this crate's.
pub fn version() -> &'static str {
    // SAFETY: brisk_version returns a static NUL-terminated ASCII string.
    unsafe { CStr::from_ptr(sys::brisk_version()) }
        .to_str()
        .unwrap_or("?")
}

/// Whether `ptr` lies in memory brisk allocated (cheap, no locks). Any
/// pointer may be asked about.
pub fn owns(ptr: *const u8) -> bool {
    // SAFETY: brisk_owns only looks the address up in brisk's chunk map.
    unsafe { sys::brisk_owns(ptr as *const c_void) != 0 }
}

/// The bytes that may be used at `ptr`, a live brisk block: at least the
/// size asked (exactly that with the `checked` feature).
///
/// # Safety
/// `ptr` must be null, a live block from brisk, or memory brisk does not
/// own (0 then).
pub unsafe fn usable_size(ptr: *const u8) -> usize {
    sys::brisk_usable_size(ptr as *const c_void)
}

/// Releases every cached block and purges unused memory to the OS now.
pub fn collect() {
    // SAFETY: no precondition.
    unsafe { sys::brisk_collect() }
}

/// Bytes brisk has mapped from the OS now.
pub fn mapped_bytes() -> usize {
    // SAFETY: no precondition.
    unsafe { sys::brisk_mapped_bytes() }
}

/// Caps the memory brisk maps from the OS (0: no cap). Past it,
/// allocations first release cached memory, then fail.
pub fn set_max_bytes(max_bytes: usize) {
    // SAFETY: any value is accepted.
    unsafe { sys::brisk_set_max_bytes(max_bytes) }
}

/// The cap of [`set_max_bytes`] (0: none).
pub fn max_bytes() -> usize {
    // SAFETY: no precondition.
    unsafe { sys::brisk_get_max_bytes() }
}

/// Realtime mode: from now on brisk makes no system call of its own
/// accord (no purge, no cache trimming); [`collect`] still releases memory.
pub fn set_realtime(on: bool) {
    // SAFETY: no precondition.
    unsafe { sys::brisk_set_realtime(on as i32) }
}

/// brisk's run-time options, each also read at start from its environment
/// variable (`BRISK_PURGE_DELAY_MS=250`); brisk.h gives their ranges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opt {
    /// Print the statistics at exit (0 or 1).
    ShowStats = sys::BRISK_OPTION_SHOW_STATS as isize,
    /// Warn about odd input (0 or 1).
    Verbose = sys::BRISK_OPTION_VERBOSE as isize,
    /// Idle time before memory goes back to the OS, in ms.
    PurgeDelayMs = sys::BRISK_OPTION_PURGE_DELAY_MS as isize,
    /// Cap on mapped memory, bytes (0: none).
    MaxBytes = sys::BRISK_OPTION_MAX_BYTES as isize,
    /// Free memory kept in the shared caches, bytes.
    CacheCap = sys::BRISK_OPTION_CACHE_CAP as isize,
    /// Ask for transparent huge pages (0 or 1).
    HugePages = sys::BRISK_OPTION_HUGEPAGES as isize,
    /// Segments mapped ahead into the cache, bytes.
    Reserve = sys::BRISK_OPTION_RESERVE as isize,
    /// Realtime mode (0 or 1).
    Realtime = sys::BRISK_OPTION_REALTIME as isize,
    /// Report live blocks at exit (0 or 1).
    LeakReport = sys::BRISK_OPTION_LEAK_REPORT as isize,
    /// A helper thread purges while the program is idle (0 or 1).
    BackgroundPurge = sys::BRISK_OPTION_BACKGROUND_PURGE as isize,
}

impl Opt {
    /// The option's value now.
    pub fn get(self) -> i64 {
        // SAFETY: a valid option.
        unsafe { sys::brisk_option_get(self as sys::brisk_option_t) }
    }

    /// Sets it; `Err` (and nothing changes) for a value out of its range,
    /// or `OutOfMemory` when a reserve could not be mapped in full.
    pub fn set(self, value: i64) -> Result<(), Error> {
        // SAFETY: a valid option; brisk checks the value.
        match unsafe { sys::brisk_option_set(self as sys::brisk_option_t, value) } {
            0 => Ok(()),
            e if e == ENOMEM => Err(Error::OutOfMemory),
            _ => Err(Error::InvalidArgument),
        }
    }

    /// The name of its environment variable ("BRISK_PURGE_DELAY_MS").
    pub fn env_name(self) -> &'static str {
        // SAFETY: a valid option gives a static NUL-terminated name.
        unsafe { CStr::from_ptr(sys::brisk_option_name(self as sys::brisk_option_t)) }
            .to_str()
            .unwrap_or("?")
    }
}

const ENOMEM: i32 = 12;

/// Walks brisk's metadata (this thread's heap, every segment, the caches)
/// and returns the first inconsistency found, described.
pub fn check_heap() -> Result<(), String> {
    // SAFETY: no precondition; the message is a NUL-terminated string in
    // thread-local storage, copied at once.
    unsafe {
        if sys::brisk_check_heap() == sys::BRISK_CHECK_OK {
            return Ok(());
        }
        Err(CStr::from_ptr(sys::brisk_check_message())
            .to_string_lossy()
            .into_owned())
    }
}
