//! Checker and interpreter tests against a small in-memory host.

use crate::failure::VclFailure;
use crate::program::Host;
use crate::types::{Action, BackendRef, HttpKind, Method, Value};
use crate::vars::{StorageField, Var};
use crate::{compile_str, Options, Program};
use bytes::Bytes;
use std::collections::HashMap;

/// A host holding plain maps: enough to run methods without a daemon.
#[derive(Default)]
struct TestHost {
    method: Option<Method>,
    vars: HashMap<Var, Value>,
    headers: Vec<(HttpKind, String, Bytes)>,
    hash: Vec<u8>,
    body: Vec<u8>,
    logs: Vec<String>,
    sick: Vec<usize>,
}

impl TestHost {
    fn req(method: &str, url: &str, headers: &[(&str, &str)]) -> TestHost {
        let mut h = TestHost::default();
        h.vars.insert(Var::ReqMethod, Value::str(method));
        h.vars.insert(Var::ReqUrl, Value::str(url));
        h.vars.insert(Var::ReqProto, Value::str("HTTP/1.1"));
        h.vars.insert(Var::ReqEsiLevel, Value::Int(0));
        h.vars.insert(Var::ReqXid, Value::str("1001"));
        h.vars.insert(
            Var::ClientIp,
            Value::Ip(Some("10.1.2.3:5555".parse().unwrap())),
        );
        for (n, v) in headers {
            h.headers.push((
                HttpKind::Req,
                n.to_string(),
                Bytes::copy_from_slice(v.as_bytes()),
            ));
        }
        h
    }

    fn run(&mut self, prog: &Program, m: Method) -> Action {
        self.method = Some(m);
        crate::run(prog, m, self)
    }

    fn hdr(&self, kind: HttpKind, name: &str) -> Option<String> {
        self.headers
            .iter()
            .find(|(k, n, _)| *k == kind && n.eq_ignore_ascii_case(name))
            .map(|(_, _, v)| String::from_utf8_lossy(v).into_owned())
    }
}

impl Host for TestHost {
    fn method(&self) -> Method {
        self.method.unwrap_or(Method::Recv)
    }
    fn get(&mut self, var: Var) -> Value {
        self.vars.get(&var).cloned().unwrap_or(Value::Unset)
    }
    fn set(&mut self, var: Var, value: Value) -> Result<(), VclFailure> {
        self.vars.insert(var, value);
        Ok(())
    }
    fn unset(&mut self, var: Var) {
        self.vars.remove(&var);
    }
    fn header(&mut self, kind: HttpKind, name: &str) -> Option<Bytes> {
        self.headers
            .iter()
            .find(|(k, n, _)| *k == kind && n.eq_ignore_ascii_case(name))
            .map(|(_, _, v)| v.clone())
    }
    fn set_header(&mut self, kind: HttpKind, name: &str, value: Bytes) -> Result<(), VclFailure> {
        self.unset_header(kind, name);
        self.headers.push((kind, name.to_string(), value));
        Ok(())
    }
    fn unset_header(&mut self, kind: HttpKind, name: &str) {
        self.headers
            .retain(|(k, n, _)| !(*k == kind && n.eq_ignore_ascii_case(name)));
    }
    fn header_all(&mut self, kind: HttpKind, name: &str) -> Vec<Bytes> {
        self.headers
            .iter()
            .filter(|(k, n, _)| *k == kind && n.eq_ignore_ascii_case(name))
            .map(|(_, _, v)| v.clone())
            .collect()
    }
    fn hash_data(&mut self, data: &[u8]) {
        self.hash.extend_from_slice(data);
        self.hash.push(0);
    }
    fn synthetic(&mut self, data: &[u8]) {
        self.body.extend_from_slice(data);
    }
    fn ban(&mut self, expr: &[u8]) -> Result<(), VclFailure> {
        self.logs
            .push(format!("ban {}", String::from_utf8_lossy(expr)));
        Ok(())
    }
    fn param(&self, _index: usize) -> Value {
        Value::Duration(120.0)
    }
    fn storage(&self, _name: &str, _field: StorageField) -> Value {
        Value::Bool(true)
    }
    fn healthy(&self, backend: usize) -> bool {
        !self.sick.contains(&backend)
    }
    fn log(&mut self, msg: &[u8]) {
        self.logs.push(String::from_utf8_lossy(msg).into_owned());
    }
    fn error(&mut self, msg: &str) {
        self.logs.push(format!("error: {msg}"));
    }
}

