//! Splicing gzip: one gzip stream for an ESI page made of the compressed
//! pieces of the page and of its includes, without inflating and
//! compressing them again on every delivery.
//!
//! A stored gzip body is scanned once, at fetch, by [`Scan`]: it inflates
//! the body to check it (CRC and length) and notes three bit positions,
//! as Varnish does: where the deflate data starts, where the final
//! block's `BFINAL` bit is, and where the deflate data stops.
//! [`strip`] then gives the deflate data of such a body with that bit
//! cleared and padded to a byte with an empty stored block, so that more
//! deflate data may follow it. Bodies Lacquer compresses itself are
//! scanned as they are made (see [`crate::gzip::Gzip`]). [`Splicer`]
//! writes the gzip header, wraps plain pieces
//! in stored blocks, folds every piece's CRC into one, and ends the
//! stream with an empty final block and the trailer.

use crate::esi::{Program, Segment};
use crate::gzip::{Gzip, GzipError};
use bytes::Bytes;
use miniz_oxide::inflate::core::inflate_flags::{
    TINFL_FLAG_HAS_MORE_INPUT, TINFL_FLAG_STOP_ON_BLOCK_BOUNDARY,
};
use miniz_oxide::inflate::core::{decompress, DecompressorOxide, TINFL_LZ_DICT_SIZE};
use miniz_oxide::inflate::TINFLStatus;
use std::ops::Range;

/// The gzip header Lacquer writes: deflate, no name, no time, Unix.
pub const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3];

/// An empty final stored block, as varnishd ends a gzip'd ESI page:
/// `BFINAL` 1, type 00, padded, then LEN 0 and NLEN. (An empty fixed
/// block would take 2 bytes rather than 5, but the page would not have
/// varnishd's length.)
pub const EMPTY_FINAL: [u8; 5] = [0x01, 0x00, 0x00, 0xff, 0xff];

/// Bit positions in a stored gzip body (from its first byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GzipBits {
    /// The first bit of the deflate data (after the header).
    pub start: u64,
    /// The `BFINAL` bit of the final block.
    pub last: u64,
    /// The bit after the final block's end-of-block code.
    pub stop: u64,
}

/// What a scan found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scanned {
    pub bits: GzipBits,
    /// CRC-32 and length of the inflated data.
    pub crc: u32,
    pub len: u64,
}

enum Phase {
    /// Header bytes gathered until the header is whole.
    Header(Vec<u8>),
    Deflate,
    Trailer(Vec<u8>),
    Done,
}

/// Checks a gzip member as it arrives and finds its [`GzipBits`].
pub struct Scan {
    phase: Phase,
    inflater: Box<DecompressorOxide>,
    window: Box<[u8]>,
    window_at: usize,
    header_len: u64,
    /// Deflate bytes the inflater has taken.
    consumed: u64,
    crc: crc32fast::Hasher,
    out: u64,
    taken_in: u64,
    /// A block boundary fell on a byte boundary: the next block's
    /// `BFINAL` bit is the first bit of the next byte, not yet seen.
    peek_next_byte: bool,
    last: Option<u64>,
    stop: u64,
    /// The inflated bytes, kept when the scan is also a gunzip.
    output: Option<Vec<u8>>,
}

impl Default for Scan {
    fn default() -> Self {
        Self::new()
    }
}

fn corrupt(what: &str) -> GzipError {
    GzipError(format!("Invalid Gzip data: {what}"))
}

