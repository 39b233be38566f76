//! Storage: the malloc budget holds, least recently used objects make way,
//! nuke_limit bounds eviction, and memory follows the budget rather than
//! the number of URLs ever requested.

use crate::harness::Lacquer;
use crate::origin::{Origin, Reply};

/// Anonymous resident memory: the heap, not the pages of the
/// shared-memory log, which fill as the ring does.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find(|l| l.starts_with("RssAnon:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap()
}

#[test]
fn lru_eviction_keeps_within_the_budget() {
    let origin = Origin::start(|_| Reply::ok("").body_bytes(vec![b'o'; 64 * 1024]));
    let lq = Lacquer::start(origin.addr, &["-s", "malloc,1m"]);
    let mut c = lq.connect();
    for i in 0..40 {
        assert_eq!(c.get(&format!("/obj{i}"), &[]).status, 200);
    }
    // The newest are still cached, the oldest were evicted.
    assert_eq!(c.get("/obj39", &[]).xids().len(), 2);
    assert_eq!(c.get("/obj0", &[]).xids().len(), 1);
    assert_eq!(origin.count("/obj0"), 2);
    assert_eq!(origin.count("/obj39"), 1);
}

#[test]
fn nuke_limit_zero_fails_the_fetch_cleanly() {
    let origin = Origin::start(|_| Reply::ok("").body_bytes(vec![b'n'; 200 * 1024]));
    let lq = Lacquer::start(origin.addr, &["-s", "malloc,1m", "-p", "nuke_limit=0"]);
    let mut c = lq.connect();
    let statuses: Vec<u16> = (0..8)
        .map(|i| c.get(&format!("/n{i}"), &[]).status)
        .collect();
    assert_eq!(&statuses[..4], &[200, 200, 200, 200]);
    assert!(statuses.contains(&503), "{statuses:?}");
    // What was cached stays cached.
    assert_eq!(c.get("/n0", &[]).xids().len(), 2);
}

#[test]
fn memory_follows_the_budget_not_the_url_count() {
    let origin = Origin::start(|_| Reply::ok("").body_bytes(vec![b'm'; 2048]));
    let lq = Lacquer::start(origin.addr, &["-s", "malloc,2m"]);
    let mut c = lq.connect();
    for i in 0..5_000 {
        c.get(&format!("/warm{i}"), &[]);
    }
    let warm = rss_kib(lq.pid());
    for i in 0..30_000 {
        c.get(&format!("/many{i}"), &[]);
    }
    let after = rss_kib(lq.pid());
    // 30,000 more objects of 2 KiB would be ~60 MiB if kept.
    assert!(
        after < warm + 16 * 1024,
        "RSS grew from {warm} KiB to {after} KiB"
    );
}

#[test]
fn uncacheable_and_short_lived_objects_use_transient_storage() {
    let origin = Origin::start(|req| {
        let r = Reply::ok("");
        match req.url.as_str() {
            "/keep" => r.body_bytes(vec![b'k'; 400 * 1024]),
            "/private" => r
                .header("Cache-Control", "private")
                .body_bytes(vec![b'p'; 700 * 1024]),
            _ => r
                .header("Cache-Control", "max-age=1")
                .body_bytes(vec![b's'; 700 * 1024]),
        }
    });
    // 1 MiB cannot hold /keep beside either big object: if they were
    // charged to s0, /keep would be evicted.
    let lq = Lacquer::start(origin.addr, &["-s", "malloc,1m", "-p", "default_grace=0"]);
    let mut c = lq.connect();
    assert_eq!(c.get("/keep", &[]).status, 200);
    for _ in 0..3 {
        assert_eq!(c.get("/private", &[]).body.len(), 700 * 1024);
    }
    let short = c.get("/short", &[]);
    assert_eq!(short.body.len(), 700 * 1024);
    assert_eq!(
        c.get("/short", &[]).xids().len(),
        2,
        "short-lived objects are still cached"
    );
    assert_eq!(c.get("/keep", &[]).xids().len(), 2, "/keep was not evicted");
    assert_eq!(origin.count("/keep"), 1);
}
