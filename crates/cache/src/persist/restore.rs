//! Putting what a persistent store recovered back into the cache: bans
//! first (every store's, before any object takes a place in the list),
//! then the objects, in the order they were written, so that a newer
//! copy of a variant replaces an older one as it did when they were
//! fetched. Heads and bodies stay in the file; the objects' views of them
//! hold their segments until they go.

use super::format::{Record, STATE_OFFSET};
use super::{Log, PersistEngine, Recovery, ATTR_CODEC};
use crate::ban::BanSpec;
use crate::object::{ObjKind, Object, ObjectInit, Timers, VarySpec};
use crate::space::view_of;
use crate::store::Store;
use crate::{Body, Cache};
use bytes::Bytes;
use lacquer_http::Headers;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Holds a segment while a view of its bytes lives.
struct Pin {
    log: Arc<Log>,
    segment: usize,
}

impl Pin {
    fn new(log: &Arc<Log>, at: u64) -> Pin {
        let segment = log.segment_of(at);
        log.segments[segment].pins.fetch_add(1, Ordering::AcqRel);
        Pin {
            log: log.clone(),
            segment,
        }
    }
}

impl Drop for Pin {
    fn drop(&mut self) {
        self.log.segments[self.segment]
            .pins
            .fetch_sub(1, Ordering::AcqRel);
    }
}

/// What restoring found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Restored {
    /// Objects back in the cache.
    pub objects: u64,
    /// Objects whose lifetime ended while the daemon was down.
    pub expired: u64,
}

impl Cache {
    /// Puts recovered bans back (from every store, before any object).
    /// Bans whose text no longer parses are left out.
    pub fn restore_bans<'a>(&self, bans: impl Iterator<Item = &'a (f64, String)>) {
        let parsed = bans
            .filter_map(|(time, text)| BanSpec::parse_str(text).ok().map(|s| (*time, s)))
            .collect();
        self.bans.restore(parsed);
    }

    /// Puts a store's recovered objects back, as of `now`, in the order
    /// they were written. (On one thread: shared among two cores by key,
    /// the locks and counters every insertion touches made it slower,
    /// 2.1 s against 1.6 s for a million objects.)
    pub fn restore_objects(
        self: &Arc<Self>,
        store: &Arc<Store>,
        recovery: Recovery,
        now: f64,
    ) -> Restored {
        let Some(engine) = store.engine().as_any().downcast_ref::<PersistEngine>() else {
            return Restored::default();
        };
        let log = &engine.log;
        self.index.reserve(recovery.objects.len());
        let done = self.restore_records(store, log, recovery.objects, now);
        log.recovered.fetch_add(done.objects, Ordering::Relaxed);
        done
    }

    /// Restores records, in order.
    fn restore_records(
        self: &Arc<Self>,
        store: &Arc<Store>,
        log: &Arc<Log>,
        share: Vec<(u64, Record)>,
        now: f64,
    ) -> Restored {
        let mut done = Restored::default();
        // One view over each segment, made when first needed, that every
        // object read from it slices (no allocation, and no pin, of its
        // own); each slice keeps the segment pinned.
        let mut views: Vec<Option<Bytes>> = vec![None; log.segments.len()];
        for (frame_at, record) in share {
            let timers = Timers {
                t_origin: record.t_origin,
                ttl: record.ttl,
                grace: record.grace,
                keep: record.keep,
            };
            if timers.t_origin + timers.lifetime() <= now {
                done.expired += 1;
                continue;
            }
            let Some(obj) = object_of(log, &mut views, &record, timers) else {
                // An ESI program this build cannot read: delivered plain,
                // the page would show its markup.
                log.damaged.fetch_add(1, Ordering::Relaxed);
                continue;
            };
            let obj = Arc::new(obj);
            self.attach(&obj, store.clone(), record.head.1 + record.body_len, 0);
            obj.record.store(frame_at + STATE_OFFSET, Ordering::Release);
            log.register(log.segment_of(frame_at), &obj);
            for &(at, _, _) in &record.extents {
                log.register(log.segment_of(at), &obj);
            }
            {
                let seg = log.segment_of(frame_at);
                let mut oldest = log.segments[seg]
                    .oldest
                    .lock()
                    .unwrap_or_else(|e| e.into_inner());
                *oldest = oldest.min(record.inserted);
            }
            obj.set_ban(self.bans.at_time(record.inserted));
            self.restore_one(&record.key, &obj);
            done.objects += 1;
        }
        done
    }

    /// Enters one recovered object into the index, replacing the copy of
    /// the same variant written before it.
    fn restore_one(self: &Arc<Self>, key: &[u8], obj: &Arc<Object>) {
        let digest = self.index.digest(key);
        obj.set_digest(digest);
        let mut replaced = Vec::new();
        {
            let mut map = self.index.lock(digest.hash());
            let head = map.head_for(digest);
            head.objs.retain(|old| {
                let same = old.vary() == obj.vary();
                if same {
                    old.mark_removed();
                    replaced.push(old.clone());
                }
                !same
            });
            head.objs.push_front(obj.clone());
        }
        self.settle(obj, key, &replaced);
    }
}

/// The object a record describes, its head and body read in place:
/// slices of their segment's view in `views` when they are in one
/// segment (the usual case: the body just before its record).
fn object_of(
    log: &Arc<Log>,
    views: &mut [Option<Bytes>],
    r: &Record,
    timers: Timers,
) -> Option<Object> {
    let seg = log.segment_of(r.head.0);
    let (head, chunks) = if r.extents.iter().all(|e| log.segment_of(e.0) == seg) {
        let start = log.segment_start(seg);
        let whole = views[seg].get_or_insert_with(|| {
            view_of(&log.space, start, log.segment_len, Pin::new(log, start))
        });
        let part =
            |at: u64, len: u64| whole.slice((at - start) as usize..(at - start + len) as usize);
        let chunks = r
            .extents
            .iter()
            .map(|&(at, len, _)| part(at, len))
            .collect();
        (part(r.head.0, r.head.1), chunks)
    } else {
        let head = view_of(&log.space, r.head.0, r.head.1, Pin::new(log, r.head.0));
        let chunks: Vec<Bytes> = r
            .extents
            .iter()
            .map(|&(at, len, _)| view_of(&log.space, at, len, Pin::new(log, at)))
            .collect();
        (head, chunks)
    };
    let vary = VarySpec::from_fields(
        r.vary
            .iter()
            .map(|(n, v)| (n.clone(), v.as_ref().map(|b| Bytes::copy_from_slice(b))))
            .collect(),
    );
    let obj = Object::new(ObjectInit {
        xid: r.xid,
        kind: ObjKind::Normal,
        status: r.status,
        head,
        headers: Headers::new(),
        body: Body::complete(chunks),
        vary,
        timers,
    });
    if !r.gzip.is_empty() {
        if let Some(attr) = ATTR_CODEC.get().and_then(|c| (c.decode_gzip)(&r.gzip)) {
            obj.set_gzip(attr);
        }
    }
    if let Some(program) = &r.esi {
        obj.expect_esi();
        if !program.is_empty() {
            obj.set_esi(ATTR_CODEC.get().and_then(|c| (c.decode_esi)(program))?);
        }
    }
    Some(obj)
}
