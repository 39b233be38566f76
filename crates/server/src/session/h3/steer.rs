//! A QUIC endpoint for each worker, and the kernel steering each datagram
//! to the endpoint that knows its connection.
//!
//! A listener's UDP port is bound once for each worker (`SO_REUSEPORT`),
//! and each worker runs an endpoint of its own on its socket, so that the
//! datagrams of a connection are read, decrypted and answered on one
//! worker, as a TCP connection is served where it was accepted: no
//! worker reads every datagram and wakes another for each.
//!
//! The kernel's own choice between the sockets of a group hashes the
//! addresses, which a client changes when it migrates (and a NAT when it
//! rebinds). So the connection IDs this server issues name their worker
//! in their first byte ([`WorkerCids`]), and a classic BPF program on
//! the group ([`program`]) sends each datagram to the socket of the
//! worker its destination ID names:
//!
//! - a short-header packet (first bit 0): the ID's first byte, at offset 1;
//! - a long-header packet (first bit 1): the byte at offset 6, the first of
//!   the ID after its length. A Handshake packet, or an Initial after a
//!   Retry, carries an ID of ours. A client's first Initial (and its 0-RTT
//!   packets) carry an ID the client chose at random, whose first byte
//!   picks the same worker for all of them, which then issues IDs of its
//!   own.
//!
//! That byte modulo the group's size is the socket's index. A datagram
//! too short to read fails the program, which then gives index 0.
//! An ID that names another worker is dropped by the endpoint that
//! receives it, and never answered with a stateless reset (which would
//! end a connection another endpoint holds).
//!
//! Where the program cannot be attached, the listener keeps one socket
//! and one endpoint, as before, and its connections are spread over the
//! workers.

use quinn::{ConnectionId, ConnectionIdGenerator};
use quinn_proto::{InvalidCid, RandomConnectionIdGenerator};
use socket2::{Domain, Protocol, Socket, Type};
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

/// The length of the connection IDs a steered endpoint issues: the
/// worker's byte and seven random ones.
const CID_LEN: usize = 8;

/// The most endpoints a listener has: a byte names the worker.
pub(crate) const MAX_ENDPOINTS: usize = 256;

/// Connection IDs whose first byte is the index of the worker whose
/// endpoint issued them.
pub(crate) struct WorkerCids {
    worker: u8,
    random: RandomConnectionIdGenerator,
}

impl WorkerCids {
    pub(crate) fn new(worker: u8) -> WorkerCids {
        WorkerCids {
            worker,
            random: RandomConnectionIdGenerator::new(CID_LEN),
        }
    }
}

impl ConnectionIdGenerator for WorkerCids {
    fn generate_cid(&mut self) -> ConnectionId {
        let random = self.random.generate_cid();
        let mut bytes = [0u8; CID_LEN];
        bytes.copy_from_slice(&random[..CID_LEN]);
        bytes[0] = self.worker;
        ConnectionId::new(&bytes)
    }

    /// An ID another worker issued is not this endpoint's to answer.
    fn validate(&self, cid: &ConnectionId) -> Result<(), InvalidCid> {
        match cid.first() {
            Some(&w) if cid.len() == CID_LEN && w == self.worker => Ok(()),
            _ => Err(InvalidCid),
        }
    }

    fn cid_len(&self) -> usize {
        CID_LEN
    }

    fn cid_lifetime(&self) -> Option<Duration> {
        None
    }
}

/// The steering program for a group of `count` sockets (see the module's
/// comment).
pub(crate) fn program(count: u32) -> [libc::sock_filter; 7] {
    let op = |code: u32, jt: u8, jf: u8, k: u32| libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    };
    let load_byte = libc::BPF_LD | libc::BPF_B | libc::BPF_ABS;
    [
        // 0: A = the packet's first byte.
        op(load_byte, 0, 0, 0),
        // 1: a long header goes to 4, a short one to 2.
        op(libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K, 2, 0, 0x80),
        // 2: A = the first byte of a short header's destination ID.
        op(load_byte, 0, 0, 1),
        // 3: on to 5.
        op(libc::BPF_JMP | libc::BPF_JA, 0, 0, 1),
        // 4: A = the first byte of a long header's destination ID.
        op(load_byte, 0, 0, 6),
        // 5: A = A modulo the group's size.
        op(libc::BPF_ALU | libc::BPF_MOD | libc::BPF_K, 0, 0, count),
        // 6: the socket's index.
        op(libc::BPF_RET | libc::BPF_A, 0, 0, 0),
    ]
}

