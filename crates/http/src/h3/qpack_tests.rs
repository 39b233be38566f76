use super::*;

/// A field line for a static entry.
fn indexed(index: u8) -> Vec<u8> {
    assert!(index < 63);
    vec![0xc0 | index]
}

fn string(flag_bits: u32, s: &[u8]) -> Vec<u8> {
    let mut out = BytesMut::new();
    put_int(&mut out, 0, flag_bits, s.len() as u64);
    out.extend_from_slice(s);
    out.to_vec()
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

fn check(block: &[u8]) -> Result<(), Malformed> {
    decode_request(block, 16384).map(drop)
}

fn head(block: &[u8]) -> String {
    String::from_utf8(decode_request(block, 16384).unwrap().head.to_vec()).unwrap()
}

#[test]
fn requests_become_http1_heads() {
    assert_eq!(
        head(&get(&[])),
        "GET /x HTTP/1.1\r\nhost: a.example\r\n\r\n"
    );
    // Cookies joined, a static entry with its value, a Host kept where
    // the request had one (the same as :authority).
    let h = head(&get(&[
        literal(b"cookie", b"a=1"),
        indexed(31),
        named(5, b"b=2"),
        literal(b"host", b"A.example"),
    ]));
    assert_eq!(
        h,
        "GET /x HTTP/1.1\r\naccept-encoding: gzip, deflate, br\r\nhost: A.example\r\n\
         cookie: a=1; b=2\r\n\r\n"
    );
    // A POST without a length: its body goes in chunks.
    let post = section(&[indexed(20), indexed(23), named(0, b"a"), named(1, b"/p")]);
    let r = decode_request(&post, 16384).unwrap();
    assert!(r.chunk_body && !r.safe());
    assert!(String::from_utf8_lossy(&r.head).ends_with("transfer-encoding: chunked\r\n\r\n"));
    let sized = section(&[
        indexed(20),
        indexed(23),
        named(0, b"a"),
        named(1, b"/p"),
        named(4, b"5"),
    ]);
    let r = decode_request(&sized, 16384).unwrap();
    assert_eq!((r.chunk_body, r.content_length), (false, Some(5)));
    assert!(decode_request(&get(&[]), 16384).unwrap().safe());
}

#[test]
fn well_formed_requests_pass() {
    assert_eq!(
        check(&get(&[indexed(31), literal(b"x-a", b"b\tc")])),
        Ok(())
    );
    // A CONNECT with :authority only, and an extended one.
    let connect = section(&[indexed(15), named(0, b"a.example:443")]);
    assert_eq!(check(&connect), Ok(()));
    let extended = section(&[
        indexed(15),
        literal(b":protocol", b"websocket"),
        indexed(23),
        named(1, b"/chat"),
        named(0, b"a.example"),
    ]);
    assert_eq!(check(&extended), Ok(()));
    // OPTIONS *.
    let star = section(&[indexed(19), indexed(23), named(0, b"a"), named(1, b"*")]);
    assert!(head(&star).starts_with("OPTIONS * HTTP/1.1\r\nhost: a\r\n"));
    // A Huffman-coded literal name: ":path".
    let mut huff = vec![0x20 | 0x08 | 4];
    huff.extend_from_slice(&[0xb9, 0x58, 0xd3, 0x3f]);
    huff.extend(string(7, b"/h"));
    let s = section(&[indexed(17), indexed(23), named(0, b"a"), huff.clone()]);
    assert_eq!(head(&s), "GET /h HTTP/1.1\r\nhost: a\r\n\r\n");
    let s = section(&[indexed(17), indexed(23), named(1, b"/x"), huff]);
    assert_eq!(check(&s), Err(Malformed::PseudoTwice));
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
        (vec![literal(b"x y", b"1")], BadName),
        (vec![literal(b"", b"1")], BadName),
        (vec![literal(b":", b"1")], BadName),
        (vec![literal(b"x-a", b"1\r\nx-b: 2")], BadValue),
        (vec![literal(b"x-a", b"1\n")], BadValue),
        (vec![literal(b"x-a", b"\x001")], BadValue),
        (vec![literal(b"connection", b"close")], ConnectionSpecific),
        (
            vec![literal(b"transfer-encoding", b"chunked")],
            ConnectionSpecific,
        ),
        (vec![literal(b"upgrade", b"h2c")], ConnectionSpecific),
        (vec![literal(b"keep-alive", b"5")], ConnectionSpecific),
        (vec![literal(b"proxy-connection", b"x")], ConnectionSpecific),
        (vec![literal(b"te", b"gzip")], ConnectionSpecific),
        (vec![literal(b"host", b"b.example")], HostNotAuthority),
        (vec![named(4, b"3"), named(4, b"4")], BadContentLength),
        (vec![named(4, b"-1")], BadContentLength),
        (vec![named(4, b"1, 1")], BadContentLength),
    ] {
        assert_eq!(check(&get(&lines)), Err(why), "{lines:?}");
    }
    assert_eq!(check(&get(&[literal(b"te", b"trailers")])), Ok(()));
    assert_eq!(check(&get(&[named(4, b"3"), named(4, b"3")])), Ok(()));
    // Missing and empty ones.
    let no_path = section(&[indexed(17), indexed(23), named(0, b"a")]);
    assert_eq!(check(&no_path), Err(MissingPseudo));
    let no_method = section(&[indexed(23), named(1, b"/")]);
    assert_eq!(check(&no_method), Err(MissingPseudo));
    let empty = section(&[indexed(17), indexed(23), named(1, b"")]);
    assert_eq!(check(&empty), Err(EmptyPath));
    let no_authority = section(&[indexed(17), indexed(23), indexed(0), named(1, b"/")]);
    assert_eq!(check(&no_authority), Err(BadPseudoValue));
    let connect = section(&[indexed(15), named(0, b"a:1"), named(1, b"/")]);
    assert_eq!(check(&connect), Err(ConnectWithPath));
    // Controls and spaces in a pseudo-header's value, a target that is
    // not origin-form.
    for path in [
        &b"/a\r\nb"[..],
        b"/a\0",
        b"/a b",
        b"/a\x7f",
        b"http://b.example/",
        b"x",
    ] {
        let s = section(&[indexed(17), indexed(23), named(1, path)]);
        assert_eq!(check(&s), Err(BadPseudoValue), "{path:?}");
    }
    // Huffman-coded: "/a\r\nb".
    let mut v = vec![0x50 | 1, 0x80 | 10];
    v.extend_from_slice(&[0x60, 0x7f, 0xff, 0xff, 0xfe, 0xff, 0xff, 0xff, 0xf9, 0x1f]);
    let s = section(&[indexed(17), indexed(23), v]);
    assert_eq!(check(&s), Err(BadPseudoValue));
}