const BACKEND: &str = "vcl 4.1;\nbackend default { .host = \"127.0.0.1\"; .port = \"8080\"; }\n";

fn prog(body: &str) -> Program {
    let text = format!("{BACKEND}{body}");
    match compile_str("test.vcl", &text, &Options::default()) {
        Ok(p) => p,
        Err(f) => panic!("{}", f.render()),
    }
}

fn error(body: &str) -> String {
    let text = format!("{BACKEND}{body}");
    match compile_str("test.vcl", &text, &Options::default()) {
        Ok(_) => panic!("compiled: {body}"),
        Err(f) => f.render(),
    }
}

#[test]
fn builtin_alone_behaves_like_varnish() {
    let p = prog("");
    let mut h = TestHost::req("GET", "/a", &[("Host", "example.com")]);
    assert_eq!(h.run(&p, Method::Recv), Action::Hash);
    assert_eq!(h.run(&p, Method::Hash), Action::Lookup);
    assert_eq!(h.hash, b"/a\0example.com\0");
    let mut h = TestHost::req("GET", "/", &[("Host", "x"), ("Cookie", "a=b")]);
    assert_eq!(h.run(&p, Method::Recv), Action::Pass(None));
    let mut h = TestHost::req("BREW", "/", &[("Host", "x")]);
    assert_eq!(h.run(&p, Method::Recv), Action::Pipe);
    // As in varnishd 7.1, the Host check comes first: a preface (which
    // has no Host) is a 400; with a Host, a 405.
    let mut h = TestHost::req("PRI", "*", &[("Host", "x")]);
    assert!(matches!(
        h.run(&p, Method::Recv),
        Action::Synth { status: 405, .. }
    ));
    let mut h = TestHost::req("GET", "/", &[]);
    assert!(matches!(
        h.run(&p, Method::Recv),
        Action::Synth { status: 400, .. }
    ));
    h.vars.insert(Var::ReqProto, Value::str("HTTP/1.0"));
    assert_eq!(h.run(&p, Method::Recv), Action::Hash);
    // The Host is lower-cased, so that one object serves every spelling.
    let mut h = TestHost::req("GET", "/", &[("Host", "Example.COM")]);
    assert_eq!(h.run(&p, Method::Recv), Action::Hash);
    assert_eq!(h.hdr(HttpKind::Req, "host").as_deref(), Some("example.com"));
}

#[test]
fn a_program_cuts_a_builtin_subroutine_short_with_a_bare_return() {
    let p = prog("sub vcl_req_cookie { return; }");
    let mut h = TestHost::req("GET", "/", &[("Host", "x"), ("Cookie", "a=b")]);
    assert_eq!(
        h.run(&p, Method::Recv),
        Action::Hash,
        "cookies no longer pass"
    );
    let mut h = TestHost::req("GET", "/", &[("Host", "x"), ("Authorization", "a")]);
    assert_eq!(
        h.run(&p, Method::Recv),
        Action::Pass(None),
        "the rest still runs"
    );
}

#[test]
fn builtin_backend_response_marks_hit_for_miss() {
    let p = prog("");
    let mut h = TestHost::default();
    h.vars.insert(Var::BereqUncacheable, Value::Bool(false));
    h.vars.insert(Var::BerespTtl, Value::Duration(60.0));
    h.headers.push((
        HttpKind::Beresp,
        "Cache-Control".into(),
        Bytes::from_static(b"max-age=60, Private"),
    ));
    assert_eq!(h.run(&p, Method::BackendResponse), Action::Deliver);
    assert_eq!(
        h.vars.get(&Var::BerespUncacheable),
        Some(&Value::Bool(true))
    );
    assert_eq!(h.vars.get(&Var::BerespTtl), Some(&Value::Duration(120.0)));
}

