//! TLS on client connections: the listeners of `-A` frontends and of
//! `-a host:port,HTTPS`, their handshakes (bounded by the file's
//! handshake timeout, counted when they fail), and the certificate sets
//! the `tls.cert.*` commands change while established connections carry
//! on.

use crate::transport::io::ClientStream;
use lacquer_core::counters::{Counter, COUNTERS};
use lacquer_tls::{Cert, CertSet, PemSpec, Resolver, TlsFile};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

impl ClientStream for tokio_rustls::server::TlsStream<TcpStream> {
    fn socket(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        Some(std::os::fd::AsFd::as_fd(self.get_ref().0))
    }
}

/// What a finished handshake settled, for VCL (vmod tls).
pub(crate) fn session_of(
    stream: &tokio_rustls::server::TlsStream<TcpStream>,
) -> lacquer_vcl::TlsSession {
    let conn = stream.get_ref().1;
    let version = match conn.protocol_version() {
        Some(tokio_rustls::rustls::ProtocolVersion::TLSv1_3) => "TLSv1.3",
        _ => "TLSv1.2",
    };
    let cipher = conn
        .negotiated_cipher_suite()
        .map(|s| {
            let name = format!("{:?}", s.suite());
            // rustls names TLS 1.3 suites TLS13_…; IANA's are TLS_….
            match name.strip_prefix("TLS13_") {
                Some(rest) => format!("TLS_{rest}"),
                None => name,
            }
        })
        .unwrap_or_default();
    let client = conn.peer_certificates().and_then(|chain| chain.first());
    lacquer_vcl::TlsSession {
        version,
        cipher,
        client_cert: client.is_some(),
        client_cert_cn: client.and_then(|c| lacquer_tls::names::common_name(c)),
        sni: conn.server_name().map(str::to_string),
        alpn: conn
            .alpn_protocol()
            .map(|a| String::from_utf8_lossy(a).into_owned()),
    }
}

/// Reads the PROXY header a load balancer put in front of the TLS
/// handshake, exactly (not a byte of the handshake after it), within
/// `limit`; None when it is not one (the connection is then closed).
pub(crate) async fn read_proxy_header(
    stream: &mut TcpStream,
    max: usize,
    limit: Duration,
) -> Option<lacquer_http::proxy::ProxyHeader> {
    use lacquer_http::proxy;
    use tokio::io::AsyncReadExt;
    const V2_SIGNATURE: &[u8] = b"\r\n\r\n\0\r\nQUIT\n";
    let read = async {
        // The shortest version 1 header is 15 bytes: 12 are safe to take.
        let mut buf = vec![0u8; 12];
        stream.read_exact(&mut buf).await.ok()?;
        if buf == V2_SIGNATURE {
            let mut rest = [0u8; 4];
            stream.read_exact(&mut rest).await.ok()?;
            buf.extend_from_slice(&rest);
            let len = usize::from(u16::from_be_bytes([rest[2], rest[3]]));
            if 16 + len > max {
                return None;
            }
            let mut body = vec![0u8; len];
            stream.read_exact(&mut body).await.ok()?;
            buf.extend_from_slice(&body);
        } else {
            let mut byte = [0u8; 1];
            while !buf.ends_with(b"\n") {
                if buf.len() >= proxy::V1_MAX {
                    return None;
                }
                stream.read_exact(&mut byte).await.ok()?;
                buf.push(byte[0]);
            }
        }
        match proxy::parse(&buf, max) {
            Ok(Some((header, used))) if used == buf.len() => Some(header),
            _ => None,
        }
    };
    tokio::time::timeout(limit, read).await.ok().flatten()
}

/// How a listener speaks TLS.
pub(crate) struct TlsListener {
    pub acceptor: tokio_rustls::TlsAcceptor,
    pub timeout: Duration,
    /// The TLS side of its QUIC endpoint, where the `-A` file says
    /// `quic = on` (HTTP/3 on the address's UDP port).
    pub quic: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
}

