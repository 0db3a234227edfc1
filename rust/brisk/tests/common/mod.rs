//! Helpers of the integration tests: the sizes and alignments they walk,
//! and byte patterns that tell blocks apart.
#![allow(dead_code)]

use std::sync::{Mutex, MutexGuard};

/// brisk's statistics are the process's: the tests of a binary that compare
/// them take this lock, so that none changes the figures another reads.
static FIGURES: Mutex<()> = Mutex::new(());

/// The lock of `FIGURES` (a test that failed holding it does not fail the
/// others).
pub fn serial() -> MutexGuard<'static, ()> {
    FIGURES
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Every size from 1 to 1 KiB (each small size class and its neighbours),
/// then the edges of every power of two up to 64 MiB: p - 1, p, p + 1 and
/// p + p/4 (a class boundary in each doubling).
pub fn sizes() -> Vec<usize> {
    let mut v: Vec<usize> = (1..=1024).collect();
    let mut p = 2048;
    while p <= 64 << 20 {
        v.extend_from_slice(&[p - 1, p, p + 1, p + p / 4]);
        p *= 2;
    }
    v
}

/// Every power-of-two alignment from 1 B to 4 MiB (brisk's segment size,
/// and its huge blocks' alignment).
pub fn alignments() -> Vec<usize> {
    (0..=22).map(|s| 1usize << s).collect()
}

/// The byte of the pattern `seed` at `offset`.
pub fn pattern(seed: usize, offset: usize) -> u8 {
    (seed.wrapping_mul(31).wrapping_add(offset.wrapping_mul(7)) % 251) as u8
}

/// The offsets a test writes and reads in a block of `size` bytes: all of
/// them up to 64 KiB, beyond that the first and last 4 KiB and one byte in
/// every 4 KiB page (a huge block is checked page by page, not byte by byte).
pub fn offsets(size: usize) -> Box<dyn Iterator<Item = usize>> {
    if size <= 64 << 10 {
        return Box::new(0..size);
    }
    let head = 0..4096;
    let pages = (4096..size - 4096).step_by(4093);
    let tail = size - 4096..size;
    Box::new(head.chain(pages).chain(tail))
}

/// Writes the pattern `seed` into the block.
///
/// # Safety
/// `p` must be writable for `size` bytes.
pub unsafe fn fill(p: *mut u8, size: usize, seed: usize) {
    for i in offsets(size) {
        *p.add(i) = pattern(seed, i);
    }
}

/// The first offset that `fill` wrote in a block of `size` bytes whose byte
/// is not the pattern `seed`.
///
/// # Safety
/// `p` must be readable for `size` bytes.
pub unsafe fn first_wrong(p: *const u8, size: usize, seed: usize) -> Option<usize> {
    first_wrong_kept(p, size, size, seed)
}

/// The same for a block filled at `written` bytes and since resized to
/// `kept` bytes: only what it still holds is checked.
///
/// # Safety
/// `p` must be readable for `kept` bytes.
pub unsafe fn first_wrong_kept(
    p: *const u8,
    written: usize,
    kept: usize,
    seed: usize,
) -> Option<usize> {
    offsets(written)
        .take_while(|&i| i < kept)
        .find(|&i| *p.add(i) != pattern(seed, i))
}
