//! The PROXY protocol (versions 1 and 2), as a TLS terminator or load
//! balancer puts it before the first byte of a client's connection: the
//! client's and the server's addresses, and in version 2 a list of
//! type-length-value fields (ALPN, authority, TLS facts). Reading is
//! strict: a header must be whole and well formed, a version 2 checksum
//! (CRC-32C), when present, must match, and nothing is kept beyond the
//! header's own bytes. Writing makes the header a backend is sent.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The twelve bytes a version 2 header starts with.
pub const V2_SIGNATURE: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";
/// The longest version 1 line, CRLF included.
pub const V1_MAX: usize = 107;

/// TLV types of version 2.
pub mod tlv {
    pub const ALPN: u8 = 0x01;
    pub const AUTHORITY: u8 = 0x02;
    pub const CRC32C: u8 = 0x03;
    pub const NOOP: u8 = 0x04;
    pub const UNIQUE_ID: u8 = 0x05;
    pub const SSL: u8 = 0x20;
    pub const SSL_VERSION: u8 = 0x21;
    pub const SSL_CN: u8 = 0x22;
    pub const SSL_CIPHER: u8 = 0x23;
    pub const SSL_SIG_ALG: u8 = 0x24;
    pub const SSL_KEY_ALG: u8 = 0x25;
    pub const NETNS: u8 = 0x30;
}

/// What a PROXY header said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyHeader {
    pub version: u8,
    /// The client's and the server's addresses; None for a version 1
    /// `UNKNOWN`, a version 2 `LOCAL` command or an address family
    /// without IP addresses (the connection's own addresses stand).
    pub addrs: Option<(SocketAddr, SocketAddr)>,
    /// Version 2's fields, in order (empty for version 1).
    pub tlvs: Vec<(u8, Vec<u8>)>,
}

impl ProxyHeader {
    /// The value of the first field of `kind`.
    pub fn tlv(&self, kind: u8) -> Option<&[u8]> {
        self.tlvs
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, v)| v.as_slice())
    }

    /// The SSL field's parts: client flags, verify result and sub-fields.
    pub fn ssl(&self) -> Option<SslInfo<'_>> {
        let v = self.tlv(tlv::SSL)?;
        if v.len() < 5 {
            return None;
        }
        let verify = u32::from_be_bytes([v[1], v[2], v[3], v[4]]);
        Some(SslInfo {
            client: v[0],
            verify,
            sub: &v[5..],
        })
    }
}

/// The SSL field of a version 2 header.
#[derive(Debug, Clone, Copy)]
pub struct SslInfo<'a> {
    /// `PP2_CLIENT_SSL` (1), `PP2_CLIENT_CERT_CONN` (2),
    /// `PP2_CLIENT_CERT_SESS` (4).
    pub client: u8,
    /// 0 when the client's certificate was verified (or none was sent).
    pub verify: u32,
    sub: &'a [u8],
}

impl<'a> SslInfo<'a> {
    /// A sub-field (`tlv::SSL_VERSION`, `SSL_CN`, …).
    pub fn sub(&self, kind: u8) -> Option<&'a [u8]> {
        tlvs(self.sub)
            .ok()?
            .into_iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, v)| v)
    }
}

/// Why a header was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyError(pub &'static str);

impl std::fmt::Display for ProxyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// Reads a PROXY header from the start of `buf`: the header and the
/// number of bytes it took, `Ok(None)` when more bytes are needed (never
/// more than `max` in all), or why it is not one. Bytes after the header
/// are the client's first request and are left alone.
pub fn parse(buf: &[u8], max: usize) -> Result<Option<(ProxyHeader, usize)>, ProxyError> {
    let sig_len = buf.len().min(V2_SIGNATURE.len());
    if buf[..sig_len] == V2_SIGNATURE[..sig_len] {
        if buf.len() < 16 {
            return Ok(None);
        }
        return parse_v2(buf, max);
    }
    let prefix = &b"PROXY "[..buf.len().min(6)];
    if &buf[..prefix.len()] != prefix {
        return Err(ProxyError("not a PROXY header"));
    }
    match buf.iter().position(|&b| b == b'\n') {
        Some(end) if end < V1_MAX => parse_v1(&buf[..=end]).map(|h| Some((h, end + 1))),
        Some(_) => Err(ProxyError("version 1 line too long")),
        None if buf.len() >= V1_MAX => Err(ProxyError("version 1 line too long")),
        None => Ok(None),
    }
}

