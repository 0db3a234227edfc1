//! `Brisk`: brisk as Rust's global allocator.

use core::alloc::{GlobalAlloc, Layout};
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

/// The block at `ptr` resized to `size` bytes aligned to `align` (a power
/// of two): `brisk_realloc` when malloc's alignment is enough, else
/// `brisk_realloc_aligned`, which keeps the block in place when it is
/// aligned and fits, and otherwise moves it to an aligned block. Null, with
/// the block left alone, when memory ran out.
///
/// # Safety
/// `ptr` must be a live brisk block.
#[inline]
pub(crate) unsafe fn realloc_to(ptr: *mut u8, align: usize, size: usize) -> *mut u8 {
    let p = ptr as *mut c_void;
    if malloc_aligns(align, size) {
        sys::brisk_realloc(p, size) as *mut u8
    } else {
        sys::brisk_realloc_aligned(p, align, size) as *mut u8
    }
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
/// come from `brisk_malloc`, `brisk_calloc` and `brisk_realloc`, larger
/// alignments from `brisk_aligned_alloc`, `brisk_calloc_aligned` and
/// `brisk_realloc_aligned`; `dealloc` passes the size to
/// `brisk_free_sized`. So an over-aligned block keeps its place on
/// `realloc` while it fits (a huge one is resized with `mremap`), and an
/// over-aligned zeroed block of fresh memory is not written.
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
            sys::brisk_calloc(1, layout.size()) as *mut u8
        } else {
            sys::brisk_calloc_aligned(1, layout.size(), layout.align()) as *mut u8
        }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        realloc_to(ptr, layout.align(), new_size)
    }
}

// Nightly only: the MSRV does not apply.
#[cfg(feature = "allocator_api")]
#[allow(clippy::incompatible_msrv)]
pub(crate) mod allocator {
    use super::Brisk;
    use core::alloc::{AllocError, Allocator, GlobalAlloc, Layout};
    use core::ptr::NonNull;

    /// A block of `size` bytes as the Allocator methods return it.
    pub(crate) fn slice(p: Option<NonNull<u8>>, size: usize) -> Result<NonNull<[u8]>, AllocError> {
        p.map(|p| NonNull::slice_from_raw_parts(p, size))
            .ok_or(AllocError)
    }

    // SAFETY: blocks come from GlobalAlloc for Brisk, which meets the
    // Allocator contract for non-zero sizes; zero sizes get a brisk block of
    // their own too (brisk_malloc(0) is a unique pointer), freed as any.
    // Every Brisk is the same allocator, so copies may free each other's
    // blocks. grow and shrink keep the first min(old, new) bytes (brisk's
    // realloc), at the new layout's alignment.
    unsafe impl Allocator for Brisk {
        fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
            // SAFETY: any layout is accepted by brisk, size 0 included.
            let p = unsafe { GlobalAlloc::alloc(self, layout) };
            slice(NonNull::new(p), layout.size())
        }

        fn allocate_zeroed(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
            // SAFETY: as in allocate.
            let p = unsafe { GlobalAlloc::alloc_zeroed(self, layout) };
            slice(NonNull::new(p), layout.size())
        }

        unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
            GlobalAlloc::dealloc(self, ptr.as_ptr(), layout)
        }

        unsafe fn grow(
            &self,
            ptr: NonNull<u8>,
            _old: Layout,
            new: Layout,
        ) -> Result<NonNull<[u8]>, AllocError> {
            resize(ptr, new)
        }

        unsafe fn shrink(
            &self,
            ptr: NonNull<u8>,
            _old: Layout,
            new: Layout,
        ) -> Result<NonNull<[u8]>, AllocError> {
            resize(ptr, new)
        }
    }

    /// In place when brisk can, else moved (contents kept), at the new
    /// layout's alignment, which may differ from the old one's.
    unsafe fn resize(ptr: NonNull<u8>, new: Layout) -> Result<NonNull<[u8]>, AllocError> {
        let p = super::realloc_to(ptr.as_ptr(), new.align(), new.size());
        slice(NonNull::new(p), new.size())
    }
}
