//! The `-A` file reader, the certificate walker and what an ACME server
//! answers, fed anything: never a panic. The first byte picks which: a
//! configuration text, DER bytes for the names a certificate is for and
//! the end of its validity, or an HTTP answer with a JSON body.
#![no_main]
#![forbid(unsafe_code)]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    match pick % 3 {
        0 => {
            let text = String::from_utf8_lossy(rest);
            if let Ok(file) = lacquer_tls::config::parse(&text, "fuzz.conf", None) {
                assert!(!file.alpn.is_empty());
                assert!(!file.settings.protos.is_empty());
                assert!(file.acme.iter().all(|a| !a.names.is_empty()));
            }
        }
        1 => {
            for name in lacquer_tls::names::dns_names(rest) {
                assert!(!name.chars().any(|c| c.is_ascii_uppercase()));
            }
            let _ = lacquer_tls::names::common_name(rest);
            let _ = lacquer_tls::names::not_after(rest);
        }
        _ => {
            if let Ok(answer) = lacquer_tls::acme::http::parse_answer(rest, false) {
                assert!(answer.body.len() <= rest.len());
                let _ = lacquer_tls::acme::json::parse(&String::from_utf8_lossy(&answer.body));
            }
            let _ = lacquer_tls::acme::json::parse(&String::from_utf8_lossy(rest));
        }
    }
});