/// The length of a gzip header at the start of `b`, or None if more
/// bytes are needed.
fn header_len(b: &[u8]) -> Result<Option<usize>, GzipError> {
    if b.len() < 10 {
        if !b.is_empty() && b[0] != 0x1f || b.len() > 1 && b[1] != 0x8b {
            return Err(corrupt("not gzip"));
        }
        return Ok(None);
    }
    if b[0] != 0x1f || b[1] != 0x8b || b[2] != 8 {
        return Err(corrupt("not gzip"));
    }
    let flags = b[3];
    if flags & 0xe0 != 0 {
        return Err(corrupt("reserved header flags"));
    }
    let mut at = 10;
    if flags & 0x04 != 0 {
        let Some(x) = b.get(at..at + 2) else {
            return Ok(None);
        };
        at += 2 + usize::from(u16::from_le_bytes([x[0], x[1]]));
    }
    for flag in [0x08, 0x10] {
        if flags & flag != 0 {
            let Some(rest) = b.get(at..) else {
                return Ok(None);
            };
            let Some(nul) = rest.iter().position(|&c| c == 0) else {
                return Ok(None);
            };
            at += nul + 1;
        }
    }
    if flags & 0x02 != 0 {
        at += 2;
    }
    Ok((b.len() >= at).then_some(at))
}

impl Scan {
    pub fn new() -> Self {
        Scan {
            phase: Phase::Header(Vec::new()),
            inflater: Box::default(),
            window: vec![0u8; TINFL_LZ_DICT_SIZE].into_boxed_slice(),
            window_at: 0,
            header_len: 0,
            consumed: 0,
            crc: crc32fast::Hasher::new(),
            out: 0,
            taken_in: 0,
            peek_next_byte: true,
            last: None,
            stop: 0,
            output: None,
        }
    }

    /// A scan that also keeps what it inflates, for [`Scan::take_output`].
    pub fn inflating() -> Self {
        Scan {
            output: Some(Vec::new()),
            ..Scan::new()
        }
    }

