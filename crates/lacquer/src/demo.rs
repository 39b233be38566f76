//! `lacquer demo`: one command, nothing else running. A small site (pages
//! with cache headers, a page made of ESI includes, a slow page, a page
//! that sets cookies, a large object, tagged API answers) served on a
//! loopback port by this process, and Lacquer in front of it with a VCL
//! that shows the features; it prints what to try and how to watch.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The demo's VCL, with `ORIGIN_PORT` for the site's port.
const DEMO_VCL: &str = r#"vcl 4.1;

import std;
import xkey;

backend site {
    .host = "127.0.0.1";
    .port = "ORIGIN_PORT";
    .probe = { .url = "/health"; .interval = 5s; .window = 3; .threshold = 2; .initial = 2; }
}

acl local { "127.0.0.1"; "::1"; }

sub vcl_recv {
    # Invalidation from this machine: PURGE a URL, or a tag with xkey-purge.
    if (req.method == "PURGE") {
        if (client.ip !~ local) { return (synth(405)); }
        if (req.http.xkey-purge) {
            set req.http.n = xkey.purge(req.http.xkey-purge);
            return (synth(200, "Purged " + req.http.n + " objects"));
        }
        return (purge);
    }
    # Only the cookie page needs cookies; elsewhere they would stop caching.
    if (req.url !~ "^/cookie") {
        unset req.http.Cookie;
    }
}

sub vcl_backend_response {
    # Pages are ESI-processed and stored gzip'd; grace keeps serving them
    # for an hour if the site goes down.
    if (beresp.http.Content-Type ~ "text/html") {
        set beresp.do_esi = true;
    }
    if (beresp.http.Content-Type ~ "text|json") {
        set beresp.do_gzip = true;
    }
    set beresp.grace = 1h;
}

sub vcl_deliver {
    if (obj.hits > 0) {
        set resp.http.X-Cache = "HIT";
    } else {
        set resp.http.X-Cache = "MISS";
    }
    set resp.http.X-Cache-Hits = obj.hits;
}
"#;

