//! Replicas of cv-only blocks: placement on other hosts and zones, reads that survive a lost
//! copy, re-replication after the grace period, copies dropped as corrupt, drains. The core
//! alone, with an injected clock: heartbeats stand in for workers.

use std::sync::Arc;
use std::time::Duration;

use cv_master_core::config::ManualClock;
use cv_master_core::core::Storages;
use cv_master_core::journal::MemStorage;
use cv_master_core::{MasterConfig, MasterCore};

const GRACE: Duration = Duration::from_secs(60);

fn core_with(clock: &ManualClock, replicas: usize) -> MasterCore {
    let storages = Storages { journal: Box::new(MemStorage::new()), snapshot: Box::new(MemStorage::new()) };
    let cfg = MasterConfig { replicas, replica_grace: GRACE, ..MasterConfig::default() };
    MasterCore::start(cfg, storages, Arc::new(clock.clone())).unwrap()
}

/// A complete file of `blocks` blocks of 100 bytes at `path`; returns the block ids.
fn write(core: &MasterCore, path: &str, blocks: usize) -> Vec<u64> {
    let f = core.create(path, false, 0o644).unwrap();
    let ids: Vec<u64> = (0..blocks).map(|_| core.add_block(f.file_id).unwrap().block_id).collect();
    core.complete(f.file_id, 100 * blocks as u64, vec![100; blocks], None).unwrap();
    ids
}

/// Every copy of `block`, owner first.
fn copies(core: &MasterCore, block: u64) -> Vec<u64> {
    let data = core.state_data();
    let info = &data.blocks[&block];
    info.copies().collect()
}

#[test]
fn cv_only_blocks_get_copies_on_other_hosts_and_zones_and_cache_blocks_do_not() {
    let clock = ManualClock::new(0);
    let core = core_with(&clock, 2);
    // Two workers on one host in zone a, one on another host in zone a, one in zone b.
    let ws = [("10.0.0.1", "a"), ("10.0.0.1", "a"), ("10.0.0.2", "a"), ("10.0.0.3", "b")];
    let ids: Vec<u64> = ws
        .iter()
        .enumerate()
        .map(|(i, (h, z))| {
            core.begin_register_worker(None, h, vec![7000 + i as u16], 1 << 30, z).unwrap().wait().unwrap()
        })
        .collect();
    let zone = |w: u64| ws[ids.iter().position(|&x| x == w).unwrap()].1;
    for b in write(&core, "/f", 50) {
        let c = copies(&core, b);
        assert_eq!(c.len(), 2, "block {b}: {c:?}");
        assert_ne!(zone(c[0]), zone(c[1]), "block {b}: copies {c:?} share a zone");
    }
    let open = core.open("/f").unwrap();
    assert!(open.blocks.iter().all(|b| b.replicas.len() == 1 && b.replicas[0].1.is_some()));

    // Blocks under a cache-mode mount go to the store before they are acknowledged: one copy.
    core.mkdir("/lake", false).unwrap();
    core.begin_mount(
        &cv_master_core::CvPath::parse("/lake").unwrap(),
        "s3://b/p",
        cv_master_core::state::MountMode::Cache,
        vec![],
    )
    .unwrap()
    .wait()
    .unwrap();
    for b in write(&core, "/lake/t", 3) {
        assert_eq!(copies(&core, b).len(), 1);
    }
}

