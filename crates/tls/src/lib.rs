//! TLS for Lacquer's listeners: the `-A` file in Hitch's syntax
//! ([`config`]), certificates read from PEM files, the choice among them
//! by SNI in one hash lookup (exact name, then the wildcard one label
//! up), and a certificate set that can be swapped while connections
//! carry on (the `tls.cert.*` commands); certificates obtained and
//! renewed by ACME ([`acme`]); session tickets sealed with keys read
//! without a lock ([`tickets`]).

#![forbid(unsafe_code)]

pub mod acme;
pub mod config;
pub mod names;
pub mod suites;
pub mod tickets;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

pub use config::{ConfigError, PemSpec, Settings, TlsFile};

/// One certificate with its key, and what it is for.
#[derive(Debug)]
pub struct Cert {
    /// An id for `tls.cert.discard` (the file name unless given one).
    pub id: String,
    pub file: PathBuf,
    /// Lower-case DNS names, wildcards as `*.example.com`.
    pub names: Vec<String>,
    pub key: Arc<CertifiedKey>,
}

/// Reads a certificate: its chain and key from one PEM file (or the key
/// from another), and an OCSP response to staple.
pub fn load_cert(id: &str, spec: &PemSpec) -> Result<Cert, String> {
    let show = spec.cert.display();
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&spec.cert)
        .map_err(|e| format!("{show}: {e}"))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{show}: {e}"))?;
    if chain.is_empty() {
        return Err(format!("{show}: no certificate in it"));
    }
    let key_file = spec.private_key.as_deref().unwrap_or(&spec.cert);
    let key = PrivateKeyDer::from_pem_file(key_file)
        .map_err(|e| format!("{}: no private key ({e})", key_file.display()))?;
    let signer = rustls::crypto::ring::sign::any_supported_type(&key)
        .map_err(|e| format!("{}: {e}", key_file.display()))?;
    let names = names::dns_names(&chain[0]);
    let mut key = CertifiedKey::new(chain, signer);
    key.keys_match()
        .map_err(|e| format!("{show}: the key does not belong to the certificate ({e})"))?;
    if let Some(ocsp) = &spec.ocsp_resp_file {
        key.ocsp = Some(std::fs::read(ocsp).map_err(|e| format!("{}: {e}", ocsp.display()))?);
    }
    Ok(Cert {
        id: id.to_string(),
        file: spec.cert.clone(),
        names,
        key: Arc::new(key),
    })
}

