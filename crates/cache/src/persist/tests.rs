//! The persistent store through the cache: objects and bans back after a
//! restart, removals that stay removed, damage that loses only what it
//! touched, segments reused in order, and files that are refused.

use super::*;
use crate::ban::{BanReq, BanSpec};
use crate::object::{ObjKind, ObjectInit, Timers};
use crate::store::Store;
use crate::{Body, Cache, Lookup};
use bytes::Bytes;
use lacquer_http::Headers;
use std::path::Path;

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lacquer-persist-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A cache over one persistent store at `path`, with what it recovered.
fn open(path: &Path, size: u64) -> Result<(Arc<Cache>, Arc<Store>, Restored), String> {
    let spec = PersistSpec {
        path: path.to_path_buf(),
        size,
    };
    let (engine, recovery) = PersistEngine::open(&spec)?;
    let store = Store::self_managed("p", Box::new(engine));
    let cache = Cache::new(vec![store.clone()], Store::transient(None));
    cache.restore_bans(recovery.bans.iter());
    let restored = cache.restore_objects(&store, recovery, NOW);
    Ok((cache, store, restored))
}

const NOW: f64 = 2_000_000_000.0;

/// Fetches `url` into the cache as a miss would: body in `pieces`.
fn fetch(cache: &Arc<Cache>, url: &str, pieces: &[&[u8]], ttl: f64, extra: &str) -> Arc<Object> {
    let req = Headers::new();
    let Lookup::Miss(slot) = cache.lookup(
        url.as_bytes(),
        BanReq {
            url: url.as_bytes(),
            headers: &req,
        },
        NOW,
        2.0,
    ) else {
        panic!("{url}: a miss expected");
    };
    fill_slot(cache, slot, pieces, ttl, extra)
}

/// Fills what a fetch slot was given for: body in `pieces`.
fn fill_slot(
    cache: &Arc<Cache>,
    slot: crate::FetchSlot,
    pieces: &[&[u8]],
    ttl: f64,
    extra: &str,
) -> Arc<Object> {
    let req = Headers::new();
    let len: usize = pieces.iter().map(|p| p.len()).sum();
    let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {len}\r\n{extra}");
    let store = cache.store_for(false, None);
    let obj = Arc::new(Object::new(ObjectInit {
        store: Some(store.clone()),
        xid: 1001,
        kind: ObjKind::Normal,
        status: 200,
        head: Bytes::from(head.clone()).into(),
        headers: Headers::new(),
        body: Body::streaming(Some(len as u64)),
        vary: None,
        timers: Timers {
            t_origin: NOW - 5.0,
            ttl,
            grace: 10.0,
            keep: 0.0,
        },
    }));
    let mut fill = cache
        .begin_fill(&obj, head.len() as u64, len as u64, 50)
        .expect("room");
    slot.insert(&obj, &req);
    for p in pieces {
        fill.push(Bytes::copy_from_slice(p)).unwrap();
    }
    fill.finish();
    obj
}

fn hit(cache: &Arc<Cache>, url: &str) -> Option<Arc<Object>> {
    let req = Headers::new();
    match cache.lookup(
        url.as_bytes(),
        BanReq {
            url: url.as_bytes(),
            headers: &req,
        },
        NOW,
        2.0,
    ) {
        Lookup::Hit(o) => Some(o),
        _ => None,
    }
}

/// A store's `SMP` counter.
fn smp(store: &Store, name: &str) -> u64 {
    let mut c = Vec::new();
    store.counters(&mut c);
    let i = lacquer_core::counters::SMP
        .iter()
        .position(|s| s.name == name)
        .unwrap();
    c[i]
}

fn body(obj: &Object) -> Vec<u8> {
    obj.body().whole().unwrap().to_vec()
}

/// A persistent store's log.
fn log_of(store: &Store) -> &Arc<Log> {
    &store
        .engine()
        .as_any()
        .downcast_ref::<PersistEngine>()
        .expect("a persistent store")
        .log
}

