//! A Parquet file written by DuckDB into the mount and read back through
//! the mount by DuckDB gives the same rows as the query that made it.

mod fuse_util;

use fuse_util::{mount, venv_python};
use std::process::Command;

const SCRIPT: &str = r#"
import sys, duckdb
path = sys.argv[1] + "/t.parquet"
query = """select i, i * 0.5 as x, 'row-' || i::varchar as s, (i % 7) as g
           from range(300000) t(i)"""
con = duckdb.connect()
con.execute(f"copy ({query}) to '{path}' (format parquet, row_group_size 50000)")
want = con.execute(query + " order by i").fetchall()
fresh = duckdb.connect()
got = fresh.execute(f"select * from read_parquet('{path}') order by i").fetchall()
agg = fresh.execute(f"select g, count(*), sum(x) from read_parquet('{path}') group by g order by g").fetchall()
want_agg = con.execute(f"select g, count(*), sum(x) from ({query}) group by g order by g").fetchall()
assert got == want, "rows differ"
assert agg == want_agg, "aggregates differ"
print("rows", len(got))
"#;

#[test]
fn duckdb_parquet_round_trip() {
    let Some(python) = venv_python() else { return };
    let m = mount(&[]);
    let out = Command::new(python).arg("-c").arg(SCRIPT).arg(&m.mnt).output().unwrap();
    let (o, e) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "duckdb failed: {o}\n{e}");
    assert!(o.contains("rows 300000"), "{o}");
    let len = std::fs::metadata(m.path("t.parquet")).unwrap().len();
    assert!(len > 1000, "a real Parquet file ({len} bytes)");
}