#[test]
fn synth_page_is_built_by_vcl() {
    let p = prog("");
    let mut h = TestHost::default();
    h.vars.insert(Var::RespStatus, Value::Int(404));
    h.vars.insert(Var::RespReason, Value::str("Not Found"));
    h.vars.insert(Var::ReqXid, Value::str("42"));
    assert_eq!(h.run(&p, Method::Synth), Action::Deliver);
    let body = h.vars.get(&Var::RespBody).unwrap().as_bytes().to_vec();
    let body = String::from_utf8(body).unwrap();
    assert!(body.contains("<h1>Error 404 Not Found</h1>"), "{body}");
    assert!(body.contains("<p>XID: 42</p>"), "{body}");
    assert!(body.contains("<p>Not Found</p>"), "{body}");
    assert_eq!(h.hdr(HttpKind::Resp, "retry-after").as_deref(), Some("5"));
}

#[test]
fn user_rules_run_before_the_builtin() {
    let p = prog(
        r#"
        import std;
        acl purgers { "127.0.0.1"; "10.0.0.0"/8; ! "10.9.9.9"; }
        sub normalise {
            set req.http.Cookie = regsuball(req.http.Cookie, "(^|;\s*)(_ga|__utm[a-z]+)=[^;]*", "");
            set req.http.Cookie = regsub(req.http.Cookie, "^;\s*", "");
            if (req.http.Cookie ~ "^\s*$") { unset req.http.Cookie; }
        }
        sub vcl_recv {
            if (req.method == "PURGE") {
                if (client.ip !~ purgers) { return (synth(405, "Not allowed")); }
                return (purge);
            }
            if (req.http.Accept-Encoding ~ "gzip") {
                set req.http.Accept-Encoding = "gzip";
            } elsif (req.http.Accept-Encoding) {
                unset req.http.Accept-Encoding;
            }
            call normalise;
            if (req.url ~ "^/admin(/|$)") { return (pass); }
            set req.http.X-Len = std.strstr(req.url, "?") + "|" + std.toupper("ab") + "|" + (1 + 2 * 3);
            std.log("checked " + req.url);
        }
        "#,
    );
    let mut h = TestHost::req(
        "GET",
        "/p?q=1",
        &[
            ("Host", "x"),
            ("Cookie", "_ga=1; __utmz=2"),
            ("Accept-Encoding", "br, gzip"),
        ],
    );
    assert_eq!(h.run(&p, Method::Recv), Action::Hash);
    assert_eq!(h.hdr(HttpKind::Req, "cookie"), None);
    assert_eq!(
        h.hdr(HttpKind::Req, "accept-encoding").as_deref(),
        Some("gzip")
    );
    assert_eq!(h.hdr(HttpKind::Req, "x-len").as_deref(), Some("?q=1|AB|7"));
    assert_eq!(h.logs, vec!["checked /p?q=1".to_string()]);
    let mut h = TestHost::req("GET", "/", &[("Host", "x"), ("Cookie", "_ga=1; sess=9")]);
    assert_eq!(h.run(&p, Method::Recv), Action::Pass(None));
    assert_eq!(h.hdr(HttpKind::Req, "cookie").as_deref(), Some("sess=9"));
    let mut h = TestHost::req("PURGE", "/", &[("Host", "x")]);
    assert_eq!(h.run(&p, Method::Recv), Action::Purge);
    h.vars.insert(
        Var::ClientIp,
        Value::Ip(Some("10.9.9.9:1".parse().unwrap())),
    );
    assert_eq!(
        h.run(&p, Method::Recv),
        Action::Synth {
            status: 405,
            reason: Some(Bytes::from_static(b"Not allowed"))
        }
    );
    let mut h = TestHost::req("GET", "/admin/x", &[("Host", "x")]);
    assert_eq!(h.run(&p, Method::Recv), Action::Pass(None));
}

