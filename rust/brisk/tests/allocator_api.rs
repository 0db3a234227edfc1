//! Nightly, `--features allocator_api`: collections in a Heap, and Brisk as
//! an allocator object.
#![cfg(feature = "allocator_api")]
#![feature(allocator_api)]

use brisk::{Brisk, Heap};

#[test]
fn a_vec_and_a_box_in_a_heap() {
    let heap = Heap::new().unwrap();
    let mut v: Vec<u64, &Heap> = Vec::new_in(&heap);
    for i in 0..100_000 {
        v.push(i);
    }
    assert!(v.iter().enumerate().all(|(i, &x)| x == i as u64));
    assert!(heap.held_bytes() >= 100_000 * 8);
    v.truncate(10);
    v.shrink_to_fit();
    assert_eq!(v, (0..10).collect::<Vec<u64>>());
    let b = Box::new_in([3u8; 5000], &heap);
    assert!(brisk::owns(b.as_ptr()));
    #[repr(align(4096))]
    struct Page(u8);
    let mut pages: Vec<Page, &Heap> = Vec::new_in(&heap);
    for i in 0..100 {
        pages.push(Page(i));
        assert_eq!(pages.as_ptr() as usize % 4096, 0);
    }
    assert!(pages.iter().enumerate().all(|(i, p)| p.0 == i as u8));
}

#[test]
fn brisk_as_an_allocator_object() {
    let mut v: Vec<String, Brisk> = Vec::new_in(Brisk);
    v.extend((0..1000).map(|i| i.to_string()));
    assert!(brisk::owns(v.as_ptr() as *const u8));
    assert_eq!(v[999], "999");
}

#[test]
fn grow_and_shrink_to_another_alignment() {
    use std::alloc::{Allocator, Layout};
    let heap = Heap::new().unwrap();
    let layouts = [
        Layout::from_size_align(100, 8).unwrap(),
        Layout::from_size_align(5000, 4096).unwrap(),
        Layout::from_size_align(3 << 20, 64).unwrap(),
        Layout::from_size_align(40, 256).unwrap(),
    ];
    fn walk<A: Allocator>(a: A, layouts: &[Layout]) {
        let mut old = layouts[0];
        let p = a.allocate(old).unwrap().cast::<u8>();
        // SAFETY: p is the live block of `old` at each step; its first
        // min(old, new) bytes are kept and read.
        unsafe {
            for i in 0..old.size() {
                *p.as_ptr().add(i) = i as u8;
            }
            let mut p = p;
            for &new in &layouts[1..] {
                let q = if new.size() >= old.size() {
                    a.grow(p, old, new)
                } else {
                    a.shrink(p, old, new)
                }
                .unwrap()
                .cast::<u8>();
                assert_eq!(q.as_ptr() as usize % new.align(), 0, "{:?}", new);
                for i in 0..old.size().min(new.size()) {
                    assert_eq!(*q.as_ptr().add(i), i as u8, "{:?} -> {:?}", old, new);
                }
                for i in old.size().min(new.size())..new.size() {
                    *q.as_ptr().add(i) = i as u8;
                }
                p = q;
                old = new;
            }
            a.deallocate(p, old);
        }
    }
    walk(&heap, &layouts);
    walk(Brisk, &layouts);
}