    /// The bytes inflated since the last call (none unless made by
    /// [`Scan::inflating`]).
    pub fn take_output(&mut self) -> Vec<u8> {
        self.output.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Compressed bytes taken and inflated bytes made so far.
    pub fn counts(&self) -> (u64, u64) {
        (self.taken_in, self.out)
    }

    /// Takes the next bytes of the body.
    pub fn push(&mut self, data: &[u8]) -> Result<(), GzipError> {
        self.push_some(data, usize::MAX).map(|_| ())
    }

    /// Takes bytes from the front of `data` until the kept output (see
    /// [`Scan::inflating`]) reaches `limit` bytes; returns how many it
    /// took. When the output reached `limit` the inflater may hold more
    /// even with all of `data` taken: call again (with what is left, or
    /// nothing) after taking the output.
    pub fn push_some(&mut self, data: &[u8], limit: usize) -> Result<usize, GzipError> {
        let rest = self.take(data, limit)?;
        let used = data.len() - rest.len();
        self.taken_in += used as u64;
        Ok(used)
    }

    fn take<'a>(&mut self, data: &'a [u8], limit: usize) -> Result<&'a [u8], GzipError> {
        let mut rest = data;
        loop {
            match &mut self.phase {
                Phase::Header(seen) => {
                    let before = seen.len();
                    seen.extend_from_slice(rest);
                    let Some(n) = header_len(seen)? else {
                        return Ok(&[]);
                    };
                    self.header_len = n as u64;
                    rest = &rest[n - before..];
                    self.phase = Phase::Deflate;
                }
                Phase::Deflate => {
                    rest = self.inflate(rest, limit)?;
                    if matches!(self.phase, Phase::Deflate) {
                        return Ok(rest);
                    }
                }
                Phase::Trailer(t) => {
                    let want = 8 - t.len();
                    let n = want.min(rest.len());
                    t.extend_from_slice(&rest[..n]);
                    rest = &rest[n..];
                    if t.len() < 8 {
                        return Ok(rest);
                    }
                    let crc = u32::from_le_bytes([t[0], t[1], t[2], t[3]]);
                    let len = u32::from_le_bytes([t[4], t[5], t[6], t[7]]);
                    if crc != self.crc.clone().finalize() {
                        return Err(corrupt("CRC mismatch"));
                    }
                    if len != self.out as u32 {
                        return Err(corrupt("length mismatch"));
                    }
                    self.phase = Phase::Done;
                }
                Phase::Done => {
                    return if rest.is_empty() {
                        Ok(rest)
                    } else {
                        Err(GzipError("Junk after gzip data".into()))
                    };
                }
            }
        }
    }

    /// Runs the inflater over `input` up to the end of the deflate data,
    /// or until `limit` output bytes are kept; returns what is left. The
    /// final block's `BFINAL` bit is cleared on its way in, so the
    /// inflater stops at its end like any other block's, which is where
    /// the data stops.
    fn inflate<'a>(&mut self, mut input: &'a [u8], limit: usize) -> Result<&'a [u8], GzipError> {
        loop {
            if self.output.as_ref().is_some_and(|o| o.len() >= limit) {
                return Ok(input);
            }
            if self.peek_next_byte {
                let Some(&first) = input.first() else {
                    return Ok(input);
                };
                self.peek_next_byte = false;
                if first & 1 == 1 {
                    self.last = Some(self.consumed * 8);
                    let cleared = [first & !1];
                    let (status, used) = self.step(&cleared)?;
                    if used != 1 || status != TINFLStatus::NeedsMoreInput {
                        return Err(corrupt("short block"));
                    }
                    input = &input[1..];
                }
            }
            let (status, used) = self.step(input)?;
            input = &input[used..];
            match status {
                TINFLStatus::BlockBoundary => {
                    let Some(mut st) = self.inflater.block_boundary_state() else {
                        return Err(corrupt("lost block boundary"));
                    };
                    let at = self.consumed * 8 - u64::from(st.num_bits);
                    if self.last.is_some() {
                        self.stop = at;
                        self.phase = Phase::Trailer(Vec::with_capacity(8));
                        return Ok(input);
                    }
                    if st.num_bits == 0 {
                        self.peek_next_byte = true;
                    } else if st.bit_buf & 1 == 1 {
                        self.last = Some(at);
                        st.bit_buf &= !1;
                        *self.inflater = DecompressorOxide::from_block_boundary_state(&st);
                    }
                }
                TINFLStatus::NeedsMoreInput => {
                    if input.is_empty() {
                        return Ok(input);
                    }
                }
                TINFLStatus::HasMoreOutput => {}
                // The final block was never seen as final: something is
                // wrong with the stream.
                TINFLStatus::Done => return Err(corrupt("unexpected end")),
                other => return Err(corrupt(&format!("{other:?}"))),
            }
        }
    }

    fn step(&mut self, input: &[u8]) -> Result<(TINFLStatus, usize), GzipError> {
        let flags = TINFL_FLAG_HAS_MORE_INPUT | TINFL_FLAG_STOP_ON_BLOCK_BOUNDARY;
        let (status, used, wrote) = decompress(
            &mut self.inflater,
            input,
            &mut self.window,
            self.window_at,
            flags,
        );
        let made = &self.window[self.window_at..self.window_at + wrote];
        self.crc.update(made);
        if let Some(out) = &mut self.output {
            out.extend_from_slice(made);
        }
        self.window_at = (self.window_at + wrote) & (TINFL_LZ_DICT_SIZE - 1);
        self.out += wrote as u64;
        self.consumed += used as u64;
        Ok((status, used))
    }

    /// Ends the body: fails unless it was one whole gzip member.
    pub fn finish(self) -> Result<Scanned, GzipError> {
        if !matches!(self.phase, Phase::Done) {
            return Err(GzipError("Gunzip error: truncated or corrupt gzip".into()));
        }
        let start = self.header_len * 8;
        Ok(Scanned {
            bits: GzipBits {
                start,
                last: start + self.last.unwrap_or(0),
                stop: start + self.stop,
            },
            crc: self.crc.finalize(),
            len: self.out,
        })
    }
}

/// Scans a whole body.
pub fn scan(gz: &[u8]) -> Result<Scanned, GzipError> {
    let mut s = Scan::new();
    s.push(gz)?;
    s.finish()
}

/// The CRC-32 and length at the end of a gzip body.
pub fn trailer(gz: &[u8]) -> Option<(u32, u64)> {
    let t = gz.get(gz.len().checked_sub(8)?..)?;
    Some((
        u32::from_le_bytes([t[0], t[1], t[2], t[3]]),
        u64::from(u32::from_le_bytes([t[4], t[5], t[6], t[7]])),
    ))
}