/// The certificates a `-A` file names at its top level: `pem-file`s, then
/// the files of `pem-dir` matching `pem-dir-glob`, with the OCSP
/// responses found in `ocsp-dir` (`<file stem>.ocsp`).
pub fn global_certs(file: &TlsFile) -> Result<Vec<Cert>, String> {
    let mut specs = file.pems.clone();
    if let Some(dir) = &file.pem_dir {
        let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|e| format!("pem-dir {}: {e}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file())
            .filter(|p| {
                let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                file.pem_dir_glob.as_deref().is_none_or(|g| glob(g, name))
            })
            .collect();
        found.sort();
        specs.extend(found.into_iter().map(|cert| PemSpec {
            cert,
            ..PemSpec::default()
        }));
    }
    specs
        .iter()
        .map(|s| {
            let mut s = s.clone();
            if let (None, Some(dir)) = (&s.ocsp_resp_file, &file.ocsp_dir) {
                let stem = s.cert.file_stem().and_then(|n| n.to_str()).unwrap_or("");
                let candidate = dir.join(format!("{stem}.ocsp"));
                if candidate.is_file() {
                    s.ocsp_resp_file = Some(candidate);
                }
            }
            load_cert(&cert_id(&s.cert), &s)
        })
        .collect()
}

/// The id a certificate gets from its file: the file name.
pub fn cert_id(path: &Path) -> String {
    path.file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("cert")
        .to_string()
}

/// `*` and `?` glob matching, for `pem-dir-glob`.
fn glob(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    let (mut pi, mut ni, mut star, mut mark) = (0, 0, None, 0);
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            pi += 1;
            mark = ni;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ni = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// Certificates indexed by name: the first loaded is the default.
#[derive(Debug, Default)]
pub struct CertSet {
    pub certs: Vec<Arc<Cert>>,
    exact: HashMap<String, Arc<CertifiedKey>>,
    /// `*.example.com` under `example.com`.
    wildcard: HashMap<String, Arc<CertifiedKey>>,
}

impl CertSet {
    pub fn new(certs: Vec<Arc<Cert>>) -> CertSet {
        let mut set = CertSet {
            certs,
            ..CertSet::default()
        };
        for c in &set.certs {
            for name in &c.names {
                let map = match name.strip_prefix("*.") {
                    Some(parent) => set.wildcard.entry(parent.to_string()),
                    None => set.exact.entry(name.clone()),
                };
                // The first certificate for a name keeps it.
                map.or_insert_with(|| c.key.clone());
            }
        }
        set
    }

    /// The certificate for a server name: exact, else the wildcard one
    /// label up. None when no certificate names it.
    pub fn for_name(&self, name: &str) -> Option<&Arc<CertifiedKey>> {
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        self.exact.get(&name).or_else(|| {
            let (_, parent) = name.split_once('.')?;
            self.wildcard.get(parent)
        })
    }

    pub fn default_cert(&self) -> Option<&Arc<CertifiedKey>> {
        self.certs.first().map(|c| &c.key)
    }
}

/// Picks a listener's certificate for each handshake from the set in
/// force, which [`Resolver::swap`] replaces for new handshakes only.
#[derive(Debug)]
pub struct Resolver {
    set: RwLock<Arc<CertSet>>,
    abort_on_mismatch: bool,
    /// Handshakes whose server name no certificate had.
    pub sni_mismatch: AtomicU64,
}

impl Resolver {
    pub fn new(set: Arc<CertSet>, abort_on_mismatch: bool) -> Resolver {
        Resolver {
            set: RwLock::new(set),
            abort_on_mismatch,
            sni_mismatch: AtomicU64::new(0),
        }
    }

    pub fn current(&self) -> Arc<CertSet> {
        self.set.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn swap(&self, set: Arc<CertSet>) {
        *self.set.write().unwrap_or_else(|p| p.into_inner()) = set;
    }
}

impl ResolvesServerCert for Resolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        // An ACME server validating a name (TLS-ALPN-01) gets the
        // challenge's certificate, and only while one is pending.
        if hello
            .alpn()
            .is_some_and(|mut protos| protos.any(|p| p == acme::ACME_TLS_ALPN))
        {
            return hello
                .server_name()
                .and_then(|n| acme::CHALLENGES.alpn_cert(n));
        }
        let set = self.current();
        match hello.server_name() {
            Some(name) => match set.for_name(name) {
                Some(k) => Some(k.clone()),
                None => {
                    self.sni_mismatch.fetch_add(1, Ordering::Relaxed);
                    if self.abort_on_mismatch {
                        None
                    } else {
                        set.default_cert().cloned()
                    }
                }
            },
            None => set.default_cert().cloned(),
        }
    }
}

/// A listener's rustls configuration from its settings, certificates,
/// ALPN list and session cache size.
pub fn server_config(
    settings: &Settings,
    resolver: Arc<Resolver>,
    alpn: &[String],
    session_cache: usize,
) -> Result<Arc<rustls::ServerConfig>, String> {
    config_of(settings, resolver, alpn, session_cache, true).map(Arc::new)
}

/// The rustls configuration of a listener's QUIC side: its certificates,
/// suites, client verification, session cache and tickets, over TLS 1.3
/// alone (QUIC has no other), with the ALPN `h3`; early data (0-RTT)
/// accepted when `early_data`, as QUIC takes it (any amount, bounded by
/// the transport's flow control).
pub fn quic_server_config(
    settings: &Settings,
    resolver: Arc<Resolver>,
    session_cache: usize,
    early_data: bool,
) -> Result<rustls::ServerConfig, String> {
    let mut tls13 = settings.clone();
    tls13.protos = vec!["TLSv1.3".into()];
    // 0-RTT needs tickets the server keeps (rustls gives none that
    // allow early data with stateless resumption: a ticket kept is taken
    // once, so early data cannot be replayed with it): a session cache
    // of at least QUIC_SESSIONS, whatever `session-cache` says. Without
    // early data, sealed tickets as the TCP listeners'.
    let cache = match early_data {
        true => session_cache.max(QUIC_SESSIONS),
        false => session_cache,
    };
    let mut config = config_of(&tls13, resolver, &["h3".to_string()], cache, !early_data)?;
    config.max_early_data_size = if early_data { u32::MAX } else { 0 };
    Ok(config)
}

/// The sessions a QUIC listener keeps for resumption and 0-RTT, at least.
pub const QUIC_SESSIONS: usize = 4096;

/// A rustls configuration; `sealed_tickets`: resumption by tickets
/// sealed with the shared keys, else by the session cache alone.
fn config_of(
    settings: &Settings,
    resolver: Arc<Resolver>,
    alpn: &[String],
    session_cache: usize,
    sealed_tickets: bool,
) -> Result<rustls::ServerConfig, String> {
    let mut provider = rustls::crypto::ring::default_provider();
    provider.cipher_suites = suites::choose(
        settings.ciphers.as_deref(),
        settings.ciphersuites.as_deref(),
    )?;
    let versions: Vec<&'static rustls::SupportedProtocolVersion> = settings
        .protos
        .iter()
        .filter_map(|p| match p.as_str() {
            "TLSv1.2" => Some(&rustls::version::TLS12),
            "TLSv1.3" => Some(&rustls::version::TLS13),
            _ => None,
        })
        .collect();
    let provider = Arc::new(provider);
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| format!("TLS settings: {e}"))?;
    let builder = match (settings.client_verify, &settings.client_verify_ca) {
        (config::ClientVerify::None, _) => builder.with_no_client_auth(),
        (_, None) => return Err("client-verify needs client-verify-ca".into()),
        (how, Some(ca)) => {
            let mut roots = rustls::RootCertStore::empty();
            let certs = CertificateDer::pem_file_iter(ca)
                .map_err(|e| format!("client-verify-ca {}: {e}", ca.display()))?;
            for c in certs {
                roots
                    .add(c.map_err(|e| format!("client-verify-ca {}: {e}", ca.display()))?)
                    .map_err(|e| format!("client-verify-ca {}: {e}", ca.display()))?;
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            );
            let verifier = match how {
                config::ClientVerify::Optional => verifier.allow_unauthenticated(),
                _ => verifier,
            };
            let verifier = verifier
                .build()
                .map_err(|e| format!("client-verify-ca {}: {e}", ca.display()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_cert_resolver(resolver);
    config.alpn_protocols = alpn.iter().map(|a| a.as_bytes().to_vec()).collect();
    config.ignore_client_order = settings.prefer_server_ciphers;
    if session_cache == 0 {
        config.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
    } else {
        config.session_storage = rustls::server::ServerSessionMemoryCache::new(session_cache);
        // Keys read without a lock on every handshake, rotated every
        // six hours (a ticket opens for twelve at most).
        if sealed_tickets {
            config.ticketer = tickets::Tickets::new(6 * 60 * 60)?;
        }
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cert(names: &[&str], dir: &Path, file: &str) -> Cert {
        let key = rcgen::KeyPair::generate().unwrap();
        let params =
            rcgen::CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .unwrap();
        let c = params.self_signed(&key).unwrap();
        let path = dir.join(file);
        std::fs::write(&path, format!("{}{}", c.pem(), key.serialize_pem())).unwrap();
        load_cert(
            file,
            &PemSpec {
                cert: path,
                ..PemSpec::default()
            },
        )
        .unwrap()
    }

    #[test]
    fn sni_picks_exact_then_wildcard_then_default() {
        let dir = std::env::temp_dir().join(format!("lacquer-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let a = Arc::new(cert(&["a.example"], &dir, "a.pem"));
        let w = Arc::new(cert(&["*.example.org", "example.org"], &dir, "w.pem"));
        let set = CertSet::new(vec![a.clone(), w.clone()]);
        assert!(Arc::ptr_eq(set.for_name("A.Example.").unwrap(), &a.key));
        assert!(Arc::ptr_eq(
            set.for_name("www.example.org").unwrap(),
            &w.key
        ));
        assert!(Arc::ptr_eq(set.for_name("example.org").unwrap(), &w.key));
        assert!(set.for_name("deep.www.example.org").is_none());
        assert!(Arc::ptr_eq(set.default_cert().unwrap(), &a.key));

        // A key that is not the certificate's is refused.
        let other = rcgen::KeyPair::generate().unwrap();
        let mismatched = dir.join("bad.pem");
        let a_pem = std::fs::read_to_string(dir.join("a.pem")).unwrap();
        let cert_only = &a_pem[..a_pem.find("-----BEGIN PRIVATE KEY").unwrap()];
        std::fs::write(&mismatched, format!("{cert_only}{}", other.serialize_pem())).unwrap();
        let e = load_cert(
            "bad",
            &PemSpec {
                cert: mismatched,
                ..PemSpec::default()
            },
        )
        .unwrap_err();
        assert!(e.contains("does not belong"), "{e}");
        let e = load_cert(
            "none",
            &PemSpec {
                cert: dir.join("nope.pem"),
                ..PemSpec::default()
            },
        )
        .unwrap_err();
        assert!(e.contains("nope.pem"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn globbing() {
        assert!(glob("*.pem", "site.pem"));
        assert!(!glob("*.pem", "site.key"));
        assert!(glob("s?te*", "site.pem"));
        assert!(glob("*", ""));
    }
}
