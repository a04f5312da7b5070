//! The rig's network: one bridge in the root namespace, and per host a namespace joined to it by a
//! veth pair. Creating the bridge is the rig's claim on its subnet: the kernel refuses a second link
//! of the same name, so two rigs (threads or processes) never share one.

use super::error::RigError;
use super::names;
use super::sys::{self, ip};

/// Tries to claim subnet `s`: creates its bridge, tagged with the creating pid and the rig's temp
/// dir (for the sweep), with the bridge address, up. `Ok(false)` if the name or subnet is taken.
pub(crate) fn claim_bridge(s: u8, dir: &std::path::Path) -> Result<bool, RigError> {
    let br = names::bridge(s);
    if let Err(e) = ip(&["link", "add", "name", &br, "type", "bridge"]) {
        if sys::links().contains(&br) {
            return Ok(false); // another rig holds it
        }
        return Err(e);
    }
    // Only addresses the rig made: a subnet anything else on the machine uses is not ours.
    let taken = ip(&["-o", "-4", "addr", "show"]).map(|a| a.contains(&names::subnet_prefix(s)));
    if taken.as_ref().map_or(true, |&t| t) {
        let _ = ip(&["link", "del", &br]);
        return taken.map(|_| false);
    }
    let alias = format!("{} pid={} dir={}", names::ALIAS_TAG, std::process::id(), dir.display());
    let configured = ip(&["link", "set", "dev", &br, "alias", &alias])
        .and_then(|_| ip(&["addr", "add", &format!("{}/24", names::bridge_addr(s)), "dev", &br]))
        .and_then(|_| ip(&["link", "set", "dev", &br, "up"]));
    if let Err(e) = configured {
        let _ = ip(&["link", "del", &br]);
        return Err(e);
    }
    Ok(true)
}

/// Creates host `h`: its namespace, a veth pair with `eth0` inside, the address, links up.
pub(crate) fn add_host(s: u8, h: usize) -> Result<(), RigError> {
    let (ns, veth) = (names::netns(s, h), names::veth(s, h));
    ip(&["netns", "add", &ns])?;
    ip(&["link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", &ns])?;
    ip(&["link", "set", &veth, "master", &names::bridge(s), "up"])?;
    let addr = format!("{}/24", names::host_addr(s, h));
    ip(&["-n", &ns, "addr", "add", &addr, "dev", "eth0"])?;
    ip(&["-n", &ns, "link", "set", "eth0", "up"])?;
    ip(&["-n", &ns, "link", "set", "lo", "up"])?;
    Ok(())
}

/// Sets host `h`'s link down (`up = false`) or up again. The root end is switched, so the host
/// sees its carrier go; the bridge keeps the port.
pub(crate) fn set_link(s: u8, h: usize, up: bool) -> Result<(), RigError> {
    ip(&["link", "set", "dev", &names::veth(s, h), if up { "up" } else { "down" }]).map(drop)
}

/// Inserts (`cut = true`) or deletes the rule dropping UDP for `port` on namespace `ns`'s
/// INPUT chain.
pub(crate) fn inbound_udp(ns: &str, port: u16, cut: bool) -> Result<(), RigError> {
    let port = port.to_string();
    let op = if cut { "-I" } else { "-D" };
    sys::run("ip", &["netns", "exec", ns, "iptables", op, "INPUT", "-p", "udp", "--dport", &port, "-j", "DROP"])
        .map(drop)
}

/// Removes host `h`'s namespace (its veth pair goes with it), killing what still runs inside.
/// Missing pieces are fine: teardown runs after partial setups and after a sweep.
pub(crate) fn remove_host(s: u8, h: usize) -> Result<(), RigError> {
    let ns = names::netns(s, h);
    remove_netns(&ns)?;
    // The kernel removes the pair with the namespace, a moment later; a veth whose namespace never
    // existed (a setup that failed halfway) is deleted here.
    let veth = names::veth(s, h);
    for _ in 0..50 {
        if !sys::links().contains(&veth) {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    match ip(&["link", "del", &veth]) {
        Err(_) if !sys::links().contains(&veth) => Ok(()),
        r => r.map(drop),
    }
}

/// Kills (SIGKILL) every process in namespace `ns`, then deletes it, if it exists.
pub(crate) fn remove_netns(ns: &str) -> Result<(), RigError> {
    if !sys::netns_list()?.iter().any(|n| n == ns) {
        return Ok(());
    }
    for pid in sys::netns_pids(ns) {
        let _ = sys::signal(pid, "KILL");
    }
    ip(&["netns", "del", ns]).map(drop)
}

/// Deletes rig `s`'s bridge if it exists.
pub(crate) fn remove_bridge(s: u8) -> Result<(), RigError> {
    let br = names::bridge(s);
    if sys::links().contains(&br) {
        ip(&["link", "del", &br])?;
    }
    Ok(())
}
