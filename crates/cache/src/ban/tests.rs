//! Unit tests of the ban list: testing at lookup, the lurker, duplicates,
//! bans added during a fetch, cutoff and `ban.list`.

use super::*;
use crate::object::{Body, ObjKind, ObjectInit, Timers};
use crate::tests::{br, cache};
use crate::{FetchSlot, Lookup};
use bytes::Bytes;
use lacquer_http::Headers;

fn object(headers: &[(&str, &str)], now: f64) -> Arc<Object> {
    let mut h = Headers::new();
    for (n, v) in headers {
        h.append(
            Bytes::copy_from_slice(n.as_bytes()),
            Bytes::copy_from_slice(v.as_bytes()),
        );
    }
    Arc::new(Object::new(ObjectInit {
        store: None,
        xid: 1,
        kind: ObjKind::Normal,
        status: 200,
        head: Bytes::from_static(b"HTTP/1.1 200 OK\r\n").into(),
        headers: h,
        body: Body::complete(vec![Bytes::from_static(b"x")]),
        vary: None,
        timers: Timers {
            t_origin: now,
            ttl: 600.0,
            grace: 0.0,
            keep: 0.0,
        },
    }))
}

fn slot(c: &Arc<crate::Cache>, key: &[u8]) -> FetchSlot {
    match c.lookup(key, br(&Headers::new()), 1000.0, 2.0) {
        Lookup::Miss(slot) => slot,
        _ => panic!("expected a miss for {key:?}"),
    }
}

fn store(c: &Arc<crate::Cache>, key: &[u8], headers: &[(&str, &str)]) -> Arc<Object> {
    let o = object(headers, 1000.0);
    slot(c, key).insert(&o, &Headers::new());
    o
}

fn lookup_url(c: &Arc<crate::Cache>, key: &[u8], url: &str) -> Lookup {
    let h = Headers::new();
    c.lookup(
        key,
        BanReq {
            url: url.as_bytes(),
            headers: &h,
        },
        1000.0,
        2.0,
    )
}

fn ban(c: &crate::Cache, spec: &str) {
    c.bans()
        .add(BanSpec::parse_str(spec).unwrap(), 1000.0, true);
}

const NOW: LurkConfig = LurkConfig {
    age: 0.0,
    batch: 1000,
    sleep: 0.0,
    holdoff: 0.0,
    cutoff: 0,
};

#[test]
fn a_lookup_kills_what_a_ban_matches_and_moves_the_rest_on() {
    let c = cache(1 << 20);
    let a = store(&c, b"/a", &[]);
    let b = store(&c, b"/b", &[]);
    ban(&c, "req.url ~ ^/a");
    assert!(matches!(lookup_url(&c, b"/a", "/a"), Lookup::Miss(_)));
    assert!(a.is_removed());
    assert!(matches!(lookup_url(&c, b"/b", "/b"), Lookup::Hit(_)));
    assert_eq!(b.ban_seq(), c.bans().head_seq());
    // The first ban is now held by nothing and goes; the req ban stays.
    c.bans().clean_tail();
    let list = c.bans().list();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].spec, "req.url ~ ^/a");
    assert_eq!(list[0].refs, 1);
    assert!(!list[0].completed);
}

#[test]
fn the_lurker_kills_by_object_fields_and_completes_the_ban() {
    let c = cache(1 << 20);
    let html = store(&c, b"/p", &[("Content-Type", "text/html")]);
    let css = store(&c, b"/s", &[("Content-Type", "text/css")]);
    ban(&c, "obj.http.content-type ~ html");
    ban(&c, "req.url == /never");
    // Too young for a lurker that waits a minute.
    let patient = LurkConfig { age: 60.0, ..NOW };
    assert_eq!(c.lurk_bans(&patient, 1001.0), 0);
    assert!(!html.is_removed());
    assert_eq!(c.lurk_bans(&NOW, 1001.0), 2);
    assert!(html.is_removed());
    assert!(!css.is_removed());
    // The survivor cannot move past the req ban, which only lookups test.
    let list = c.bans().list();
    assert_eq!(list.len(), 2, "{list:?}");
    assert_eq!(list[0].spec, "req.url == /never");
    assert!(!list[0].completed);
    assert_eq!(list[1].spec, "", "a completed ban shows no specification");
    assert!(list[1].completed);
    assert_eq!(list[1].refs, 1);
    assert!(matches!(lookup_url(&c, b"/s", "/s"), Lookup::Hit(_)));
    c.bans().clean_tail();
    assert_eq!(c.bans().list().len(), 1);
}

#[test]
fn identical_bans_collapse() {
    let c = cache(1 << 20);
    let _held = store(&c, b"/a", &[]);
    ban(&c, "req.url == /x");
    ban(&c, "req.url == /y");
    ban(&c, "req.url == /x");
    let list = c.bans().list();
    assert_eq!(list.len(), 4);
    assert!(!list[0].completed);
    assert!(!list[1].completed);
    assert!(list[2].completed, "the older /x ban is superseded");
    let without_dups = crate::tests::cache(1 << 20);
    let _held = store(&without_dups, b"/a", &[]);
    for spec in ["req.url == /x", "req.url == /x"] {
        without_dups
            .bans()
            .add(BanSpec::parse_str(spec).unwrap(), 1000.0, false);
    }
    assert!(without_dups
        .bans()
        .list()
        .iter()
        .take(2)
        .all(|b| !b.completed));
}