/// Binds `addr` for QUIC: one socket for each of `workers` (at most
/// [`MAX_ENDPOINTS`]), steered by [`program`]; or one socket where there
/// is one worker or the program cannot be attached.
pub(crate) fn bind_group(addr: SocketAddr, workers: usize) -> std::io::Result<Vec<UdpSocket>> {
    let count = workers.clamp(1, MAX_ENDPOINTS);
    if count == 1 {
        return Ok(vec![bind(addr, false)?]);
    }
    if addr.port() != 0 {
        // As for TCP: a port another process holds fails here, rather
        // than being joined by a group of the same user.
        drop(bind(addr, false)?);
    }
    let first = bind(addr, true)?;
    let steering = program(count as u32);
    if crate::transport::sockopt::attach_reuseport_program(
        std::os::fd::AsFd::as_fd(&first),
        &steering,
    )
    .is_err()
    {
        return Ok(vec![first]);
    }
    let local = first.local_addr()?;
    let mut sockets = vec![first];
    for _ in 1..count {
        sockets.push(bind(local, true)?);
    }
    Ok(sockets)
}

fn bind(addr: SocketAddr, reuse_port: bool) -> std::io::Result<UdpSocket> {
    let domain = if addr.is_ipv6() {
        Domain::IPV6
    } else {
        Domain::IPV4
    };
    let socket = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP))?;
    if reuse_port {
        socket.set_reuse_port(true)?;
    }
    if addr.is_ipv6() {
        // As the TCP listener of the same address: `[::]` and `0.0.0.0`
        // are two listeners.
        socket.set_only_v6(true)?;
    }
    socket.bind(&addr.into())?;
    Ok(socket.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_name_their_worker_and_others_are_not_valid() {
        let mut w3 = WorkerCids::new(3);
        let a = w3.generate_cid();
        let b = w3.generate_cid();
        assert_eq!((a.len(), a[0], b[0]), (CID_LEN, 3, 3));
        assert_ne!(a, b);
        assert!(w3.validate(&a).is_ok());
        assert!(WorkerCids::new(4).validate(&a).is_err());
        assert!(w3.validate(&ConnectionId::new(&[3; 4])).is_err());
        assert!(w3.validate(&ConnectionId::new(&[])).is_err());
    }

    /// `[*]:port` (hitch's way of saying every address) is two listeners,
    /// `0.0.0.0` and `[::]`: the IPv6 one must not take IPv4 too, or its
    /// bind fails (it did: such a frontend with `quic = on` could not
    /// start).
    #[test]
    fn both_wildcards_bind_one_port_side_by_side() {
        if UdpSocket::bind("[::1]:0").is_err() {
            eprintln!("no IPv6 here");
            return;
        }
        for workers in [1, 2] {
            let v4 = bind_group("0.0.0.0:0".parse().unwrap(), workers).unwrap();
            let port = v4[0].local_addr().unwrap().port();
            let v6 = bind_group(SocketAddr::from(([0u16; 8], port)), workers).unwrap();
            assert_eq!(v6[0].local_addr().unwrap().port(), port);
        }
    }

    /// Datagrams from one client socket reach the socket of the group
    /// that their destination ID names, whatever the kernel's hash of
    /// the addresses would pick.
    #[test]
    fn the_kernel_steers_each_datagram_by_its_destination_id() {
        let group = bind_group("127.0.0.1:0".parse().unwrap(), 4).unwrap();
        if group.len() == 1 {
            eprintln!("no reuseport program on this kernel: one socket");
            return;
        }
        assert_eq!(group.len(), 4);
        let to = group[0].local_addr().unwrap();
        for s in &group {
            s.set_nonblocking(true).unwrap();
        }
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        let receiver = |datagram: &[u8]| {
            client.send_to(datagram, to).unwrap();
            // Exactly one socket has it; find which.
            let mut buf = [0u8; 64];
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            loop {
                for (i, s) in group.iter().enumerate() {
                    if let Ok((n, _)) = s.recv_from(&mut buf) {
                        assert_eq!(&buf[..n], datagram);
                        return i;
                    }
                }
                assert!(std::time::Instant::now() < deadline, "nothing arrived");
                std::thread::yield_now();
            }
        };
        for worker in 0..4u8 {
            // Short header: flags, then the ID.
            let short = [0x40, worker, 9, 9, 9, 9, 9, 9, 9, 1, 2, 3];
            assert_eq!(receiver(&short), usize::from(worker));
            // Long header: flags, version, ID length, then the ID.
            let long = [0xc0, 0, 0, 0, 1, 8, worker, 7, 7, 7, 7, 7, 7, 7, 0];
            assert_eq!(receiver(&long), usize::from(worker));
            // An ID byte past the group wraps around it.
            let wrapped = [0x40, worker + 4, 1, 1, 1, 1, 1, 1, 1];
            assert_eq!(receiver(&wrapped), usize::from(worker));
        }
        // Too short to read: the first socket.
        assert_eq!(receiver(&[0xc0, 0, 0]), 0);
    }
}
