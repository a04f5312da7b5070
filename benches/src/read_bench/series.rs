//! Result rows of the read benchmark and the goals computed from
//! them: ≥ 90 % of min(device, QUIC) sequential GiB/s; ≥ 80 % of the
//! device's random IOPS at the same depth, p99 ≤ device p99 + 100 µs. Random
//! IOPS are also put against the lower of the two limits, as the sequential
//! goal is: where bare QUIC cannot reach the device, no QUIC service can.
//!
//! A run may measure every series several times, in rounds (device, QUIC, cv
//! of each workload back to back in every round). Each goal is computed per
//! round, from series measured seconds apart, and judged on the median of the
//! rounds: one burst of noise on the shared machine moves one round, not the verdict.

use super::cpu::{CpuPerOp, Snapshot};
use hdrhistogram::Histogram;
use serde::Serialize;
use std::time::Duration;

/// Who served the bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// The disk, O_DIRECT + io_uring, no network.
    Device,
    /// Bare quinn on tokio, no disk.
    Quic,
    /// cv: client → worker shard over QUIC → disk tier.
    Cv,
    /// cv through its FUSE mount: kernel → mount (client) → worker shard.
    Fuse,
    /// cv's short-circuit reads: the client on the worker's host reads the data files itself
    /// (O_DIRECT on its own io_uring), after a lease per block over QUIC.
    #[serde(rename = "short-circuit")]
    ShortCircuit,
    /// The same, each read on the caller's own thread, waiting on its own ring for the data file
    /// (no runtime, no io thread), as a read-only FUSE mount's request threads read.
    #[serde(rename = "short-circuit-threads")]
    ShortCircuitBlocking,
}

/// Access pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// Front to back, `depth` requests in flight.
    Sequential,
    /// Uniform random aligned offsets, `depth` requests in flight.
    Random,
}

/// One measured series.
#[derive(Clone, Debug, Serialize)]
pub struct Series {
    /// Who served the bytes.
    pub source: Source,
    /// How, in words (tool, engine).
    pub label: String,
    /// Access pattern.
    pub workload: Workload,
    /// Bytes per request.
    pub block: u64,
    /// Requests in flight.
    pub depth: u32,
    /// Requests completed.
    pub ops: u64,
    /// Bytes read.
    pub bytes: u64,
    /// Wall time of the series.
    pub secs: f64,
    /// Throughput in GiB/s.
    pub gib_s: f64,
    /// Requests per second.
    pub iops: f64,
    /// Median request latency (absent where requests are not timed one by one).
    pub p50_us: Option<f64>,
    /// 99th percentile request latency.
    pub p99_us: Option<f64>,
    /// CPU per request of this process's threads (QUIC and cv series).
    pub cpu: Option<CpuPerOp>,
    /// The round of the run this series was measured in, from 0.
    pub round: u32,
    /// Where cv's requests spent their time (cv series of a `--timeline` run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stages: Option<super::timeline::Stages>,
}

impl Series {
    /// One table cell: GiB/s for sequential reads, IOPS and p50/p99 for random ones.
    pub fn summary(&self) -> String {
        match (self.workload, self.p50_us, self.p99_us) {
            (Workload::Sequential, _, _) => format!("{:.2} GiB/s", self.gib_s),
            (Workload::Random, Some(p50), Some(p99)) => format!("{:.0} IOPS {p50:.0}/{p99:.0} µs", self.iops),
            (Workload::Random, _, _) => format!("{:.0} IOPS", self.iops),
        }
    }

    /// This series' throughput (GiB/s or IOPS) as a percentage of `base`'s.
    pub fn percent_of(&self, base: &Series) -> String {
        let (x, y) = match self.workload {
            Workload::Sequential => (self.gib_s, base.gib_s),
            Workload::Random => (self.iops, base.iops),
        };
        format!("{:.0} %", 100.0 * x / y.max(1e-12))
    }

