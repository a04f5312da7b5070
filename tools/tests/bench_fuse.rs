//! `cvctl bench fuse` through the built binary with tiny sizes: a real
//! embedded cluster mounted with FUSE in the command's process, fio on the
//! mount and the device, the client beside them, and the open latency of
//! real Parquet files; the bytes read are the bytes written. Speed is not
//! asserted. Needs root and fio (scripts/install-bench-deps).

use serde_json::Value;
use std::process::Command;

#[test]
fn bench_fuse_runs_every_series_on_the_right_bytes() {
    let fio = Command::new("fio").arg("--version").output().is_ok_and(|o| o.status.success());
    if !fio {
        assert!(std::env::var_os("CI").is_none(), "fio is missing: run scripts/install-bench-deps");
        eprintln!("SKIP: fio is not installed (scripts/install-bench-deps)");
        return;
    }
    let out = Command::new(env!("CARGO_BIN_EXE_cvctl"))
        .args(["bench", "fuse", "--size", "4MiB", "--rand-depths", "1,4", "--duration", "200ms"])
        .args(["--open-files", "6", "--open-file-size", "64KiB", "--verify-all", "--json"])
        .output()
        .expect("run cvctl");
    assert!(out.status.success(), "cvctl bench fuse failed: {}", String::from_utf8_lossy(&out.stderr));
    let r: Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    assert_eq!(r["dataset_bytes"], 4 << 20);
    let series = r["series"].as_array().expect("series");
    // Sequential plus two random depths, each from the device, the client and the mount.
    let sources: Vec<&str> = series.iter().map(|s| s["source"].as_str().unwrap()).collect();
    assert_eq!(sources, ["device", "cv", "fuse"].repeat(3), "{r}");
    for s in series {
        assert!(s["ops"].as_u64().unwrap() > 0, "a series did nothing: {s}");
        if s["workload"] == "sequential" {
            assert_eq!(s["bytes"], 4 << 20, "one full pass: {s}");
        } else {
            assert!(s["p99_us"].as_f64().unwrap() > 0.0, "{s}");
        }
    }
    // Warm pass through the client and through the mount, plus every measured client read.
    let client_bytes: u64 = series.iter().filter(|s| s["source"] == "cv").map(|s| s["bytes"].as_u64().unwrap()).sum();
    assert_eq!(r["verified_bytes"].as_u64(), Some((8 << 20) + client_bytes));
    let open = r["open"].as_array().expect("open rows");
    assert_eq!(open.len(), 2);
    for row in open {
        assert_eq!(row["count"], 6, "every file once per path: {row}");
        assert!(row["p50_us"].as_f64().unwrap() > 0.0);
    }
    assert!(r["fuse_tool"].as_str().unwrap().contains("direct=1"), "{r}");
}

#[test]
fn bench_fuse_refuses_bad_values_before_mounting() {
    let out = Command::new(env!("CARGO_BIN_EXE_cvctl"))
        .args(["bench", "fuse", "--size", "4MiB", "--open-files", "0"])
        .output()
        .expect("run cvctl");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("open latency needs"), "{err}");
}