impl TlsListener {
    /// The handshake, within the timeout. When it fails (counted), the
    /// reason it closes with and what went wrong.
    pub async fn handshake(
        &self,
        stream: TcpStream,
    ) -> Result<tokio_rustls::server::TlsStream<TcpStream>, HandshakeError> {
        match tokio::time::timeout(self.timeout, self.acceptor.accept(stream)).await {
            Ok(Ok(mut tls)) => {
                COUNTERS.inc(Counter::tls_handshakes);
                // An ACME validation (TLS-ALPN-01) ends with the
                // handshake.
                if tls.get_ref().1.alpn_protocol() == Some(lacquer_tls::acme::ACME_TLS_ALPN) {
                    COUNTERS.inc(Counter::tls_acme_challenges);
                    let _ = tokio::time::timeout(self.timeout, tls.shutdown()).await;
                    return Err(HandshakeError::AcmeValidation);
                }
                Ok(tls)
            }
            Ok(Err(e)) => {
                COUNTERS.inc(Counter::tls_handshake_fail);
                Err(HandshakeError::Failed(e.to_string()))
            }
            Err(_) => {
                COUNTERS.inc(Counter::tls_handshake_timeout);
                Err(HandshakeError::TimedOut)
            }
        }
    }
}

/// Why a connection ended with its handshake.
pub(crate) enum HandshakeError {
    /// Refused or broken off: garbage, no common protocol or suite, a
    /// name without certificate under `sni-nomatch-abort`, a chain too
    /// large.
    Failed(String),
    /// Not done within the handshake timeout.
    TimedOut,
    /// An ACME server's validation, answered (not an error).
    AcmeValidation,
}

impl HandshakeError {
    /// The close reason, and the log's account of it (None: no error).
    pub fn close(&self) -> (lacquer_core::close::CloseReason, Option<String>) {
        use lacquer_core::close::CloseReason;
        match self {
            HandshakeError::Failed(why) => {
                (CloseReason::RxJunk, Some(format!("TLS handshake: {why}")))
            }
            HandshakeError::TimedOut => (
                CloseReason::RxTimeout,
                Some("TLS handshake: not done within tls-handshake-timeout".into()),
            ),
            HandshakeError::AcmeValidation => (CloseReason::RemClose, None),
        }
    }
}

/// One certificate as `tls.cert.list` shows it.
pub(crate) struct CertRow {
    pub id: String,
    /// The listeners that offer it.
    pub listeners: Vec<String>,
    pub file: String,
    /// The DNS names it is for.
    pub names: Vec<String>,
    /// In the set a `tls.cert.commit` would put in force, not yet in
    /// force.
    pub staged: bool,
    /// The end of its validity (seconds since the epoch).
    pub not_after: Option<i64>,
    /// Whether an OCSP response is stapled.
    pub ocsp: bool,
    /// One of the `-A` file's global certificates (not a frontend's own).
    pub global: bool,
}

/// Which certificates a TLS listener offers.
struct Offer {
    /// The listener's name (`-a` name or `tls<N>` for a frontend).
    name: String,
    resolver: Arc<Resolver>,
    /// The frontend's own certificates (none for `-a …,HTTPS`), and the
    /// `pem-file`s they come from.
    own: Vec<Arc<Cert>>,
    own_specs: Vec<PemSpec>,
    /// Whether the file's global certificates are offered too.
    global: bool,
}

/// The `-A` file and the certificate sets in force, for the `tls.cert.*`
/// commands.
pub(crate) struct TlsState {
    path: PathBuf,
    file: TlsFile,
    /// Where ACME keeps its account keys and certificates.
    acme_dir: PathBuf,
    inner: Mutex<Certs>,
}

struct Certs {
    offers: Vec<Offer>,
    /// The global certificates in force.
    global: Vec<Arc<Cert>>,
    /// Changes made by `tls.cert.load` / `tls.cert.discard` and not yet
    /// committed: the global set they would make.
    staged: Option<Vec<Arc<Cert>>>,
}

