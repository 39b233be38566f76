//! A request's field section as it came in its HEADERS frame, read before
//! the `h3` crate decodes it into a map, which keeps only the last of two
//! `:path`s and forgets which fields came first: what could be read two
//! ways is refused here (RFC 9114 §4.3, §4.1.2). A request is malformed
//! when it has a pseudo-header twice, one after a regular field, one that
//! is not a request's (`:status`, or unknown), lacks one it must have, or
//! has an empty `:path`; when a pseudo-header's value holds a control
//! character or a space; when a field name is empty, has an upper-case
//! letter, or holds a colon past its first byte; and when it refers to a
//! dynamic table (this server gives QPACK none). Regular field values
//! are the `h3` crate's to check (it refuses CR, LF, NUL and the other
//! control characters but HTAB).

use super::huffman;

/// Why a request's field section was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Malformed {
    /// QPACK that does not parse, or Huffman that does not decode.
    Encoding,
    /// A reference to a dynamic table entry (there is none).
    DynamicTable,
    PseudoTwice,
    PseudoAfterField,
    /// `:status`, or a pseudo-header no one defined.
    PseudoNotForRequests,
    MissingPseudo,
    /// A CONNECT request that has `:scheme` or `:path`.
    ConnectWithPath,
    EmptyPath,
    BadPseudoValue,
    BadName,
    /// A HEADERS frame longer than the header list may be.
    TooLarge,
}

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Malformed::Encoding => "a field section that does not decode",
            Malformed::DynamicTable => "a reference to a dynamic table",
            Malformed::PseudoTwice => "a pseudo-header twice",
            Malformed::PseudoAfterField => "a pseudo-header after a regular field",
            Malformed::PseudoNotForRequests => "a pseudo-header that is not a request's",
            Malformed::MissingPseudo => "a missing pseudo-header",
            Malformed::ConnectWithPath => "CONNECT with :scheme or :path",
            Malformed::EmptyPath => "an empty :path",
            Malformed::BadPseudoValue => "a pseudo-header value with a control or space",
            Malformed::BadName => "an invalid field name",
            Malformed::TooLarge => "a HEADERS frame past the header list's limit",
        })
    }
}

impl std::error::Error for Malformed {}

/// The pseudo-headers of a request, as bits.
const METHOD: u8 = 1;
const SCHEME: u8 = 2;
const AUTHORITY: u8 = 4;
const PATH: u8 = 8;
const PROTOCOL: u8 = 16;
/// Not a request's: `:status` or unknown.
const OTHER: u8 = 128;

fn pseudo_bit(name: &[u8]) -> u8 {
    match name {
        b":method" => METHOD,
        b":scheme" => SCHEME,
        b":authority" => AUTHORITY,
        b":path" => PATH,
        b":protocol" => PROTOCOL,
        _ => OTHER,
    }
}

/// What a static table entry (RFC 9204 Appendix A) names: a pseudo-header
/// (its bit), a regular field (0), or nothing (past the table's 99).
fn static_name(index: u64) -> Option<u8> {
    Some(match index {
        0 => AUTHORITY,
        1 => PATH,
        15..=21 => METHOD,
        22 | 23 => SCHEME,
        24..=28 | 63..=71 => OTHER,
        2..=98 => 0,
        _ => return None,
    })
}

/// The static entry `:method: CONNECT`.
const STATIC_CONNECT: u64 = 15;