#[test]
fn a_lost_copy_is_read_elsewhere_and_replaced_after_the_grace_period() {
    let clock = ManualClock::new(1_000);
    let core = core_with(&clock, 2);
    let reg = |h: &str| core.begin_register_worker(None, h, vec![7001], 1 << 30, "").unwrap().wait().unwrap();
    let (w1, w2, w3) = (reg("10.0.0.1"), reg("10.0.0.2"), reg("10.0.0.3"));
    let blocks = write(&core, "/f", 30);
    let on = |w: u64| blocks.iter().copied().filter(|&b| copies(&core, b).contains(&w)).collect::<Vec<_>>();
    let victims = on(w1);
    assert!(!victims.is_empty());
    // Workers report what they hold.
    for w in [w1, w2, w3] {
        core.heartbeat(w, 1 << 30, 0, on(w), vec![]).unwrap();
    }

    core.workers_gone(&[w1]).unwrap();
    // Not lost: every block reads from its other copy, which open names first.
    let open = core.open("/f").unwrap();
    assert!(open.blocks.iter().all(|b| !b.lost && b.worker_live && b.worker_id != w1));
    let report = core.replicate().unwrap();
    assert_eq!((report.ordered, report.lost), (0, 0), "within the grace period nothing is copied");
    assert_eq!(report.short, victims.len());

    clock.advance(GRACE + Duration::from_secs(1));
    let report = core.replicate().unwrap();
    assert_eq!(report.ordered, victims.len());
    // Each order goes to the worker that holds no copy, in its heartbeat reply.
    let mut made = Vec::new();
    for w in [w2, w3] {
        let reply = core.heartbeat(w, 1 << 30, 0, vec![], vec![]).unwrap();
        for o in &reply.copy {
            assert!(victims.contains(&o.block_id));
            assert!(!copies(&core, o.block_id).contains(&w), "ordered to a worker that has it");
            assert_ne!(o.from_worker, w1);
            made.push((w, o.block_id));
        }
    }
    assert_eq!(made.len(), victims.len());
    // Not handed out twice.
    assert!(core.heartbeat(w2, 1 << 30, 0, vec![], vec![]).unwrap().copy.is_empty());
    for (w, b) in &made {
        let reply = core.heartbeat(*w, 1 << 30, 0, vec![*b], vec![]).unwrap();
        assert!(!reply.delete_blocks.contains(b), "a copy made on order is kept");
    }
    for b in &victims {
        let c = copies(&core, *b);
        assert_eq!(c.len(), 3, "block {b}: {c:?}");
    }
    // The dead worker's copies are dropped, and it is told to delete them when it is back.
    let report = core.replicate().unwrap();
    assert_eq!(report.dropped, victims.len());
    assert!(victims.iter().all(|b| !copies(&core, *b).contains(&w1) && copies(&core, *b).len() == 2));
    core.begin_register_worker(Some(w1), "10.0.0.1", vec![7001], 1 << 30, "").unwrap().wait().unwrap();
    let mut deletes = core.heartbeat(w1, 1 << 30, 0, victims.clone(), vec![]).unwrap().delete_blocks;
    deletes.sort_unstable();
    assert_eq!(deletes, victims);
    assert_eq!(core.replicate().unwrap(), Default::default());
}

#[test]
fn a_copy_dropped_as_corrupt_is_made_again() {
    let clock = ManualClock::new(1_000);
    let core = core_with(&clock, 2);
    let reg = |h: &str| core.begin_register_worker(None, h, vec![7001], 1 << 30, "").unwrap().wait().unwrap();
    let ws = [reg("10.0.0.1"), reg("10.0.0.2"), reg("10.0.0.3")];
    let b = write(&core, "/f", 1)[0];
    let holder = copies(&core, b)[0];
    core.heartbeat(holder, 1 << 30, 0, vec![], vec![b]).unwrap();
    assert_eq!(copies(&core, b).len(), 1);
    let report = core.replicate().unwrap();
    assert_eq!(report.ordered, 1);
    let orders: Vec<_> = ws.iter().flat_map(|&w| core.heartbeat(w, 1 << 30, 0, vec![], vec![]).unwrap().copy).collect();
    assert_eq!(orders.len(), 1);
    assert_eq!(orders[0].from_worker, copies(&core, b)[0]);
}

