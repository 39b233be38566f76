//! TLS on client connections end to end: an `-A` file in Hitch's syntax,
//! the certificate chosen by SNI, `-a …,HTTPS`, certificates swapped by
//! the `tls.cert.*` commands while an established connection carries on,
//! and handshakes that are garbage or stall. Certificates come from a
//! throwaway CA made for each test.

use crate::harness::{eventually, Lacquer};
use crate::origin::{Origin, Reply};
use rustls::pki_types::{CertificateDer, ServerName};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A CA and the leaf certificates it signs, written as PEM files.
pub(crate) struct Pki {
    dir: PathBuf,
    pub(crate) ca: rcgen::Certificate,
    ca_key: rcgen::KeyPair,
}

impl Pki {
    fn new(dir: &Path) -> Pki {
        std::fs::create_dir_all(dir).unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "Lacquer test CA");
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let ca = params.self_signed(&ca_key).unwrap();
        Pki {
            dir: dir.to_path_buf(),
            ca,
            ca_key,
        }
    }

    /// A certificate for `names`, key and chain in `file`.
    fn leaf(&self, file: &str, names: &[&str]) -> PathBuf {
        let key = rcgen::KeyPair::generate().unwrap();
        let params =
            rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        let cert = params.signed_by(&key, &self.ca, &self.ca_key).unwrap();
        let path = self.dir.join(file);
        std::fs::write(&path, format!("{}{}", cert.pem(), key.serialize_pem())).unwrap();
        path
    }

    pub(crate) fn client(&self) -> Arc<rustls::ClientConfig> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca.der().clone()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Arc::new(config)
    }
}

/// A TLS connection to `addr` naming `sni`.
pub(crate) fn connect(
    pki: &Pki,
    addr: SocketAddr,
    sni: &str,
) -> std::io::Result<rustls::StreamOwned<rustls::ClientConnection, TcpStream>> {
    let tcp = TcpStream::connect(addr)?;
    tcp.set_read_timeout(Some(Duration::from_secs(20)))?;
    let name = ServerName::try_from(sni.to_string()).unwrap();
    let conn = rustls::ClientConnection::new(pki.client(), name).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    // Drive the handshake to its end.
    while tls.conn.is_handshaking() {
        tls.conn.complete_io(&mut tls.sock)?;
    }
    Ok(tls)
}

/// The names of the certificate the server showed.
fn served_names(tls: &rustls::StreamOwned<rustls::ClientConnection, TcpStream>) -> Vec<String> {
    let chain: &[CertificateDer<'_>] = tls.conn.peer_certificates().unwrap();
    lacquer_tls::names::dns_names(&chain[0])
}

/// One keep-alive GET on an open connection: the head and the body.
pub(crate) fn get(
    tls: &mut rustls::StreamOwned<rustls::ClientConnection, TcpStream>,
    url: &str,
) -> (String, String) {
    write!(tls, "GET {url} HTTP/1.1\r\nHost: example\r\n\r\n").unwrap();
    tls.flush().unwrap();
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        assert_eq!(tls.read(&mut byte).unwrap(), 1, "response head");
        buf.push(byte[0]);
    }
    let head = String::from_utf8(buf).unwrap();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .expect("a length")
        .trim()
        .parse()
        .unwrap();
    let mut body = vec![0u8; len];
    tls.read_exact(&mut body).unwrap();
    (head, String::from_utf8(body).unwrap())
}

fn setup(name: &str, extra: &str) -> (Pki, Origin, Lacquer) {
    setup_with(name, extra, None)
}

pub(crate) fn setup_with(name: &str, extra: &str, vcl: Option<&str>) -> (Pki, Origin, Lacquer) {
    let origin = Origin::start(|req| Reply::ok(&format!("page {}", req.url)));
    setup_origin(name, extra, vcl, origin)
}

/// As [`setup_with`], in front of `origin` (backend `b` in the VCL).
pub(crate) fn setup_origin(
    name: &str,
    extra: &str,
    vcl: Option<&str>,
    origin: Origin,
) -> (Pki, Origin, Lacquer) {
    setup_args(name, extra, vcl, origin, &[])
}

