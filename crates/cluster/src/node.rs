//! A node as the cluster knows it: its name (the `-i` identity, the name
//! the ring hashes), where its cluster messages go, where its peers fetch
//! from, and which run of it this is (a node that restarts comes back as
//! a new identity, so that what was said of its last run does not stick
//! to it). Also how a node is written in a cluster message.

use bytes::{Buf, BufMut};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

/// One node of the cluster.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Node {
    /// Its identity (`-i`), which the ring hashes.
    pub name: Arc<str>,
    /// Where its cluster messages go (UDP).
    pub addr: SocketAddr,
    /// Where its peers send requests (HTTP).
    pub http: SocketAddr,
    /// Which run of the node this is: each start (and each renewal of a
    /// refuted identity) takes a higher one.
    pub run: u64,
}

impl Node {
    /// What stands for a seed before it answers: only its address is
    /// known (the one field a message's destination is read for).
    pub fn seed(addr: SocketAddr) -> Node {
        Node {
            name: Arc::from(""),
            addr,
            http: SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
            run: 0,
        }
    }
}

impl foca::Identity for Node {
    type Addr = SocketAddr;

    fn renew(&self) -> Option<Self> {
        Some(Node {
            run: self.run.wrapping_add(1),
            ..self.clone()
        })
    }

    fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The later run of a node at one address is the one alive.
    fn win_addr_conflict(&self, adversary: &Self) -> bool {
        self.run > adversary.run
    }
}

/// Why a cluster message could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed;

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("malformed cluster message")
    }
}

impl std::error::Error for Malformed {}

/// The longest node name a message carries.
pub const MAX_NAME: usize = 255;

/// Writes a node: its name (a length byte first), both addresses, its run.
pub(crate) fn put_node(node: &Node, buf: &mut impl BufMut) {
    let name = &node.name.as_bytes()[..node.name.len().min(MAX_NAME)];
    buf.put_u8(name.len() as u8);
    buf.put_slice(name);
    put_addr(node.addr, buf);
    put_addr(node.http, buf);
    buf.put_u64(node.run);
}

/// The bytes [`put_node`] writes for `node`.
pub(crate) fn node_len(node: &Node) -> usize {
    1 + node.name.len().min(MAX_NAME) + addr_len(node.addr) + addr_len(node.http) + 8
}

fn addr_len(addr: SocketAddr) -> usize {
    match addr {
        SocketAddr::V4(_) => 1 + 4 + 2,
        SocketAddr::V6(_) => 1 + 16 + 2,
    }
}

fn put_addr(addr: SocketAddr, buf: &mut impl BufMut) {
    match addr.ip() {
        IpAddr::V4(ip) => {
            buf.put_u8(4);
            buf.put_slice(&ip.octets());
        }
        IpAddr::V6(ip) => {
            buf.put_u8(6);
            buf.put_slice(&ip.octets());
        }
    }
    buf.put_u16(addr.port());
}

/// Takes `n` bytes, or fails if there are fewer.
pub(crate) fn need(buf: &impl Buf, n: usize) -> Result<(), Malformed> {
    if buf.remaining() < n {
        return Err(Malformed);
    }
    Ok(())
}

/// Reads a node [`put_node`] wrote.
pub(crate) fn get_node(buf: &mut impl Buf) -> Result<Node, Malformed> {
    need(buf, 1)?;
    let len = buf.get_u8() as usize;
    need(buf, len)?;
    let mut name = vec![0; len];
    buf.copy_to_slice(&mut name);
    let name = String::from_utf8(name).map_err(|_| Malformed)?;
    let addr = get_addr(buf)?;
    let http = get_addr(buf)?;
    need(buf, 8)?;
    let run = buf.get_u64();
    Ok(Node {
        name: Arc::from(name),
        addr,
        http,
        run,
    })
}

fn get_addr(buf: &mut impl Buf) -> Result<SocketAddr, Malformed> {
    need(buf, 1)?;
    let ip = match buf.get_u8() {
        4 => {
            need(buf, 4 + 2)?;
            let mut o = [0; 4];
            buf.copy_to_slice(&mut o);
            IpAddr::V4(Ipv4Addr::from(o))
        }
        6 => {
            need(buf, 16 + 2)?;
            let mut o = [0; 16];
            buf.copy_to_slice(&mut o);
            IpAddr::V6(Ipv6Addr::from(o))
        }
        _ => return Err(Malformed),
    };
    Ok(SocketAddr::new(ip, buf.get_u16()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_reads_back_as_written_and_a_short_one_fails() {
        let node = Node {
            name: Arc::from("cache-1"),
            addr: "127.0.0.1:7000".parse().unwrap(),
            http: "[::1]:8080".parse().unwrap(),
            run: 42,
        };
        let mut out = Vec::new();
        put_node(&node, &mut out);
        assert_eq!(out.len(), node_len(&node));
        assert_eq!(get_node(&mut &out[..]).unwrap(), node);
        for cut in 0..out.len() {
            assert_eq!(get_node(&mut &out[..cut]), Err(Malformed), "cut at {cut}");
        }
        let mut bad = out.clone();
        bad[1 + 7] = 5;
        assert_eq!(get_node(&mut &bad[..]), Err(Malformed));
    }
}
