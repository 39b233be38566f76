//! The HTTP/3 counterpart of the hostile HTTP/2 requests: field sections
//! encoded here by hand (QPACK's static table and literals, RFC 9204),
//! since a client library will not send what is malformed. Each one is
//! refused (its stream reset, or a 400), none reaches the origin, and
//! the connection goes on serving.

use crate::http3::{client_runtime, raw_connection};
use crate::tls::setup_with;
use std::time::Duration;

/// A QPACK string literal with an `n`-bit length prefix (no Huffman).
fn string(n: u32, s: &[u8]) -> Vec<u8> {
    let max = (1usize << n) - 1;
    let mut out = Vec::new();
    if s.len() < max {
        out.push(s.len() as u8);
    } else {
        out.push(max as u8);
        let mut rest = s.len() - max;
        while rest >= 128 {
            out.push((rest % 128) as u8 | 0x80);
            rest /= 128;
        }
        out.push(rest as u8);
    }
    out.extend_from_slice(s);
    out
}

/// A field line naming a static table entry (name and value).
fn indexed(index: u8) -> Vec<u8> {
    vec![0xc0 | index]
}

/// A field line with a static entry's name and a literal value.
fn named(index: u8, value: &[u8]) -> Vec<u8> {
    let mut out = vec![0x50 | index];
    out.extend(string(7, value));
    out
}

/// A field line with a literal name and value.
fn literal(name: &[u8], value: &[u8]) -> Vec<u8> {
    let mut out = string(3, name);
    out[0] |= 0x20;
    out.extend(string(7, value));
    out
}

/// The static entries used below (RFC 9204 Appendix A).
const AUTHORITY: u8 = 0;
const PATH: u8 = 1;
const GET: u8 = 17;
const POST: u8 = 20;
const HTTPS: u8 = 23;
const STATUS_200: u8 = 25;

/// A request stream's bytes: a HEADERS frame of `lines`, then DATA.
fn request(lines: &[Vec<u8>], body: &[u8]) -> Vec<u8> {
    let mut block = vec![0, 0];
    for l in lines {
        block.extend_from_slice(l);
    }
    let mut out = vec![0x01];
    out.extend(varint(block.len()));
    out.extend(block);
    if !body.is_empty() {
        out.push(0x00);
        out.extend(varint(body.len()));
        out.extend_from_slice(body);
    }
    out
}

fn varint(n: usize) -> Vec<u8> {
    assert!(n < 16384);
    if n < 64 {
        vec![n as u8]
    } else {
        vec![0x40 | (n >> 8) as u8, n as u8]
    }
}

/// GET https://a.example`path`, then `more` fields.
fn get(path: &str, more: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    let mut lines = vec![
        indexed(GET),
        indexed(HTTPS),
        named(AUTHORITY, b"a.example"),
        named(PATH, path.as_bytes()),
    ];
    lines.extend(more);
    lines
}

/// What came back on a request stream.
#[derive(Debug, PartialEq)]
enum Answer {
    /// The stream was reset (or stopped) before a response.
    Reset,
    /// A response with this status (as the server's QPACK put it).
    Status(u16),
}

/// The status in a response's first HEADERS frame: h3 encodes it as a
/// static entry, or a literal value under `:status`'s name.
fn status_of(resp: &[u8]) -> Option<u16> {
    let (&kind, rest) = resp.split_first()?;
    if kind != 0x01 {
        return None;
    }
    let len_size = 1usize << (rest[0] >> 6);
    let block = &rest[len_size..];
    let line = &block[2..];
    let by_index = |i: usize| match i {
        24 => Some(103),
        25 => Some(200),
        26 => Some(304),
        27 => Some(404),
        28 => Some(503),
        63..=71 => Some([100, 204, 206, 302, 400, 403, 421, 425, 500][i - 63]),
        _ => None,
    };
    if line[0] & 0xc0 == 0xc0 {
        let index = if line[0] & 0x3f == 0x3f {
            63 + line[1] as usize
        } else {
            (line[0] & 0x3f) as usize
        };
        return by_index(index);
    }
    // A literal value under a static name (24, :status): 0x5f 0x09.
    if line.starts_with(&[0x5f, 0x09]) {
        let n = line[2] as usize & 0x7f;
        return std::str::from_utf8(&line[3..3 + n]).ok()?.parse().ok();
    }
    None
}