/// As [`setup_origin`], with more `lacquer serve` arguments.
pub(crate) fn setup_args(
    name: &str,
    extra: &str,
    vcl: Option<&str>,
    origin: Origin,
    more: &[&str],
) -> (Pki, Origin, Lacquer) {
    let dir = std::env::temp_dir().join(format!("lacquer-tls-{}-{name}", std::process::id()));
    let pki = Pki::new(&dir);
    pki.leaf("a.pem", &["a.example"]);
    pki.leaf("b.pem", &["*.b.example", "b.example"]);
    std::fs::write(dir.join("ca.pem"), pki.ca.pem()).unwrap();
    let conf = dir.join("hitch.conf");
    std::fs::write(
        &conf,
        format!(
            "# as hitch would have it\n\
             frontend = \"[127.0.0.1]:0\"\n\
             backend = \"[127.0.0.1]:6086\"\n\
             write-proxy-v2 = on\n\
             pem-file = \"a.pem\"\n\
             pem-file = \"b.pem\"\n\
             alpn-protos = \"http/1.1\"\n\
             {extra}"
        ),
    )
    .unwrap();
    let mut args = vec![
        "-A",
        conf.to_str().unwrap(),
        "-a",
        "secure=127.0.0.1:0,HTTPS",
    ];
    args.extend_from_slice(more);
    let lq = match vcl {
        Some(text) => {
            let backend = format!(
                "vcl 4.1;\nbackend b {{ .host = \"{}\"; .port = \"{}\"; }}\n",
                origin.addr.ip(),
                origin.addr.port()
            );
            Lacquer::spawn(&args, Some(format!("{backend}{text}")))
        }
        None => Lacquer::start(origin.addr, &args),
    };
    (pki, origin, lq)
}

#[test]
fn hitch_configuration_serves_https_and_sni_picks_the_certificate() {
    let (pki, _origin, lq) = setup("sni", "");
    for listener in ["tls0", "secure"] {
        let addr = lq.listen(listener);
        let mut tls = connect(&pki, addr, "a.example").unwrap();
        assert_eq!(served_names(&tls), vec!["a.example"]);
        let (head, body) = get(&mut tls, "/x");
        assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
        assert_eq!(body, "page /x");
        // Keep-alive over TLS: a second request on the connection, a hit.
        assert_eq!(get(&mut tls, "/x").1, "page /x");

        let tls = connect(&pki, addr, "www.b.example").unwrap();
        assert_eq!(served_names(&tls), vec!["*.b.example", "b.example"]);
        // A name no certificate has: the first one (the client refuses it).
        match connect(&pki, addr, "c.example") {
            Ok(_) => panic!("a certificate for another name was accepted"),
            Err(e) => assert!(e.to_string().contains("certificate"), "{e}"),
        }
    }
    // The plain listener still speaks plain HTTP.
    assert_eq!(lq.get("/plain").status, 200);
    let list = lq.cli_ok("tls.cert.list");
    assert!(
        list.contains("a.pem") && list.contains("*.b.example"),
        "{list}"
    );
}

