//! Gzip and gunzip as streaming steps: bytes go in as they arrive from a
//! backend or leave for a client, compressed or inflated bytes come out.
//! A corrupt or truncated gzip stream is an error, never a panic.

use crate::splice::{Scan, Scanned, GZIP_HEADER};
use bytes::Bytes;
use flate2::{Compress, Compression, FlushCompress};

/// Why a gzip stream could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GzipError(pub String);

impl std::fmt::Display for GzipError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for GzipError {}

/// Compresses a stream into one gzip member ended as zlib ends one (the
/// last data block is the final block, with no flush before it), so a
/// body gzip'd here has the length varnishd's has. Its output runs
/// through a [`Scan`] as it is made, which finds the bit positions an
/// ESI splice needs (the final block's start is not known otherwise)
/// and checks the compressor's work. `cut` makes a point from which the
/// data inflates on its own (a full flush), for the pieces of an ESI
/// page.
pub struct Gzip {
    z: Compress,
    crc: crc32fast::Hasher,
    taken_in: u64,
    taken_out: u64,
    header_sent: bool,
    scan: Scan,
    /// What the scan of the output found wrong, if anything.
    broken: Option<GzipError>,
}

impl Gzip {
    /// A compressor at `level` (0–9).
    pub fn new(level: u32) -> Self {
        Gzip {
            z: Compress::new(Compression::new(level.min(9)), false),
            crc: crc32fast::Hasher::new(),
            taken_in: 0,
            taken_out: 0,
            header_sent: false,
            scan: Scan::new(),
            broken: None,
        }
    }

    /// Feeds bytes; returns whatever compressed output is ready (often
    /// nothing: the compressor keeps a window).
    pub fn push(&mut self, data: &[u8]) -> Bytes {
        self.taken_in += data.len() as u64;
        self.crc.update(data);
        self.deflate(data, FlushCompress::None)
    }

    /// Flushes to a byte and forgets the window: what follows inflates
    /// without what came before.
    pub fn cut(&mut self) -> Bytes {
        self.deflate(&[], FlushCompress::Full)
    }

    fn deflate(&mut self, mut input: &[u8], flush: FlushCompress) -> Bytes {
        let mut out = Vec::new();
        if !self.header_sent {
            self.header_sent = true;
            out.extend_from_slice(&GZIP_HEADER);
        }
        loop {
            out.reserve(input.len() / 2 + 4096);
            let before = self.z.total_in();
            // Compressing into memory cannot fail.
            let _ = self.z.compress_vec(input, &mut out, flush);
            input = &input[(self.z.total_in() - before) as usize..];
            // Done once the input is in and, for a flush, the output did
            // not fill the room it had.
            if input.is_empty() && (flush == FlushCompress::None || out.len() < out.capacity()) {
                break;
            }
        }
        self.taken_out += out.len() as u64;
        self.check(&out);
        Bytes::from(out)
    }

    fn check(&mut self, out: &[u8]) {
        if self.broken.is_none() {
            if let Err(e) = self.scan.push(out) {
                self.broken = Some(e);
            }
        }
    }

    /// Ends the stream: the rest of the output and the trailer, and the
    /// bits, CRC and length of the whole member. Fails only if the
    /// compressor's own output did not inflate back.
    pub fn finish(mut self) -> Result<(Bytes, Scanned), GzipError> {
        let mut out = self.deflate(&[], FlushCompress::Finish).to_vec();
        let mut trailer = [0u8; 8];
        trailer[..4].copy_from_slice(&self.crc.clone().finalize().to_le_bytes());
        // ISIZE is the length modulo 2^32.
        trailer[4..].copy_from_slice(&(self.taken_in as u32).to_le_bytes());
        out.extend_from_slice(&trailer);
        self.taken_out += 8;
        self.check(&trailer);
        if let Some(e) = self.broken {
            return Err(e);
        }
        Ok((Bytes::from(out), self.scan.finish()?))
    }

    /// Bytes in and out so far.
    pub fn counts(&self) -> (u64, u64) {
        (self.taken_in, self.taken_out)
    }
}

