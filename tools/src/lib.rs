//! cvctl: run servers, manage certificates, file commands, benchmarks
