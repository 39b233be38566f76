//! Unit tests of packed heads: round trips of usual, odd and random
//! heads, names, lengths, dates and shared values.

use super::*;

fn text(p: Packed<'_>, status: u16) -> Vec<u8> {
    let mut out = Vec::new();
    p.write(status, &mut out);
    out
}

/// The fields, name and value, as bytes.
fn fields_of(p: Packed<'_>) -> Vec<(Vec<u8>, Vec<u8>)> {
    p.fields()
        .map(|(n, v)| (n.to_vec(), v.bytes().to_vec()))
        .collect()
}

fn field(name: &str, value: &str) -> (Vec<u8>, Vec<u8>) {
    (name.as_bytes().to_vec(), value.as_bytes().to_vec())
}

const NGINX: &[u8] = b"HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\n\
    Date: Thu, 26 Nov 2026 02:11:56 GMT\r\nContent-Type: text/plain\r\n\
    Cache-Control: max-age=3600\r\n";

#[test]
fn a_usual_head_packs_small_and_comes_back_as_it_was() {
    let packed = pack(NGINX, 200);
    assert_eq!(packed[0], USUAL);
    // One byte of form; the date a byte of name, two of mark and four
    // of seconds; the others a byte of name and at most one of length
    // and their bytes (another test may have shared them already).
    let values = "nginx/1.22.1text/plainmax-age=3600".len();
    assert!(packed.len() <= 1 + 7 + 3 * 2 + values, "{}", packed.len());
    // Seen twice, the three others are shared: three bytes each.
    let again = pack(NGINX, 200);
    assert_eq!(again.len(), 1 + 7 + 3 * 3);
    for packed in [packed, again] {
        let p = Packed(&packed);
        assert_eq!(text(p, 200), NGINX);
        assert_eq!(p.reason(200), b"OK");
        let fields = fields_of(p);
        assert_eq!(fields[0], field("Server", "nginx/1.22.1"));
        assert_eq!(fields[1], field("Date", "Thu, 26 Nov 2026 02:11:56 GMT"));
        assert_eq!(fields[3], field("Cache-Control", "max-age=3600"));
        assert_eq!(fields.len(), 4);
        let mut lines = Vec::new();
        p.write_fields(&mut lines);
        assert_eq!(lines, &NGINX[17..]);
    }
}

#[test]
fn names_own_lines_and_long_values_come_back_as_they_were() {
    let long = "v".repeat(20_000);
    let heads: Vec<(u16, Vec<u8>)> = vec![
        (
            200,
            b"HTTP/1.1 200 Fine\r\nX-Own: 1\r\ncontent-type: a\r\n".to_vec(),
        ),
        (
            404,
            b"HTTP/1.1 404 Not Found\r\nX-Empty: \r\nxkey: a b\r\n".to_vec(),
        ),
        (200, b"HTTP/1.1 200 OK\r\n".to_vec()),
        (299, b"HTTP/1.1 299 \r\nA: b\r\n".to_vec()),
        (
            1200,
            format!("HTTP/1.1 200 OK\r\nX-Long: {long}\r\nETag: \"x\"\r\n").into_bytes(),
        ),
    ];
    for (status, head) in heads {
        let packed = pack(&head, status);
        assert_ne!(packed[0], TEXT, "{}", String::from_utf8_lossy(&head));
        let p = Packed(&packed);
        assert_eq!(text(p, status), head);
        let line_end = head.iter().position(|&b| b == b'\n').unwrap() + 1;
        let mut status_line = Vec::new();
        p.write_status_line(status, &mut status_line);
        assert_eq!(status_line, &head[..line_end]);
        assert!(head[9 + 4..].starts_with(p.reason(status)));
    }
    let p = pack(b"HTTP/1.1 200 Fine\r\nX-Own: 1\r\n", 200);
    assert_eq!(Packed(&p).reason(200), b"Fine");
    let long_value = format!("HTTP/1.1 200 OK\r\nX-Long: {long}\r\n");
    let p = pack(long_value.as_bytes(), 200);
    let (_, v) = Packed(&p).fields().next().unwrap();
    assert_eq!(v.bytes().len(), 20_000);
}

