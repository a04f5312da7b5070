//! Which master led when a client last looked, kept in a small file so that short-lived
//! processes (`cvctl`) dial the leader first instead of every master.
//!
//! One file per set of masters (the configured list in any order, hashed into the name), so
//! clients of different clusters on one host do not mix. The file is only a hint: a
//! leader that is wrong or gone costs one redirect (a follower names the leader) or, for a
//! dead one, one short wait before all masters are asked at once. It never decides whom to
//! trust: TLS verifies whichever master is dialed, and the hint may only name a configured
//! master. Written atomically (a temporary file renamed over it), so a reader sees the old
//! hint or the new one, never a mix.

use crate::config::ClientSettings;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// The leader hint of one set of masters.
#[derive(Clone, Debug)]
pub struct LeaderHint {
    path: PathBuf,
    /// The configured masters, sorted: what the file's name is made from and must repeat.
    masters: Vec<SocketAddr>,
}

impl LeaderHint {
    /// The hint of the masters `settings` names, kept in `dir` (made when first written).
    pub fn in_dir(dir: &Path, settings: &ClientSettings) -> LeaderHint {
        let mut masters = vec![settings.master];
        masters.extend(settings.masters.iter().filter(|a| **a != settings.master));
        masters.sort();
        masters.dedup();
        let path = dir.join(format!("leader-{:016x}", fnv1a(list(&masters).as_bytes())));
        LeaderHint { path, masters }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The master the file names, if it exists, is well formed, was written for these masters
    /// and names one of them.
    pub fn read(&self) -> Option<SocketAddr> {
        let text = std::fs::read_to_string(&self.path).ok()?;
        let field =
            |key: &str| text.lines().find_map(|l| l.strip_prefix(key).and_then(|v| v.trim_start().strip_prefix('=')));
        if field("masters")?.trim() != list(&self.masters) {
            return None;
        }
        let leader: SocketAddr = field("leader")?.trim().parse().ok()?;
        self.masters.contains(&leader).then_some(leader)
    }

    /// Records `leader` (ignored unless it is one of the masters).
    pub fn write(&self, leader: SocketAddr) -> std::io::Result<()> {
        if !self.masters.contains(&leader) {
            return Ok(());
        }
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let text = format!(
            "# Which cv master led when a client last looked: only a hint, safe to delete.\n\
             masters = {}\nleader = {leader}\n",
            list(&self.masters)
        );
        let name = self.path.file_name().and_then(|n| n.to_str()).unwrap_or("leader");
        static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = dir.join(format!(".{name}.{}.{n}", std::process::id()));
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, &self.path).inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })
    }
}

fn list(masters: &[SocketAddr]) -> String {
    masters.iter().map(|a| a.to_string()).collect::<Vec<_>>().join(",")
}

/// FNV-1a, 64 bits: a file name that stays the same across builds (std's hasher may not).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(first: &str, others: &[&str]) -> ClientSettings {
        ClientSettings {
            master: first.parse().unwrap(),
            masters: others.iter().map(|a| a.parse().unwrap()).collect(),
            ..ClientSettings::default()
        }
    }

    #[test]
    fn a_hint_is_read_back_only_for_the_same_masters() {
        let dir = tempfile::tempdir().unwrap();
        let s = settings("10.0.0.1:7700", &["10.0.0.2:7700", "10.0.0.3:7700"]);
        let hint = LeaderHint::in_dir(dir.path(), &s);
        assert_eq!(hint.read(), None, "no file yet");
        hint.write("10.0.0.2:7700".parse().unwrap()).unwrap();
        assert_eq!(hint.read(), Some("10.0.0.2:7700".parse().unwrap()));
        // The same masters listed in another order share the file.
        let reordered = LeaderHint::in_dir(dir.path(), &settings("10.0.0.3:7700", &["10.0.0.1:7700", "10.0.0.2:7700"]));
        assert_eq!(reordered.path(), hint.path());
        assert_eq!(reordered.read(), Some("10.0.0.2:7700".parse().unwrap()));
        // Another cluster has its own file.
        let other = LeaderHint::in_dir(dir.path(), &settings("10.0.0.1:7700", &["10.0.0.2:7700"]));
        assert_ne!(other.path(), hint.path());
        assert_eq!(other.read(), None);
        // An address that is not one of the masters is never recorded.
        hint.write("10.9.9.9:7700".parse().unwrap()).unwrap();
        assert_eq!(hint.read(), Some("10.0.0.2:7700".parse().unwrap()));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "a temporary file was left behind");
    }

    #[test]
    fn a_damaged_or_foreign_hint_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let hint = LeaderHint::in_dir(dir.path(), &settings("10.0.0.1:7700", &["10.0.0.2:7700"]));
        for text in [
            "garbage",
            "masters = 10.0.0.1:7700,10.0.0.2:7700\nleader = nonsense\n",
            "masters = 10.0.0.1:7700,10.0.0.2:7700\nleader = 10.6.6.6:7700\n",
            "masters = 10.0.0.1:7700\nleader = 10.0.0.1:7700\n",
        ] {
            std::fs::write(hint.path(), text).unwrap();
            assert_eq!(hint.read(), None, "{text:?} was taken as a hint");
        }
    }
}