/// Inflates one gzip member, checking its CRC and length at the end and
/// noting its block bits on the way (for the `Gzip` record).
pub struct Gunzip {
    scan: Scan,
}

impl Default for Gunzip {
    fn default() -> Self {
        Self::new()
    }
}

impl Gunzip {
    pub fn new() -> Self {
        Gunzip {
            scan: Scan::inflating(),
        }
    }

    /// Feeds compressed bytes; returns the inflated bytes they made.
    pub fn push(&mut self, data: &[u8]) -> Result<Bytes, GzipError> {
        self.scan.push(data)?;
        Ok(Bytes::from(self.scan.take_output()))
    }

    /// Feeds compressed bytes from the front of `data` until about
    /// `limit` bytes are inflated; returns the bytes taken, the inflated
    /// ones, and whether the inflater may hold more (call again, with the
    /// rest or nothing, before it can be finished).
    pub fn push_some(
        &mut self,
        data: &[u8],
        limit: usize,
    ) -> Result<(usize, Bytes, bool), GzipError> {
        let limit = limit.max(1);
        let used = self.scan.push_some(data, limit)?;
        let out = self.scan.take_output();
        let more = out.len() >= limit;
        Ok((used, Bytes::from(out), more))
    }

    /// Feeds compressed bytes and hands back what they inflate to in
    /// slices of about `limit` bytes, one at a time as the caller asks:
    /// however far the data inflates, no more than a slice (and the
    /// inflater's 32 KiB window) is held at once.
    pub fn slices<'z, 'd>(&'z mut self, data: &'d [u8], limit: usize) -> Slices<'z, 'd> {
        Slices {
            z: self,
            rest: data,
            limit: limit.max(1),
            more: true,
        }
    }

    /// Ends the stream: fails if it was cut short or its CRC is wrong.
    /// Returns the last inflated bytes and what the scan found.
    pub fn finish(mut self) -> Result<(Bytes, Scanned), GzipError> {
        let tail = Bytes::from(self.scan.take_output());
        Ok((tail, self.scan.finish()?))
    }

    /// Bytes in and out so far.
    pub fn counts(&self) -> (u64, u64) {
        self.scan.counts()
    }
}

/// The inflated slices of one piece of gzip data ([`Gunzip::slices`]).
pub struct Slices<'z, 'd> {
    z: &'z mut Gunzip,
    rest: &'d [u8],
    limit: usize,
    /// The inflater may hold output not yet taken.
    more: bool,
}

impl Slices<'_, '_> {
    /// The next inflated slice; None once the piece is used up.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<Bytes>, GzipError> {
        while self.more || !self.rest.is_empty() {
            let (used, out, more) = self.z.push_some(self.rest, self.limit)?;
            self.rest = &self.rest[used..];
            self.more = more;
            if !out.is_empty() {
                return Ok(Some(out));
            }
        }
        Ok(None)
    }
}

/// How much inflated output a delivery holds at once.
pub const INFLATE_SLICE: usize = 64 * 1024;

/// Compresses a whole buffer (for tests and tools: a failure here is a
/// fault in the compressor, never in anybody's input).
pub fn gzip(data: &[u8], level: u32) -> Vec<u8> {
    let mut g = Gzip::new(level);
    let mut out = g.push(data).to_vec();
    out.extend_from_slice(&g.finish().expect("gzip output inflates").0);
    out
}

/// Inflates a whole buffer.
pub fn gunzip(data: &[u8]) -> Result<Vec<u8>, GzipError> {
    let mut g = Gunzip::new();
    let mut out = g.push(data)?.to_vec();
    out.extend_from_slice(&g.finish()?.0);
    Ok(out)
}

pub use lacquer_http::headers::is_gzip;

