//! br and zstd: the coding each client gets, renditions made once per
//! object and checked with the reference decoders (the `brotli` and
//! `zstd` command-line tools, and curl's `--compressed`), bodies an
//! origin sent br or zstd stored as they came and decoded for clients
//! that cannot take them, in bounded memory however far they expand.

use crate::harness::{eventually, Lacquer};
use crate::origin::{Origin, Reply};
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Runs a tool with `input` on its standard input; its output.
fn tool(cmd: &str, args: &[&str], input: &[u8]) -> Vec<u8> {
    let mut child = Command::new(cmd)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{cmd} runs (scripts/test installs it): {e}"));
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(out.status.success(), "{cmd} {args:?} failed");
    out.stdout
}

/// A request over HTTP/2 (prior knowledge) with curl, as it came: the
/// response's `Content-Encoding` and body.
fn h2_get(lq: &Lacquer, url: &str, accept_encoding: &str) -> (Option<String>, Vec<u8>) {
    let head = std::env::temp_dir().join(format!(
        "lacquer-e2e-h2-head-{}-{}",
        std::process::id(),
        url.replace('/', "_")
    ));
    let out = Command::new("curl")
        .args(["-s", "--http2-prior-knowledge", "-H", "Host: test", "-H"])
        .arg(format!("Accept-Encoding: {accept_encoding}"))
        .arg("-D")
        .arg(&head)
        .arg(format!("http://{}{url}", lq.addr))
        .output()
        .expect("curl runs (scripts/test installs it)");
    let head_text = std::fs::read_to_string(&head).unwrap_or_default();
    let _ = std::fs::remove_file(&head);
    assert!(head_text.starts_with("HTTP/2 200"), "{head_text}");
    let coding = head_text.lines().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.eq_ignore_ascii_case("content-encoding")
            .then(|| v.trim().to_string())
    });
    (coding, out.stdout)
}

/// A page of text that compresses well.
fn page(n: usize) -> Vec<u8> {
    let words = [
        "lacquer", "caches", "pages", "for", "varnish", "users", "<p>", "</p>\n",
    ];
    let mut out = b"<!doctype html><title>t</title>".to_vec();
    for i in 0..n {
        out.extend_from_slice(words[(i * 7 + i / 3) % words.len()].as_bytes());
        out.push(b' ');
    }
    out
}

fn text_origin(body: Vec<u8>) -> Origin {
    Origin::start(move |_| {
        Reply::ok("")
            .body_bytes(body.clone())
            .header("Content-Type", "text/html; charset=utf-8")
            .header("Cache-Control", "max-age=600")
            .header("ETag", "\"v1\"")
    })
}

