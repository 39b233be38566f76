//! The gzip bodies a test sends (`-gzipbody`, `-gziplen`, `-gziplevel`)
//! and `-gzipresidual N`, which asks for a body whose deflate data ends
//! N bits into its last byte, so that a test can show how a cache joins
//! gzip streams that end on every bit offset. varnishtest gets such a body
//! by picking text that zlib happens to end there; this runner builds it:
//! the text in blocks ending on a byte (a sync flush), then empty blocks
//! whose lengths add up to the bits wanted.

use flate2::{Compress, Compression, Crc, FlushCompress, Status};
use std::io::Write;

/// A gzip member of `data` at `level`.
pub fn gzip(data: &[u8], level: u32) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), Compression::new(level));
    // Writing into a Vec cannot fail.
    let _ = enc.write_all(data);
    enc.finish().unwrap_or_default()
}

/// A gzip member of `data` whose deflate data stops `residual` (0–7)
/// bits into its last byte.
pub fn gzip_residual(data: &[u8], level: u32, residual: u8) -> Vec<u8> {
    let mut out = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3];
    out.extend_from_slice(&deflate_to_byte(data, level));
    let mut bits = Bits::default();
    let residual = u32::from(residual % 8);
    // An empty fixed block is 10 bits, the empty dynamic block below 95:
    // k fixed blocks and a final fixed one end 2(k + 1) bits on, k fixed
    // blocks and a final dynamic one 7 + 2k.
    if residual % 2 == 0 {
        let blocks = if residual == 0 { 4 } else { residual / 2 };
        for _ in 1..blocks {
            empty_fixed(&mut bits, false);
        }
        empty_fixed(&mut bits, true);
    } else {
        for _ in 0..(residual + 1) % 8 / 2 {
            empty_fixed(&mut bits, false);
        }
        empty_dynamic_final(&mut bits);
    }
    debug_assert_eq!(bits.count % 8, residual);
    out.extend_from_slice(&bits.finish());
    let mut crc = Crc::new();
    crc.update(data);
    out.extend_from_slice(&crc.sum().to_le_bytes());
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out
}

/// Raw deflate of `data` in non-final blocks, ending on a byte boundary.
fn deflate_to_byte(data: &[u8], level: u32) -> Vec<u8> {
    let mut c = Compress::new(Compression::new(level), false);
    let mut out = Vec::with_capacity(data.len() / 2 + 64);
    loop {
        out.reserve(4096);
        let taken = c.total_in() as usize;
        let status = c.compress_vec(&data[taken..], &mut out, FlushCompress::Sync);
        let done = c.total_in() as usize == data.len() && out.len() < out.capacity();
        if done || !matches!(status, Ok(Status::Ok | Status::BufError)) {
            return out;
        }
    }
}

/// Bits written least significant first, as deflate packs them.
#[derive(Default)]
struct Bits {
    out: Vec<u8>,
    acc: u32,
    held: u32,
    /// Bits written in all.
    count: u32,
}

impl Bits {
    fn put(&mut self, value: u32, n: u32) {
        self.acc |= value << self.held;
        self.held += n;
        self.count += n;
        while self.held >= 8 {
            self.out.push(self.acc as u8);
            self.acc >>= 8;
            self.held -= 8;
        }
    }

    fn finish(mut self) -> Vec<u8> {
        if self.held > 0 {
            self.out.push(self.acc as u8);
        }
        self.out
    }
}

/// A block of fixed codes holding only its end code: 10 bits.
fn empty_fixed(b: &mut Bits, last: bool) {
    b.put(u32::from(last), 1);
    b.put(1, 2);
    // End of block, code 256: seven zero bits.
    b.put(0, 7);
}

/// A final block of dynamic codes holding only its end code: 95 bits.
/// Its literal code has two one-bit codes (literal 0 and the end), its
/// distance code two one-bit codes, and its code-length code the lengths
/// 1 and 18, sent as 19 three-bit entries.
fn empty_dynamic_final(b: &mut Bits) {
    /// The order code-length code lengths are sent in.
    const ORDER: [u32; 19] = [
        16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15,
    ];
    b.put(1, 1);
    b.put(2, 2);
    b.put(0, 5); // 257 literal/length codes
    b.put(1, 5); // 2 distance codes
    b.put(15, 4); // 19 code-length codes
    for sym in ORDER {
        b.put(u32::from(sym == 1 || sym == 18), 3);
    }
    // Code-length symbols: 1 is code 0, 18 is code 1 (then 7 bits of
    // repeat count less 11).
    b.put(0, 1); // literal 0: length 1
    b.put(1, 1);
    b.put(138 - 11, 7); // literals 1..=138: none
    b.put(1, 1);
    b.put(117 - 11, 7); // literals 139..=255: none
    b.put(0, 1); // end code: length 1
    b.put(0, 1); // distance 0: length 1
    b.put(0, 1); // distance 1: length 1
                 // The end code (code 1 of the literal code).
    b.put(1, 1);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn residual_bodies_inflate_and_stop_where_asked() {
        let texts: [&[u8]; 3] = [b"", b"x", &[b'a'; 5000]];
        for text in texts {
            for residual in 0..8u8 {
                let z = gzip_residual(text, 6, residual);
                let mut back = Vec::new();
                flate2::read::GzDecoder::new(&z[..])
                    .read_to_end(&mut back)
                    .unwrap_or_else(|e| panic!("residual {residual}: {e}"));
                assert_eq!(back, text);
                // Found by an inflater that reports block ends.
                let found = lacquer_filters::splice::scan(&z).expect("a whole gzip member");
                assert_eq!(found.bits.stop % 8, u64::from(residual));
                assert_eq!(found.len, text.len() as u64);
            }
        }
    }
}