#[test]
fn a_head_that_would_not_come_back_is_kept_as_text() {
    let name = "N".repeat(300);
    let odd: Vec<Vec<u8>> = vec![
        b"HTTP/1.1 200 OK\r\nA:b\r\n".to_vec(),
        b"HTTP/1.1 200 OK\r\nA:  b\r\n".to_vec(),
        b"HTTP/1.1 200 OK\r\nA: b\n".to_vec(),
        b"HTTP/1.1 200 OK\r\nno colon\r\n".to_vec(),
        b"HTTP/1.1 200 OK\r\nA: b".to_vec(),
        b"HTTP/1.1 200 OK\r\n: b\r\n".to_vec(),
        format!("HTTP/1.1 200 OK\r\n{name}: b\r\n").into_bytes(),
    ];
    for head in odd {
        let packed = pack(&head, 200);
        assert_eq!(packed[0], TEXT);
        let p = Packed(&packed);
        assert_eq!(text(p, 200), head);
        assert_eq!(p.reason(200), b"OK");
    }
    let p = pack(b"HTTP/1.1 200 OK\r\nA:  b\r\nno colon\r\nC:d\r\n", 200);
    assert_eq!(fields_of(Packed(&p)), [field("A", "b"), field("C", "d")]);
    assert!(
        pack(b"", 200).is_empty(),
        "a marker's head allocates nothing"
    );
    let empty = Packed(&[]);
    assert_eq!(text(empty, 200), b"");
    assert_eq!(empty.reason(200), b"");
    assert_eq!(empty.fields().count(), 0);
}

#[test]
fn every_name_in_the_table_packs_to_one_byte_as_written() {
    for name in NAMES
        .iter()
        .map(|n| n.to_string())
        .chain(NAMES.iter().map(|n| n.to_ascii_lowercase()))
    {
        let head = format!("HTTP/1.1 200 OK\r\n{name}: v\r\n");
        let packed = pack(head.as_bytes(), 200);
        assert_eq!(packed.len(), 1 + 1 + 1 + 1, "{name}");
        assert_eq!(text(Packed(&packed), 200), head.as_bytes());
    }
    // Another case is a name of its own, kept as written.
    let packed = pack(b"HTTP/1.1 200 OK\r\nSERVER: v\r\n", 200);
    assert_eq!(packed.len(), 1 + 2 + 6 + 2);
    assert_eq!(fields_of(Packed(&packed)), [field("SERVER", "v")]);
}

/// Heads made of random lines (well-known names, names of their own,
/// odd spacing, stray bytes) come back byte for byte, whichever
/// form they are kept in, and their fields read as the text's do.
#[test]
fn random_heads_come_back_as_they_were() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    let pieces: &[&[u8]] = &[
        b"Server",
        b"content-type",
        b"X-A",
        b"",
        b" ",
        b"\t",
        b":",
        b"\r",
        b"\n",
        b"\r\n",
        b"v",
        b"a b",
        b"\x00\xff",
        b"ETag",
        b"\"e\"",
        b"xkey",
        b"Date",
        b"Thu, 26 Nov 2026 02:11:56 GMT",
        b"Sat, 26 Nov 2026 02:11:56 GMT",
    ];
    for _ in 0..5000 {
        let status = [200u16, 404, 599, 1200][next(4)];
        let mut head = match next(3) {
            0 => b"HTTP/1.1 200 OK\r\n".to_vec(),
            1 => b"HTTP/1.1 404 Not Found\r\n".to_vec(),
            _ => b"HTTP/1.0 599 x\r\n".to_vec(),
        };
        for _ in 0..next(6) {
            match next(4) {
                0 => {
                    for _ in 0..next(5) {
                        head.extend_from_slice(pieces[next(pieces.len())]);
                    }
                }
                _ => {
                    head.extend_from_slice(pieces[next(pieces.len())]);
                    head.extend_from_slice(b": ");
                    head.extend_from_slice(&b"v".repeat(next(300)));
                    head.extend_from_slice(b"\r\n");
                }
            }
        }
        let packed = pack(&head, status);
        let p = Packed(&packed);
        assert_eq!(
            text(p, status),
            head,
            "{:?}",
            String::from_utf8_lossy(&head)
        );
        let as_text = Fields {
            rest: &head[head.iter().position(|&b| b == b'\n').unwrap() + 1..],
            packed: false,
        };
        assert!(
            p.fields().eq(as_text),
            "{:?}",
            String::from_utf8_lossy(&head)
        );
    }
}

#[test]
fn dates_are_kept_as_seconds_only_when_they_come_back_as_they_were() {
    let head = b"HTTP/1.1 200 OK\r\nLast-Modified: Sun, 06 Nov 1994 08:49:37 GMT\r\n\
        X-Own-Date: Tue, 29 Feb 2000 00:00:00 GMT\r\n\
        Expires: Sat, 06 Nov 1994 08:49:37 GMT\r\n\
        Date: Thu, 01 Jan 1970 00:00:00 GMT\r\n";
    let packed = pack(head, 200);
    let p = Packed(&packed);
    assert_eq!(text(p, 200), head);
    let kinds: Vec<bool> = p
        .fields()
        .map(|(_, v)| matches!(v, Value::Date(_)))
        .collect();
    // The wrong weekday is kept as it came.
    assert_eq!(kinds, [true, true, false, true]);
    let (_, first) = p.fields().next().unwrap();
    assert!(matches!(first, Value::Date(784_111_777)));
    assert_eq!(first.as_slice(), None);
    assert_eq!(&first.to_bytes()[..], b"Sun, 06 Nov 1994 08:49:37 GMT");
    assert_eq!(
        packed.len(),
        1 + 7 + (2 + 10 + 6) + (1 + 1 + 29) + 7,
        "dates in 6 bytes after their names"
    );
}