#[test]
fn recovered_records_sleep_until_their_key_is_asked_for() {
    let d = dir("asleep");
    let path = d.join("store");
    {
        let (cache, _, _) = open(&path, 8 << 20).unwrap();
        fetch(&cache, "/hit", &[b"h"], 120.0, "");
        fetch(&cache, "/purged", &[b"p"], 120.0, "");
        fetch(&cache, "/fresh", &[b"old"], 120.0, "");
        fetch(&cache, "/banned", &[b"b"], 120.0, "X-Kind: old\r\n");
        fetch(&cache, "/expiring", &[b"e"], 1.0, "");
        fetch(&cache, "/tagged", &[b"t"], 120.0, "Surrogate-Key: t9\r\n");
        fetch(&cache, "/big", &[&[b'g'; 20_000]], 120.0, "");
    }
    let (cache, store, restored) = open(&path, 8 << 20).unwrap();
    let log = log_of(&store);
    assert_eq!(restored.objects, 7);
    assert_eq!(log.dormant.len(), 6, "all but the tagged one asleep");
    assert_eq!(smp(&store, "g_asleep"), 6);
    assert_eq!((cache.heads(), cache.tag_count()), (1, 1));
    // A lookup wakes its key's records.
    assert_eq!(body(&hit(&cache, "/hit").unwrap()), b"h");
    assert_eq!(body(&hit(&cache, "/big").unwrap()), vec![b'g'; 20_000]);
    assert_eq!(log.dormant.len(), 4);
    // A purge, and a fetch that ignores what is stored (`hash_always_miss`),
    // find what is asleep.
    assert_eq!(cache.purge(b"/purged"), 1);
    let Lookup::Miss(slot) = cache.lookup_fresh_fetch(b"/fresh") else {
        panic!("a fetch");
    };
    fill_slot(&cache, slot, &[b"new"], 120.0, "");
    assert_eq!(
        cache.variants(b"/fresh").len(),
        1,
        "the new copy replaced it"
    );
    // A ban issued after the restart and completed by the lurker while
    // the record sleeps still applies to it when it wakes.
    let spec = BanSpec::parse_str("obj.http.X-Kind == old").unwrap();
    cache.bans().add(spec, NOW, false);
    let lurk = crate::ban::LurkConfig {
        age: 0.0,
        batch: 1000,
        sleep: 0.0,
        holdoff: 0.0,
        cutoff: 0,
    };
    cache.lurk_bans(&lurk, NOW + 1.0);
    assert!(cache.bans().list()[0].completed);
    assert_eq!(log.dormant.len(), 2);
    assert!(hit(&cache, "/banned").is_none(), "banned as it wakes");
    // A record whose lifetime ends asleep goes at the next sweep.
    cache.expire(NOW + 5.0);
    assert_eq!(log.dormant.len(), 1);
    cache.expire(NOW + 7.0);
    assert_eq!(log.dormant.len(), 0);
    assert_eq!(smp(&store, "g_asleep"), 0);
    assert!(hit(&cache, "/tagged").is_some());
    drop(cache);
    let (cache, _, _) = open(&path, 8 << 20).unwrap();
    assert!(hit(&cache, "/hit").is_some());
    assert_eq!(body(&hit(&cache, "/fresh").unwrap()), b"new");
    assert!(hit(&cache, "/purged").is_none(), "purged asleep, gone");
    assert!(hit(&cache, "/banned").is_none(), "banned as it woke, gone");
    drop(cache);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn objects_and_bans_come_back_and_removed_ones_do_not() {
    let d = dir("back");
    let path = d.join("store");
    {
        let (cache, _, restored) = open(&path, 8 << 20).unwrap();
        assert_eq!(restored, Restored::default());
        fetch(
            &cache,
            "/a",
            &[b"hello ", b"world"],
            120.0,
            "ETag: \"a1\"\r\n",
        );
        fetch(&cache, "/b", &[b"bee"], 120.0, "xkey: t1\r\n");
        fetch(&cache, "/gone", &[b"purged"], 120.0, "");
        fetch(&cache, "/short", &[b"x"], 1.0, "");
        fetch(&cache, "/banned", &[b"z"], 120.0, "X-Kind: old\r\n");
        assert_eq!(cache.purge(b"/gone"), 1);
        // A newer copy replaces the older one.
        let old = hit(&cache, "/a").unwrap();
        cache.remove(&old, crate::Removal::Purged);
        fetch(&cache, "/a", &[b"second"], 120.0, "ETag: \"a2\"\r\n");
        let spec = BanSpec::parse_str("obj.http.X-Kind == old").unwrap();
        cache.bans().add(spec, NOW, false);
        // A soft purge's new timers are written down.
        fetch(&cache, "/soft", &[b"s"], 120.0, "");
        let how = crate::SoftPurge {
            ttl: 0.0,
            grace: 3.0,
            keep: 0.0,
        };
        assert_eq!(cache.soft_purge(b"/soft", how, NOW), 1);
    }
    let (cache, store, restored) = open(&path, 8 << 20).unwrap();
    assert_eq!(
        restored.objects, 5,
        "{restored:?}: /a, /b, /short, /banned, /soft"
    );
    let soft = cache.variants(b"/soft");
    assert_eq!(soft.len(), 1);
    let t = soft[0].timers();
    assert_eq!(t.t_origin + t.ttl, NOW, "stale since the soft purge");
    assert_eq!(t.grace, 3.0);
    let a = hit(&cache, "/a").expect("/a recovered");
    assert_eq!(body(&a), b"second");
    assert_eq!(a.etag().as_deref(), Some(&b"\"a2\""[..]));
    assert_eq!(a.timers().ttl, 120.0);
    assert_eq!(a.timers().t_origin, NOW - 5.0, "its age goes on");
    assert_eq!(body(&hit(&cache, "/b").unwrap()), b"bee");
    assert!(
        hit(&cache, "/gone").is_none(),
        "a purged object stays purged"
    );
    assert!(hit(&cache, "/banned").is_none(), "the ban applies again");
    assert_eq!(cache.tag_count(), 1, "surrogate keys are indexed again");
    assert_eq!(smp(&store, "c_recovered"), 5);
    assert_eq!(smp(&store, "c_damaged"), 0);
    drop(cache);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn damage_loses_only_the_objects_it_touches() {
    let d = dir("damage");
    let path = d.join("store");
    {
        let (cache, _, _) = open(&path, 8 << 20).unwrap();
        for (url, fill) in [("/a", b'a'), ("/b", b'b'), ("/c", b'c')] {
            fetch(&cache, url, &[&[fill; 3000]], 120.0, "");
        }
    }
    // Flip one bit in /b's body.
    let bytes = std::fs::read(&path).unwrap();
    let pos = bytes
        .windows(64)
        .position(|w| w.iter().all(|&x| x == b'b'))
        .unwrap();
    let mut damaged = bytes.clone();
    damaged[pos + 10] ^= 1;
    std::fs::write(&path, &damaged).unwrap();
    let (cache, store, restored) = open(&path, 8 << 20).unwrap();
    // Bodies are checked when their objects are built, on first use.
    assert_eq!(restored.objects, 3);
    assert_eq!(smp(&store, "c_damaged"), 0);
    assert!(hit(&cache, "/a").is_some());
    assert!(hit(&cache, "/b").is_none(), "the damaged body is left out");
    assert!(hit(&cache, "/c").is_some());
    assert_eq!(smp(&store, "c_damaged"), 1);
    drop(cache);
    let (cache, store, restored) = open(&path, 8 << 20).unwrap();
    assert_eq!(restored.objects, 2, "its record was cleared");
    assert!(hit(&cache, "/b").is_none());
    assert_eq!(smp(&store, "c_damaged"), 0);
    drop(cache);
    // A torn write: the file ends in the middle of the last record.
    let cut = bytes
        .windows(2)
        .rposition(|w| w == b"/c")
        .expect("the last record's key");
    let mut torn = bytes.clone();
    torn[cut..].fill(0);
    std::fs::write(&path, &torn).unwrap();
    let (cache, _, restored) = open(&path, 8 << 20).unwrap();
    assert_eq!(restored.objects, 2, "/a and /b, whole");
    assert!(hit(&cache, "/c").is_none());
    // And the store goes on from there.
    fetch(&cache, "/d", &[b"dee"], 120.0, "");
    drop(cache);
    let (cache, _, restored) = open(&path, 8 << 20).unwrap();
    assert_eq!(restored.objects, 3);
    assert_eq!(body(&hit(&cache, "/d").unwrap()), b"dee");
    drop(cache);
    let _ = std::fs::remove_dir_all(&d);
}

/// The smallest store: four segments.
const SMALL: u64 = 4 * (256 << 10) + 4096 + 4096;

#[test]
fn a_full_log_reuses_its_oldest_segment_first() {
    let d = dir("reuse");
    let path = d.join("store");
    let size = SMALL;
    let big = vec![b'x'; 100 << 10];
    {
        let (cache, store, _) = open(&path, size).unwrap();
        for i in 0..40 {
            fetch(&cache, &format!("/{i}"), &[&big], 120.0, "");
        }
        // The newest are there, the oldest went.
        assert!(hit(&cache, "/39").is_some());
        assert!(hit(&cache, "/0").is_none());
        assert!(smp(&store, "c_segments_reused") > 0);
    }
    let (cache, _, restored) = open(&path, size).unwrap();
    assert!(restored.objects >= 5, "{restored:?}");
    assert!(hit(&cache, "/39").is_some());
    assert!(
        hit(&cache, "/0").is_none(),
        "an evicted object stays evicted"
    );
    for i in 0..40 {
        if let Some(o) = hit(&cache, &format!("/{i}")) {
            assert_eq!(body(&o), big, "/{i} comes back whole");
        }
    }
    // Recovered objects share a view of their segment: once they are
    // evicted, the segment is written over like any other.
    let store = cache.stores()[0].clone();
    let reused = smp(&store, "c_segments_reused");
    for i in 100..140 {
        fetch(&cache, &format!("/{i}"), &[&big], 120.0, "");
    }
    assert!(smp(&store, "c_segments_reused") >= reused + 5);
    assert_eq!(log_of(&store).dormant.len(), 0, "asleep, then evicted");
    assert!(hit(&cache, "/39").is_none(), "recovered, then evicted");
    assert_eq!(body(&hit(&cache, "/139").expect("the newest")), big);
    drop(cache);
    let _ = std::fs::remove_dir_all(&d);
}

/// A body that says which key it is for.
fn marked(url: &str, len: usize) -> Vec<u8> {
    url.bytes().chain(*b";").cycle().take(len).collect()
}

#[test]
fn records_asleep_wake_while_segments_are_reused_and_keys_purged() {
    let d = dir("race");
    let path = d.join("store");
    let len = 20_000;
    {
        let (cache, _, _) = open(&path, SMALL).unwrap();
        for i in 0..40 {
            let url = format!("/k{i}");
            fetch(&cache, &url, &[&marked(&url, len)], 120.0, "");
        }
    }
    let (cache, store, restored) = open(&path, SMALL).unwrap();
    assert!(restored.objects > 10, "{restored:?}");
    let asleep = log_of(&store).dormant.len();
    assert!(asleep > 10);
    std::thread::scope(|s| {
        // Lookups wake what they find, and check it is what its key had.
        for t in 0..2 {
            let cache = &cache;
            s.spawn(move || {
                let req = Headers::new();
                for round in 0..50 {
                    for i in (0..40).map(|i| (i * 7 + round + t) % 40) {
                        let url = format!("/k{i}");
                        let ban = BanReq {
                            url: url.as_bytes(),
                            headers: &req,
                        };
                        if let Lookup::Hit(o) = cache.lookup(url.as_bytes(), ban, NOW, 2.0) {
                            assert_eq!(body(&o), marked(&url, len), "{url}");
                        }
                    }
                }
            });
        }
        // New objects push the oldest segments out, records asleep with
        // them.
        s.spawn(|| {
            for j in 0..60 {
                let url = format!("/n{j}");
                fetch(&cache, &url, &[&marked(&url, len)], 120.0, "");
            }
        });
        s.spawn(|| {
            for i in (0..40).step_by(3) {
                cache.purge(format!("/k{i}").as_bytes());
            }
        });
    });
    assert!(smp(&store, "c_segments_reused") > 0);
    assert_eq!(smp(&store, "c_damaged"), 0);
    drop(cache);
    // What comes back is whole and what its key had; nothing is damaged.
    let (cache, store, _) = open(&path, SMALL).unwrap();
    assert_eq!(smp(&store, "c_damaged"), 0, "no record outlived its body");
    let mut back = 0;
    for url in (0..40)
        .map(|i| format!("/k{i}"))
        .chain((0..60).map(|j| format!("/n{j}")))
    {
        if let Some(o) = hit(&cache, &url) {
            assert_eq!(body(&o), marked(&url, len), "{url}");
            back += 1;
        }
    }
    assert!(back > 0);
    assert_eq!(smp(&store, "c_damaged"), 0);
    drop(cache);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_reader_holds_its_segment() {
    let d = dir("held");
    let big = vec![b'y'; 100 << 10];
    let (cache, store, _) = open(&d.join("store"), SMALL).unwrap();
    let first = fetch(&cache, "/first", &[&big], 120.0, "");
    // Someone is still reading /first while the log comes round.
    for i in 0..40 {
        fetch(&cache, &format!("/{i}"), &[&big], 120.0, "");
    }
    assert!(first.is_removed(), "evicted from the index");
    assert_eq!(body(&first), big, "but its bytes were not written over");
    assert!(smp(&store, "c_segments_reused") > 0);
    drop(first);
    drop(cache);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn files_that_are_not_this_stores_are_refused() {
    let d = dir("refuse");
    let path = d.join("store");
    for other in [vec![7u8; 4 << 20], b"hello\n".to_vec()] {
        std::fs::write(&path, &other).unwrap();
        let err = open(&path, 4 << 20).err().unwrap();
        assert!(err.contains("not a Lacquer persistent store"), "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), other, "left as it was");
    }
    std::fs::remove_file(&path).unwrap();
    drop(open(&path, 4 << 20).unwrap());
    let err = open(&path, 8 << 20).err().unwrap();
    assert!(err.contains("made 4194304 bytes long"), "{err}");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[16] = 99;
    std::fs::write(&path, &bytes).unwrap();
    let err = open(&path, 4 << 20).err().unwrap();
    assert!(err.contains("format version 99"), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_file_removed_underneath_goes_on_and_the_next_start_is_empty() {
    let d = dir("vanish");
    let path = d.join("store");
    let (cache, _, _) = open(&path, 4 << 20).unwrap();
    fetch(&cache, "/a", &[b"aaa"], 120.0, "");
    std::fs::remove_file(&path).unwrap();
    fetch(&cache, "/b", &[b"bbb"], 120.0, "");
    assert_eq!(body(&hit(&cache, "/a").unwrap()), b"aaa");
    assert_eq!(body(&hit(&cache, "/b").unwrap()), b"bbb");
    drop(cache);
    let (cache, _, restored) = open(&path, 4 << 20).unwrap();
    assert_eq!(restored.objects, 0);
    drop(cache);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn writing_far_ahead_of_the_disk_keeps_new_objects_in_memory_only() {
    let d = dir("ahead");
    let path = d.join("store");
    let spec = PersistSpec {
        path: path.clone(),
        size: 8 << 20,
    };
    let (engine, _) = PersistEngine::open(&spec).unwrap();
    engine.set_unsynced_max(64 << 10);
    let log = engine.log.clone();
    let store = Store::self_managed("p", Box::new(engine));
    let cache = Cache::new(vec![store.clone()], Store::transient(None));
    let body = vec![b'a'; 20 << 10];
    for i in 0..6 {
        fetch(&cache, &format!("/{i}"), &[&body], 120.0, "");
    }
    // Every one is served; those past the limit were not written.
    for i in 0..6 {
        assert_eq!(body_of(&cache, &format!("/{i}")), body);
    }
    assert!(log.dropped.load(Ordering::Relaxed) >= 2);
    let written = log.objects_written.load(Ordering::Relaxed);
    assert!(written < 6);
    // Nothing is left waiting for a record that will never be written.
    assert!(log.pending.lock().unwrap().is_empty());
    store
        .engine()
        .as_any()
        .downcast_ref::<PersistEngine>()
        .unwrap()
        .sync();
    fetch(&cache, "/after", &[&body], 120.0, "");
    assert_eq!(
        log.objects_written.load(Ordering::Relaxed),
        written + 1,
        "synced: written again"
    );
    drop(cache);
    let _ = std::fs::remove_dir_all(&d);
}

fn body_of(cache: &Arc<Cache>, url: &str) -> Vec<u8> {
    body(&hit(cache, url).unwrap_or_else(|| panic!("{url} is a hit")))
}

#[test]
fn a_disk_that_refuses_writes_loses_no_request() {
    let d = dir("refused");
    let path = d.join("store");
    let spec = PersistSpec {
        path: path.clone(),
        size: 8 << 20,
    };
    let (mut engine, _) = PersistEngine::open(&spec).unwrap();
    // Every write fails from now on (a full or failing disk): the file
    // is reached through a descriptor opened for reading only.
    let read_only = std::fs::File::open(&path).unwrap();
    Arc::get_mut(&mut engine.log).unwrap().space =
        crate::space::FileSpace::new(read_only, true).unwrap();
    let log = engine.log.clone();
    let store = Store::self_managed("p", Box::new(engine));
    let cache = Cache::new(vec![store], Store::transient(None));
    let big = vec![b'b'; 50 << 10];
    fetch(&cache, "/small", &[b"tiny"], 120.0, "");
    fetch(&cache, "/big", &[&big], 120.0, "");
    assert_eq!(body_of(&cache, "/small"), b"tiny");
    assert_eq!(body_of(&cache, "/big"), big, "kept in memory");
    assert_eq!(log.objects_written.load(Ordering::Relaxed), 0);
    assert_eq!(log.dropped.load(Ordering::Relaxed), 2, "both counted");
    drop(cache);
    let _ = std::fs::remove_dir_all(&d);
}

/// A body finished before its object is in the index (a small body read
/// whole before the insert) is written when the insert comes, as one
/// inserted first is written when its body is done; either way nothing
/// stays waiting, and the object comes back.
#[test]
fn a_record_waits_for_whichever_half_comes_second() {
    let d = dir("halves");
    let path = d.join("store");
    let (cache, _store, _) = open(&path, 8 << 20).unwrap();
    let req = Headers::new();
    let Lookup::Miss(slot) = cache.lookup(
        b"/first-body",
        BanReq {
            url: b"/first-body",
            headers: &req,
        },
        NOW,
        2.0,
    ) else {
        panic!("a miss");
    };
    let head = b"HTTP/1.1 200 OK\r\nETag: \"b\"\r\n".to_vec();
    let store = cache.store_for(false, None);
    let obj = Arc::new(Object::new(ObjectInit {
        store: Some(store.clone()),
        xid: 9,
        kind: ObjKind::Normal,
        status: 200,
        head: Bytes::from(head.clone()).into(),
        headers: Headers::new(),
        body: Body::streaming(Some(5000)),
        vary: None,
        timers: Timers {
            t_origin: NOW - 5.0,
            ttl: 120.0,
            grace: 10.0,
            keep: 0.0,
        },
    }));
    let mut fill = cache
        .begin_fill(&obj, head.len() as u64, 5000, 50)
        .expect("room");
    fill.push(Bytes::from(vec![b'z'; 5000])).unwrap();
    fill.finish();
    let log = store
        .engine()
        .as_any()
        .downcast_ref::<PersistEngine>()
        .unwrap()
        .log
        .clone();
    assert_eq!(log.pending.lock().unwrap().len(), 1, "the body waits");
    let before = log.objects_written.load(Ordering::Relaxed);
    let content_before = log.content_written.load(Ordering::Relaxed);
    slot.insert(&obj, &req);
    assert_eq!(log.objects_written.load(Ordering::Relaxed), before + 1);
    // The head counts as the text it is written as, not as kept.
    assert_eq!(
        log.content_written.load(Ordering::Relaxed) - content_before,
        head.len() as u64 + 5000
    );
    fetch(&cache, "/first-insert", &[b"abc", b"def"], 120.0, "");
    assert!(log.pending.lock().unwrap().is_empty());
    drop((cache, store, obj, log));
    let (cache, _, restored) = open(&path, 8 << 20).unwrap();
    assert_eq!(restored.objects, 2);
    assert_eq!(body_of(&cache, "/first-body"), vec![b'z'; 5000]);
    assert_eq!(body_of(&cache, "/first-insert"), b"abcdef");
    drop(cache);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn renditions_come_back_with_their_objects() {
    use crate::rendition::{Claim, Rendition};
    let d = dir("renditions");
    let path = d.join("store");
    let kept = |cache: &Arc<Cache>, obj: &Arc<Object>, slot: usize, body: &'static [u8]| {
        assert_eq!(obj.claim_rendition(slot), Claim::Yours);
        let r = Rendition {
            head: Bytes::from_static(b"HTTP/1.1 200 OK\r\nContent-Encoding: br\r\n"),
            body: Bytes::from_static(body),
        };
        assert!(cache.keep_rendition(obj, slot, r, 0));
    };
    {
        let (cache, _, _) = open(&path, 8 << 20).unwrap();
        let a = fetch(&cache, "/a", &[b"hello hello hello"], 120.0, "");
        kept(&cache, &a, 0, b"br-of-a");
        kept(&cache, &a, 1, b"zstd-of-a");
        let b = fetch(&cache, "/b", &[b"bee bee bee"], 120.0, "");
        kept(&cache, &b, 1, b"zstd-of-b");
        // A purged object's rendition does not come back with another.
        let gone = fetch(&cache, "/gone", &[b"gone gone"], 120.0, "");
        kept(&cache, &gone, 0, b"br-of-gone");
        assert_eq!(cache.purge(b"/gone"), 1);
    }
    let (cache, _, restored) = open(&path, 8 << 20).unwrap();
    assert_eq!(restored.objects, 2);
    let a = hit(&cache, "/a").expect("/a recovered");
    assert_eq!(&a.rendition(0).unwrap().body[..], b"br-of-a");
    assert_eq!(
        &a.rendition(0).unwrap().head[..],
        b"HTTP/1.1 200 OK\r\nContent-Encoding: br\r\n"
    );
    assert_eq!(&a.rendition(1).unwrap().body[..], b"zstd-of-a");
    let b = hit(&cache, "/b").expect("/b recovered");
    assert!(b.rendition(0).is_none());
    assert_eq!(
        b.claim_rendition(0),
        Claim::Yours,
        "br of /b was never made"
    );
    assert_eq!(&b.rendition(1).unwrap().body[..], b"zstd-of-b");
    assert!(hit(&cache, "/gone").is_none());
    drop(cache);
    let _ = std::fs::remove_dir_all(&d);
}
