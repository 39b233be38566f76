//! What VCL may do to the client's TCP connection (vmod tcp,
//! `std.set_ip_tos`), as the daemon provides it through
//! [`crate::Host::client_socket`], and what it may know of a Unix socket
//! peer (vmod unix): this crate never holds a descriptor.

use std::io;

/// The kernel's view of a TCP connection, the fields vmod tcp reports
/// (`TCP_INFO`; times in microseconds, rates in bytes per second).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpInfo {
    pub snd_mss: u32,
    pub rcv_mss: u32,
    pub lost: u32,
    pub retrans: u32,
    pub pmtu: u32,
    pub rtt: u32,
    pub rttvar: u32,
    pub snd_cwnd: u32,
    pub advmss: u32,
    pub reordering: u32,
    pub pacing_rate: u64,
    pub max_pacing_rate: u64,
}

/// Who is at the other end of a Unix socket connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerCredentials {
    pub uid: u32,
    pub gid: u32,
    pub user: Option<String>,
    pub group: Option<String>,
}

/// What the TLS handshake of a client connection settled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSession {
    /// `TLSv1.2` or `TLSv1.3`.
    pub version: &'static str,
    /// The suite's IANA name.
    pub cipher: String,
    /// The server name the client asked for (SNI).
    pub sni: Option<String>,
    /// The ALPN protocol agreed.
    pub alpn: Option<String>,
    /// The common name of the client's certificate, when it showed one
    /// that `client-verify-ca` vouches for.
    pub client_cert_cn: Option<String>,
    /// The client showed a certificate that was verified.
    pub client_cert: bool,
}

/// The client connection's socket options.
pub trait ClientSocket {
    /// Sets `SO_MAX_PACING_RATE` in bytes per second (`u32::MAX` lifts
    /// the limit).
    fn set_pacing_rate(&self, rate: u32) -> io::Result<()>;
    /// `SO_MAX_PACING_RATE` as the kernel holds it.
    fn pacing_rate(&self) -> io::Result<u32>;
    /// Sets `TCP_CONGESTION` (at most 16 bytes of name).
    fn set_congestion(&self, name: &[u8]) -> io::Result<()>;
    /// `TCP_CONGESTION`: the algorithm's name.
    fn congestion(&self) -> io::Result<String>;
    /// `TCP_INFO`.
    fn tcp_info(&self) -> io::Result<TcpInfo>;
    /// `IP_TOS`, or `IPV6_TCLASS` on an IPv6 connection.
    fn set_tos(&self, tos: u8) -> io::Result<()>;
}