#[test]
fn sessions_resume_on_tls12_and_tls13() {
    let (pki, _origin, lq) = setup("resume", "");
    let addr = lq.listen("tls0");
    for version in [&rustls::version::TLS12, &rustls::version::TLS13] {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(pki.ca.der().clone()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        // One client config keeps its sessions (rustls's memory store).
        let config = Arc::new(
            rustls::ClientConfig::builder_with_provider(provider)
                .with_protocol_versions(&[version])
                .unwrap()
                .with_root_certificates(roots)
                .with_no_client_auth(),
        );
        let mut kinds = Vec::new();
        for _ in 0..3 {
            let tcp = TcpStream::connect(addr).unwrap();
            tcp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            let name = ServerName::try_from("a.example".to_string()).unwrap();
            let conn = rustls::ClientConnection::new(config.clone(), name).unwrap();
            let mut tls = rustls::StreamOwned::new(conn, tcp);
            // A request and its answer: a TLS 1.3 ticket comes after the
            // handshake, before the response.
            assert_eq!(get(&mut tls, "/r").1, "page /r");
            kinds.push(tls.conn.handshake_kind());
        }
        use rustls::HandshakeKind::{Full, Resumed};
        assert_eq!(
            kinds,
            [Some(Full), Some(Resumed), Some(Resumed)],
            "{version:?}"
        );
    }
}

#[test]
fn certificates_change_for_new_handshakes_while_connections_carry_on() {
    let (pki, _origin, lq) = setup("swap", "");
    let addr = lq.listen("tls0");
    let mut old = connect(&pki, addr, "a.example").unwrap();
    assert_eq!(get(&mut old, "/1").1, "page /1");

    // A certificate for a new name: staged, then committed.
    let c = pki.leaf("c.pem", &["c.example"]);
    lq.cli_ok(&format!("tls.cert.load cee {}", c.display()));
    assert!(
        connect(&pki, addr, "c.example").is_err(),
        "not before the commit"
    );
    assert!(lq.cli_ok("tls.cert.list").contains("staged"));
    let listed = lq.cli_ok("tls.cert.list -j");
    assert!(lacquer_vtc::json::is_json(&listed), "{listed}");
    assert!(
        listed.contains("\"id\": \"cee\",\n    \"state\": \"staged\""),
        "{listed}"
    );
    lq.cli_ok("tls.cert.commit");
    let tls = connect(&pki, addr, "c.example").unwrap();
    assert_eq!(served_names(&tls), vec!["c.example"]);
    // The connection made before carries on.
    assert_eq!(get(&mut old, "/2").1, "page /2");

    // Staged and rolled back: nothing changes.
    lq.cli_ok("tls.cert.discard cee");
    lq.cli_ok("tls.cert.rollback");
    assert!(connect(&pki, addr, "c.example").is_ok());
    assert_eq!(lq.cli_run("tls.cert.discard nosuch").0, 300);
    assert_eq!(lq.cli_run("tls.cert.load bad /nonexistent.pem").0, 300);

    // A renewed file is read again by reload; a broken one is refused
    // with a message and the certificates in force stay.
    pki.leaf("a.pem", &["a.example", "renewed.a.example"]);
    assert!(lq.cli_ok("tls.cert.reload").contains("certificates read"));
    let tls = connect(&pki, addr, "renewed.a.example").unwrap();
    assert!(served_names(&tls).contains(&"renewed.a.example".to_string()));
    std::fs::write(
        pki.dir.join("b.pem"),
        "-----BEGIN CERTIFICATE-----\nbroken\n",
    )
    .unwrap();
    let (status, body) = lq.cli_run("tls.cert.reload");
    assert_eq!(status, 300, "{body}");
    assert!(body.contains("b.pem"), "{body}");
    assert!(connect(&pki, addr, "www.b.example").is_ok());
    assert_eq!(get(&mut old, "/3").1, "page /3");
}

#[test]
fn garbage_and_stalled_handshakes_close_only_their_connection() {
    let (pki, _origin, lq) = setup(
        "hostile",
        "tls-handshake-timeout = 0.5\nsni-nomatch-abort = on\n",
    );
    let addr = lq.listen("tls0");
    // Not TLS at all.
    let mut raw = TcpStream::connect(addr).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    raw.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut sink = Vec::new();
    let _ = raw.read_to_end(&mut sink);
    assert!(!String::from_utf8_lossy(&sink).contains("200"), "{sink:?}");

    // Says nothing: closed at the handshake timeout.
    let mut quiet = TcpStream::connect(addr).unwrap();
    quiet
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let began = Instant::now();
    assert_eq!(quiet.read(&mut [0u8; 16]).unwrap_or(0), 0);
    assert!(began.elapsed() < Duration::from_secs(5));

    // sni-nomatch-abort: an unknown name ends the handshake.
    assert!(connect(&pki, addr, "nobody.example").is_err());
    // Others are untouched.
    let mut tls = connect(&pki, addr, "b.example").unwrap();
    assert_eq!(get(&mut tls, "/ok").1, "page /ok");
    // Counted: the refused and the stalled handshakes, and the good ones.
    assert!(eventually(Duration::from_secs(5), || {
        lq.counter("MAIN.tls_handshake_fail") >= 2
            && lq.counter("MAIN.tls_handshake_timeout") == 1
            && lq.counter("MAIN.tls_handshakes") >= 1
    }));
    // Each has a session in the log with the reason.
    let log = std::process::Command::new(env!("CARGO_BIN_EXE_lacquer"))
        .args(["log", "-d", "-g", "raw", "-i", "Error,SessClose", "-n"])
        .arg(&lq.workdir)
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&log.stdout);
    for want in [
        "TLS handshake: not done within tls-handshake-timeout",
        "SessClose      c RX_TIMEOUT",
        "SessClose      c RX_JUNK",
        "Error          c TLS handshake: ",
    ] {
        assert!(log.contains(want), "{want} in\n{log}");
    }
}

