//! Unit tests of conditional requests and byte ranges.

use super::*;
use lacquer_cache::object::{ObjKind, ObjectInit, Timers};
use lacquer_cache::Body;

fn obj(etag: Option<&'static str>, lm: Option<&'static str>) -> Object {
    let mut h = Headers::new();
    if let Some(e) = etag {
        h.append("ETag", e);
    }
    if let Some(l) = lm {
        h.append("Last-Modified", l);
    }
    Object::new(ObjectInit {
        store: None,
        xid: 1,
        kind: ObjKind::Normal,
        status: 200,
        head: Bytes::new().into(),
        headers: h,
        body: Body::complete(vec![]),
        vary: None,
        timers: Timers {
            t_origin: 0.0,
            ttl: 1.0,
            grace: 0.0,
            keep: 0.0,
        },
    })
}

fn nm(req: &Headers, o: &Object, now: f64) -> bool {
    not_modified(req, || Validators::of(o, None), now)
}

fn req(pairs: &[(&'static str, &'static str)]) -> Headers {
    Headers::from_static_pairs(pairs)
}

#[test]
fn conditionals() {
    let o = obj(Some("\"abc\""), Some("Sun, 06 Nov 1994 08:49:37 GMT"));
    let now = 1e9;
    assert!(nm(&req(&[("If-None-Match", "\"abc\"")]), &o, now));
    assert!(nm(&req(&[("If-None-Match", "\"x\", W/\"abc\"")]), &o, now));
    assert!(nm(&req(&[("If-None-Match", "*")]), &o, now));
    // With a range, only a strong match counts.
    let range = |inm| req(&[("If-None-Match", inm), ("Range", "bytes=1-2")]);
    assert!(nm(&range("\"abc\""), &o, now));
    assert!(!nm(&range("W/\"abc\""), &o, now));
    assert!(!nm(&req(&[("If-None-Match", "\"x\"")]), &o, now));
    assert!(nm(
        &req(&[("If-Modified-Since", "Sun, 06 Nov 1994 08:49:37 GMT")]),
        &o,
        now
    ));
    assert!(!nm(
        &req(&[("If-Modified-Since", "Sat, 05 Nov 1994 08:49:37 GMT")]),
        &o,
        now
    ));
    // If-None-Match wins over If-Modified-Since.
    assert!(!nm(
        &req(&[
            ("If-None-Match", "\"x\""),
            ("If-Modified-Since", "Sun, 06 Nov 1994 08:49:37 GMT")
        ]),
        &o,
        now
    ));
}

#[test]
fn ranges() {
    let o = obj(Some("\"abc\""), None);
    let r = |v: &'static str| range(&req(&[("Range", v)]), &o, 100);
    assert_eq!(
        r("bytes=0-9"),
        Range::Partial {
            start: 0,
            end: 9,
            total: 100
        }
    );
    assert_eq!(
        r("bytes=90-"),
        Range::Partial {
            start: 90,
            end: 99,
            total: 100
        }
    );
    assert_eq!(
        r("bytes=-10"),
        Range::Partial {
            start: 90,
            end: 99,
            total: 100
        }
    );
    assert_eq!(
        r("bytes=50-500"),
        Range::Partial {
            start: 50,
            end: 99,
            total: 100
        }
    );
    assert_eq!(r("bytes=100-"), Range::Unsatisfiable { total: 100 });
    assert_eq!(r("bytes=-0"), Range::Unsatisfiable { total: 100 });
    // varnishd answers 416 to whatever range it cannot serve.
    for bad in [
        "bytes=0-1,5-6",
        "bytes=9-1",
        "items=0-1",
        "bytes=x-1",
        "0-1",
    ] {
        assert_eq!(r(bad), Range::Unsatisfiable { total: 100 }, "{bad}");
    }
    // An empty body goes out whole.
    assert_eq!(range(&req(&[("Range", "bytes=0-0")]), &o, 0), Range::Full);
    let ir = req(&[("Range", "bytes=0-9"), ("If-Range", "\"other\"")]);
    assert_eq!(range(&ir, &o, 100), Range::Full);
    let ir = req(&[("Range", "bytes=0-9"), ("If-Range", "\"abc\"")]);
    assert!(matches!(range(&ir, &o, 100), Range::Partial { .. }));
}