#[test]
fn br_and_zstd_renditions_are_made_once_and_decode_with_the_reference_tools() {
    let body = page(20_000);
    let origin = text_origin(body.clone());
    let lq = Lacquer::start(origin.addr, &[]);
    let mut c = lq.connect();
    let all = [("accept-encoding", "gzip, deflate, br, zstd")];
    let first = c.get("/p", &all);
    assert_eq!(first.body, body, "the first request is served as stored");
    assert_eq!(first.header("content-encoding"), None);
    // Later hits get the rendition once it is made.
    let mut zstd = None;
    assert!(eventually(Duration::from_secs(20), || {
        let r = c.get("/p", &all);
        let done = r.header("content-encoding") == Some("zstd");
        zstd = done.then_some(r);
        done
    }));
    let zstd = zstd.unwrap();
    assert_eq!(tool("zstd", &["-d", "-c"], &zstd.body), body);
    assert!(zstd.body.len() < body.len() / 4);
    assert_eq!(zstd.header("vary"), Some("Accept-Encoding"));
    assert_eq!(zstd.header("etag"), Some("W/\"v1\""));
    assert_eq!(
        zstd.header("content-length"),
        Some(zstd.body.len().to_string().as_str())
    );
    assert_eq!(zstd.header("accept-ranges"), None);
    let br_only = [("accept-encoding", "gzip, br")];
    let mut br = None;
    assert!(eventually(Duration::from_secs(20), || {
        let r = c.get("/p", &br_only);
        let done = r.header("content-encoding") == Some("br");
        br = done.then_some(r);
        done
    }));
    assert_eq!(tool("brotli", &["-d", "-c"], &br.unwrap().body), body);
    // q-values rank; identity for whoever takes none of them.
    let r = c.get("/p", &[("accept-encoding", "zstd;q=0.5, br;q=0.8")]);
    assert_eq!(r.header("content-encoding"), Some("br"));
    let r = c.get("/p", &[("accept-encoding", "zstd;q=0, br;q=0, gzip")]);
    assert_eq!(r.header("content-encoding"), None);
    assert_eq!(r.body, body);
    let r = c.get("/p", &[]);
    assert_eq!(r.body, body);
    // A HEAD hears the rendition's length.
    let head = c.request("HEAD", "/p", &all);
    assert_eq!(head.header("content-encoding"), Some("zstd"));
    assert_eq!(
        head.header("content-length"),
        Some(zstd.body.len().to_string().as_str())
    );
    // Over HTTP/2 too.
    let (coding, h2_body) = h2_get(&lq, "/p", "br");
    assert_eq!(coding.as_deref(), Some("br"));
    assert_eq!(tool("brotli", &["-d", "-c"], &h2_body), body);
    // curl's own decoders take what it asks for.
    let url = format!("http://{}/p", lq.addr);
    let out = Command::new("curl")
        .args(["-s", "--compressed", "-H", "Host: test", &url])
        .output()
        .expect("curl runs (scripts/test installs it)");
    assert_eq!(out.stdout, body);
    // Each rendition was made once, from one fetch.
    for _ in 0..20 {
        c.get("/p", &all);
        c.get("/p", &br_only);
    }
    // (Counters are published a moment after they change.)
    assert!(eventually(Duration::from_secs(10), || lq
        .counter("MAIN.g_renditions")
        == 2));
    assert_eq!(lq.counter("MAIN.n_zstd"), 1);
    assert_eq!(lq.counter("MAIN.n_brotli"), 1);
    assert_eq!(origin.count("/p"), 1);
    // A purge takes the renditions with the object.
    lq.cli_ok("ban req.url ~ .");
    let fresh = c.get("/p", &all);
    assert_eq!(fresh.header("content-encoding"), None);
    assert!(eventually(Duration::from_secs(10), || lq
        .counter("MAIN.g_renditions")
        < 2));
}

