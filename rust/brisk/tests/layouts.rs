//! GlobalAlloc for Brisk over every Layout: each size from 1 B to 1 KiB and
//! the edges of each power of two up to 64 MiB, at each alignment from 1 B
//! to 4 MiB; zeroed memory; realloc keeping contents and alignment.
mod common;

use std::alloc::{GlobalAlloc, Layout};

use brisk::Brisk;
use common::{alignments, fill, first_wrong, first_wrong_kept, sizes};

/// Checks a fresh block of `layout` at `p`: there, aligned, brisk's, with
/// room for the layout (exactly the size in the checked library).
unsafe fn check_block(p: *mut u8, layout: Layout) {
    let (size, align) = (layout.size(), layout.align());
    assert!(!p.is_null(), "{:?}: null", layout);
    assert_eq!(p as usize % align, 0, "{:?}: {:p} misaligned", layout, p);
    assert!(brisk::owns(p), "{:?}: {:p} not brisk's", layout, p);
    let usable = brisk::usable_size(p);
    if brisk::sys::CHECKED {
        assert_eq!(usable, size, "{:?}: checked usable size", layout);
    } else {
        assert!(usable >= size, "{:?}: usable size {}", layout, usable);
    }
}

#[test]
fn every_size_at_every_alignment() {
    let aligns = alignments();
    let mut count = 0usize;
    for size in sizes() {
        // One block of this size at each alignment, all live at once: a
        // block that overlaps another shows as a wrong pattern.
        let mut live = Vec::with_capacity(aligns.len());
        for (seed, &align) in aligns.iter().enumerate() {
            let layout = Layout::from_size_align(size, align).unwrap();
            // SAFETY: a valid non-zero layout; the block is checked, then
            // written within its size.
            unsafe {
                let p = Brisk.alloc(layout);
                check_block(p, layout);
                fill(p, size, seed);
                live.push((p, layout, seed));
            }
        }
        for (p, layout, seed) in live {
            // SAFETY: p is live with layout, freed once.
            unsafe {
                assert_eq!(
                    first_wrong(p, layout.size(), seed),
                    None,
                    "{:?}: overwritten",
                    layout
                );
                Brisk.dealloc(p, layout);
            }
            count += 1;
        }
    }
    assert_eq!(count, sizes().len() * aligns.len());
}

#[test]
fn zeroed_blocks_are_zero_even_on_reused_memory() {
    for size in sizes().into_iter().filter(|&s| s <= 8 << 20) {
        for &align in &[1, 8, 16, 64, 4096, 1 << 21] {
            let layout = Layout::from_size_align(size, align).unwrap();
            // SAFETY: valid layouts; each block is written and read within
            // its size and freed once.
            unsafe {
                // Dirty a block, free it: the zeroed one that follows is
                // likely the same memory.
                let dirty = Brisk.alloc(layout);
                check_block(dirty, layout);
                std::ptr::write_bytes(dirty, 0xA5, size);
                Brisk.dealloc(dirty, layout);
                let p = Brisk.alloc_zeroed(layout);
                check_block(p, layout);
                let bytes = std::slice::from_raw_parts(p, size);
                assert!(bytes.iter().all(|&b| b == 0), "{:?}: not zeroed", layout);
                Brisk.dealloc(p, layout);
            }
        }
    }
}

/// Sizes that cross every tier, up and down again.
const REALLOC_CHAIN: &[usize] = &[
    1,
    15,
    16,
    17,
    100,
    1000,
    1024,
    1025,
    8192,
    8193,
    65536,
    65537,
    1 << 20,
    (1 << 20) + 1,
    3 << 20,
    40 << 20,
    5 << 20,
    1 << 20,
    70000,
    4000,
    33,
    2,
    1,
    12 << 20,
    24,
];

#[test]
fn realloc_keeps_contents_and_alignment() {
    for &align in &[1usize, 2, 8, 16, 32, 64, 256, 4096, 65536, 1 << 21, 4 << 20] {
        let mut layout = Layout::from_size_align(REALLOC_CHAIN[0], align).unwrap();
        // SAFETY: p is always the live block of `layout`; each step writes
        // and reads within the sizes it checks.
        unsafe {
            let mut p = Brisk.alloc(layout);
            check_block(p, layout);
            fill(p, layout.size(), align);
            for &new_size in &REALLOC_CHAIN[1..] {
                let q = Brisk.realloc(p, layout, new_size);
                let new_layout = Layout::from_size_align(new_size, align).unwrap();
                check_block(q, new_layout);
                assert_eq!(
                    first_wrong_kept(q, layout.size(), new_size, align),
                    None,
                    "align {}: {} -> {} bytes lost contents",
                    align,
                    layout.size(),
                    new_size
                );
                fill(q, new_size, align);
                p = q;
                layout = new_layout;
            }
            Brisk.dealloc(p, layout);
        }
    }
}

