//! Unit tests of the index: hits, waiting lists, variants, markers, grace,
//! eviction and expiry.

use super::*;
use bytes::Bytes;
use lacquer_http::Headers;
use object::ObjectInit;

/// A plain object with a five-byte body, fresh for a minute.
pub(crate) fn plain_object() -> Object {
    Arc::into_inner(obj(ObjKind::Normal, 60.0, 0.0, None, 1000.0)).expect("one owner")
}

pub(crate) fn obj(
    kind: ObjKind,
    ttl: f64,
    grace: f64,
    vary: Option<VarySpec>,
    now: f64,
) -> Arc<Object> {
    obj_in(None, kind, ttl, grace, vary, now)
}

/// A plain object made for the cache's default store.
pub(crate) fn stored_obj(c: &Arc<Cache>, ttl: f64, grace: f64, now: f64) -> Arc<Object> {
    obj_in(
        Some(c.store_for(false, None)),
        ObjKind::Normal,
        ttl,
        grace,
        None,
        now,
    )
}

/// [`obj`], made for a store.
pub(crate) fn obj_in(
    store: Option<Arc<Store>>,
    kind: ObjKind,
    ttl: f64,
    grace: f64,
    vary: Option<VarySpec>,
    now: f64,
) -> Arc<Object> {
    Arc::new(Object::new(ObjectInit {
        xid: 1,
        store,
        kind,
        status: 200,
        head: Bytes::from_static(b"HTTP/1.1 200 OK\r\n").into(),
        headers: Headers::new(),
        body: Body::complete(vec![Bytes::from_static(b"hello")]),
        vary,
        timers: Timers {
            t_origin: now,
            ttl,
            grace,
            keep: 0.0,
        },
    }))
}

/// Fresh for a minute from the epoch's start.
pub(crate) const A_MINUTE: Timers = Timers {
    t_origin: 0.0,
    ttl: 60.0,
    grace: 0.0,
    keep: 0.0,
};

/// A lookup's view of a request for `/`.
pub(crate) fn br(headers: &Headers) -> BanReq<'_> {
    BanReq { url: b"/", headers }
}

pub(crate) fn cache(budget: u64) -> Arc<Cache> {
    Cache::new(vec![Store::malloc("s0", budget)], Store::transient(None))
}

fn miss(c: &Arc<Cache>, key: &[u8], req: &Headers, now: f64) -> FetchSlot {
    match c.lookup(key, br(req), now, 2.0) {
        Lookup::Miss(slot) => slot,
        _ => panic!("expected a miss"),
    }
}

#[test]
fn miss_insert_hit() {
    let c = cache(1 << 20);
    let now = 1000.0;
    let req = Headers::new();
    let slot = miss(&c, b"/a", &req, now);
    assert!(matches!(
        c.lookup(b"/a", br(&req), now, 2.0),
        Lookup::Wait(_)
    ));
    let o = stored_obj(&c, 60.0, 10.0, now);
    assert!(c.attach(&o, 5, 50));
    slot.insert(&o, &req);
    assert!(matches!(
        c.lookup(b"/a", br(&req), now, 2.0),
        Lookup::Hit(_)
    ));
    assert!(matches!(
        c.lookup(b"/b", br(&req), now, 2.0),
        Lookup::Miss(_)
    ));
}

#[test]
fn waiters_are_woken() {
    let c = cache(1 << 20);
    let req = Headers::new();
    let slot = miss(&c, b"/a", &req, 0.0);
    let Lookup::Wait(rx) = c.lookup(b"/a", br(&req), 0.0, 2.0) else {
        panic!()
    };
    let o = obj(ObjKind::Normal, 60.0, 0.0, None, 0.0);
    slot.insert(&o, &req);
    assert!(matches!(*rx.borrow(), BusyState::Relookup));
    // A dropped slot wakes waiters too, and frees the head.
    let slot = miss(&c, b"/z", &req, 0.0);
    let Lookup::Wait(rx) = c.lookup(b"/z", br(&req), 0.0, 2.0) else {
        panic!()
    };
    drop(slot);
    assert!(matches!(*rx.borrow(), BusyState::Relookup));
    assert!(matches!(
        c.lookup(b"/z", br(&req), 0.0, 2.0),
        Lookup::Miss(_)
    ));
}

