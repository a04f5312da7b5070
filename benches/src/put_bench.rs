//! `cvctl bench put`: the latency of writing a whole file (create, blocks, complete) to a
//! new path and over an existing one, on each cluster given, interleaved so that every series
//! sees the same machine. With two clusters (this build's and a baseline's, e.g. the previous
//! release's `cvctl up`) it prints them side by side; with one, the new-path put is the
//! baseline of the overwrite.

use crate::report::{Latency, histogram};
use cv_client::Client;
use std::time::Instant;

/// What to write.
#[derive(Clone, Debug)]
pub struct PutOptions {
    /// Bytes per file.
    pub size: usize,
    /// Measured puts per series.
    pub count: u32,
    /// Unmeasured puts per series first.
    pub warmup: u32,
    /// cv directory the files go under (made if missing, removed after).
    pub dir: String,
}

/// One cluster to measure, by label.
#[derive(Debug)]
pub struct Target {
    pub label: String,
    pub client: Client,
}

/// Writes `data` to `path`, replacing what is there with `overwrite`.
async fn put(client: &Client, path: &str, data: &[u8], overwrite: bool) -> Result<(), cv_client::Error> {
    let mut w = client.create(path, overwrite).await?;
    w.write(data).await?;
    w.close().await?;
    Ok(())
}

/// Per target, a "new path" and an "overwrite" series, in target order.
pub async fn run_put(targets: &[Target], o: &PutOptions) -> Result<Vec<Latency>, cv_client::Error> {
    let data: Vec<u8> = (0..o.size).map(|i| (i * 31 % 251) as u8).collect();
    for t in targets {
        t.client.mkdir(&o.dir, true).await?;
        put(&t.client, &format!("{}/over", o.dir), &data, true).await?;
    }
    let mut hists: Vec<_> = targets.iter().map(|_| (histogram(), histogram())).collect();
    for i in 0..o.warmup + o.count {
        for (t, (new, over)) in targets.iter().zip(hists.iter_mut()) {
            let started = Instant::now();
            put(&t.client, &format!("{}/new-{i}", o.dir), &data, false).await?;
            let new_took = started.elapsed();
            let started = Instant::now();
            put(&t.client, &format!("{}/over", o.dir), &data, true).await?;
            let over_took = started.elapsed();
            if i >= o.warmup {
                new.record(new_took.as_nanos() as u64).ok();
                over.record(over_took.as_nanos() as u64).ok();
            }
        }
    }
    for t in targets {
        t.client.delete(&o.dir, true).await?;
    }
    Ok(targets
        .iter()
        .zip(&hists)
        .flat_map(|(t, (new, over))| {
            [
                Latency::from_hist(&format!("{}: put, new path", t.label), new),
                Latency::from_hist(&format!("{}: put -f, over a file", t.label), over),
            ]
        })
        .collect())
}
