//! The masters `bench open` and `bench meta` measure, as the local cluster runs them: no
//! worker (the bench registers stand-ins), on a tokio runtime of their own so the bench's load
//! runs beside them as any client would. The benches reach them only over the network.

use crate::cluster::{ClusterError, ClusterOptions, LocalCluster};
use cv_benches::master_bench::{BenchError, MasterBed, Reads};
use cv_master::server::RaftReads;
use cv_net::config::Dur;
use cv_net::tls::Identity;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long a group may take to elect its first leader.
const FIRST_LEADER_WITHIN: Duration = Duration::from_secs(20);

/// Running masters; stopped when dropped.
struct LocalMasters {
    rt: tokio::runtime::Runtime,
    cluster: Option<LocalCluster>,
    leader: SocketAddr,
    client: Identity,
    node: Identity,
}

impl MasterBed for LocalMasters {
    fn leader(&self) -> SocketAddr {
        self.leader
    }

    fn client_identity(&self) -> &Identity {
        &self.client
    }

    fn node_identity(&self) -> &Identity {
        &self.node
    }
}

impl Drop for LocalMasters {
    fn drop(&mut self) {
        if let Some(c) = self.cluster.take()
            && let Err(e) = self.rt.block_on(c.shutdown())
        {
            tracing::warn!("stopping the bench's masters: {e}");
        }
    }
}

/// [`cv_benches::master_bench::StartMasters`] over the local cluster: `masters` masters with
/// their files in `dir`, returned once one leads.
pub fn start_masters(dir: &Path, masters: usize, reads: Reads) -> Result<Box<dyn MasterBed>, BenchError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(masters.clamp(1, 2))
        .enable_all()
        .thread_name("bench-master")
        .build()?;
    let opts = ClusterOptions {
        masters,
        worker: false,
        // The stand-in workers never send a heartbeat.
        heartbeat_timeout: Dur::secs(600),
        // No worker holds the blocks a tail would be read back from.
        check_tails: false,
        raft_reads: match reads {
            Reads::Lease => RaftReads::Lease,
            Reads::ReadIndex => RaftReads::ReadIndex,
        },
        ..ClusterOptions::ephemeral(dir)
    };
    let cluster = rt.block_on(LocalCluster::start(&opts))?;
    let mut bed = LocalMasters {
        client: cluster.client_identity()?,
        node: cluster.node_identity().clone(),
        leader: cluster.master_addr(),
        cluster: Some(cluster),
        rt,
    };
    let cluster = bed.cluster.as_ref().expect("just started");
    if masters > 1 {
        let deadline = Instant::now() + FIRST_LEADER_WITHIN;
        let leader = loop {
            if let Some(i) = cluster.leader() {
                break i;
            }
            if Instant::now() > deadline {
                let e: ClusterError = format!("no master of the {masters} leads after {FIRST_LEADER_WITHIN:?}").into();
                return Err(e);
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        bed.leader = cluster.master_addrs()[leader];
    }
    Ok(Box::new(bed))
}
