//! A test binary whose global allocator is brisk: its collections come from
//! brisk, and brisk's statistics count them; Rust's System allocator is
//! still glibc's.
mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::{BTreeMap, HashMap};

use brisk::{Brisk, Tier};
use common::serial;

#[global_allocator]
static GLOBAL: Brisk = Brisk;

#[test]
fn collections_come_from_brisk() {
    let _serial = serial();
    let v: Vec<u64> = (0..1000).collect();
    let s = String::from("brisk serves this string");
    let b = Box::new([1u8; 100]);
    let mut h = HashMap::new();
    h.insert(7u32, String::from("seven"));
    let mut t = BTreeMap::new();
    t.insert(1u64, [0u8; 64]);
    assert!(brisk::owns(v.as_ptr() as *const u8));
    assert!(brisk::owns(s.as_ptr()));
    assert!(brisk::owns(b.as_ptr()));
    // The map's table and the string it holds.
    assert!(brisk::owns(
        h.get_key_value(&7).unwrap().0 as *const u32 as *const u8
    ));
    assert!(brisk::owns(h[&7].as_ptr()));
    // The value sits in a B-tree node.
    assert!(brisk::owns(t[&1].as_ptr()));
}

#[test]
fn the_system_allocator_stays_glibc() {
    let _serial = serial();
    // brisk-sys leaves out brisk's malloc override: System (glibc's malloc)
    // hands out memory brisk does not own.
    let layout = Layout::from_size_align(4096, 16).unwrap();
    // SAFETY: a valid layout; the block is freed by the allocator it came from.
    unsafe {
        let p = System.alloc(layout);
        assert!(!p.is_null());
        assert!(
            !brisk::owns(p),
            "System's block is brisk's: malloc is overridden"
        );
        System.dealloc(p, layout);
    }
}

#[test]
fn statistics_count_what_the_program_allocates() {
    let _serial = serial();
    const N: usize = 8 << 20;
    let before = brisk::stats();
    let mut v: Vec<u8> = Vec::with_capacity(N);
    v.resize(N, 1);
    let during = brisk::stats();
    assert!(during.requested() >= before.requested() + N as u64);
    let huge_before = before.tier(Tier::Huge);
    let huge = during.tier(Tier::Huge);
    assert!(huge.live_blocks > huge_before.live_blocks);
    assert!(huge.in_use >= huge_before.in_use + N);
    assert!(during.in_use() >= N && during.mapped() >= N);
    drop(v);
    let after = brisk::stats();
    assert!(after.tier(Tier::Huge).in_use + N <= huge.in_use);
    assert!(after.tier(Tier::Huge).live_blocks < huge.live_blocks);
}

#[test]
fn small_blocks_show_in_their_size_class() {
    let _serial = serial();
    let live = || brisk::stats().classes().collect::<Vec<_>>();
    let before = live();
    let boxes: Vec<Box<[u8; 48]>> = (0..1000).map(|_| Box::new([0u8; 48])).collect();
    let during = live();
    // The class that grew by the 1000 boxes (the checked library puts a
    // canary after each block, so it is not always the 48-byte class).
    // Figures are approximate (brisk.h) and the test harness's threads may
    // allocate meanwhile: margins.
    let (i, grown) = (0..during.len())
        .map(|i| {
            (
                i,
                during[i].live_blocks - before[i].live_blocks.min(during[i].live_blocks),
            )
        })
        .max_by_key(|&(_, d)| d)
        .unwrap();
    assert!(
        grown >= 950,
        "1000 boxes of 48 bytes: the most a class grew is {}",
        grown
    );
    assert!(during[i].size >= 48);
    drop(boxes);
    assert!(live()[i].live_blocks + 900 <= during[i].live_blocks);
}

#[test]
fn growing_a_vec_through_every_tier_keeps_its_contents() {
    let _serial = serial();
    let mut v: Vec<u32> = Vec::new();
    for i in 0..(3u32 << 20) {
        v.push(i);
    }
    assert!(v.iter().enumerate().all(|(i, &x)| x == i as u32));
    v.truncate(1000);
    v.shrink_to_fit();
    assert!(v.iter().enumerate().all(|(i, &x)| x == i as u32));
    assert!(brisk::owns(v.as_ptr() as *const u8));
}

#[test]
fn over_aligned_types_in_collections() {
    let _serial = serial();
    #[repr(align(4096))]
    struct Page([u8; 4096]);
    #[repr(align(64))]
    #[derive(Clone, Copy)]
    struct Line(u64);
    let pages: Vec<Page> = (0..10).map(|i| Page([i as u8; 4096])).collect();
    assert_eq!(pages.as_ptr() as usize % 4096, 0);
    assert!(pages
        .iter()
        .enumerate()
        .all(|(i, p)| p.0.iter().all(|&b| b == i as u8)));
    let mut lines = vec![Line(0); 3];
    for i in 0..100_000 {
        lines.push(Line(i));
        assert_eq!(lines.as_ptr() as usize % 64, 0);
    }
    assert_eq!(lines[3 + 99_999].0, 99_999);
}
