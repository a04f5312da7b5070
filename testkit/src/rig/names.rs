//! The naming scheme of a rig's links, namespaces and addresses, in one place, so that creation,
//! teardown and the stale-rig sweep agree. Subnet `S` (1..=254) is the rig's; host `H` (1-based).
//! Link names stay within the kernel's 15 characters: `cvb254` and `cvv254h64` at most.

use std::net::Ipv4Addr;

/// Most hosts one rig has (addresses `.11` to `.74`).
pub const MAX_HOSTS: usize = 64;

/// Host `H` has address `10.210.S.(HOST_OFFSET + H)`; `.1` is the bridge's.
const HOST_OFFSET: u8 = 10;

/// Written into the bridge's alias, then `pid=<creator> dir=<temp dir>`.
pub(crate) const ALIAS_TAG: &str = "cv-rig";

/// The bridge of rig `s`.
pub(crate) fn bridge(s: u8) -> String {
    format!("cvb{s}")
}

/// The root-namespace end of host `h`'s veth pair (its other end is `eth0` in the host).
pub(crate) fn veth(s: u8, h: usize) -> String {
    format!("cvv{s}h{h}")
}

/// The network namespace of host `h`.
pub(crate) fn netns(s: u8, h: usize) -> String {
    format!("cv{s}h{h}")
}

/// The bridge's address, the root namespace's way into the rig.
pub(crate) fn bridge_addr(s: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, 210, s, 1)
}

/// Host `h`'s address.
pub(crate) fn host_addr(s: u8, h: usize) -> Ipv4Addr {
    let h = u8::try_from(h).expect("at most MAX_HOSTS hosts");
    Ipv4Addr::new(10, 210, s, HOST_OFFSET + h)
}

/// The `10.210.S.` prefix, to find the subnet in use by anything else.
pub(crate) fn subnet_prefix(s: u8) -> String {
    format!("10.210.{s}.")
}

/// `s` of a bridge name `cvb<s>`.
pub(crate) fn parse_bridge(name: &str) -> Option<u8> {
    digits(name.strip_prefix("cvb")?)
}

/// `(s, h)` of a namespace name `cv<s>h<h>`.
pub(crate) fn parse_netns(name: &str) -> Option<(u8, usize)> {
    let (s, h) = name.strip_prefix("cv")?.split_once('h')?;
    Some((digits(s)?, usize::from(digits(h)?)))
}

/// `s` of a veth name `cvv<s>h<h>`.
pub(crate) fn parse_veth(name: &str) -> Option<u8> {
    let (s, h) = name.strip_prefix("cvv")?.split_once('h')?;
    digits(h)?;
    digits(s)
}

fn digits(s: &str) -> Option<u8> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_and_parse_back() {
        for name in [bridge(254), veth(254, MAX_HOSTS), netns(254, MAX_HOSTS)] {
            assert!(name.len() <= 15, "{name}");
        }
        assert_eq!(parse_bridge(&bridge(7)), Some(7));
        assert_eq!(parse_netns(&netns(7, 3)), Some((7, 3)));
        assert_eq!(parse_veth(&veth(7, 3)), Some(7));
        assert_eq!(host_addr(7, 3), Ipv4Addr::new(10, 210, 7, 13));
        // Names of other things are left alone.
        for other in ["cvbr0", "cvh11", "cvb", "cv7h", "cvb300", "cvv7hx", "eth0"] {
            assert_eq!((parse_bridge(other), parse_netns(other), parse_veth(other)), (None, None, None), "{other}");
        }
    }
}