#[test]
fn many_clients_at_once_make_one_rendition() {
    let body = page(40_000);
    let origin = text_origin(body.clone());
    let lq = Lacquer::start(origin.addr, &[]);
    lq.get("/many");
    let threads: Vec<_> = (0..16)
        .map(|_| {
            let mut c = lq.connect();
            std::thread::spawn(move || {
                for _ in 0..10 {
                    c.get("/many", &[("accept-encoding", "br")]);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut c = lq.connect();
    assert!(eventually(Duration::from_secs(20), || c
        .get("/many", &[("accept-encoding", "br")])
        .header("content-encoding")
        == Some("br")));
    assert!(eventually(Duration::from_secs(10), || lq
        .counter("MAIN.g_renditions")
        == 1));
    assert_eq!(lq.counter("MAIN.n_brotli"), 1);
}

#[test]
fn gzip_stays_as_varnish_has_it_and_gzip_objects_get_renditions() {
    let body = page(10_000);
    let origin = text_origin(body.clone());
    let lq = Lacquer::spawn(
        &[],
        Some(format!(
            "vcl 4.1;\nbackend b {{ .host = \"127.0.0.1\"; .port = \"{}\"; }}\n\
             sub vcl_backend_response {{ set beresp.do_gzip = true; }}\n",
            origin.addr.port()
        )),
    );
    let mut c = lq.connect();
    let gz = c.get("/g", &[("accept-encoding", "gzip")]);
    assert_eq!(gz.header("content-encoding"), Some("gzip"));
    assert_eq!(tool("gzip", &["-d", "-c"], &gz.body), body);
    let plain = c.get("/g", &[]);
    assert_eq!(plain.body, body);
    let mut zstd = None;
    assert!(eventually(Duration::from_secs(20), || {
        let r = c.get("/g", &[("accept-encoding", "gzip, zstd")]);
        let done = r.header("content-encoding") == Some("zstd");
        zstd = done.then_some(r);
        done
    }));
    assert_eq!(tool("zstd", &["-d", "-c"], &zstd.unwrap().body), body);
    // The gzip'd object still goes out as it is stored.
    let again = c.get("/g", &[("accept-encoding", "gzip")]);
    assert_eq!(again.body, gz.body);
    // Served as varnishd serves it when only gzip is offered.
    lq.cli_ok("param.set http_encodings gzip");
    let r = c.get("/g", &[("accept-encoding", "gzip, zstd")]);
    assert_eq!(r.header("content-encoding"), Some("gzip"));
}

#[test]
fn what_does_not_suit_gets_no_rendition() {
    let origin = Origin::start(|req| {
        let r = Reply::ok("").header("Cache-Control", "max-age=600");
        match req.url.as_str() {
            "/img" => r.header("Content-Type", "image/png").body_bytes(page(5000)),
            "/small" => r
                .header("Content-Type", "text/plain")
                .body_bytes(b"tiny".to_vec()),
            "/no-transform" => r
                .header("Content-Type", "text/plain")
                .header("Cache-Control", "no-transform")
                .body_bytes(page(5000)),
            _ => r.status(404),
        }
    });
    let lq = Lacquer::start(origin.addr, &[]);
    let mut c = lq.connect();
    for url in ["/img", "/small", "/no-transform"] {
        for _ in 0..3 {
            let r = c.get(url, &[("accept-encoding", "br, zstd")]);
            assert_eq!(r.header("content-encoding"), None, "{url}");
        }
    }
    // (Counters are published a moment after they change: the requests
    // counted show that what was done is in.)
    assert!(eventually(Duration::from_secs(10), || lq
        .counter("MAIN.client_req")
        == 9));
    assert_eq!(lq.counter("MAIN.n_brotli") + lq.counter("MAIN.n_zstd"), 0);
}

#[test]
fn origin_br_and_zstd_are_stored_as_they_came_and_decoded_for_others() {
    let body = page(8000);
    let br = tool("brotli", &["-c", "-q", "6"], &body);
    let zst = tool("zstd", &["-c", "-5"], &body);
    let origin = Origin::start(move |req| {
        let (coding, bytes) = if req.url.starts_with("/br") {
            ("br", br.clone())
        } else {
            ("zstd", zst.clone())
        };
        Reply::ok("")
            .body_bytes(bytes)
            .header("Content-Type", "text/html")
            .header("Content-Encoding", coding)
            .header("Cache-Control", "max-age=600")
    });
    let lq = Lacquer::start(origin.addr, &[]);
    let mut c = lq.connect();
    for (url, coding, tool_name) in [("/br", "br", "brotli"), ("/zstd", "zstd", "zstd")] {
        let as_is = c.get(url, &[("accept-encoding", &format!("gzip, {coding}"))]);
        assert_eq!(as_is.header("content-encoding"), Some(coding));
        assert_eq!(tool(tool_name, &["-d", "-c"], &as_is.body), body);
        let decoded = c.get(url, &[("accept-encoding", "gzip")]);
        assert_eq!(decoded.header("content-encoding"), None, "{url}");
        assert_eq!(decoded.body, body, "{url}");
        assert!(decoded.header("vary").unwrap().contains("Accept-Encoding"));
        assert_eq!(origin.count(url), 1);
    }
    assert!(eventually(Duration::from_secs(10), || lq
        .counter("MAIN.n_unzstd")
        == 1));
    assert_eq!(lq.counter("MAIN.n_unbrotli"), 1);
}

/// The peak resident memory of a process, in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kb * 1024
}

#[test]
fn a_bomb_from_the_origin_is_decoded_in_bounded_memory() {
    // 256 MiB of zeros in a few kilobytes, for a client that cannot take
    // the coding (bench/encodings.sh does it with 1 GiB).
    let zeros = vec![0u8; 256 << 20];
    let br = tool("brotli", &["-c", "-q", "5"], &zeros);
    let zst = tool("zstd", &["-c", "-3"], &zeros);
    drop(zeros);
    assert!(br.len() < 1 << 20 && zst.len() < 1 << 20);
    let origin = Origin::start(move |req| {
        let (coding, bytes) = if req.url == "/br" {
            ("br", br.clone())
        } else {
            ("zstd", zst.clone())
        };
        Reply::ok("")
            .body_bytes(bytes)
            .header("Content-Type", "text/plain")
            .header("Content-Encoding", coding)
    });
    let lq = Lacquer::start(origin.addr, &[]);
    lq.get("/warm-up");
    let before = peak_rss(lq.pid());
    for url in ["/br", "/zstd"] {
        let mut c = lq.connect();
        let r = c.get(url, &[("accept-encoding", "gzip")]);
        assert_eq!(r.body.len(), 256 << 20, "{url}");
        assert!(r.body.iter().all(|&b| b == 0));
    }
    let grew = peak_rss(lq.pid()).saturating_sub(before);
    assert!(grew < 32 << 20, "peak memory grew {} MiB", grew >> 20);
}

#[test]
fn vcl_reads_and_sets_the_filters() {
    let body = page(6000);
    let origin = text_origin(body.clone());
    let lq = Lacquer::spawn(
        &[],
        Some(format!(
            "vcl 4.1;\nbackend b {{ .host = \"127.0.0.1\"; .port = \"{}\"; }}\n\
             sub vcl_backend_response {{\n\
               if (bereq.url ~ \"stored-br\") {{ set beresp.filters = \"br\"; }}\n\
               set beresp.http.x-fetch-filters = beresp.filters;\n\
             }}\n\
             sub vcl_deliver {{\n\
               if (req.http.x-force) {{ set resp.filters = req.http.x-force; }}\n\
               set resp.http.x-filters = resp.filters;\n\
             }}\n",
            origin.addr.port()
        )),
    );
    let mut c = lq.connect();
    // Stored br at the fetch: as stored to br clients, decoded for others.
    let r = c.get("/stored-br", &[("accept-encoding", "br")]);
    assert_eq!(r.header("content-encoding"), Some("br"));
    assert_eq!(r.header("x-fetch-filters"), Some("br"));
    assert_eq!(tool("brotli", &["-d", "-c"], &r.body), body);
    let r = c.get("/stored-br", &[("accept-encoding", "gzip")]);
    assert_eq!(r.header("x-filters"), Some("unbr"));
    assert_eq!(r.body, body);
    // Compressed on the way out as VCL says, whatever the client sent.
    let r = c.get("/live", &[("x-force", "zstd")]);
    assert_eq!(r.header("content-encoding"), Some("zstd"));
    assert_eq!(r.header("x-filters"), Some("zstd"));
    assert_eq!(tool("zstd", &["-d", "-c"], &r.body), body);
    // A rendition shows as the client's coding.
    assert!(eventually(Duration::from_secs(20), || c
        .get("/live", &[("accept-encoding", "br")])
        .header("x-filters")
        == Some("br")));
    let r = c.get("/live", &[("accept-encoding", "br"), ("x-force", "")]);
    assert_eq!(r.header("content-encoding"), None);
    assert_eq!(r.body, body);
}

#[test]
fn esi_pages_are_compressed_in_the_clients_coding() {
    let origin = Origin::start(|req| {
        let r = Reply::ok("")
            .header("Content-Type", "text/html")
            .header("Cache-Control", "max-age=600");
        if req.url == "/frag" {
            r.body_bytes(page(3000))
        } else {
            let mut page_body = page(2000);
            page_body.extend_from_slice(b"<esi:include src=\"/frag\"/>");
            page_body.extend_from_slice(&page(1000));
            r.body_bytes(page_body)
        }
    });
    let lq = Lacquer::spawn(
        &[],
        Some(format!(
            "vcl 4.1;\nbackend b {{ .host = \"127.0.0.1\"; .port = \"{}\"; }}\n\
             sub vcl_backend_response {{\n\
               if (bereq.url == \"/page\") {{ set beresp.do_esi = true; }}\n\
               set beresp.do_gzip = true;\n\
             }}\n",
            origin.addr.port()
        )),
    );
    let mut c = lq.connect();
    let plain = c.get("/page", &[]);
    let mut expected = page(2000);
    expected.extend_from_slice(&page(3000));
    expected.extend_from_slice(&page(1000));
    assert_eq!(plain.body, expected);
    let gz = c.get("/page", &[("accept-encoding", "gzip")]);
    assert_eq!(gz.header("content-encoding"), Some("gzip"));
    assert_eq!(tool("gzip", &["-d", "-c"], &gz.body), expected);
    for (coding, tool_name) in [("br", "brotli"), ("zstd", "zstd")] {
        let r = c.get("/page", &[("accept-encoding", &format!("gzip, {coding}"))]);
        assert_eq!(r.header("content-encoding"), Some(coding));
        assert_eq!(
            tool(tool_name, &["-d", "-c"], &r.body),
            expected,
            "{coding}"
        );
    }
}
