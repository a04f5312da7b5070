//! `cvctl`: one binary to run cv's servers, manage its certificates, work
//! with files and measure. One file per subcommand under [`cmd`].

pub mod bench_masters;
pub mod cluster;
pub mod cmd;
pub mod config;
pub mod connect;
pub mod doctor;
pub mod logging;
pub mod metrics;
pub mod signal;
