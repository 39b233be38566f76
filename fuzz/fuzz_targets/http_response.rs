//! Backend response heads: never a panic; a response framed two ways is
//! never kept alive.
#![no_main]
#![forbid(unsafe_code)]
use bytes::BytesMut;
use lacquer_http::{parse_response, Framing, ResponseLimits};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let limits = ResponseLimits {
        max_head: 4096,
        max_header_line: 1024,
        max_headers: 32,
    };
    let mut buf = BytesMut::from(rest);
    if let Ok(Some(head)) = parse_response(&mut buf, &limits, first & 1 == 1) {
        let both =
            head.headers.contains("content-length") && head.headers.contains("transfer-encoding");
        if both || head.framing == Framing::UntilClose {
            assert!(!head.keep_alive);
        }
        assert!((100..=999).contains(&head.status));
    }
});
