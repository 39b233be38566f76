//! Access control lists: address prefixes, some negated, matched by the
//! most specific entry (the longest prefix) that contains the address.

use std::net::{IpAddr, Ipv6Addr, SocketAddr, ToSocketAddrs};

#[derive(Debug, Clone)]
pub struct AclRule {
    /// The network as an IPv6 address (IPv4 mapped into ::ffff:0:0/96).
    pub net: u128,
    /// Prefix length over the 128-bit form.
    pub bits: u8,
    pub negated: bool,
    /// The entry as written, for logs.
    pub text: String,
}

#[derive(Debug, Clone)]
pub struct Acl {
    pub name: String,
    /// Longest prefix first.
    pub rules: Vec<AclRule>,
    /// `+log`: each match is logged (see [`Acl::log_line`]).
    pub log: bool,
}

fn as_v6(ip: IpAddr) -> Ipv6Addr {
    match ip {
        IpAddr::V4(a) => a.to_ipv6_mapped(),
        IpAddr::V6(a) => a,
    }
}

/// The address of a mapped or plain IPv6 number, as written.
fn from_v6(net: u128, v4: bool) -> IpAddr {
    let v6 = Ipv6Addr::from(net);
    match (v4, v6.to_ipv4_mapped()) {
        (true, Some(a)) => IpAddr::V4(a),
        _ => IpAddr::V6(v6),
    }
}

fn mask(bits: u8) -> u128 {
    if bits == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(bits))
    }
}

impl Acl {
    /// Resolves an entry (an address or a host name) into rules. The mask
    /// is in the address family's own bits.
    pub fn rules_for(
        addr: &str,
        mask_bits: Option<u8>,
        negated: bool,
    ) -> Result<Vec<AclRule>, String> {
        let ips: Vec<IpAddr> = match addr.parse::<IpAddr>() {
            Ok(ip) => vec![ip],
            Err(_) => (addr, 0)
                .to_socket_addrs()
                .map_err(|e| format!("'{addr}' does not resolve: {e}"))?
                .map(|a| a.ip())
                .collect(),
        };
        if ips.is_empty() {
            return Err(format!("'{addr}' does not resolve"));
        }
        let mut out = Vec::new();
        for ip in ips {
            let family_bits = if ip.is_ipv4() { 32 } else { 128 };
            let m = mask_bits.unwrap_or(family_bits);
            if m > family_bits {
                return Err(format!("mask /{m} is too long for {ip}"));
            }
            let bits = if ip.is_ipv4() { m + 96 } else { m };
            let net = u128::from(as_v6(ip));
            // A literal address with bits past its mask is refused, as
            // varnishd 7 refuses it (a name's addresses are masked).
            if net & !mask(bits) != 0 && addr.parse::<IpAddr>().is_ok() {
                let fixed = from_v6(net & mask(bits), ip.is_ipv4());
                return Err(format!(
                    "Non-zero bits in masked part, (maybe use {fixed}/{m} ?)"
                ));
            }
            out.push(AclRule {
                net: net & mask(bits),
                bits,
                negated,
                text: match mask_bits {
                    Some(m) => format!("{}\"{addr}\"/{m}", if negated { "!" } else { "" }),
                    None => format!("{}\"{addr}\"", if negated { "!" } else { "" }),
                },
            });
        }
        Ok(out)
    }

    pub fn sort(&mut self) {
        self.rules.sort_by_key(|r| std::cmp::Reverse(r.bits));
    }

    /// The rule that decides for this address, if any.
    pub fn matching(&self, addr: Option<SocketAddr>) -> Option<&AclRule> {
        let ip = u128::from(as_v6(addr?.ip()));
        self.rules.iter().find(|r| ip & mask(r.bits) == r.net)
    }

    /// The `VCL_acl` record for a match: `MATCH name "entry"`,
    /// `NEG_MATCH name "entry"` for a negated entry, or `NO_MATCH name`.
    pub fn log_line(&self, addr: Option<SocketAddr>) -> String {
        match self.matching(addr) {
            Some(r) if r.negated => format!("NEG_MATCH {} {}", self.name, &r.text[1..]),
            Some(r) => format!("MATCH {} {}", self.name, r.text),
            None => format!("NO_MATCH {}", self.name),
        }
    }

    /// Whether the address is in the list.
    pub fn matches(&self, addr: Option<SocketAddr>) -> bool {
        self.matching(addr).is_some_and(|r| !r.negated)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(entries: &[(&str, Option<u8>, bool)]) -> Acl {
        let mut a = Acl {
            name: "t".into(),
            rules: Vec::new(),
            log: true,
        };
        for (addr, m, neg) in entries {
            a.rules.extend(Acl::rules_for(addr, *m, *neg).unwrap());
        }
        a.sort();
        a
    }

    fn at(s: &str) -> Option<SocketAddr> {
        Some(SocketAddr::new(s.parse().unwrap(), 1234))
    }

    #[test]
    fn most_specific_entry_decides() {
        let a = acl(&[
            ("10.0.0.0", Some(8), false),
            ("10.1.2.3", None, true),
            ("::1", None, false),
        ]);
        assert!(a.matches(at("10.9.9.9")));
        assert!(!a.matches(at("10.1.2.3")));
        assert!(!a.matches(at("11.0.0.1")));
        assert!(a.matches(at("::1")));
        assert!(a.matches(at("::ffff:10.2.3.4")));
        assert!(!a.matches(None));
        assert_eq!(a.log_line(at("10.9.9.9")), "MATCH t \"10.0.0.0\"/8");
        assert_eq!(a.log_line(at("10.1.2.3")), "NEG_MATCH t \"10.1.2.3\"");
        assert_eq!(a.log_line(at("11.0.0.1")), "NO_MATCH t");
        assert!(Acl::rules_for("10.0.0.0", Some(33), false).is_err());
    }
}