fn parse_v1(line: &[u8]) -> Result<ProxyHeader, ProxyError> {
    let line = line
        .strip_suffix(b"\r\n")
        .ok_or(ProxyError("version 1 line not ended by CRLF"))?;
    let text = std::str::from_utf8(line).map_err(|_| ProxyError("version 1 line not text"))?;
    let mut words = text.split(' ');
    words.next(); // PROXY
    let family = words.next().ok_or(ProxyError("no protocol"))?;
    let unknown = ProxyHeader {
        version: 1,
        addrs: None,
        tlvs: Vec::new(),
    };
    let v6 = match family {
        "UNKNOWN" => return Ok(unknown),
        "TCP4" => false,
        "TCP6" => true,
        _ => return Err(ProxyError("unknown protocol")),
    };
    let parts: Vec<&str> = words.collect();
    let [src, dst, sport, dport] = parts[..] else {
        return Err(ProxyError("wrong number of fields"));
    };
    let ip = |s: &str| -> Result<IpAddr, ProxyError> {
        let ip: IpAddr = s.parse().map_err(|_| ProxyError("bad address"))?;
        match (ip.is_ipv6(), v6) {
            (a, b) if a == b => Ok(ip),
            _ => Err(ProxyError("address of the wrong family")),
        }
    };
    let port = |s: &str| -> Result<u16, ProxyError> {
        // Plain decimal, no sign or leading zeros (the spec's form).
        if s.is_empty() || s.len() > 5 || (s.len() > 1 && s.starts_with('0')) {
            return Err(ProxyError("bad port"));
        }
        if !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(ProxyError("bad port"));
        }
        s.parse().map_err(|_| ProxyError("bad port"))
    };
    Ok(ProxyHeader {
        version: 1,
        addrs: Some((
            SocketAddr::new(ip(src)?, port(sport)?),
            SocketAddr::new(ip(dst)?, port(dport)?),
        )),
        tlvs: Vec::new(),
    })
}

fn parse_v2(buf: &[u8], max: usize) -> Result<Option<(ProxyHeader, usize)>, ProxyError> {
    let ver_cmd = buf[12];
    if ver_cmd >> 4 != 2 {
        return Err(ProxyError("unknown version"));
    }
    let local = match ver_cmd & 0x0f {
        0 => true,
        1 => false,
        _ => return Err(ProxyError("unknown command")),
    };
    let family = buf[13];
    let len = usize::from(u16::from_be_bytes([buf[14], buf[15]]));
    let total = 16 + len;
    if total > max {
        return Err(ProxyError("header longer than allowed"));
    }
    if buf.len() < total {
        return Ok(None);
    }
    let body = &buf[16..total];
    let (addrs, rest) = match family {
        // TCP over IPv4 or IPv6 (UDP is refused: this is a stream).
        0x11 => {
            if body.len() < 12 {
                return Err(ProxyError("address block too short"));
            }
            let src = Ipv4Addr::from([body[0], body[1], body[2], body[3]]);
            let dst = Ipv4Addr::from([body[4], body[5], body[6], body[7]]);
            let sport = u16::from_be_bytes([body[8], body[9]]);
            let dport = u16::from_be_bytes([body[10], body[11]]);
            (
                Some((
                    SocketAddr::new(src.into(), sport),
                    SocketAddr::new(dst.into(), dport),
                )),
                &body[12..],
            )
        }
        0x21 => {
            if body.len() < 36 {
                return Err(ProxyError("address block too short"));
            }
            let mut a = [0u8; 16];
            a.copy_from_slice(&body[..16]);
            let src = Ipv6Addr::from(a);
            a.copy_from_slice(&body[16..32]);
            let dst = Ipv6Addr::from(a);
            let sport = u16::from_be_bytes([body[32], body[33]]);
            let dport = u16::from_be_bytes([body[34], body[35]]);
            (
                Some((
                    SocketAddr::new(src.into(), sport),
                    SocketAddr::new(dst.into(), dport),
                )),
                &body[36..],
            )
        }
        // Unix stream: two paths, no IP addresses.
        0x31 => {
            if body.len() < 216 {
                return Err(ProxyError("address block too short"));
            }
            (None, &body[216..])
        }
        0x00 => (None, body),
        _ if local => (None, &[][..]),
        _ => return Err(ProxyError("unsupported address family")),
    };
    let fields = tlvs(rest)?;
    for (kind, value) in &fields {
        if *kind == tlv::CRC32C {
            if value.len() != 4 {
                return Err(ProxyError("bad checksum field"));
            }
            // The checksum covers the whole header with its own value
            // read as zeros.
            let at = value.as_ptr() as usize - buf.as_ptr() as usize;
            let mut crc = Crc32c::new();
            crc.update(&buf[..at]);
            crc.update(&[0; 4]);
            crc.update(&buf[at + 4..total]);
            if crc.finish().to_be_bytes() != value[..] {
                return Err(ProxyError("checksum mismatch"));
            }
        }
    }
    let header = ProxyHeader {
        version: 2,
        addrs: if local { None } else { addrs },
        tlvs: fields
            .into_iter()
            .filter(|(k, _)| *k != tlv::NOOP)
            .map(|(k, v)| (k, v.to_vec()))
            .collect(),
    };
    Ok(Some((header, total)))
}

