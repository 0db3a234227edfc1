//! brisk::set_max_bytes caps what brisk maps: in a test binary of its own,
//! since the cap is the whole process's.
use std::alloc::{GlobalAlloc, Layout};

use brisk::Brisk;

#[test]
fn a_cap_on_mapped_memory_makes_allocation_fail_then_lifting_it_heals() {
    let big = Layout::from_size_align(256 << 20, 16).unwrap();
    let cap = brisk::mapped_bytes() + (64 << 20);
    brisk::set_max_bytes(cap);
    assert_eq!(brisk::max_bytes(), cap);
    // SAFETY: valid layouts; what is allocated is freed once.
    unsafe {
        assert!(
            Brisk.alloc(big).is_null(),
            "256 MiB allocated under a cap 64 MiB above what is mapped"
        );
        let small = Layout::from_size_align(1000, 8).unwrap();
        let p = Brisk.alloc(small);
        assert!(!p.is_null(), "a small block refused under the cap");
        Brisk.dealloc(p, small);
        brisk::set_max_bytes(0);
        let q = Brisk.alloc(big);
        assert!(!q.is_null());
        Brisk.dealloc(q, big);
    }
}
