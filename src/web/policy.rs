//! Which IP addresses the web tools may connect to.
//!
//! Checked on every address a host name resolves to, for every redirect hop,
//! before any connection is opened; the connection then goes to the checked
//! address (see [`crate::web`] on DNS rebinding).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why `ip` may not be fetched, or `None` if it may. With `allow_private`,
/// loopback, private, shared (CGNAT), link-local and unique-local addresses
/// are allowed; metadata, unspecified, multicast and reserved ones never are.
pub(crate) fn refusal(ip: IpAddr, allow_private: bool) -> Option<&'static str> {
    let (always, private) = match ip {
        IpAddr::V4(v4) => v4_class(v4),
        IpAddr::V6(v6) => v6_class(v6),
    };
    always.or(if allow_private { None } else { private })
}

type Class = (Option<&'static str>, Option<&'static str>);

fn v4_class(ip: Ipv4Addr) -> Class {
    let [a, b, c, d] = ip.octets();
    let always = match (a, b, c, d) {
        (169, 254, 169, 254) | (169, 254, 170, 2) | (100, 100, 100, 200) => {
            Some("a cloud metadata address")
        }
        (0, ..) => Some("an unspecified address"),
        (224..=239, ..) => Some("a multicast address"),
        (240..=255, ..) => Some("a reserved or broadcast address"),
        _ => None,
    };
    let private = match (a, b) {
        (127, _) => Some("a loopback address"),
        (10, _) | (172, 16..=31) | (192, 168) => Some("a private address"),
        (100, 64..=127) => Some("a shared (carrier-grade NAT) address"),
        (169, 254) => Some("a link-local address"),
        (192, 0) if c == 0 => Some("a reserved address"),
        (198, 18 | 19) => Some("a reserved address"),
        _ => None,
    };
    (always, private)
}

fn v6_class(ip: Ipv6Addr) -> Class {
    if let Some(v4) = embedded_v4(ip) {
        return v4_class(v4);
    }
    let seg = ip.segments();
    let always = if ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) {
        Some("a cloud metadata address")
    } else if ip.is_unspecified() {
        Some("an unspecified address")
    } else if seg[0] & 0xff00 == 0xff00 {
        Some("a multicast address")
    } else {
        None
    };
    let private = if ip.is_loopback() {
        Some("a loopback address")
    } else if seg[0] & 0xfe00 == 0xfc00 {
        Some("a unique-local (private) address")
    } else if seg[0] & 0xffc0 == 0xfe80 || seg[0] & 0xffc0 == 0xfec0 {
        Some("a link-local address")
    } else {
        None
    };
    (always, private)
}

/// The IPv4 address inside an IPv4-mapped (`::ffff:a.b.c.d`), IPv4-compatible
/// (`::a.b.c.d`), NAT64 (`64:ff9b::a.b.c.d`) or 6to4 (`2002:AABB:CCDD::`)
/// address: those reach the IPv4 host, so its class is what counts.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let tail = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    match s {
        [0, 0, 0, 0, 0, 0xffff, ..] | [0x64, 0xff9b, 0, 0, 0, 0, ..] => Some(tail),
        [0, 0, 0, 0, 0, 0, hi, _] if hi != 0 => Some(tail),
        [0x2002, hi, lo, ..] => Some(Ipv4Addr::new(
            (hi >> 8) as u8,
            hi as u8,
            (lo >> 8) as u8,
            lo as u8,
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(s: &str, allow_private: bool) -> Option<&'static str> {
        refusal(s.parse().unwrap(), allow_private)
    }

    #[test]
    fn default_policy() {
        for ip in [
            "127.0.0.1",
            "127.9.9.9",
            "10.0.0.1",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "100.64.0.1",
            "169.254.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fc00::1",
            "fd00:ec2::254",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::",
            "::7f00:1",
        ] {
            assert!(refused(ip, false).is_some(), "{ip}");
        }
        for ip in [
            "93.184.216.34",
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert_eq!(refused(ip, false), None, "{ip}");
        }
    }

    #[test]
    fn allowing_private_keeps_metadata_and_multicast_refused() {
        for ip in ["127.0.0.1", "10.0.0.1", "::1", "fe80::1", "100.64.0.1"] {
            assert_eq!(refused(ip, true), None, "{ip}");
        }
        assert_eq!(
            refused("169.254.169.254", true),
            Some("a cloud metadata address")
        );
        assert_eq!(
            refused("fd00:ec2::254", true),
            Some("a cloud metadata address")
        );
        assert_eq!(refused("0.0.0.0", true), Some("an unspecified address"));
        assert_eq!(refused("ff02::1", true), Some("a multicast address"));
    }
}
