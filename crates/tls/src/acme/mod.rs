//! Automatic certificates (ACME, RFC 8555): an `acme` section of the
//! `-A` file names a directory, a contact and the names a certificate is
//! for; [`obtain`] runs an order through (account, order, one challenge
//! per name, finalize with a CSR, download) and writes the chain and key
//! to one PEM file in the work directory. The answers to the challenges
//! are kept in [`CHALLENGES`] while they are pending: the listeners
//! answer TLS-ALPN-01 (RFC 8737) in the handshake and HTTP-01 at
//! `/.well-known/acme-challenge/`. When to renew and how the new
//! certificate goes in force is the daemon's.

pub mod http;
pub use lacquer_core::json;
pub mod jws;

use json::{quote, Json};
use jws::{b64url, sha256, AccountKey};
use rustls::sign::CertifiedKey;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The ALPN protocol of TLS-ALPN-01 validation handshakes.
pub const ACME_TLS_ALPN: &[u8] = b"acme-tls/1";
/// Where HTTP-01 answers are asked for.
pub const HTTP_CHALLENGE_PREFIX: &str = "/.well-known/acme-challenge/";

/// A way of proving control of a name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChallengeKind {
    TlsAlpn01,
    Http01,
}

impl ChallengeKind {
    pub fn name(self) -> &'static str {
        match self {
            ChallengeKind::TlsAlpn01 => "tls-alpn-01",
            ChallengeKind::Http01 => "http-01",
        }
    }

    pub fn from_name(s: &str) -> Option<ChallengeKind> {
        match s {
            "tls-alpn-01" => Some(ChallengeKind::TlsAlpn01),
            "http-01" => Some(ChallengeKind::Http01),
            _ => None,
        }
    }
}

/// One `acme` section: a certificate to obtain and keep renewed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcmeSpec {
    /// The ACME server's directory URL.
    pub directory: String,
    /// `mailto:` URLs for the account.
    pub contact: Vec<String>,
    /// The names the certificate is for, lower-cased; the first names
    /// its file and id.
    pub names: Vec<String>,
    /// The challenges taken, in order of preference.
    pub challenges: Vec<ChallengeKind>,
    /// The CA bundle the ACME server's certificate is checked against
    /// (None: the `ssl_ca_file` parameter's).
    pub ca_file: Option<PathBuf>,
    /// How long before its end a certificate is renewed.
    pub renew_before: Duration,
    /// How long after a failed attempt the next one starts.
    pub retry: Duration,
}

impl AcmeSpec {
    /// The id its certificate has in `tls.cert.list`.
    pub fn id(&self) -> String {
        format!("acme-{}", self.names[0])
    }

    /// Where its certificate and key are kept, under `dir`.
    pub fn file(&self, dir: &Path) -> PathBuf {
        dir.join(format!("{}.pem", self.names[0]))
    }
}

/// The answers to pending challenges. Empty nearly always, so asking
/// costs one atomic load.
pub struct Challenges {
    active: AtomicUsize,
    /// HTTP-01: token, key authorization.
    http: Mutex<Vec<(String, String)>>,
    /// TLS-ALPN-01: name, the certificate that proves it.
    alpn: Mutex<Vec<(String, Arc<CertifiedKey>)>>,
}

/// The daemon's pending challenges.
pub static CHALLENGES: Challenges = Challenges {
    active: AtomicUsize::new(0),
    http: Mutex::new(Vec::new()),
    alpn: Mutex::new(Vec::new()),
};

impl Challenges {
    /// The key authorization for an HTTP-01 request path, if it is one
    /// pending.
    pub fn http_answer(&self, path: &[u8]) -> Option<String> {
        if self.active.load(Ordering::Acquire) == 0 {
            return None;
        }
        let token =
            std::str::from_utf8(path.strip_prefix(HTTP_CHALLENGE_PREFIX.as_bytes())?).ok()?;
        let http = self.http.lock().unwrap_or_else(|p| p.into_inner());
        http.iter()
            .find(|(t, _)| t == token)
            .map(|(_, a)| a.clone())
    }

    /// The TLS-ALPN-01 certificate for a server name, if one is pending.
    pub fn alpn_cert(&self, name: &str) -> Option<Arc<CertifiedKey>> {
        if self.active.load(Ordering::Acquire) == 0 {
            return None;
        }
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        let alpn = self.alpn.lock().unwrap_or_else(|p| p.into_inner());
        alpn.iter()
            .find(|(n, _)| *n == name)
            .map(|(_, c)| c.clone())
    }

