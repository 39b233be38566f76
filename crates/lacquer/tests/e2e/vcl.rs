//! VCL end to end: the programs in `tests/vcl/` loaded with `-f` and
//! exercised against real origins, and compile errors reported with file,
//! line, column and a marker, by `-C` and at start-up.

use crate::harness::{compile_vcl, vcl_text, Lacquer};
use crate::origin::{Origin, Reply};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

fn vars(prefix: &str, addr: SocketAddr) -> Vec<(String, String)> {
    vec![
        (format!("{prefix}_host"), addr.ip().to_string()),
        (format!("{prefix}_port"), addr.port().to_string()),
    ]
}

fn refs(v: &[(String, String)]) -> Vec<(&str, String)> {
    v.iter().map(|(k, x)| (k.as_str(), x.clone())).collect()
}

fn site_origin() -> Origin {
    Origin::start(|req| match req.url.as_str() {
        "/style.css" => Reply::ok("body{}").header("Set-Cookie", "track=1"),
        u if u.starts_with("/missing") => Reply::ok("nope").status(404),
        u => Reply::ok(&format!("{} {}", req.method, u)).header("X-Powered-By", "php"),
    })
}

#[test]
fn site_rules_normalise_cache_and_decorate() {
    let origin = site_origin();
    let v = vars("origin", origin.addr);
    let lq = Lacquer::with_vcl("site.vcl", &refs(&v), &[]);
    let mut c = lq.connect();

    // Analytics cookies are stripped, so the page is cached.
    let r = c.get(
        "/page",
        &[
            ("Cookie", "_ga=GA1; __utmz=x"),
            ("Accept-Encoding", "br, gzip"),
        ],
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.header("X-Cache"), Some("MISS"));
    assert_eq!(r.header("X-Backend"), Some("origin"));
    assert_eq!(r.header("Via"), None, "vcl_deliver removed Via");
    assert_eq!(r.header("X-Powered-By"), None);
    let seen = origin.seen();
    let first = seen.last().unwrap();
    assert_eq!(first.header("Cookie"), None);
    assert_eq!(first.header("Accept-Encoding"), Some("gzip"));
    assert_eq!(first.header("X-Fetched-By"), Some("lacquer"));
    assert_eq!(first.header("X-Recv-Restarts"), Some("0"));
    let r = c.get("/page", &[("Cookie", "_gid=2")]);
    assert_eq!(r.header("X-Cache"), Some("HIT"));
    assert_eq!(r.header("X-Hits"), Some("1"));
    assert!(r.header("X-Varnish").is_some());
    assert_eq!(origin.count("/page"), 1);

    // A real session cookie passes.
    c.get("/page", &[("Cookie", "_ga=1; session=abc")]);
    assert_eq!(origin.count("/page"), 2);
    assert_eq!(
        origin.seen().last().unwrap().header("Cookie"),
        Some("session=abc")
    );

    // URL passes.
    c.get("/login", &[]);
    c.get("/login", &[]);
    c.get("/x?NoCache=1", &[]);
    c.get("/x?NoCache=1", &[]);
    assert_eq!(origin.count("/login"), 2);
    assert_eq!(origin.count("/x?NoCache=1"), 2);

    // Purge from an allowed address empties the entry.
    let r = c.request("PURGE", "/page", &[]);
    assert_eq!(r.status, 200);
    assert!(r.text().contains("Purged"));
    assert_eq!(c.get("/page", &[]).header("X-Cache"), Some("MISS"));
    assert_eq!(origin.count("/page"), 3);

    // A custom synthetic answer, with the VWXYZ status convention.
    let r = c.get("/blocked/x", &[]);
    assert_eq!(r.status, 403);
    assert_eq!(r.header("Content-Type"), Some("text/plain"));
    assert_eq!(r.text(), "blocked by policy: /blocked/x");

    // A restart after rewriting the URL.
    let r = c.get("/old/thing", &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "GET /new/thing");
    assert_eq!(
        origin.seen().last().unwrap().header("X-Recv-Restarts"),
        Some("1")
    );

    // Static files: Set-Cookie removed, cached for the TTL VCL set.
    c.get("/style.css", &[]);
    let r = c.get("/style.css", &[]);
    assert_eq!(r.header("X-Cache"), Some("HIT"));
    assert_eq!(r.header("Set-Cookie"), None);
    assert_eq!(origin.count("/style.css"), 1);

    // 404s are made uncacheable by VCL.
    assert_eq!(c.get("/missing", &[]).status, 404);
    assert_eq!(c.get("/missing", &[]).status, 404);
    assert_eq!(origin.count("/missing"), 2);

    // vcl_hash adds a header to the key.
    c.get("/v", &[("X-Variant", "a")]);
    c.get("/v", &[("X-Variant", "b")]);
    c.get("/v", &[("X-Variant", "a")]);
    assert_eq!(origin.count("/v"), 2);
}