#[test]
fn a_drained_worker_gives_up_its_copies_once_they_are_elsewhere() {
    let clock = ManualClock::new(1_000);
    let core = core_with(&clock, 2);
    let reg = |h: &str| core.begin_register_worker(None, h, vec![7001], 1 << 30, "").unwrap().wait().unwrap();
    let ws = [reg("10.0.0.1"), reg("10.0.0.2"), reg("10.0.0.3")];
    let blocks = write(&core, "/f", 20);
    let drained = ws[0];
    let on: Vec<u64> = blocks.iter().copied().filter(|&b| copies(&core, b).contains(&drained)).collect();
    core.begin_drain(drained, true).unwrap().wait().unwrap();
    // No new block goes to it.
    let f = core.create("/g", false, 0o644).unwrap();
    assert!((0..20).all(|_| {
        let nb = core.add_block(f.file_id).unwrap();
        nb.worker_id != drained && nb.replicas.iter().all(|r| r.0 != drained)
    }));
    assert_eq!(core.replicate().unwrap().ordered, on.len());
    for w in &ws[1..] {
        let orders = core.heartbeat(*w, 1 << 30, 0, vec![], vec![]).unwrap().copy;
        let got: Vec<u64> = orders.iter().map(|o| o.block_id).collect();
        core.heartbeat(*w, 1 << 30, 0, got, vec![]).unwrap();
    }
    assert_eq!(core.replicate().unwrap().dropped, on.len());
    assert!(blocks.iter().all(|&b| !copies(&core, b).contains(&drained) && copies(&core, b).len() == 2));
    let sum = core.inspect(|st| st.block_summary(2, 10));
    assert_eq!(sum.per_worker.get(&drained).map_or(0, |w| w.bytes_to_move), 0);
    assert_eq!(sum.under_replicated_blocks, 0);
}

#[test]
fn a_worker_back_with_a_wiped_disk_has_its_copies_made_again() {
    let clock = ManualClock::new(1_000);
    let core = core_with(&clock, 2);
    let reg = |h: &str| core.begin_register_worker(None, h, vec![7001], 1 << 30, "").unwrap().wait().unwrap();
    let ws = [reg("10.0.0.1"), reg("10.0.0.2"), reg("10.0.0.3")];
    let blocks = write(&core, "/f", 12);
    let wiped = ws[0];
    let had: Vec<u64> = blocks.iter().copied().filter(|&b| copies(&core, b).contains(&wiped)).collect();
    assert!(!had.is_empty());
    // It comes back (same address, so the same id) and reports everything it holds: nothing.
    assert_eq!(core.begin_register_worker(None, "10.0.0.1", vec![7001], 1 << 30, "").unwrap().wait().unwrap(), wiped);
    core.begin_heartbeat_full(wiped, 1 << 30, 0, vec![], vec![], true).unwrap().wait().unwrap();
    assert!(had.iter().all(|b| !copies(&core, *b).contains(&wiped) && copies(&core, *b).len() == 1));
    // Short at once (no grace: the copies are known gone), copied from the other copy.
    assert_eq!(core.replicate().unwrap().ordered, had.len());
    // A full report that has its blocks changes nothing.
    let other = ws[1];
    let held: Vec<u64> = blocks.iter().copied().filter(|&b| copies(&core, b).contains(&other)).collect();
    core.begin_heartbeat_full(other, 1 << 30, 0, held.clone(), vec![], true).unwrap().wait().unwrap();
    assert!(held.iter().all(|b| copies(&core, *b).contains(&other)));
}

