//! `Heap`: an explicit brisk heap, destroyed with everything in it on drop.

use core::alloc::Layout;
use core::fmt;
use core::marker::PhantomData;
use core::mem::{self, ManuallyDrop};
use core::ptr::{self, NonNull};
use std::os::raw::c_void;

use brisk_sys as sys;

use crate::global::malloc_aligns;
use crate::Error;

/// An explicit heap: a private set of pages to allocate related blocks from
/// and drop all at once.
///
/// Only the thread that created a heap allocates from it, so `Heap` is
/// neither `Send` nor `Sync`; its blocks may be freed by any thread.
/// Dropping the heap releases every block still in it, without running any
/// destructor. [`HeapBox`] borrows the heap, so none outlives it.
///
/// ```
/// let heap = brisk::Heap::new().unwrap();
/// let a = heap.boxed([7u8; 1000]).unwrap();
/// let b = heap.boxed(String::from("in the heap")).unwrap();
/// assert_eq!(a[999], 7);
/// assert_eq!(b.as_str(), "in the heap");
/// assert!(heap.held_bytes() >= 1000);
/// drop((a, b));
/// drop(heap); // whatever is still in it goes with it
/// ```
///
/// With the `allocator_api` feature (nightly), `&Heap` is an
/// [`Allocator`](core::alloc::Allocator): `Vec::new_in(&heap)`.
///
/// Another thread cannot allocate from it:
///
/// ```compile_fail,E0277
/// let heap = brisk::Heap::new().unwrap();
/// std::thread::spawn(move || heap.boxed(1u8).is_ok());
/// ```
///
/// and no box outlives it:
///
/// ```compile_fail,E0505
/// let heap = brisk::Heap::new().unwrap();
/// let b = heap.boxed(1u8).unwrap();
/// drop(heap);
/// assert_eq!(*b, 1);
/// ```
pub struct Heap {
    raw: NonNull<sys::brisk_heap_t>,
    // *mut: neither Send nor Sync (only the creating thread allocates).
    _owner_thread: PhantomData<*mut ()>,
}

impl Heap {
    /// A new, empty heap. `Err(Error::OutOfMemory)` when no memory is left.
    pub fn new() -> Result<Heap, Error> {
        // SAFETY: no precondition.
        let raw = unsafe { sys::brisk_heap_new() };
        NonNull::new(raw)
            .map(|raw| Heap {
                raw,
                _owner_thread: PhantomData,
            })
            .ok_or(Error::OutOfMemory)
    }

    /// The C handle, for the functions of `brisk_sys`.
    pub fn as_raw(&self) -> *mut sys::brisk_heap_t {
        self.raw.as_ptr()
    }

    /// A block of `layout.size()` bytes (a unique block for 0) aligned to
    /// `layout.align()`, or `None` when memory or the heap's bound ran out.
    /// It stays until [`Heap::dealloc`], a reset or the heap's drop.
    pub fn alloc(&self, layout: Layout) -> Option<NonNull<u8>> {
        let h = self.as_raw();
        // SAFETY: h is a live heap created by this thread (Heap is !Send).
        let p = unsafe {
            if malloc_aligns(layout.align(), layout.size()) {
                sys::brisk_heap_malloc(h, layout.size())
            } else {
                sys::brisk_heap_aligned_alloc(h, layout.align(), layout.size())
            }
        };
        NonNull::new(p as *mut u8)
    }

    /// As [`Heap::alloc`], the block's bytes all zero (fresh memory of a
    /// huge block is not written: the kernel gives it zeroed).
    pub fn alloc_zeroed(&self, layout: Layout) -> Option<NonNull<u8>> {
        let h = self.as_raw();
        // SAFETY: as in alloc.
        let p = unsafe {
            if malloc_aligns(layout.align(), layout.size()) {
                sys::brisk_heap_calloc(h, 1, layout.size())
            } else {
                sys::brisk_heap_calloc_aligned(h, 1, layout.size(), layout.align())
            }
        };
        NonNull::new(p as *mut u8)
    }

    /// Resizes a block of this heap to `new_size` bytes, keeping its first
    /// bytes and its alignment, in this heap: in place when it is big enough
    /// (and not much too big), else moved. `None` leaves the block alone.
    ///
    /// # Safety
    /// `ptr` must be a live block of this heap allocated with `layout`.
    pub unsafe fn realloc(
        &self,
        ptr: NonNull<u8>,
        layout: Layout,
        new_size: usize,
    ) -> Option<NonNull<u8>> {
        self.realloc_to(ptr, layout.align(), new_size)
    }

    /// The block at ptr as `size` bytes aligned to `align`, in this heap.
    ///
    /// # Safety
    /// `ptr` must be a live block of this heap.
    unsafe fn realloc_to(
        &self,
        ptr: NonNull<u8>,
        align: usize,
        size: usize,
    ) -> Option<NonNull<u8>> {
        let (h, p) = (self.as_raw(), ptr.as_ptr() as *mut c_void);
        let q = if malloc_aligns(align, size) {
            sys::brisk_heap_realloc(h, p, size)
        } else {
            sys::brisk_heap_realloc_aligned(h, p, align, size)
        };
        NonNull::new(q as *mut u8)
    }