#[test]
fn variants() {
    let c = cache(1 << 20);
    let mut gz = Headers::new();
    gz.append("Accept-Encoding", "gzip");
    let plain = Headers::new();
    let vary = [Bytes::from_static(b"Accept-Encoding")];
    let slot = miss(&c, b"/v", &gz, 0.0);
    let o = obj(
        ObjKind::Normal,
        60.0,
        0.0,
        VarySpec::build(vary.iter(), &gz).unwrap(),
        0.0,
    );
    slot.insert(&o, &gz);
    assert!(matches!(c.lookup(b"/v", br(&gz), 0.0, 2.0), Lookup::Hit(_)));
    let slot = miss(&c, b"/v", &plain, 0.0);
    let o2 = obj(
        ObjKind::Normal,
        60.0,
        0.0,
        VarySpec::build(vary.iter(), &plain).unwrap(),
        0.0,
    );
    slot.insert(&o2, &plain);
    match c.lookup(b"/v", br(&plain), 0.0, 2.0) {
        Lookup::Hit(h) => assert!(Arc::ptr_eq(&h, &o2)),
        _ => panic!(),
    }
    match c.lookup(b"/v", br(&gz), 0.0, 2.0) {
        Lookup::Hit(h) => assert!(Arc::ptr_eq(&h, &o)),
        _ => panic!(),
    }
}

#[test]
fn hit_for_miss_does_not_coalesce() {
    let c = cache(1 << 20);
    let req = Headers::new();
    let slot = miss(&c, b"/p", &req, 0.0);
    slot.insert(&obj(ObjKind::HitMiss, 120.0, 0.0, None, 0.0), &req);
    let first = c.lookup(b"/p", br(&req), 1.0, 2.0);
    let second = c.lookup(b"/p", br(&req), 1.0, 2.0);
    assert!(matches!(first, Lookup::HitMiss { .. }));
    assert!(matches!(second, Lookup::HitMiss { .. }));
    // Past its lifetime the marker no longer applies.
    assert!(matches!(
        c.lookup(b"/p", br(&req), 200.0, 2.0),
        Lookup::Miss(_)
    ));
}

#[test]
fn grace_triggers_one_refresh() {
    let c = cache(1 << 20);
    let req = Headers::new();
    let slot = miss(&c, b"/g", &req, 0.0);
    slot.insert(&obj(ObjKind::Normal, 10.0, 30.0, None, 0.0), &req);
    let first = c.lookup(b"/g", br(&req), 15.0, 2.0);
    let Lookup::Grace {
        refresh: Some(_slot),
        ..
    } = first
    else {
        panic!("first stale lookup refreshes")
    };
    assert!(matches!(
        c.lookup(b"/g", br(&req), 15.0, 2.0),
        Lookup::Grace { refresh: None, .. }
    ));
    // Beyond grace: wait on the refresh in progress.
    assert!(matches!(
        c.lookup(b"/g", br(&req), 50.0, 2.0),
        Lookup::Wait(_)
    ));
}

