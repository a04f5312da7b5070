//! `cvctl trace sim`: replays block traces (`[worker] trace`, worker/TRACE-FORMAT.md) against
//! cv's eviction policy, LRU and Belady's optimal at cache sizes given as shares of the data the
//! trace reads, and prints hit ratios and what each fetches from object storage side by side.

use std::path::PathBuf;

use super::CmdResult;
use clap::{Args, Subcommand};
use cv_worker::trace::format::{self, Record};
use cv_worker::trace::sim::{self, Policy};

/// Trace commands.
#[derive(Subcommand, Debug)]
pub enum Trace {
    /// Replay traces against cv's policy, LRU and the optimal one.
    Sim(SimArgs),
}

/// Arguments of `cvctl trace sim`.
#[derive(Args, Debug)]
pub struct SimArgs {
    /// Trace files (several workers' are merged by time).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Cache sizes, in percent of the data the trace reads.
    #[arg(long, value_delimiter = ',', default_value = "10,30,100")]
    sizes: Vec<f64>,
}

impl Trace {
    /// Runs it.
    pub fn run(self) -> CmdResult {
        match self {
            Trace::Sim(a) => a.run(),
        }
    }
}

impl SimArgs {
    fn run(self) -> CmdResult {
        let mut trace: Vec<Record> = Vec::new();
        for f in &self.files {
            let file = std::fs::File::open(f).map_err(|e| format!("{}: {e}", f.display()))?;
            trace.extend(format::read_all(std::io::BufReader::new(file)).map_err(|e| format!("{}: {e}", f.display()))?);
        }
        trace.sort_by_key(|r| r.time_us);
        let data = sim::footprint(&trace);
        let reads = trace.iter().filter(|r| r.access.is_read()).count();
        println!("{} records, {reads} reads, {} of distinct blocks read", trace.len(), gib(data));
        println!(
            "{:>6}  {:<13} {:>9} {:>9} {:>10} {:>13} {:>12} {:>10}",
            "cache", "policy", "hits", "byte hits", "of optimal", "fetched", "fetched/read", "fetches"
        );
        for pct in &self.sizes {
            let capacity = (data as f64 * pct / 100.0) as u64;
            let outcomes = Policy::ALL.map(|p| (p, sim::replay(&trace, p, capacity)));
            let optimal = outcomes.iter().find(|(p, _)| *p == Policy::Optimal).map(|(_, o)| o.byte_hit_ratio());
            for (p, o) in outcomes {
                let of_opt = match optimal {
                    Some(best) if best > 0.0 => format!("{:.2}", o.byte_hit_ratio() / best),
                    _ => "-".into(),
                };
                println!(
                    "{:>5.0}%  {:<13} {:>8.1}% {:>8.1}% {:>10} {:>13} {:>12.2} {:>10}",
                    pct,
                    p.name(),
                    o.hit_ratio() * 100.0,
                    o.byte_hit_ratio() * 100.0,
                    of_opt,
                    gib(o.bytes_fetched),
                    o.bytes_fetched as f64 / o.bytes_asked.max(1) as f64,
                    o.fetches
                );
            }
        }
        Ok(())
    }
}

fn gib(b: u64) -> String {
    format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64)
}
