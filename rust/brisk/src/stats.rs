//! `brisk::stats()`: the process's allocator figures as a struct.

use std::os::raw::c_char;

use brisk_sys as sys;

/// The size tiers of brisk's blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tier {
    /// Up to 8 KiB, in 64 KiB pages.
    Small = 0,
    /// Up to 64 KiB, in 512 KiB pages.
    Medium = 1,
    /// Up to 1 MiB, in 4 MiB pages.
    Large = 2,
    /// Above 1 MiB: a mapping of its own.
    Huge = 3,
}

impl Tier {
    /// Every tier, smallest first.
    pub const ALL: [Tier; 4] = [Tier::Small, Tier::Medium, Tier::Large, Tier::Huge];
}

/// One tier's figures.
pub type TierStats = sys::brisk_tier_stats_t;

/// Live blocks of one size class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClassStats {
    /// The class's block size.
    pub size: usize,
    /// Blocks of it allocated and not yet freed.
    pub live_blocks: u64,
}

/// A snapshot of brisk's statistics ([`stats`]); see `brisk_stats_get` in
/// brisk.h for each figure. Blocks freed by another thread count as live
/// until their owner collects them, and figures other threads are changing
/// are approximate.
#[derive(Clone, Copy, Debug)]
pub struct Stats {
    raw: sys::brisk_stats_t,
}

impl Stats {
    /// Bytes asked of brisk so far, by every thread (cumulative).
    pub fn requested(&self) -> u64 {
        self.raw.requested
    }
    /// Bytes in live blocks (whole blocks, not requests).
    pub fn in_use(&self) -> usize {
        self.raw.in_use
    }
    /// Bytes of pages holding blocks or not yet purged.
    pub fn committed(&self) -> usize {
        self.raw.committed
    }
    /// Address space of brisk's segments.
    pub fn reserved(&self) -> usize {
        self.raw.reserved
    }
    /// Free segments and huge blocks kept warm (part of `reserved`).
    pub fn cached(&self) -> usize {
        self.raw.cached
    }
    /// The highest `reserved` so far.
    pub fn peak_reserved(&self) -> usize {
        self.raw.peak_reserved
    }
    /// Bytes mapped from the OS now.
    pub fn mapped(&self) -> usize {
        self.raw.mapped
    }
    /// Live blocks in every tier.
    pub fn live_blocks(&self) -> u64 {
        self.raw.tiers.iter().map(|t| t.live_blocks).sum()
    }
    /// One tier's live blocks, bytes in use, committed and reserved.
    pub fn tier(&self, tier: Tier) -> TierStats {
        self.raw.tiers[tier as usize]
    }
    /// The size classes with their live blocks, smallest first.
    pub fn classes(&self) -> impl Iterator<Item = ClassStats> + '_ {
        let n = (self.raw.class_count as usize).min(sys::BRISK_STATS_MAX_CLASSES);
        self.raw.class_size[..n]
            .iter()
            .zip(&self.raw.class_live_blocks[..n])
            .map(|(&size, &live_blocks)| ClassStats { size, live_blocks })
    }
    /// Live per-thread heaps.
    pub fn thread_heaps(&self) -> u32 {
        self.raw.thread_heaps
    }
    /// Live explicit heaps ([`crate::Heap`]).
    pub fn explicit_heaps(&self) -> u32 {
        self.raw.explicit_heaps
    }
    /// Threads that have exited since the start.
    pub fn threads_exited(&self) -> u64 {
        self.raw.threads_exited
    }
    /// Freed blocks threads keep for their next mallocs (free, not in use).
    pub fn thread_cached(&self) -> usize {
        self.raw.thread_cached
    }
    /// Segments of exited threads still holding blocks, and their bytes.
    pub fn abandoned(&self) -> (u32, usize) {
        (self.raw.abandoned_segments, self.raw.abandoned_bytes)
    }
    /// System calls: mmap, munmap, madvise, mremap.
    pub fn syscalls(&self) -> [u64; 4] {
        let r = &self.raw;
        [
            r.mmap_calls,
            r.munmap_calls,
            r.madvise_calls,
            r.mremap_calls,
        ]
    }
    /// Segment and huge-block recycling: hits and misses of the caches.
    pub fn cache_hits_misses(&self) -> (u64, u64) {
        (self.raw.cache_hits, self.raw.cache_misses)
    }
    /// The whole C struct.
    pub fn as_raw(&self) -> &sys::brisk_stats_t {
        &self.raw
    }
}

/// brisk's statistics now: what the process allocated through brisk (the
/// global allocator, heaps, pools), in use, mapped.
///
/// ```
/// let before = brisk::stats();
/// let heap = brisk::Heap::new().unwrap();
/// let block = heap.boxed([0u8; 4096]).unwrap();
/// let after = brisk::stats();
/// assert!(after.requested() >= before.requested() + 4096);
/// assert_eq!(after.explicit_heaps(), before.explicit_heaps() + 1);
/// # drop(block);
/// ```
pub fn stats() -> Stats {
    let mut raw = sys::brisk_stats_t::default();
    // SAFETY: raw is a writable brisk_stats_t with its version set.
    let rc = unsafe { sys::brisk_stats_get(&mut raw) };
    assert_eq!(
        rc,
        0,
        "brisk_stats_get refused version {}",
        sys::BRISK_STATS_VERSION
    );
    Stats { raw }
}

/// The statistics as brisk's JSON report.
pub fn stats_json() -> String {
    // SAFETY: a NULL buffer asks for the length only.
    let len = unsafe { sys::brisk_stats_json(core::ptr::null_mut(), 0) };
    // Figures may grow between the two calls: room to spare, then retry.
    let mut buf = vec![0u8; len + 256];
    loop {
        // SAFETY: buf is writable for buf.len() bytes.
        let need = unsafe { sys::brisk_stats_json(buf.as_mut_ptr() as *mut c_char, buf.len()) };
        if need < buf.len() {
            buf.truncate(need);
            return String::from_utf8_lossy(&buf).into_owned();
        }
        buf.resize(need + 256, 0);
    }
}

/// Prints brisk's statistics table on stderr.
pub fn print_stats() {
    // SAFETY: NULL selects stderr.
    unsafe { sys::brisk_stats_print(core::ptr::null_mut()) }
}
