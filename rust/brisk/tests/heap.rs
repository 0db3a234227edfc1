//! brisk::Heap: blocks of every alignment, boxes, realloc within the heap,
//! reset, bounds, destroy on drop, blocks freed by other threads.
mod common;

use std::alloc::Layout;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;

use brisk::{Error, Heap, HeapBox};
use common::{alignments, fill, first_wrong, first_wrong_kept, serial};

#[test]
fn blocks_of_every_alignment_and_tier() {
    let _serial = serial();
    let heap = Heap::new().unwrap();
    let mut live = Vec::new();
    for (seed, &align) in alignments().iter().enumerate() {
        for &size in &[1usize, 24, 1000, 9000, 70_000, 1 << 20, 3 << 20] {
            let layout = Layout::from_size_align(size, align).unwrap();
            let p = heap.alloc(layout).expect("heap allocation").as_ptr();
            assert_eq!(p as usize % align, 0, "{:?}", layout);
            assert!(brisk::owns(p));
            // SAFETY: p holds size bytes.
            unsafe { fill(p, size, seed + size) };
            live.push((p, layout, seed + size));
        }
    }
    assert!(heap.held_bytes() >= live.iter().map(|(_, l, _)| l.size()).sum::<usize>());
    for (p, layout, seed) in live {
        // SAFETY: p is a live block of this heap, freed once.
        unsafe {
            assert_eq!(first_wrong(p, layout.size(), seed), None, "{:?}", layout);
            heap.dealloc(std::ptr::NonNull::new_unchecked(p), layout);
        }
    }
}

#[test]
fn zeroed_and_reallocated_blocks() {
    let _serial = serial();
    let heap = Heap::new().unwrap();
    for &align in &[8usize, 16, 64, 4096] {
        let mut layout = Layout::from_size_align(10, align).unwrap();
        let mut p = heap.alloc_zeroed(layout).unwrap();
        // SAFETY: p holds 10 zeroed bytes; each realloc keeps p the live
        // block of `layout`.
        unsafe {
            assert!(std::slice::from_raw_parts(p.as_ptr(), 10)
                .iter()
                .all(|&b| b == 0));
            fill(p.as_ptr(), 10, align);
            for &new_size in &[100usize, 5000, 80_000, 2 << 20, 300, 7] {
                let q = heap.realloc(p, layout, new_size).expect("heap realloc");
                assert_eq!(q.as_ptr() as usize % align, 0);
                assert_eq!(
                    first_wrong_kept(q.as_ptr(), layout.size(), new_size, align),
                    None
                );
                fill(q.as_ptr(), new_size, align);
                p = q;
                layout = Layout::from_size_align(new_size, align).unwrap();
            }
            heap.dealloc(p, layout);
        }
    }
}

#[test]
fn reset_empties_the_heap_for_reuse() {
    let _serial = serial();
    let mut heap = Heap::new().unwrap();
    for i in 0..10_000u64 {
        // Leaked on purpose: reset frees them.
        std::mem::forget(heap.boxed([i; 8]).unwrap());
    }
    std::mem::forget(heap.boxed(vec![0u8; 0]).unwrap());
    assert!(heap
        .alloc(Layout::from_size_align(4 << 20, 8).unwrap())
        .is_some());
    let full = heap.held_bytes();
    assert!(full >= 10_000 * 64 + (4 << 20));
    heap.reset();
    assert!(
        heap.held_bytes() < full / 4,
        "held {} after reset, {} before",
        heap.held_bytes(),
        full
    );
    let b = heap.boxed(String::from("after the reset")).unwrap();
    assert_eq!(b.as_str(), "after the reset");
}

