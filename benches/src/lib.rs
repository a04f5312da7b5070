//! Benchmarks that measure cv against a baseline in the same run and print
//! both with their ratio. Run through `cvctl bench <name>` (release build):
//! the machines are shared and noisy, so only same-run ratios are claimed.

pub mod duckdb_tpch;
pub mod embedded_s3;
pub mod failover;
pub mod fuse_bench;
pub mod fuse_floor;
pub mod gateway_tpch;
pub mod http_floor;
pub mod master_bench;
pub mod open_latency;
pub mod parquet_gen;
pub mod put_bench;
pub mod read_bench;
pub mod report;
pub mod rtt;
pub mod spark_tpch;
pub mod tpch;
pub mod ufs_scan;
pub mod wire_codec;