    /// A series from its totals; latencies from `hist` (nanoseconds) if given.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        source: Source,
        label: impl Into<String>,
        workload: Workload,
        block: u64,
        depth: u32,
        ops: u64,
        bytes: u64,
        elapsed: Duration,
        hist: Option<&Histogram<u64>>,
    ) -> Series {
        let secs = elapsed.as_secs_f64().max(1e-9);
        let q = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1000.0;
        Series {
            source,
            label: label.into(),
            workload,
            block,
            depth,
            ops,
            bytes,
            secs,
            gib_s: bytes as f64 / secs / f64::from(1u32 << 30),
            iops: ops as f64 / secs,
            p50_us: hist.filter(|h| !h.is_empty()).map(|h| q(h, 0.5)),
            p99_us: hist.filter(|h| !h.is_empty()).map(|h| q(h, 0.99)),
            cpu: None,
            round: 0,
            stages: None,
        }
    }

    /// This series, as measured in `round`.
    pub fn in_round(mut self, round: u32) -> Series {
        self.round = round;
        self
    }

    /// This series with its requests' stages.
    pub fn with_stages(mut self, stages: Option<super::timeline::Stages>) -> Series {
        self.stages = stages;
        self
    }

    /// This series with the CPU used since `since`, per request.
    pub fn with_cpu(mut self, since: &Snapshot) -> Series {
        self.cpu = since.per_op(self.ops);
        self
    }

    /// "server + client" CPU µs per request, or "-".
    pub fn cpu_summary(&self) -> String {
        match self.cpu {
            Some(CpuPerOp { server_us: Some(s), client_us: c }) => format!("{s:.0} + {c:.0}"),
            Some(CpuPerOp { server_us: None, client_us: c }) => format!("? + {c:.0}"),
            None => "-".into(),
        }
    }
}

/// One goal of the issue checked against this run.
#[derive(Clone, Debug, Serialize)]
pub struct Verdict {
    /// The goal in words.
    pub goal: String,
    /// cv's value divided by the limit (or cv p99 − device p99 in µs for the latency goal);
    /// with several rounds, the median of `rounds`.
    pub value: f64,
    /// The value in each round, in round order.
    pub rounds: Vec<f64>,
    /// The value the goal asks for.
    pub target: f64,
    /// Whether `target` is an upper bound (latency) rather than a lower one (throughput).
    pub ceiling: bool,
    /// Whether this run meets it.
    pub met: bool,
}

impl Verdict {
    /// A goal met when `value` is at least `target`.
    fn at_least(goal: String, value: f64, target: f64) -> Self {
        Verdict { goal, value, rounds: vec![value], target, ceiling: false, met: false }.judged()
    }

    /// A goal met when `value` is at most `target`.
    fn at_most(goal: String, value: f64, target: f64) -> Self {
        Verdict { goal, value, rounds: vec![value], target, ceiling: true, met: false }.judged()
    }

    /// This verdict with `met` set from `value`.
    fn judged(mut self) -> Self {
        self.met = if self.ceiling { self.value <= self.target } else { self.value >= self.target };
        self
    }
}

/// The series of `source` measured in the same round and workload as `cv`.
/// The series of `source` measured with `cv`'s workload, depth and round.
pub fn find<'a>(series: &'a [Series], source: Source, cv: &Series) -> Option<&'a Series> {
    series
        .iter()
        .find(|s| s.source == source && s.workload == cv.workload && s.depth == cv.depth && s.round == cv.round)
}

/// The goals for every workload that has all three sources, per round, judged on the
/// median of the rounds.
pub fn verdicts(series: &[Series]) -> Vec<Verdict> {
    let mut out: Vec<Verdict> = Vec::new();
    // Series come in round order, so each goal's values do too.
    for v in per_round(series) {
        match out.iter_mut().find(|o| o.goal == v.goal) {
            Some(o) => o.rounds.push(v.value),
            None => out.push(v),
        }
    }
    out.into_iter().map(|v| Verdict { value: median(&v.rounds), ..v }.judged()).collect()
}

/// Issue 23's goal for short-circuit reads: ≥ 90 % of the device's throughput or IOPS at the
/// same depth, per round, judged on the median of the rounds.
pub fn short_circuit_verdicts(series: &[Series]) -> Vec<Verdict> {
    let mut out: Vec<Verdict> = Vec::new();
    let local = |s: &&Series| matches!(s.source, Source::ShortCircuit | Source::ShortCircuitBlocking);
    for sc in series.iter().filter(local) {
        let Some(dev) = find(series, Source::Device, sc) else { continue };
        let how = if sc.source == Source::ShortCircuit { "short-circuit" } else { "short-circuit on threads" };
        let (goal, value) = match sc.workload {
            Workload::Sequential => {
                (format!("sequential, depth {}: {how} ≥ 90 % of the device", sc.depth), sc.gib_s / dev.gib_s.max(1e-12))
            }
            Workload::Random => (
                format!("random, depth {}: {how} IOPS ≥ 90 % of the device's", sc.depth),
                sc.iops / dev.iops.max(1e-12),
            ),
        };
        match out.iter_mut().find(|o| o.goal == goal) {
            Some(o) => o.rounds.push(value),
            None => out.push(Verdict::at_least(goal, value, 0.9)),
        }
    }
    out.into_iter().map(|v| Verdict { value: median(&v.rounds), ..v }.judged()).collect()
}