#[test]
fn a_huge_client_certificate_chain_closes_only_its_connection() {
    let (pki, _origin, lq) = setup(
        "hugechain",
        "client-verify = optional\nclient-verify-ca = \"ca.pem\"\n",
    );
    let addr = lq.listen("tls0");
    // 300 certificates, about 120 KiB: more than a handshake message
    // may hold.
    let (mut chain, key) = pki.client_identity("big");
    chain.extend(std::iter::repeat_n(pki.ca.der().clone(), 300));
    let mut roots = rustls::RootCertStore::empty();
    roots.add(pki.ca.der().clone()).unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_client_auth_cert(chain, key)
    .unwrap();
    let refused = get_with(Arc::new(config), addr);
    assert!(refused.is_err() || !refused.unwrap().contains("200"));
    // Others are served.
    let mut tls = connect(&pki, addr, "a.example").unwrap();
    assert_eq!(get(&mut tls, "/after").1, "page /after");
}

#[test]
fn vcl_sees_the_handshake() {
    let vcl = r#"
import tls;
sub vcl_deliver {
    set resp.http.is-tls = tls.is_tls();
    set resp.http.version = tls.version();
    set resp.http.cipher = tls.cipher();
    set resp.http.sni = tls.authority();
    set resp.http.alpn = tls.alpn();
    set resp.http.proto = req.http.X-Forwarded-Proto;
    set resp.http.socket = local.socket;
}
"#;
    let (pki, _origin, lq) = setup_with("vcl", "", Some(vcl));
    let mut tls = connect(&pki, lq.listen("tls0"), "a.example").unwrap();
    // A client's own X-Forwarded-Proto does not survive TLS's.
    write!(
        tls,
        "GET /v HTTP/1.1\r\nHost: a.example\r\nX-Forwarded-Proto: gopher\r\n\r\n"
    )
    .unwrap();
    let mut buf = vec![0u8; 4096];
    let n = tls.read(&mut buf).unwrap();
    let head = String::from_utf8_lossy(&buf[..n]).into_owned();
    for want in [
        "is-tls: true",
        "version: TLSv1.3",
        "cipher: TLS_",
        "sni: a.example",
        "alpn: http/1.1",
        "proto: https",
        "socket: tls0",
    ] {
        assert!(head.contains(want), "{want} in\n{head}");
    }
    // Without TLS: nothing of it.
    let plain = lq.get("/v");
    assert_eq!(plain.header("is-tls"), Some("false"));
    assert_eq!(plain.header("proto"), Some(""));
}

