//! The Huffman code of HPACK (RFC 7541 Appendix B), which QPACK uses for
//! its string literals (RFC 9204 §4.1.2): decoding only, for the field
//! names and pseudo-header values `fields` must read before the `h3`
//! crate's own decoder does. The code is canonical, so each symbol's
//! code length is all the table holds; the codes follow from them.

use std::sync::OnceLock;

/// Each symbol's code length in bits: bytes 0 to 255, then EOS (256).
const CODE_LENGTHS: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, // 0x00
    28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28, // 0x10
    6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, // 0x20
    5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, // 0x30
    13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, // 0x40
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, // 0x50
    15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, // 0x60
    6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, // 0x70
    20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23, // 0x80
    24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, // 0x90
    22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, // 0xa0
    21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23, // 0xb0
    26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, // 0xc0
    19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, // 0xd0
    20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, // 0xe0
    26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, // 0xf0
    30, // EOS
];

const EOS: u16 = 256;
const LONGEST: usize = 30;

/// The canonical code, as the decoder reads it.
struct Code {
    /// For each length L: one past the last code of length L or less,
    /// left-aligned in 32 bits (a window below it has a code of at most
    /// L bits).
    limit: [u64; LONGEST + 1],
    /// Each length's first code, and where its symbols start in `symbols`.
    first: [u32; LONGEST + 1],
    offset: [u16; LONGEST + 1],
    /// The symbols in code order (by length, then by value).
    symbols: [u16; 257],
}

fn code() -> &'static Code {
    static CODE: OnceLock<Code> = OnceLock::new();
    CODE.get_or_init(|| {
        let mut count = [0u32; LONGEST + 1];
        for &len in &CODE_LENGTHS {
            count[usize::from(len)] += 1;
        }
        let mut code = Code {
            limit: [0; LONGEST + 1],
            first: [0; LONGEST + 1],
            offset: [0; LONGEST + 1],
            symbols: [0; 257],
        };
        let (mut next, mut at) = (0u32, 0u16);
        for (len, &n) in count.iter().enumerate().skip(1) {
            code.first[len] = next;
            code.offset[len] = at;
            next += n;
            code.limit[len] = u64::from(next) << (32 - len);
            at += n as u16;
            next <<= 1;
        }
        let mut placed = code.offset;
        for (symbol, &len) in CODE_LENGTHS.iter().enumerate() {
            let slot = &mut placed[usize::from(len)];
            code.symbols[usize::from(*slot)] = symbol as u16;
            *slot += 1;
        }
        code
    })
}

/// Why a Huffman string could not be read.
#[derive(Debug, PartialEq, Eq)]
pub enum HuffmanError {
    /// The EOS symbol inside the string (RFC 7541 §5.2).
    Eos,
    /// Padding longer than 7 bits, or not the EOS code's first bits.
    Padding,
}

