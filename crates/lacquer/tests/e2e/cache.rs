//! The cache with the built-in policy: keys, what is cached and for how
//! long, variants, coalescing, streaming, grace, conditional requests,
//! HEAD and ranges, and the per-delivery headers.

use crate::harness::{eventually, Lacquer};
use crate::origin::{Origin, Reply};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

#[test]
fn miss_then_hit_with_delivery_headers() {
    let origin = Origin::start(|req| {
        Reply::ok(&format!("page {}", req.url))
            .header("Age", "30")
            .header("Accept-Ranges", "bytes")
    });
    let lq = Lacquer::start(origin.addr, &["-i", "edge-7"]);
    let mut c = lq.connect();
    let miss = c.get("/page", &[]);
    assert_eq!(miss.status, 200);
    assert_eq!(miss.xids().len(), 1);
    let hit = c.get("/page", &[]);
    assert_eq!(hit.text(), "page /page");
    let (miss_ids, hit_ids) = (miss.xids(), hit.xids());
    assert_eq!(hit_ids.len(), 2);
    assert_ne!(hit_ids[0], miss_ids[0]);
    let seen_xid: u64 = origin.seen()[0]
        .header("x-varnish")
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(
        hit_ids[1], seen_xid,
        "the hit names the fetch that stored the object"
    );
    assert!(
        hit.header("age").unwrap().parse::<u64>().unwrap() >= 30,
        "backend Age counts"
    );
    assert_eq!(hit.header("via"), Some("1.1 edge-7 (Lacquer/0.1)"));
    assert_eq!(hit.header("accept-ranges"), Some("bytes"));
    assert_eq!(hit.count("accept-ranges"), 1, "not beside the backend's");
    assert!(hit.header("date").is_some());
    assert_eq!(hit.count("age"), 1);
    assert_eq!(origin.count("/page"), 1);
}

#[test]
fn key_is_url_and_host() {
    let origin = Origin::start(|req| {
        Reply::ok(&format!(
            "{} {}",
            req.header("host").unwrap_or("-"),
            req.url
        ))
    });
    let lq = Lacquer::start(origin.addr, &[]);
    let mut c = lq.connect();
    assert_eq!(c.get("/k", &[("Host", "a.example")]).text(), "a.example /k");
    assert_eq!(c.get("/k", &[("Host", "b.example")]).text(), "b.example /k");
    assert_eq!(c.get("/k", &[("Host", "a.example")]).xids().len(), 2);
    assert_eq!(c.get("/k?x", &[("Host", "a.example")]).xids().len(), 1);
    assert_eq!(origin.count("/k"), 2);
}

#[test]
fn only_get_and_head_without_credentials_are_cached() {
    let origin = Origin::start(|req| Reply::ok(&req.method));
    let lq = Lacquer::start(origin.addr, &[]);
    let mut c = lq.connect();
    for _ in 0..2 {
        c.request("POST", "/m", &[("Content-Length", "0")]);
        c.request("DELETE", "/m", &[]);
        c.get("/cookie", &[("Cookie", "session=1")]);
        c.get("/auth", &[("Authorization", "Basic eDp5")]);
    }
    let seen = origin.seen();
    assert_eq!(seen.iter().filter(|s| s.method == "POST").count(), 2);
    assert_eq!(seen.iter().filter(|s| s.method == "DELETE").count(), 2);
    assert_eq!(origin.count("/cookie"), 2);
    assert_eq!(origin.count("/auth"), 2);
    assert_eq!(
        seen.iter()
            .find(|s| s.url == "/cookie")
            .unwrap()
            .header("cookie"),
        Some("session=1")
    );
}

#[test]
fn uncacheable_responses_go_to_the_backend_every_time() {
    let origin = Origin::start(|req| {
        let r = Reply::ok("u");
        match req.url.as_str() {
            "/no-store" => r.header("Cache-Control", "no-store"),
            "/no-cache" => r.header("Cache-Control", "no-cache"),
            "/private" => r.header("Cache-Control", "private, max-age=60"),
            "/cookie" => r.header("Set-Cookie", "a=b"),
            "/vary-star" => r.header("Vary", "Accept, *"),
            "/max-age-0" => r.header("Cache-Control", "max-age=0"),
            "/aged-out" => r
                .header("Cache-Control", "max-age=100")
                .header("Age", "100"),
            "/error" => r.status(500),
            "/found" => r.status(302),
            "/expired" => r.header("Expires", "Thu, 01 Jan 1970 00:00:00 GMT"),
            _ => r,
        }
    });
    let lq = Lacquer::start(origin.addr, &[]);
    let urls = [
        "/no-store",
        "/no-cache",
        "/private",
        "/cookie",
        "/vary-star",
        "/max-age-0",
        "/aged-out",
        "/error",
        "/found",
        "/expired",
    ];
    let mut c = lq.connect();
    for url in urls {
        c.get(url, &[]);
        let again = c.get(url, &[]);
        assert_eq!(again.xids().len(), 1, "{url} not a hit");
    }
    for url in urls {
        assert_eq!(origin.count(url), 2, "{url}");
    }
    // Cached ones for comparison.
    for url in ["/plain", "/404"] {
        c.get(url, &[]);
        assert_eq!(c.get(url, &[]).xids().len(), 2, "{url}");
    }
}

