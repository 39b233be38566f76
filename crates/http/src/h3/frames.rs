//! HTTP/3's frames (RFC 9114 §7): QUIC's variable-length integers, the
//! frame types and error codes, and the framing of what a stream has
//! brought so far: DATA payloads handed on piece by piece as they
//! arrive (never held whole), every other known frame whole (up to a
//! limit), frames of types no one defined skipped (§9: GREASE and
//! extensions).

use bytes::{Buf, BufMut, Bytes, BytesMut};

pub const DATA: u64 = 0x00;
pub const HEADERS: u64 = 0x01;
pub const SETTINGS: u64 = 0x04;
pub const GOAWAY: u64 = 0x07;
/// The last type HTTP/3 itself defines (MAX_PUSH_ID); those above are
/// extensions or GREASE.
const LAST_KNOWN: u64 = 0x0d;

/// HTTP/3's error codes (RFC 9114 §8.1, RFC 9204 §6) this server uses.
pub mod code {
    pub const NO_ERROR: u64 = 0x100;
    pub const INTERNAL_ERROR: u64 = 0x102;
    pub const STREAM_CREATION_ERROR: u64 = 0x103;
    pub const CLOSED_CRITICAL_STREAM: u64 = 0x104;
    pub const FRAME_UNEXPECTED: u64 = 0x105;
    pub const FRAME_ERROR: u64 = 0x106;
    pub const EXCESSIVE_LOAD: u64 = 0x107;
    pub const SETTINGS_ERROR: u64 = 0x109;
    pub const MISSING_SETTINGS: u64 = 0x10a;
    pub const REQUEST_REJECTED: u64 = 0x10b;
    pub const REQUEST_INCOMPLETE: u64 = 0x10d;
    pub const MESSAGE_ERROR: u64 = 0x10e;
    pub const QPACK_ENCODER_STREAM_ERROR: u64 = 0x201;
    pub const QPACK_DECODER_STREAM_ERROR: u64 = 0x202;
}

/// A QUIC variable-length integer (RFC 9000 §16) at the start of `buf`,
/// and its size; None while it is not all there.
pub fn varint(buf: &[u8]) -> Option<(u64, usize)> {
    let first = *buf.first()?;
    let size = 1usize << (first >> 6);
    let bytes = buf.get(..size)?;
    let mut value = u64::from(first & 0x3f);
    for &b in &bytes[1..] {
        value = (value << 8) | u64::from(b);
    }
    Some((value, size))
}

/// Appends `value` as a variable-length integer (at most 2^62 - 1).
pub fn put_varint(out: &mut BytesMut, value: u64) {
    if value < 1 << 6 {
        out.put_u8(value as u8);
    } else if value < 1 << 14 {
        out.put_u16(0x4000 | value as u16);
    } else if value < 1 << 30 {
        out.put_u32(0x8000_0000 | value as u32);
    } else {
        out.put_u64(0xc000_0000_0000_0000 | value.min((1 << 62) - 1));
    }
}

/// A DATA frame's type and length.
pub fn data_header(len: usize) -> Bytes {
    let mut out = BytesMut::with_capacity(9);
    put_varint(&mut out, DATA);
    put_varint(&mut out, len as u64);
    out.freeze()
}

/// What a stream brings next.
#[derive(Debug, PartialEq)]
pub enum Frame {
    /// Part of a DATA frame's payload.
    Data(Bytes),
    /// Another frame HTTP/3 defines: its type and payload.
    Whole(u64, Bytes),
    /// The stream ended cleanly between frames.
    End,
}

/// Why a stream's frames could not be read.
#[derive(Debug, PartialEq)]
pub enum FrameError {
    /// The stream ended inside a frame (H3_FRAME_ERROR).
    Truncated,
    /// A frame past the limit the reader was given.
    TooLarge(u64),
    /// A frame type HTTP/2 had and HTTP/3 reserves (0x02, 0x06, 0x08,
    /// 0x09): an error wherever it comes (RFC 9114 §7.2.8), seen from
    /// its type alone.
    Reserved(u64),
    /// The stream failed or was reset.
    Stream,
}

/// The framing of what a stream has brought so far.
pub struct FrameBuf {
    /// Bytes read and not yet handed on.
    buf: BytesMut,
    /// Payload bytes of the DATA frame being handed on.
    data_left: u64,
    /// Payload bytes of an unknown frame still to skip.
    skip: u64,
    /// The stream has ended (nothing more comes into `buf`).
    fin: bool,
    /// The most bytes a frame other than DATA may have.
    limit: u64,
}

impl FrameBuf {
    pub fn new(limit: u64) -> FrameBuf {
        FrameBuf {
            buf: BytesMut::new(),
            data_left: 0,
            skip: 0,
            fin: false,
            limit,
        }
    }

    /// More of the stream.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The stream's end.
    pub fn finish(&mut self) {
        self.fin = true;
    }