#[test]
fn an_object_fetched_across_a_ban_is_tested_against_it() {
    let c = cache(1 << 20);
    let pending = slot(&c, b"/a");
    ban(&c, "req.url == /a");
    let o = object(&[], 1000.0);
    pending.insert(&o, &Headers::new());
    assert!(o.ban_seq() < c.bans().head_seq());
    assert!(matches!(lookup_url(&c, b"/a", "/a"), Lookup::Miss(_)));
    assert!(o.is_removed());
}

#[test]
fn an_object_inserted_after_the_lurker_passed_is_still_banned() {
    let c = cache(1 << 20);
    let pending = slot(&c, b"/late");
    ban(&c, "obj.status == 200");
    assert_eq!(c.lurk_bans(&NOW, 1001.0), 0);
    assert!(c.bans().list()[0].completed);
    // A lookup skips completed bans, so the insert itself must test it.
    let o = object(&[], 1000.0);
    pending.insert(&o, &Headers::new());
    assert!(o.is_removed());
}

#[test]
fn cutoff_expunges_objects_holding_on_to_old_bans() {
    let c = cache(1 << 20);
    let old = store(&c, b"/old", &[]);
    ban(&c, "req.url == /1");
    let mid = store(&c, b"/mid", &[]);
    ban(&c, "req.url == /2");
    ban(&c, "req.url == /3");
    let cfg = LurkConfig { cutoff: 2, ..NOW };
    c.lurk_bans(&cfg, 1001.0);
    assert!(old.is_removed());
    assert!(mid.is_removed());
    assert_eq!(c.bans().list().len(), 1);
}

#[test]
fn ban_list_text() {
    let c = cache(1 << 20);
    let _held = store(&c, b"/a", &[]);
    ban(&c, "obj.age < 1.5m");
    let text = c.bans().list_text();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "Present bans:");
    assert_eq!(lines[1], "1000.000000     0 -  obj.age < 90s");
    assert!(lines[2].ends_with("     1 C  "), "{:?}", lines[2]);
}

#[test]
fn restored_bans_apply_to_objects_older_than_them_only() {
    let bans = Bans::new(5000.0);
    bans.restore(vec![
        (2000.0, BanSpec::parse_str("req.url == /b").unwrap()),
        (1000.0, BanSpec::parse_str("req.url == /a").unwrap()),
        (1000.0, BanSpec::parse_str("req.url == /a").unwrap()),
    ]);
    let times: Vec<f64> = bans.list().iter().map(|b| b.time).collect();
    assert_eq!(
        times,
        vec![5000.0, 2000.0, 1000.0, 1000.0],
        "one copy, a base"
    );
    // An object inserted before both is tested against both; one
    // inserted between them against the newer only.
    assert!(bans.at_time(500.0).seq() < bans.at_time(1500.0).seq());
    assert_eq!(bans.at_time(1500.0).seq(), 2, "the ban of 1000");
    assert_eq!(bans.at_time(3000.0).seq(), 3, "the ban of 2000");
    assert_eq!(bans.head_seq(), 4);
}

/// Objects' places move forward only, from several threads at once, and
/// every hold is counted once: the ban a place ends at is held by it
/// alone, the others by nobody, and nothing once it lets go.
#[test]
fn places_move_forward_at_once_and_count_their_holds() {
    let bans = Bans::new(1000.0);
    for i in 0..8 {
        bans.add(
            BanSpec::parse_str(&format!("req.url == /{i}")).unwrap(),
            1001.0,
            false,
        );
    }
    let holds: Vec<BanRef> = bans.lock().iter().map(BanRef::new).collect();
    let places: Vec<BanPlace> = (0..16).map(|_| BanPlace::default()).collect();
    std::thread::scope(|s| {
        for t in 0..4 {
            let (holds, places) = (&holds, &places);
            s.spawn(move || {
                for round in 0..200 {
                    for (p, place) in places.iter().enumerate() {
                        let at = (p * 7 + round * 3 + t * 5) % holds.len();
                        place.advance(&holds[at]);
                    }
                }
            });
        }
    });
    drop(holds);
    let newest = bans.head_seq();
    let refs = |seq: u64| {
        bans.lock()
            .iter()
            .find(|b| b.seq == seq)
            .map(|b| b.refs.load(Ordering::Relaxed))
    };
    for place in &places {
        let at = place.0.load().as_ref().map(|b| b.seq);
        assert_eq!(at, Some(newest), "every place ends at the newest ban");
        assert!(!place.advance(&bans.at_time(1000.0)), "never back");
    }
    assert_eq!(refs(newest), Some(places.len()));
    assert!((1..newest).all(|seq| refs(seq) == Some(0)));
    places.iter().for_each(BanPlace::release);
    assert_eq!(refs(newest), Some(0));
    drop(places);
    assert_eq!(
        refs(newest),
        Some(0),
        "a released place holds nothing when dropped"
    );
}
