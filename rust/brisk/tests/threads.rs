//! Threads freeing each other's blocks, brisk being the global allocator:
//! collections built on one thread and dropped on another, raw blocks of
//! every alignment handed over, short threads leaving blocks behind.
mod common;

use std::alloc::{GlobalAlloc, Layout};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread;

use brisk::Brisk;
use common::{fill, first_wrong};

#[global_allocator]
static GLOBAL: Brisk = Brisk;

const PRODUCERS: usize = 4;
const CONSUMERS: usize = 4;
const MESSAGES: usize = 2000;

enum Message {
    Bytes(Vec<u8>, usize),
    Words(String, usize),
    Map(HashMap<usize, Vec<usize>>, usize),
    Tree(BTreeMap<usize, String>, usize),
}

fn make(seed: usize) -> Message {
    // Sizes from a few bytes to a 2 MiB huge block now and then.
    let size = match seed % 97 {
        0 => 2 << 20,
        n => 1 + (seed * 7919 + n) % 70_000,
    };
    match seed % 4 {
        0 => {
            let mut v = vec![0u8; size];
            // SAFETY: v holds size bytes.
            unsafe { fill(v.as_mut_ptr(), size, seed) };
            Message::Bytes(v, seed)
        }
        1 => Message::Words(
            (0..seed % 200).map(|i| format!("{} ", i * seed)).collect(),
            seed,
        ),
        2 => Message::Map(
            (0..seed % 300)
                .map(|i| (i, vec![i + seed; i % 13]))
                .collect(),
            seed,
        ),
        _ => Message::Tree(
            (0..seed % 300)
                .map(|i| (i, (i ^ seed).to_string()))
                .collect(),
            seed,
        ),
    }
}

/// Checks a message built by `make`, on another thread; drops it there.
fn check(m: Message) {
    match m {
        Message::Bytes(v, seed) => {
            assert!(brisk::owns(v.as_ptr()));
            // SAFETY: v holds v.len() bytes.
            assert_eq!(
                unsafe { first_wrong(v.as_ptr(), v.len(), seed) },
                None,
                "bytes {}",
                seed
            );
        }
        Message::Words(s, seed) => {
            let want: String = (0..seed % 200).map(|i| format!("{} ", i * seed)).collect();
            assert_eq!(s, want);
        }
        Message::Map(h, seed) => {
            assert_eq!(h.len(), seed % 300);
            assert!(h
                .iter()
                .all(|(&i, v)| v.len() == i % 13 && v.iter().all(|&x| x == i + seed)));
        }
        Message::Tree(t, seed) => {
            assert_eq!(t.len(), seed % 300);
            assert!(t.iter().all(|(&i, s)| *s == (i ^ seed).to_string()));
        }
    }
}

#[test]
fn collections_built_on_one_thread_are_dropped_on_another() {
    let (senders, receivers): (Vec<_>, Vec<_>) =
        (0..CONSUMERS).map(|_| mpsc::channel::<Message>()).unzip();
    let consumers: Vec<_> = receivers
        .into_iter()
        .map(|rx| thread::spawn(move || rx.into_iter().map(check).count()))
        .collect();
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let senders = senders.clone();
            thread::spawn(move || {
                for i in 0..MESSAGES {
                    let seed = p * MESSAGES + i;
                    senders[seed % CONSUMERS].send(make(seed)).unwrap();
                }
            })
        })
        .collect();
    drop(senders);
    for p in producers {
        p.join().unwrap();
    }
    let checked: usize = consumers.into_iter().map(|c| c.join().unwrap()).sum();
    assert_eq!(checked, PRODUCERS * MESSAGES);
    assert_eq!(brisk::check_heap(), Ok(()));
}