#[test]
fn hit_for_miss_requests_are_not_serialised() {
    let origin = Origin::start(|_| {
        Reply::ok("personal")
            .header("Cache-Control", "private")
            .delay(Duration::from_millis(300))
    });
    let lq = Arc::new(Lacquer::start(origin.addr, &[]));
    assert_eq!(lq.get("/fragment").status, 200);
    let threads: Vec<_> = (0..6)
        .map(|_| {
            let lq = lq.clone();
            std::thread::spawn(move || lq.get("/fragment").status)
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap(), 200);
    }
    assert_eq!(origin.count("/fragment"), 7);
    assert!(
        origin.max_in_flight() >= 3,
        "hit-for-miss fetches ran in parallel"
    );
}

#[test]
fn ttl_rules_expire_objects() {
    let origin = Origin::start(|req| {
        let r = Reply::ok("t");
        match req.url.as_str() {
            "/s-maxage" => r.header("Cache-Control", "max-age=100, s-maxage=1"),
            "/max-age" => r.header("Cache-Control", "max-age=1"),
            "/aged" => r.header("Cache-Control", "max-age=3").header("Age", "2"),
            "/expires" => {
                let now = std::time::SystemTime::now();
                r.header("Date", &httpdate(now))
                    .header("Expires", &httpdate(now + Duration::from_secs(1)))
            }
            "/long" => r.header("Cache-Control", "max-age=100, s-maxage=100"),
            _ => r,
        }
    });
    let lq = Lacquer::start(origin.addr, &["-t", "1", "-p", "default_grace=0"]);
    let urls = ["/s-maxage", "/max-age", "/aged", "/expires", "/default-ttl"];
    let mut c = lq.connect();
    for url in urls.iter().chain(["/long"].iter()) {
        c.get(url, &[]);
        assert_eq!(c.get(url, &[]).xids().len(), 2, "{url} cached at first");
    }
    for url in urls {
        assert!(
            eventually(Duration::from_secs(6), || {
                lq.get(url);
                origin.count(url) >= 2
            }),
            "{url} expired"
        );
    }
    assert_eq!(lq.get("/long").xids().len(), 2);
    assert_eq!(origin.count("/long"), 1);
}

fn httpdate(t: std::time::SystemTime) -> String {
    // RFC 1123 date written by hand so the test does not use product code.
    let secs = t.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let days = secs / 86400;
    let (h, m, s) = ((secs % 86400) / 3600, (secs % 3600) / 60, secs % 60);
    let weekday = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][(days % 7) as usize];
    let (mut y, mut d) = (1970u64, days);
    loop {
        let len = if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 {
            366
        } else {
            365
        };
        if d < len {
            break;
        }
        d -= len;
        y += 1;
    }
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let months = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    let names = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let mut mo = 0;
    while d >= months[mo] {
        d -= months[mo];
        mo += 1;
    }
    format!(
        "{weekday}, {:02} {} {y} {h:02}:{m:02}:{s:02} GMT",
        d + 1,
        names[mo]
    )
}

#[test]
fn vary_keeps_variants_apart() {
    let origin = Origin::start(|req| {
        Reply::ok(&format!(
            "lang {}",
            req.header("accept-language").unwrap_or("none")
        ))
        .header("Vary", "Accept-Language")
    });
    let lq = Lacquer::start(origin.addr, &[]);
    let mut c = lq.connect();
    for _ in 0..2 {
        assert_eq!(c.get("/v", &[("Accept-Language", "en")]).text(), "lang en");
        assert_eq!(c.get("/v", &[("Accept-Language", "fr")]).text(), "lang fr");
        assert_eq!(c.get("/v", &[]).text(), "lang none");
    }
    assert_eq!(origin.count("/v"), 3);
}

#[test]
fn concurrent_misses_make_one_fetch() {
    let origin = Origin::start(|_| Reply::ok("shared").delay(Duration::from_millis(400)));
    let lq = Arc::new(Lacquer::start(origin.addr, &[]));
    let threads: Vec<_> = (0..10)
        .map(|_| {
            let lq = lq.clone();
            std::thread::spawn(move || lq.get("/popular").text())
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap(), "shared");
    }
    assert_eq!(origin.count("/popular"), 1);
}

#[test]
fn a_fetch_streams_to_every_waiting_client() {
    let gate = Arc::new(Semaphore::new(0));
    let g = gate.clone();
    let origin = Origin::start(move |_| {
        let mut r = Reply::ok("first-part|second-part");
        r.gate = Some((11, g.clone()));
        r
    });
    let lq = Lacquer::start(origin.addr, &[]);
    let mut a = lq.connect();
    a.send(b"GET /stream HTTP/1.1\r\nHost: t\r\n\r\n");
    let head_a = a.read_head();
    assert_eq!(head_a.header("content-length"), Some("22"));
    assert_eq!(a.read_some(11), b"first-part|");
    // A second client joins while the body is still arriving.
    let mut b = lq.connect();
    b.send(b"GET /stream HTTP/1.1\r\nHost: t\r\n\r\n");
    let head_b = b.read_head();
    assert_eq!(head_b.xids().len(), 2);
    assert_eq!(b.read_some(11), b"first-part|");
    gate.add_permits(1);
    assert_eq!(a.read_some(100), b"second-part");
    assert_eq!(b.read_some(100), b"second-part");
    assert_eq!(origin.count("/stream"), 1);
}

