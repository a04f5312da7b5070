//! What the seeded simulations share: which seeds to run, and naming the seed of a failure.

/// The seeds to run and the operations per seed, from `<prefix>_SEED` (one seed),
/// `<prefix>_SEEDS` (0..n, default `seeds`) and `<prefix>_OPS` (default `ops`).
pub fn plan(prefix: &str, seeds: u64, ops: u64) -> (Vec<u64>, u64) {
    let env = |name: &str| std::env::var(format!("{prefix}_{name}")).ok().and_then(|v| v.parse::<u64>().ok());
    let list = match env("SEED") {
        Some(s) => vec![s],
        None => (0..env("SEEDS").unwrap_or(seeds)).collect(),
    };
    (list, env("OPS").unwrap_or(ops))
}

/// Prints how to replay the seed if the simulation panics.
pub struct SeedGuard {
    pub prefix: &'static str,
    pub seed: u64,
}

impl Drop for SeedGuard {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("simulation failed: rerun with {}_SEED={}", self.prefix, self.seed);
        }
    }
}