    /// The next frame or piece of one; None while more must be read.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, FrameError> {
        loop {
            if self.data_left > 0 && !self.buf.is_empty() {
                let n = self.data_left.min(self.buf.len() as u64) as usize;
                self.data_left -= n as u64;
                return Ok(Some(Frame::Data(self.buf.split_to(n).freeze())));
            }
            if self.skip > 0 && !self.buf.is_empty() {
                let n = self.skip.min(self.buf.len() as u64) as usize;
                self.skip -= n as u64;
                self.buf.advance(n);
                continue;
            }
            if self.data_left == 0 && self.skip == 0 && !self.buf.is_empty() {
                match self.parse()? {
                    Parsed::Frame(frame) => return Ok(Some(frame)),
                    Parsed::Begun => continue,
                    Parsed::More => {}
                }
            }
            if !self.fin {
                return Ok(None);
            }
            let between = self.buf.is_empty() && self.data_left == 0 && self.skip == 0;
            return if between {
                Ok(Some(Frame::End))
            } else {
                Err(FrameError::Truncated)
            };
        }
    }

    /// A whole frame from `buf`, or the start of a DATA or skipped one.
    fn parse(&mut self) -> Result<Parsed, FrameError> {
        let Some((kind, a)) = varint(&self.buf) else {
            return Ok(Parsed::More);
        };
        let Some((len, b)) = varint(&self.buf[a..]) else {
            return Ok(Parsed::More);
        };
        match kind {
            DATA => {
                self.buf.advance(a + b);
                self.data_left = len;
                Ok(Parsed::Begun)
            }
            _ if kind > LAST_KNOWN => {
                self.buf.advance(a + b);
                self.skip = len;
                Ok(Parsed::Begun)
            }
            0x02 | 0x06 | 0x08 | 0x09 => Err(FrameError::Reserved(kind)),
            _ if len > self.limit => Err(FrameError::TooLarge(kind)),
            _ => {
                let end = a + b + len as usize;
                if self.buf.len() < end {
                    return Ok(Parsed::More);
                }
                self.buf.advance(a + b);
                let payload = self.buf.split_to(len as usize).freeze();
                Ok(Parsed::Frame(Frame::Whole(kind, payload)))
            }
        }
    }
}

enum Parsed {
    Frame(Frame),
    /// A DATA or unknown frame's head was taken; its payload follows.
    Begun,
    More,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_go_round() {
        for v in [
            0u64,
            63,
            64,
            16383,
            16384,
            (1 << 30) - 1,
            1 << 30,
            (1 << 62) - 1,
        ] {
            let mut out = BytesMut::new();
            put_varint(&mut out, v);
            assert_eq!(varint(&out), Some((v, out.len())), "{v}");
            assert_eq!(varint(&out[..out.len() - 1]), None);
        }
        // RFC 9000 §A.1's examples.
        assert_eq!(
            varint(&[0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c]),
            Some((151288809941952652, 8))
        );
        assert_eq!(varint(&[0x9d, 0x7f, 0x3e, 0x7d]), Some((494878333, 4)));
        assert_eq!(varint(&[0x7b, 0xbd]), Some((15293, 2)));
        assert_eq!(varint(&[0x25]), Some((37, 1)));
    }

    /// Every frame `bytes` holds, pushed to a reader in two parts split
    /// at `at`.
    fn frames(bytes: &[u8], at: usize, limit: u64) -> Result<Vec<Frame>, FrameError> {
        let mut r = FrameBuf::new(limit);
        let mut out = Vec::new();
        r.push(&bytes[..at]);
        while let Some(f) = r.next_frame()? {
            out.push(f);
        }
        r.push(&bytes[at..]);
        r.finish();
        loop {
            match r.next_frame()? {
                Some(Frame::End) => break,
                Some(f) => out.push(f),
                None => unreachable!("finished"),
            }
        }
        // DATA pieces joined, to compare whatever the split.
        let mut joined: Vec<Frame> = Vec::new();
        for f in out {
            match (joined.last_mut(), f) {
                (Some(Frame::Data(prev)), Frame::Data(more)) => {
                    let mut both = prev.to_vec();
                    both.extend_from_slice(&more);
                    *prev = Bytes::from(both);
                }
                (_, f) => joined.push(f),
            }
        }
        Ok(joined)
    }

    #[test]
    fn frames_are_read_wherever_the_stream_splits_them() {
        // HEADERS, GREASE (0x21) skipped, DATA "hello", an empty DATA,
        // DATA "!", trailers.
        let bytes = [
            &[0x01, 0x02, 0xaa, 0xbb][..],
            &[0x21, 0x03, 1, 2, 3],
            &[0x00, 0x05],
            b"hello",
            &[0x00, 0x00],
            &[0x00, 0x01, b'!'],
            &[0x01, 0x01, 0xcc],
        ]
        .concat();
        let want = vec![
            Frame::Whole(HEADERS, Bytes::from_static(&[0xaa, 0xbb])),
            Frame::Data(Bytes::from_static(b"hello!")),
            Frame::Whole(HEADERS, Bytes::from_static(&[0xcc])),
        ];
        for at in 0..=bytes.len() {
            assert_eq!(frames(&bytes, at, 64).unwrap(), want, "{at}");
        }
    }

    #[test]
    fn a_frame_cut_short_or_too_large_is_an_error() {
        let cut = [0x01, 0x05, 1, 2];
        for at in 0..=cut.len() {
            assert_eq!(frames(&cut, at, 64), Err(FrameError::Truncated));
        }
        assert_eq!(frames(&[0x00, 0x05, 1], 1, 64), Err(FrameError::Truncated));
        assert_eq!(frames(&[0x01], 1, 64), Err(FrameError::Truncated));
        // A SETTINGS frame of 100 bytes, past a limit of 64: refused
        // before its payload comes.
        let mut r = FrameBuf::new(64);
        r.push(&[0x04, 0x40, 100]);
        assert_eq!(r.next_frame(), Err(FrameError::TooLarge(SETTINGS)));
        // HTTP/2's frame types, whatever their length.
        for kind in [0x02, 0x06, 0x08, 0x09] {
            let mut r = FrameBuf::new(64);
            r.push(&[kind, 0x80, 0x10, 0x00, 0x00]);
            assert_eq!(r.next_frame(), Err(FrameError::Reserved(u64::from(kind))));
        }
        // DATA and unknown frames are never held whole: no limit.
        let mut big = vec![0x00, 0x80, 0x01, 0x00, 0x00];
        big.extend(std::iter::repeat_n(7u8, 65536));
        assert_eq!(frames(&big, 3, 64).unwrap().len(), 1);
    }
}