#[test]
fn backend_response_rules_and_durations() {
    let p = prog(
        r#"
        sub vcl_backend_response {
            if (bereq.url ~ "\.(css|js)$") {
                set beresp.ttl = 1h + 30m;
                set beresp.grace = 2 * 1d;
                unset beresp.http.Set-Cookie;
                return (deliver);
            }
            if (beresp.status >= 500) { return (pass(10s)); }
        }
        "#,
    );
    let mut h = TestHost::default();
    h.vars.insert(Var::BereqUrl, Value::str("/a.css"));
    assert_eq!(h.run(&p, Method::BackendResponse), Action::Deliver);
    assert_eq!(h.vars.get(&Var::BerespTtl), Some(&Value::Duration(5400.0)));
    assert_eq!(
        h.vars.get(&Var::BerespGrace),
        Some(&Value::Duration(172800.0))
    );
    let mut h = TestHost::default();
    h.vars.insert(Var::BereqUrl, Value::str("/x"));
    h.vars.insert(Var::BerespStatus, Value::Int(503));
    assert_eq!(h.run(&p, Method::BackendResponse), Action::Pass(Some(10.0)));
}

#[test]
fn directors_skip_sick_backends() {
    let text = r#"vcl 4.1;
        import directors;
        backend a { .host = "127.0.0.1"; .port = "1"; }
        backend b { .host = "127.0.0.1"; .port = "2"; }
        sub vcl_init {
            new rr = directors.round_robin();
            rr.add_backend(a);
            rr.add_backend(b);
            new fb = directors.fallback();
            fb.add_backend(a);
            fb.add_backend(b);
            new sh = directors.shard();
            sh.add_backend(a);
            sh.add_backend(b);
            sh.reconfigure();
        }
        sub vcl_recv {
            if (req.url == "/fb") { set req.backend_hint = fb.backend(); }
            elsif (req.url == "/sh") { set req.backend_hint = sh.backend(by=URL); }
            else { set req.backend_hint = rr.backend(); }
        }
    "#;
    let p = compile_str("d.vcl", text, &Options::default())
        .unwrap_or_else(|f| panic!("{}", f.render()));
    let mut h = TestHost {
        method: Some(Method::Init),
        ..Default::default()
    };
    crate::init(&p, &mut h).unwrap();
    let pick = |h: &mut TestHost, url: &str| {
        h.vars.insert(Var::ReqUrl, Value::str(url));
        h.vars.insert(Var::ReqMethod, Value::str("GET"));
        h.vars.insert(Var::ReqProto, Value::str("HTTP/1.0"));
        h.run(&p, Method::Recv);
        let Some(Value::Backend(b)) = h.vars.get(&Var::ReqBackendHint).cloned() else {
            panic!("no hint")
        };
        p.resolve(b, h)
    };
    let seen: Vec<_> = (0..4).map(|_| pick(&mut h, "/rr")).collect();
    assert!(seen.contains(&Some(0)) && seen.contains(&Some(1)));
    assert_eq!(pick(&mut h, "/fb"), Some(0));
    let first = pick(&mut h, "/sh");
    assert_eq!(pick(&mut h, "/sh"), first, "shard is stable for one key");
    h.sick = vec![0];
    assert!((0..4).all(|_| pick(&mut h, "/rr") == Some(1)));
    assert_eq!(pick(&mut h, "/fb"), Some(1));
    assert_eq!(pick(&mut h, "/sh"), Some(1));
    h.sick = vec![0, 1];
    assert_eq!(pick(&mut h, "/rr"), None);
    assert!(!p.healthy(BackendRef::Director(0), &mut h));
}