#[test]
fn eviction_respects_budget_and_nuke_limit() {
    let budget = 10 * (object::OBJECT_OVERHEAD + 100);
    let c = cache(budget);
    let req = Headers::new();
    for i in 0..50u32 {
        let key = format!("/k{i}");
        let slot = miss(&c, key.as_bytes(), &req, 0.0);
        let o = stored_obj(&c, 60.0, 0.0, 0.0);
        assert!(c.attach(&o, 100, 50));
        slot.insert(&o, &req);
    }
    let store = &c.stores()[0];
    assert!(store.used() <= budget);
    assert_eq!(store.lru_len(), 10);
    assert_eq!(c.heads(), 10);
    // The oldest were evicted, the newest remain.
    assert!(matches!(
        c.lookup(b"/k49", br(&req), 0.0, 2.0),
        Lookup::Hit(_)
    ));
    assert!(matches!(
        c.lookup(b"/k0", br(&req), 0.0, 2.0),
        Lookup::Miss(_)
    ));
    // Larger than the whole store: fails even after nuking everything.
    let big = stored_obj(&c, 60.0, 0.0, 0.0);
    assert!(!c.attach(&big, budget * 2, 50));
    // With nuke_limit 0 nothing is evicted.
    let c2 = cache(object::OBJECT_OVERHEAD + 100);
    let o = stored_obj(&c2, 60.0, 0.0, 0.0);
    assert!(c2.attach(&o, 100, 0));
    miss(&c2, b"/x", &req, 0.0).insert(&o, &req);
    let o2 = stored_obj(&c2, 60.0, 0.0, 0.0);
    assert!(!c2.attach(&o2, 100, 0));
}

#[test]
fn expiry_removes_and_frees() {
    let c = cache(1 << 20);
    let req = Headers::new();
    for i in 0..20u32 {
        let key = format!("/e{i}");
        let slot = miss(&c, key.as_bytes(), &req, 0.0);
        let o = stored_obj(&c, 5.0 + i as f64, 0.0, 0.0);
        assert!(c.attach(&o, 10, 50));
        slot.insert(&o, &req);
    }
    assert_eq!(c.expire(4.0), 0);
    assert_eq!(c.expire(10.0), 6);
    assert_eq!(c.heads(), 14);
    assert_eq!(c.expire(100.0), 14);
    assert_eq!(c.heads(), 0);
    assert_eq!(c.stores()[0].used(), 0);
    assert!(c.queued() == 0);
}

/// Objects that leave the cache by any way (purged, replaced, evicted)
/// leave the expiry queue too, so that it holds none of them.
#[test]
fn objects_that_leave_leave_the_expiry_queue() {
    let c = cache(1 << 20);
    let req = Headers::new();
    let put = |key: &str| {
        let Lookup::Miss(slot) = c.lookup_fresh_fetch(key.as_bytes()) else {
            panic!("a miss");
        };
        let o = stored_obj(&c, 60.0, 0.0, 0.0);
        assert!(c.attach(&o, 10, 50));
        slot.insert(&o, &req);
        o
    };
    let a = put("/a");
    let _b = put("/b");
    assert_eq!(c.queued(), 2);
    // Replaced by a new copy: the old one goes, the new one is queued.
    let a2 = put("/a");
    assert_eq!(c.queued(), 2);
    assert_eq!(Arc::strong_count(&a), 1, "nothing holds the replaced copy");
    assert_eq!(c.purge(b"/b"), 1);
    assert_eq!(c.queued(), 1);
    c.remove(&a2, Removal::Nuked);
    assert_eq!(c.queued(), 0);
}

/// An object on a store's lists is queued there (by its node); one of
/// a store without lists (Transient) in the cache's own queue. Either
/// leaves its queue when it expires.
#[test]
fn objects_are_queued_where_they_are_listed() {
    let c = cache(1 << 20);
    let req = Headers::new();
    let listed = stored_obj(&c, 5.0, 0.0, 0.0);
    assert!(c.attach(&listed, 10, 50));
    miss(&c, b"/listed", &req, 0.0).insert(&listed, &req);
    let transient = obj_in(
        Some(c.transient.clone()),
        ObjKind::Normal,
        5.0,
        0.0,
        None,
        0.0,
    );
    miss(&c, b"/transient", &req, 0.0).insert(&transient, &req);
    assert_eq!(c.stores()[0].expiry_len(), 1);
    assert_eq!(c.expiry.lock().unwrap().len(), 1);
    assert_eq!(c.expire(4.0), 0);
    assert_eq!(c.expire(5.0), 2);
    assert_eq!(c.queued(), 0);
    assert!(listed.is_removed() && transient.is_removed());
}