/// Every goal of every round, each from the device and QUIC series of the cv series' round.
fn per_round(series: &[Series]) -> Vec<Verdict> {
    let mut out = Vec::new();
    for cv in series.iter().filter(|s| s.source == Source::Cv) {
        let dev = find(series, Source::Device, cv);
        let quic = find(series, Source::Quic, cv);
        let (Some(dev), Some(quic)) = (dev, quic) else { continue };
        match cv.workload {
            Workload::Sequential => {
                let limit = dev.gib_s.min(quic.gib_s);
                let goal = format!("sequential, depth {}: cv ≥ 90 % of the lower of device and QUIC", cv.depth);
                out.push(Verdict::at_least(goal, cv.gib_s / limit.max(1e-12), 0.9));
            }
            Workload::Random => {
                let goal = format!("random, depth {}: cv IOPS ≥ 80 % of the device's", cv.depth);
                out.push(Verdict::at_least(goal, cv.iops / dev.iops.max(1e-12), 0.8));
                let goal = format!("random, depth {}: cv IOPS ≥ 80 % of the lower of device and QUIC", cv.depth);
                out.push(Verdict::at_least(goal, cv.iops / dev.iops.min(quic.iops).max(1e-12), 0.8));
                if let (Some(c), Some(d)) = (cv.p99_us, dev.p99_us) {
                    let goal = format!("random, depth {}: cv p99 ≤ device p99 + 100 µs", cv.depth);
                    out.push(Verdict::at_most(goal, c - d, 100.0));
                }
            }
        }
    }
    out
}

/// Not a goal: what a server that reads the disk only once a request has arrived can reach
/// at depth 1, where nothing overlaps. Its read costs at least the device's read and a QUIC
/// request without a disk, one after the other; the medians of the two add up to the bound.
#[derive(Clone, Debug, Serialize)]
pub struct SerialBound {
    /// Bytes per request.
    pub block: u64,
    /// The device's p50 plus bare QUIC's p50, µs (the median of the rounds).
    pub bound_us: f64,
    /// The requests per second that latency allows (1 s / `bound_us`).
    pub bound_iops: f64,
    /// cv's IOPS over the same round's bound; the median of `rounds`.
    pub value: f64,
    /// `value` in each round, in round order.
    pub rounds: Vec<f64>,
}

/// The serial bound of every depth-1 random workload with all three sources, judged like the
/// goals on the median of the rounds.
pub fn serial_bounds(series: &[Series]) -> Vec<SerialBound> {
    // Per block size, each round's (bound in µs, cv's IOPS over the bound's), in round order.
    let mut per_block: Vec<(u64, Vec<(f64, f64)>)> = Vec::new();
    for cv in series.iter().filter(|s| s.source == Source::Cv && s.workload == Workload::Random && s.depth == 1) {
        let (Some(dev), Some(quic)) = (find(series, Source::Device, cv), find(series, Source::Quic, cv)) else {
            continue;
        };
        let (Some(d), Some(q)) = (dev.p50_us, quic.p50_us) else { continue };
        let round = (d + q, cv.iops * (d + q) / 1e6);
        match per_block.iter_mut().find(|(block, _)| *block == cv.block) {
            Some((_, rounds)) => rounds.push(round),
            None => per_block.push((cv.block, vec![round])),
        }
    }
    per_block
        .into_iter()
        .map(|(block, r)| {
            let bound_us = median(&r.iter().map(|x| x.0).collect::<Vec<_>>());
            let rounds: Vec<f64> = r.iter().map(|x| x.1).collect();
            SerialBound { block, bound_us, bound_iops: 1e6 / bound_us.max(1e-9), value: median(&rounds), rounds }
        })
        .collect()
}

