//! Unit tests of objects: their size, what they read from their stored
//! head, their status line, and their charge to a store.

use crate::object::{self, ObjKind, Object, ObjectInit};
use crate::tests::{cache, obj, obj_in, A_MINUTE};
use crate::Body;
use bytes::Bytes;
use lacquer_core::counters::StoreCounter;
use lacquer_http::Headers;

/// What every cached object costs before its bytes: the object itself
/// (168 bytes today, a head of up to 22 packed bytes included: with its
/// `Arc` counts 184, and 192 from the allocator, which 184 just fits), a
/// complete body's chunk inline, and an index head keyed by a digest. Memory per object is what a cache's
/// capacity is made of (bench/objects.sh): a change that grows these fails
/// here, and one that shrinks them lowers the bound.
#[test]
fn an_objects_bookkeeping_does_not_grow() {
    let object = std::mem::size_of::<crate::object::Object>();
    let head = std::mem::size_of::<crate::Head>();
    assert!(object <= 168, "an object is {object} bytes");
    let body = std::mem::size_of::<crate::Body>();
    assert!(body <= 40, "a body is {body} bytes (its fill state apart)");
    assert!(head <= 16, "an index head is {head} bytes");
}

/// A small packed head is kept in the object and charged nothing of its
/// own; a larger one has an allocation, charged its bytes.
#[test]
fn a_small_head_is_kept_in_the_object() {
    let made = |head: &'static [u8]| {
        Object::new(ObjectInit {
            store: None,
            xid: 1,
            kind: ObjKind::Normal,
            status: 200,
            head: object::StoredHead::pack(head, 200),
            headers: Headers::new(),
            body: Body::complete(Vec::new()),
            vary: None,
            timers: A_MINUTE,
        })
    };
    let small = b"HTTP/1.1 200 OK\r\nDate: Thu, 26 Nov 2026 02:11:56 GMT\r\nX-A: b\r\n";
    let o = made(small);
    assert_eq!((o.head_len(), o.head_charge()), (1 + 7 + (2 + 3 + 2), 0));
    assert_eq!(o.head_bytes(), small);
    let large = b"HTTP/1.1 200 OK\r\nX-Something-Long: a value of more than twenty-two bytes\r\n";
    let o = made(large);
    assert!(o.head_len() > crate::packed::Kept::INLINE);
    assert_eq!(o.head_charge(), o.head_len());
    assert_eq!(o.head_bytes(), large);
}

/// Grace and keep are kept in single precision, never above what was
/// set: whole seconds read back exactly up to 194 days.
#[test]
fn grace_and_keep_read_back_at_or_below_what_was_set() {
    for v in [
        0.0,
        10.0,
        0.1,
        1.5,
        86_400.0 * 194.0,
        1e9 + 0.3,
        -1.0,
        -0.1,
        1e40,
        f64::INFINITY,
    ] {
        let kept = object::AtomicF32::new(v).get();
        assert!(kept <= v, "{v} kept as {kept}");
        assert!(
            v - kept <= v.abs() * 1e-7 || v > f64::from(f32::MAX),
            "{v} kept as {kept}"
        );
        if v.fract() == 0.0 && v.abs() < 16_777_216.0 {
            assert_eq!(kept, v);
        }
    }
    assert!(object::AtomicF32::new(f64::NAN).get().is_nan());
}

/// The status and the kind share two bytes, and the vxid is kept in
/// 32 bits: each reads back as given (a synthetic status of 1000 and
/// more as Varnish sends it, its last three digits).
#[test]
fn status_kind_and_vxid_read_back_as_given() {
    for kind in [ObjKind::Normal, ObjKind::HitMiss, ObjKind::HitPass] {
        for (status, read) in [
            (100, 100),
            (200, 200),
            (599, 599),
            (999, 999),
            (1023, 1023),
            (1200, 200),
        ] {
            let o = Object::new(ObjectInit {
                store: None,
                xid: (1 << 30) - 1,
                kind,
                status,
                head: Bytes::new().into(),
                headers: Headers::new(),
                body: Body::complete(Vec::new()),
                vary: None,
                timers: A_MINUTE,
            });
            assert_eq!((o.kind(), o.status(), o.xid()), (kind, read, (1 << 30) - 1));
        }
    }
}

