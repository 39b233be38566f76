//! Tests of the `-A` file reader.

use super::*;

#[test]
fn a_hitch_file_reads_with_its_proxy_keys_ignored() {
    let text = r#"
# A hitch.conf as packaged
frontend = "[*]:443"
frontend = {
    host = "127.0.0.1"
    port = "8443"
    pem-file = "site.pem"
    tls-protos = TLSv1.3
    sni-nomatch-abort = on
    quic = on
}
backend = "[127.0.0.1]:6086"
workers = 4
write-proxy-v2 = on
pem-file = "/etc/tls/default.pem"
pem-file = {
    cert = "a.crt"
    private-key = "a.key"
    ocsp-resp-file = "a.ocsp"
}
ciphers = "EECDH+AESGCM:EDH+AESGCM"
prefer-server-ciphers = on
alpn-protos = "h2, http/1.1"
session-cache = 100
ssl-handshake-timeout = 5
"#;
    let f = parse(text, "hitch.conf", Some(Path::new("/etc/hitch"))).unwrap();
    assert_eq!(f.frontends.len(), 2);
    assert_eq!(
        (f.frontends[0].host.as_str(), f.frontends[0].port),
        ("", 443)
    );
    assert!(f.frontends[0].match_global_certs);
    let fe = &f.frontends[1];
    assert_eq!((fe.host.as_str(), fe.port), ("127.0.0.1", 8443));
    assert_eq!(fe.pems[0].cert, PathBuf::from("/etc/hitch/site.pem"));
    assert!(!fe.match_global_certs);
    assert_eq!(fe.settings.protos, vec!["TLSv1.3"]);
    assert!(fe.settings.sni_nomatch_abort);
    // Lacquer's own: this frontend speaks HTTP/3 too, the other not.
    assert!(fe.settings.quic);
    assert!(!f.settings.quic);
    assert_eq!(f.pems.len(), 2);
    assert_eq!(
        f.pems[1].private_key,
        Some(PathBuf::from("/etc/hitch/a.key"))
    );
    assert!(f.settings.prefer_server_ciphers);
    assert_eq!(f.alpn, vec!["h2", "http/1.1"]);
    assert_eq!(f.session_cache, 100);
    assert_eq!(f.handshake_timeout, Duration::from_secs(5));
    assert_eq!(f.warnings.len(), 3);
    assert!(f.warnings[0].starts_with("hitch.conf:12:1: backend"));
}

#[test]
fn errors_name_the_line_and_column() {
    let cases = [
        (
            "pem-file = \"a.pem\"\nfrobnicate = 1\n",
            "t.conf:2:1: unknown key \"frobnicate\"",
        ),
        (
            "tls-protos = TLSv1.0\n",
            "t.conf:1:1: tls-protos: TLSv1.0 is not offered",
        ),
        ("frontend = {\n  port = 443\n", "missing '}'"),
        (
            "quic = maybe\n",
            "t.conf:1:1: quic: \"maybe\" is not on or off",
        ),
        (
            "frontend = \"nowhere\"\n",
            "t.conf:1:1: frontend \"nowhere\"",
        ),
        ("pem-file\n", "t.conf:1:1: expected '=' after pem-file"),
        ("ciphers = \"open\n", "t.conf:1:11: unterminated string"),
        ("alpn-protos = \"spdy/3\"\n", "\"spdy/3\" is not served"),
    ];
    for (text, want) in cases {
        let e = parse(text, "t.conf", None).unwrap_err().0;
        assert!(e.contains(want), "{text:?}: {e}");
    }
}

#[test]
fn frontend_forms() {
    let f = parse("frontend = \"[::1]:8443+cert.pem\"\n", "t", None).unwrap();
    let fe = &f.frontends[0];
    assert_eq!((fe.host.as_str(), fe.port), ("::1", 8443));
    assert_eq!(fe.pems[0].cert, PathBuf::from("cert.pem"));
    assert!(!fe.match_global_certs);
}

#[test]
fn frontends_start_from_the_global_settings_wherever_they_stand() {
    let text = "frontend = \"[*]:443\"\n\
                    frontend = {\n  host = \"*\"\n  port = \"8443\"\n  tls-protos = TLSv1.3\n}\n\
                    tls-protos = TLSv1.2\n\
                    sni-nomatch-abort = on\n\
                    client-verify = required\n\
                    client-verify-ca = \"ca.pem\"\n";
    let f = parse(text, "t", Some(Path::new("/etc/tls"))).unwrap();
    let (plain, block) = (&f.frontends[0].settings, &f.frontends[1].settings);
    assert_eq!(plain.protos, ["TLSv1.2"]);
    assert_eq!(block.protos, ["TLSv1.3"]);
    for s in [plain, block] {
        assert!(s.sni_nomatch_abort);
        assert_eq!(s.client_verify, ClientVerify::Required);
        assert_eq!(
            s.client_verify_ca.as_deref(),
            Some(Path::new("/etc/tls/ca.pem"))
        );
    }
}

#[test]
fn acme_sections() {
    let text = "acme = {\n  directory = \"https://ca.example/dir\"\n  contact = \"ops@a.example, mailto:x@a.example\"\n  names = \"A.example www.a.example\"\n  challenge = http-01\n  ca-file = \"ca.pem\"\n  renew-before = 10\n  retry = 2.5\n}\n";
    let f = parse(text, "t", Some(Path::new("/etc/tls"))).unwrap();
    let a = &f.acme[0];
    assert_eq!(a.directory, "https://ca.example/dir");
    assert_eq!(a.contact, ["mailto:ops@a.example", "mailto:x@a.example"]);
    assert_eq!(a.names, ["a.example", "www.a.example"]);
    assert_eq!(a.challenges, [crate::acme::ChallengeKind::Http01]);
    assert_eq!(a.ca_file.as_deref(), Some(Path::new("/etc/tls/ca.pem")));
    assert_eq!(a.renew_before, Duration::from_secs(864_000));
    assert_eq!(a.retry, Duration::from_millis(2500));

    let f = parse(
        "acme = {\n directory = \"https://ca/d\"\n names = a.example\n}\n",
        "t",
        None,
    )
    .unwrap();
    assert_eq!(
        f.acme[0].challenges,
        [
            crate::acme::ChallengeKind::TlsAlpn01,
            crate::acme::ChallengeKind::Http01
        ]
    );

    for (text, want) in [
        ("acme = \"x\"\n", "t:1:1: acme takes a block"),
        (
            "acme = {\n names = a.example\n}\n",
            "t:1:1: acme: no directory",
        ),
        (
            "acme = {\n directory = \"ftp://x\"\n}\n",
            "t:2:2: acme: directory",
        ),
        ("acme = {\n directory = \"https://ca/d\"\n}\n", "no names"),
        (
            "acme = {\n directory = \"https://ca/d\"\n names = \"*.a.example\"\n}\n",
            "t:3:2: acme: names: \"*.a.example\" is not a host name",
        ),
        (
            "acme = {\n directory = \"https://ca/d\"\n names = a\n challenge = dns-01\n}\n",
            "t:4:2: acme: challenge: \"dns-01\"",
        ),
        (
            "acme = {\n directory = \"https://ca/d\"\n names = a\n retry = -1\n}\n",
            "t:4:2: acme: retry",
        ),
        (
            "acme = {\n directory = \"https://ca/d\"\n names = a\n colour = blue\n}\n",
            "t:4:2: acme: unknown key \"colour\"",
        ),
    ] {
        let e = parse(text, "t", None).unwrap_err().to_string();
        assert!(e.contains(want), "{text:?}: {e}");
    }
}