#[test]
fn runtime_failures_fail_the_method() {
    let p = prog(
        r#"
        import std;
        sub vcl_recv {
            set req.http.n = std.integer(req.http.x, 7) + 1;
            if (req.http.y) { set req.http.m = std.integer(req.http.y); }
        }
        "#,
    );
    let mut h = TestHost::req("GET", "/", &[("Host", "h"), ("x", "zz")]);
    assert_eq!(h.run(&p, Method::Recv), Action::Hash);
    assert_eq!(h.hdr(HttpKind::Req, "n").as_deref(), Some("8"));
    let mut h = TestHost::req("GET", "/", &[("Host", "h"), ("y", "nope")]);
    assert_eq!(h.run(&p, Method::Recv), Action::Fail);
    assert!(h.logs[0].contains("std.integer"));
}

#[test]
fn compile_errors_name_position_and_problem() {
    let cases: &[(&str, &str)] = &[
        ("sub vcl_recv { set req.foo = 1; }", "test.vcl:3:20: Symbol not found: 'req.foo'"),
        ("sub vcl_recv { set req.xid = \"1\"; }", "Variable 'req.xid' is read only"),
        ("sub vcl_recv { set req.ttl = \"x\"; }", "Expected DURATION got STRING"),
        ("sub vcl_recv { set req.ttl = 10; }", "Expected DURATION got INT"),
        ("sub vcl_recv { return (fetch); }", "Invalid return \"fetch\" in vcl_recv"),
        ("sub vcl_recv { call nothere; }", "Subroutine 'nothere' not found"),
        ("sub vcl_recv { set req.backend_hint = nothere; }", "Symbol not found: 'nothere'"),
        ("backend unused { .host = \"127.0.0.1\"; }", "Unused backend unused"),
        ("acl a { \"1.2.3.4\"; }", "Unused acl a"),
        ("sub helper { }", "Unused sub helper"),
        // The first unused symbol by name, whatever its kind (varnishd's).
        (
            "sub zz_sub { } acl yy_acl { \"1.2.3.4\"; } probe xx_probe { .url = \"/\"; } sub aa_sub { }",
            "Unused sub aa_sub",
        ),
        (
            "probe zz_probe { .url = \"/\"; } backend zz { .host = \"127.0.0.1\"; } probe xx_probe { .url = \"/\"; }",
            "Unused probe xx_probe",
        ),
        ("sub a { call b; } sub b { call a; } sub vcl_recv { call a; }", "Recursive call"),
        ("sub f { set beresp.ttl = 1s; } sub vcl_recv { call f; }", "'beresp.ttl': cannot be set or unset in vcl_recv"),
        ("sub vcl_backend_response { set beresp.storage = storage.nope; }", "Symbol not found: 'storage.nope'"),
        ("sub vcl_recv { if (storage.nope.happy) { } }", "Symbol not found: 'storage.nope.happy'"),
        ("sub vcl_recv { return; }", "Expected a return action"),
        ("sub vcl_deliver { set req.url = bereq.url; }", "'bereq.url': not readable in vcl_deliver"),
        ("import nosuch;", "Could not find VMOD nosuch"),
        ("sub vcl_recv { std.log(\"x\"); }", "add 'import std;'"),
        ("sub vcl_recv { if (req.url ~ \"(a\") { } }", "Regular expression error"),
        ("sub vcl_recv { if (req.url ~ \"(?<=a+)\") { } }", "Regular expression error"),
        ("sub vcl_recv { if (req.url ~ \"[\") { } }", "Regular expression error"),
        ("sub vcl_recv { set req.url = \"a\" }", "Expected ';' got '}'"),
        ("sub vcl_recv { unset req.http.content-length; }", "frames the message"),
        ("sub vcl_recv { synthetic(\"x\"); }", "'synthetic': cannot be called in vcl_recv"),
        ("sub vcl_recv { return (synth(\"x\")); }", "Expected INT got STRING"),
        ("sub vcl_recv { if (req.url == 1) { } }", "Comparison STRING == INT is not possible"),
        ("sub vcl_recv { new x = directors.round_robin(); }", "Unknown object constructor"),
        ("sub vcl_recv { set req.http.x = req.esi; }", "does not exist in VCL 4.1"),
        ("backend b2 { .host = \"127.0.0.1\"; .nope = 1; } sub vcl_recv { set req.backend_hint = b2; }", "Unknown field: '.nope'"),
        ("probe p { .window = 3; .threshold = 5; } sub vcl_recv {}", "threshold"),
        ("backend t { .host = \"127.0.0.1\"; .certificate = \"/nonexistent/client.pem\"; .ssl = 1; } sub vcl_recv { set req.backend_hint = t; }", "Cannot read .certificate \"/nonexistent/client.pem\""),
        ("backend t { .host = \"127.0.0.1\"; .certificate = \"/dev/null\"; } sub vcl_recv { set req.backend_hint = t; }", ".certificate needs .ssl = 1"),
        ("backend t { .host = \"127.0.0.1\"; .alpn = \"h2\"; } sub vcl_recv { set req.backend_hint = t; }", ".alpn needs .ssl = 1"),
        ("backend t { .host = \"127.0.0.1\"; .ssl = 1; .alpn = \"h3, h2\"; } sub vcl_recv { set req.backend_hint = t; }", "a list of h2 and http/1.1"),
        ("backend t { .host = \"127.0.0.1\"; .ssl = 1; .h2c = 1; } sub vcl_recv { set req.backend_hint = t; }", ".h2c is for cleartext backends"),
        ("backend t { .host = \"127.0.0.1\"; .h2c = 2; } sub vcl_recv { set req.backend_hint = t; }", ".h2c must be 0 or 1"),
    ];
    for (body, want) in cases {
        let got = error(body);
        assert!(got.contains(want), "for {body}\nwant: {want}\ngot: {got}");
    }
}