/// The median of `v` (the mean of the middle two for an even count); 0 for none.
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => 0.0,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(source: Source, workload: Workload, depth: u32, ops: u64, hist_us: Option<u64>) -> Series {
        let mut h = crate::report::histogram();
        if let Some(us) = hist_us {
            h.record(us * 1000).unwrap();
        }
        Series::new(source, "t", workload, 1 << 20, depth, ops, ops << 20, Duration::from_secs(1), Some(&h))
    }

    #[test]
    fn sequential_goal_uses_the_lower_limit() {
        let s = vec![
            row(Source::Device, Workload::Sequential, 4, 1000, None),
            row(Source::Quic, Workload::Sequential, 4, 800, None),
            row(Source::Cv, Workload::Sequential, 4, 730, None),
        ];
        let v = verdicts(&s);
        assert_eq!(v.len(), 1);
        assert!((v[0].value - 730.0 / 800.0).abs() < 1e-9, "{v:?}");
        assert!(v[0].met && v[0].goal.contains("lower of device and QUIC"));
        assert_eq!(s[0].p50_us, None, "no samples, no percentile");
        assert!((s[0].gib_s - 1000.0 / 1024.0).abs() < 1e-9);
    }

    #[test]
    fn random_goals_compare_iops_and_p99_with_the_device_at_the_same_depth() {
        let s = vec![
            row(Source::Device, Workload::Random, 32, 10_000, Some(400)),
            row(Source::Device, Workload::Random, 1, 9_000, Some(90)),
            row(Source::Quic, Workload::Random, 32, 50_000, Some(100)),
            row(Source::Cv, Workload::Random, 32, 7_000, Some(600)),
        ];
        let v = verdicts(&s);
        assert_eq!(v.len(), 3, "depth 1 has no cv row: {v:?}");
        assert!((v[0].value - 0.7).abs() < 1e-9 && !v[0].met);
        assert!((v[1].value - 0.7).abs() < 1e-9 && !v[1].met, "QUIC is above the device: the device is the lower");
        assert!(!v[2].met, "p99 600 µs > 400 + 100: {v:?}");
        assert!((v[2].value - 200.0).abs() < 1.0);
    }

    #[test]
    fn random_iops_also_against_quic_when_it_is_the_lower_limit() {
        let s = vec![
            row(Source::Device, Workload::Random, 32, 20_000, Some(400)),
            row(Source::Quic, Workload::Random, 32, 10_000, Some(300)),
            row(Source::Cv, Workload::Random, 32, 8_500, Some(450)),
        ];
        let v = verdicts(&s);
        assert_eq!(v.len(), 3, "{v:?}");
        assert!(!v[0].met && v[1].goal.contains("lower of device and QUIC") && v[1].met, "{v:?}");
        assert!((v[1].value - 0.85).abs() < 1e-9);
    }

    #[test]
    fn the_serial_bound_adds_the_device_and_quic_medians_at_depth_1_only() {
        let mut s = Vec::new();
        for (r, dev_p50, quic_p50, cv_ops) in [(0, 100, 100, 4_000), (1, 80, 120, 2_000), (2, 150, 150, 3_000)] {
            s.push(row(Source::Device, Workload::Random, 1, 9_000, Some(dev_p50)).in_round(r));
            s.push(row(Source::Quic, Workload::Random, 1, 8_000, Some(quic_p50)).in_round(r));
            s.push(row(Source::Cv, Workload::Random, 1, cv_ops, Some(300)).in_round(r));
        }
        for (source, ops) in [(Source::Device, 30_000), (Source::Quic, 30_000), (Source::Cv, 20_000)] {
            s.push(row(source, Workload::Random, 32, ops, Some(500)));
        }
        let b = serial_bounds(&s);
        assert_eq!(b.len(), 1, "depth 32 overlaps reads: no serial bound: {b:?}");
        // Bounds 200, 200, 300 µs: 5000, 5000, 3333 IOPS; cv 4000, 2000, 3000 of them.
        assert!((b[0].bound_us - 200.0).abs() < 1.0 && (b[0].bound_iops - 5000.0).abs() < 25.0, "{b:?}");
        assert_eq!(b[0].rounds.len(), 3);
        assert!((b[0].rounds[0] - 0.8).abs() < 0.01 && (b[0].rounds[2] - 0.9).abs() < 0.01, "{b:?}");
        assert!((b[0].value - 0.8).abs() < 0.01, "the median round: {b:?}");
    }

    #[test]
    fn with_rounds_each_goal_is_judged_on_the_median_round() {
        // Round 1 is a burst of noise on cv; rounds 0 and 2 meet the goals.
        let mut s = Vec::new();
        for (r, cv_ops, cv_p99) in [(0, 9_000, 450), (1, 5_000, 900), (2, 8_500, 480)] {
            for (source, ops, p99) in
                [(Source::Device, 10_000, 400), (Source::Quic, 20_000, 300), (Source::Cv, cv_ops, cv_p99)]
            {
                s.push(row(source, Workload::Random, 32, ops, Some(p99)).in_round(r));
            }
        }
        let v = verdicts(&s);
        assert_eq!(v.len(), 3, "one verdict per goal, not per round: {v:?}");
        assert_eq!(v[0].rounds, [0.9, 0.5, 0.85]);
        assert!((v[0].value - 0.85).abs() < 1e-9 && v[0].met, "{v:?}");
        assert!(v[2].ceiling && v[2].met && (v[2].value - 80.0).abs() < 1.0, "median p99 480 µs ≤ 400 + 100: {v:?}");
        // Two rounds of three missing: missed.
        let s: Vec<Series> = s
            .into_iter()
            .map(|mut x| {
                if x.source == Source::Cv && x.round == 2 {
                    x.iops = 1000.0;
                }
                x
            })
            .collect();
        assert!(!verdicts(&s)[0].met);
        assert_eq!(median(&[3.0, 1.0, 2.0, 10.0]), 2.5);
    }
}