#[test]
fn raw_blocks_of_every_alignment_are_freed_by_other_threads() {
    let aligns: Vec<usize> = (0..=16).map(|s| 1usize << s).collect();
    let (tx, rx) = mpsc::channel::<(usize, Layout, usize)>();
    let freer = thread::spawn(move || {
        let mut n = 0;
        for (addr, layout, seed) in rx {
            let p = addr as *mut u8;
            // SAFETY: p is a live block of layout, handed over once.
            unsafe {
                assert_eq!(first_wrong(p, layout.size(), seed), None, "{:?}", layout);
                Brisk.dealloc(p, layout);
            }
            n += 1;
        }
        n
    });
    thread::scope(|s| {
        for t in 0..3 {
            let tx = tx.clone();
            let aligns = &aligns;
            s.spawn(move || {
                for i in 0..3000 {
                    let seed = t * 3000 + i;
                    let size = 1 + (seed * 131) % 20_000;
                    let layout =
                        Layout::from_size_align(size, aligns[seed % aligns.len()]).unwrap();
                    // SAFETY: a valid layout; the block is filled within its
                    // size, then owned by the freeing thread.
                    unsafe {
                        let p = Brisk.alloc(layout);
                        assert!(!p.is_null() && p as usize % layout.align() == 0);
                        fill(p, size, seed);
                        tx.send((p as usize, layout, seed)).unwrap();
                    }
                }
            });
        }
    });
    drop(tx);
    assert_eq!(freer.join().unwrap(), 9000);
}

#[test]
fn short_threads_leave_their_blocks_to_others() {
    let exited_before = brisk::stats().threads_exited();
    let mut kept = Vec::new();
    for round in 0..4 {
        let handles: Vec<_> = (0..8)
            .map(|t| {
                thread::spawn(move || {
                    let mut out: Vec<Vec<u64>> = (0..200)
                        .map(|i| vec![(round * 8 + t) as u64; i + 1])
                        .collect();
                    // Half of its blocks outlive the thread.
                    out.truncate(100);
                    out
                })
            })
            .collect();
        for h in handles {
            kept.push(h.join().unwrap());
        }
    }
    for (n, blocks) in kept.iter().enumerate() {
        assert!(blocks
            .iter()
            .enumerate()
            .all(|(i, b)| b.len() == i + 1 && b.iter().all(|&x| x == n as u64)));
    }
    drop(kept);
    // Every thread that allocated had a brisk heap, retired when it exited.
    assert!(brisk::stats().threads_exited() >= exited_before + 32);
    assert_eq!(brisk::check_heap(), Ok(()));
}

extern "C" {
    fn fork() -> i32;
    fn waitpid(pid: i32, status: *mut i32, options: i32) -> i32;
    fn alarm(seconds: u32) -> u32;
    fn _exit(status: i32) -> !;
}

#[test]
fn fork_while_other_threads_allocate() {
    // brisk's fork handlers take its locks around fork: a child forked
    // while other threads allocate finds none held, and allocates.
    let stop = AtomicBool::new(false);
    thread::scope(|s| {
        for t in 0..3usize {
            let stop = &stop;
            s.spawn(move || {
                let mut n = t;
                while !stop.load(Ordering::Relaxed) {
                    n = n.wrapping_mul(31).wrapping_add(7);
                    let v = vec![n as u8; 1 + n % 300_000];
                    let m: HashMap<usize, String> =
                        (0..n % 64).map(|i| (i, i.to_string())).collect();
                    std::hint::black_box((v, m));
                }
            });
        }
        for _ in 0..20 {
            // SAFETY: the child only allocates, checks and _exits; alarm
            // ends it should it hang on a lock held across the fork.
            let pid = unsafe { fork() };
            assert!(pid >= 0, "fork failed");
            if pid == 0 {
                unsafe { alarm(30) };
                let v: Vec<String> = (0..1000).map(|i| i.to_string()).collect();
                let big = vec![1u8; 3 << 20];
                let ok = v[999] == "999" && brisk::owns(v[5].as_ptr()) && big[(3 << 20) - 1] == 1;
                // SAFETY: ends the child without running the parent's
                // atexit handlers or test harness.
                unsafe { _exit(if ok { 0 } else { 1 }) }
            }
            let mut status = 0;
            // SAFETY: pid is our child; status is writable.
            assert_eq!(unsafe { waitpid(pid, &mut status, 0) }, pid);
            assert_eq!(status, 0, "the child failed (status {:#x})", status);
        }
        stop.store(true, Ordering::Relaxed);
    });
}
