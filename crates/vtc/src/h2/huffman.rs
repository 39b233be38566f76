//! The Huffman code of HPACK (RFC 7541, appendix B): encoding and
//! decoding of string literals. The code is canonical, so the table here
//! holds only each symbol's code length; the codes follow from them
//! (shortest first, then by symbol).

/// The code length of each symbol, 0 to 255, then EOS (256).
const LENGTHS: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, //
    28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28, //
    6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, //
    5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, //
    13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, //
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, //
    15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, //
    6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, //
    20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23, //
    24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, //
    22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, //
    21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23, //
    26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, //
    19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, //
    20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, //
    26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, //
    30,
];

const EOS: u16 = 256;

/// The codes, built once: `CODES[sym]` is (code, length), the code in the
/// low bits.
fn codes() -> &'static [(u32, u8); 257] {
    static CODES: std::sync::OnceLock<[(u32, u8); 257]> = std::sync::OnceLock::new();
    CODES.get_or_init(|| {
        let mut order: Vec<u16> = (0..257).collect();
        order.sort_by_key(|&s| (LENGTHS[s as usize], s));
        let mut out = [(0u32, 0u8); 257];
        let mut code: u32 = 0;
        let mut prev = LENGTHS[order[0] as usize];
        for (k, &s) in order.iter().enumerate() {
            let len = LENGTHS[s as usize];
            if k > 0 {
                code = (code + 1) << (len - prev);
            }
            prev = len;
            out[s as usize] = (code, len);
        }
        out
    })
}

/// Huffman-encodes `data`, padding the last octet with the EOS prefix.
pub fn encode(data: &[u8]) -> Vec<u8> {
    let codes = codes();
    let mut out = Vec::with_capacity(data.len());
    let mut acc: u64 = 0;
    let mut bits: u32 = 0;
    for &b in data {
        let (code, len) = codes[b as usize];
        acc = (acc << len) | u64::from(code);
        bits += u32::from(len);
        while bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
        acc &= (1u64 << bits) - 1;
    }
    if bits > 0 {
        let pad = 8 - bits;
        out.push(((acc << pad) | ((1u64 << pad) - 1)) as u8);
    }
    out
}

/// The length of `data` Huffman-encoded.
pub fn encoded_len(data: &[u8]) -> usize {
    let bits: usize = data.iter().map(|&b| LENGTHS[b as usize] as usize).sum();
    bits.div_ceil(8)
}

/// A decoding tree: each node has two children, a leaf holds a symbol.
struct Tree {
    /// `nodes[i]` = (child for 0, child for 1); a child is a node index,
    /// or `LEAF | symbol`, or 0 for none.
    nodes: Vec<[u32; 2]>,
}

const LEAF: u32 = 1 << 31;

fn tree() -> &'static Tree {
    static TREE: std::sync::OnceLock<Tree> = std::sync::OnceLock::new();
    TREE.get_or_init(|| {
        let mut nodes = vec![[0u32; 2]];
        for (sym, &(code, len)) in codes().iter().enumerate() {
            let mut at = 0usize;
            for i in (0..len).rev() {
                let bit = ((code >> i) & 1) as usize;
                if i == 0 {
                    nodes[at][bit] = LEAF | sym as u32;
                } else {
                    if nodes[at][bit] == 0 {
                        nodes.push([0; 2]);
                        nodes[at][bit] = (nodes.len() - 1) as u32;
                    }
                    at = nodes[at][bit] as usize;
                }
            }
        }
        Tree { nodes }
    })
}

/// Decodes a Huffman-encoded string; fails on EOS in the data, on
/// padding longer than 7 bits or not made of ones.
pub fn decode(data: &[u8]) -> Result<Vec<u8>, String> {
    let t = tree();
    let mut out = Vec::with_capacity(data.len() * 8 / 5);
    let mut at = 0usize;
    // Bits read since the last symbol, and whether all were ones.
    let mut pending = 0u32;
    let mut all_ones = true;
    for &byte in data {
        for i in (0..8).rev() {
            let bit = ((byte >> i) & 1) as usize;
            pending += 1;
            all_ones &= bit == 1;
            let next = t.nodes[at][bit];
            if next & LEAF != 0 {
                let sym = (next & !LEAF) as u16;
                if sym == EOS {
                    return Err("Huffman: EOS in a string".to_string());
                }
                out.push(sym as u8);
                at = 0;
                pending = 0;
                all_ones = true;
            } else if next == 0 {
                return Err("Huffman: invalid code".to_string());
            } else {
                at = next as usize;
            }
        }
    }
    if pending > 7 {
        return Err("Huffman: padding longer than 7 bits".to_string());
    }
    if !all_ones {
        return Err("Huffman: padding is not the EOS prefix".to_string());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::h2::hpack::tests::hex;

    #[test]
    fn the_code_is_complete_and_matches_known_codes() {
        let kraft: f64 = LENGTHS.iter().map(|&l| 0.5f64.powi(l as i32)).sum();
        assert!((kraft - 1.0).abs() < 1e-12);
        let c = codes();
        assert_eq!(c[b'0' as usize], (0x0, 5));
        assert_eq!(c[b' ' as usize], (0x14, 6));
        assert_eq!(c[0], (0x1ff8, 13));
        assert_eq!(c[256], (0x3fffffff, 30));
    }

    #[test]
    fn rfc7541_examples() {
        for (text, coded) in [
            ("www.example.com", "f1e3 c2e5 f23a 6ba0 ab90 f4ff"),
            ("no-cache", "a8eb 1064 9cbf"),
            ("custom-key", "25a8 49e9 5ba9 7d7f"),
            ("custom-value", "25a8 49e9 5bb8 e8b4 bf"),
            ("302", "6402"),
            ("private", "aec3 771a 4b"),
            ("gzip", "9bd9 ab"),
        ] {
            assert_eq!(encode(text.as_bytes()), hex(coded), "{text}");
            assert_eq!(encoded_len(text.as_bytes()), hex(coded).len());
            assert_eq!(decode(&hex(coded)).unwrap(), text.as_bytes());
        }
    }

    #[test]
    fn every_byte_round_trips_and_bad_input_fails() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(decode(&encode(&all)).unwrap(), all);
        assert!(decode(&[0xff, 0xff, 0xff, 0xff]).is_err()); // EOS
        assert!(decode(&[0x00]).unwrap_err().contains("padding")); // '0' then 000
        assert!(decode(&[0xf1, 0xff]).is_err()); // padding of 8+ bits
    }
}
