//! The log query language (vsl-query(7)): never a panic.
#![no_main]
#![forbid(unsafe_code)]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = lacquer_shm::query::Query::parse(text);
});
