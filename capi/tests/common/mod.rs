//! Shared by the binding tests: where the built library is, compiling C
//! and Java programs, and the data pattern the programs also generate.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The crate directory.
pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The directory holding `libcv_capi.so` and `libcv_capi.a` of this build:
/// cargo leaves them in `deps/`, next to the test binary (and copies them
/// one level up on `cargo build`).
pub fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let deps = exe.parent().expect("deps directory");
    [Some(deps), deps.parent()]
        .into_iter()
        .flatten()
        .find(|d| d.join("libcv_capi.so").is_file() && d.join("libcv_capi.a").is_file())
        .unwrap_or_else(|| panic!("libcv_capi.so/.a not found next to {}", exe.display()))
        .to_path_buf()
}

/// The shared library.
pub fn shared_lib() -> PathBuf {
    lib_dir().join("libcv_capi.so")
}

/// The byte at offset `i` of every test file (the C and Java programs
/// compute the same).
pub fn pattern(i: u64) -> u8 {
    (i.wrapping_mul(2_654_435_761) >> 11) as u8
}

/// Runs a command and fails the test, showing its output, if it fails.
pub fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let show = format!(
        "{cmd:?}\n--- stdout\n{}\n--- stderr\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "failed: {show}");
    println!("{show}");
    out
}

/// Compiles `tests/c/<src>` with the system C compiler against cv.h and
/// the shared library (found at run time through an rpath).
pub fn compile_c(src: &str, out_dir: &Path, optimize: bool) -> PathBuf {
    let exe = out_dir.join(src.trim_end_matches(".c"));
    let lib = lib_dir();
    run(Command::new("cc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-D_POSIX_C_SOURCE=200809L"])
        .arg(if optimize { "-O2" } else { "-O0" })
        .arg("-I")
        .arg(crate_dir().join("include"))
        .arg(crate_dir().join("tests/c").join(src))
        .arg("-o")
        .arg(&exe)
        .arg("-L")
        .arg(&lib)
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        // DT_RPATH, not DT_RUNPATH: it wins over the LD_LIBRARY_PATH cargo sets for tests,
        // whose `target/debug` may hold a stale copy of the library from an older build.
        .arg("-Wl,--disable-new-dtags")
        .args(["-lcv_capi", "-lpthread"]));
    exe
}

/// Compiles the Java package and `tests/java/<main>.java` into `out_dir`.
/// Needs a JDK (`scripts/install-java` installs one).
pub fn compile_java(main: &str, out_dir: &Path) {
    let mut sources: Vec<PathBuf> = std::fs::read_dir(crate_dir().join("java/io/cv"))
        .expect("java sources")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "java"))
        .collect();
    sources.push(crate_dir().join("tests/java").join(format!("{main}.java")));
    run(Command::new("javac").args(["-Xlint:all", "-Werror", "-d"]).arg(out_dir).args(&sources));
}

/// A `java` command running `main` with the native library loaded;
/// `check_jni` turns on the JVM's JNI misuse checks (tests, not timings).
pub fn java(main: &str, classes: &Path, check_jni: bool) -> Command {
    let mut cmd = Command::new("java");
    cmd.arg(format!("-Dcv.native.library={}", shared_lib().display()));
    if check_jni {
        cmd.arg("-Xcheck:jni");
    }
    cmd.arg("-cp").arg(classes).arg(main);
    cmd
}

/// Hadoop's client jars (`scripts/install-hadoop-jars`), from `CV_HADOOP_JARS`.
pub fn hadoop_jars() -> Vec<PathBuf> {
    let dir =
        PathBuf::from(std::env::var("CV_HADOOP_JARS").unwrap_or_else(|_| "/usr/local/share/cv/hadoop-jars".into()));
    let jars: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}; run scripts/install-hadoop-jars", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jar"))
        .collect();
    assert!(
        jars.iter().any(|j| j.to_string_lossy().contains("hadoop-client-api")),
        "no Hadoop jars in {}",
        dir.display()
    );
    jars
}

/// Builds `<dir>/cv-hadoop.jar` with `scripts/build-hadoop-jar`.
pub fn hadoop_jar(dir: &Path) -> PathBuf {
    let jar = dir.join("cv-hadoop.jar");
    run(Command::new(crate_dir().join("../scripts/build-hadoop-jar")).arg(&jar));
    jar
}