#[test]
fn realloc_at_every_alignment_with_a_size_below_it() {
    // A layout whose alignment exceeds its size comes from aligned_alloc;
    // growing it past the alignment goes through brisk_realloc, shrinking
    // it back below goes the aligned way again.
    for &align in &alignments() {
        for &(from, to) in &[
            (1usize, 4096usize),
            (align.max(2) / 2, align * 3),
            (align * 3, 1),
        ] {
            let layout = Layout::from_size_align(from, align).unwrap();
            // SAFETY: as in realloc_keeps_contents_and_alignment.
            unsafe {
                let p = Brisk.alloc(layout);
                check_block(p, layout);
                fill(p, from, 7);
                let q = Brisk.realloc(p, layout, to);
                check_block(q, Layout::from_size_align(to, align).unwrap());
                assert_eq!(
                    first_wrong_kept(q, from, to, 7),
                    None,
                    "align {}: {} -> {}",
                    align,
                    from,
                    to
                );
                Brisk.dealloc(q, Layout::from_size_align(to, align).unwrap());
            }
        }
    }
}

#[test]
fn over_aligned_realloc_stays_in_place_when_the_block_fits() {
    // brisk_realloc_aligned: an aligned block that is big enough is kept
    // (before it, brisk had no aligned realloc and the crate moved blocks).
    for &align in &[32usize, 64, 4096, 65536, 1 << 21] {
        for &size in &[100usize, 5000, 70_000, 900_000, 3 << 20] {
            let layout = Layout::from_size_align(size, align).unwrap();
            // SAFETY: p is the live block of `layout`, then of the sizes it
            // is resized to; written and read within them; freed once.
            unsafe {
                let p = Brisk.alloc(layout);
                check_block(p, layout);
                fill(p, size, align + size);
                let q = Brisk.realloc(p, layout, size);
                assert_eq!(q, p, "{:?}: a realloc to the same size moved", layout);
                let smaller = size - size / 8;
                let r = Brisk.realloc(q, layout, smaller);
                assert_eq!(r, p, "{:?}: a realloc to {} moved", layout, smaller);
                assert_eq!(first_wrong_kept(r, size, smaller, align + size), None);
                Brisk.dealloc(r, Layout::from_size_align(smaller, align).unwrap());
            }
        }
    }
}

extern "C" {
    fn mincore(addr: *mut std::os::raw::c_void, length: usize, vec: *mut u8) -> i32;
}

/// Pages of [p, p + size) that are resident.
unsafe fn resident_pages(p: *mut u8, size: usize) -> usize {
    let page = 4096usize;
    let start = (p as usize) & !(page - 1);
    let len = p as usize + size - start;
    let mut vec = vec![0u8; (len + page - 1) / page + 1];
    // SAFETY: [start, start + len) is mapped (the block's pages).
    assert_eq!(
        mincore(start as *mut std::os::raw::c_void, len, vec.as_mut_ptr()),
        0
    );
    vec.iter().filter(|&&b| b & 1 != 0).count()
}

#[test]
fn over_aligned_zeroed_huge_blocks_are_not_written() {
    // brisk_calloc_aligned leaves the pages of a fresh mapping alone (the
    // kernel zeroes them); writing zeros would make each one resident.
    let _serial = common::serial();
    for &align in &[64usize, 4096, 1 << 21] {
        brisk::collect(); // no cached block: a fresh mapping
        let size = 64 << 20;
        let layout = Layout::from_size_align(size, align).unwrap();
        // SAFETY: a valid layout; read within it; freed once.
        unsafe {
            let p = Brisk.alloc_zeroed(layout);
            check_block(p, layout);
            let touched = resident_pages(p, size) * 4096;
            assert!(
                touched < size / 16,
                "{:?}: {} bytes of a fresh zeroed block are resident",
                layout,
                touched
            );
            assert_eq!((*p, *p.add(size / 2), *p.add(size - 1)), (0, 0, 0));
            Brisk.dealloc(p, layout);
        }
    }
}
