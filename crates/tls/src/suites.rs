//! Cipher choice: `ciphers` in OpenSSL's cipher-list syntax (TLS 1.2)
//! and `ciphersuites` (TLS 1.3 names), mapped onto the suites rustls
//! offers. Names and aliases that stand for suites rustls has not (DHE,
//! CBC, RC4 …) match nothing; a list that leaves nothing is an error.

use rustls::crypto::ring::cipher_suite as cs;
use rustls::SupportedCipherSuite;

/// A TLS 1.2 suite with the words OpenSSL's cipher lists use for it.
struct Suite12 {
    suite: SupportedCipherSuite,
    openssl: &'static str,
    auth: &'static str,
    enc: &'static str,
    mac: &'static str,
}

fn tls12() -> [Suite12; 6] {
    [
        Suite12 {
            suite: cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
            openssl: "ECDHE-ECDSA-AES256-GCM-SHA384",
            auth: "ECDSA",
            enc: "AES256GCM",
            mac: "SHA384",
        },
        Suite12 {
            suite: cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
            openssl: "ECDHE-ECDSA-AES128-GCM-SHA256",
            auth: "ECDSA",
            enc: "AES128GCM",
            mac: "SHA256",
        },
        Suite12 {
            suite: cs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
            openssl: "ECDHE-ECDSA-CHACHA20-POLY1305",
            auth: "ECDSA",
            enc: "CHACHA20",
            mac: "SHA256",
        },
        Suite12 {
            suite: cs::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
            openssl: "ECDHE-RSA-AES256-GCM-SHA384",
            auth: "RSA",
            enc: "AES256GCM",
            mac: "SHA384",
        },
        Suite12 {
            suite: cs::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
            openssl: "ECDHE-RSA-AES128-GCM-SHA256",
            auth: "RSA",
            enc: "AES128GCM",
            mac: "SHA256",
        },
        Suite12 {
            suite: cs::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
            openssl: "ECDHE-RSA-CHACHA20-POLY1305",
            auth: "RSA",
            enc: "CHACHA20",
            mac: "SHA256",
        },
    ]
}

/// Whether one `+`-joined word of a cipher list names a property `s` has.
fn word_matches(s: &Suite12, word: &str) -> bool {
    match word {
        "ALL" | "DEFAULT" | "HIGH" | "COMPLEMENTOFDEFAULT" | "TLSv1.2" | "AEAD" => true,
        "ECDHE" | "EECDH" | "kEECDH" | "kECDHE" | "ECDH" => true,
        "ECDSA" | "aECDSA" => s.auth == "ECDSA",
        "RSA" | "aRSA" => s.auth == "RSA",
        "AESGCM" => s.enc.ends_with("GCM"),
        "AES" => s.enc.starts_with("AES"),
        "AES128" => s.enc == "AES128GCM",
        "AES256" => s.enc == "AES256GCM",
        "CHACHA20" => s.enc == "CHACHA20",
        "SHA256" => s.mac == "SHA256",
        "SHA384" => s.mac == "SHA384",
        name => s.openssl == name || format!("{:?}", s.suite.suite()) == name,
    }
}

/// The TLS 1.2 suites an OpenSSL cipher list selects, in its order.
fn select12(list: &str) -> Vec<SupportedCipherSuite> {
    let all = tls12();
    let mut chosen: Vec<usize> = Vec::new();
    let mut banned: Vec<usize> = Vec::new();
    for token in list.split([':', ',', ' ']).filter(|t| !t.is_empty()) {
        let (op, body) = match token.as_bytes()[0] {
            b'!' | b'-' | b'+' => (token.as_bytes()[0], &token[1..]),
            _ => (b' ', token),
        };
        let hits = (0..all.len()).filter(|&i| body.split('+').all(|w| word_matches(&all[i], w)));
        match op {
            b'!' => banned.extend(hits),
            b'-' => {
                let hits: Vec<usize> = hits.collect();
                chosen.retain(|i| !hits.contains(i));
            }
            b'+' => {
                // Moves what matched to the end.
                let hits: Vec<usize> = hits.filter(|i| chosen.contains(i)).collect();
                chosen.retain(|i| !hits.contains(i));
                chosen.extend(hits);
            }
            _ => {
                for i in hits {
                    if !chosen.contains(&i) {
                        chosen.push(i);
                    }
                }
            }
        }
    }
    chosen
        .into_iter()
        .filter(|i| !banned.contains(i))
        .map(|i| all[i].suite)
        .collect()
}

/// The TLS 1.3 suites a `ciphersuites` list names, in its order.
fn select13(list: &str) -> Result<Vec<SupportedCipherSuite>, String> {
    let mut out = Vec::new();
    for name in list.split([':', ',', ' ']).filter(|t| !t.is_empty()) {
        let suite = match name {
            "TLS_AES_128_GCM_SHA256" => cs::TLS13_AES_128_GCM_SHA256,
            "TLS_AES_256_GCM_SHA384" => cs::TLS13_AES_256_GCM_SHA384,
            "TLS_CHACHA20_POLY1305_SHA256" => cs::TLS13_CHACHA20_POLY1305_SHA256,
            other => return Err(format!("ciphersuites: \"{other}\" is not offered")),
        };
        out.push(suite);
    }
    Ok(out)
}

/// The suites offered for `ciphers` and `ciphersuites` (None: rustls's
/// defaults for that version).
pub fn choose(
    ciphers: Option<&str>,
    ciphersuites: Option<&str>,
) -> Result<Vec<SupportedCipherSuite>, String> {
    let defaults = rustls::crypto::ring::default_provider().cipher_suites;
    let v13: Vec<SupportedCipherSuite> = match ciphersuites {
        Some(list) => select13(list)?,
        None => defaults
            .iter()
            .copied()
            .filter(|s| s.tls13().is_some())
            .collect(),
    };
    let v12: Vec<SupportedCipherSuite> = match ciphers {
        Some(list) => {
            let chosen = select12(list);
            if chosen.is_empty() {
                return Err(format!(
                    "ciphers \"{list}\": no TLS 1.2 suite offered matches (ECDHE with AES-GCM or CHACHA20 are)"
                ));
            }
            chosen
        }
        None => defaults
            .iter()
            .copied()
            .filter(|s| s.tls13().is_none())
            .collect(),
    };
    Ok(v13.into_iter().chain(v12).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[SupportedCipherSuite]) -> Vec<String> {
        v.iter().map(|s| format!("{:?}", s.suite())).collect()
    }

    #[test]
    fn openssl_lists_map_onto_rustls_suites() {
        let v = choose(
            Some("EECDH+AESGCM:EDH+AESGCM"),
            Some("TLS_AES_256_GCM_SHA384"),
        )
        .unwrap();
        assert_eq!(
            names(&v),
            vec![
                "TLS13_AES_256_GCM_SHA384",
                "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
                "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
                "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
                "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
            ]
        );
        let v = choose(
            Some("ECDHE-RSA-CHACHA20-POLY1305:HIGH:!ECDSA:!AES256"),
            None,
        )
        .unwrap();
        let n = names(&v);
        assert_eq!(n[3], "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256");
        assert_eq!(n.len(), 5);
        assert!(choose(Some("DHE-RSA-AES128-SHA:RC4"), None).is_err());
        assert!(choose(None, Some("TLS_AES_128_CCM_SHA256")).is_err());
    }
}
