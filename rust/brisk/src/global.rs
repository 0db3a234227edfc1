//! `Brisk`: brisk as Rust's global allocator.

use core::alloc::{GlobalAlloc, Layout};
use core::ptr;
use std::os::raw::c_void;

use brisk_sys as sys;

/// Whether `brisk_malloc` (and `brisk_realloc`, `brisk_calloc`) already
/// give the alignment: a block is aligned to 16 bytes, and to its size when
/// that is smaller (a `Layout` whose alignment exceeds its size goes the
/// aligned way, as std's `System` does).
#[inline(always)]
pub(crate) fn malloc_aligns(align: usize, size: usize) -> bool {
    align <= sys::BLOCK_ALIGN && align <= size
}

/// Copies the block at `ptr` (`old` bytes) into a new block of `new_size`
/// bytes from `alloc`, then frees it; null, with the block left alone, when
/// `alloc` fails.
///
/// # Safety
/// `ptr` must be a live brisk block of at least `old` bytes.
pub(crate) unsafe fn move_block(
    ptr: *mut u8,
    old: usize,
    new_size: usize,
    alloc: impl FnOnce() -> *mut u8,
) -> *mut u8 {
    let new = alloc();
    if !new.is_null() {
        // SAFETY: both blocks are live and distinct, each holds at least
        // min(old, new_size) bytes.
        ptr::copy_nonoverlapping(ptr, new, old.min(new_size));
        sys::brisk_free(ptr as *mut c_void);
    }
    new
}

/// brisk as the global allocator, or as an allocator object of its own.
///
/// A zero-sized handle on the process's brisk: every `Brisk` value is the
/// same allocator, so a block from one may be freed through another.
///
/// ```
/// #[global_allocator]
/// static GLOBAL: brisk::Brisk = brisk::Brisk;
///
/// fn main() {
///     let v: Vec<u64> = (0..1000).collect();
///     assert!(brisk::owns(v.as_ptr() as *const u8));
/// }
/// ```
///
/// It can also be called directly, without being the global allocator:
///
/// ```
/// use std::alloc::{GlobalAlloc, Layout};
///
/// let layout = Layout::from_size_align(100, 64).unwrap();
/// unsafe {
///     let p = brisk::Brisk.alloc_zeroed(layout);
///     assert!(!p.is_null() && p as usize % 64 == 0 && *p.add(99) == 0);
///     brisk::Brisk.dealloc(p, layout);
/// }
/// ```
///
/// Blocks whose alignment is at most 16 bytes (and not above their size)
/// come from `brisk_malloc`, larger alignments from `brisk_aligned_alloc`;
/// `dealloc` passes the size to `brisk_free_sized`. Growing or shrinking an
/// over-aligned block keeps it in place when the new size still fits the
/// block and fills at least half of it (the release and secure libraries,
/// whose blocks may be larger than asked), and moves it otherwise.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Brisk;

// SAFETY: every method returns a block of at least layout.size() bytes
// aligned to layout.align(), or null; brisk serves any thread and a block
// may be freed by any thread.
unsafe impl GlobalAlloc for Brisk {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if malloc_aligns(layout.align(), layout.size()) {
            sys::brisk_malloc(layout.size()) as *mut u8
        } else {
            sys::brisk_aligned_alloc(layout.align(), layout.size()) as *mut u8
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        sys::brisk_free_sized(ptr as *mut c_void, layout.size());
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if malloc_aligns(layout.align(), layout.size()) {
            return sys::brisk_calloc(1, layout.size()) as *mut u8;
        }
        let p = self.alloc(layout);
        if !p.is_null() {
            // SAFETY: p is a fresh block of layout.size() bytes.
            ptr::write_bytes(p, 0, layout.size());
        }
        p
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if malloc_aligns(layout.align(), new_size) {
            return sys::brisk_realloc(ptr as *mut c_void, new_size) as *mut u8;
        }
        realloc_aligned(ptr, layout, new_size)
    }
}

/// brisk has no aligned realloc: a block stays where it is while the new
/// size fits it and uses at least half of it, otherwise it moves to a new
/// aligned block. The checked library always moves it, so that its canary
/// sits right after the new size.
#[cold]
unsafe fn realloc_aligned(ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
    if !sys::CHECKED {
        let usable = sys::brisk_usable_size(ptr as *const c_void);
        if new_size <= usable && new_size >= usable / 2 {
            return ptr;
        }
    }
    move_block(ptr, layout.size(), new_size, || {
        // SAFETY: the caller's layout.align() is a power of two and
        // new_size, rounded up to it, does not overflow isize (the
        // GlobalAlloc::realloc contract).
        let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
        Brisk.alloc(new_layout)
    })
}

// Nightly only: the MSRV does not apply.
#[cfg(feature = "allocator_api")]
#[allow(clippy::incompatible_msrv)]
mod allocator {
    use super::Brisk;
    use core::alloc::{AllocError, Allocator, GlobalAlloc, Layout};
    use core::ptr::NonNull;

    // SAFETY: blocks come from GlobalAlloc for Brisk, which meets the
    // Allocator contract for non-zero sizes; zero sizes get a brisk block of
    // their own too (brisk_malloc(0) is a unique pointer), freed as any.
    // Every Brisk is the same allocator, so copies may free each other's
    // blocks.
    unsafe impl Allocator for Brisk {
        fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
            // SAFETY: any layout is accepted by brisk, size 0 included.
            let p = unsafe { GlobalAlloc::alloc(self, layout) };
            NonNull::new(p)
                .map(|p| NonNull::slice_from_raw_parts(p, layout.size()))
                .ok_or(AllocError)
        }

        fn allocate_zeroed(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
            // SAFETY: as in allocate.
            let p = unsafe { GlobalAlloc::alloc_zeroed(self, layout) };
            NonNull::new(p)
                .map(|p| NonNull::slice_from_raw_parts(p, layout.size()))
                .ok_or(AllocError)
        }

        unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
            GlobalAlloc::dealloc(self, ptr.as_ptr(), layout)
        }
    }
}