/// Runs the demo: the site on its own threads, Lacquer in this thread.
pub fn main(args: &[String]) -> ExitCode {
    let mut listen = "127.0.0.1:6081".to_string();
    // The dashboard, on loopback unless told otherwise.
    let mut dashboard = "127.0.0.1:6085".to_string();
    let mut workdir = None;
    let mut rest = args.iter();
    while let Some(a) = rest.next() {
        match a.as_str() {
            "-a" => match rest.next() {
                Some(v) => listen = v.clone(),
                None => return bad_usage(),
            },
            "-n" => match rest.next() {
                Some(v) => workdir = Some(PathBuf::from(v)),
                None => return bad_usage(),
            },
            "--dashboard" => match rest.next() {
                Some(v) => dashboard = v.clone(),
                None => return bad_usage(),
            },
            _ => return bad_usage(),
        }
    }
    // An address with port 0 is given a free port now, so that what is
    // printed below is where Lacquer and the dashboard will be.
    let (listen, dashboard) = (with_free_port(&listen), with_free_port(&dashboard));
    let site = match TcpListener::bind("127.0.0.1:0") {
        Ok(l) => l,
        Err(e) => {
            eprintln!("lacquer demo: cannot start the demo site: {e}");
            return ExitCode::from(1);
        }
    };
    let origin_port = site.local_addr().map(|a| a.port()).unwrap_or(0);
    std::thread::spawn(move || {
        for conn in site.incoming().flatten() {
            std::thread::spawn(move || serve_site(conn));
        }
    });
    let workdir = workdir.unwrap_or_else(|| std::env::temp_dir().join("lacquer-demo"));
    if let Err(e) = std::fs::create_dir_all(&workdir) {
        eprintln!("lacquer demo: {}: {e}", workdir.display());
        return ExitCode::from(1);
    }
    let vcl = workdir.join("demo.vcl");
    let text = DEMO_VCL.replace("ORIGIN_PORT", &origin_port.to_string());
    if let Err(e) = std::fs::write(&vcl, text) {
        eprintln!("lacquer demo: {}: {e}", vcl.display());
        return ExitCode::from(1);
    }
    let n = workdir.display().to_string();
    let base = format!("http://{listen}");
    eprintln!(
        "Lacquer demo: a small site on 127.0.0.1:{origin_port}, Lacquer in front of it on {base}/\n\
         (its program: {vcl}). Try:\n\
         \n  curl -i {base}/              a page of ESI includes: a cached frame and news, a live clock\n\
         \x20 curl -i {base}/slow          2 s the first time; requests meanwhile wait for that one fetch\n\
         \x20 curl -i {base}/cookie        sets a cookie: passed, never cached\n\
         \x20 curl -so /dev/null -w '%{{size_download}}\\n' {base}/large   1 MiB, streamed then cached\n\
         \x20 curl -i {base}/api/item/7    tagged item-7; then: curl -X PURGE -H 'xkey-purge: item-7' {base}/\n\
         \nWatch it:\n\
         \n  http://{dashboard}/   the live dashboard\n\
         \x20 lacquer log -n {n}        every request, as varnishlog shows it\n\
         \x20 lacquer stat -n {n}       the counters, as varnishstat\n\
         \x20 lacquer top -n {n}        the busiest URLs and headers, as varnishtop\n\
         \x20 lacquer adm -n {n}        the management CLI, as varnishadm\n",
        vcl = vcl.display(),
    );
    // The demo's site runs in this process as whoever started it, and
    // Lacquer stays that user too (on loopback unless told otherwise).
    let serve: Vec<String> = [
        "-j",
        "none",
        "-a",
        listen.as_str(),
        "-f",
        &vcl.display().to_string(),
        "-n",
        &n,
        "-s",
        "malloc,128m",
        "--dashboard",
        dashboard.as_str(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    crate::serve(&serve)
}

/// `addr` with a port the system has free in place of port 0 (found by
/// binding it, and let go at once for Lacquer to bind); any other address
/// as it is.
fn with_free_port(addr: &str) -> String {
    match addr.parse::<std::net::SocketAddr>() {
        Ok(a) if a.port() == 0 => TcpListener::bind(a)
            .and_then(|l| l.local_addr())
            .map_or_else(|_| addr.to_string(), |a| a.to_string()),
        _ => addr.to_string(),
    }
}

/// The demo's options.
pub const USAGE: &str =
    "usage: lacquer demo [-a address:port] [--dashboard address:port] [-n workdir]";

/// Each option, as `--help` shows it.
pub const OPTIONS: &[(&str, &str)] = &[
    (
        "-a address:port",
        "Where Lacquer listens (default 127.0.0.1:6081; port 0: any free port)",
    ),
    (
        "--dashboard address:port",
        "Where the dashboard listens (default 127.0.0.1:6085)",
    ),
    (
        "-n workdir",
        "The work directory (default: lacquer-demo in the temporary directory)",
    ),
    ("-h, --help", "Print this and exit"),
];

fn bad_usage() -> ExitCode {
    eprintln!("{USAGE}");
    ExitCode::from(2)
}

/// Answers one connection of the demo site, keep-alive unless the request
/// asks for a close (as health probes do: they read to the end).
fn serve_site(conn: TcpStream) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(60)));
    let Ok(mut out) = conn.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(conn);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
        let mut length = 0usize;
        let mut close = false;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            if h == "\r\n" || h == "\n" {
                break;
            }
            let h = h.to_ascii_lowercase();
            if let Some(v) = h.strip_prefix("content-length:") {
                length = v.trim().parse().unwrap_or(0);
            }
            if let Some(v) = h.strip_prefix("connection:") {
                close = v.split(',').any(|t| t.trim() == "close");
            }
        }
        let mut body = vec![0u8; length.min(1 << 20)];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let (status, headers, body) = page(&path);
        let mut head = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\n", body.len());
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        if out.write_all(head.as_bytes()).is_err() || out.write_all(&body).is_err() || close {
            return;
        }
    }
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The demo site's pages: status, headers, body.
fn page(path: &str) -> (&'static str, Vec<(&'static str, String)>, Vec<u8>) {
    let html = |cc: &str| {
        vec![
            ("Content-Type", "text/html; charset=utf-8".to_string()),
            ("Cache-Control", cc.to_string()),
        ]
    };
    match path {
        "/" => (
            "200 OK",
            html("max-age=60"),
            format!(
                "<!DOCTYPE html>\n<html><head><title>Lacquer demo</title></head><body>\n\
                 <h1>Lacquer demo</h1>\n\
                 <p>This frame is cached for 60 s (made at {}).</p>\n\
                 <esi:include src=\"/fragment/news\"/>\n\
                 <esi:include src=\"/fragment/clock\"/>\n\
                 <ul><li><a href=\"/slow\">a slow page</a></li><li><a href=\"/cookie\">a page with a cookie</a></li>\
                 <li><a href=\"/large\">a large object</a></li><li><a href=\"/api/item/7\">a tagged item</a></li></ul>\n\
                 </body></html>\n",
                now_secs()
            )
            .into_bytes(),
        ),
        "/fragment/news" => (
            "200 OK",
            html("max-age=10"),
            format!("<p>News, cached for 10 s (made at {}).</p>\n", now_secs()).into_bytes(),
        ),
        "/fragment/clock" => (
            "200 OK",
            html("no-store"),
            format!("<p>The clock, never cached: {}.</p>\n", now_secs()).into_bytes(),
        ),
        "/slow" => {
            std::thread::sleep(Duration::from_secs(2));
            (
                "200 OK",
                html("max-age=30"),
                b"<p>This took the site 2 seconds; Lacquer answers at once for 30 s.</p>\n"
                    .to_vec(),
            )
        }
        "/cookie" => {
            let mut h = html("private");
            h.push(("Set-Cookie", format!("visit={}; Path=/", now_secs())));
            ("200 OK", h, b"<p>A cookie for you: this page is never cached.</p>\n".to_vec())
        }
        "/large" => (
            "200 OK",
            vec![
                ("Content-Type", "application/octet-stream".to_string()),
                ("Cache-Control", "max-age=3600".to_string()),
            ],
            vec![b'x'; 1 << 20],
        ),
        "/health" => ("200 OK", html("no-store"), b"ok\n".to_vec()),
        p if p.starts_with("/api/item/") => {
            let id = &p["/api/item/".len()..];
            (
                "200 OK",
                vec![
                    ("Content-Type", "application/json".to_string()),
                    ("Cache-Control", "max-age=300".to_string()),
                    ("xkey", format!("item-{id} items")),
                ],
                format!("{{\"item\": \"{id}\", \"made\": {}}}\n", now_secs()).into_bytes(),
            )
        }
        _ => (
            "404 Not Found",
            html("max-age=5"),
            b"<p>No such page in the demo.</p>\n".to_vec(),
        ),
    }
}