/// Splits a run of type-length-value fields; a field running past the
/// end is an error.
fn tlvs(mut rest: &[u8]) -> Result<Vec<(u8, &[u8])>, ProxyError> {
    let mut out = Vec::new();
    while !rest.is_empty() {
        if rest.len() < 3 {
            return Err(ProxyError("truncated field"));
        }
        let len = usize::from(u16::from_be_bytes([rest[1], rest[2]]));
        if rest.len() < 3 + len {
            return Err(ProxyError("truncated field"));
        }
        out.push((rest[0], &rest[3..3 + len]));
        rest = &rest[3 + len..];
    }
    Ok(out)
}

/// The version 1 line for a connection from `client` to `server`.
pub fn write_v1(client: SocketAddr, server: SocketAddr) -> Vec<u8> {
    let (client, server) = same_family(client, server);
    let family = if client.is_ipv4() { "TCP4" } else { "TCP6" };
    format!(
        "PROXY {family} {} {} {} {}\r\n",
        client.ip(),
        server.ip(),
        client.port(),
        server.port()
    )
    .into_bytes()
}

/// The version 2 header for a connection from `client` to `server`, with
/// `fields` (a CRC-32C field is added last).
pub fn write_v2(client: SocketAddr, server: SocketAddr, fields: &[(u8, &[u8])]) -> Vec<u8> {
    let (client, server) = same_family(client, server);
    let mut out = V2_SIGNATURE.to_vec();
    out.push(0x21);
    match (client, server) {
        (SocketAddr::V4(c), SocketAddr::V4(s)) => {
            out.push(0x11);
            out.extend_from_slice(&[0, 0]);
            out.extend_from_slice(&c.ip().octets());
            out.extend_from_slice(&s.ip().octets());
            out.extend_from_slice(&c.port().to_be_bytes());
            out.extend_from_slice(&s.port().to_be_bytes());
        }
        (c, s) => {
            let v6 = |a: SocketAddr| match a.ip() {
                IpAddr::V6(ip) => ip.octets(),
                IpAddr::V4(ip) => ip.to_ipv6_mapped().octets(),
            };
            out.push(0x21);
            out.extend_from_slice(&[0, 0]);
            out.extend_from_slice(&v6(c));
            out.extend_from_slice(&v6(s));
            out.extend_from_slice(&c.port().to_be_bytes());
            out.extend_from_slice(&s.port().to_be_bytes());
        }
    }
    for (kind, value) in fields {
        let len = value.len().min(usize::from(u16::MAX));
        out.push(*kind);
        out.extend_from_slice(&(len as u16).to_be_bytes());
        out.extend_from_slice(&value[..len]);
    }
    out.extend_from_slice(&[tlv::CRC32C, 0, 4]);
    let crc_at = out.len();
    out.extend_from_slice(&[0; 4]);
    let len = (out.len() - 16) as u16;
    out[14..16].copy_from_slice(&len.to_be_bytes());
    let mut crc = Crc32c::new();
    crc.update(&out);
    out[crc_at..crc_at + 4].copy_from_slice(&crc.finish().to_be_bytes());
    out
}

