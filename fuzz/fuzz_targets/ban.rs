//! Ban expressions from the CLI and VCL: never a panic.
#![no_main]
#![forbid(unsafe_code)]
use lacquer_cache::ban::BanSpec;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = BanSpec::parse_str(text);
    let words: Vec<&str> = text.split_whitespace().collect();
    let _ = BanSpec::parse(&words);
});
