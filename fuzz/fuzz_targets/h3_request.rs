//! An HTTP/3 request stream's bytes: frames split anywhere, the first
//! HEADERS frame's QPACK read as a request. Never a panic; the framing
//! the same however the bytes are split; a request read is one the
//! HTTP/1 parser takes, with no more pseudo-headers than it may have
//! (one request line, one Host at most).
#![no_main]
#![forbid(unsafe_code)]
use lacquer_http::h3::frames::{Frame, FrameBuf, HEADERS};
use lacquer_http::h3::qpack;
use libfuzzer_sys::fuzz_target;

fn frames(pieces: &[&[u8]]) -> Result<Vec<Frame>, ()> {
    let mut buf = FrameBuf::new(4096);
    let mut out = Vec::new();
    for (i, p) in pieces.iter().enumerate() {
        buf.push(p);
        if i + 1 == pieces.len() {
            buf.finish();
        }
        loop {
            match buf.next_frame() {
                Ok(Some(Frame::End)) => return Ok(out),
                Ok(Some(f)) => out.push(f),
                Ok(None) => break,
                Err(_) => return Err(()),
            }
        }
    }
    Ok(out)
}

/// DATA pieces joined, to compare however split.
fn joined(frames: Vec<Frame>) -> Vec<Frame> {
    let mut out: Vec<Frame> = Vec::new();
    for f in frames {
        match (out.last_mut(), f) {
            (Some(Frame::Data(prev)), Frame::Data(more)) => {
                let mut both = prev.to_vec();
                both.extend_from_slice(&more);
                *prev = bytes::Bytes::from(both);
            }
            (_, f) => out.push(f),
        }
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&cut, rest)) = data.split_first() else {
        return;
    };
    let at = usize::from(cut).min(rest.len());
    let whole = frames(&[rest]).map(joined);
    let split = frames(&[&rest[..at], &rest[at..]]).map(joined);
    assert_eq!(whole, split);
    // Every HEADERS frame read as a request, and as trailers.
    for f in whole.iter().flatten() {
        let Frame::Whole(HEADERS, block) = f else {
            continue;
        };
        let _ = qpack::decode_trailers(block, 16384);
        let Ok(req) = qpack::decode_request(block, 16384) else {
            continue;
        };
        let mut head = req.head.clone();
        let limits = lacquer_http::RequestLimits {
            max_head: 65536,
            max_header_line: 65536,
            max_headers: 1024,
        };
        if let Ok(Some(parsed)) = lacquer_http::parse_request(&mut head, &limits) {
            assert_eq!(&parsed.method[..], &req.method[..]);
            assert!(parsed.headers.get_all("host").count() <= 1);
        }
    }
    // The encoder's output always decodes.
    if let Some(frame) = qpack::encode_response(rest) {
        let mut buf = FrameBuf::new(1 << 20);
        buf.push(&frame);
        assert!(matches!(
            buf.next_frame(),
            Ok(Some(Frame::Whole(HEADERS, _)))
        ));
    }
});
