//! The `-A` file reader and the certificate name walker, fed anything:
//! never a panic. The first byte picks which: a configuration text, or
//! DER bytes for the names a certificate is for.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    if pick % 2 == 0 {
        let text = String::from_utf8_lossy(rest);
        if let Ok(file) = lacquer_tls::config::parse(&text, "fuzz.conf", None) {
            assert!(!file.alpn.is_empty());
            assert!(!file.settings.protos.is_empty());
        }
    } else {
        for name in lacquer_tls::names::dns_names(rest) {
            assert!(!name.chars().any(|c| c.is_ascii_uppercase()));
        }
        let _ = lacquer_tls::names::common_name(rest);
    }
});