/// The deflate data of a gzip body whose bits are known, ready to have
/// more deflate data follow: the final block made non-final and the data
/// padded to a byte with an empty stored block where it does not end on
/// one. The body is given as stored, in chunks; the result is slices of
/// them and two small pieces, nothing copied. None when the bits do not
/// fit the body.
pub fn strip(gz: &[Bytes], bits: GzipBits) -> Option<Vec<Bytes>> {
    let total: u64 = gz.iter().map(|c| c.len() as u64).sum();
    let (start, last, stop) = (bits.start, bits.last, bits.stop);
    if !(start.is_multiple_of(8)
        && start <= last
        && last + 10 <= stop
        && stop.div_ceil(8) + 8 <= total)
    {
        return None;
    }
    let (start, last_byte, stop_byte) = (
        (start / 8) as usize,
        (last / 8) as usize,
        (stop / 8) as usize,
    );
    let mut out = Vec::with_capacity(gz.len() + 4);
    slices(gz, start..last_byte, &mut out);
    out.push(Bytes::from(vec![
        byte_at(gz, last_byte)? & !(1 << (last % 8)),
    ]));
    slices(gz, last_byte + 1..stop_byte, &mut out);
    let used = (stop % 8) as u32;
    if used > 0 {
        // The partial last byte keeps its data bits; the rest is an empty
        // stored block (three zero header bits), padded, then LEN/NLEN.
        let mut tail = vec![byte_at(gz, stop_byte)? & ((1u8 << used) - 1)];
        if used > 5 {
            tail.push(0);
        }
        tail.extend_from_slice(&[0, 0, 0xff, 0xff]);
        out.push(Bytes::from(tail));
    }
    Some(out)
}

/// Pushes the slices of `chunks` that cover `range` of their bytes.
fn slices(chunks: &[Bytes], range: Range<usize>, out: &mut Vec<Bytes>) {
    let mut at = 0;
    for c in chunks {
        let (from, to) = (range.start.max(at), range.end.min(at + c.len()));
        if from < to {
            out.push(c.slice(from - at..to - at));
        }
        at += c.len();
    }
}

fn byte_at(chunks: &[Bytes], mut i: usize) -> Option<u8> {
    for c in chunks {
        if i < c.len() {
            return Some(c[i]);
        }
        i -= c.len();
    }
    None
}

/// A verbatim segment of a gzip'd ESI page: its deflate bytes in the
/// stored body (ending on a byte, not final, inflating on their own) and
/// the CRC-32 and length of its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deflated {
    pub range: Range<usize>,
    pub crc: u32,
    pub len: u64,
}

/// Compresses an ESI page in pieces cut at the edges of its verbatim
/// segments, and notes each segment's compressed form in the program.
/// The result is one gzip member of the whole body (ESI markup
/// included), so it is also what a delivery without ESI processing sends.
pub fn gzip_page(
    body: &[u8],
    program: &mut Program,
    level: u32,
) -> Result<(Bytes, Scanned), GzipError> {
    let mut g = Gzip::new(level);
    let mut out = g.push(&[]).to_vec();
    let mut at = 0;
    let mut deflated = Vec::new();
    for seg in &program.segments {
        let Segment::Verbatim(r) = seg else { continue };
        if r.start > at {
            out.extend_from_slice(&g.push(&body[at..r.start]));
            out.extend_from_slice(&g.cut());
        }
        let from = out.len();
        out.extend_from_slice(&g.push(&body[r.clone()]));
        out.extend_from_slice(&g.cut());
        deflated.push(Deflated {
            range: from..out.len(),
            crc: crc32fast::hash(&body[r.clone()]),
            len: r.len() as u64,
        });
        at = r.end;
    }
    if at < body.len() {
        out.extend_from_slice(&g.push(&body[at..]));
    }
    let (tail, scanned) = g.finish()?;
    out.extend_from_slice(&tail);
    program.deflated = deflated;
    Ok((Bytes::from(out), scanned))
}