#[test]
fn a_stale_object_rides_along_with_the_fetch() {
    let c = cache(1 << 20);
    let req = Headers::new();
    let slot = miss(&c, b"/k", &req, 0.0);
    let mut headers = Headers::new();
    headers.append("ETag", "\"v1\"");
    let kept = with_headers(
        headers,
        Timers {
            t_origin: 0.0,
            ttl: 10.0,
            grace: 5.0,
            keep: 60.0,
        },
    );
    slot.insert(&kept, &req);
    // Within grace: the refresh carries it.
    let Lookup::Grace {
        refresh: Some(refresh),
        ..
    } = c.lookup(b"/k", br(&req), 12.0, 2.0)
    else {
        panic!("a grace hit that refreshes")
    };
    assert!(refresh.stale().is_some_and(|s| Arc::ptr_eq(s, &kept)));
    drop(refresh);
    // Past grace, within keep: a miss that may revalidate it.
    let slot = miss(&c, b"/k", &req, 30.0);
    assert!(slot.stale().is_some_and(|s| s.can_revalidate()));
    drop(slot);
    // Past keep: nothing to lean on.
    assert!(miss(&c, b"/k", &req, 80.0).stale().is_none());
    // No validator: still a fallback, not a revalidation.
    let slot = miss(&c, b"/plain", &req, 0.0);
    let plain = obj(ObjKind::Normal, 1.0, 0.0, None, 0.0);
    plain.set_timers(Timers {
        keep: 60.0,
        ..plain.timers()
    });
    slot.insert(&plain, &req);
    let slot = miss(&c, b"/plain", &req, 2.0);
    assert!(slot.stale().is_some_and(|s| !s.can_revalidate()));
}

fn tagged(tags: &str, ttl: f64, grace: f64, keep: f64, now: f64) -> Arc<Object> {
    let mut headers = Headers::new();
    headers.append("xkey", tags.to_string());
    with_headers(
        headers,
        Timers {
            t_origin: now,
            ttl,
            grace,
            keep,
        },
    )
}

/// A whole 200 "hello" with these headers and timers.
fn with_headers(headers: Headers, timers: Timers) -> Arc<Object> {
    Arc::new(Object::new(ObjectInit {
        store: None,
        xid: 1,
        kind: ObjKind::Normal,
        status: 200,
        head: Bytes::from_static(b"HTTP/1.1 200 OK\r\n").into(),
        headers,
        body: Body::complete(vec![Bytes::from_static(b"hello")]),
        vary: None,
        timers,
    }))
}

#[test]
fn soft_purge_only_shortens() {
    let t = |ttl, grace, keep| Timers {
        t_origin: 100.0,
        ttl,
        grace,
        keep,
    };
    let soft = |ttl, grace, keep| SoftPurge { ttl, grace, keep };
    let start = t(60.0, 60.0, 60.0);
    // Fresh: the TTL ends now, grace and keep stay; expires 120 s later.
    let r = soft(0.0, -1.0, -1.0).reduce(start, 110.0).unwrap();
    assert_eq!(r, t(10.0, 60.0, 60.0));
    // Stale: nothing changes.
    assert_eq!(soft(0.0, -1.0, -1.0).reduce(start, 170.0), None);
    // Stale for 5 s, grace and keep 10 s: expires 15 s from now.
    let r = soft(0.0, 10.0, 10.0).reduce(start, 165.0).unwrap();
    assert_eq!(r.t_origin + r.lifetime(), 180.0);
    // A longer TTL than what is left is no change.
    assert_eq!(soft(10.0, -1.0, -1.0).reduce(start, 155.0), None);
    let r = soft(10.0, -1.0, -1.0).reduce(start, 105.0).unwrap();
    assert_eq!(r, t(15.0, 60.0, 60.0));
}