#[test]
fn values_of_their_own_are_never_shared_however_often_seen() {
    let head = b"HTTP/1.1 200 OK\r\nETag: \"same-etag-value\"\r\n\
        Content-Length: 1234\r\nX-Not-Numbered: repeated value\r\n\
        content-type: text/x-shared-lower\r\n";
    let sizes: Vec<usize> = (0..3).map(|_| pack(head, 200).len()).collect();
    // Only the numbered name of shareable values shrank, once seen twice.
    let inline = "text/x-shared-lower".len() + 1;
    assert_eq!(sizes[1], sizes[2]);
    assert_eq!(sizes[0] - sizes[1], inline - 2, "{sizes:?}");
    let packed = pack(head, 200);
    assert_eq!(text(Packed(&packed), 200), head);
    assert_eq!(
        fields_of(Packed(&packed))[3],
        field("content-type", "text/x-shared-lower")
    );
}

#[test]
fn lengths_round_trip() {
    for n in [0, 1, 127, 128, 16_383, 16_384, 1 << 21, (1 << 28) + 5] {
        let mut out = Vec::new();
        push_len(&mut out, n);
        out.push(0xAB);
        assert_eq!(read_len(&out), Some((n, &[0xAB][..])));
    }
    assert_eq!(read_len(&[0x80, 0x80]), None);
}

#[test]
fn kept_field_lines_are_used_only_for_the_very_same_bytes() {
    let a = pack(b"HTTP/1.1 200 OK\r\nX-One: aaaa\r\nAge: 1\r\n", 200).to_vec();
    let b = pack(b"HTTP/1.1 200 OK\r\nX-One: bbbb\r\nAge: 2\r\n", 200).to_vec();
    assert_eq!(a.len(), b.len(), "the same length, other bytes");
    // One place in memory holds one head, then the other, then the
    // first again: each is written as itself, kept or not.
    let mut place = a.clone();
    let at = place.as_ptr();
    for (head, lines) in [
        (&a, &b"X-One: aaaa\r\nAge: 1\r\n"[..]),
        (&a, b"X-One: aaaa\r\nAge: 1\r\n"),
        (&b, b"X-One: bbbb\r\nAge: 2\r\n"),
        (&b, b"X-One: bbbb\r\nAge: 2\r\n"),
        (&a, b"X-One: aaaa\r\nAge: 1\r\n"),
    ] {
        place.copy_from_slice(head);
        let mut out = b"before ".to_vec();
        Packed(&place).write_fields(&mut out);
        assert_eq!(&out[7..], lines);
        assert_eq!(place.as_ptr(), at);
    }
    // Heads too long to keep are written all the same.
    let long = format!("HTTP/1.1 200 OK\r\nX-Long: {}\r\n", "l".repeat(3000));
    let packed = pack(long.as_bytes(), 200);
    for _ in 0..2 {
        let mut out = Vec::new();
        Packed(&packed).write_fields(&mut out);
        assert_eq!(out, &long.as_bytes()[17..]);
    }
}

#[test]
fn fields_written_for_an_edit_come_with_where_each_line_ends() {
    let long = format!(
        "HTTP/1.1 200 OK\r\nX-Long: {}\r\nServer: a\r\n",
        "v".repeat(5000)
    );
    let odd = b"HTTP/1.1 200 OK\r\nServer:a\r\nX-Two: b\r\n";
    let heads = [pack(NGINX, 200), pack(long.as_bytes(), 200), pack(odd, 200)];
    assert_eq!(heads[2][0], TEXT);
    // Each head twice: written and kept, then copied from what was kept.
    let lines = [4, 2, 2];
    for (head, lines) in heads.iter().zip(lines).chain(heads.iter().zip(lines)) {
        let p = Packed(head);
        let mut plain = b"before".to_vec();
        p.write_fields(&mut plain);
        let mut out = b"before".to_vec();
        let (start, ends) = p.write_fields_then(&mut out, |_, start, ends| (start, ends.to_vec()));
        assert_eq!(out, plain);
        assert_eq!(start, 6);
        let lf: Vec<u32> = (start..out.len())
            .filter(|&i| out[i] == b'\n')
            .map(|i| (i + 1 - start) as u32)
            .collect();
        assert_eq!(ends, lf);
        assert_eq!(ends.len(), lines);
    }
}
