//! Builds brisk's C core with the cc crate: the sources CMakeLists.txt lists
//! in BRISK_CORE_SOURCES (everything but the malloc and new/delete
//! overrides), with its compile flags, into one static archive.
//!
//! Where the C sources come from, first found:
//!   1. `$BRISK_SOURCE_DIR` (a brisk checkout),
//!   2. `../..` (this crate inside the brisk repository),
//!   3. `csrc/` beside this file (a packaged crate: `rust/package.sh` copies
//!      CMakeLists.txt, cmake/, include/ and src/ there).
//!
//! The objects are linked into one relocatable object (`cc -r`) whose hidden
//! symbols are then made local (`objcopy --localize-hidden`), as CMake's
//! `brisk_archive` does: a program sees only the `brisk_*` API, and the
//! object that holds the constructor and the fork handlers
//! (src/api/process.c, which nothing refers to) comes along with the rest.
//!
//! The `dynamic-tls` feature compiles the core with the global-dynamic TLS
//! model (`-ftls-model` and `BRISK_TLS_MODEL`) instead of initial-exec.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The C library's version, from `project(brisk VERSION x.y.z ...)`.
fn cmake_version(cmake: &str) -> String {
    let at = cmake
        .find("project(brisk VERSION ")
        .expect("CMakeLists.txt: no `project(brisk VERSION x.y.z`");
    let rest = &cmake[at + "project(brisk VERSION ".len()..];
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    rest[..end].to_string()
}

/// The file names of `set(BRISK_CORE_SOURCES ...)`.
fn cmake_core_sources(cmake: &str) -> Vec<String> {
    let at = cmake
        .find("set(BRISK_CORE_SOURCES")
        .expect("CMakeLists.txt: no `set(BRISK_CORE_SOURCES`");
    let rest = &cmake[at + "set(BRISK_CORE_SOURCES".len()..];
    let end = rest
        .find(')')
        .expect("CMakeLists.txt: BRISK_CORE_SOURCES not closed");
    let sources: Vec<String> = rest[..end].split_whitespace().map(str::to_string).collect();
    assert!(
        sources.iter().all(|s| s.ends_with(".c")) && !sources.is_empty(),
        "CMakeLists.txt: BRISK_CORE_SOURCES holds something other than .c files: {:?}",
        sources
    );
    sources
}

fn source_root(manifest_dir: &Path) -> PathBuf {
    let is_root =
        |p: &Path| p.join("CMakeLists.txt").is_file() && p.join("include/brisk.h").is_file();
    if let Some(dir) = env::var_os("BRISK_SOURCE_DIR") {
        let dir = PathBuf::from(dir);
        assert!(
            is_root(&dir),
            "BRISK_SOURCE_DIR={} is not a brisk checkout",
            dir.display()
        );
        return dir;
    }
    let repo = manifest_dir.join("../..");
    if is_root(&repo) {
        return repo.canonicalize().unwrap_or(repo);
    }
    let vendored = manifest_dir.join("csrc");
    assert!(
        is_root(&vendored),
        "brisk's C sources are neither at {} nor at {}: set BRISK_SOURCE_DIR to a brisk checkout",
        repo.display(),
        vendored.display()
    );
    vendored
}

/// brisk_version.h from cmake/brisk_version.h.in, as CMake's configure_file.
fn write_version_header(root: &Path, version: &str, include_dir: &Path) {
    let parts: Vec<&str> = version.split('.').collect();
    assert!(
        parts.len() == 3,
        "version {} is not MAJOR.MINOR.PATCH",
        version
    );
    let template = fs::read_to_string(root.join("cmake/brisk_version.h.in"))
        .expect("cannot read cmake/brisk_version.h.in");
    let header = template
        .replace("@PROJECT_VERSION_MAJOR@", parts[0])
        .replace("@PROJECT_VERSION_MINOR@", parts[1])
        .replace("@PROJECT_VERSION_PATCH@", parts[2])
        .replace("@PROJECT_VERSION@", version);
    fs::write(include_dir.join("brisk_version.h"), header).expect("cannot write brisk_version.h");
    fs::copy(root.join("include/brisk.h"), include_dir.join("brisk.h"))
        .expect("cannot copy brisk.h");
}

fn run(cmd: &mut Command) -> Result<(), String> {
    match cmd.status() {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(format!("{:?} exited with {}", cmd, s)),
        Err(e) => Err(format!("{:?} could not run: {}", cmd, e)),
    }
}

/// objcopy beside the C compiler: `aarch64-linux-gnu-gcc` gives
/// `aarch64-linux-gnu-objcopy`, clang `llvm-objcopy` or `objcopy`.
fn objcopy_for(compiler: &Path) -> Vec<PathBuf> {
    if let Some(o) = env::var_os("OBJCOPY") {
        return vec![PathBuf::from(o)];
    }
    let name = compiler.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let mut tools = Vec::new();
    for driver in ["gcc", "cc", "clang"] {
        if let Some(prefix) = name.strip_suffix(driver) {
            if !prefix.is_empty() {
                tools.push(compiler.with_file_name(format!("{}objcopy", prefix)));
                tools.push(PathBuf::from(format!("{}objcopy", prefix)));
            }
        }
    }
    tools.push(PathBuf::from("objcopy"));
    tools.push(PathBuf::from("llvm-objcopy"));
    tools
}

