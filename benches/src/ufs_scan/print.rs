//! The scan's table: one block per store round-trip time, direct first,
//! ratios to it, request counts, checks and goals (misses included).

use super::{RunReport, ScanReport, SideReport};

fn label(side: &str) -> &'static str {
    match side {
        "direct_paired" => "direct, paired with cold",
        "direct" => "direct, own pass",
        "cv_cold_first" => "cv cold, first sight",
        "cv_cold" => "cv cold, synced + freed",
        "cv_warm" => "cv warm",
        _ => "?",
    }
}

fn mib(b: u64) -> f64 {
    b as f64 / f64::from(1 << 20)
}

fn side_line(s: &SideReport) {
    let reqs = match &s.requests {
        Some(r) if s.passes > 0 => {
            let p = s.passes as f64;
            format!("{:>8.0} {:>8.0} {:>10.2}", r.head as f64 / p, r.get as f64 / p, mib(r.get_bytes) / p)
        }
        _ => format!("{:>8} {:>8} {:>10}", "-", "-", "-"),
    };
    println!(
        "{:<26} {:>6} {:>10.1} {:>9.2} {:>8.2} {:>8.2} {:>11.2} {:>10.2} {reqs}",
        label(&s.side),
        s.passes,
        s.scan_ms,
        s.vs_direct,
        s.p50_ms,
        s.p99_ms,
        s.open_footer_p50_ms,
        s.chunks_p50_ms,
    );
}

fn run_block(r: &RunReport) {
    let rtt = if r.rtt_ms == 0.0 { "plain loopback".to_string() } else { format!("{} ms added round trip", r.rtt_ms) };
    println!();
    println!(
        "store on {rtt}: HEAD p50 {:.2} ms, GET of one whole cv block p50 {:.2} ms (direct, OpenDAL); cv mount {}",
        r.store_head_p50_ms, r.store_block_get_p50_ms, r.mount
    );
    println!(
        "{:<26} {:>6} {:>10} {:>9} {:>8} {:>8} {:>11} {:>10} {:>8} {:>8} {:>10}",
        "side",
        "passes",
        "scan ms",
        "× direct",
        "p50 ms",
        "p99 ms",
        "open+ftr ms",
        "chunks ms",
        "HEAD/ps",
        "GET/ps",
        "MiB GET/ps"
    );
    for s in &r.sides {
        side_line(s);
    }
    let c = &r.checks;
    if c.counted {
        let mark = |ok: bool| if ok { "yes" } else { "NO" };
        println!(
            "checks: warm reads made {} requests at the store ({}); cold reads fetched {} of the {} blocks they read ({}), \
             {} cold file(s) served from cache, {} cold open(s) without a HEAD",
            c.warm_requests,
            mark(c.warm_requests == 0),
            c.cold_blocks_fetched,
            c.cold_blocks_needed,
            mark(c.cold_blocks_fetched == c.cold_blocks_needed),
            c.cold_files_served_warm,
            c.cold_opens_without_head
        );
        if !c.ok {
            println!("WARNING: the cold/warm sides were not what they claim; their numbers are not trustworthy");
        }
    } else {
        println!("checks: the store does not count requests (not the embedded one); cold and warm are unverified");
    }
    for g in &r.goals {
        let verdict = match (g.applies, g.met) {
            (true, true) => "MET",
            (true, false) => "MISSED",
            (false, true) => "holds here (goal stated at another RTT)",
            (false, false) => "does not hold here (goal stated at another RTT)",
        };
        println!("goal: {} — measured {:.2}× → {verdict}", g.name, g.value);
    }
}

/// Prints the report as text.
pub fn print_scan(r: &ScanReport) {
    println!(
        "scan of {} Parquet files in object storage ({:.1} MiB each, {} row groups × {} columns): open/stat + footer + \
         {} column chunks per file ({:.0} KiB in all, {} reads), one file at a time",
        r.files,
        mib(r.file_bytes),
        r.row_groups,
        r.columns,
        r.chunks,
        r.chunk_bytes as f64 / 1024.0,
        r.chunk_reads,
    );
    println!(
        "chunks from columns: {}; cv block size {:.0} MiB; rounds: 1 first sight + {} synced + freed; cold is \
         paired with direct file by file (after each cold file, untimed, the shards finish filling its blocks), warm \
         and direct also run as passes of their own",
        r.columns_read,
        mib(r.block_size),
        r.rounds
    );
    for run in &r.runs {
        run_block(run);
    }
    println!();
    println!(
        "(scan ms = one pass over all files, the sum of per-file times, mean over passes; × direct = scan time / \
         that of the direct row measured alongside (paired for cold, own pass for warm), same run; per pass: \
         HEAD and GET requests and MiB asked for at the store, cold including the untimed block fills)"
    );
}