#[test]
fn hand_encoded_malformed_requests_are_refused_and_reach_no_origin() {
    let vcl = "sub vcl_recv { return (pass); }\n";
    let (pki, origin, lq) = setup_with("h3raw", "quic = on\n", Some(vcl));
    let addr = lq.listen("tls0");
    // Each case: its name, its stream's bytes; their paths start /bad.
    let huffman_path_name = {
        // ":path" as a Huffman-coded literal name, then "/bad-huffman".
        let mut line = vec![0x20 | 0x08 | 4, 0xb9, 0x58, 0xd3, 0x3f];
        line.extend(string(7, b"/bad-huffman"));
        line
    };
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "CR LF in a value",
            request(
                &get("/bad-crlf", vec![literal(b"x-a", b"b\r\nx-injected: 1")]),
                b"",
            ),
        ),
        (
            "LF in a value",
            request(&get("/bad-lf", vec![literal(b"x-a", b"b\nc")]), b""),
        ),
        (
            "NUL in a value",
            request(&get("/bad-nul", vec![literal(b"x-a", b"b\0c")]), b""),
        ),
        (
            "CR LF in :path",
            request(&get("/bad-path\r\nx: y", vec![]), b""),
        ),
        (
            "a space in :path",
            request(&get("/bad-space HTTP/1.1", vec![]), b""),
        ),
        (
            "a space in :method",
            request(
                &[
                    literal(b":method", b"GET /bad-method"),
                    indexed(HTTPS),
                    named(AUTHORITY, b"a.example"),
                    named(PATH, b"/bad-m"),
                ],
                b"",
            ),
        ),
        (
            "an upper-case name",
            request(&get("/bad-upper", vec![literal(b"X-Upper", b"1")]), b""),
        ),
        (
            "a space in a name",
            request(&get("/bad-name", vec![literal(b"x a", b"1")]), b""),
        ),
        (
            "an empty name",
            request(&get("/bad-empty-name", vec![literal(b"", b"1")]), b""),
        ),
        (
            "a second :path",
            request(&get("/ok", vec![named(PATH, b"/bad-second")]), b""),
        ),
        (
            "a second :path, Huffman-coded",
            request(&get("/ok", vec![huffman_path_name]), b""),
        ),
        (
            "a second :method",
            request(&get("/bad-two-methods", vec![indexed(POST)]), b""),
        ),
        (
            "a pseudo-header after a field",
            request(
                &[
                    indexed(GET),
                    indexed(HTTPS),
                    literal(b"x-a", b"1"),
                    named(AUTHORITY, b"a.example"),
                    named(PATH, b"/bad-late"),
                ],
                b"",
            ),
        ),
        (
            "a :status in a request",
            request(&get("/bad-status", vec![indexed(STATUS_200)]), b""),
        ),
        (
            "an unknown pseudo-header",
            request(&get("/bad-pseudo", vec![literal(b":foo", b"x")]), b""),
        ),
        (
            "no :path",
            request(
                &[indexed(GET), indexed(HTTPS), named(AUTHORITY, b"a.example")],
                b"",
            ),
        ),
        (
            "no :method",
            request(
                &[
                    indexed(HTTPS),
                    named(AUTHORITY, b"a.example"),
                    named(PATH, b"/bad-nomethod"),
                ],
                b"",
            ),
        ),
        (
            "an empty :path",
            request(
                &[
                    indexed(GET),
                    indexed(HTTPS),
                    named(AUTHORITY, b"a.example"),
                    named(PATH, b""),
                ],
                b"",
            ),
        ),
        (
            "a dynamic table reference",
            request(&get("/bad-dynamic", vec![vec![0x80]]), b""),
        ),
        (
            "Transfer-Encoding",
            request(
                &get("/bad-te", vec![literal(b"transfer-encoding", b"chunked")]),
                b"0\r\n\r\nGET /bad-smuggled HTTP/1.1\r\n\r\n",
            ),
        ),
        (
            "Connection",
            request(
                &get("/bad-conn", vec![literal(b"connection", b"close")]),
                b"",
            ),
        ),
        (
            "a body past its Content-Length",
            request(
                &[
                    indexed(POST),
                    indexed(HTTPS),
                    named(AUTHORITY, b"a.example"),
                    named(PATH, b"/bad-long"),
                    literal(b"content-length", b"3"),
                ],
                b"abcdefgh",
            ),
        ),
        (
            "a Host that is not the :authority",
            request(&get("/bad-host", vec![literal(b"host", b"b.example")]), b""),
        ),
    ];
    let rt = client_runtime();
    let (_endpoint, conn) = raw_connection(&rt, &pki, addr);
    let answers = rt.block_on(async {
        let ask = |bytes: Vec<u8>| {
            let conn = conn.clone();
            async move {
                let (mut send, mut recv) = conn.open_bi().await.unwrap();
                let _ = send.write_all(&bytes).await;
                let _ = send.finish();
                let read = tokio::time::timeout(Duration::from_secs(10), recv.read_to_end(1 << 20));
                match read.await.expect("an answer within 10 s") {
                    Err(_) => Answer::Reset,
                    Ok(resp) => Answer::Status(status_of(&resp).unwrap_or(0)),
                }
            }
        };
        // Well-formed, by the same encoder: a 200.
        let control = ask(request(
            &get("/control", vec![literal(b"x-a", b"b\tc")]),
            b"",
        ))
        .await;
        let mut answers = vec![("well-formed", control)];
        for (name, bytes) in cases {
            answers.push((name, ask(bytes).await));
        }
        // The connection still serves.
        answers.push(("after", ask(request(&get("/after", vec![]), b"")).await));
        answers
    });
    assert_eq!(answers[0].1, Answer::Status(200), "{answers:?}");
    assert_eq!(
        answers.last().unwrap().1,
        Answer::Status(200),
        "{answers:?}"
    );
    for (name, answer) in &answers[1..answers.len() - 1] {
        assert!(
            matches!(answer, Answer::Reset | Answer::Status(400)),
            "{name}: {answer:?}"
        );
    }
    let seen: Vec<String> = origin.seen().into_iter().map(|s| s.url).collect();
    assert_eq!(
        seen,
        ["/control", "/after"],
        "only the well-formed ones reach the origin"
    );
}

