//! The process-wide calls: version, ownership, usable size, options, the
//! statistics as JSON, heap checks, collect.
use std::alloc::{GlobalAlloc, Layout};
use std::process::Command;

use brisk::{Brisk, Error, Opt};

#[test]
fn the_linked_library_is_the_crates_version() {
    assert_eq!(brisk::version(), env!("CARGO_PKG_VERSION"));
    assert_eq!(brisk::sys::VERSION, env!("CARGO_PKG_VERSION"));
}

#[test]
fn ownership_and_usable_size() {
    let on_stack = 5u64;
    assert!(!brisk::owns(std::ptr::null()));
    assert!(!brisk::owns(&on_stack as *const u64 as *const u8));
    // SAFETY: null and a stack address are not brisk's: 0.
    unsafe {
        assert_eq!(brisk::usable_size(std::ptr::null()), 0);
        assert_eq!(brisk::usable_size(&on_stack as *const u64 as *const u8), 0);
    }
    let layout = Layout::from_size_align(100, 8).unwrap();
    // SAFETY: a valid layout, freed once.
    unsafe {
        let p = Brisk.alloc(layout);
        assert!(brisk::owns(p) && brisk::owns(p.add(99)));
        let usable = brisk::usable_size(p);
        assert!(
            if brisk::sys::CHECKED {
                usable == 100
            } else {
                usable >= 100
            },
            "{}",
            usable
        );
        Brisk.dealloc(p, layout);
    }
}

#[test]
fn options_read_back_what_was_set_and_refuse_out_of_range() {
    assert_eq!(Opt::PurgeDelayMs.env_name(), "BRISK_PURGE_DELAY_MS");
    assert_eq!(Opt::BackgroundPurge.env_name(), "BRISK_BACKGROUND_PURGE");
    let old = Opt::PurgeDelayMs.get();
    assert_eq!(Opt::PurgeDelayMs.set(1234), Ok(()));
    assert_eq!(Opt::PurgeDelayMs.get(), 1234);
    assert_eq!(Opt::PurgeDelayMs.set(-1), Err(Error::InvalidArgument));
    assert_eq!(
        Opt::PurgeDelayMs.set(3_600_001),
        Err(Error::InvalidArgument)
    );
    assert_eq!(Opt::PurgeDelayMs.get(), 1234);
    Opt::PurgeDelayMs.set(old).unwrap();
}

#[test]
fn statistics_as_json() {
    let json = brisk::stats_json();
    assert!(
        json.starts_with('{') && json.trim_end().ends_with('}'),
        "{}",
        json
    );
    assert!(json.contains("\"heaps\""), "{}", json);
    assert!(!json.contains('\0'));
}

/// Allocates `size` bytes from Brisk, writes them all, frees them.
fn alloc_write_free(size: usize) {
    let layout = Layout::from_size_align(size, 8).unwrap();
    // SAFETY: a valid layout, written within it and freed once.
    unsafe {
        let p = Brisk.alloc(layout);
        assert!(!p.is_null());
        std::ptr::write_bytes(p, 1, layout.size());
        Brisk.dealloc(p, layout);
    }
}

#[test]
fn the_heap_checks_out_and_collect_returns_cached_memory() {
    alloc_write_free(32 << 20);
    assert_eq!(brisk::check_heap(), Ok(()));
    let before = brisk::stats();
    brisk::collect();
    let after = brisk::stats();
    // The freed 32 MiB block waited in the cache; collect unmapped it.
    assert!(before.cached() >= 32 << 20, "{} cached", before.cached());
    assert!(
        after.mapped() + (32 << 20) <= before.mapped(),
        "mapped {} -> {}",
        before.mapped(),
        after.mapped()
    );
    assert_eq!(brisk::check_heap(), Ok(()));
}

#[test]
fn a_threads_freed_blocks_kept_for_reuse_are_counted() {
    std::thread::spawn(|| {
        let layout = Layout::from_size_align(8000, 8).unwrap();
        // SAFETY: a valid layout; each block freed once.
        unsafe {
            let blocks: Vec<*mut u8> = (0..4).map(|_| Brisk.alloc(layout)).collect();
            assert!(blocks.iter().all(|p| !p.is_null()));
            for p in blocks {
                Brisk.dealloc(p, layout);
            }
        }
        let after = brisk::stats().thread_cached();
        if cfg!(feature = "checked") {
            // The checked library frees at once: it keeps no hot list.
            assert_eq!(after, 0);
        } else {
            // A fresh thread's blocks of 8000 bytes (a class of 8 KiB) wait on
            // its hot list (other tests' threads may add theirs).
            assert!(after >= 4 * 8000, "{}", after);
        }
    })
    .join()
    .unwrap();
}

/// Run by itself in the child process of the next test (and harmless here).
#[test]
fn child_allocates() {
    alloc_write_free(1 << 20);
}

#[test]
fn brisks_constructor_is_linked() {
    // brisk's constructor (src/api/process.c, which nothing calls by name)
    // registers the fork handlers and the report at exit: a child asked
    // for BRISK_STATS_JSON writes it only when the constructor was linked.
    let json = std::env::temp_dir().join(format!("brisk-rust-api-{}.json", std::process::id()));
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_allocates", "--test-threads=1"])
        .env("BRISK_STATS_JSON", &json)
        .env_remove("BRISK_REPORT_ROOT")
        .env_remove("BRISK_REPORT_CHILDREN")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&json)
        .expect("no statistics at exit: brisk's constructor is not linked");
    std::fs::remove_file(&json).unwrap();
    assert!(
        text.contains("\"requested\"") && text.contains("\"heaps\""),
        "{}",
        text
    );
}
