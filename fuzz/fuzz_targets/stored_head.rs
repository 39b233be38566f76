//! Stored heads: whatever head a backend sent, the object keeps it so
//! that it is written back byte for byte (packed, with dates as seconds
//! and shared values as numbers, or as text), and its fields read as
//! the text's do, without a panic.
#![no_main]
#![forbid(unsafe_code)]
use bytes::Bytes;
use lacquer_cache::object::{ObjKind, Object, StoredHead};
use lacquer_cache::{Body, ObjectInit, Timers};
use lacquer_http::Headers;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((status, text)) = data.split_first_chunk::<2>() else {
        return;
    };
    let status = u16::from_le_bytes(*status) % 1100;
    // Twice: values seen twice are shared the second time.
    for _ in 0..2 {
        let obj = Object::new(ObjectInit {
            xid: 1,
            store: None,
            kind: ObjKind::Normal,
            status,
            head: StoredHead::pack(text, status),
            headers: Headers::new(),
            body: Body::complete(Vec::<Bytes>::new()),
            vary: None,
            timers: Timers {
                t_origin: 0.0,
                ttl: 1.0,
                grace: 0.0,
                keep: 0.0,
            },
        });
        assert_eq!(obj.head_bytes(), text);
        // Its fields are the lines after the status line that have a
        // colon, in order, each value read whole.
        let after_status = text
            .iter()
            .position(|&b| b == b'\n')
            .map_or(&[][..], |p| &text[p + 1..]);
        let with_colon = after_status
            .split(|&b| b == b'\n')
            .filter(|l| l.contains(&b':'))
            .count();
        let mut read = 0;
        for (name, value) in obj.fields() {
            assert!(!name.contains(&b'\n'));
            assert!(!value.bytes().contains(&b'\n'));
            read += 1;
        }
        assert_eq!(read, with_colon);
        let _ = obj.header("date");
        let _ = obj.last_modified();
        let _ = obj.reason();
    }
});