impl TlsState {
    /// Reads the `-A` file and its certificates, with those ACME keeps
    /// in `acme_dir`.
    pub fn read(path: &std::path::Path, acme_dir: PathBuf) -> Result<TlsState, String> {
        let file = lacquer_tls::config::read(path).map_err(|e| e.to_string())?;
        for w in &file.warnings {
            say!("Warning: {w}");
        }
        let mut global: Vec<Arc<Cert>> = lacquer_tls::global_certs(&file)?
            .into_iter()
            .map(Arc::new)
            .collect();
        global.extend(acme_certs(&file, &acme_dir));
        Ok(TlsState {
            path: path.to_path_buf(),
            file,
            acme_dir,
            inner: Mutex::new(Certs {
                offers: Vec::new(),
                global,
                staged: None,
            }),
        })
    }

    pub fn file(&self) -> &TlsFile {
        &self.file
    }

    /// The TLS side of a listener: `frontend` is the index of the file's
    /// frontend it serves, None for `-a …,HTTPS` (the global
    /// certificates and settings).
    pub fn listener(
        &self,
        name: &str,
        frontend: Option<usize>,
        http2: bool,
        early_data: bool,
    ) -> Result<TlsListener, String> {
        let (settings, own_specs, global) = match frontend {
            Some(i) => {
                let f = &self.file.frontends[i];
                (f.settings.clone(), f.pems.clone(), f.match_global_certs)
            }
            None => (self.file.settings.clone(), Vec::new(), true),
        };
        let own = load_all(&own_specs)?;
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let set = set_for(&own, global.then_some(&inner.global[..]));
        // A listener waiting for its ACME certificate starts without one.
        let waits_for_acme = global && !self.file.acme.is_empty();
        if set.certs.is_empty() && !waits_for_acme {
            return Err(format!(
                "{}: listener {name} has no certificate (give pem-file or pem-dir)",
                self.path.display()
            ));
        }
        let resolver = Arc::new(Resolver::new(Arc::new(set), settings.sni_nomatch_abort));
        let mut alpn = self.file.alpn.clone();
        // HTTP/2 is offered while `feature=+http2` (the default) when the
        // listener starts.
        if !http2 {
            alpn.retain(|a| a != "h2");
            if alpn.is_empty() {
                alpn.push("http/1.1".into());
            }
        }
        if !self.file.acme.is_empty() {
            // Last: chosen only by a client that offers nothing else.
            alpn.push(String::from_utf8_lossy(lacquer_tls::acme::ACME_TLS_ALPN).into_owned());
        }
        let config = lacquer_tls::server_config(
            &settings,
            resolver.clone(),
            &alpn,
            self.file.session_cache,
        )?;
        let quic = match settings.quic {
            true => Some(Arc::new(lacquer_tls::quic_server_config(
                &settings,
                resolver.clone(),
                self.file.session_cache,
                early_data,
            )?)),
            false => None,
        };
        inner.offers.push(Offer {
            name: name.to_string(),
            resolver,
            own,
            own_specs,
            global,
        });
        Ok(TlsListener {
            acceptor: tokio_rustls::TlsAcceptor::from(config),
            timeout: self.file.handshake_timeout,
            quic,
        })
    }

    /// `tls.cert.list`: every certificate in force, then any staged.
    pub fn list(&self) -> Vec<CertRow> {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let row = |c: &Cert, listeners: Vec<String>, staged: bool, global: bool| CertRow {
            id: c.id.clone(),
            global,
            listeners,
            file: c.file.display().to_string(),
            names: c.names.clone(),
            staged,
            not_after: c
                .key
                .end_entity_cert()
                .ok()
                .and_then(|der| lacquer_tls::names::not_after(der)),
            ocsp: c.key.ocsp.is_some(),
        };
        let global_on: Vec<String> = inner
            .offers
            .iter()
            .filter(|o| o.global)
            .map(|o| o.name.clone())
            .collect();
        let mut rows: Vec<CertRow> = inner
            .global
            .iter()
            .map(|c| row(c, global_on.clone(), false, true))
            .collect();
        for o in &inner.offers {
            rows.extend(
                o.own
                    .iter()
                    .map(|c| row(c, vec![o.name.clone()], false, false)),
            );
        }
        for c in inner.staged.iter().flatten() {
            rows.push(row(c, global_on.clone(), true, true));
        }
        rows
    }