    fn add(&'static self, kind: ChallengeKind, key: String, answer: Answer) -> Pending {
        match answer {
            Answer::Http(a) => self
                .http
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((key.clone(), a)),
            Answer::Alpn(c) => self
                .alpn
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((key.clone(), c)),
        }
        self.active.fetch_add(1, Ordering::AcqRel);
        Pending {
            set: self,
            kind,
            key,
        }
    }
}

enum Answer {
    Http(String),
    Alpn(Arc<CertifiedKey>),
}

/// A pending challenge's answer, withdrawn when this goes.
struct Pending {
    set: &'static Challenges,
    kind: ChallengeKind,
    key: String,
}

impl Drop for Pending {
    fn drop(&mut self) {
        match self.kind {
            ChallengeKind::Http01 => {
                let mut http = self.set.http.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(i) = http.iter().position(|(t, _)| *t == self.key) {
                    http.remove(i);
                }
            }
            ChallengeKind::TlsAlpn01 => {
                let mut alpn = self.set.alpn.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(i) = alpn.iter().position(|(n, _)| *n == self.key) {
                    alpn.remove(i);
                }
            }
        }
        self.set.active.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The self-signed certificate that answers a TLS-ALPN-01 challenge for
/// `name`: it carries the SHA-256 of the key authorization in the
/// acmeIdentifier extension.
fn alpn_certificate(name: &str, key_authorization: &str) -> Result<Arc<CertifiedKey>, String> {
    let key = rcgen::KeyPair::generate().map_err(|e| e.to_string())?;
    let mut params =
        rcgen::CertificateParams::new(vec![name.to_string()]).map_err(|e| e.to_string())?;
    params
        .custom_extensions
        .push(rcgen::CustomExtension::new_acme_identifier(&sha256(
            key_authorization.as_bytes(),
        )));
    let cert = params.self_signed(&key).map_err(|e| e.to_string())?;
    let der = rustls::pki_types::PrivatePkcs8KeyDer::from(key.serialize_der());
    let signer =
        rustls::crypto::ring::sign::any_supported_type(&der.into()).map_err(|e| e.to_string())?;
    Ok(Arc::new(CertifiedKey::new(
        vec![cert.der().clone()],
        signer,
    )))
}

/// How long an order may take, from the first request to the download.
const ORDER_LIMIT: Duration = Duration::from_secs(180);

/// A conversation with one ACME server.
struct Session {
    client: http::Client,
    key: AccountKey,
    new_nonce: String,
    nonce: Option<String>,
    kid: Option<String>,
    deadline: Instant,
}

/// An ACME error document's gist.
fn problem(a: &http::Answer) -> String {
    let text = String::from_utf8_lossy(&a.body);
    match json::parse(&text) {
        Ok(p) => format!(
            "{} {}: {}",
            a.status,
            p.str_of("type").unwrap_or("error"),
            p.str_of("detail").unwrap_or("")
        ),
        Err(_) => format!(
            "{} {}",
            a.status,
            text.chars().take(200).collect::<String>()
        ),
    }
}

impl Session {
    fn remember_nonce(&mut self, a: &http::Answer) {
        if let Some(n) = a.header("replay-nonce") {
            self.nonce = Some(n.to_string());
        }
    }

    /// A signed POST (`payload` None: POST-as-GET), tried again with a
    /// fresh nonce when the server says the one used was bad.
    fn post(&mut self, url: &str, payload: Option<&str>) -> Result<http::Answer, String> {
        for _ in 0..5 {
            let nonce = match self.nonce.take() {
                Some(n) => n,
                None => {
                    let a = self.client.request("HEAD", &self.new_nonce, None)?;
                    a.header("replay-nonce")
                        .ok_or("the server gave no nonce")?
                        .to_string()
                }
            };
            let body = self.key.sign(url, &nonce, self.kid.as_deref(), payload)?;
            let a = self.client.request("POST", url, Some(&body))?;
            self.remember_nonce(&a);
            if a.status < 300 {
                return Ok(a);
            }
            let p = problem(&a);
            if !p.contains("urn:ietf:params:acme:error:badNonce") {
                return Err(format!("{url}: {p}"));
            }
        }
        Err(format!("{url}: the server refused five nonces in a row"))
    }

    fn post_json(
        &mut self,
        url: &str,
        payload: Option<&str>,
    ) -> Result<(http::Answer, Json), String> {
        let a = self.post(url, payload)?;
        let v =
            json::parse(&String::from_utf8_lossy(&a.body)).map_err(|e| format!("{url}: {e}"))?;
        Ok((a, v))
    }

    /// POST-as-GET `url` until its status is no longer `pending` or
    /// `processing` (waiting as Retry-After says, 1 to 10 s), within the
    /// order's time.
    fn poll(&mut self, url: &str) -> Result<Json, String> {
        loop {
            let (a, v) = self.post_json(url, None)?;
            match v.str_of("status") {
                Some("pending" | "processing") => {}
                _ => return Ok(v),
            }
            let wait = a
                .header("retry-after")
                .and_then(|s| s.parse::<u64>().ok())
                .unwrap_or(1)
                .clamp(1, 10);
            if Instant::now() + Duration::from_secs(wait) > self.deadline {
                return Err(format!(
                    "{url}: still {} when the order's time ran out",
                    v.str_of("status").unwrap_or("?")
                ));
            }
            std::thread::sleep(Duration::from_secs(wait));
        }
    }
}

/// The account key kept for a directory under `dir`, made the first
/// time.
fn account_key(dir: &Path, directory: &str) -> Result<AccountKey, String> {
    use rustls::pki_types::pem::PemObject;
    let host = http::Url::parse(directory)?.host.replace([':', '/'], "_");
    let path = dir.join(format!("account-{host}.key"));
    if path.exists() {
        let der = rustls::pki_types::PrivatePkcs8KeyDer::from_pem_file(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        return AccountKey::from_pkcs8(der.secret_pkcs8_der())
            .map_err(|e| format!("{}: {e}", path.display()));
    }
    let key = AccountKey::generate()?;
    write_private(&path, &pem("PRIVATE KEY", key.pkcs8()))?;
    Ok(key)
}

fn pem(label: &str, der: &[u8]) -> String {
    use base64_std as b64;
    let body = b64::encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in body.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).unwrap_or(""));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

/// Standard base64, for PEM.
mod base64_std {
    pub fn encode(data: &[u8]) -> String {
        super::b64url(data).replace('-', "+").replace('_', "/")
            + match data.len() % 3 {
                1 => "==",
                2 => "=",
                _ => "",
            }
    }
}

/// Writes a file only its owner may read, whole or not at all.
fn write_private(path: &Path, text: &str) -> Result<(), String> {
    use std::io::Write;
    let tmp = path.with_extension("tmp");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut f = options
        .open(&tmp)
        .map_err(|e| format!("{}: {e}", tmp.display()))?;
    f.write_all(text.as_bytes())
        .and_then(|_| f.sync_all())
        .map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("{}: {e}", path.display()))
}

/// Runs an order for `spec`'s names through, keeping the account key in
/// `dir` and writing the certificate with its key to [`AcmeSpec::file`].
/// `default_ca` is the CA bundle used when the section names none;
/// `say` hears each step.
pub fn obtain(
    spec: &AcmeSpec,
    dir: &Path,
    default_ca: &Path,
    say: &mut dyn FnMut(&str),
) -> Result<PathBuf, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let client = http::Client::new(spec.ca_file.as_deref().unwrap_or(default_ca))?;
    let directory = client.request("GET", &spec.directory, None)?;
    if directory.status != 200 {
        return Err(format!("{}: {}", spec.directory, problem(&directory)));
    }
    let directory = json::parse(&String::from_utf8_lossy(&directory.body))
        .map_err(|e| format!("{}: {e}", spec.directory))?;
    let url = |k: &str| {
        directory
            .str_of(k)
            .map(str::to_string)
            .ok_or_else(|| format!("{}: no {k} in the directory", spec.directory))
    };
    let mut s = Session {
        client,
        key: account_key(dir, &spec.directory)?,
        new_nonce: url("newNonce")?,
        nonce: None,
        kid: None,
        deadline: Instant::now() + ORDER_LIMIT,
    };