#[test]
fn fields_are_read_from_the_stored_head() {
    let made = |status: u16, head: Bytes, headers: Headers| {
        Object::new(ObjectInit {
            store: None,
            xid: 1,
            kind: ObjKind::Normal,
            status,
            head: head.into(),
            headers,
            body: Body::complete(Vec::new()),
            vary: None,
            timers: A_MINUTE,
        })
    };
    let head = Bytes::from_static(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nLink: <a:b>; rel=x\r\nX-Empty: \r\nx-dup: 1\r\nX-Dup: 2\r\n",
    );
    let o = made(200, head.clone(), Headers::new());
    assert_eq!(o.head_bytes(), &head[..], "the head is kept as it came");
    assert_eq!(o.header("link").unwrap(), "<a:b>; rel=x");
    assert_eq!(o.header("x-empty").unwrap(), "");
    assert_eq!(o.header("X-DUP").unwrap(), "1");
    assert!(o.has_header("content-type") && !o.has_header("content-length"));
    let all = o.headers();
    assert_eq!(all.len(), 5);
    assert_eq!(
        all.get_all("x-dup").cloned().collect::<Vec<_>>(),
        ["1", "2"]
    );
    // Fields given without a head are written into it.
    let mut fields = Headers::new();
    fields.append("ETag", "\"v1\"");
    let o = made(404, Bytes::new(), fields);
    assert_eq!(
        &o.head_bytes()[..],
        b"HTTP/1.1 404 Not Found\r\nETag: \"v1\"\r\n"
    );
    assert_eq!(o.etag().unwrap(), "\"v1\"");
}

/// A status line (the usual one, a reason of the backend's own, an
/// HTTP/1.0 line, a line that does not match the status) reads back as it
/// came, apart from the fields after it, and only the usual one is left
/// out of what is kept.
#[test]
fn a_status_line_reads_back_as_it_came() {
    let made = |status: u16, head: &'static [u8]| {
        Object::new(ObjectInit {
            store: None,
            xid: 1,
            kind: ObjKind::Normal,
            status,
            head: Bytes::from_static(head).into(),
            headers: Headers::new(),
            body: Body::complete(Vec::new()),
            vary: None,
            timers: A_MINUTE,
        })
    };
    let fields: &[u8] = b"Server: x\r\nETag: \"e\"\r\n";
    for (status, head, line) in [
        (
            200,
            &b"HTTP/1.1 200 OK\r\nServer: x\r\nETag: \"e\"\r\n"[..],
            &b"HTTP/1.1 200 OK\r\n"[..],
        ),
        (
            200,
            b"HTTP/1.1 200 Fine\r\nServer: x\r\nETag: \"e\"\r\n",
            b"HTTP/1.1 200 Fine\r\n",
        ),
        (
            200,
            b"HTTP/1.0 200 OK\r\nServer: x\r\nETag: \"e\"\r\n",
            b"HTTP/1.0 200 OK\r\n",
        ),
        (
            404,
            b"HTTP/1.1 200 OK\r\nServer: x\r\nETag: \"e\"\r\n",
            b"HTTP/1.1 200 OK\r\n",
        ),
        (
            599,
            b"HTTP/1.1 599 \r\nServer: x\r\nETag: \"e\"\r\n",
            b"HTTP/1.1 599 \r\n",
        ),
    ] {
        let o = made(status, head);
        let mut written = Vec::new();
        o.write_fields(&mut written);
        assert_eq!(written, fields);
        assert_eq!(o.head_bytes(), head);
        assert_eq!(o.reason(), &line[13..line.len() - 2]);
        // Kept packed: the usual line and the two names a byte each.
        let usual = status == 200 && line == b"HTTP/1.1 200 OK\r\n";
        let kept = if usual { 1 } else { 2 + line.len() - 2 };
        assert_eq!(o.head_len(), kept + (2 + "x".len()) + (2 + "\"e\"".len()));
        assert_eq!(o.header("etag").unwrap(), "\"e\"");
        assert_eq!(o.headers().len(), 2);
    }
    // What the head says is read once, from where its fields start: the
    // first field too.
    for head in [
        &b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nAccept-Ranges: bytes\r\n"[..],
        b"HTTP/1.1 200 Fine\r\nAccept-Ranges: bytes\r\nContent-Encoding: gzip\r\n",
    ] {
        let o = made(200, head);
        assert!(
            o.gzipped() && o.accept_ranges(),
            "{}",
            String::from_utf8_lossy(head)
        );
    }
    // A marker keeps no head at all.
    let marker = made(200, b"");
    assert!(marker.head_bytes().is_empty() && marker.reason().is_empty());
    assert_eq!(marker.head_len(), 0);
}