    /// `tls.cert.load ID FILE [KEYFILE]`: stages a global certificate.
    pub fn load(&self, id: &str, cert: &str, key: Option<&str>) -> Result<(), String> {
        let spec = PemSpec {
            cert: PathBuf::from(cert),
            private_key: key.map(PathBuf::from),
            ocsp_resp_file: None,
        };
        let loaded = Arc::new(lacquer_tls::load_cert(id, &spec)?);
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let mut staged = inner.staged.take().unwrap_or_else(|| inner.global.clone());
        if staged.iter().any(|c| c.id == id) {
            inner.staged = Some(staged);
            return Err(format!("a certificate with id {id} is already loaded"));
        }
        staged.push(loaded);
        inner.staged = Some(staged);
        Ok(())
    }

    /// `tls.cert.discard ID`: stages a global certificate's removal.
    pub fn discard(&self, id: &str) -> Result<(), String> {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let mut staged = inner.staged.take().unwrap_or_else(|| inner.global.clone());
        let before = staged.len();
        staged.retain(|c| c.id != id);
        let found = staged.len() != before;
        inner.staged = Some(staged);
        match found {
            true => Ok(()),
            false => Err(format!("no certificate with id {id}")),
        }
    }

    /// `tls.cert.commit`: the staged global set goes in force for new
    /// handshakes. Refused when it would leave a listener without one.
    pub fn commit(&self) -> Result<(), String> {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let Some(staged) = inner.staged.take() else {
            return Err("nothing to commit".into());
        };
        if let Some(o) = inner
            .offers
            .iter()
            .find(|o| o.own.is_empty() && o.global && staged.is_empty())
        {
            let name = o.name.clone();
            inner.staged = Some(staged);
            return Err(format!("listener {name} would have no certificate"));
        }
        inner.global = staged;
        swap_all(&inner);
        Ok(())
    }

    /// `tls.cert.rollback`: drops what is staged.
    pub fn rollback(&self) -> Result<(), String> {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        match inner.staged.take() {
            Some(_) => Ok(()),
            None => Err("nothing to roll back".into()),
        }
    }

    /// `tls.cert.reload`: reads every certificate file of the `-A` file
    /// again (renewed certificates); any that fails leaves all as they
    /// were.
    pub fn reload(&self) -> Result<usize, String> {
        let mut global: Vec<Arc<Cert>> = lacquer_tls::global_certs(&self.file)?
            .into_iter()
            .map(Arc::new)
            .collect();
        global.extend(acme_certs(&self.file, &self.acme_dir));
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let owns = inner
            .offers
            .iter()
            .map(|o| load_all(&o.own_specs))
            .collect::<Result<Vec<_>, _>>()?;
        let count = global.len() + owns.iter().map(Vec::len).sum::<usize>();
        for (o, own) in inner.offers.iter_mut().zip(owns) {
            o.own = own;
        }
        inner.global = global;
        inner.staged = None;
        swap_all(&inner);
        Ok(count)
    }
}

impl TlsState {
    /// The `acme` sections, and where their certificates are kept.
    pub fn acme(&self) -> (&[lacquer_tls::acme::AcmeSpec], &std::path::Path) {
        (&self.file.acme, &self.acme_dir)
    }

    /// Puts a certificate ACME obtained in force for new handshakes, in
    /// place of the one with its id (and in what is staged, so that a
    /// commit does not undo it).
    pub fn install(&self, cert: Cert) {
        let cert = Arc::new(cert);
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let inner = &mut *inner;
        for set in std::iter::once(&mut inner.global).chain(inner.staged.as_mut()) {
            match set.iter().position(|c| c.id == cert.id) {
                Some(i) => set[i] = cert.clone(),
                None => set.push(cert.clone()),
            }
        }
        swap_all(inner);
    }
}

/// The certificates ACME keeps that can be read; one that cannot is
/// reported and obtained again.
fn acme_certs(file: &TlsFile, dir: &std::path::Path) -> Vec<Arc<Cert>> {
    file.acme
        .iter()
        .filter_map(|spec| {
            let path = spec.file(dir);
            if !path.exists() {
                return None;
            }
            let pem = PemSpec {
                cert: path,
                ..PemSpec::default()
            };
            match lacquer_tls::load_cert(&spec.id(), &pem) {
                Ok(c) => Some(Arc::new(c)),
                Err(e) => {
                    say!("Warning: ACME certificate {}: {e}", spec.id());
                    None
                }
            }
        })
        .collect()
}

