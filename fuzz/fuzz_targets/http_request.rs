//! Client request heads: never a panic, and a head that parses is framed
//! one way only.
#![no_main]
#![forbid(unsafe_code)]
use bytes::BytesMut;
use lacquer_http::{parse_request, Framing, RequestLimits};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let limits = RequestLimits {
        max_head: 4096,
        max_header_line: 1024,
        max_headers: 32,
    };
    let mut buf = BytesMut::from(data);
    // Pipelined heads, as a session reads them.
    while let Ok(Some(head)) = parse_request(&mut buf, &limits) {
        let cl = head.headers.get_all("content-length").count();
        let te = head.headers.get_all("transfer-encoding").count();
        assert!(cl <= 1 && te <= 1 && cl + te <= 1, "framed two ways");
        // What the connection's fate is judged from is what the fields say.
        let options = head.headers.connection_options();
        assert!(options.end_to_end.is_none());
        assert_eq!(head.connection, options);
        assert!(head.headers.get_all("host").count() <= 1);
        if head.framing == Framing::Chunked {
            assert_eq!(te, 1);
        }
        assert!(
            head.url.starts_with(b"/") || head.url.as_ref() == b"*" || head.method_is("CONNECT")
        );
    }
});
