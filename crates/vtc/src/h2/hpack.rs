//! HPACK (RFC 7541) as the runner needs it: a decoder for what the peer
//! sends (every representation, dynamic table size updates, Huffman
//! strings), and an encoder that writes exactly the representation a
//! test asks for (`-idxHdr`, `-litIdxHdr`, `-litHdr`, plain or Huffman
//! strings), keeping the encoder's dynamic table as the peer will. The
//! tables can be looked into (`tbl.dec.*`, `tbl.enc.*`).

use super::huffman;
use std::collections::VecDeque;

/// The static table (RFC 7541, appendix A), index 1 first.
const STATIC: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

/// One header field: name and value, as bytes.
pub type Field = (Vec<u8>, Vec<u8>);

/// A dynamic table (newest entry first).
#[derive(Debug, Clone)]
pub struct Table {
    entries: VecDeque<Field>,
    size: usize,
    max: usize,
}

impl Table {
    pub fn new(max: usize) -> Table {
        Table {
            entries: VecDeque::new(),
            size: 0,
            max,
        }
    }

    fn entry_size(f: &Field) -> usize {
        f.0.len() + f.1.len() + 32
    }

    /// The size of the entries, as RFC 7541 counts it.
    pub fn size(&self) -> usize {
        self.size
    }