/// Reads the certificates of `pem-file`s, ids from their file names.
fn load_all(specs: &[PemSpec]) -> Result<Vec<Arc<Cert>>, String> {
    specs
        .iter()
        .map(|p| lacquer_tls::load_cert(&lacquer_tls::cert_id(&p.cert), p).map(Arc::new))
        .collect()
}

/// A listener's set: its own certificates first, then the global ones.
fn set_for(own: &[Arc<Cert>], global: Option<&[Arc<Cert>]>) -> CertSet {
    let mut certs = own.to_vec();
    certs.extend(global.unwrap_or_default().iter().cloned());
    CertSet::new(certs)
}

fn swap_all(inner: &Certs) {
    for o in &inner.offers {
        let set = set_for(&o.own, o.global.then_some(&inner.global[..]));
        o.resolver.swap(Arc::new(set));
    }
}

/// The rustls client configurations of TLS backends, one per CA bundle
/// (as it is on disk now: a changed file is read again when a program
/// loads) and way of checking, kept for the daemon's life so that
/// programs loaded later resume the sessions earlier ones began.
fn client_config(
    ca_file: &str,
    def: &lacquer_vcl::BackendTlsDef,
) -> Result<Arc<tokio_rustls::rustls::ClientConfig>, String> {
    use std::collections::HashMap;
    use tokio_rustls::rustls;
    type OnDisk = Option<(SystemTime, u64)>;
    type Key = (
        String,
        OnDisk,
        bool,
        bool,
        bool,
        Option<(String, OnDisk)>,
        Vec<String>,
    );
    static CONFIGS: std::sync::OnceLock<Mutex<HashMap<Key, Arc<rustls::ClientConfig>>>> =
        std::sync::OnceLock::new();
    let on_disk = |file: &str| {
        std::fs::metadata(file)
            .ok()
            .and_then(|m| Some((m.modified().ok()?, m.len())))
    };
    let key = (
        ca_file.to_string(),
        on_disk(ca_file),
        def.sni,
        def.verify_peer,
        def.verify_host,
        def.certificate.as_ref().map(|c| (c.clone(), on_disk(c))),
        def.alpn.clone(),
    );
    let mut configs = CONFIGS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if let Some(c) = configs.get(&key) {
        return Ok(c.clone());
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier: Arc<dyn rustls::client::danger::ServerCertVerifier> = if def.verify_peer {
        let mut roots = rustls::RootCertStore::empty();
        use rustls::pki_types::pem::PemObject;
        let certs = rustls::pki_types::CertificateDer::pem_file_iter(ca_file)
            .map_err(|e| format!("ssl_ca_file {ca_file}: {e}"))?;
        for cert in certs {
            let cert = cert.map_err(|e| format!("ssl_ca_file {ca_file}: {e}"))?;
            // A bundle may hold certificates rustls cannot use as roots.
            let _ = roots.add(cert);
        }
        if roots.is_empty() {
            return Err(format!("ssl_ca_file {ca_file}: no CA certificate in it"));
        }
        let webpki = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            provider.clone(),
        )
        .build()
        .map_err(|e| format!("ssl_ca_file {ca_file}: {e}"))?;
        match def.verify_host {
            true => webpki,
            false => Arc::new(verify::AnyName(webpki)),
        }
    } else {
        Arc::new(verify::Unchecked(provider.clone()))
    };
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let mut config = match &def.certificate {
        None => builder.with_no_client_auth(),
        Some(file) => {
            let (chain, key) = client_identity(file)?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| format!(".certificate {file}: {e}"))?
        }
    };
    config.enable_sni = def.sni;
    config.alpn_protocols = def.alpn.iter().map(|p| p.as_bytes().to_vec()).collect();
    let config = Arc::new(config);
    // A bundle that changed on disk: its older configurations go.
    configs.retain(|k, _| k.0 != key.0 || k.1 == key.1);
    configs.insert(key, config.clone());
    Ok(config)
}

