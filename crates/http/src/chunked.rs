//! The chunked transfer coding: an incremental decoder that never trusts
//! its input (sizes are bounded, extensions and trailers are length
//! limited), and the encoder's framing helpers.

use bytes::{Buf, Bytes, BytesMut};

/// Longest chunk-size line (size, extensions) or trailer line accepted.
const MAX_LINE: usize = 4096;

/// Most bytes of trailer lines accepted after the last chunk.
const MAX_TRAILERS: usize = 32 * 1024;

/// Trailer fields, as name and value.
pub type Trailers = Vec<(Bytes, Bytes)>;

/// What the decoder produced.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded {
    /// Body bytes.
    Data(Bytes),
    /// The last chunk and trailers have been read.
    End,
}

/// The input is not valid chunked coding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkError(pub &'static str);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Size,
    Data(u64),
    DataEnd,
    Trailers,
    Done,
}

/// An incremental chunked decoder.
#[derive(Debug)]
pub struct ChunkedDecoder {
    state: State,
    trailers: usize,
    /// The trailer fields kept for forwarding (None: dropped).
    kept: Option<Trailers>,
}

impl Default for ChunkedDecoder {
    fn default() -> Self {
        Self::new()
    }
}

fn take_line(buf: &mut BytesMut) -> Result<Option<Bytes>, ChunkError> {
    match buf.iter().position(|&b| b == b'\n') {
        Some(n) if n > MAX_LINE => Err(ChunkError("chunk line too long")),
        Some(n) => {
            // Every framing line ends in CRLF: a bare LF is read as a line
            // end by some parsers and as data by others.
            if n == 0 || buf[n - 1] != b'\r' {
                return Err(ChunkError("bare LF in chunk line"));
            }
            let line = buf.split_to(n + 1).freeze();
            let end = n - 1;
            if line[..end].contains(&b'\r') {
                return Err(ChunkError("bare CR in chunk line"));
            }
            Ok(Some(line.slice(..end)))
        }
        None if buf.len() > MAX_LINE => Err(ChunkError("chunk line too long")),
        None => Ok(None),
    }
}

impl ChunkedDecoder {
    pub fn new() -> Self {
        ChunkedDecoder {
            state: State::Size,
            trailers: 0,
            kept: None,
        }
    }

    /// A decoder that keeps the trailer fields that may be forwarded
    /// ([`forwardable_trailer`]), for [`ChunkedDecoder::take_trailers`].
    pub fn keeping_trailers() -> Self {
        ChunkedDecoder {
            kept: Some(Vec::new()),
            ..ChunkedDecoder::new()
        }
    }

    /// The trailer fields kept, once the body has ended.
    pub fn take_trailers(&mut self) -> Trailers {
        self.kept.as_mut().map(std::mem::take).unwrap_or_default()
    }

    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Decodes from the front of `buf`, consuming what it uses. `Ok(None)`
    /// means more input is needed.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Decoded>, ChunkError> {
        loop {
            match self.state {
                State::Size => {
                    let Some(line) = take_line(buf)? else {
                        return Ok(None);
                    };
                    let digits_end = line
                        .iter()
                        .position(|b| !b.is_ascii_hexdigit())
                        .unwrap_or(line.len());
                    if digits_end == 0 || digits_end > 15 {
                        return Err(ChunkError("invalid chunk size"));
                    }
                    let rest = &line[digits_end..];
                    let rest_trimmed = crate::headers::trim(rest);
                    if !rest_trimmed.is_empty() && rest_trimmed[0] != b';' {
                        return Err(ChunkError("invalid chunk size"));
                    }
                    let text = std::str::from_utf8(&line[..digits_end]).unwrap_or("x");
                    let size = u64::from_str_radix(text, 16)
                        .map_err(|_| ChunkError("invalid chunk size"))?;
                    self.state = if size == 0 {
                        State::Trailers
                    } else {
                        State::Data(size)
                    };
                }
                State::Data(left) => {
                    if buf.is_empty() {
                        return Ok(None);
                    }
                    let n = (buf.len() as u64).min(left) as usize;
                    let data = buf.split_to(n).freeze();
                    self.state = if left == n as u64 {
                        State::DataEnd
                    } else {
                        State::Data(left - n as u64)
                    };
                    return Ok(Some(Decoded::Data(data)));
                }
                State::DataEnd => {
                    if buf.is_empty() {
                        return Ok(None);
                    }
                    if buf[0] == b'\r' {
                        if buf.len() < 2 {
                            return Ok(None);
                        }
                        if buf[1] != b'\n' {
                            return Err(ChunkError("missing CRLF after chunk data"));
                        }
                        buf.advance(2);
                    } else {
                        return Err(ChunkError("missing CRLF after chunk data"));
                    }
                    self.state = State::Size;
                }
                State::Trailers => {
                    let Some(line) = take_line(buf)? else {
                        return Ok(None);
                    };
                    if line.is_empty() {
                        self.state = State::Done;
                        return Ok(Some(Decoded::End));
                    }
                    self.trailers += line.len() + 2;
                    if self.trailers > MAX_TRAILERS {
                        return Err(ChunkError("trailers too large"));
                    }
                    if let (Some(kept), Some(field)) = (self.kept.as_mut(), trailer_field(&line)) {
                        kept.push(field);
                    }
                }
                State::Done => return Ok(Some(Decoded::End)),
            }
        }
    }
}

