//! The benchmark on jemalloc (the tikv-jemallocator crate).
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    brisk_bench::main("jemalloc")
}
