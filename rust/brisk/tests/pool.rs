//! brisk::Pool<T>: typed slots, values dropped with their boxes, bounded
//! pools, over-aligned and zero-sized types, slots returned by other
//! threads.
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;

use brisk::{Error, Pool, PoolBox};

struct Counted(Arc<AtomicUsize>, u64);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn values_live_in_slots_and_drop_with_their_boxes() {
    let pool = Pool::<Counted>::new().unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    let boxes: Vec<_> = (0..5000)
        .map(|i| pool.alloc(Counted(drops.clone(), i)).ok().unwrap())
        .collect();
    let st = pool.stats();
    assert_eq!(st.live_objects, 5000);
    assert!(st.object_size >= std::mem::size_of::<Counted>());
    assert!(st.capacity >= 5000);
    assert!(boxes
        .iter()
        .enumerate()
        .all(|(i, b)| b.1 == i as u64 && brisk::owns(&**b as *const Counted as *const u8)));
    let mut addrs: Vec<usize> = boxes
        .iter()
        .map(|b| &**b as *const Counted as usize)
        .collect();
    addrs.sort_unstable();
    addrs.dedup();
    assert_eq!(addrs.len(), 5000, "two boxes share a slot");
    drop(boxes);
    assert_eq!(drops.load(Ordering::SeqCst), 5000);
    let st = pool.stats();
    assert_eq!((st.live_objects, st.allocs, st.frees), (0, 5000, 5000));
    // into_inner moves the value out without dropping it.
    let b = pool.alloc(Counted(drops.clone(), 42)).ok().unwrap();
    let value = PoolBox::into_inner(b);
    assert_eq!((value.1, drops.load(Ordering::SeqCst)), (42, 5000));
    assert_eq!(pool.stats().live_objects, 0);
}

#[test]
fn a_bounded_pool_gives_the_value_back_when_full() {
    let pool = Pool::<[u64; 4]>::with_max_objects(100).unwrap();
    let mut boxes: Vec<_> = (0..100).map(|i| pool.alloc([i; 4]).ok().unwrap()).collect();
    assert_eq!(pool.alloc([7; 4]).err(), Some([7; 4]));
    assert_eq!(pool.stats().exhausted, 1);
    boxes.pop();
    let again = pool.alloc([9; 4]).ok().unwrap();
    assert_eq!(*again, [9; 4]);
    assert!(boxes.iter().enumerate().all(|(i, b)| **b == [i as u64; 4]));
}

#[test]
fn over_aligned_and_zero_sized_types() {
    #[repr(align(4096))]
    struct Page([u8; 100]);
    let pages = Pool::<Page>::new().unwrap();
    let boxes: Vec<_> = (0..50)
        .map(|i| pages.alloc(Page([i; 100])).ok().unwrap())
        .collect();
    for (i, b) in boxes.iter().enumerate() {
        assert_eq!(&**b as *const Page as usize % 4096, 0);
        assert!(b.0.iter().all(|&x| x == i as u8));
    }
    assert_eq!(pages.stats().alignment, 4096);
    let units = Pool::<()>::new().unwrap();
    let u = units.alloc(()).ok().unwrap();
    assert_eq!(*u, ());
    assert_eq!(units.stats().live_objects, 1);
}

#[test]
fn types_a_pool_cannot_hold_are_refused() {
    #[repr(align(32768))]
    struct TooAligned;
    assert_eq!(
        Pool::<[u8; 2 << 20]>::new().err(),
        Some(Error::InvalidArgument)
    );
    assert_eq!(
        Pool::<TooAligned>::new().err(),
        Some(Error::InvalidArgument)
    );
    assert!(Pool::<[u8; 1 << 20]>::new().is_ok());
}

#[test]
fn slots_are_returned_by_other_threads() {
    let pool = Pool::<(usize, String)>::new().unwrap();
    thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::channel::<PoolBox<'_, (usize, String)>>();
        let pool = &pool;
        let producers: Vec<_> = (0..4)
            .map(|t| {
                let tx = tx.clone();
                s.spawn(move || {
                    for i in 0..5000 {
                        let n = t * 5000 + i;
                        tx.send(pool.alloc((n, n.to_string())).ok().unwrap())
                            .unwrap();
                    }
                })
            })
            .collect();
        drop(tx);
        let consumer = s.spawn(move || {
            rx.into_iter()
                .map(|b| {
                    assert_eq!(b.1, b.0.to_string());
                    assert!(std::ptr::eq(PoolBox::pool(&b), pool));
                })
                .count()
        });
        for p in producers {
            p.join().unwrap();
        }
        assert_eq!(consumer.join().unwrap(), 20_000);
    });
    let st = pool.stats();
    assert_eq!((st.allocs, st.frees, st.live_objects), (20_000, 20_000, 0));
}

#[test]
fn dropping_the_pool_frees_forgotten_slots() {
    let pool = Pool::<[u8; 256]>::new().unwrap();
    for _ in 0..1000 {
        std::mem::forget(pool.alloc([1; 256]).ok().unwrap());
    }
    assert_eq!(pool.stats().live_objects, 1000);
    assert!(pool.stats().bytes_held >= 256_000);
    drop(pool);
}