/// Reads a field section; `Ok(())` when nothing in it is malformed.
pub(crate) fn check_request(block: &[u8]) -> Result<(), Malformed> {
    let mut r = Reader { buf: block, at: 0 };
    // Required Insert Count (RFC 9204 §4.5.1): 0 without a dynamic table.
    if r.int(8)? != 0 {
        return Err(Malformed::DynamicTable);
    }
    r.int(7)?; // the base's delta: of no use with no dynamic table
    let (mut seen, mut regular, mut connect) = (0u8, false, false);
    let mut name_buf = Vec::new();
    let mut value_buf = Vec::new();
    while !r.done() {
        let first = r.peek()?;
        // (the field's pseudo bit or 0, its value when a pseudo-header's)
        let (bit, value): (u8, Option<&[u8]>) = if first & 0x80 != 0 {
            // Indexed field line.
            if first & 0x40 == 0 {
                return Err(Malformed::DynamicTable);
            }
            let index = r.int(6)?;
            let bit = static_name(index).ok_or(Malformed::Encoding)?;
            connect |= index == STATIC_CONNECT;
            (bit, None)
        } else if first & 0x40 != 0 {
            // Literal with a name reference.
            if first & 0x10 == 0 {
                return Err(Malformed::DynamicTable);
            }
            let index = r.int(4)?;
            let bit = static_name(index).ok_or(Malformed::Encoding)?;
            let value = r.string(7, bit != 0, &mut value_buf)?;
            (bit, value)
        } else if first & 0x20 != 0 {
            // Literal with a literal name.
            let name = r.string(3, true, &mut name_buf)?.unwrap_or_default();
            let bit = match name.split_first() {
                None => return Err(Malformed::BadName),
                Some((b':', rest)) => {
                    if !valid_name(rest) {
                        return Err(Malformed::BadName);
                    }
                    pseudo_bit(name)
                }
                Some(_) if !valid_name(name) => return Err(Malformed::BadName),
                Some(_) => 0,
            };
            let value = r.string(7, bit != 0, &mut value_buf)?;
            (bit, value)
        } else {
            // The post-base forms refer to the dynamic table.
            return Err(Malformed::DynamicTable);
        };
        if bit == 0 {
            regular = true;
            continue;
        }
        if bit == OTHER {
            return Err(Malformed::PseudoNotForRequests);
        }
        if regular {
            return Err(Malformed::PseudoAfterField);
        }
        if seen & bit != 0 {
            return Err(Malformed::PseudoTwice);
        }
        seen |= bit;
        if let Some(value) = value {
            if value.iter().any(|&b| b <= b' ' || b == 0x7f) {
                return Err(Malformed::BadPseudoValue);
            }
            if bit == PATH && value.is_empty() {
                return Err(Malformed::EmptyPath);
            }
            connect |= bit == METHOD && value == b"CONNECT";
        }
    }
    if seen & METHOD == 0 {
        return Err(Malformed::MissingPseudo);
    }
    if connect && seen & PROTOCOL == 0 {
        // RFC 9114 §4.4: :authority only.
        if seen & (SCHEME | PATH) != 0 {
            return Err(Malformed::ConnectWithPath);
        }
        if seen & AUTHORITY == 0 {
            return Err(Malformed::MissingPseudo);
        }
    } else if seen & (SCHEME | PATH) != SCHEME | PATH {
        return Err(Malformed::MissingPseudo);
    }
    Ok(())
}