/// Both addresses in one family: an IPv4 address beside an IPv6 one is
/// written mapped.
fn same_family(a: SocketAddr, b: SocketAddr) -> (SocketAddr, SocketAddr) {
    let canon = |s: SocketAddr| SocketAddr::new(s.ip().to_canonical(), s.port());
    let (a, b) = (canon(a), canon(b));
    if a.is_ipv4() == b.is_ipv4() {
        return (a, b);
    }
    let v6 = |s: SocketAddr| match s.ip() {
        IpAddr::V4(ip) => SocketAddr::new(IpAddr::V6(ip.to_ipv6_mapped()), s.port()),
        IpAddr::V6(_) => s,
    };
    (v6(a), v6(b))
}

/// CRC-32C (Castagnoli), bit by bit over a small table.
struct Crc32c(u32);

const CRC32C_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0x82f6_3b78 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
};

impl Crc32c {
    fn new() -> Self {
        Crc32c(!0)
    }

    fn update(&mut self, data: &[u8]) {
        for &b in data {
            self.0 = CRC32C_TABLE[((self.0 ^ u32::from(b)) & 0xff) as usize] ^ (self.0 >> 8);
        }
    }

    fn finish(&self) -> u32 {
        !self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn crc32c_matches_the_known_check_value() {
        let mut c = Crc32c::new();
        c.update(b"123456789");
        assert_eq!(c.finish(), 0xe306_9283);
    }

    #[test]
    fn version_1_lines_are_read_strictly() {
        let line = b"PROXY TCP4 1.2.3.4 5.6.7.8 1234 80\r\nGET / HTTP/1.1\r\n";
        let (h, n) = parse(line, 4096).unwrap().unwrap();
        assert_eq!(n, 36);
        assert_eq!(h.addrs, Some((sa("1.2.3.4:1234"), sa("5.6.7.8:80"))));
        let v6 = b"PROXY TCP6 ::1 2001:db8::1 65535 443\r\n";
        let (h, _) = parse(v6, 4096).unwrap().unwrap();
        assert_eq!(h.addrs.unwrap().1, sa("[2001:db8::1]:443"));
        let (h, _) = parse(b"PROXY UNKNOWN whatever\r\n", 4096).unwrap().unwrap();
        assert_eq!(h.addrs, None);
        assert_eq!(parse(b"PROXY TCP4 1.2", 4096), Ok(None));
        assert_eq!(parse(b"PRO", 4096), Ok(None));
        for bad in [
            &b"GET / HTTP/1.1\r\n"[..],
            b"PROXY TCP4 1.2.3.4 5.6.7.8 1234 80\n",
            b"PROXY TCP4 ::1 5.6.7.8 1234 80\r\n",
            b"PROXY TCP4 1.2.3.4 5.6.7.8 01234 80\r\n",
            b"PROXY TCP4 1.2.3.4 5.6.7.8 +1234 80\r\n",
            b"PROXY TCP4 1.2.3.4 5.6.7.8 65536 80\r\n",
            b"PROXY TCP4 1.2.3.4 5.6.7.8 1234\r\n",
            b"PROXY TCP4  1.2.3.4 5.6.7.8 1234 80\r\n",
            b"PROXY UDP4 1.2.3.4 5.6.7.8 1234 80\r\n",
        ] {
            assert!(
                parse(bad, 4096).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        let long = [b"PROXY ".as_slice(), &[b'x'; 120]].concat();
        assert!(parse(&long, 4096).is_err());
    }

    #[test]
    fn version_2_round_trips_with_fields_and_checksum() {
        let h = write_v2(
            sa("10.0.0.1:4000"),
            sa("10.0.0.2:443"),
            &[(tlv::AUTHORITY, b"example.com"), (tlv::ALPN, b"h2")],
        );
        let mut wire = h.clone();
        wire.extend_from_slice(b"GET / HTTP/1.1\r\n");
        let (p, n) = parse(&wire, 4096).unwrap().unwrap();
        assert_eq!(n, h.len());
        assert_eq!(p.version, 2);
        assert_eq!(p.addrs, Some((sa("10.0.0.1:4000"), sa("10.0.0.2:443"))));
        assert_eq!(p.tlv(tlv::AUTHORITY), Some(&b"example.com"[..]));
        assert_eq!(p.tlv(tlv::ALPN), Some(&b"h2"[..]));
        // Any byte changed breaks the checksum.
        let mut bad = h.clone();
        bad[17] ^= 1;
        assert_eq!(parse(&bad, 4096), Err(ProxyError("checksum mismatch")));
        // Every prefix asks for more.
        for cut in 0..h.len() {
            assert_eq!(parse(&h[..cut], 4096), Ok(None), "cut at {cut}");
        }
        assert!(parse(&h, 20).is_err());
        let v6 = write_v2(sa("[::1]:1"), sa("10.0.0.2:2"), &[]);
        let (p, _) = parse(&v6, 4096).unwrap().unwrap();
        assert_eq!(p.addrs.unwrap().0, sa("[::1]:1"));
    }

    #[test]
    fn version_2_local_and_bad_headers() {
        let mut local = V2_SIGNATURE.to_vec();
        local.extend_from_slice(&[0x20, 0x00, 0, 0]);
        let (p, n) = parse(&local, 4096).unwrap().unwrap();
        assert_eq!((p.addrs, n), (None, 16));
        let mut v3 = local.clone();
        v3[12] = 0x31;
        assert!(parse(&v3, 4096).is_err());
        let mut udp = V2_SIGNATURE.to_vec();
        udp.extend_from_slice(&[0x21, 0x12, 0, 12]);
        udp.extend_from_slice(&[0; 12]);
        assert!(parse(&udp, 4096).is_err());
        let mut short = V2_SIGNATURE.to_vec();
        short.extend_from_slice(&[0x21, 0x11, 0, 4, 1, 2, 3, 4]);
        assert!(parse(&short, 4096).is_err());
        let mut trunc = V2_SIGNATURE.to_vec();
        trunc.extend_from_slice(&[0x21, 0x11, 0, 15]);
        trunc.extend_from_slice(&[0; 12]);
        trunc.extend_from_slice(&[tlv::AUTHORITY, 0, 9]);
        assert!(parse(&trunc, 4096).is_err());
    }

    #[test]
    fn ssl_fields_are_found() {
        let mut ssl = vec![1u8, 0, 0, 0, 0];
        ssl.extend_from_slice(&[tlv::SSL_VERSION, 0, 7]);
        ssl.extend_from_slice(b"TLSv1.3");
        let h = write_v2(sa("1.1.1.1:1"), sa("2.2.2.2:2"), &[(tlv::SSL, &ssl)]);
        let (p, _) = parse(&h, 4096).unwrap().unwrap();
        let s = p.ssl().unwrap();
        assert_eq!((s.client, s.verify), (1, 0));
        assert_eq!(s.sub(tlv::SSL_VERSION), Some(&b"TLSv1.3"[..]));
        assert_eq!(s.sub(tlv::SSL_CN), None);
    }

    #[test]
    fn version_1_writes_what_it_reads() {
        let line = write_v1(sa("1.2.3.4:5"), sa("[::ffff:6.7.8.9]:80"));
        assert_eq!(line, b"PROXY TCP4 1.2.3.4 6.7.8.9 5 80\r\n");
        let (p, _) = parse(&line, 4096).unwrap().unwrap();
        assert_eq!(p.addrs, Some((sa("1.2.3.4:5"), sa("6.7.8.9:80"))));
    }
}