#[test]
fn soft_purge_makes_every_variant_stale_and_reschedules_expiry() {
    let c = cache(1 << 20);
    let now = 1000.0;
    let req = Headers::new();
    let slot = miss(&c, b"/a", &req, now);
    let o = stored_obj(&c, 60.0, 30.0, now);
    assert!(c.attach(&o, 5, 50));
    slot.insert(&o, &req);
    assert_eq!(c.soft_purge(b"/a", SoftPurge::STALE, now + 1.0), 1);
    match c.lookup(b"/a", br(&req), now + 2.0, 2.0) {
        Lookup::Grace { refresh, .. } => drop(refresh),
        _ => panic!("a soft-purged object is served from grace"),
    }
    // It now expires when its grace ends, not 60 s later.
    assert_eq!(c.expire(now + 31.5), 1);
    assert!(o.is_removed());
    // Purging it all away at once removes it.
    let slot = miss(&c, b"/b", &req, now);
    let o = obj(ObjKind::Normal, 60.0, 30.0, None, now);
    slot.insert(&o, &req);
    let all = SoftPurge {
        ttl: 0.0,
        grace: 0.0,
        keep: 0.0,
    };
    assert_eq!(c.soft_purge(b"/b", all, now), 1);
    assert!(o.is_removed());
}

#[test]
fn tags_find_their_objects_and_forget_removed_ones() {
    let c = cache(1 << 20);
    let now = 1000.0;
    let req = Headers::new();
    let a = tagged("red blue", 60.0, 10.0, 0.0, now);
    let b = tagged("blue", 60.0, 10.0, 0.0, now);
    let plain = obj(ObjKind::Normal, 60.0, 10.0, None, now);
    miss(&c, b"/a", &req, now).insert(&a, &req);
    miss(&c, b"/b", &req, now).insert(&b, &req);
    miss(&c, b"/c", &req, now).insert(&plain, &req);
    assert_eq!(c.tag_count(), 2);
    // An object under two of the tags purged counts once.
    let tags = tags::split(b"red blue");
    assert_eq!(c.purge_tags(tags, Some(SoftPurge::STALE), now + 1.0), 2);
    assert!(!a.is_removed() && a.ttl_left(now + 1.0) <= 0.0);
    assert!(plain.ttl_left(now + 1.0) > 0.0);
    assert_eq!(c.purge_tags(tags::split(b"red"), None, now + 1.0), 1);
    assert!(a.is_removed());
    assert_eq!(c.tag_count(), 1, "red has no objects left");
    // A replaced object leaves the index.
    let b2 = tagged("green", 60.0, 10.0, 0.0, now);
    let Lookup::Miss(slot) = c.lookup_fresh_fetch(b"/b") else {
        panic!()
    };
    slot.insert(&b2, &req);
    assert!(b.is_removed());
    assert_eq!(c.purge_tags(tags::split(b"blue"), None, now + 2.0), 0);
    assert_eq!(c.purge_tags(tags::split(b"green nothing"), None, now), 1);
    assert_eq!(c.tag_count(), 0);
}

#[test]
fn client_freshness_wants() {
    let c = cache(1 << 20);
    let req = Headers::new();
    let timers = Timers {
        t_origin: 0.0,
        ttl: 10.0,
        grace: 5.0,
        keep: 100.0,
    };
    let slot = miss(&c, b"/f", &req, 0.0);
    let mut headers = Headers::new();
    headers.append("ETag", "\"v1\"");
    let stored = with_headers(headers, timers);
    slot.insert(&stored, &req);
    let look = |now: f64, wants: Wants| c.lookup_wanting(b"/f", br(&req), now, 2.0, wants);
    let min_fresh = Wants {
        min_fresh: 5.0,
        ..Wants::default()
    };
    // 6 s of freshness left satisfies min-fresh=5; 4 s does not, and the
    // fetch revalidates the stored object.
    assert!(matches!(look(4.0, min_fresh), Lookup::Hit(_)));
    match look(6.0, min_fresh) {
        Lookup::Miss(slot) => assert!(slot.stale().is_some_and(|s| Arc::ptr_eq(s, &stored))),
        _ => panic!("min-fresh unmet: a miss"),
    }
    // Within grace, min-fresh refuses the stale object too.
    assert!(matches!(look(12.0, min_fresh), Lookup::Miss(_)));
    // Past grace, max-stale accepts it with a refresh.
    let max_stale = Wants {
        max_stale: Some(30.0),
        ..Wants::default()
    };
    assert!(matches!(look(30.0, Wants::default()), Lookup::Miss(_)));
    assert!(matches!(
        look(30.0, max_stale),
        Lookup::Grace {
            refresh: Some(_),
            ..
        }
    ));
    assert!(matches!(look(45.0, max_stale), Lookup::Miss(_)));
    // req.grace caps the object's grace but not the client's max-stale.
    let capped = Wants {
        grace: Some(0.0),
        ..Wants::default()
    };
    assert!(matches!(look(12.0, capped), Lookup::Miss(_)));
    // An object that must be revalidated is never served stale.
    let slot = miss(&c, b"/m", &req, 0.0);
    let mut headers = Headers::new();
    headers.append("Cache-Control", "max-age=10, must-revalidate");
    slot.insert(&with_headers(headers, timers), &req);
    let found = c.lookup_wanting(b"/m", br(&req), 30.0, 2.0, max_stale);
    assert!(matches!(found, Lookup::Miss(_)));
}