#[test]
fn encodings_that_do_not_parse_or_need_a_dynamic_table_are_malformed() {
    use Malformed::*;
    // A Required Insert Count.
    let mut s = get(&[]);
    s[0] = 1;
    assert_eq!(check(&s), Err(DynamicTable));
    // A dynamic index, a post-base one, an index past the table.
    assert_eq!(check(&get(&[vec![0x80 | 3]])), Err(DynamicTable));
    assert_eq!(check(&get(&[vec![0x10]])), Err(DynamicTable));
    assert_eq!(check(&get(&[vec![0xc0 | 0x3f, 100]])), Err(Encoding));
    // A string past the end; integers that do not end, or overflow.
    let mut cut = get(&[literal(b"x-a", b"bcd")]);
    cut.pop();
    assert_eq!(check(&cut), Err(Encoding));
    assert_eq!(
        check(&get(&[vec![0xff, 0xff, 0xff, 0xff, 0xff, 0xff]])),
        Err(Encoding)
    );
    let mut long = vec![0xff];
    long.extend([0x80; 10]);
    assert_eq!(check(&get(&[long])), Err(Encoding));
    assert_eq!(check(&[]), Err(Encoding));
    // Past the limit, decoded.
    let big = get(&[literal(b"x-a", &[b'a'; 100])]);
    assert_eq!(decode_request(&big, 120).map(drop), Err(TooLarge));
}

#[test]
fn trailers_have_no_pseudo_headers() {
    let t = section(&[literal(b"grpc-status", b"0")]);
    assert_eq!(
        decode_trailers(&t, 1024).unwrap(),
        vec![(b"grpc-status".to_vec(), b"0".to_vec())]
    );
    let bad = section(&[literal(b":path", b"/")]);
    assert_eq!(
        decode_trailers(&bad, 1024),
        Err(Malformed::PseudoNotForRequests)
    );
}

