//! `cvctl bench scan` and `cvctl bench open-latency` (by default, against the
//! embedded store behind the delay proxy, and with `--local`) through the built
//! binary with tiny sizes: both sides run
//! against a real embedded cluster (and a real S3 server on loopback), and the
//! server's request log shows that cold reads fetched and warm reads did not.
//! Speed is not asserted.

use serde_json::Value;
use std::process::Command;

fn cvctl(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_cvctl")).args(args).output().expect("run cvctl");
    assert!(out.status.success(), "cvctl {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("JSON report: {e}\n{}", String::from_utf8_lossy(&out.stdout)))
}

fn positive(v: &Value, field: &str) -> f64 {
    let x = v[field].as_f64().unwrap_or_else(|| panic!("{field} missing in {v}"));
    assert!(x > 0.0, "{field} = {x} in {v}");
    x
}

#[test]
fn bench_scan_measures_direct_cold_and_warm_and_warm_makes_no_requests() {
    let r = cvctl(&[
        "bench",
        "scan",
        "--files",
        "3",
        "--file-size",
        "2MiB",
        "--chunks",
        "2",
        "--rounds",
        "1",
        "--rtt",
        "2ms",
        "--json",
    ]);
    assert_eq!(r["files"], 3);
    assert_eq!(r["chunks"], 2);
    assert!(r["row_groups"].as_u64().unwrap() >= 2, "{r}");
    positive(&r, "block_size");
    positive(&r, "chunk_bytes");
    let runs = r["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 2, "loopback and the delayed store");
    assert_eq!(runs[0]["rtt_ms"].as_f64(), Some(0.0));
    assert_eq!(runs[1]["rtt_ms"].as_f64(), Some(2.0));
    for run in runs {
        let sides = run["sides"].as_array().expect("sides");
        let names: Vec<&str> = sides.iter().map(|s| s["side"].as_str().unwrap()).collect();
        assert_eq!(names, ["direct_paired", "cv_cold_first", "cv_cold", "direct", "cv_warm"]);
        for s in sides {
            for f in ["scan_ms", "p50_ms", "p99_ms", "open_footer_p50_ms", "chunks_p50_ms", "vs_direct"] {
                positive(s, f);
            }
            assert_eq!(s["samples"].as_u64(), Some(3 * s["passes"].as_u64().unwrap()), "{s}");
        }
        // Two rounds: first sight, then one synced + freed; direct and warm in both.
        let passes: Vec<u64> = sides.iter().map(|s| s["passes"].as_u64().unwrap()).collect();
        assert_eq!(passes, [2, 1, 1, 2, 2]);
        let req = |i: usize, f: &str| sides[i]["requests"][f].as_u64().unwrap();
        // Direct: a HEAD per file per pass, a footer GET plus K chunk GETs.
        for direct in [0, 3] {
            assert_eq!(req(direct, "head"), 2 * 3);
            assert_eq!(req(direct, "get"), 2 * 3 * 3);
        }
        // Cold: the master HEADs every object and reads its tail; shards fetch blocks.
        for cold in [1, 2] {
            assert_eq!(req(cold, "head"), 3, "{}", sides[cold]);
            assert!(req(cold, "get") > 3, "cold read no block: {}", sides[cold]);
        }
        // Warm: nothing at the store.
        for f in ["head", "get", "get_bytes", "list", "other"] {
            assert_eq!(req(4, f), 0, "warm {f}: {}", sides[4]);
        }
        let c = &run["checks"];
        assert_eq!(c["counted"], true);
        assert_eq!(c["warm_requests"], 0);
        assert!(c["cold_blocks_needed"].as_u64().unwrap() >= 6, "{c}");
        assert_eq!(c["cold_blocks_fetched"], c["cold_blocks_needed"], "{c}");
        assert_eq!(c["cold_files_served_warm"], 0);
        assert_eq!(c["ok"], true, "{c}");
        let goals = run["goals"].as_array().unwrap();
        assert_eq!(goals.len(), 3);
        for g in goals {
            positive(g, "value");
            assert!(g["met"].is_boolean());
        }
    }
}

#[test]
fn bench_open_latency_by_default_reads_the_embedded_s3_server_behind_the_proxy() {
    let r = cvctl(&[
        "bench",
        "open-latency",
        "--files",
        "3",
        "--file-size",
        "1MiB",
        "--rounds",
        "2",
        "--rtt",
        "4ms",
        "--json",
    ]);
    let rows = r["rows"].as_array().expect("rows");
    let names: Vec<&str> = rows.iter().map(|row| row["name"].as_str().unwrap()).collect();
    assert_eq!(rows.len(), 5, "{names:?}");
    assert!(names[0].contains("OpenDAL s3 +4ms RTT"), "{names:?}");
    assert!(names[1].starts_with("cv warm"), "{names:?}");
    assert!(names[2].starts_with("cv cold"), "{names:?}");
    assert!(names[3].starts_with("local fs"), "{names:?}");
    assert!(names[4].contains("null RPC"), "{names:?}");
    for (row, count) in rows.iter().zip([6, 6, 3, 6, 6]) {
        assert_eq!(row["count"], count, "{row}");
        positive(row, "p50_us");
        positive(row, "p99_us");
    }
    let q = &r["requests"];
    // Direct: HEAD + one ranged GET of the footer per open.
    assert_eq!(q["direct"]["head"], 6);
    assert_eq!(q["direct"]["get"], 6);
    // cv's first opens: the master HEADs the object and reads its tail once.
    assert_eq!(q["cv_cold"]["head"], 3);
    assert_eq!(q["cv_cold"]["get"], 3);
    // Warm opens cost nothing at the store.
    for f in ["head", "get", "list", "other"] {
        assert_eq!(q["cv_warm"][f], 0, "{q}");
    }
    // Both the direct reads and cv's cold opens went through the proxy: two round trips of
    // 4 ms at least (HEAD, GET) each; a warm open none.
    let p50 = |i: usize| rows[i]["p50_us"].as_f64().unwrap();
    assert!(p50(0) >= 8_000.0 && p50(2) >= 8_000.0, "{names:?}: {} {}", p50(0), p50(2));
    assert!(p50(1) < 8_000.0, "warm: {}", p50(1));
}

#[test]
fn bench_open_latency_keeps_accepting_s3_embedded() {
    // The embedded store became the default; the old flag still runs it.
    let r = cvctl(&[
        "bench",
        "open-latency",
        "--s3-embedded",
        "--files",
        "2",
        "--file-size",
        "512KiB",
        "--rounds",
        "1",
        "--rtt",
        "0s",
        "--json",
    ]);
    let rows = r["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 5, "{r}");
    assert!(rows[0]["name"].as_str().unwrap().contains("OpenDAL s3 (loopback)"), "{r}");
}

#[test]
fn bench_open_latency_local_writes_into_cv_and_reads_the_local_copy() {
    let r = cvctl(&[
        "bench",
        "open-latency",
        "--local",
        "--files",
        "4",
        "--file-size",
        "512KiB",
        "--rounds",
        "2",
        "--json",
    ]);
    // Both sides read the footers the generator wrote (`verify` checks them before measuring).
    let rows = r["rows"].as_array().expect("rows");
    let names: Vec<&str> = rows.iter().map(|row| row["name"].as_str().unwrap()).collect();
    assert_eq!(rows.len(), 3, "{names:?}");
    assert!(names[0].contains("OpenDAL fs"), "{names:?}");
    assert!(names[1].starts_with("cv: open + footer"), "{names:?}");
    assert!(names[2].contains("null RPC"), "{names:?}");
    for row in rows {
        assert_eq!(row["count"], 8, "{row}");
        for f in ["p50_us", "p90_us", "p99_us", "p999_us", "max_us"] {
            positive(row, f);
        }
    }
}

#[test]
fn bench_scan_refuses_bad_options_before_starting_anything() {
    for (flag, value) in [("--chunks", "0"), ("--files", "0"), ("--file-size", "1KiB")] {
        let out = Command::new(env!("CARGO_BIN_EXE_cvctl")).args(["bench", "scan", flag, value]).output().expect("run");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{flag} {value}: {err}");
        assert!(!err.contains("writing"), "{flag} {value}: {err}");
    }
}