#[test]
fn grace_serves_stale_and_refreshes_in_the_background() {
    let version = Arc::new(AtomicUsize::new(0));
    let v = version.clone();
    let origin = Origin::start(move |_| {
        let n = v.fetch_add(1, Ordering::SeqCst) + 1;
        Reply::ok(&format!("v{n}"))
            .header("Cache-Control", "max-age=1")
            .delay(if n > 1 {
                Duration::from_millis(300)
            } else {
                Duration::ZERO
            })
    });
    let lq = Lacquer::start(origin.addr, &["-p", "default_grace=60"]);
    assert_eq!(lq.get("/g").text(), "v1");
    // Once stale, the old version is delivered at once while one
    // background fetch runs.
    let mut stale = None;
    assert!(eventually(Duration::from_secs(5), || {
        let r = lq.get("/g");
        let refreshed = origin.count("/g") == 2;
        if refreshed {
            stale = Some(r);
        }
        refreshed
    }));
    let stale = stale.unwrap();
    assert_eq!(
        stale.text(),
        "v1",
        "the stale object is delivered without waiting"
    );
    assert_eq!(stale.xids().len(), 2);
    assert!(eventually(Duration::from_secs(5), || lq.get("/g").text() == "v2"));
    assert!(origin.count("/g") <= 3);
}

#[test]
fn conditional_requests_and_head_from_the_cache() {
    let origin = Origin::start(|_| {
        Reply::ok("conditional body")
            .header("ETag", "\"v1\"")
            .header("Last-Modified", "Sun, 06 Nov 1994 08:49:37 GMT")
    });
    let lq = Lacquer::start(origin.addr, &[]);
    let mut c = lq.connect();
    assert_eq!(c.get("/c", &[]).status, 200);
    let r = c.get("/c", &[("If-None-Match", "\"v1\"")]);
    assert_eq!(r.status, 304);
    assert!(r.body.is_empty());
    assert_eq!(r.header("etag"), Some("\"v1\""));
    assert_eq!(c.get("/c", &[("If-None-Match", "\"v0\"")]).status, 200);
    assert_eq!(
        c.get(
            "/c",
            &[("If-Modified-Since", "Sun, 06 Nov 1994 08:49:37 GMT")]
        )
        .status,
        304
    );
    assert_eq!(
        c.get(
            "/c",
            &[("If-Modified-Since", "Sat, 05 Nov 1994 08:49:37 GMT")]
        )
        .status,
        200
    );
    let head = c.request("HEAD", "/c", &[]);
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-length"), Some("16"));
    assert!(head.body.is_empty());
    // The connection is still in step after the HEAD.
    assert_eq!(c.get("/c", &[]).text(), "conditional body");
    // A HEAD miss fetches a GET; conditional headers never reach the backend.
    assert_eq!(
        c.request("HEAD", "/h", &[("If-None-Match", "\"x\"")])
            .status,
        200
    );
    assert_eq!(c.get("/h", &[]).xids().len(), 2);
    let seen = origin.seen();
    assert!(seen
        .iter()
        .all(|s| s.method == "GET" && s.header("if-none-match").is_none()));
    assert_eq!(seen.len(), 2);
}

#[test]
fn byte_ranges() {
    let origin = Origin::start(|_| Reply::ok("0123456789").header("ETag", "\"r\""));
    let lq = Lacquer::start(origin.addr, &[]);
    let mut c = lq.connect();
    let r = c.get("/r", &[("Range", "bytes=2-5")]);
    assert_eq!(r.status, 206);
    assert_eq!(r.text(), "2345");
    assert_eq!(r.header("content-range"), Some("bytes 2-5/10"));
    assert_eq!(c.get("/r", &[("Range", "bytes=-3")]).text(), "789");
    assert_eq!(c.get("/r", &[("Range", "bytes=7-")]).text(), "789");
    let r = c.get("/r", &[("Range", "bytes=20-30")]);
    assert_eq!(r.status, 416);
    assert_eq!(r.header("content-range"), Some("bytes */10"));
    // Several ranges: 416, as varnishd answers.
    assert_eq!(c.get("/r", &[("Range", "bytes=0-1,4-5")]).status, 416);
    assert_eq!(
        c.get("/r", &[("Range", "bytes=0-1"), ("If-Range", "\"other\"")])
            .status,
        200
    );
    assert!(origin.seen().iter().all(|s| s.header("range").is_none()));
    let lq = Lacquer::start(origin.addr, &["-p", "http_range_support=off"]);
    let r = lq.connect().get("/r", &[("Range", "bytes=2-5")]);
    assert_eq!(r.status, 200);
    assert!(r.header("accept-ranges").is_none());
}
