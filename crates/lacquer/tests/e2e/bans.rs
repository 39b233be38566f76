//! Bans end to end: `ban()` and `std.ban()` from VCL, the `ban` and
//! `ban.list` commands, testing at lookup, and the lurker removing objects
//! that nobody asks for.

use crate::harness::{eventually, Lacquer};
use crate::origin::{Origin, Reply};
use std::time::Duration;

fn tagged_origin() -> Origin {
    Origin::start(|req| {
        let tag = if req.url.starts_with("/news") {
            "news"
        } else {
            "misc"
        };
        Reply::ok(&format!("page {}", req.url))
            .header("X-Tag", tag)
            .header("Accept-Ranges", "bytes")
    })
}

fn start(origin: &Origin, args: &[&str]) -> Lacquer {
    let vars = [
        ("origin_host", origin.addr.ip().to_string()),
        ("origin_port", origin.addr.port().to_string()),
    ];
    Lacquer::with_vcl("bans.vcl", &vars, args)
}

/// The lines of `ban.list` after its heading, newest first, as
/// (refs, completed, spec).
fn bans(lq: &Lacquer) -> Vec<(usize, bool, String)> {
    let text = lq.cli_ok("ban.list");
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("Present bans:"));
    lines
        .map(|l| {
            let (time, rest) = l.split_once(' ').unwrap();
            assert!(time.parse::<f64>().is_ok(), "{l:?}");
            let rest = rest.trim_start();
            let (refs, rest) = rest.split_once(' ').unwrap();
            let completed = match &rest[..1] {
                "C" => true,
                "-" => false,
                f => panic!("flag {f:?} in {l:?}"),
            };
            (refs.parse().unwrap(), completed, rest[3..].to_string())
        })
        .collect()
}

#[test]
fn bans_from_vcl_and_the_cli_invalidate_what_they_match() {
    let origin = tagged_origin();
    let lq = start(&origin, &[]);
    let mut c = lq.connect();
    for url in ["/news/1", "/news/2", "/about", "/contact"] {
        assert_eq!(c.get(url, &[]).header("X-Cache"), Some("MISS"));
        let hit = c.get(url, &[]);
        assert_eq!(hit.header("X-Cache"), Some("HIT"));
        assert_eq!(hit.header("X-Url"), None, "vcl_deliver removed it");
        assert_eq!(hit.count("accept-ranges"), 1);
    }

    // ban() by host and URL, from the BAN method.
    let r = c.request("BAN", "/news/1", &[]);
    assert_eq!((r.status, r.text().contains("Banned")), (200, true));
    assert_eq!(c.get("/news/1", &[]).header("X-Cache"), Some("MISS"));
    assert_eq!(c.get("/news/2", &[]).header("X-Cache"), Some("HIT"));
    assert_eq!(origin.count("/news/1"), 2);

    // std.ban() on a tag, and its error when the expression is wrong.
    let r = c.request("BAN", "/", &[("X-Ban-Tag", "^news$")]);
    assert_eq!(r.status, 200);
    assert_eq!(c.get("/news/2", &[]).header("X-Cache"), Some("MISS"));
    assert_eq!(c.get("/about", &[]).header("X-Cache"), Some("HIT"));
    let r = c.request("BAN", "/", &[("X-Ban-Tag", "(")]);
    assert_eq!(r.status, 400);
    assert!(r.text().contains("Regex compile error"), "{}", r.text());

    // The ban command.
    assert_eq!(
        lq.cli_run("ban obj.http.X-Url ~ ^/about$"),
        (200, String::new())
    );
    assert_eq!(c.get("/about", &[]).header("X-Cache"), Some("MISS"));
    assert_eq!(c.get("/contact", &[]).header("X-Cache"), Some("HIT"));
    assert_eq!(
        lq.cli_run("ban foo == 1"),
        (106, "Unknown or unsupported field \"foo\"".to_string())
    );
    assert_eq!(
        lq.cli_run("ban obj.ttl > soon"),
        (
            106,
            "expected duration <n.nn>[ms|s|m|h|d|w|y] got \"soon\"".to_string()
        )
    );
    assert_eq!(lq.cli_run("ban req.url").0, 104);
    assert_eq!(lq.cli_run("ban req.url == a || req.url == b").0, 106);

    // ban.list, newest first, durations normalised.
    assert_eq!(lq.cli_run("ban obj.age > 1.5m"), (200, String::new()));
    let list = bans(&lq);
    assert_eq!(list[0], (0, false, "obj.age > 90s".to_string()));
    assert_eq!(list[1].2, "obj.http.X-Url ~ ^/about$");
    assert!(list.iter().any(|b| b.2 == "obj.http.X-Tag ~ ^news$"));
    let host = "req.http.host == test && req.url ~ /news/1";
    assert!(list.iter().any(|b| b.2 == host), "{list:?}");
    let (status, json) = lq.cli_run("ban.list -j");
    assert_eq!(status, 200);
    assert!(json.starts_with("[ 2, [\"ban.list\", \"-j\"], "), "{json}");
    assert!(json.contains("\"spec\": \"obj.age > 90s\""), "{json}");
    assert!(json.contains("\"completed\": false"), "{json}");
}

#[test]
fn identical_bans_are_collapsed() {
    let origin = tagged_origin();
    let lq = start(&origin, &[]);
    lq.get("/a");
    lq.cli_ok("ban req.url == /x");
    lq.cli_ok("ban req.url == /x");
    let list = bans(&lq);
    assert_eq!(list[0], (0, false, "req.url == /x".to_string()));
    assert_eq!(list[1], (0, true, String::new()));
    lq.cli_ok("param.set ban_dups off");
    lq.cli_ok("ban req.url == /x");
    assert!(
        !bans(&lq)[1].1,
        "without ban_dups the older ban stays active"
    );
}

#[test]
fn the_lurker_removes_banned_objects_nobody_asks_for() {
    let origin = tagged_origin();
    let lq = start(&origin, &["-p", "ban_lurker_age=0"]);
    for url in ["/news/1", "/news/2", "/about"] {
        lq.get(url);
    }
    lq.cli_ok("ban req.url == /never");
    lq.cli_ok("ban obj.http.X-Tag == news");
    // The lurker tests the objects on its own: the two news pages go and
    // the obj ban is completed (shown, as by Varnish, without its text).
    // The third page cannot move past the req ban, which only a lookup can
    // test, so it still holds the first ban.
    let done = eventually(Duration::from_secs(10), || bans(&lq)[0].1);
    let list = bans(&lq);
    assert!(done, "{list:?}");
    assert_eq!(
        list,
        vec![
            (0, true, String::new()),
            (0, false, "req.url == /never".to_string()),
            (1, true, String::new()),
        ]
    );
    assert_eq!(origin.count("/news/1"), 1);
    lq.get("/news/1");
    assert_eq!(origin.count("/news/1"), 2, "the lurker killed it");
    lq.get("/about");
    assert_eq!(origin.count("/about"), 1);
    // Both pages now hold the newest ban; the others are deleted.
    let emptied = eventually(Duration::from_secs(10), || bans(&lq).len() == 1);
    assert!(emptied, "{:?}", bans(&lq));
    assert_eq!(bans(&lq)[0], (2, true, String::new()));
}