#[test]
fn min_fresh_revalidates_an_object_at_most_once_a_second() {
    let c = cache(1 << 20);
    let req = Headers::new();
    let timers = Timers {
        t_origin: 0.0,
        ttl: 10.0,
        grace: 0.0,
        keep: 100.0,
    };
    let slot = miss(&c, b"/m", &req, 0.0);
    let mut headers = Headers::new();
    headers.append("ETag", "\"v1\"");
    let stored = with_headers(headers, timers);
    slot.insert(&stored, &req);
    let look = |now: f64, min_fresh: f64| {
        let wants = Wants {
            min_fresh,
            ..Wants::default()
        };
        c.lookup_wanting(b"/m", br(&req), now, 2.0, wants)
    };
    // More than the object's whole lifetime: no copy could satisfy it.
    assert!(matches!(look(5.0, 10.0), Lookup::Hit(_)));
    assert!(matches!(look(5.0, 60.0), Lookup::Hit(_)));
    // Unmet: one revalidation, then hits for a second, then another.
    match look(5.0, 8.0) {
        Lookup::Miss(slot) => slot.abandon(None),
        _ => panic!("min-fresh unmet: a miss"),
    }
    assert!(matches!(look(5.5, 8.0), Lookup::Hit(_)));
    assert!(matches!(look(5.9, 8.0), Lookup::Hit(_)));
    assert!(matches!(look(6.1, 8.0), Lookup::Miss(_)));
}

#[test]
fn hash_ignore_busy_fetches_alongside_instead_of_waiting() {
    let c = cache(1 << 20);
    let req = Headers::new();
    let first = miss(&c, b"/a", &req, 0.0);
    let ignore = Wants {
        ignore_busy: true,
        ..Wants::default()
    };
    let Lookup::Miss(own) = c.lookup_wanting(b"/a", br(&req), 0.0, 2.0, ignore) else {
        panic!("a request that ignores busy objects fetches")
    };
    assert!(
        matches!(c.lookup(b"/a", br(&req), 0.0, 2.0), Lookup::Wait(_)),
        "the others still wait on the first fetch"
    );
    let o = obj(ObjKind::Normal, 60.0, 0.0, None, 0.0);
    own.insert(&o, &req);
    drop(first);
    assert!(matches!(
        c.lookup(b"/a", br(&req), 0.0, 2.0),
        Lookup::Hit(_)
    ));
}