/// Whether an `Accept-Encoding` value accepts gzip (a `gzip` token whose
/// q-value is not zero).
pub fn accepts_gzip(accept_encoding: &[u8]) -> bool {
    accept_encoding.split(|&b| b == b',').any(|item| {
        let mut parts = item.split(|&b| b == b';');
        let coding = parts.next().unwrap_or_default().trim_ascii();
        if !coding.eq_ignore_ascii_case(b"gzip") && !coding.eq_ignore_ascii_case(b"x-gzip") {
            return false;
        }
        for p in parts {
            let p = p.trim_ascii();
            if let Some(q) = p.strip_prefix(b"q=").or_else(|| p.strip_prefix(b"Q=")) {
                let q = std::str::from_utf8(q)
                    .ok()
                    .and_then(|q| q.trim().parse::<f64>().ok());
                return q.is_some_and(|q| q > 0.0);
            }
        }
        true
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bomb_inflates_in_bounded_slices() {
        let plain = vec![0u8; 20 << 20];
        let gz = gzip(&plain, 9);
        assert!(gz.len() < 100 << 10, "a bomb: {} bytes", gz.len());
        let mut z = Gunzip::new();
        let (mut total, mut largest) = (0usize, 0usize);
        for piece in gz.chunks(7000) {
            let mut slices = z.slices(piece, INFLATE_SLICE);
            while let Some(s) = slices.next().unwrap() {
                assert!(s.iter().all(|&b| b == 0));
                total += s.len();
                largest = largest.max(s.len());
            }
        }
        let (tail, _) = z.finish().unwrap();
        assert_eq!(total + tail.len(), plain.len());
        assert!(tail.len() <= INFLATE_SLICE);
        assert!(
            largest <= INFLATE_SLICE + 32 * 1024,
            "largest slice {largest}"
        );
    }

    #[test]
    fn round_trip_in_pieces() {
        let text: Vec<u8> = (0..100_000u32)
            .map(|i| b"abcdefgh"[(i % 7) as usize])
            .collect();
        let mut g = Gzip::new(6);
        let mut z = Vec::new();
        for piece in text.chunks(3333) {
            z.extend_from_slice(&g.push(piece));
        }
        z.extend_from_slice(&g.finish().unwrap().0);
        assert!(z.len() < text.len() / 10);
        let mut u = Gunzip::new();
        let mut back = Vec::new();
        for piece in z.chunks(77) {
            back.extend_from_slice(&u.push(piece).unwrap());
        }
        assert_eq!(u.counts().0, z.len() as u64);
        let (tail, scanned) = u.finish().unwrap();
        back.extend_from_slice(&tail);
        assert_eq!(back, text);
        // The gunzip found the bits Lacquer's gzip wrote.
        assert_eq!(scanned, crate::splice::scan(&z).unwrap());
        assert_eq!(scanned.len, text.len() as u64);
        assert_eq!(gunzip(&gzip(b"", 9)).unwrap(), b"");
    }

    #[test]
    fn corrupt_and_truncated_streams_are_errors() {
        let z = gzip(b"hello hello hello hello", 6);
        assert!(gunzip(&z[..z.len() - 3]).is_err(), "truncated trailer");
        assert!(gunzip(&z[..5]).is_err(), "truncated header");
        let mut bad_crc = z.clone();
        let n = bad_crc.len();
        bad_crc[n - 6] ^= 0xff;
        assert!(gunzip(&bad_crc).is_err(), "crc");
        assert!(gunzip(b"not gzip at all").is_err());
        let mut garbage = z.clone();
        garbage[12] ^= 0x55;
        garbage[13] ^= 0xaa;
        let _ = gunzip(&garbage); // either an error or a CRC failure, never a panic
        assert!(gunzip(&garbage).is_err());
    }

    #[test]
    fn encodings() {
        assert!(is_gzip(b" gzip "));
        assert!(is_gzip(b"x-gzip"));
        assert!(!is_gzip(b"br"));
        assert!(accepts_gzip(b"gzip, deflate"));
        assert!(accepts_gzip(b"br;q=1.0, GZIP;q=0.5"));
        assert!(!accepts_gzip(b"gzip;q=0"));
        assert!(!accepts_gzip(b"deflate, br"));
        assert!(!accepts_gzip(b"gzipx"));
    }
}