/// An idle TLS connection to a backend that one worker left is taken by
/// the other and used from there, with no fetch failing on it (a socket
/// new to a worker's reactor is not yet known to be writable, and TLS
/// kept the request's records until the exchange flushed them).
#[test]
fn a_tls_backend_connection_serves_fetches_on_every_worker() {
    let (pki, _origin, tls_origin) = setup("crossworker", "");
    let port = tls_origin.listen("tls0").port();
    let ca = pki.dir.join("ca.pem");
    let vcl = format!(
        "vcl 4.1;\nbackend b {{ .host = \"127.0.0.1\"; .port = \"{port}\"; .ssl = 1; .host_header = \"a.example\"; }}\n"
    );
    let ca = format!("ssl_ca_file={}", ca.to_str().unwrap());
    let lq = Lacquer::spawn(&["-p", &ca, "-p", "workers=2"], Some(vcl));
    // A client connection each: the kernel spreads them over both
    // workers, and each fetch takes the one idle backend connection.
    for i in 0..16 {
        let r = lq.get(&format!("/w{i}"));
        assert_eq!((r.status, r.text()), (200, format!("page /w{i}")));
    }
    assert!(eventually(Duration::from_secs(5), || lq
        .counter("MAIN.backend_reuse")
        >= 15));
    assert_eq!(
        lq.counter("MAIN.backend_retry"),
        0,
        "a reused connection failed"
    );
}

#[test]
fn backends_speak_tls_checked_as_asked() {
    // The TLS origin: a Lacquer with a frontend, in front of a plain one.
    let (pki, _origin, tls_origin) = setup("backend", "");
    let port = tls_origin.listen("tls0").port();
    let ca = pki.dir.join("ca.pem");
    let vcl = |attrs: &str, initial: u32| {
        format!(
            "vcl 4.1;\n\
             backend b {{ .host = \"127.0.0.1\"; .port = \"{port}\"; .ssl = 1; {attrs}\n\
               .probe = {{ .url = \"/probe\"; .interval = 0.2s; .window = 2; .threshold = 1; .initial = {initial}; }} }}\n"
        )
    };
    // Healthy from the start, so that the fetch itself is what fails.
    let front = |attrs: &str, ca_file: &str| {
        Lacquer::spawn(
            &["-p", &format!("ssl_ca_file={ca_file}")],
            Some(vcl(attrs, 1)),
        )
    };
    let ca = ca.to_str().unwrap();

    // Checked against the CA, for the name the certificate has. The
    // probe (sick until it has succeeded) speaks TLS too.
    let lq = Lacquer::spawn(
        &["-p", &format!("ssl_ca_file={ca}")],
        Some(vcl(".host_header = \"a.example\";", 0)),
    );
    assert!(eventually(Duration::from_secs(10), || {
        lq.cli_ok("backend.list").contains("healthy")
    }));
    let r = lq.get("/over-tls");
    assert_eq!((r.status, r.text()), (200, "page /over-tls".to_string()));
    assert_eq!(lq.get("/again").status, 200);
    // The second fetch went over the first one's TLS connection.
    assert!(eventually(Duration::from_secs(5), || {
        let log = std::process::Command::new(env!("CARGO_BIN_EXE_lacquer"))
            .args(["log", "-d", "-g", "raw", "-i", "BackendOpen", "-n"])
            .arg(&lq.workdir)
            .output()
            .unwrap();
        String::from_utf8_lossy(&log.stdout).contains(" reuse")
    }));

    // A name the certificate does not have: refused, unless the name is
    // not checked.
    let lq = front(".host_header = \"wrong.example\";", ca);
    assert_eq!(lq.get("/x").status, 503);
    let lq = front(
        ".host_header = \"wrong.example\"; .ssl_verify_host = 0;",
        ca,
    );
    assert_eq!(lq.get("/x").status, 200);

    // A CA bundle without the issuer: refused, unless the peer is not
    // checked.
    let other = Pki::new(&pki.dir.join("other"));
    let other_ca = pki.dir.join("other-ca.pem");
    std::fs::write(&other_ca, other.ca.pem()).unwrap();
    let lq = front(".host_header = \"a.example\";", other_ca.to_str().unwrap());
    assert_eq!(lq.get("/x").status, 503);
    let lq = front(
        ".host_header = \"a.example\"; .ssl_verify_peer = 0;",
        other_ca.to_str().unwrap(),
    );
    assert_eq!(lq.get("/x").status, 200);
}