    let contact: Vec<String> = spec.contact.iter().map(|c| quote(c)).collect();
    let account = s.post(
        &url("newAccount")?,
        Some(&format!(
            r#"{{"termsOfServiceAgreed":true,"contact":[{}]}}"#,
            contact.join(",")
        )),
    )?;
    s.kid = Some(
        account
            .header("location")
            .ok_or("the account has no Location")?
            .to_string(),
    );

    let identifiers: Vec<String> = spec
        .names
        .iter()
        .map(|n| format!(r#"{{"type":"dns","value":{}}}"#, quote(n)))
        .collect();
    let new_order = url("newOrder")?;
    let (answer, order) = s.post_json(
        &new_order,
        Some(&format!(r#"{{"identifiers":[{}]}}"#, identifiers.join(","))),
    )?;
    let order_url = answer
        .header("location")
        .ok_or("the order has no Location")?
        .to_string();
    say(&format!("order {order_url} for {}", spec.names.join(" ")));

    let thumbprint = s.key.thumbprint();
    for authz in order
        .get("authorizations")
        .map(Json::as_array)
        .unwrap_or_default()
    {
        let authz = authz.as_str().ok_or("an authorization is no URL")?;
        authorize(&mut s, spec, authz, &thumbprint, say)?;
    }
    finalize(&mut s, spec, &order, &order_url, dir, say)
}

/// Has the CA validate one authorization of an order: the challenge
/// configured first of those it offers, answered and waited for.
fn authorize(
    s: &mut Session,
    spec: &AcmeSpec,
    authz: &str,
    thumbprint: &str,
    say: &mut dyn FnMut(&str),
) -> Result<(), String> {
    let (_, a) = s.post_json(authz, None)?;
    if a.str_of("status") == Some("valid") {
        return Ok(());
    }
    let name = a
        .get("identifier")
        .and_then(|i| i.str_of("value"))
        .ok_or_else(|| format!("{authz}: no identifier"))?
        .to_ascii_lowercase();
    let offered = a.get("challenges").map(Json::as_array).unwrap_or_default();
    let (kind, challenge) = spec
        .challenges
        .iter()
        .find_map(|k| {
            offered
                .iter()
                .find(|c| c.str_of("type") == Some(k.name()))
                .map(|c| (*k, c))
        })
        .ok_or_else(|| format!("{name}: none of the challenges offered is one configured"))?;
    let token = challenge
        .str_of("token")
        .ok_or("a challenge without a token")?;
    if token.is_empty()
        || !token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(format!("{name}: a token that is not base64url"));
    }
    let challenge_url = challenge
        .str_of("url")
        .ok_or("a challenge without a URL")?
        .to_string();
    let key_authorization = format!("{token}.{thumbprint}");
    let _pending = match kind {
        ChallengeKind::Http01 => {
            CHALLENGES.add(kind, token.to_string(), Answer::Http(key_authorization))
        }
        ChallengeKind::TlsAlpn01 => {
            let cert = alpn_certificate(&name, &key_authorization)?;
            CHALLENGES.add(kind, name.clone(), Answer::Alpn(cert))
        }
    };
    say(&format!("{name}: answering {}", kind.name()));
    s.post(&challenge_url, Some("{}"))?;
    let done = s.poll(authz)?;
    if done.str_of("status") != Some("valid") {
        let why = done
            .get("challenges")
            .map(Json::as_array)
            .unwrap_or_default()
            .iter()
            .find_map(|c| c.get("error").and_then(|e| e.str_of("detail")))
            .unwrap_or("no reason given")
            .to_string();
        return Err(format!(
            "{name}: {} failed ({}): {why}",
            kind.name(),
            done.str_of("status").unwrap_or("?")
        ));
    }
    Ok(())
}

/// Finalizes a validated order with a new key's request, fetches the
/// certificate, and writes it with its key to the file kept for `spec`
/// once they check out together.
fn finalize(
    s: &mut Session,
    spec: &AcmeSpec,
    order: &Json,
    order_url: &str,
    dir: &Path,
    say: &mut dyn FnMut(&str),
) -> Result<PathBuf, String> {
    // The certificate's own key, and the request for it.
    let cert_key = rcgen::KeyPair::generate().map_err(|e| e.to_string())?;
    let mut params =
        rcgen::CertificateParams::new(spec.names.clone()).map_err(|e| e.to_string())?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    let csr = params
        .serialize_request(&cert_key)
        .map_err(|e| e.to_string())?;
    let finalize = order
        .str_of("finalize")
        .ok_or("the order has no finalize URL")?
        .to_string();
    let ready = s.poll(order_url)?;
    if ready.str_of("status") != Some("ready") {
        return Err(format!(
            "{order_url}: {} rather than ready",
            ready.str_of("status").unwrap_or("?")
        ));
    }
    s.post(
        &finalize,
        Some(&format!(r#"{{"csr":"{}"}}"#, b64url(csr.der()))),
    )?;
    let done = s.poll(order_url)?;
    let cert_url = match (done.str_of("status"), done.str_of("certificate")) {
        (Some("valid"), Some(u)) => u.to_string(),
        (status, _) => {
            return Err(format!(
                "{order_url}: {} after finalizing",
                status.unwrap_or("?")
            ))
        }
    };
    let chain = s.post(&cert_url, None)?;
    let chain = String::from_utf8(chain.body).map_err(|_| format!("{cert_url}: not PEM"))?;
    if !chain.contains("-----BEGIN CERTIFICATE-----") {
        return Err(format!("{cert_url}: no certificate in the answer"));
    }
    let file = spec.file(dir);
    let text = format!("{}\n{}", chain.trim_end(), cert_key.serialize_pem());
    // Checked before it replaces a good one: chain, key, and that they
    // belong together.
    let tmp = file.with_extension("new");
    write_private(&tmp, &text)?;
    let checked = crate::load_cert(
        &spec.id(),
        &crate::PemSpec {
            cert: tmp.clone(),
            ..crate::PemSpec::default()
        },
    );
    if let Err(e) = checked {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!("{cert_url}: {e}"));
    }
    std::fs::rename(&tmp, &file).map_err(|e| format!("{}: {e}", file.display()))?;
    say(&format!(
        "{}: certificate written to {}",
        spec.names[0],
        file.display()
    ));
    Ok(file)
}

/// When the certificate kept for `spec` under `dir` should be renewed,
/// in seconds since the epoch: now when there is none or it cannot be
/// read.
pub fn due(spec: &AcmeSpec, dir: &Path) -> i64 {
    use rustls::pki_types::pem::PemObject;
    let end = rustls::pki_types::CertificateDer::pem_file_iter(spec.file(dir))
        .ok()
        .and_then(|mut certs| certs.next())
        .and_then(Result::ok)
        .and_then(|c| crate::names::not_after(&c));
    match end {
        Some(end) => end - spec.renew_before.as_secs() as i64,
        None => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_answers_come_and_go() {
        assert_eq!(
            CHALLENGES.http_answer(b"/.well-known/acme-challenge/tok"),
            None
        );
        {
            let _p = CHALLENGES.add(
                ChallengeKind::Http01,
                "tok".into(),
                Answer::Http("tok.thumb".into()),
            );
            let cert = alpn_certificate("a.example", "tok.thumb").unwrap();
            let _q = CHALLENGES.add(
                ChallengeKind::TlsAlpn01,
                "a.example".into(),
                Answer::Alpn(cert),
            );
            assert_eq!(
                CHALLENGES
                    .http_answer(b"/.well-known/acme-challenge/tok")
                    .as_deref(),
                Some("tok.thumb")
            );
            assert_eq!(
                CHALLENGES.http_answer(b"/.well-known/acme-challenge/other"),
                None
            );
            assert_eq!(CHALLENGES.http_answer(b"/tok"), None);
            let c = CHALLENGES.alpn_cert("A.example.").unwrap();
            // The acmeIdentifier extension (1.3.6.1.5.5.7.1.31) carries
            // the digest of the key authorization.
            let der = c.cert[0].as_ref();
            let oid = [0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x01, 0x1f];
            assert!(der.windows(oid.len()).any(|w| w == oid));
            let digest = sha256(b"tok.thumb");
            assert!(der.windows(32).any(|w| w == digest));
            assert!(CHALLENGES.alpn_cert("b.example").is_none());
        }
        assert_eq!(
            CHALLENGES.http_answer(b"/.well-known/acme-challenge/tok"),
            None
        );
        assert!(CHALLENGES.alpn_cert("a.example").is_none());
    }

    #[test]
    fn pem_and_files() {
        assert_eq!(base64_std::encode(b"\xfb\xff"), "+/8=");
        let key = AccountKey::generate().unwrap();
        let text = pem("PRIVATE KEY", key.pkcs8());
        use rustls::pki_types::pem::PemObject;
        let back = rustls::pki_types::PrivatePkcs8KeyDer::from_pem_slice(text.as_bytes()).unwrap();
        assert_eq!(back.secret_pkcs8_der(), key.pkcs8());
        let spec = AcmeSpec {
            directory: "https://ca.example/dir".into(),
            contact: vec![],
            names: vec!["a.example".into(), "www.a.example".into()],
            challenges: vec![ChallengeKind::Http01],
            ca_file: None,
            renew_before: Duration::from_secs(86_400),
            retry: Duration::from_secs(60),
        };
        assert_eq!(
            spec.file(Path::new("/w")),
            PathBuf::from("/w/a.example.pem")
        );
        assert_eq!(spec.id(), "acme-a.example");
        assert_eq!(due(&spec, Path::new("/nonexistent")), 0);
    }
}