/// Inflates deflate data that starts where the window is empty and ends
/// on a flush (a piece of a gzip'd ESI page).
pub fn inflate_piece(data: &[u8]) -> Result<Vec<u8>, GzipError> {
    let mut out = Vec::new();
    let mut slices = PieceSlices::new(data, 64 * 1024);
    while let Some(s) = slices.next()? {
        out.extend_from_slice(&s);
    }
    Ok(out)
}

/// A piece of deflate data (as [`inflate_piece`] takes) inflated a slice
/// of at most `limit` bytes at a time, so that what it inflates to is
/// never held whole.
pub struct PieceSlices<'d> {
    d: flate2::Decompress,
    input: &'d [u8],
    limit: usize,
    done: bool,
}

impl<'d> PieceSlices<'d> {
    pub fn new(data: &'d [u8], limit: usize) -> Self {
        PieceSlices {
            d: flate2::Decompress::new(false),
            input: data,
            limit: limit.max(1),
            done: data.is_empty(),
        }
    }

    /// The next slice; None at the end of the piece.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<Vec<u8>>, GzipError> {
        if self.done {
            return Ok(None);
        }
        let mut out = Vec::with_capacity(self.limit);
        loop {
            let (in_before, out_before) = (self.d.total_in(), self.d.total_out());
            self.d
                .decompress_vec(self.input, &mut out, flate2::FlushDecompress::Sync)
                .map_err(|e| corrupt(&e.to_string()))?;
            let used = (self.d.total_in() - in_before) as usize;
            let made = self.d.total_out() - out_before;
            self.input = &self.input[used..];
            // Done once all is in and the output did not fill its room.
            if self.input.is_empty() && out.len() < out.capacity() {
                self.done = true;
                return Ok((!out.is_empty()).then_some(out));
            }
            if out.len() == out.capacity() {
                return Ok(Some(out));
            }
            if used == 0 && made == 0 {
                return Err(corrupt("stuck piece"));
            }
        }
    }
}

/// Writes one gzip member out of pieces. Every piece written through
/// it must end on a byte and not be final.
#[derive(Default)]
pub struct Splicer {
    crc: crc32fast::Hasher,
    len: u64,
}

impl Splicer {
    pub fn new() -> Self {
        Self::default()
    }

    /// Plain bytes, as stored blocks (no compression: cheap, and the
    /// bytes are usually small, such as an uncompressed include): each
    /// block's 5-byte header and the slice of `data` it frames.
    pub fn stored(&mut self, data: &Bytes, out: &mut Vec<Bytes>) {
        self.crc.update(data);
        self.len += data.len() as u64;
        let mut at = 0;
        while at < data.len() {
            let n = (data.len() - at).min(0xffff);
            let len = n as u16;
            let mut head = [0u8; 5];
            head[1..3].copy_from_slice(&len.to_le_bytes());
            head[3..].copy_from_slice(&(!len).to_le_bytes());
            out.push(Bytes::copy_from_slice(&head));
            out.push(data.slice(at..at + n));
            at += n;
        }
    }

    /// Counts deflate data written as it is, whose inflated bytes have
    /// this CRC-32 and length.
    pub fn deflated(&mut self, crc: u32, len: u64) {
        self.crc
            .combine(&crc32fast::Hasher::new_with_initial_len(crc, len));
        self.len += len;
    }