/// A field name's bytes past a pseudo-header's colon, or a regular one's:
/// lower-case token characters (RFC 9110 §5.6.2), no colon.
fn valid_name(name: &[u8]) -> bool {
    !name.is_empty()
        && name
            .iter()
            .all(|&b| matches!(b, b'a'..=b'z' | b'0'..=b'9') || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// A cursor on a field section.
struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn done(&self) -> bool {
        self.at >= self.buf.len()
    }

    fn peek(&self) -> Result<u8, Malformed> {
        self.buf.get(self.at).copied().ok_or(Malformed::Encoding)
    }

    /// A prefixed integer (RFC 7541 §5.1) in the low `bits` of the next
    /// byte and those after; values past 2^32 are refused.
    fn int(&mut self, bits: u32) -> Result<u64, Malformed> {
        let mask = (1u16 << bits) as u64 - 1;
        let mut value = u64::from(self.peek()?) & mask;
        self.at += 1;
        if value < mask {
            return Ok(value);
        }
        let mut shift = 0;
        loop {
            let b = self.peek()?;
            self.at += 1;
            value += u64::from(b & 0x7f) << shift;
            if value > u64::from(u32::MAX) {
                return Err(Malformed::Encoding);
            }
            if b & 0x80 == 0 {
                return Ok(value);
            }
            shift += 7;
            if shift > 28 {
                return Err(Malformed::Encoding);
            }
        }
    }

    /// A string literal whose length has a `bits` prefix, its Huffman
    /// flag the bit above. With `keep`, its bytes (decoded into `buf`
    /// when Huffman-coded); else it is skipped and `None` comes back.
    fn string<'b>(
        &mut self,
        bits: u32,
        keep: bool,
        buf: &'b mut Vec<u8>,
    ) -> Result<Option<&'b [u8]>, Malformed>
    where
        'a: 'b,
    {
        let huffman = self.peek()? & (1 << bits) != 0;
        let len = self.int(bits)? as usize;
        let end = self.at.checked_add(len).ok_or(Malformed::Encoding)?;
        let raw = self.buf.get(self.at..end).ok_or(Malformed::Encoding)?;
        self.at = end;
        if !keep {
            return Ok(None);
        }
        if !huffman {
            return Ok(Some(raw));
        }
        buf.clear();
        huffman::decode(raw, buf).map_err(|_| Malformed::Encoding)?;
        Ok(Some(&buf[..]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A field line for a static entry.
    fn indexed(index: u8) -> Vec<u8> {
        assert!(index < 63);
        vec![0xc0 | index]
    }

    fn string(flag_bits: u32, s: &[u8]) -> Vec<u8> {
        let prefix = (1usize << flag_bits) - 1;
        let mut out = Vec::new();
        if s.len() < prefix {
            out.push(s.len() as u8);
        } else {
            out.push(prefix as u8);
            let mut rest = s.len() - prefix;
            while rest >= 128 {
                out.push((rest % 128) as u8 | 0x80);
                rest /= 128;
            }
            out.push(rest as u8);
        }
        out.extend_from_slice(s);
        out
    }

    /// A literal field line with a static name reference.
    fn named(index: u8, value: &[u8]) -> Vec<u8> {
        assert!(index < 15);
        let mut out = vec![0x50 | index];
        out.extend(string(7, value));
        out
    }

    /// A literal field line with a literal name.
    fn literal(name: &[u8], value: &[u8]) -> Vec<u8> {
        let mut out = string(3, name);
        out[0] |= 0x20;
        out.extend(string(7, value));
        out
    }

    fn section(lines: &[Vec<u8>]) -> Vec<u8> {
        let mut out = vec![0, 0];
        for l in lines {
            out.extend_from_slice(l);
        }
        out
    }

    /// GET https (the static entries), then `more`.
    fn get(more: &[Vec<u8>]) -> Vec<u8> {
        let mut lines = vec![
            indexed(17),
            indexed(23),
            named(0, b"a.example"),
            named(1, b"/x"),
        ];
        lines.extend_from_slice(more);
        section(&lines)
    }

    #[test]
    fn well_formed_requests_pass() {
        assert_eq!(check_request(&get(&[])), Ok(()));
        assert_eq!(
            check_request(&get(&[indexed(31), literal(b"x-a", b"b\tc")])),
            Ok(())
        );
        // A CONNECT with :authority only, and an extended one.
        let connect = section(&[indexed(15), named(0, b"a.example:443")]);
        assert_eq!(check_request(&connect), Ok(()));
        let extended = section(&[
            indexed(15),
            literal(b":protocol", b"websocket"),
            indexed(23),
            named(1, b"/chat"),
            named(0, b"a.example"),
        ]);
        assert_eq!(check_request(&extended), Ok(()));
        // A Huffman-coded literal name: ":path".
        let mut huff = vec![0x20 | 0x08 | 4];
        huff.extend_from_slice(&[0xb9, 0x58, 0xd3, 0x3f]);
        huff.extend(string(7, b"/h"));
        let s = section(&[indexed(17), indexed(23), named(0, b"a"), huff.clone()]);
        assert_eq!(check_request(&s), Ok(()));
        let s = section(&[indexed(17), indexed(23), named(1, b"/x"), huff]);
        assert_eq!(check_request(&s), Err(Malformed::PseudoTwice));
    }

    #[test]
    fn pseudo_header_abuse_is_malformed() {
        use Malformed::*;
        for (lines, why) in [
            (vec![named(1, b"/y")], PseudoTwice),
            (vec![indexed(20)], PseudoTwice),
            (vec![literal(b":path", b"/y")], PseudoTwice),
            (vec![indexed(25)], PseudoNotForRequests),
            (vec![literal(b":status", b"200")], PseudoNotForRequests),
            (vec![literal(b":fake", b"1")], PseudoNotForRequests),
            (
                vec![indexed(31), literal(b":protocol", b"x")],
                PseudoAfterField,
            ),
            (vec![literal(b"X-Upper", b"1")], BadName),
            (vec![literal(b"x:y", b"1")], BadName),
            (vec![literal(b"", b"1")], BadName),
            (vec![literal(b":", b"1")], BadName),
        ] {
            assert_eq!(check_request(&get(&lines)), Err(why), "{lines:?}");
        }
        // Missing and empty ones.
        let no_path = section(&[indexed(17), indexed(23), named(0, b"a")]);
        assert_eq!(check_request(&no_path), Err(MissingPseudo));
        let no_method = section(&[indexed(23), named(1, b"/")]);
        assert_eq!(check_request(&no_method), Err(MissingPseudo));
        let empty = section(&[indexed(17), indexed(23), named(1, b"")]);
        assert_eq!(check_request(&empty), Err(EmptyPath));
        let connect = section(&[indexed(15), named(0, b"a:1"), named(1, b"/")]);
        assert_eq!(check_request(&connect), Err(ConnectWithPath));
        // Controls and spaces in a pseudo-header's value.
        for path in [&b"/a\r\nb"[..], b"/a\0", b"/a b", b"/a\x7f"] {
            let s = section(&[indexed(17), indexed(23), named(1, path)]);
            assert_eq!(check_request(&s), Err(BadPseudoValue), "{path:?}");
        }
        // Huffman-coded: "/a\r\nb".
        let mut v = vec![0x50 | 1, 0x80 | 10];
        v.extend_from_slice(&[0x60, 0x7f, 0xff, 0xff, 0xfe, 0xff, 0xff, 0xff, 0xf9, 0x1f]);
        let s = section(&[indexed(17), indexed(23), v]);
        assert_eq!(check_request(&s), Err(BadPseudoValue));
    }

    #[test]
    fn encodings_that_do_not_parse_or_need_a_dynamic_table_are_malformed() {
        use Malformed::*;
        // A Required Insert Count.
        let mut s = get(&[]);
        s[0] = 1;
        assert_eq!(check_request(&s), Err(DynamicTable));
        // A dynamic index, a post-base one, a name past the table.
        assert_eq!(check_request(&get(&[vec![0x80 | 3]])), Err(DynamicTable));
        assert_eq!(check_request(&get(&[vec![0x10]])), Err(DynamicTable));
        assert_eq!(
            check_request(&get(&[vec![0xc0 | 0x3f, 100]])),
            Err(Encoding)
        );
        // A string past the end; an integer that does not end.
        let mut cut = get(&[literal(b"x-a", b"bcd")]);
        cut.pop();
        assert_eq!(check_request(&cut), Err(Encoding));
        assert_eq!(
            check_request(&get(&[vec![0xff, 0xff, 0xff, 0xff, 0xff, 0xff]])),
            Err(Encoding)
        );
        assert_eq!(
            check_request(&get(&[vec![
                0xff, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80
            ]])),
            Err(Encoding)
        );
        assert_eq!(check_request(&[]), Err(Encoding));
    }
}