/// A trailer line as a field that may be forwarded, or None (a line that
/// is no field, or one that must not be sent as a trailer).
fn trailer_field(line: &Bytes) -> Option<(Bytes, Bytes)> {
    let colon = line.iter().position(|&b| b == b':')?;
    let name = &line[..colon];
    if name.is_empty() || !name.iter().all(|&b| crate::headers::is_token_byte(b)) {
        return None;
    }
    if !forwardable_trailer(name) {
        return None;
    }
    let value = crate::headers::trim(&line[colon + 1..]);
    if value.iter().any(|&b| b == 0 || b == b'\r' || b == b'\n') {
        return None;
    }
    let start = value.as_ptr() as usize - line.as_ptr() as usize;
    Some((line.slice(..colon), line.slice(start..start + value.len())))
}

/// Whether a field may travel as a trailer: not one that frames, routes,
/// authenticates or controls the message (RFC 9110, 6.5.1), which a
/// recipient merging trailers into the head could be misled by.
pub fn forwardable_trailer(name: &[u8]) -> bool {
    const NOT: &[&str] = &[
        "age",
        "authorization",
        "cache-control",
        "connection",
        "content-encoding",
        "content-length",
        "content-range",
        "content-type",
        "cookie",
        "date",
        "expect",
        "expires",
        "host",
        "keep-alive",
        "location",
        "max-forwards",
        "pragma",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "range",
        "retry-after",
        "set-cookie",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "vary",
        "www-authenticate",
    ];
    !NOT.iter().any(|n| name.eq_ignore_ascii_case(n.as_bytes()))
}

/// Writes the framing that precedes a chunk of `len` bytes.
pub fn chunk_header(len: usize, out: &mut Vec<u8>) {
    use std::io::Write;
    let _ = write!(out, "{len:x}\r\n");
}

/// The bytes that end a chunked body.
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(input: &[u8]) -> Result<(Vec<u8>, bool), ChunkError> {
        let mut dec = ChunkedDecoder::new();
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        // Feed one byte at a time to exercise every partial state.
        for &b in input {
            buf.extend_from_slice(&[b]);
            while let Some(d) = dec.decode(&mut buf)? {
                match d {
                    Decoded::Data(bytes) => out.extend_from_slice(&bytes),
                    Decoded::End => return Ok((out, true)),
                }
            }
        }
        Ok((out, false))
    }

    #[test]
    fn decodes() {
        let (body, done) =
            decode_all(b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-T: 1\r\n\r\n").unwrap();
        assert_eq!(body, b"hello world");
        assert!(done);
        let (body, done) = decode_all(b"A\r\n0123456789\r\n").unwrap();
        assert_eq!(body, b"0123456789");
        assert!(!done);
    }

    #[test]
    fn rejects() {
        assert!(decode_all(b"x\r\n").is_err());
        assert!(decode_all(b"5\r\nhelloXX").is_err());
        assert!(decode_all(b"ffffffffffffffffff\r\n").is_err());
        assert!(decode_all(b"-1\r\n").is_err());
        assert!(decode_all(b"5 x\r\n").is_err());
        assert!(decode_all(&[b'1'; 5000]).is_err());
        assert!(decode_all(b"5;ext=1\nhello\r\n0\r\n\r\n").is_err());
        assert!(decode_all(b"5\r\nhello\n0\r\n\r\n").is_err());
        assert!(decode_all(b"0\r\n\n").is_err());
        assert!(decode_all(b"0\r\nX: 1\n\r\n").is_err());
        let mut many = b"0\r\n".to_vec();
        for _ in 0..2000 {
            many.extend_from_slice(b"X-Trailer: some value\r\n");
        }
        many.extend_from_slice(b"\r\n");
        assert!(decode_all(&many).is_err());
    }

    #[test]
    fn header() {
        let mut out = Vec::new();
        chunk_header(255, &mut out);
        assert_eq!(out, b"ff\r\n");
    }

    #[test]
    fn trailers_kept_are_the_forwardable_fields_only() {
        let mut dec = ChunkedDecoder::keeping_trailers();
        let mut buf = BytesMut::from(
            &b"3\r\nabc\r\n0\r\ngrpc-status: 0\r\nContent-Length: 99\r\nbad line\r\n\
               grpc-message:  fine \r\nTransfer-Encoding: chunked\r\n\r\n"[..],
        );
        assert_eq!(
            dec.decode(&mut buf).unwrap(),
            Some(Decoded::Data(Bytes::from_static(b"abc")))
        );
        assert_eq!(dec.decode(&mut buf).unwrap(), Some(Decoded::End));
        let kept = dec.take_trailers();
        let kept: Vec<(&[u8], &[u8])> = kept.iter().map(|(n, v)| (&n[..], &v[..])).collect();
        assert_eq!(
            kept,
            vec![
                (&b"grpc-status"[..], &b"0"[..]),
                (&b"grpc-message"[..], &b"fine"[..])
            ]
        );
        // Without asking, nothing is kept.
        let mut dec = ChunkedDecoder::new();
        let mut buf = BytesMut::from(&b"0\r\nx: y\r\n\r\n"[..]);
        assert_eq!(dec.decode(&mut buf).unwrap(), Some(Decoded::End));
        assert!(dec.take_trailers().is_empty());
    }
}
