//! The benchmark on brisk.
#[global_allocator]
static GLOBAL: brisk::Brisk = brisk::Brisk;

fn main() {
    brisk_bench::main("brisk")
}
