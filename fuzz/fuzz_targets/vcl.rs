//! The VCL compiler over any text: an error, or a program, never a panic
//! or a hang.
#![no_main]
#![forbid(unsafe_code)]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = lacquer_vcl::compile_str("fuzz.vcl", text, &lacquer_vcl::Options::default());
});
