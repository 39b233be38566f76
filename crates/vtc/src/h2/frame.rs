//! HTTP/2 frames (RFC 9113, section 4 and 6) as the runner sees them:
//! the 9-byte header, the names of types, flags, errors and settings,
//! and the reading of each known type's payload into what `expect` can
//! look at. A payload that breaks its type's rules is an error with a
//! message, never a panic.

pub const DATA: u8 = 0;
pub const HEADERS: u8 = 1;
pub const PRIORITY: u8 = 2;
pub const RST_STREAM: u8 = 3;
pub const SETTINGS: u8 = 4;
pub const PUSH_PROMISE: u8 = 5;
pub const PING: u8 = 6;
pub const GOAWAY: u8 = 7;
pub const WINDOW_UPDATE: u8 = 8;
pub const CONTINUATION: u8 = 9;

pub const END_STREAM: u8 = 0x1;
pub const ACK: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;
pub const PADDED: u8 = 0x8;
pub const PRIORITY_FLAG: u8 = 0x20;

/// The error codes, by value.
pub const ERRORS: [&str; 14] = [
    "NO_ERROR",
    "PROTOCOL_ERROR",
    "INTERNAL_ERROR",
    "FLOW_CONTROL_ERROR",
    "SETTINGS_TIMEOUT",
    "STREAM_CLOSED",
    "FRAME_SIZE_ERROR",
    "REFUSED_STREAM",
    "CANCEL",
    "COMPRESSION_ERROR",
    "CONNECT_ERROR",
    "ENHANCE_YOUR_CALM",
    "INADEQUATE_SECURITY",
    "HTTP_1_1_REQUIRED",
];

/// The settings, by identifier (0 is none).
pub const SETTING_NAMES: [&str; 7] = [
    "unknown",
    "HEADER_TABLE_SIZE",
    "ENABLE_PUSH",
    "MAX_CONCURRENT_STREAMS",
    "INITIAL_WINDOW_SIZE",
    "MAX_FRAME_SIZE",
    "MAX_HEADER_LIST_SIZE",
];

pub fn type_name(t: u8) -> &'static str {
    const NAMES: [&str; 10] = [
        "DATA",
        "HEADERS",
        "PRIORITY",
        "RST_STREAM",
        "SETTINGS",
        "PUSH_PROMISE",
        "PING",
        "GOAWAY",
        "WINDOW_UPDATE",
        "CONTINUATION",
    ];
    NAMES.get(t as usize).copied().unwrap_or("?")
}

pub fn error_name(e: u32) -> &'static str {
    ERRORS.get(e as usize).copied().unwrap_or("unknown")
}

/// An error code written as a name or a number.
pub fn parse_error(s: &str) -> Option<u32> {
    match ERRORS.iter().position(|e| *e == s) {
        Some(i) => Some(i as u32),
        None => super::parse_u32(s),
    }
}

/// What a frame's payload says, by type.
#[derive(Debug, Clone, Default)]
pub enum Meta {
    #[default]
    None,
    /// DATA: the padding and the data proper.
    Data {
        padding: u8,
        data: Vec<u8>,
    },
    /// HEADERS, PUSH_PROMISE, CONTINUATION: the padding, the priority
    /// (dependency, exclusive, weight) of a HEADERS with the flag, the
    /// promised stream, and the header block fragment.
    Headers {
        padding: u8,
        priority: Option<(u32, bool, u8)>,
        promised: u32,
        block: Vec<u8>,
    },
    Priority {
        stream: u32,
        exclusive: bool,
        weight: u8,
    },
    Rst {
        err: u32,
    },
    /// SETTINGS: the value of each known setting present (index 1-6).
    Settings {
        values: [Option<u32>; 7],
    },
    Ping {
        data: [u8; 8],
    },
    GoAway {
        last: u32,
        err: u32,
        debug: Option<Vec<u8>>,
    },
    WinUp {
        size: u32,
    },
}

/// One frame read from the peer.
#[derive(Debug, Clone)]
pub struct Frame {
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub payload: Vec<u8>,
    pub meta: Meta,
}

/// Reads a frame header: (length, type, flags, stream).
pub fn read_header(h: &[u8; 9]) -> (usize, u8, u8, u32) {
    let len = (usize::from(h[0]) << 16) | (usize::from(h[1]) << 8) | usize::from(h[2]);
    let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
    (len, h[3], h[4], stream)
}

