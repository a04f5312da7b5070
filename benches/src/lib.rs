//! Benchmarks that measure cv against a baseline in the same run