#[test]
fn error_output_marks_the_token() {
    let got = error("sub vcl_recv {\n    set req.foo = 1;\n}\n");
    assert_eq!(
        got,
        "test.vcl:4:9: Symbol not found: 'req.foo'\n    set req.foo = 1;\n--------#######-----\n"
    );
}

#[test]
fn version_is_required_and_4_0_variables_work() {
    let Err(f) = compile_str(
        "x.vcl",
        "backend b { .host = \"127.0.0.1\"; }",
        &Options::default(),
    ) else {
        panic!("compiled without a version")
    };
    assert!(f.render().contains("VCL version declaration missing"));
    let p = compile_str(
        "x.vcl",
        "vcl 4.0;\nbackend b { .host = \"127.0.0.1\"; }\nsub vcl_recv { set req.esi = false; set req.proto = \"HTTP/1.0\"; }",
        &Options::default(),
    );
    assert!(p.is_ok(), "{}", p.err().unwrap().render());
}

#[test]
fn includes_are_spliced_in() {
    let dir = std::env::temp_dir().join(format!("lacquer-vcl-inc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("rules.vcl"),
        "sub vcl_recv { if (req.url == \"/x\") { return (pass); } }\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("main.vcl"),
        format!("{BACKEND}include \"rules.vcl\";\n"),
    )
    .unwrap();
    let p = crate::compile_file(&dir.join("main.vcl"), Vec::new(), &Options::default())
        .unwrap_or_else(|f| panic!("{}", f.render()));
    let mut h = TestHost::req("GET", "/x", &[("Host", "h")]);
    assert_eq!(h.run(&p, Method::Recv), Action::Pass(None));
    std::fs::write(
        dir.join("main.vcl"),
        format!("{BACKEND}include \"missing.vcl\";\n"),
    )
    .unwrap();
    let Err(f) = crate::compile_file(&dir.join("main.vcl"), Vec::new(), &Options::default()) else {
        panic!("compiled with a missing include")
    };
    assert!(f.render().contains("Cannot read include \"missing.vcl\""));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn strings_order_byte_by_byte_on_either_side() {
    let p = prog(
        r#"sub vcl_recv {
            if ("b" > req.http.x && req.http.x < "b" && req.http.x <= req.http.y) {
                return (pass);
            }
        }"#,
    );
    let mut h = TestHost::req("GET", "/", &[("Host", "h"), ("X", "a"), ("Y", "a")]);
    assert_eq!(h.run(&p, Method::Recv), Action::Pass(None));
    let mut h = TestHost::req("GET", "/", &[("Host", "h"), ("X", "c"), ("Y", "c")]);
    assert_eq!(h.run(&p, Method::Recv), Action::Hash);
}

#[test]
fn an_unset_string_equals_nothing_not_even_another_unset_one() {
    let p = prog(
        r#"sub vcl_recv {
            if (req.http.a == req.http.b) {
                return (pass);
            }
            if (req.http.a != req.http.b) {
                return (pipe);
            }
        }"#,
    );
    let mut h = TestHost::req("GET", "/", &[("Host", "h")]);
    assert_eq!(h.run(&p, Method::Recv), Action::Pipe);
    let mut h = TestHost::req("GET", "/", &[("Host", "h"), ("A", "x"), ("B", "x")]);
    assert_eq!(h.run(&p, Method::Recv), Action::Pass(None));
}

