//! `bench open` and `bench meta` on small numbers, against masters the local cluster starts:
//! every row measured, and the masters' directories gone afterwards.

use cv_benches::master_bench::{MetaOptions, OpenOptions, Reads, run_meta, run_open};
use cv_tools::bench_masters::start_masters;
use std::time::Duration;

#[test]
fn open_and_meta_run_small_and_clean_up() {
    let dir = tempfile::tempdir().unwrap();
    let o = OpenOptions {
        files: 5,
        file_len: 4096,
        footer: 100,
        requests: 50,
        warmup: 5,
        dir: dir.path().into(),
        groups: vec![(1, Reads::Lease), (3, Reads::ReadIndex)],
    };
    let rows = run_open(&o, &start_masters).unwrap();
    assert_eq!(rows.len(), 4);
    assert!(rows.iter().all(|r| r.count == 50 && r.p50_us > 0.0));
    assert!(rows[1].name.contains("108 B tail") && rows[3].name.contains("3 masters, ReadIndex"));

    let m = MetaOptions {
        concurrency: vec![1, 4],
        phase: Duration::from_millis(100),
        max_files: 20,
        fsync_samples: 3,
        dir: dir.path().into(),
        masters: vec![1],
    };
    let rows = run_meta(&m, &start_masters).unwrap();
    assert_eq!(rows.len(), 1 + 2 * 5);
    assert!(rows.iter().all(|r| r.ops > 0 && r.ops_per_sec > 0.0), "{rows:?}");
    // Renames and deletes never exceed the files created.
    assert!(rows[4].ops <= rows[1].ops && rows[5].ops <= rows[4].ops);
    // The journal directories were removed.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);

    let bad = OpenOptions { footer: 5000, ..o };
    assert!(run_open(&bad, &start_masters).is_err());
}