#[test]
fn backends_speak_http2_when_alpn_settles_on_it() {
    // The TLS origin offers h2 and says which protocol each request came
    // in with.
    let (pki, _origin, tls_origin) = setup_with(
        "alpn",
        "alpn-protos = \"h2, http/1.1\"\n",
        Some("sub vcl_deliver { set resp.http.x-proto = req.proto; }\n"),
    );
    let port = tls_origin.listen("tls0").port();
    let ca = format!("ssl_ca_file={}", pki.dir.join("ca.pem").display());
    let front = |attrs: &str| {
        Lacquer::spawn(
            &["-p", &ca],
            Some(format!(
                "vcl 4.1;\nimport tls;\n\
                 backend b {{ .host = \"127.0.0.1\"; .port = \"{port}\"; .ssl = 1;\n\
                   .host_header = \"a.example\"; {attrs}\n\
                   .probe = {{ .url = \"/p\"; .interval = 0.2s; .window = 1; .threshold = 1; .initial = 0; }} }}\n\
                 sub vcl_backend_response {{ set beresp.http.x-alpn = tls.alpn(); }}\n"
            )),
        )
    };
    // By default h2 is offered first, and taken; the probe speaks it too.
    let lq = front("");
    assert!(eventually(Duration::from_secs(10), || {
        lq.cli_ok("backend.list").contains("healthy")
    }));
    let r = lq.get("/a");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("x-proto"), Some("HTTP/2.0"));
    assert_eq!(r.header("x-alpn"), Some("h2"));
    // `.alpn` may hold it to HTTP/1.1.
    let lq = front(".alpn = \"http/1.1\";");
    assert!(eventually(Duration::from_secs(10), || {
        lq.cli_ok("backend.list").contains("healthy")
    }));
    let r = lq.get("/b");
    assert_eq!(r.header("x-proto"), Some("HTTP/1.1"));
    assert_eq!(r.header("x-alpn"), Some("http/1.1"));
}

#[test]
fn backends_may_be_shown_a_client_certificate() {
    // The TLS origin wants a certificate of its CA's, and says whose.
    let vcl = "import tls;\nsub vcl_deliver {\n  set resp.http.peer = tls.client_cert_cn();\n}\n";
    let (pki, _origin, tls_origin) = setup_with(
        "mtls",
        "client-verify = required\nclient-verify-ca = \"ca.pem\"\n",
        Some(vcl),
    );
    let port = tls_origin.listen("tls0").port();
    let ca = pki.dir.join("ca.pem");
    let client = pki.client_pem("client.pem", "edge-cache");
    let front = |attrs: &str| {
        Lacquer::spawn(
            &["-p", &format!("ssl_ca_file={}", ca.display())],
            Some(format!(
                "vcl 4.1;\nimport tls;\n\
                 backend b {{ .host = \"127.0.0.1\"; .port = \"{port}\"; .ssl = 1;\n\
                   .host_header = \"a.example\"; {attrs} }}\n\
                 sub vcl_backend_response {{\n\
                   set beresp.http.be-tls = tls.is_tls() + \" \" + tls.version() + \" \" + tls.cipher();\n\
                 }}\n"
            )),
        )
    };
    let lq = front(&format!(".certificate = \"{}\";", client.display()));
    let r = lq.get("/mutual");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("peer"), Some("edge-cache"));
    // vmod tls on the backend side tells of the backend connection.
    let be = r.header("be-tls").unwrap_or_default();
    assert!(be.starts_with("true TLSv1.3 TLS_"), "{be}");
    // Without one, the origin refuses the handshake: a 503.
    let lq = front("");
    assert_eq!(lq.get("/mutual").status, 503);
}

