//! Removing rigs left by an earlier run that crashed before its teardown: a rig's bridge names its
//! creating pid in its alias; a bridge whose creator is gone is stale, and so is a rig namespace whose
//! bridge is gone (teardown deletes namespaces first, setup creates the bridge first). A bridge with
//! no alias yet is being set up by a live rig and is left alone.

use std::collections::BTreeSet;
use std::path::PathBuf;

use super::{disk, names, net, sys};

/// What the alias of a rig's bridge records.
struct Owner {
    pid: u32,
    dir: Option<PathBuf>,
}

fn owner(alias: &str) -> Option<Owner> {
    let mut words = alias.split_whitespace();
    if words.next()? != names::ALIAS_TAG {
        return None;
    }
    let mut o = Owner { pid: 0, dir: None };
    for w in words {
        if let Some(p) = w.strip_prefix("pid=") {
            o.pid = p.parse().ok()?;
        } else if let Some(d) = w.strip_prefix("dir=") {
            o.dir = Some(PathBuf::from(d));
        }
    }
    (o.pid != 0).then_some(o)
}

/// Tears down every stale rig; returns the subnets it removed. Errors are skipped (another process
/// may be sweeping the same rig): whatever is left is tried again by the next sweep.
pub fn sweep() -> Vec<u8> {
    let links = sys::links();
    let namespaces = sys::netns_list().unwrap_or_default();
    let mut live = BTreeSet::new();
    let mut stale = BTreeSet::new();
    for s in links.iter().filter_map(|l| names::parse_bridge(l)) {
        match owner(&sys::link_alias(&names::bridge(s))) {
            Some(o) if !sys::pid_alive(o.pid) => {
                if let Some(dir) = &o.dir {
                    let _ = disk::unmount_under(dir);
                }
                remove_rig(s, &namespaces, &links);
                if let Some(dir) = &o.dir {
                    let _ = std::fs::remove_dir_all(dir);
                }
                stale.insert(s);
            }
            _ => {
                live.insert(s);
            }
        }
    }
    // Namespaces and veths without a bridge.
    let orphans = namespaces.iter().filter_map(|n| names::parse_netns(n).map(|(s, _)| s));
    let orphans = orphans.chain(links.iter().filter_map(|l| names::parse_veth(l)));
    for s in orphans.filter(|s| !live.contains(s)).collect::<BTreeSet<_>>() {
        remove_rig(s, &namespaces, &links);
        stale.insert(s);
    }
    stale.into_iter().collect()
}

/// Removes rig `s`'s namespaces (and what runs in them), its veths, then its bridge.
fn remove_rig(s: u8, namespaces: &[String], links: &[String]) {
    for ns in namespaces.iter().filter(|n| names::parse_netns(n).is_some_and(|(ns_s, _)| ns_s == s)) {
        let _ = net::remove_netns(ns);
    }
    for l in links.iter().filter(|l| names::parse_veth(l) == Some(s)) {
        let _ = sys::ip(&["link", "del", l]);
    }
    let _ = net::remove_bridge(s);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_owner_from_the_alias() {
        let o = owner("cv-rig pid=42 dir=/tmp/cv-rig-7-x").unwrap();
        assert_eq!((o.pid, o.dir.as_deref()), (42, Some(std::path::Path::new("/tmp/cv-rig-7-x"))));
        assert!(owner("").is_none());
        assert!(owner("somebody else's bridge").is_none());
        assert!(owner("cv-rig pid=x").is_none());
    }
}