/// The chain and key a backend's `.certificate` file holds.
fn client_identity(
    file: &str,
) -> Result<
    (
        Vec<tokio_rustls::rustls::pki_types::CertificateDer<'static>>,
        tokio_rustls::rustls::pki_types::PrivateKeyDer<'static>,
    ),
    String,
> {
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let chain = CertificateDer::pem_file_iter(file)
        .map_err(|e| format!(".certificate {file}: {e}"))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!(".certificate {file}: {e}"))?;
    if chain.is_empty() {
        return Err(format!(".certificate {file}: no certificate in it"));
    }
    let key = PrivateKeyDer::from_pem_file(file)
        .map_err(|e| format!(".certificate {file}: no private key ({e})"))?;
    Ok((chain, key))
}

/// How a backend with `.ssl = 1` speaks TLS: to `host` (its
/// `.host_header`, else `.host`), checked against `ssl_ca_file`, showing
/// its `.certificate` when it has one.
pub(crate) fn backend_tls(
    def: &lacquer_vcl::BackendTlsDef,
    host: &str,
    ca_file: &str,
) -> Result<lacquer_backend::tls::BackendTls, String> {
    use tokio_rustls::rustls::pki_types::ServerName;
    let config = client_config(ca_file, def)?;
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let name = ServerName::try_from(bare.to_string())
        .map_err(|_| format!("\"{host}\" is no host name for TLS"))?;
    Ok(lacquer_backend::tls::BackendTls {
        connector: tokio_rustls::TlsConnector::from(config),
        name,
        key: format!(
            "{bare} sni={} peer={} host={} ca={ca_file} cert={} alpn={}",
            def.sni,
            def.verify_peer,
            def.verify_host,
            def.certificate.as_deref().unwrap_or(""),
            def.alpn.join(",")
        ),
        offers_h2: def.alpn.iter().any(|p| p == "h2"),
    })
}

/// The certificate checks `.ssl_verify_peer = 0` and
/// `.ssl_verify_host = 0` ask for.
mod verify {
    use std::sync::Arc;
    use tokio_rustls::rustls;
    use tokio_rustls::rustls::client::danger::{
        HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier,
    };
    use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName, UnixTime};
    use tokio_rustls::rustls::{DigitallySignedStruct, SignatureScheme};

    /// The chain is checked, the name is not (`.ssl_verify_host = 0`).
    #[derive(Debug)]
    pub(super) struct AnyName(pub Arc<rustls::client::WebPkiServerVerifier>);

    impl ServerCertVerifier for AnyName {
        fn verify_server_cert(
            &self,
            end_entity: &CertificateDer<'_>,
            intermediates: &[CertificateDer<'_>],
            server_name: &ServerName<'_>,
            ocsp: &[u8],
            now: UnixTime,
        ) -> Result<ServerCertVerified, rustls::Error> {
            match self
                .0
                .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
            {
                Err(rustls::Error::InvalidCertificate(
                    rustls::CertificateError::NotValidForName
                    | rustls::CertificateError::NotValidForNameContext { .. },
                )) => Ok(ServerCertVerified::assertion()),
                other => other,
            }
        }

        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            self.0.verify_tls12_signature(message, cert, dss)
        }

        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            self.0.verify_tls13_signature(message, cert, dss)
        }

        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.0.supported_verify_schemes()
        }
    }

    /// No certificate check (`.ssl_verify_peer = 0`); the handshake's
    /// signatures are still checked against the certificate shown.
    #[derive(Debug)]
    pub(super) struct Unchecked(pub Arc<rustls::crypto::CryptoProvider>);

    impl ServerCertVerifier for Unchecked {
        fn verify_server_cert(
            &self,
            _: &CertificateDer<'_>,
            _: &[CertificateDer<'_>],
            _: &ServerName<'_>,
            _: &[u8],
            _: UnixTime,
        ) -> Result<ServerCertVerified, rustls::Error> {
            Ok(ServerCertVerified::assertion())
        }

        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls12_signature(
                message,
                cert,
                dss,
                &self.0.signature_verification_algorithms,
            )
        }

        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls13_signature(
                message,
                cert,
                dss,
                &self.0.signature_verification_algorithms,
            )
        }

        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.0.signature_verification_algorithms.supported_schemes()
        }
    }
}
