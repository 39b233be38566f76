//! Base64 in its alphabets (standard, URL-safe, and the `CF` variant),
//! for BLOB literals (`:base64:`) and vmod blob.

/// The standard alphabet.
pub const STD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
/// The URL-safe alphabet.
pub const URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
/// The alphabet of vmod blob's `BASE64CF`.
pub const CF: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-~";

/// Encodes `data`, padded with `pad` when there is one.
pub fn encode(data: &[u8], abc: &[u8; 64], pad: Option<u8>) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let n =
            chunk.iter().fold(0u32, |acc, &b| (acc << 8) | u32::from(b)) << (8 * (3 - chunk.len()));
        for i in 0..=chunk.len() {
            out.push(abc[(n >> (18 - 6 * i) & 63) as usize]);
        }
        if let Some(p) = pad {
            out.extend(std::iter::repeat_n(p, 3 - chunk.len()));
        }
    }
    out
}

/// Decodes `text` (padding with `pad` optional, at most two, at the end
/// only); None if a character is not of the alphabet.
pub fn decode(text: &[u8], abc: &[u8; 64], pad: Option<u8>) -> Option<Vec<u8>> {
    let text = match pad.and_then(|p| text.iter().position(|&c| c == p).map(|at| (p, at))) {
        Some((p, at)) if text[at..].iter().all(|&c| c == p) && text.len() - at <= 2 => &text[..at],
        Some(_) => return None,
        None => text,
    };
    if text.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0);
    for &c in text {
        let v = abc.iter().position(|&a| a == c)? as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}