#[test]
fn synthetic_of_an_unset_string_writes_null_as_varnishd_does() {
    let p = prog(
        r#"sub vcl_synth {
            synthetic(resp.http.blank);
            return (deliver);
        }"#,
    );
    let mut h = TestHost::default();
    assert_eq!(h.run(&p, Method::Synth), Action::Deliver);
    assert_eq!(h.body, b"(null)");
}

#[test]
fn a_backend_called_default_is_the_default_wherever_it_is() {
    let text = "vcl 4.1;\nbackend first { .host = \"127.0.0.1\"; }\nbackend default { .host = \"127.0.0.2\"; }\nsub vcl_recv { if (req.url == \"/f\") { set req.backend_hint = first; } }\n";
    let p = compile_str("test.vcl", text, &Options::default())
        .unwrap_or_else(|f| panic!("{}", f.render()));
    assert_eq!(p.default_backend, BackendRef::Backend(1));
    assert_eq!(p.backends[1].name, "default");
}

#[test]
fn a_regex_may_be_written_in_constant_pieces() {
    let p = prog(
        r#"sub vcl_recv {
            if (req.url ~ "^/a" + "b$") {
                set req.url = regsub(req.url, "a" + "b", "c");
                return (pass);
            }
        }"#,
    );
    let mut h = TestHost::req("GET", "/ab", &[("Host", "h")]);
    assert_eq!(h.run(&p, Method::Recv), Action::Pass(None));
    assert_eq!(
        h.vars.get(&Var::ReqUrl).map(|v| v.as_bytes().to_vec()),
        Some(b"/c".to_vec())
    );
}