/// An object is charged to the store it was made for once, when
/// attached; one never attached (a fetch that gave up first) leaves the
/// store's counts as they were when it goes.
#[test]
fn an_object_is_charged_once_and_only_when_attached() {
    let c = cache(1 << 20);
    let store = c.store_for(false, None);
    let alloc = || store.stats.get(StoreCounter::g_alloc);
    let unattached = obj_in(Some(store.clone()), ObjKind::Normal, 60.0, 0.0, None, 0.0);
    assert_eq!(unattached.store_name(), None, "not the store's before");
    drop(unattached);
    assert_eq!((alloc(), store.used()), (0, 0));
    let o = obj_in(Some(store.clone()), ObjKind::Normal, 60.0, 0.0, None, 0.0);
    assert!(c.attach(&o, 100, 0));
    assert!(c.attach(&o, 100, 0), "a second attach is no charge");
    assert_eq!(o.store_name(), Some(store.name()));
    assert_eq!((alloc(), store.used()), (1, object::OBJECT_OVERHEAD + 100));
    drop(o);
    assert_eq!((alloc(), store.used()), (0, 0));
    // An object made for no store is never charged.
    let free = obj(ObjKind::Normal, 60.0, 0.0, None, 0.0);
    assert!(c.attach(&free, 100, 0));
    assert_eq!((free.store_name(), alloc()), (None, 0));
}

#[test]
fn a_clients_min_fresh_allocates_nothing_for_the_object() {
    let obj = crate::tests::plain_object();
    let ttl = obj.timers().ttl;
    assert!(obj.min_fresh_refuses(ttl / 2.0, ttl / 4.0, 1000.0));
    assert!(
        !obj.min_fresh_refuses(ttl / 2.0, ttl / 4.0, 1000.5),
        "once a second"
    );
    assert!(!obj.has_extra(), "no box of rare fields made");
}

#[test]
fn a_capped_life_ends_at_most_so_long_after_now() {
    let t = |ttl, grace, keep| object::Timers {
        t_origin: 100.0,
        ttl,
        grace,
        keep,
    };
    // Fetched at 110 with an Age of 10: 30 s more, the TTL first.
    let mut a = t(3600.0, 10.0, 0.0);
    a.cap_life(110.0, 30.0);
    assert_eq!((a.ttl, a.grace, a.keep), (40.0, 0.0, 0.0));
    let mut b = t(20.0, 10.0, 100.0);
    b.cap_life(110.0, 30.0);
    assert_eq!((b.ttl, b.grace, b.keep), (20.0, 10.0, 10.0));
    let mut short = t(5.0, 1.0, 0.0);
    short.cap_life(100.0, 30.0);
    assert_eq!((short.ttl, short.grace, short.keep), (5.0, 1.0, 0.0));
    let mut none = t(300.0, 10.0, 0.0);
    none.cap_life(100.0, 0.0);
    assert_eq!(none.lifetime(), 0.0);
}
