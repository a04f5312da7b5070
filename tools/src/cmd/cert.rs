//! `cvctl cert init`: a cluster CA plus a node and a client identity.

use super::CmdResult;
use clap::{Args, Subcommand};
use cv_net::tls::ClusterCa;
use std::path::PathBuf;

/// Certificate commands.
#[derive(Subcommand, Debug)]
pub enum Cert {
    /// Create `ca.pem`/`ca.key`, `node.pem`/`node.key` (masters and workers)
    /// and `client.pem`/`client.key` (applications, cvctl) in a directory.
    /// Every connection in the cluster is mutual TLS under this CA; peers
    /// without a certificate it signed are refused at the handshake.
    Init(InitArgs),
}

/// Arguments of `cvctl cert init`.
#[derive(Args, Debug)]
pub struct InitArgs {
    /// Directory to write into (created; an existing CA is never replaced).
    #[arg(long, default_value = "cv-certs")]
    dir: PathBuf,
    /// Cluster name, recorded in the CA's subject.
    #[arg(long, default_value = "cv")]
    cluster: String,
    /// Extra host names or IPs for the node certificate (repeatable).
    #[arg(long = "san")]
    sans: Vec<String>,
}

impl Cert {
    /// Runs the command.
    pub fn run(self) -> CmdResult {
        match self {
            Cert::Init(a) => {
                ClusterCa::init_dir(&a.dir, &a.cluster, &a.sans)?;
                println!("wrote cluster CA and identities to {}", a.dir.display());
                println!("  ca.pem            trust anchor, give to every node and client");
                println!("  ca.key            keep offline: it can mint identities");
                println!("  node.pem/.key     masters and workers");
                println!("  client.pem/.key   applications and cvctl");
                Ok(())
            }
        }
    }
}