/// The built-in request subroutines run natively do what their VCL does:
/// the same action, headers and hash as the interpreter gives, for every
/// combination of method, Host, credentials, protocol and ESI level.
#[test]
fn native_builtin_subs_do_what_their_vcl_does() {
    let compile = |native_builtin: bool| {
        let opts = Options {
            native_builtin,
            ..Options::default()
        };
        compile_str("test.vcl", BACKEND, &opts).unwrap_or_else(|f| panic!("{}", f.render()))
    };
    let (native, interpreted) = (compile(true), compile(false));
    let body_of = |p: &Program, name: &str| {
        let sub = p.subs.iter().find(|s| s.name == name).expect("sub");
        matches!(sub.body[..], [crate::program::Stmt::Native(_)])
    };
    for name in [
        "vcl_req_host",
        "vcl_req_method",
        "vcl_req_cookie",
        "vcl_builtin_hash",
    ] {
        assert!(
            body_of(&native, name) && !body_of(&interpreted, name),
            "{name}"
        );
    }
    let methods = [
        "GET", "HEAD", "POST", "PATCH", "PRI", "FOO", "get", "DELETE",
    ];
    let hosts = [None, Some("Example.COM"), Some("example.com"), Some("")];
    let mut cases = 0;
    for method in methods {
        for host in hosts {
            for (auth, cookie) in [(false, false), (true, false), (false, true)] {
                for (proto, esi) in [("HTTP/1.1", 0), ("HTTP/1.0", 0), ("HTTP/1.1", 1)] {
                    let mut headers = Vec::new();
                    if let Some(h) = host {
                        headers.push(("Host", h));
                    }
                    if auth {
                        headers.push(("Authorization", "Basic x"));
                    }
                    if cookie {
                        headers.push(("Cookie", "a=b"));
                    }
                    let run = |p: &Program| {
                        let mut h = TestHost::req(method, "/p?q", &headers);
                        h.vars.insert(Var::ReqProto, Value::str(proto));
                        h.vars.insert(Var::ReqEsiLevel, Value::Int(esi));
                        h.vars.insert(
                            Var::ServerIp,
                            Value::Ip(Some("192.0.2.1:80".parse().unwrap())),
                        );
                        let recv = h.run(p, Method::Recv);
                        let hash = h.run(p, Method::Hash);
                        let rest = [Method::Hit, Method::Miss, Method::Pass, Method::Deliver]
                            .map(|m| h.run(p, m));
                        let host = h.hdr(HttpKind::Req, "host");
                        (recv, hash, rest, host, h.hash, h.logs)
                    };
                    let (n, i) = (run(&native), run(&interpreted));
                    assert_eq!(n, i, "{method} {host:?} {auth} {cookie} {proto} {esi}");
                    cases += 1;
                }
            }
        }
    }
    assert_eq!(cases, 288);
    // The request methods the built-in VCL makes of natives run as lists;
    // the others, and every method of the interpreted program, are walked.
    let flat = |p: &Program, m: Method| p.flat[m.index()].is_some();
    for m in [
        Method::Recv,
        Method::Hash,
        Method::Hit,
        Method::Miss,
        Method::Pass,
        Method::Deliver,
    ] {
        assert!(flat(&native, m) && !flat(&interpreted, m), "{}", m.name());
    }
    for m in [
        Method::Synth,
        Method::BackendResponse,
        Method::BackendError,
        Method::Purge,
    ] {
        assert!(!flat(&native, m), "{}", m.name());
    }
}

/// A program that adds to a built-in subroutine gets it interpreted: its
/// own statements first, then the built-in ones.
#[test]
fn a_builtin_sub_a_program_extends_is_interpreted() {
    let p = prog("sub vcl_req_cookie { if (req.http.cookie ~ \"^consent=\") { return; } }\n");
    let sub = p
        .subs
        .iter()
        .find(|s| s.name == "vcl_req_cookie")
        .expect("sub");
    assert!(!matches!(sub.body[..], [crate::program::Stmt::Native(_)]));
    assert!(p.flat[Method::Recv.index()].is_none(), "vcl_recv is walked");
    let mut h = TestHost::req("GET", "/", &[("Host", "a"), ("Cookie", "consent=1")]);
    assert_eq!(h.run(&p, Method::Recv), Action::Hash);
    let mut h = TestHost::req("GET", "/", &[("Host", "a"), ("Cookie", "other=1")]);
    assert_eq!(h.run(&p, Method::Recv), Action::Pass(None));
}

#[test]
fn a_methods_call_name_is_its_name_in_upper_case_without_vcl() {
    assert_eq!(Method::Recv.call_name(), "RECV");
    assert_eq!(Method::BackendResponse.call_name(), "BACKEND_RESPONSE");
    for m in Method::ALL {
        assert_eq!(format!("vcl_{}", m.call_name().to_lowercase()), m.name());
    }
}