#[test]
fn round_robin_director_from_seed_002() {
    let web1 = Origin::start(|_| Reply::ok("one"));
    let web2 = Origin::start(|_| Reply::ok("two"));
    let mut v = vars("web1", web1.addr);
    v.extend(vars("web2", web2.addr));
    let lq = Lacquer::with_vcl("directors.vcl", &refs(&v), &[]);
    let mut c = lq.connect();
    let mut by = std::collections::HashMap::new();
    for i in 0..10 {
        let r = c.get(&format!("/p{i}"), &[]);
        *by.entry(r.header("X-Served-By").unwrap().to_string())
            .or_insert(0) += 1;
    }
    assert_eq!(by.get("bw1"), Some(&5), "{by:?}");
    assert_eq!(by.get("bw2"), Some(&5), "{by:?}");
    // The fallback director prefers its first healthy member.
    let r = c.get("/fallback", &[]);
    assert_eq!(r.header("X-Served-By"), Some("bw2"));
    assert_eq!(r.text(), "two");
}

#[test]
fn pipe_retry_backend_error_and_vcl_failure() {
    let flaky = Arc::new(AtomicUsize::new(0));
    let f = flaky.clone();
    let origin = Origin::start(move |req| match req.url.as_str() {
        "/flaky" => {
            if f.fetch_add(1, Ordering::SeqCst) < 2 {
                Reply::ok("broken").status(500)
            } else {
                Reply::ok("fine")
            }
        }
        "/always500" => Reply::ok("broken").status(500),
        "/garbage" => Reply {
            raw: Some(b"this is not http\r\n\r\n".to_vec()),
            ..Reply::ok("")
        },
        u => Reply::ok(&format!("{} {}", req.method, u)),
    });
    let v = vars("origin", origin.addr);
    let lq = Lacquer::with_vcl("pipe_retry.vcl", &refs(&v), &[]);

    // Retries until the origin answers well.
    let r = lq.get("/flaky");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("X-Retries"), Some("2"));
    assert_eq!(origin.count("/flaky"), 3);

    // A broken backend response: vcl_backend_error writes the page.
    let r = lq.get("/garbage");
    assert_eq!(r.status, 503);
    assert_eq!(r.text(), "origin unavailable after 0 retries");

    // Pipe: the request reaches the origin with what vcl_pipe added, the
    // answer comes back, and the connection ends with it.
    let mut c = lq.connect();
    c.send(b"GET /tunnel HTTP/1.1\r\nHost: t\r\n\r\n");
    let r = c.read_response(false);
    assert_eq!(r.text(), "GET /tunnel");
    assert!(c.closed());
    let seen = origin.seen();
    let piped = seen.iter().find(|s| s.url == "/tunnel").unwrap();
    assert_eq!(piped.header("X-Piped"), Some("yes"));
    assert_eq!(piped.header("Connection"), Some("close"));

    // Retries run out: the last answer is delivered.
    let r = lq.get("/always500");
    assert_eq!(r.status, 500);
    assert_eq!(r.header("X-Retries"), Some("2"));
    assert_eq!(origin.count("/always500"), 3);

    // Hit-for-pass from return (pass(duration)): later requests pass
    // instead of waiting on each other, and nothing is cached.
    assert_eq!(lq.get("/hfp").status, 200);
    assert_eq!(lq.get("/hfp").status, 200);
    assert_eq!(origin.count("/hfp"), 2);

    // Restarting without end stops at max_restarts with a 503.
    let r = lq.get("/loop");
    assert_eq!(r.status, 503);
    assert_eq!(origin.count("/loop"), 0);

    // A failing VCL statement: 503 and the connection closes.
    let mut c = lq.connect();
    let r = c.get("/fail", &[("X-Not-A-Number", "abc")]);
    assert_eq!(r.status, 503);
    assert!(r.text().contains("VCL failed"));
    assert!(c.closed());
}