    pub fn max_size(&self) -> usize {
        self.max
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Changes the maximum size, evicting what no longer fits.
    pub fn resize(&mut self, max: usize) {
        self.max = max;
        self.evict(0);
    }

    fn evict(&mut self, room: usize) {
        while self.size + room > self.max {
            match self.entries.pop_back() {
                Some(old) => self.size -= Table::entry_size(&old),
                None => break,
            }
        }
    }

    /// Adds an entry; one larger than the table empties it.
    pub fn insert(&mut self, f: Field) {
        let n = Table::entry_size(&f);
        self.evict(n);
        if n <= self.max {
            self.size += n;
            self.entries.push_front(f);
        }
    }

    /// The field at an HPACK index: 1 to 61 static, 62 on dynamic.
    pub fn get(&self, index: usize) -> Option<Field> {
        match index {
            0 => None,
            1..=61 => {
                let (n, v) = STATIC[index - 1];
                Some((n.as_bytes().to_vec(), v.as_bytes().to_vec()))
            }
            _ => self.entries.get(index - 62).cloned(),
        }
    }
}

/// Reads an integer with an `n`-bit prefix at `buf[*at]`.
pub fn read_int(buf: &[u8], at: &mut usize, n: u8) -> Result<usize, String> {
    let mask = ((1u16 << n) - 1) as u8;
    let first = *buf.get(*at).ok_or("HPACK: truncated integer")?;
    *at += 1;
    let mut v = usize::from(first & mask);
    if v < usize::from(mask) {
        return Ok(v);
    }
    let mut shift = 0u32;
    loop {
        let b = *buf.get(*at).ok_or("HPACK: truncated integer")?;
        *at += 1;
        if shift > 28 {
            return Err("HPACK: integer too large".to_string());
        }
        v += usize::from(b & 0x7f) << shift;
        shift += 7;
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
}

/// Writes an integer with an `n`-bit prefix, the prefix's high bits
/// being `first`.
pub fn write_int(out: &mut Vec<u8>, first: u8, n: u8, mut v: usize) {
    let mask = ((1u16 << n) - 1) as usize;
    if v < mask {
        out.push(first | v as u8);
        return;
    }
    out.push(first | mask as u8);
    v -= mask;
    while v >= 0x80 {
        out.push((v & 0x7f) as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn read_string(buf: &[u8], at: &mut usize) -> Result<Vec<u8>, String> {
    let huff = buf.get(*at).ok_or("HPACK: truncated string")? & 0x80 != 0;
    let len = read_int(buf, at, 7)?;
    let end = at
        .checked_add(len)
        .filter(|&e| e <= buf.len())
        .ok_or_else(|| format!("HPACK: string of {len} bytes past the end of the block"))?;
    let raw = &buf[*at..end];
    *at = end;
    if huff {
        huffman::decode(raw)
    } else {
        Ok(raw.to_vec())
    }
}

/// Writes a string literal, Huffman-coded or plain.
pub fn write_string(out: &mut Vec<u8>, s: &[u8], huff: bool) {
    if huff {
        write_int(out, 0x80, 7, huffman::encoded_len(s));
        out.extend_from_slice(&huffman::encode(s));
    } else {
        write_int(out, 0, 7, s.len());
        out.extend_from_slice(s);
    }
}

/// Decodes a header block against `table`, which it updates.
pub fn decode(table: &mut Table, buf: &[u8]) -> Result<Vec<Field>, String> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < buf.len() {
        let b = buf[at];
        if b & 0x80 != 0 {
            let i = read_int(buf, &mut at, 7)?;
            let f = table
                .get(i)
                .ok_or_else(|| format!("HPACK: no entry at index {i}"))?;
            out.push(f);
        } else if b & 0xe0 == 0x20 {
            let n = read_int(buf, &mut at, 5)?;
            if !out.is_empty() {
                return Err("HPACK: table size update after a field".to_string());
            }
            table.resize(n);
        } else {
            // Literal: with incremental indexing (01), without (0000) or
            // never indexed (0001).
            let (prefix, add) = if b & 0x40 != 0 { (6, true) } else { (4, false) };
            let i = read_int(buf, &mut at, prefix)?;
            let name = if i == 0 {
                read_string(buf, &mut at)?
            } else {
                table
                    .get(i)
                    .ok_or_else(|| format!("HPACK: no entry at index {i}"))?
                    .0
            };
            let value = read_string(buf, &mut at)?;
            if add {
                table.insert((name.clone(), value.clone()));
            }
            out.push((name, value));
        }
    }
    Ok(out)
}

/// How a literal is indexed: `inc`, `not` or `never`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Indexing {
    Inc,
    Not,
    Never,
}

impl Indexing {
    pub fn parse(s: &str) -> Option<Indexing> {
        match s {
            "inc" => Some(Indexing::Inc),
            "not" => Some(Indexing::Not),
            "never" => Some(Indexing::Never),
            _ => None,
        }
    }

    fn prefix(self) -> (u8, u8) {
        match self {
            Indexing::Inc => (0x40, 6),
            Indexing::Not => (0x00, 4),
            Indexing::Never => (0x10, 4),
        }
    }
}

/// One representation to write.
#[derive(Debug, Clone)]
pub enum Rep {
    /// An indexed field.
    Indexed(usize),
    /// A literal whose name is the one at an index.
    LitIdx {
        how: Indexing,
        index: usize,
        value: Vec<u8>,
        huff: bool,
    },
    /// A literal with its name.
    Lit {
        how: Indexing,
        name: Vec<u8>,
        name_huff: bool,
        value: Vec<u8>,
        huff: bool,
    },
}

/// Writes one representation, updating the encoder's `table` as the
/// peer's decoder will; an index that is not in the table fails.
pub fn encode(table: &mut Table, rep: &Rep, out: &mut Vec<u8>) -> Result<(), String> {
    match rep {
        Rep::Indexed(i) => {
            write_int(out, 0x80, 7, *i);
        }
        Rep::LitIdx {
            how,
            index,
            value,
            huff,
        } => {
            let (first, n) = how.prefix();
            write_int(out, first, n, *index);
            write_string(out, value, *huff);
            if *how == Indexing::Inc {
                let name = table
                    .get(*index)
                    .ok_or_else(|| format!("no header at index {index} to name a literal"))?
                    .0;
                table.insert((name, value.clone()));
            }
        }
        Rep::Lit {
            how,
            name,
            name_huff,
            value,
            huff,
        } => {
            let (first, n) = how.prefix();
            write_int(out, first, n, 0);
            write_string(out, name, *name_huff);
            write_string(out, value, *huff);
            if *how == Indexing::Inc {
                table.insert((name.clone(), value.clone()));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// Bytes from hex digits, spaces ignored (the RFC's examples).
    pub(in crate::h2) fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn text(fields: &[Field]) -> Vec<(String, String)> {
        fields
            .iter()
            .map(|(n, v)| {
                (
                    String::from_utf8_lossy(n).into_owned(),
                    String::from_utf8_lossy(v).into_owned(),
                )
            })
            .collect()
    }

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn integers_round_trip_as_rfc7541_shows() {
        let mut out = Vec::new();
        write_int(&mut out, 0, 5, 10);
        assert_eq!(out, [10]);
        out.clear();
        write_int(&mut out, 0, 5, 1337);
        assert_eq!(out, [31, 154, 10]);
        let mut at = 0;
        assert_eq!(read_int(&out, &mut at, 5).unwrap(), 1337);
        assert_eq!(at, 3);
        assert!(read_int(&[31, 0xff], &mut 0, 5).is_err());
        assert!(read_int(&[0x1f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff], &mut 0, 5).is_err());
    }

    #[test]
    fn rfc7541_requests_without_huffman() {
        let mut t = Table::new(4096);
        let a = decode(
            &mut t,
            &hex("8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d"),
        )
        .unwrap();
        assert_eq!(
            text(&a),
            pairs(&[
                (":method", "GET"),
                (":scheme", "http"),
                (":path", "/"),
                (":authority", "www.example.com")
            ])
        );
        assert_eq!((t.size(), t.len()), (57, 1));
        let b = decode(&mut t, &hex("8286 84be 5808 6e6f 2d63 6163 6865")).unwrap();
        assert_eq!(text(&b)[4], pairs(&[("cache-control", "no-cache")])[0]);
        assert_eq!(t.size(), 110);
        let c = decode(
            &mut t,
            &hex("8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65"),
        )
        .unwrap();
        assert_eq!(text(&c)[4], pairs(&[("custom-key", "custom-value")])[0]);
        assert_eq!((t.size(), t.len()), (164, 3));
        assert_eq!(t.get(62).unwrap().0, b"custom-key");
    }

    #[test]
    fn rfc7541_request_with_huffman() {
        let mut t = Table::new(4096);
        let a = decode(&mut t, &hex("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff")).unwrap();
        assert_eq!(text(&a)[3], pairs(&[(":authority", "www.example.com")])[0]);
    }

    #[test]
    fn the_encoder_writes_the_forms_asked_and_the_decoder_agrees() {
        let mut enc = Table::new(4096);
        let mut out = Vec::new();
        let reps = [
            Rep::Indexed(2),
            Rep::LitIdx {
                how: Indexing::Inc,
                index: 4,
                value: b"/x".to_vec(),
                huff: true,
            },
            Rep::Lit {
                how: Indexing::Never,
                name: b"foo".to_vec(),
                name_huff: false,
                value: b"bar".to_vec(),
                huff: true,
            },
            Rep::Lit {
                how: Indexing::Not,
                name: b"custom-key".to_vec(),
                name_huff: false,
                value: b"custom-header".to_vec(),
                huff: false,
            },
            Rep::Indexed(62),
        ];
        for r in &reps {
            encode(&mut enc, r, &mut out).unwrap();
        }
        // RFC 7541 C.2.2's literal without indexing is the fourth.
        assert!(out
            .windows(26)
            .any(|w| w == hex("000a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572")));
        let mut dec = Table::new(4096);
        let got = decode(&mut dec, &out).unwrap();
        assert_eq!(
            text(&got),
            pairs(&[
                (":method", "GET"),
                (":path", "/x"),
                ("foo", "bar"),
                ("custom-key", "custom-header"),
                (":path", "/x"),
            ])
        );
        assert_eq!((dec.size(), dec.len()), (enc.size(), enc.len()));
    }

    #[test]
    fn tables_evict_and_bad_blocks_fail() {
        let mut t = Table::new(100);
        t.insert((b"a".to_vec(), vec![b'x'; 40])); // 73
        t.insert((b"b".to_vec(), b"y".to_vec())); // 34: evicts a
        assert_eq!((t.len(), t.size()), (1, 34));
        t.insert((b"c".to_vec(), vec![b'z'; 200])); // too large: empties
        assert!(t.is_empty());
        let mut t = Table::new(4096);
        assert!(decode(&mut t, &[0xbe]).unwrap_err().contains("index 62"));
        assert!(decode(&mut t, &[0x00, 0x05, b'a'])
            .unwrap_err()
            .contains("past the end"));
        assert!(decode(&mut t, &[0x82, 0x20])
            .unwrap_err()
            .contains("size update"));
        assert!(decode(&mut t, &[0x3f, 0xe1, 0x1f]).is_ok());
        assert_eq!(t.max_size(), 4096);
    }
}
