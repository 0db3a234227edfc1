//! `Pool<T>`: brisk's fixed-size object pools, typed.

use core::fmt;
use core::marker::PhantomData;
use core::mem::{self, ManuallyDrop};
use core::ptr::{self, NonNull};
use std::os::raw::c_void;

use brisk_sys as sys;

use crate::Error;

/// The largest object a pool holds (`brisk_pool_new`: 1 B .. 1 MiB).
pub const POOL_MAX_OBJECT_SIZE: usize = 1 << 20;
/// The largest alignment a pool gives (`brisk_pool_new`: up to 16 KiB).
pub const POOL_MAX_ALIGN: usize = 16 << 10;

/// A pool of `T`s: O(1) allocation and free of objects of one size, from
/// any thread (each thread works from its own cache, objects freed by other
/// threads come back lock-free).
///
/// [`Pool::alloc`] moves a value in and gives a [`PoolBox`], a typed handle
/// that drops the value and returns its slot when it goes. Dropping the
/// pool frees every slot at once; a box borrows the pool, so none outlives
/// it.
///
/// ```
/// struct Node { key: u64, next: Option<u32> }
///
/// let pool = brisk::Pool::<Node>::new().unwrap();
/// let a = pool.alloc(Node { key: 1, next: None }).ok().unwrap();
/// let b = pool.alloc(Node { key: 2, next: Some(0) }).ok().unwrap();
/// assert_eq!(a.key + b.key, 3);
/// assert_eq!(pool.stats().live_objects, 2);
/// drop(a);
/// assert_eq!(pool.stats().live_objects, 1);
///
/// // A bounded pool refuses once full, and gives the value back.
/// let small = brisk::Pool::<u64>::with_max_objects(1).unwrap();
/// let one = small.alloc(1).ok().unwrap();
/// assert_eq!(small.alloc(2).err(), Some(2));
/// ```
///
/// A box does not outlive its pool:
///
/// ```compile_fail,E0505
/// let pool = brisk::Pool::<u32>::new().unwrap();
/// let b = pool.alloc(1).ok().unwrap();
/// drop(pool);
/// assert_eq!(*b, 1);
/// ```
pub struct Pool<T> {
    raw: NonNull<sys::brisk_pool_t>,
    _objects: PhantomData<T>,
}

// SAFETY: a pool handle may be used by any thread (brisk_pool_alloc and
// brisk_pool_free are thread-safe). The pool holds no T of its own: values
// live in PoolBoxes, whose Send and Sync follow T's.
unsafe impl<T> Send for Pool<T> {}
// SAFETY: as above: &Pool only allocates and frees slots.
unsafe impl<T> Sync for Pool<T> {}

impl<T> Pool<T> {
    /// An unbounded pool of `T`s. `Err(Error::InvalidArgument)` when `T` is
    /// larger than 1 MiB or aligned to more than 16 KiB.
    pub fn new() -> Result<Pool<T>, Error> {
        Pool::with_max_objects(0)
    }

    /// A pool that holds at most `max_objects` live objects (0: no bound);
    /// past it [`Pool::alloc`] fails until some are freed.
    pub fn with_max_objects(max_objects: usize) -> Result<Pool<T>, Error> {
        let (size, align) = (mem::size_of::<T>().max(1), mem::align_of::<T>());
        if size > POOL_MAX_OBJECT_SIZE || align > POOL_MAX_ALIGN {
            return Err(Error::InvalidArgument);
        }
        // SAFETY: size and align are within brisk_pool_new's limits.
        let raw = unsafe { sys::brisk_pool_new(size, align, max_objects) };
        NonNull::new(raw)
            .map(|raw| Pool {
                raw,
                _objects: PhantomData,
            })
            .ok_or(Error::OutOfMemory)
    }

    /// The C handle, for the functions of `brisk_sys`.
    pub fn as_raw(&self) -> *mut sys::brisk_pool_t {
        self.raw.as_ptr()
    }

    /// Moves `value` into a slot of the pool; gives it back when the pool
    /// is at its bound or no memory is left.
    pub fn alloc(&self, value: T) -> Result<PoolBox<'_, T>, T> {
        // SAFETY: the pool is live.
        let slot = unsafe { sys::brisk_pool_alloc(self.as_raw()) } as *mut T;
        match NonNull::new(slot) {
            Some(ptr) => {
                // SAFETY: a fresh slot, sized and aligned for T.
                unsafe { ptr.as_ptr().write(value) };
                Ok(PoolBox { ptr, pool: self })
            }
            None => Err(value),
        }
    }

    /// The pool's figures: object size and alignment, live objects,
    /// capacity, memory held, allocations, frees, refusals.
    pub fn stats(&self) -> sys::brisk_pool_stats_t {
        let mut st = sys::brisk_pool_stats_t::default();
        // SAFETY: the pool is live and st is writable.
        let rc = unsafe { sys::brisk_pool_stats(self.as_raw(), &mut st) };
        debug_assert_eq!(rc, 0);
        st
    }
}

impl<T> Drop for Pool<T> {
    fn drop(&mut self) {
        // SAFETY: the pool is live and dropped once; no PoolBox borrows it.
        unsafe { sys::brisk_pool_destroy(self.as_raw()) }
    }
}

impl<T> fmt::Debug for Pool<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("raw", &self.raw)
            .field("stats", &self.stats())
            .finish()
    }
}

/// A `T` in a [`Pool`]'s slot: dropped, and the slot returned, with the
/// box. It may be dropped on any thread.
pub struct PoolBox<'p, T> {
    ptr: NonNull<T>,
    pool: &'p Pool<T>,
}

// SAFETY: the box owns its T, and any thread may return a slot.
unsafe impl<T: Send> Send for PoolBox<'_, T> {}
// SAFETY: &PoolBox gives only &T.
unsafe impl<T: Sync> Sync for PoolBox<'_, T> {}

impl<'p, T> PoolBox<'p, T> {
    /// Takes the value out and returns the slot.
    pub fn into_inner(b: Self) -> T {
        let b = ManuallyDrop::new(b);
        // SAFETY: the value is live and read once; the slot is then freed
        // without dropping it again.
        unsafe {
            let value = b.ptr.as_ptr().read();
            sys::brisk_pool_free(b.pool.as_raw(), b.ptr.as_ptr() as *mut c_void);
            value
        }
    }

    /// The pool the box's slot belongs to.
    pub fn pool(b: &Self) -> &'p Pool<T> {
        b.pool
    }
}

impl<T> Drop for PoolBox<'_, T> {
    fn drop(&mut self) {
        // SAFETY: the box owns a live value in a slot of its pool.
        unsafe {
            ptr::drop_in_place(self.ptr.as_ptr());
            sys::brisk_pool_free(self.pool.as_raw(), self.ptr.as_ptr() as *mut c_void);
        }
    }
}

owning_box_impls!(PoolBox);