/// Appends the decoding of `src` to `out`.
pub fn decode(src: &[u8], out: &mut Vec<u8>) -> Result<(), HuffmanError> {
    let code = code();
    // Bits not yet decoded, right-aligned in `acc`; `n` of them.
    let (mut acc, mut n) = (0u64, 0u32);
    let mut bytes = src.iter();
    loop {
        while n <= 56 {
            let Some(&b) = bytes.next() else { break };
            acc = (acc << 8) | u64::from(b);
            n += 8;
        }
        if n == 0 {
            return Ok(());
        }
        // The next 32 bits, padded with ones past the end (as padding is).
        let window = if n >= 32 {
            (acc >> (n - 32)) & 0xffff_ffff
        } else {
            ((acc << (32 - n)) | ((1u64 << (32 - n)) - 1)) & 0xffff_ffff
        };
        let len = (5..=LONGEST)
            .find(|&len| window < code.limit[len])
            .unwrap_or(LONGEST);
        if len as u32 > n {
            // What is left is shorter than any code it could start: it
            // must be padding, at most 7 bits of ones.
            let rest = acc & ((1u64 << n) - 1);
            return if n <= 7 && rest == (1u64 << n) - 1 {
                Ok(())
            } else {
                Err(HuffmanError::Padding)
            };
        }
        let index = code.offset[len] as u32 + ((window >> (32 - len)) as u32 - code.first[len]);
        let symbol = code.symbols[index as usize];
        if symbol == EOS {
            return Err(HuffmanError::Eos);
        }
        out.push(symbol as u8);
        n -= len as u32;
        acc &= (1u64 << n) - 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn decoded(src: &[u8]) -> Result<Vec<u8>, HuffmanError> {
        let mut out = Vec::new();
        decode(src, &mut out).map(|()| out)
    }

    /// An encoder from the same table, to check the decoder against.
    fn encode(src: &[u8]) -> Vec<u8> {
        let code = code();
        let mut codes = [(0u32, 0u32); 257];
        for len in 1..=LONGEST {
            let start = code.offset[len] as usize;
            let end = if len < LONGEST {
                code.offset[len + 1] as usize
            } else {
                257
            };
            for (i, &symbol) in code.symbols[start..end].iter().enumerate() {
                codes[symbol as usize] = (code.first[len] + i as u32, len as u32);
            }
        }
        let (mut acc, mut n, mut out) = (0u64, 0u32, Vec::new());
        for &b in src {
            let (c, len) = codes[b as usize];
            acc = (acc << len) | u64::from(c);
            n += len;
            while n >= 8 {
                out.push((acc >> (n - 8)) as u8);
                n -= 8;
            }
        }
        if n > 0 {
            out.push(((acc << (8 - n)) | ((1 << (8 - n)) - 1)) as u8);
        }
        out
    }

    #[test]
    fn the_code_is_complete() {
        // Kraft's sum is exactly one: every bit string starts a code.
        let sum: f64 = CODE_LENGTHS.iter().map(|&l| 0.5f64.powi(l as i32)).sum();
        assert!((sum - 1.0).abs() < 1e-12, "{sum}");
        // EOS is the last code: thirty ones.
        let code = code();
        assert_eq!(code.symbols[256], EOS);
        assert_eq!(code.limit[LONGEST], 1 << 32);
    }

    #[test]
    fn decodes_the_rfc_examples() {
        for (wire, text) in [
            ("f1e3 c2e5 f23a 6ba0 ab90 f4ff", "www.example.com"),
            ("a8eb 1064 9cbf", "no-cache"),
            ("25a8 49e9 5ba9 7d7f", "custom-key"),
            ("25a8 49e9 5bb8 e8b4 bf", "custom-value"),
            ("6402", "302"),
            ("aec3 771a 4b", "private"),
            (
                "d07a be94 1054 d444 a820 0595 040b 8166 e082 a62d 1bff",
                "Mon, 21 Oct 2013 20:13:21 GMT",
            ),
            (
                "9d29 ad17 1863 c78f 0b97 c8e9 ae82 ae43 d3",
                "https://www.example.com",
            ),
            ("b958d33f", ":path"),
            ("607ffffffefffffff91f", "/a\r\nb"),
        ] {
            assert_eq!(decoded(&hex(wire)).unwrap(), text.as_bytes(), "{wire}");
        }
        assert_eq!(decoded(&[]).unwrap(), b"");
    }

    #[test]
    fn every_byte_goes_round() {
        let all: Vec<u8> = (0..=255u8).chain((0..=255u8).rev()).collect();
        assert_eq!(decoded(&encode(&all)).unwrap(), all);
        for b in 0..=255u8 {
            assert_eq!(decoded(&encode(&[b])).unwrap(), [b]);
        }
    }

    #[test]
    fn bad_padding_and_eos_are_refused() {
        // Eight or more bits of padding.
        assert_eq!(decoded(&[0xff]), Err(HuffmanError::Padding));
        assert_eq!(decoded(&hex("6402 ff")), Err(HuffmanError::Padding));
        // Padding that is not ones: "0" (00000) then 000.
        assert_eq!(decoded(&[0x00]), Err(HuffmanError::Padding));
        // EOS itself, thirty ones and two of padding.
        assert_eq!(decoded(&[0xff, 0xff, 0xff, 0xff]), Err(HuffmanError::Eos));
    }
}