/// The error code a connection was closed with by the server.
async fn closed_with(conn: &quinn::Connection) -> u64 {
    let closed = tokio::time::timeout(Duration::from_secs(10), conn.closed());
    match closed.await.expect("closed within 10 s") {
        quinn::ConnectionError::ApplicationClosed(c) => c.error_code.into_inner(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn protocol_errors_close_the_connection_with_the_code_http3_names() {
    let (pki, origin, lq) = setup_with("h3proto", "quic = on\n", None);
    let addr = lq.listen("tls0");
    let rt = client_runtime();
    let settings = [0x00, 0x04, 0x00];
    // (name, unidirectional streams each with its bytes (None: a request
    // stream of the bytes), whether to finish them, the code).
    let cases: Vec<(&str, Vec<Vec<u8>>, bool, u64)> = vec![
        (
            "no SETTINGS first",
            vec![vec![0x00, 0x07, 0x01, 0x00]],
            false,
            0x10a,
        ),
        (
            "a second control stream",
            vec![settings.to_vec(), settings.to_vec()],
            false,
            0x103,
        ),
        ("a push stream", vec![vec![0x01, 0x00]], false, 0x103),
        (
            "an HTTP/2 setting",
            vec![vec![0x00, 0x04, 0x02, 0x02, 0x01]],
            false,
            0x109,
        ),
        (
            "a setting twice",
            vec![vec![0x00, 0x04, 0x04, 0x06, 0x01, 0x06, 0x02]],
            false,
            0x109,
        ),
        (
            "SETTINGS twice",
            vec![[&settings[..], &[0x04, 0x00]].concat()],
            false,
            0x105,
        ),
        (
            "DATA on the control stream",
            vec![[&settings[..], &[0x00, 0x01, 0x61]].concat()],
            false,
            0x105,
        ),
        (
            "the control stream ended",
            vec![settings.to_vec()],
            true,
            0x104,
        ),
        (
            "a QPACK insert",
            vec![vec![0x02, 0x3f, 0xe1, 0x1f, 0xc0 | 17, 0x01, 0x61]],
            false,
            0x201,
        ),
        (
            "a QPACK acknowledgement",
            vec![vec![0x03, 0x84]],
            false,
            0x202,
        ),
    ];
    for (name, streams, finish, code) in cases {
        let (_endpoint, conn) = raw_connection(&rt, &pki, addr);
        let got = rt.block_on(async {
            let mut keep = Vec::new();
            for bytes in streams {
                let mut s = conn.open_uni().await.unwrap();
                s.write_all(&bytes).await.unwrap();
                if finish {
                    s.finish().unwrap();
                }
                keep.push(s);
            }
            closed_with(&conn).await
        });
        assert_eq!(got, code, "{name}");
    }
    // A request stream that begins with DATA.
    let (_endpoint, conn) = raw_connection(&rt, &pki, addr);
    let got = rt.block_on(async {
        let (mut send, _recv) = conn.open_bi().await.unwrap();
        send.write_all(&[0x00, 0x01, 0x61]).await.unwrap();
        closed_with(&conn).await
    });
    assert_eq!(got, 0x105, "DATA first");
    // A frame type HTTP/3 reserves (HTTP/2's PRIORITY), however long.
    let (_endpoint, conn) = raw_connection(&rt, &pki, addr);
    let got = rt.block_on(async {
        let (mut send, _recv) = conn.open_bi().await.unwrap();
        send.write_all(&[0x02, 0x80, 0x10, 0x00, 0x00])
            .await
            .unwrap();
        closed_with(&conn).await
    });
    assert_eq!(got, 0x105, "a reserved frame type");
    // A stream of a type no one defined, and GREASE frames, are let be:
    // the connection serves.
    let (_endpoint, conn) = raw_connection(&rt, &pki, addr);
    let answer = rt.block_on(async {
        let mut control = conn.open_uni().await.unwrap();
        control.write_all(&settings).await.unwrap();
        let mut unknown = conn.open_uni().await.unwrap();
        unknown.write_all(&[0x21, 1, 2, 3]).await.unwrap();
        let (mut send, mut recv) = conn.open_bi().await.unwrap();
        let mut bytes = vec![0x21, 0x02, 0xaa, 0xbb];
        bytes.extend(request(&get("/greased", vec![]), b""));
        send.write_all(&bytes).await.unwrap();
        send.finish().unwrap();
        let resp = recv.read_to_end(1 << 20).await.unwrap();
        (status_of(&resp), control, unknown)
    });
    assert_eq!(answer.0, Some(200));
    assert_eq!(origin.count("/greased"), 1);
    // Fields past the header list's limit: 431.
    lq.cli_ok("param.set h3_max_header_list_size 1024");
    let (_endpoint, conn) = raw_connection(&rt, &pki, addr);
    let status = rt.block_on(async {
        let (mut send, mut recv) = conn.open_bi().await.unwrap();
        let big = request(&get("/big", vec![literal(b"x-big", &[b'a'; 2000])]), b"");
        let _ = send.write_all(&big).await;
        let _ = send.finish();
        let resp = recv.read_to_end(1 << 20).await.unwrap_or_default();
        status_of(&resp)
    });
    assert_eq!(status, Some(431));
    assert_eq!(origin.count("/big"), 0);
}

/// Streams opened and given up at once, past h3_rapid_reset_limit: the
/// connection is closed (H3_EXCESSIVE_LOAD), and counted as HTTP/2's
/// rapid resets are.
#[test]
fn rapid_resets_close_the_connection() {
    let origin = crate::origin::Origin::start(|req| {
        crate::origin::Reply::ok(&format!("slow {}", req.url)).delay(Duration::from_secs(30))
    });
    let (pki, _origin, lq) = crate::tls::setup_origin("h3rapid", "quic = on\n", None, origin);
    lq.cli_ok("param.set h3_rapid_reset_limit 5");
    let addr = lq.listen("tls0");
    let rt = client_runtime();
    let (_endpoint, conn) = raw_connection(&rt, &pki, addr);
    let code = rt.block_on(async {
        for i in 0..20 {
            let Ok((mut send, mut recv)) = conn.open_bi().await else {
                break;
            };
            let _ = send
                .write_all(&request(&get(&format!("/slow{i}"), vec![]), b""))
                .await;
            let _ = send.finish();
            tokio::time::sleep(Duration::from_millis(20)).await;
            let _ = recv.stop(quinn::VarInt::from_u32(0x10c));
        }
        closed_with(&conn).await
    });
    assert_eq!(code, 0x107);
    assert!(crate::harness::eventually(Duration::from_secs(10), || lq
        .counter("MAIN.sc_rapid_reset")
        == 1));
}

/// A request body whose trailers come and whose stream never ends: the
/// stream is let go after timeout_idle, as a body that stops would be.
#[test]
fn trailers_without_the_streams_end_are_not_waited_for_forever() {
    let vcl = "sub vcl_recv { return (pass); }\n";
    let (pki, origin, lq) = setup_with("h3trailhang", "quic = on\n", Some(vcl));
    lq.cli_ok("param.set timeout_idle 1");
    let addr = lq.listen("tls0");
    let rt = client_runtime();
    let (_endpoint, conn) = raw_connection(&rt, &pki, addr);
    let ended = rt.block_on(async {
        let (mut send, mut recv) = conn.open_bi().await.unwrap();
        let post = [
            indexed(POST),
            indexed(HTTPS),
            named(AUTHORITY, b"a.example"),
            named(PATH, b"/hang"),
        ];
        let mut bytes = request(&post, b"ab");
        // Trailers: a HEADERS frame of one field; then nothing, no FIN.
        let mut block = vec![0, 0];
        block.extend(literal(b"x-t", b"1"));
        bytes.push(0x01);
        bytes.push(block.len() as u8);
        bytes.extend(block);
        send.write_all(&bytes).await.unwrap();
        let read = tokio::time::timeout(Duration::from_secs(10), recv.read_to_end(1 << 20));
        let ended = read.await.is_ok();
        drop(send);
        ended
    });
    assert!(ended, "the stream was held open");
    assert_eq!(origin.count("/hang"), 0);
}