    /// The end of the stream: an empty final block and the trailer.
    pub fn finish(self) -> [u8; 13] {
        let mut t = [0u8; 13];
        t[..5].copy_from_slice(&EMPTY_FINAL);
        t[5..9].copy_from_slice(&self.crc.finalize().to_le_bytes());
        t[9..].copy_from_slice(&(self.len as u32).to_le_bytes());
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gzip::gunzip;
    use flate2::write::GzEncoder;
    use flate2::Compression;
    use std::io::Write;

    /// gzip made by flate2 itself, not by Lacquer's compressor, so the
    /// final block ends wherever the encoder put it.
    fn foreign(data: &[u8], level: u32) -> Vec<u8> {
        let mut e = GzEncoder::new(Vec::new(), Compression::new(level));
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    /// A body stored in uneven chunks, as a fetch stores one.
    fn chunked(gz: &[u8]) -> Vec<Bytes> {
        let mut out = Vec::new();
        let mut rest = gz;
        let mut size = 1;
        while !rest.is_empty() {
            let n = size.min(rest.len());
            out.push(Bytes::copy_from_slice(&rest[..n]));
            rest = &rest[n..];
            size = size * 3 + 1;
        }
        out
    }

    fn sample(n: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(n);
        let mut x: u32 = 7;
        while v.len() < n {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            let word = ["esi ", "gzip ", "cache ", "lacquer ", "\n"][(x >> 16) as usize % 5];
            v.extend_from_slice(word.as_bytes());
            if x.is_multiple_of(7) {
                v.push((x >> 8) as u8);
            }
        }
        v.truncate(n);
        v
    }

    /// Splices `parts` (gzip bodies and plain texts) into one stream and
    /// inflates it.
    fn splice(parts: &[Result<Vec<u8>, &[u8]>]) -> Vec<u8> {
        let mut s = Splicer::new();
        let mut out = GZIP_HEADER.to_vec();
        for p in parts {
            match p {
                Ok(gz) => {
                    let scanned = scan(gz).unwrap();
                    for piece in strip(&chunked(gz), scanned.bits).unwrap() {
                        out.extend_from_slice(&piece);
                    }
                    s.deflated(scanned.crc, scanned.len);
                }
                Err(plain) => {
                    let mut pieces = Vec::new();
                    s.stored(&Bytes::copy_from_slice(plain), &mut pieces);
                    pieces.iter().for_each(|p| out.extend_from_slice(p));
                }
            }
        }
        out.extend_from_slice(&s.finish());
        gunzip(&out).unwrap()
    }

    #[test]
    fn scanned_bits_splice_foreign_gzip_at_every_level_and_size() {
        for level in [0, 1, 6, 9] {
            for n in [0, 1, 9, 100, 5000, 70_000, 300_000] {
                let a = sample(n);
                let b = sample(n / 3 + 1);
                let got = splice(&[
                    Err(b"<p>"),
                    Ok(foreign(&a, level)),
                    Ok(foreign(&b, level)),
                    Err(b"</p>"),
                ]);
                let mut want = b"<p>".to_vec();
                want.extend_from_slice(&a);
                want.extend_from_slice(&b);
                want.extend_from_slice(b"</p>");
                assert!(got == want, "level {level} size {n}");
            }
        }
    }

    #[test]
    fn a_scan_in_small_pieces_finds_the_same_bits() {
        let gz = foreign(&sample(40_000), 6);
        let whole = scan(&gz).unwrap();
        for size in [1, 2, 3, 7, 1000] {
            let mut s = Scan::new();
            for piece in gz.chunks(size) {
                s.push(piece).unwrap();
            }
            assert_eq!(s.finish().unwrap(), whole, "pieces of {size}");
        }
        assert_eq!(whole.len, 40_000);
        assert_eq!(trailer(&gz).map(|t| t.0), Some(whole.crc));
    }

    #[test]
    fn headers_with_a_name_and_extra_field_are_skipped() {
        let mut gz = vec![0x1f, 0x8b, 8, 0x04 | 0x08 | 0x10, 0, 0, 0, 0, 0, 3];
        gz.extend_from_slice(&[3, 0, b'x', b'y', b'z']);
        gz.extend_from_slice(b"name\0comment\0");
        let body = foreign(b"hello", 6);
        gz.extend_from_slice(&body[10..]);
        let s = scan(&gz).unwrap();
        assert_eq!(s.bits.start, 8 * (10 + 5 + 13));
        assert_eq!(splice(&[Ok(gz)]), b"hello");
    }

    #[test]
    fn corrupt_and_cut_bodies_are_errors() {
        let gz = foreign(&sample(5000), 6);
        assert!(scan(&gz[..gz.len() - 3]).is_err(), "cut in the trailer");
        assert!(scan(&gz[..gz.len() / 2]).is_err(), "cut in the data");
        let mut bad = gz.clone();
        let n = bad.len();
        bad[n - 6] ^= 1;
        assert!(scan(&bad).is_err(), "wrong CRC");
        let mut junk = gz.clone();
        junk.push(0);
        assert!(scan(&junk).is_err(), "junk after the member");
        assert!(scan(b"plain text, not gzip").is_err());
        for i in 10..gz.len() - 8 {
            let mut flipped = gz.clone();
            flipped[i] ^= 0x10;
            // Never a panic; mostly an error.
            let _ = scan(&flipped);
        }
    }

    #[test]
    fn lacquer_gzip_finds_its_bits_and_its_cuts_inflate_alone() {
        use crate::gzip::Gzip;
        let text = sample(50_000);
        let mut g = Gzip::new(6);
        let mut gz = g.push(&text[..20_000]).to_vec();
        let mark = gz.len() + g.cut().len();
        gz.truncate(0);
        let mut g = Gzip::new(6);
        gz.extend_from_slice(&g.push(&text[..20_000]));
        gz.extend_from_slice(&g.cut());
        assert_eq!(gz.len(), mark);
        gz.extend_from_slice(&g.push(&text[20_000..]));
        let (tail, known) = g.finish().unwrap();
        gz.extend_from_slice(&tail);
        assert_eq!(scan(&gz).unwrap(), known, "the bits a scan finds");
        assert_eq!(gunzip(&gz).unwrap(), text);
        // The data after the cut, alone, as raw deflate.
        let rest = gz[mark..gz.len() - 8].to_vec();
        let mut d = flate2::Decompress::new(false);
        let mut out = Vec::with_capacity(40_000);
        d.decompress_vec(&rest, &mut out, flate2::FlushDecompress::Finish)
            .unwrap();
        assert_eq!(out, &text[20_000..]);
    }

    #[test]
    fn a_gzip_page_splices_its_pieces_around_includes() {
        let body = b"<p>one<esi:include src=\"/a\"/>two<esi:remove>x</esi:remove>three</p>";
        let mut program = crate::esi::parse(body, b"/", &Default::default())
            .program
            .unwrap();
        let (gz, scanned) = gzip_page(body, &mut program, 6).unwrap();
        assert_eq!(gunzip(&gz).unwrap(), body, "the whole body, markup and all");
        assert_eq!(scan(&gz).unwrap(), scanned);
        assert_eq!(program.deflated.len(), 3);
        let fragment = foreign(b"[A]", 6);
        let mut s = Splicer::new();
        let mut out = GZIP_HEADER.to_vec();
        let mut plain = Vec::new();
        let mut k = 0;
        for seg in &program.segments {
            match seg {
                Segment::Verbatim(_) => {
                    let d = &program.deflated[k];
                    k += 1;
                    out.extend_from_slice(&gz[d.range.clone()]);
                    s.deflated(d.crc, d.len);
                    plain.extend_from_slice(&inflate_piece(&gz[d.range.clone()]).unwrap());
                }
                Segment::Include(_) => {
                    let f = scan(&fragment).unwrap();
                    for piece in strip(&chunked(&fragment), f.bits).unwrap() {
                        out.extend_from_slice(&piece);
                    }
                    s.deflated(f.crc, f.len);
                    plain.extend_from_slice(b"[A]");
                }
            }
        }
        out.extend_from_slice(&s.finish());
        assert_eq!(gunzip(&out).unwrap(), b"<p>one[A]twothree</p>");
        assert_eq!(plain, b"<p>one[A]twothree</p>");

        // A long, very compressible piece inflates whole.
        let mut long = b"<p>".to_vec();
        long.extend_from_slice(&sample(300_000));
        let mut program = crate::esi::parse(&long, b"/", &Default::default())
            .program
            .unwrap();
        let (gz, _) = gzip_page(&long, &mut program, 9).unwrap();
        let d = &program.deflated[0];
        assert_eq!(inflate_piece(&gz[d.range.clone()]).unwrap(), long);
    }

    #[test]
    fn large_plain_pieces_become_several_stored_blocks() {
        let big = sample(200_000);
        assert_eq!(splice(&[Err(&big)]), big);
        assert_eq!(splice(&[]), b"");
    }
}