/// A whole frame on the wire.
pub fn encode(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len();
    let mut out = Vec::with_capacity(9 + len);
    out.extend_from_slice(&[(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// Strips the padding of a PADDED frame: (pad length, what is before
/// the padding).
fn unpad(kind: u8, flags: u8, p: &[u8]) -> Result<(u8, &[u8]), String> {
    if flags & PADDED == 0 {
        return Ok((0, p));
    }
    let Some((&pad, rest)) = p.split_first() else {
        return Err(format!("{} frame: PADDED but empty", type_name(kind)));
    };
    if usize::from(pad) > rest.len() {
        return Err(format!(
            "invalid padding: {pad} reported, but size is only {}",
            p.len()
        ));
    }
    Ok((pad, &rest[..rest.len() - usize::from(pad)]))
}

/// Reads the payload of a frame of a known type.
pub fn parse(kind: u8, flags: u8, stream: u32, p: &[u8]) -> Result<Meta, String> {
    let size = |want: usize| -> Result<(), String> {
        if p.len() != want {
            return Err(format!(
                "{} frame: size should be {want}, but isn't ({})",
                type_name(kind),
                p.len()
            ));
        }
        Ok(())
    };
    Ok(match kind {
        DATA => {
            let (padding, data) = unpad(kind, flags, p)?;
            Meta::Data {
                padding,
                data: data.to_vec(),
            }
        }
        HEADERS | PUSH_PROMISE | CONTINUATION => {
            let (padding, mut rest) = if kind == CONTINUATION {
                (0, p)
            } else {
                unpad(kind, flags, p)?
            };
            let mut priority = None;
            let mut promised = 0;
            if kind == HEADERS && flags & PRIORITY_FLAG != 0 {
                if rest.len() < 5 {
                    return Err("HEADERS frame: too short for its priority".to_string());
                }
                let n = be32(rest);
                priority = Some((n & 0x7fff_ffff, n >> 31 == 1, rest[4]));
                rest = &rest[5..];
            } else if kind == PUSH_PROMISE {
                if rest.len() < 4 {
                    return Err("PUSH_PROMISE frame: too short for its stream".to_string());
                }
                promised = be32(rest) & 0x7fff_ffff;
                rest = &rest[4..];
            }
            Meta::Headers {
                padding,
                priority,
                promised,
                block: rest.to_vec(),
            }
        }
        PRIORITY => {
            size(5)?;
            let n = be32(p);
            Meta::Priority {
                stream: n & 0x7fff_ffff,
                exclusive: n >> 31 == 1,
                weight: p[4],
            }
        }
        RST_STREAM => {
            size(4)?;
            Meta::Rst { err: be32(p) }
        }
        SETTINGS => {
            if !p.len().is_multiple_of(6) {
                return Err(format!(
                    "SETTINGS frame: size should be a multiple of 6, but isn't ({})",
                    p.len()
                ));
            }
            if stream != 0 {
                return Err(format!(
                    "SETTINGS frame on stream {stream}: settings belong to stream 0"
                ));
            }
            let mut values = [None; 7];
            for kv in p.chunks(6) {
                let id = u16::from_be_bytes([kv[0], kv[1]]);
                if let Some(slot) = values.get_mut(id as usize) {
                    *slot = Some(be32(&kv[2..]));
                }
            }
            Meta::Settings { values }
        }
        PING => {
            size(8)?;
            let mut data = [0; 8];
            data.copy_from_slice(p);
            Meta::Ping { data }
        }
        GOAWAY => {
            if p.len() < 8 {
                return Err(format!(
                    "GOAWAY frame: size should be at least 8, but isn't ({})",
                    p.len()
                ));
            }
            if p[0] & 0x80 != 0 {
                return Err("GOAWAY frame: first bit of data is reserved and should be 0".into());
            }
            Meta::GoAway {
                last: be32(p),
                err: be32(&p[4..]),
                debug: (p.len() > 8).then(|| p[8..].to_vec()),
            }
        }
        WINDOW_UPDATE => {
            size(4)?;
            if p[0] & 0x80 != 0 {
                return Err(
                    "WINDOW_UPDATE frame: first bit of data is reserved and should be 0".into(),
                );
            }
            Meta::WinUp { size: be32(p) }
        }
        _ => Meta::None,
    })
}

/// The trace line of a frame's flags, as they read for its type.
pub fn explain_flags(kind: u8, flags: u8) -> Vec<&'static str> {
    let mut out = Vec::new();
    let is = |ks: &[u8]| ks.contains(&kind);
    if flags & ACK != 0 && is(&[PING, SETTINGS]) {
        out.push("ACK");
    }
    if flags & END_STREAM != 0 && is(&[HEADERS, DATA]) {
        out.push("END_STREAM");
    }
    if flags & END_HEADERS != 0 && is(&[HEADERS, PUSH_PROMISE, CONTINUATION]) {
        out.push("END_HEADERS");
    }
    if flags & PRIORITY_FLAG != 0 && is(&[HEADERS]) {
        out.push("PRIORITY");
    }
    if flags & PADDED != 0 && is(&[DATA, HEADERS, PUSH_PROMISE]) {
        out.push("PADDED");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_encode_and_read_back() {
        let f = encode(HEADERS, END_HEADERS | END_STREAM, 3, b"abc");
        assert_eq!(&f[..9], &[0, 0, 3, 1, 5, 0, 0, 0, 3]);
        let mut h = [0u8; 9];
        h.copy_from_slice(&f[..9]);
        assert_eq!(read_header(&h), (3, HEADERS, 5, 3));
        // The reserved bit of the stream is ignored.
        h[5] = 0x80;
        assert_eq!(read_header(&h).3, 3);
    }

    #[test]
    fn payloads_are_read_by_type() {
        match parse(DATA, PADDED, 1, b"\x02hi\0\0").unwrap() {
            Meta::Data { padding, data } => assert_eq!((padding, &data[..]), (2, &b"hi"[..])),
            m => panic!("{m:?}"),
        }
        let hp = parse(
            HEADERS,
            PADDED | PRIORITY_FLAG,
            1,
            b"\x01\x80\0\0\x03\x0f\x82\0",
        )
        .unwrap();
        match hp {
            Meta::Headers {
                padding,
                priority,
                block,
                ..
            } => {
                assert_eq!(padding, 1);
                assert_eq!(priority, Some((3, true, 15)));
                assert_eq!(block, vec![0x82]);
            }
            m => panic!("{m:?}"),
        }
        match parse(SETTINGS, 0, 0, &[0, 4, 0, 1, 0, 0, 0, 9, 0, 0, 0, 1]).unwrap() {
            Meta::Settings { values } => {
                assert_eq!(values[4], Some(65536));
                assert_eq!(values[1], None);
            }
            m => panic!("{m:?}"),
        }
        match parse(GOAWAY, 0, 0, b"\0\0\0\x05\0\0\0\x01oops").unwrap() {
            Meta::GoAway { last, err, debug } => {
                assert_eq!((last, err), (5, 1));
                assert_eq!(debug.unwrap(), b"oops");
            }
            m => panic!("{m:?}"),
        }
    }

    #[test]
    fn malformed_payloads_are_errors() {
        assert!(parse(PING, 0, 0, b"short")
            .unwrap_err()
            .contains("size should be 8"));
        assert!(parse(SETTINGS, 0, 0, b"12345")
            .unwrap_err()
            .contains("multiple of 6"));
        assert!(parse(SETTINGS, 0, 1, b"").unwrap_err().contains("stream 1"));
        assert!(parse(DATA, PADDED, 1, b"").unwrap_err().contains("empty"));
        assert!(parse(DATA, PADDED, 1, b"\x09ab")
            .unwrap_err()
            .contains("padding"));
        assert!(parse(HEADERS, PRIORITY_FLAG, 1, b"\0\0").is_err());
        assert!(parse(RST_STREAM, 0, 1, b"\0\0\0").is_err());
        assert!(parse(GOAWAY, 0, 0, b"\x80\0\0\0\0\0\0\0").is_err());
        assert!(parse(WINDOW_UPDATE, 0, 0, b"\0\0\x01").is_err());
        assert!(parse(PUSH_PROMISE, 0, 2, b"\0").is_err());
        assert!(matches!(parse(0x42, 0, 0, b"x").unwrap(), Meta::None));
    }

    #[test]
    fn error_names_and_numbers() {
        assert_eq!(parse_error("CANCEL"), Some(8));
        assert_eq!(parse_error("0x3"), Some(3));
        assert_eq!(parse_error("bogus"), None);
        assert_eq!(error_name(7), "REFUSED_STREAM");
        assert_eq!(error_name(99), "unknown");
    }
}