#[test]
fn a_bounded_heap_refuses_past_its_bound() {
    let _serial = serial();
    let heap = Heap::new().unwrap();
    const BOUND: usize = 2 << 20;
    heap.set_max_bytes(BOUND);
    let mut boxes = Vec::new();
    let refused = loop {
        match heap.boxed([7u8; 1000]) {
            Ok(b) => boxes.push(b),
            Err(value) => break value,
        }
        assert!(boxes.len() < 100_000, "the bound is not enforced");
    };
    // The value comes back whole.
    assert_eq!(refused, [7u8; 1000]);
    assert!(heap.held_bytes() <= BOUND);
    assert!(
        boxes.len() * 1000 >= BOUND / 2,
        "refused after {} boxes",
        boxes.len()
    );
    assert!(heap
        .alloc(Layout::from_size_align(4 << 20, 8).unwrap())
        .is_none());
    drop(boxes);
    heap.set_max_bytes(0);
    assert!(heap.boxed([1u8; 1000]).is_ok());
}

#[test]
fn dropping_the_heap_destroys_it() {
    let _serial = serial();
    let before = brisk::stats().explicit_heaps();
    let heap = Heap::new().unwrap();
    let _block = heap
        .alloc(Layout::from_size_align(1 << 20, 8).unwrap())
        .unwrap();
    assert_eq!(brisk::stats().explicit_heaps(), before + 1);
    drop(heap);
    assert_eq!(brisk::stats().explicit_heaps(), before);
}

#[test]
fn boxes_drop_their_values_and_may_be_freed_on_other_threads() {
    let _serial = serial();
    let heap = Heap::new().unwrap();
    let strings: Vec<HeapBox<'_, String>> = (0..1000)
        .map(|i| heap.boxed(i.to_string()).unwrap())
        .collect();
    let zst = heap.boxed(()).unwrap();
    assert_eq!(*zst, ());
    let held = heap.held_bytes();
    thread::scope(|s| {
        let mut strings = strings;
        while !strings.is_empty() {
            let part: Vec<_> = strings.drain(..250.min(strings.len())).collect();
            s.spawn(move || {
                for b in part {
                    let n: usize = b.parse().unwrap();
                    assert_eq!(HeapBox::into_inner(b), n.to_string());
                }
            });
        }
    });
    assert!(heap.held_bytes() <= held);
    assert_eq!(HeapBox::into_inner(heap.boxed(5u64).unwrap()), 5);
    // A dropped box drops its value.
    let drops = Arc::new(AtomicUsize::new(0));
    let counted: Vec<_> = (0..100)
        .map(|_| heap.boxed(Counted(drops.clone())).unwrap())
        .collect();
    assert_eq!(drops.load(Ordering::SeqCst), 0);
    drop(counted);
    assert_eq!(drops.load(Ordering::SeqCst), 100);
}

#[derive(Debug)]
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn many_heaps_at_once() {
    let _serial = serial();
    // Many heaps at once, each usable, each destroyed.
    let heaps: Result<Vec<Heap>, Error> = (0..64).map(|_| Heap::new()).collect();
    let heaps = heaps.unwrap();
    for (i, h) in heaps.iter().enumerate() {
        assert_eq!(*h.boxed(i).unwrap(), i);
    }
}

#[test]
fn over_aligned_blocks_stay_in_place_and_zeroed_ones_are_zero() {
    let _serial = serial();
    let heap = Heap::new().unwrap();
    for &align in &[64usize, 4096, 1 << 20] {
        for &size in &[200usize, 9000, 300_000, 3 << 20] {
            let layout = Layout::from_size_align(size, align).unwrap();
            let p = heap.alloc_zeroed(layout).expect("heap calloc");
            assert_eq!(p.as_ptr() as usize % align, 0, "{:?}", layout);
            // SAFETY: p holds `size` bytes; the resized block as many (the
            // same size); freed once.
            unsafe {
                assert!(
                    std::slice::from_raw_parts(p.as_ptr(), size)
                        .iter()
                        .all(|&b| b == 0),
                    "{:?}: not zeroed",
                    layout
                );
                fill(p.as_ptr(), size, align);
                let q = heap.realloc(p, layout, size).expect("heap realloc");
                assert_eq!(q, p, "{:?}: a realloc to the same size moved", layout);
                heap.dealloc(q, layout);
            }
        }
    }
}
