//! `cvctl cert init` (a cluster CA and the first identities) and `cvctl cert issue` (one more
//! identity under an existing CA: a new node, an operator, an application, or a renewal);
//! `cert revoke` and `cert revoked` are in `revoke.rs`.

use super::CmdResult;
use clap::{Args, Subcommand, ValueEnum};
use cv_net::config::Dur;
use cv_net::identity::{CertRole, PeerCert};
use cv_net::tls::{ClusterCa, default_lifetime};
use std::path::PathBuf;

/// Certificate commands.
#[derive(Subcommand, Debug)]
pub enum Cert {
    /// Create `ca.pem`/`ca.key`, `node.pem`/`node.key` (masters and workers),
    /// `admin.pem`/`admin.key` (the operator's cvctl) and `client.pem`/`client.key`
    /// (applications) in a directory. Every connection in the cluster is mutual TLS under this
    /// CA; peers without a certificate it signed are refused at the handshake, and what a peer
    /// may do is the role its certificate names.
    Init(InitArgs),
    /// Issue one identity under the CA in `--dir`: `<out>.pem` and `<out>.key`. Run it again
    /// before the old one ends to renew (the peer picks up the new files when it restarts).
    Issue(IssueArgs),
    /// Revoke a certificate (a `.pem` file, a serial number) or every certificate of a name
    /// issued until now, through the leading master (admin certificate). Masters refuse it at
    /// once and close its connections; workers within a heartbeat.
    Revoke(super::revoke::RevokeArgs),
    /// List the revoked certificates.
    Revoked(super::revoke::RevokedArgs),
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

/// What an issued certificate lets its holder do.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum RoleArg {
    /// The operator: mounts, drain, free, master add/remove, and everything a client may.
    Admin,
    /// An application (compute node, gateway, FUSE mount): files only.
    Client,
    /// One worker, named by `--name` (the node name it registers as).
    Worker,
    /// One master, named by `--name`.
    Master,
}

/// Arguments of `cvctl cert issue`.
#[derive(Args, Debug)]
pub struct IssueArgs {
    /// The directory holding the CA (`ca.pem`, `ca.key`), as `cert init` made it.
    #[arg(long, default_value = "cv-certs")]
    dir: PathBuf,
    /// The role the certificate grants.
    #[arg(long, value_enum)]
    role: RoleArg,
    /// The holder's name: the certificate's common name and, for a worker or master, the node
    /// name it may speak as.
    #[arg(long)]
    name: String,
    /// How long it is valid (e.g. `90d`, `8760h`). Default: a year for workers and masters,
    /// 90 days for admins and clients.
    #[arg(long)]
    valid_for: Option<Dur>,
    /// Extra host names or IPs a worker or master serves under (repeatable).
    #[arg(long = "san")]
    sans: Vec<String>,
    /// Where to write: `<out>.pem` and `<out>.key` (mode 0600); existing files are not replaced.
    #[arg(long)]
    out: PathBuf,
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
                println!("  admin.pem/.key    the operator's cvctl: mounts, drain, free, masters");
                println!("  client.pem/.key   applications: files only");
                println!("  capability.key    masters only ([master] capability_key): signs block capabilities");
                Ok(())
            }
            Cert::Issue(a) => issue(a),
            Cert::Revoke(a) => a.run(),
            Cert::Revoked(a) => a.run(),
        }
    }
}

fn issue(a: IssueArgs) -> CmdResult {
    let role = match a.role {
        RoleArg::Admin => CertRole::Admin,
        RoleArg::Client => CertRole::Client,
        RoleArg::Worker => CertRole::Worker(a.name.clone()),
        RoleArg::Master => CertRole::Master(a.name.clone()),
    };
    // A node name a worker or master will speak as must be one a role URI can carry.
    if let Some(uri) = role.uri() {
        CertRole::from_uri(&uri)?;
    }
    if !role.is_node() && !a.sans.is_empty() {
        return Err("--san is for workers and masters: an admin or client certificate never serves".into());
    }
    let lifetime = a.valid_for.map(|d| d.get()).unwrap_or_else(|| default_lifetime(&role));
    let ca = ClusterCa::load_dir(&a.dir)?;
    let issued = ca.issue_for(&a.name, &role, &a.sans, lifetime)?;
    let (dir, stem) = match (a.out.parent(), a.out.file_name().and_then(|f| f.to_str())) {
        (Some(d), Some(s)) => (if d.as_os_str().is_empty() { std::path::Path::new(".") } else { d }, s),
        _ => return Err(format!("--out {}: needs a file name", a.out.display()).into()),
    };
    issued.write(dir, stem)?;
    let peer = PeerCert::from_pem(&issued.cert_pem)?;
    println!("wrote {} and {}", dir.join(format!("{stem}.pem")).display(), dir.join(format!("{stem}.key")).display());
    println!("  role      {}", peer.role);
    println!("  serial    {}", peer.serial);
    println!("  valid for {} days", lifetime.as_secs() / 86_400);
    Ok(())
}
