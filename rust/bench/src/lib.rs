//! The workloads of the Rust benchmark, run on whatever the binary's global
//! allocator is (src/bin/*.rs: system, brisk, mimalloc, jemalloc).
//!
//! `target/release/<allocator> <workload> <threads> [scale]` runs one workload on
//! that many threads, each doing the same work, and prints one line:
//! `allocator workload threads milliseconds peak_rss_kib` (tab-separated).
//! The time runs from the moment every thread is ready to the moment the
//! last one is done. rust/bench/run.sh runs them all and makes the table.

use std::collections::{BTreeMap, HashMap};
use std::hint::black_box;
use std::sync::{mpsc, Arc, Barrier};
use std::thread;
use std::time::Instant;

/// xorshift64*: the same random sequence on every allocator.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Vec: rounds of 256 vectors grown by push to random lengths (0-511
/// u64s: realloc after realloc), then all dropped.
fn vec_churn(rng: &mut Rng, work: u64) {
    for _ in 0..work * 80 {
        let mut all: Vec<Vec<u64>> = Vec::new();
        for _ in 0..256 {
            let len = rng.below(512);
            let mut v = Vec::new();
            for j in 0..len {
                v.push(j);
            }
            all.push(v);
        }
        black_box(&all);
    }
}

/// String: a ring of 4096 strings; each step replaces a random one with a
/// new string of 1-24 formatted pieces (`push_str`, `format!`).
fn string_churn(rng: &mut Rng, work: u64) {
    let mut ring: Vec<String> = vec![String::new(); 4096];
    for _ in 0..work * 10_000 {
        let slot = rng.below(4096) as usize;
        let mut s = String::new();
        for piece in 0..1 + rng.below(24) {
            s.push_str(&format!("{}:{} ", piece, rng.next() % 100_000));
        }
        ring[slot] = s;
    }
    black_box(&ring);
}

/// HashMap: rounds that insert 10 000 random keys with short String values,
/// remove half of them, look the rest up, and drop the map.
fn hashmap_churn(rng: &mut Rng, work: u64) {
    for _ in 0..work * 9 {
        let mut map: HashMap<u64, String> = HashMap::new();
        let keys: Vec<u64> = (0..10_000).map(|_| rng.next()).collect();
        for &k in &keys {
            map.insert(k, format!("value {}", k % 1000));
        }
        for k in keys.iter().step_by(2) {
            map.remove(k);
        }
        let found = keys.iter().filter(|k| map.contains_key(k)).count();
        black_box(found);
    }
}

/// BTreeMap: about 20 000 entries of Vec<u8> (8-135 bytes); each step
/// inserts a random key and removes another.
fn btreemap_churn(rng: &mut Rng, work: u64) {
    let mut map: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    for _ in 0..work * 60_000 {
        let k = rng.below(40_000);
        map.insert(k, vec![k as u8; 8 + (k % 128) as usize]);
        map.remove(&rng.below(40_000));
    }
    black_box(map.len());
}

/// Blocks handed between threads: each thread sends batches of Vec<u8>
/// (16-2047 bytes) and Strings to the next thread in a ring, which drops
/// them: every block is freed by a thread that did not allocate it.
fn cross_thread(threads: usize, work: u64, start: &Arc<Barrier>) -> Vec<thread::JoinHandle<()>> {
    let (senders, receivers): (Vec<_>, Vec<_>) = (0..threads)
        .map(|_| mpsc::sync_channel::<Vec<(Vec<u8>, String)>>(64))
        .unzip();
    let mut handles = Vec::new();
    for (t, rx) in receivers.into_iter().enumerate() {
        let tx = senders[(t + 1) % threads].clone();
        let start = start.clone();
        handles.push(thread::spawn(move || {
            let mut rng = Rng::new(t as u64 + 1);
            start.wait();
            let batches = work * 400;
            for _ in 0..batches {
                let batch: Vec<(Vec<u8>, String)> = (0..64)
                    .map(|_| {
                        let n = 16 + rng.below(2032) as usize;
                        (vec![t as u8; n], (rng.next() % 1_000_000).to_string())
                    })
                    .collect();
                tx.send(batch).unwrap();
                // Drop what the previous thread sent (as many batches).
                black_box(rx.recv().unwrap());
            }
        }));
    }
    handles
}

/// What each thread of a workload runs, given its work units.
type Workload = fn(&mut Rng, u64);

/// The workloads run on every thread alike, by name.
const WORKLOADS: &[(&str, Workload)] = &[
    ("vec", vec_churn),
    ("string", string_churn),
    ("hashmap", hashmap_churn),
    ("btreemap", btreemap_churn),
];

fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Runs `workload` on `threads` threads; `scale` multiplies the work.
pub fn main(allocator: &str) {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!(
            "usage: {} WORKLOAD THREADS [SCALE]   (workloads: vec string hashmap btreemap xthread)",
            args[0]
        );
        std::process::exit(2);
    }
    let workload = args[1].as_str();
    let threads: usize = args[2].parse().expect("THREADS: a number");
    let scale: f64 = args
        .get(3)
        .map_or(1.0, |s| s.parse().expect("SCALE: a number"));
    let work = ((10.0 * scale).round() as u64).max(1);
    // xthread hands blocks around a ring: two threads at least.
    let threads = if workload == "xthread" {
        threads.max(2)
    } else {
        threads
    };
    let start = Arc::new(Barrier::new(threads + 1));
    let handles = if workload == "xthread" {
        cross_thread(threads, work, &start)
    } else {
        let run = WORKLOADS
            .iter()
            .find(|(name, _)| *name == workload)
            .unwrap_or_else(|| panic!("unknown workload {}", workload))
            .1;
        (0..threads)
            .map(|t| {
                let start = start.clone();
                thread::spawn(move || {
                    let mut rng = Rng::new(t as u64 + 1);
                    start.wait();
                    run(&mut rng, work);
                })
            })
            .collect()
    };
    start.wait();
    let t0 = Instant::now();
    for h in handles {
        h.join().unwrap();
    }
    let ms = t0.elapsed().as_secs_f64() * 1000.0;
    println!(
        "{}\t{}\t{}\t{:.1}\t{}",
        allocator,
        workload,
        threads,
        ms,
        peak_rss_kib()
    );
}