#[test]
fn a_crawl_does_not_push_out_what_is_asked_again() {
    let store = Store::malloc("s", u64::MAX);
    let made = |n: usize| -> Vec<Arc<Object>> {
        (0..n)
            .map(|_| obj(ObjKind::Normal, 60.0, 0.0, None, 0.0))
            .collect()
    };
    let (cold, hot, crawl) = (made(10), made(5), made(10));
    for o in cold.iter().chain(&hot) {
        store.lru_insert(o, 0.0);
    }
    // Asked again, even within lru_interval: protected.
    for o in &hot {
        assert!(store.lru_touch(o, 0.5, 2.0));
        assert!(store.lru_is_protected(o));
        // Within the interval, a protected object is not moved again.
        assert!(!store.lru_touch(o, 1.0, 2.0));
    }
    // A crawl of objects asked once.
    for o in &crawl {
        store.lru_insert(o, 1.0);
    }
    // Eviction takes what was asked once, oldest first, then the hot set.
    for want in cold.iter().chain(&crawl).chain(&hot) {
        let got = store.lru_pop().unwrap();
        assert!(Arc::ptr_eq(&got, want));
    }
    assert!(store.lru_pop().is_none());

    // Protected holds at most its share: past it, its oldest goes back
    // to probation, and is evicted first.
    let all = made(10);
    for o in &all {
        store.lru_insert(o, 0.0);
    }
    for o in &all {
        store.lru_touch(o, 0.0, 2.0);
    }
    let protected = all.iter().filter(|o| store.lru_is_protected(o)).count();
    assert_eq!(protected, 8);
    assert!(Arc::ptr_eq(&store.lru_pop().unwrap(), &all[0]));
}

/// A file store that is full makes room by its LRU, evicting at most
/// `nuke_limit` objects for one piece of a body: past that the fill fails
/// (and is counted), and what was evicted stays evicted.
#[test]
fn a_full_file_store_evicts_no_more_than_nuke_limit() {
    use crate::file::{FileEngine, FileSpec};
    const PIECE: usize = 128 << 10;
    let dir = std::env::temp_dir().join(format!("lacquer-nuke-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let engine = FileEngine::open(&FileSpec {
        path: dir.clone(),
        size: Some(8 * PIECE as u64),
        granularity: 4096,
        random: true,
    })
    .unwrap();
    // The budget is not what runs out here: the file is.
    let store = Store::new("f", u64::MAX / 2, Box::new(engine));
    let c = Cache::new(vec![store.clone()], Store::transient(None));
    let req = Headers::new();
    let fill = |key: &str, len: usize, nuke_limit: u64| {
        let slot = miss(&c, key.as_bytes(), &req, 0.0);
        let o = Arc::new(Object::new(ObjectInit {
            store: Some(store.clone()),
            xid: 1,
            kind: ObjKind::Normal,
            status: 200,
            head: Bytes::from_static(b"HTTP/1.1 200 OK\r\n").into(),
            headers: Headers::new(),
            body: Body::streaming(Some(len as u64)),
            vary: None,
            timers: A_MINUTE,
        }));
        let mut handle = c
            .begin_fill(&o, 17, len as u64, nuke_limit)
            .expect("charged");
        slot.insert(&o, &req);
        let pushed = handle.push_charged(Bytes::from(vec![b'x'; len]));
        if pushed.is_ok() {
            handle.finish();
        }
        pushed.is_ok()
    };
    // Looked at without a lookup, which would move it on the LRU lists.
    let present = |key: &str| !c.variants(key.as_bytes()).is_empty();
    for i in 0..8 {
        assert!(fill(&format!("/{i}"), PIECE, 0), "object {i} fits");
    }
    let fails_before = store.stats.get(StoreCounter::c_fail);
    // Three objects' room in one piece; two may go: not enough.
    assert!(!fill("/big", 3 * PIECE, 2));
    assert_eq!(store.stats.get(StoreCounter::c_fail), fails_before + 1);
    assert!(!present("/0") && !present("/1"), "the two oldest went");
    assert!(present("/2") && present("/7"));
    assert!(!present("/big"), "the failed fill is not served");
    // Now one more is enough: the next oldest goes, and no other.
    assert!(fill("/big", 3 * PIECE, 1));
    assert!(present("/big"));
    assert!(!present("/2"));
    assert!((3..8).all(|i| present(&format!("/{i}"))));
    let _ = std::fs::remove_dir_all(&dir);
}