    /// Frees a block of this heap (any brisk block, in fact).
    ///
    /// # Safety
    /// `ptr` must be a live brisk block, freed only here.
    pub unsafe fn dealloc(&self, ptr: NonNull<u8>, layout: Layout) {
        sys::brisk_free_sized(ptr.as_ptr() as *mut c_void, layout.size());
    }

    /// Moves `value` into this heap; gives it back when no memory is left.
    pub fn boxed<T>(&self, value: T) -> Result<HeapBox<'_, T>, T> {
        let layout = Layout::new::<T>();
        let ptr = if layout.size() == 0 {
            NonNull::dangling()
        } else {
            match self.alloc(layout) {
                Some(p) => p.cast::<T>(),
                None => return Err(value),
            }
        };
        // SAFETY: ptr is valid for a write of T (a fresh block, or dangling
        // and aligned for a zero-sized T).
        unsafe { ptr.as_ptr().write(value) };
        Ok(HeapBox {
            ptr,
            _heap: PhantomData,
        })
    }

    /// Frees every block of the heap at once and keeps the heap for reuse.
    /// `&mut self`: no [`HeapBox`] (nor collection using the heap) is left.
    pub fn reset(&mut self) {
        // SAFETY: the heap is live and, by &mut, not in use.
        unsafe { sys::brisk_heap_reset(self.as_raw()) }
    }

    /// Bounds the memory the heap holds (pages and huge blocks); past it,
    /// its allocations fail. 0: unbounded.
    pub fn set_max_bytes(&self, max_bytes: usize) {
        // SAFETY: the heap is live.
        unsafe { sys::brisk_heap_set_max_bytes(self.as_raw(), max_bytes) }
    }

    /// Bytes of pages and huge blocks the heap holds now.
    pub fn held_bytes(&self) -> usize {
        // SAFETY: the heap is live.
        unsafe { sys::brisk_heap_held_bytes(self.as_raw()) }
    }
}

impl Drop for Heap {
    fn drop(&mut self) {
        // SAFETY: the heap is live and dropped once; nothing borrows it.
        unsafe { sys::brisk_heap_destroy(self.as_raw()) }
    }
}

impl fmt::Debug for Heap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Heap")
            .field("raw", &self.raw)
            .field("held_bytes", &self.held_bytes())
            .finish()
    }
}

/// A value in a [`Heap`]: dropped and freed with the box, or with the heap.
pub struct HeapBox<'h, T> {
    ptr: NonNull<T>,
    _heap: PhantomData<(&'h Heap, T)>,
}

// SAFETY: a heap's blocks may be freed by any thread, and the box owns its
// T: moving it is moving a T. The borrow of the heap keeps the heap alive
// (its destroy and reset wait for the box), whatever thread the box is on.
unsafe impl<T: Send> Send for HeapBox<'_, T> {}
// SAFETY: &HeapBox gives only &T.
unsafe impl<T: Sync> Sync for HeapBox<'_, T> {}

impl<T> HeapBox<'_, T> {
    /// Takes the value out, freeing its block.
    pub fn into_inner(b: Self) -> T {
        let b = ManuallyDrop::new(b);
        // SAFETY: the value is live and read once; the block is then freed
        // without dropping it again.
        unsafe {
            let value = b.ptr.as_ptr().read();
            free_block(b.ptr);
            value
        }
    }
}

/// Frees a `HeapBox`'s block (none for a zero-sized T).
///
/// # Safety
/// `ptr` is the box's block, whose value was dropped or moved out.
unsafe fn free_block<T>(ptr: NonNull<T>) {
    if mem::size_of::<T>() != 0 {
        sys::brisk_free_sized(ptr.as_ptr() as *mut c_void, mem::size_of::<T>());
    }
}

impl<T> Drop for HeapBox<'_, T> {
    fn drop(&mut self) {
        // SAFETY: the box owns a live value in a live block.
        unsafe {
            ptr::drop_in_place(self.ptr.as_ptr());
            free_block(self.ptr);
        }
    }
}

owning_box_impls!(HeapBox);

// Nightly only: the MSRV does not apply.
#[cfg(feature = "allocator_api")]
#[allow(clippy::incompatible_msrv)]
mod allocator {
    use super::Heap;
    use crate::global::allocator::slice;
    use core::alloc::{AllocError, Allocator, Layout};
    use core::ptr::NonNull;

    // SAFETY: blocks live until deallocated or the heap goes, and the
    // borrow of the heap outlives every collection using it. &Heap is not
    // Send, so the collection allocates on the heap's own thread.
    unsafe impl Allocator for &Heap {
        fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
            slice(Heap::alloc(self, layout), layout.size())
        }

        fn allocate_zeroed(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
            slice(Heap::alloc_zeroed(self, layout), layout.size())
        }

        unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
            Heap::dealloc(self, ptr, layout)
        }

        // In place when brisk can, else moved within the heap (contents
        // kept), at the new layout's alignment, which may differ from the
        // old one's.
        unsafe fn grow(
            &self,
            ptr: NonNull<u8>,
            _old: Layout,
            new: Layout,
        ) -> Result<NonNull<[u8]>, AllocError> {
            slice(self.realloc_to(ptr, new.align(), new.size()), new.size())
        }

        unsafe fn shrink(
            &self,
            ptr: NonNull<u8>,
            _old: Layout,
            new: Layout,
        ) -> Result<NonNull<[u8]>, AllocError> {
            slice(self.realloc_to(ptr, new.align(), new.size()), new.size())
        }
    }
}
