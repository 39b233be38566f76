//! The management protocol: command lines with quotes, escapes and here
//! documents as they arrive in pieces, and status lines read by clients.
#![no_main]
#![forbid(unsafe_code)]
use lacquer_admin::{parse_status_line, tokenize, CommandReader};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut r = CommandReader::new();
    for piece in data.chunks(13) {
        r.push(piece);
        while r.next_input().is_some() {}
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = tokenize(text);
    }
    let _ = parse_status_line(data);
});
