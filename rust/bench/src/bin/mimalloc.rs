//! The benchmark on mimalloc (the mimalloc crate).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    brisk_bench::main("mimalloc")
}