#[test]
fn unknown_methods_are_piped_like_varnish() {
    let origin = Origin::start(|req| Reply::ok(&format!("{} {}", req.method, req.url)));
    let lq = Lacquer::start(origin.addr, &[]);
    let mut c = lq.connect();
    c.send(b"BREW /pot HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(c.read_response(false).text(), "BREW /pot");
    assert!(c.closed());
}

#[test]
fn suite_programs_compile() {
    let a: SocketAddr = "127.0.0.1:8080".parse().unwrap();
    for (file, prefixes) in [
        ("site.vcl", &["origin"][..]),
        ("directors.vcl", &["web1", "web2"][..]),
        ("pipe_retry.vcl", &["origin"][..]),
    ] {
        let v: Vec<(String, String)> = prefixes.iter().flat_map(|p| vars(p, a)).collect();
        let (code, out, err) = compile_vcl(&vcl_text(file, &refs(&v)));
        assert_eq!(code, 0, "{file}: {err}");
        assert_eq!(out.trim(), "VCL compiled.");
    }
}

const BACKEND: &str = "vcl 4.1;\nbackend b { .host = \"127.0.0.1\"; .port = \"8080\"; }\n";

#[test]
fn compile_errors_show_file_line_column_and_marker() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "sub vcl_recv {\n    set req.http.X = \"a\"\n}\n",
            ":5:1: Expected ';' got '}'",
            "}\n#",
        ),
        (
            "sub vcl_recv {\n    set req.nope = 1;\n}\n",
            ":4:9: Symbol not found: 'req.nope'",
            "    set req.nope = 1;\n--------########----",
        ),
        (
            "sub vcl_recv {\n    set beresp.ttl = 1s;\n}\n",
            ":4:9: 'beresp.ttl': cannot be set or unset in vcl_recv",
            "--------##########",
        ),
        (
            "sub vcl_deliver {\n    return (fetch);\n}\n",
            ":4:13: Invalid return \"fetch\" in vcl_deliver",
            "vcl_deliver may return: fail, synth, restart, deliver",
        ),
        (
            "sub vcl_recv {\n    set req.ttl = \"10\";\n}\n",
            ":4:19: Expected DURATION got STRING",
            "------------------####",
        ),
        (
            "backend spare { .host = \"127.0.0.1\"; }\n",
            ":3:9: Unused backend spare",
            "vcc_err_unref",
        ),
        (
            "import nosuch;\n",
            ":3:8: Could not find VMOD nosuch",
            "#####",
        ),
        (
            "sub vcl_recv {\n    if (req.url ~ \"^/(a\") { return (pass); }\n}\n",
            ":4:19: Regular expression error",
            "unclosed",
        ),
    ];
    for (body, message, detail) in cases {
        let (code, out, err) = compile_vcl(&format!("{BACKEND}{body}"));
        assert_eq!(code, 2, "{body}: {out}{err}");
        assert!(err.contains("input.vcl"), "{err}");
        assert!(err.contains(message), "want {message} in:\n{err}");
        assert!(err.contains(detail), "want {detail} in:\n{err}");
    }
}

#[test]
fn a_bad_program_stops_start_up() {
    let dir = std::env::temp_dir().join(format!("lacquer-e2e-badvcl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.vcl");
    std::fs::write(
        &path,
        format!("{BACKEND}sub vcl_recv {{ return (nonsense); }}\n"),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lacquer"))
        .args(["serve", "-j", "none", "-a", "127.0.0.1:0", "-n"])
        .arg(dir.join("work"))
        .arg("-f")
        .arg(&path)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(!String::from_utf8_lossy(&out.stdout).contains("Child launched OK"));
    assert!(
        err.contains("bad.vcl:3:24: Unknown return action 'nonsense'"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