impl Pki {
    /// A client's certificate for `cn`, signed by the CA.
    fn client_identity(
        &self,
        cn: &str,
    ) -> (
        Vec<CertificateDer<'static>>,
        rustls::pki_types::PrivateKeyDer<'static>,
    ) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        let cert = params.signed_by(&key, &self.ca, &self.ca_key).unwrap();
        let der = rustls::pki_types::PrivatePkcs8KeyDer::from(key.serialize_der());
        (vec![cert.der().clone()], der.into())
    }

    /// A client's certificate for `cn` with its key, as one PEM file.
    fn client_pem(&self, file: &str, cn: &str) -> PathBuf {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        let cert = params.signed_by(&key, &self.ca, &self.ca_key).unwrap();
        let path = self.dir.join(file);
        std::fs::write(&path, format!("{}{}", cert.pem(), key.serialize_pem())).unwrap();
        path
    }

    /// A client that shows a certificate of this CA's and trusts the
    /// server's (`server`'s CA).
    pub(crate) fn client_with_cert(&self, cn: &str, server: &Pki) -> Arc<rustls::ClientConfig> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(server.ca.der().clone()).unwrap();
        let (chain, key) = self.client_identity(cn);
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        Arc::new(
            rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots)
                .with_client_auth_cert(chain, key)
                .unwrap(),
        )
    }
}

/// A GET over TLS with the given client configuration: the response
/// head, or the error the handshake or request met.
fn get_with(config: Arc<rustls::ClientConfig>, addr: SocketAddr) -> Result<String, String> {
    let tcp = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    tcp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let name = ServerName::try_from("a.example").unwrap();
    let conn = rustls::ClientConnection::new(config, name).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    write!(tls, "GET /c HTTP/1.1\r\nHost: a.example\r\n\r\n").map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; 4096];
    let n = tls.read(&mut buf).map_err(|e| e.to_string())?;
    Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
}

#[test]
fn client_certificates_optional_or_required() {
    let vcl = r#"
import tls;
sub vcl_deliver {
    set resp.http.has-cert = tls.has_client_cert();
    set resp.http.cert-cn = tls.client_cert_cn();
}
"#;
    // Optional on the HTTPS listener (the global settings), required on
    // the frontend.
    let (pki, _origin, lq) = setup_with(
        "clientcert",
        "client-verify = optional\nclient-verify-ca = \"ca.pem\"\n\
         frontend = {\n  host = \"127.0.0.1\"\n  port = \"0\"\n  client-verify = required\n  client-verify-ca = \"ca.pem\"\n}\n",
        Some(vcl),
    );
    let optional = lq.listen("secure");
    let required = lq.listen("tls1");
    let head = get_with(pki.client(), optional).unwrap();
    assert!(head.contains("has-cert: false"), "{head}");
    let head = get_with(pki.client_with_cert("alice", &pki), optional).unwrap();
    assert!(
        head.contains("has-cert: true") && head.contains("cert-cn: alice"),
        "{head}"
    );

    assert!(
        get_with(pki.client(), required).is_err(),
        "no certificate, no service"
    );
    let head = get_with(pki.client_with_cert("bob", &pki), required).unwrap();
    assert!(head.contains("cert-cn: bob"), "{head}");
    // A certificate from another CA is refused.
    let other = Pki::new(&pki.dir.join("other"));
    assert!(get_with(other.client_with_cert("mallory", &pki), required).is_err());
}

/// Lacquer with a listener `lb` that takes a PROXY header and then TLS
/// (certificate `a.pem` for a.example), in front of an origin answering
/// `page URL`, its VCL `vcl` after the backend, `more` arguments after
/// the listener's.
fn proxied_tls(name: &str, vcl: &str, more: &[&str]) -> (Pki, Origin, Lacquer) {
    let dir = std::env::temp_dir().join(format!("lacquer-tls-{}-{name}", std::process::id()));
    let pki = Pki::new(&dir);
    pki.leaf("a.pem", &["a.example"]);
    let conf = dir.join("t.conf");
    std::fs::write(&conf, "pem-file = \"a.pem\"\n").unwrap();
    let origin = Origin::start(|req| Reply::ok(&format!("page {}", req.url)));
    let backend = format!(
        "vcl 4.1;\nbackend b {{ .host = \"{}\"; .port = \"{}\"; }}\n",
        origin.addr.ip(),
        origin.addr.port()
    );
    let mut args = vec![
        "-A",
        conf.to_str().unwrap(),
        "-a",
        "lb=127.0.0.1:0,PROXY,HTTPS",
    ];
    args.extend_from_slice(more);
    let lq = Lacquer::spawn(&args, Some(format!("{backend}{vcl}")));
    (pki, origin, lq)
}