/// The fields of a HEADERS frame this module encoded, decoded again.
fn fields_of(frame: &[u8]) -> Vec<(String, String)> {
    let (kind, a) = super::super::frames::varint(frame).unwrap();
    let (len, b) = super::super::frames::varint(&frame[a..]).unwrap();
    assert_eq!(kind, super::super::frames::HEADERS);
    assert_eq!(frame.len(), a + b + len as usize);
    let mut out = Vec::new();
    read_section(&frame[a + b..], u64::MAX, |n, v| {
        out.push((
            String::from_utf8(n.to_vec()).unwrap(),
            String::from_utf8(v.to_vec()).unwrap(),
        ));
        Ok(())
    })
    .unwrap();
    out
}

#[test]
fn responses_are_encoded_with_the_static_table_and_literals() {
    let frame = encode_response(
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: keep-alive\r\nAccept-Ranges: bytes\r\n\
          X-Varnish: 3\r\nTransfer-Encoding: chunked\r\nContent-Type: text/html\r\n\r\n",
    )
    .unwrap();
    let pairs = |v: &[(&str, &str)]| {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        fields_of(&frame),
        pairs(&[
            (":status", "200"),
            ("content-length", "5"),
            ("accept-ranges", "bytes"),
            ("x-varnish", "3"),
            ("content-type", "text/html"),
        ])
    );
    // :status 200 and accept-ranges: bytes are whole static entries.
    assert_eq!(frame[a_block(&frame) + 2], 0xc0 | 25);
    // A status the table lacks.
    let frame = encode_response(b"HTTP/1.1 418 Teapot\r\n\r\n").unwrap();
    assert_eq!(fields_of(&frame), pairs(&[(":status", "418")]));
    assert_eq!(fields_of(&encode_status(425)), pairs(&[(":status", "425")]));
    assert!(encode_response(b"HTTP/1.1 200 OK\r\n").is_none());
    // Trailers: connection-specific ones dropped; none left, no frame.
    let t = encode_trailers(&[
        (
            bytes::Bytes::from_static(b"Grpc-Status"),
            bytes::Bytes::from_static(b"0"),
        ),
        (
            bytes::Bytes::from_static(b"connection"),
            bytes::Bytes::from_static(b"x"),
        ),
    ])
    .unwrap();
    assert_eq!(fields_of(&t), pairs(&[("grpc-status", "0")]));
    assert!(encode_trailers(&[(
        bytes::Bytes::from_static(b"te"),
        bytes::Bytes::from_static(b"x")
    )])
    .is_some());
    assert!(encode_trailers(&[(
        bytes::Bytes::from_static(b"upgrade"),
        bytes::Bytes::from_static(b"x")
    )])
    .is_none());
}

/// Where a HEADERS frame's field section starts.
fn a_block(frame: &[u8]) -> usize {
    let (_, a) = super::super::frames::varint(frame).unwrap();
    let (_, b) = super::super::frames::varint(&frame[a..]).unwrap();
    a + b
}

#[test]
fn every_static_entry_is_found_by_its_length() {
    for (i, (name, _)) in STATIC.iter().enumerate() {
        assert!(static_by_length(name.len()).contains(&(i as u8)), "{name}");
    }
    // Encoded, each whole entry is its index.
    for (i, (name, value)) in STATIC.iter().enumerate() {
        let mut out = BytesMut::new();
        put_field(&mut out, name.as_bytes(), value.as_bytes());
        let mut r = Reader { buf: &out, at: 0 };
        assert_eq!(out[0] & 0xc0, 0xc0, "{name}: {value}");
        assert_eq!(r.int(6), Ok(i as u64), "{name}: {value}");
    }
}

#[test]
fn the_static_table_is_the_rfcs() {
    assert_eq!(STATIC.len(), 99);
    assert_eq!(STATIC[0], (":authority", ""));
    assert_eq!(STATIC[17], (":method", "GET"));
    assert_eq!(STATIC[25], (":status", "200"));
    assert_eq!(STATIC[31], ("accept-encoding", "gzip, deflate, br"));
    assert_eq!(STATIC[63], (":status", "100"));
    assert_eq!(STATIC[71], (":status", "500"));
    assert_eq!(STATIC[95], ("user-agent", ""));
    assert_eq!(STATIC[98], ("x-frame-options", "sameorigin"));
}
