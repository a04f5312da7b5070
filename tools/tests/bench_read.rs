//! `cvctl bench read` through the built binary with tiny sizes: every series
//! runs against a real embedded cluster, real O_DIRECT reads and real QUIC,
//! and the bytes read are the bytes written. Speed is not asserted.

use serde_json::Value;
use std::process::Command;

fn bench_read(device: &str, rounds: u32, extra: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_cvctl"))
        .args(["bench", "read", "--size", "6MiB", "--file-size", "2MiB", "--rand-depths", "1,4"])
        .args(["--duration", "300ms", "--verify-all", "--json", "--device", device])
        .args(["--rounds", &rounds.to_string()])
        .args(extra)
        .output()
        .expect("run cvctl");
    assert!(out.status.success(), "cvctl bench read failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("JSON report")
}

/// `sc`: the run measured the short-circuit series too.
fn check(report: &Value, rounds: usize, sc: bool) {
    // Per round: sequential (device, QUIC, cv, and maybe short-circuit) and two random depths
    // (the same, and maybe short-circuit on the caller's threads).
    let (seq, rand) = if sc { (4, 5) } else { (3, 3) };
    let per_round = seq + 2 * rand;
    assert_eq!(report["files"], 3);
    assert_eq!(report["dataset_bytes"], 6 << 20);
    assert_eq!(report["memory_tier_bytes"], 0, "the embedded default measures the disk tier");
    let series = report["series"].as_array().expect("series");
    assert_eq!(series.len(), per_round * rounds, "{series:?}");
    for (i, s) in series.iter().enumerate() {
        assert_eq!(s["round"].as_u64(), Some((i / per_round) as u64), "{s}");
    }
    for s in series {
        assert!(s["ops"].as_u64().unwrap() > 0, "a series did nothing: {s}");
        assert_eq!(s["bytes"].as_u64(), Some(s["ops"].as_u64().unwrap() * s["block"].as_u64().unwrap()), "{s}");
        if s["workload"] == "sequential" {
            // One full pass: the whole data set, in 1 MiB requests.
            assert_eq!(s["bytes"], 6 << 20, "{s}");
        }
    }
    let sources: Vec<&str> = series.iter().map(|s| s["source"].as_str().unwrap()).collect();
    let round: Vec<&str> = match sc {
        true => {
            let rand = ["device", "quic", "cv", "short-circuit", "short-circuit-threads"];
            [&["device", "quic", "cv", "short-circuit"][..], &rand, &rand].concat()
        }
        false => ["device", "quic", "cv"].repeat(3),
    };
    assert_eq!(sources, round.repeat(rounds));
    // QUIC and cv series carry CPU per request of both sides (the embedded shards are threads
    // of this process); fio's is its own process's and is not measured.
    for s in series {
        let cpu = &s["cpu"];
        if s["source"] == "device" {
            // fio's CPU per read from its JSON (its own process); none from the in-tree reader.
            let fio = report["device_tool"].as_str().unwrap().starts_with("fio");
            assert_eq!(cpu["server_us"].as_f64().is_some_and(|v| v > 0.0), fio, "{s}");
        } else if s["source"] == "short-circuit" || s["source"] == "short-circuit-threads" {
            // The worker only grants leases: its share may round to nothing.
            assert!(cpu["server_us"].as_f64().is_some_and(|v| v >= 0.0), "{s}");
            assert!(cpu["client_us"].as_f64().is_some_and(|v| v > 0.0), "{s}");
        } else {
            assert!(cpu["server_us"].as_f64().is_some_and(|v| v > 0.0), "{s}");
            assert!(cpu["client_us"].as_f64().is_some_and(|v| v > 0.0), "{s}");
        }
    }
    // The warm pass (every byte) and every measured cv read were compared with the pattern.
    let read =
        |src: &str| series.iter().filter(|s| s["source"] == src).map(|s| s["bytes"].as_u64().unwrap()).sum::<u64>();
    let warm = if sc { 2 * (6 << 20) } else { 6 << 20 };
    let measured = read("cv") + read("short-circuit") + read("short-circuit-threads");
    assert_eq!(report["verified_bytes"].as_u64(), Some(warm + measured));
    // The short-circuit series really read the worker's files, and never fell back.
    if sc {
        let st = &report["short_circuit"];
        assert!(st["reads"].as_u64().is_some_and(|n| n > 0), "{st}");
        assert_eq!(st["fallbacks"].as_u64(), Some(0), "{st}");
    } else {
        assert!(report["short_circuit"].is_null());
    }
    // One verdict per goal, with its value in every round.
    let verdicts = report["verdicts"].as_array().unwrap();
    assert!(!verdicts.is_empty());
    for v in verdicts {
        assert_eq!(v["rounds"].as_array().map(Vec::len), Some(rounds), "{v}");
    }
    // Depth 1 also stands against a disk read and a QUIC request in series (depth 4 does not).
    let bounds = report["serial_bounds"].as_array().unwrap();
    assert_eq!(bounds.len(), 1, "{bounds:?}");
    assert_eq!(bounds[0]["rounds"].as_array().map(Vec::len), Some(rounds));
    assert!(bounds[0]["bound_us"].as_f64().is_some_and(|us| us > 0.0), "{bounds:?}");
}

#[test]
fn bench_read_moves_the_right_bytes_with_the_in_tree_device_reader() {
    let report = bench_read("uring", 2, &[]);
    assert!(report["device_tool"].as_str().unwrap().contains("in-tree reader"), "{report}");
    check(&report, 2, true);
}

#[test]
fn bench_read_with_fio_when_installed() {
    let fio = Command::new("fio").arg("--version").output().is_ok_and(|o| o.status.success());
    if !fio {
        eprintln!("fio is not installed (scripts/install-bench-deps); the auto run uses the in-tree reader");
    }
    // Without the short-circuit series: the run as it was before it had one.
    let report = bench_read("auto", 1, &["--no-short-circuit"]);
    assert_eq!(report["device_tool"].as_str().unwrap().starts_with("fio"), fio, "{report}");
    check(&report, 1, false);
}

#[test]
fn bench_read_timeline_splits_every_cv_request_into_stages() {
    let report = bench_read("uring", 1, &["--timeline"]);
    check(&report, 1, true);
    let series = report["series"].as_array().expect("series");
    for s in series {
        if s["source"] != "cv" {
            assert!(s.get("stages").is_none(), "only cv requests carry marks: {s}");
            continue;
        }
        let st = &s["stages"];
        let requests = st["requests"].as_u64().unwrap_or(0);
        if s["workload"] == "random" {
            // Random offsets stay below the files' tails and inside one block: one request each.
            assert_eq!(Some(requests), s["ops"].as_u64(), "{s}");
        } else {
            assert!(requests > 0, "{s}");
        }
        let mean = |k: &str| st[k]["mean_us"].as_f64().unwrap_or(f64::NAN);
        let parts = mean("to_shard") + mean("at_shard") + mean("to_first_byte") + mean("transfer");
        assert!((parts - mean("total")).abs() <= 0.01 * mean("total"), "stages add up to the request: {st}");
        assert!(mean("at_shard") > 0.0 && mean("transfer") >= 0.0, "{st}");
    }
}

#[test]
fn bench_read_timeline_needs_the_embedded_cluster() {
    let out = Command::new(env!("CARGO_BIN_EXE_cvctl"))
        .args(["bench", "read", "--timeline", "--master", "127.0.0.1:9", "--config", "/nonexistent"])
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("--timeline needs the embedded cluster"), "{err}");
}

#[test]
fn bench_read_refuses_bad_sizes_before_starting_a_cluster() {
    for (flag, value, says) in [
        ("--file-size", "3000000", "multiple of 1 MiB"),
        ("--seq-depth", "0", "prefetch_depth"),
        ("--rand-depths", "0", "depths"),
        ("--rounds", "0", "rounds must be"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_cvctl")).args(["bench", "read", flag, value]).output().expect("run");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(says), "{flag} {value}: {err}");
        assert!(!err.contains("starting an embedded cluster"), "{flag} {value}: {err}");
    }
}