#[test]
fn a_proxy_header_may_come_before_the_handshake() {
    let vcl = "sub vcl_deliver {\n  set resp.http.client = client.ip;\n  set resp.http.remote = remote.ip;\n}\n";
    let (pki, _origin, lq) = proxied_tls("proxied", vcl, &[]);
    let addr = lq.listen("lb");
    for header in [
        &b"PROXY TCP4 192.0.2.7 198.51.100.1 40000 443\r\n"[..],
        &lacquer_http_proxy_v2()[..],
    ] {
        let mut tcp = TcpStream::connect(addr).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        tcp.write_all(header).unwrap();
        let name = ServerName::try_from("a.example").unwrap();
        let conn = rustls::ClientConnection::new(pki.client(), name).unwrap();
        let mut tls = rustls::StreamOwned::new(conn, tcp);
        let (head, body) = get(&mut tls, "/p");
        assert_eq!(body, "page /p");
        assert!(head.contains("client: 192.0.2.7"), "{head}");
        assert!(head.contains("remote: 127.0.0.1"), "{head}");
    }
    // No header: the connection is closed unanswered.
    let mut raw = TcpStream::connect(addr).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    raw.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut sink = Vec::new();
    let _ = raw.read_to_end(&mut sink);
    assert!(sink.is_empty(), "{sink:?}");
}

/// A PROXY version 2 header for 192.0.2.7:40000 -> 198.51.100.1:443.
fn lacquer_http_proxy_v2() -> Vec<u8> {
    let mut h = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
    h.extend_from_slice(&[0x21, 0x11, 0x00, 12]);
    h.extend_from_slice(&[192, 0, 2, 7, 198, 51, 100, 1]);
    h.extend_from_slice(&40000u16.to_be_bytes());
    h.extend_from_slice(&443u16.to_be_bytes());
    h
}

/// A worker that falls behind gives up the connections waiting in its
/// queue: the watcher takes them and another worker reads their PROXY
/// headers, makes their handshakes and serves them as their listener
/// would (`worker_stall_limit`).
#[test]
fn proxied_tls_connections_a_stalled_worker_leaves_waiting_are_served_by_another() {
    let vcl = "sub vcl_deliver {\n  set resp.http.client = client.ip;\n  set resp.http.socket = local.socket;\n}\n";
    let (pki, _origin, lq) = proxied_tls(
        "stalled",
        vcl,
        &["-p", "workers=2", "-p", "worker_stall_limit=0.05"],
    );
    let addr = lq.listen("lb");
    let config = pki.client();
    let fetch = move |url: String| {
        let mut tcp = TcpStream::connect(addr).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        tcp.write_all(b"PROXY TCP4 192.0.2.7 198.51.100.1 40000 443\r\n")
            .unwrap();
        let name = ServerName::try_from("a.example").unwrap();
        let conn = rustls::ClientConnection::new(config.clone(), name).unwrap();
        let mut tls = rustls::StreamOwned::new(conn, tcp);
        get(&mut tls, &url)
    };
    assert_eq!(fetch("/warm".into()).1, "page /warm");
    lq.cli_ok("debug.worker.stall 0 8");
    let began = Instant::now();
    // Sixteen connections, from as many ports: the chance that the kernel
    // sends none to the held worker is 2^-16.
    let clients: Vec<_> = (0..16)
        .map(|i| {
            let fetch = fetch.clone();
            std::thread::spawn(move || fetch(format!("/held{i}")))
        })
        .collect();
    for (i, client) in clients.into_iter().enumerate() {
        let (head, body) = client.join().unwrap();
        assert_eq!(body, format!("page /held{i}"));
        assert!(head.contains("client: 192.0.2.7"), "{head}");
        assert!(head.contains("socket: lb"), "{head}");
    }
    crate::harness::none_waited_for_the_held_worker(&lq, began);
}
