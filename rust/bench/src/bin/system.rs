//! The benchmark on the system allocator (glibc's malloc).
#[global_allocator]
static GLOBAL: std::alloc::System = std::alloc::System;

fn main() {
    brisk_bench::main("system")
}