#[test]
fn a_full_worker_gets_no_new_copies_while_others_have_room() {
    let clock = ManualClock::new(1_000);
    let core = core_with(&clock, 2);
    let reg = |h: &str| core.begin_register_worker(None, h, vec![7001], 1 << 30, "").unwrap().wait().unwrap();
    let ws = [reg("10.0.0.1"), reg("10.0.0.2"), reg("10.0.0.3")];
    core.heartbeat(ws[0], 1 << 30, (1 << 30) - (1 << 20), vec![], vec![]).unwrap();
    for b in write(&core, "/f", 40) {
        let c = copies(&core, b);
        assert_eq!(c.len(), 2);
        assert!(!c.contains(&ws[0]), "block {b} placed on the full worker: {c:?}");
    }
    // Every worker full: the ring's owner gets the block (and refuses it with NoSpace).
    for w in &ws[1..] {
        core.heartbeat(*w, 1 << 30, 1 << 30, vec![], vec![]).unwrap();
    }
    let f = core.create("/g", false, 0o644).unwrap();
    let nb = core.add_block(f.file_id).unwrap();
    assert!(nb.replicas.is_empty());
}

#[test]
fn a_block_its_writer_could_not_store_on_a_worker_is_placed_again_without_it() {
    let clock = ManualClock::new(1_000);
    let core = core_with(&clock, 2);
    let reg = |h: &str| core.begin_register_worker(None, h, vec![7001], 1 << 30, "").unwrap().wait().unwrap();
    let _ws = [reg("10.0.0.1"), reg("10.0.0.2"), reg("10.0.0.3")];
    let f = core.create("/f", false, 0o644).unwrap();
    let first = core.begin_add_block_at(f.file_id, 0, &[]).unwrap().wait().unwrap();
    let dead = first.replicas[0].0;
    let again = core.begin_add_block_at(f.file_id, 0, &[dead]).unwrap().wait().unwrap();
    assert_ne!(again.block_id, first.block_id, "a new block");
    assert_eq!(again.index, 0);
    let copies_now: Vec<u64> = std::iter::once(again.worker_id).chain(again.replicas.iter().map(|r| r.0)).collect();
    assert_eq!(copies_now.len(), 2);
    assert!(!copies_now.contains(&dead), "{copies_now:?}");
    // The old block is gone, its copies told to delete it.
    assert!(!core.state_data().blocks.contains_key(&first.block_id));
    assert!(core.inspect(|st| st.pending_deletes(first.worker_id)).contains(&first.block_id));
    // A retry of the replacement gets the same new block; the file completes with it.
    assert_eq!(core.begin_add_block_at(f.file_id, 0, &[dead]).unwrap().wait().unwrap().block_id, again.block_id);
    core.complete(f.file_id, 100, vec![100], None).unwrap();
    assert_eq!(core.open("/f").unwrap().blocks[0].block_id, again.block_id);
    // With every other worker excluded too, there is nowhere to go.
    let f2 = core.create("/g", false, 0o644).unwrap();
    let all: Vec<u64> = core.state_data().workers.keys().copied().collect();
    let e = core.begin_add_block_at(f2.file_id, 0, &all).unwrap_err();
    assert_eq!(e.kind(), cv_master_core::ErrorKind::NoWorkers);
}

#[test]
fn a_block_written_short_of_copies_gets_them_once_a_worker_has_room() {
    let clock = ManualClock::new(1_000);
    let core = core_with(&clock, 2);
    let reg = |h: &str| core.begin_register_worker(None, h, vec![7001], 1 << 30, "").unwrap().wait().unwrap();
    let ws = [reg("10.0.0.1"), reg("10.0.0.2")];
    // Nothing to do yet: the pass goes quiet.
    assert_eq!(core.replicate().unwrap(), Default::default());
    core.heartbeat(ws[0], 1 << 30, 1 << 30, vec![], vec![]).unwrap();
    let b = write(&core, "/f", 1)[0];
    assert_eq!(copies(&core, b), vec![ws[1]], "the full worker gets no copy");
    // Short, with nowhere to copy to: counted, nothing ordered.
    let r = core.replicate().unwrap();
    assert_eq!((r.short, r.ordered), (1, 0));
    core.heartbeat(ws[0], 1 << 30, 0, vec![], vec![]).unwrap();
    assert_eq!(core.replicate().unwrap().ordered, 1);
}