fn main() {
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").unwrap());
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").unwrap());
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=BRISK_SOURCE_DIR");
    println!("cargo:rerun-if-env-changed=OBJCOPY");

    let target_os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    assert!(
        target_os == "linux",
        "brisk runs on Linux only (target OS: {})",
        target_os
    );

    let root = source_root(&manifest_dir);
    for watched in [
        "CMakeLists.txt",
        "cmake/brisk_version.h.in",
        "include",
        "src",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }
    let cmake =
        fs::read_to_string(root.join("CMakeLists.txt")).expect("cannot read CMakeLists.txt");
    let version = cmake_version(&cmake);
    let crate_version = env::var("CARGO_PKG_VERSION").unwrap();
    assert!(
        version == crate_version,
        "brisk-sys is {} but the C library (CMakeLists.txt) is {}: the crates follow the C \
         library's version, set it in rust/brisk-sys/Cargo.toml and rust/brisk/Cargo.toml",
        crate_version,
        version
    );

    let include_dir = out_dir.join("include");
    fs::create_dir_all(&include_dir).unwrap();
    write_version_header(&root, &version, &include_dir);

    // checked implies secure: the checked library has the secure library's
    // protections (src/core/types.h).
    let checked = env::var_os("CARGO_FEATURE_CHECKED").is_some();
    let secure = env::var_os("CARGO_FEATURE_SECURE").is_some();
    let variant = if checked {
        "checked"
    } else if secure {
        "secure"
    } else {
        "release"
    };

    // The TLS model (src/os/os.h): initial-exec, unless the library is to
    // be loaded late with dlopen.
    let (tls_model, tls_flag) = if env::var_os("CARGO_FEATURE_DYNAMIC_TLS").is_some() {
        ("global-dynamic", "-ftls-model=global-dynamic")
    } else {
        ("initial-exec", "-ftls-model=initial-exec")
    };

    let mut build = cc::Build::new();
    for source in cmake_core_sources(&cmake) {
        build.file(root.join(source));
    }
    // CMakeLists.txt: BRISK_C_FLAGS, C11 with GNU extensions, _GNU_SOURCE,
    // and CMake's Release optimisation whatever Cargo's profile is: the
    // allocator of a debug build should not be the slow part of it.
    build
        .include(root.join("include"))
        .include(&include_dir)
        .include(root.join("src"))
        .define("_GNU_SOURCE", None)
        .define("NDEBUG", None)
        .define("BRISK_TLS_MODEL", tls_model)
        .opt_level(3)
        .pic(true)
        .warnings(true)
        .extra_warnings(true)
        .flag("-std=gnu11")
        .flag("-Wno-unused-parameter")
        .flag("-fvisibility=hidden")
        .flag(tls_flag)
        .flag("-fno-builtin-malloc")
        .flag("-fno-builtin-free")
        .flag("-fno-builtin-calloc")
        .flag("-fno-builtin-realloc")
        .flag("-fexceptions")
        // (As CMakeLists.txt: the fast paths' speed must not hang on where
        // the linker puts them.)
        .flag("-falign-functions=64")
        // No SIGSEGV handler of brisk's (src/extra/guard_fault.c): the Rust
        // runtime installs its own, which reports a stack overflow, only
        // where SIGSEGV is still at its default, and brisk's constructor
        // runs first.
        .define("BRISK_GUARD_FAULT_HANDLER", "0");
    if checked {
        // Its stacks need a frame pointer (CMakeLists.txt says why).
        build.define("BRISK_CHECKED", "1").flag("-fno-omit-frame-pointer");
    } else if secure {
        build.define("BRISK_SECURE", "1");
    }
    let objects = build.compile_intermediates();

    // One relocatable object of them all, its hidden symbols made local.
    let compiler = build.get_compiler();
    let combined = out_dir.join("brisk-all.o");
    let mut link = compiler.to_command();
    link.arg("-r")
        .arg("-nostdlib")
        .arg("-o")
        .arg(&combined)
        .args(&objects);
    if let Err(e) = run(&mut link) {
        panic!("partial link of brisk's objects failed: {}", e);
    }
    let localized = objcopy_for(compiler.path())
        .into_iter()
        .any(|tool| run(Command::new(tool).arg("--localize-hidden").arg(&combined)).is_ok());
    if !localized {
        println!(
            "cargo:warning=brisk-sys: no objcopy (set OBJCOPY): brisk's internal symbols stay global"
        );
    }
    cc::Build::new().object(&combined).compile("brisk_sys_core");

    // For the build scripts of crates that depend on this one (links =
    // "brisk"): DEP_BRISK_INCLUDE holds brisk.h and brisk_version.h.
    println!("cargo:include={}", include_dir.display());
    println!("cargo:version={}", version);
    println!("cargo:variant={}", variant);
    println!("cargo:tls_model={}", tls_model);
}
