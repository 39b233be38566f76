//! Putting what a persistent store recovered back into the cache: bans
//! first (every store's, before any object takes a place in the list),
//! then the records, asleep (`dormant.rs`): each is indexed by its key's
//! digest, and its object is built the first time the key is asked for
//! (a lookup, a purge, an insert), under the key's table lock, so that
//! nothing sees the key between its records and its objects. A key's
//! records are built together, in the order written, so that a newer
//! copy of a variant replaces an older one as it did when they were
//! fetched. Records whose heads carry surrogate keys are built at once:
//! a tag purge must find them. Heads and bodies stay in the file; the
//! objects slice views of their segments, which hold them until they go.

use super::dormant::{shard_of, Entry, Pin, SHARDS};
use super::format::{self, FrameHeader, Record, FRAME_HEADER_LEN, LIVE, STATE_OFFSET};
use super::{Log, PersistEngine, Recovery, ATTR_CODEC};
use crate::ban::BanSpec;
use crate::index::Table;
use crate::object::{Digest, ObjKind, Object, ObjectInit, Timers, VarySpec};
use crate::store::Store;
use crate::{Body, Cache};
use bytes::Bytes;
use lacquer_core::counters::{Counter, COUNTERS};
use lacquer_http::Headers;
use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};

/// What restoring found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Restored {
    /// Objects back in the cache (most asleep until asked for).
    pub objects: u64,
    /// Objects whose lifetime ended while the daemon was down.
    pub expired: u64,
}

/// Objects just built from their records, each with the variants it
/// replaced, for [`Cache::settle`] once the table is let go.
type Woken = Vec<(Arc<Object>, Vec<Arc<Object>>)>;

impl Cache {
    /// Puts recovered bans back (from every store, before any object).
    /// Bans whose text no longer parses are left out.
    pub fn restore_bans<'a>(&self, bans: impl Iterator<Item = &'a (f64, String)>) {
        let parsed = bans
            .filter_map(|(time, text)| BanSpec::parse_str(text).ok().map(|s| (*time, s)))
            .collect();
        self.bans.restore(parsed);
    }

    /// Puts a store's recovered records back, as of `now`: asleep, but
    /// for those with surrogate keys.
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
        let mut done = Restored::default();
        let mut tables = vec![Vec::new(); SHARDS];
        let mut tagged = Vec::new();
        let mut oldest = f64::INFINITY;
        for found in recovery.objects {
            if found.expires <= now {
                done.expired += 1;
                continue;
            }
            let Some(key) = log.key_at(found.at) else {
                log.damaged.fetch_add(1, Ordering::Relaxed);
                continue;
            };
            let digest = self.index.digest(key);
            if found.tagged {
                tagged.push(digest);
            }
            oldest = oldest.min(found.inserted);
            tables[shard_of(digest)].push(Entry::new(
                digest,
                found.at,
                found.expires,
                found.oldest,
            ));
            done.objects += 1;
        }
        if done.objects > 0 {
            let ban = self.bans.at_time(oldest);
            log.dormant.fill(tables, self.asleep.clone(), ban);
        }
        log.recovered.fetch_add(done.objects, Ordering::Relaxed);
        {
            let mut renditions = log.renditions.lock().unwrap_or_else(|e| e.into_inner());
            for (obj_at, frame_at) in recovery.renditions {
                renditions.entry(obj_at).or_default().push(frame_at);
            }
        }
        for digest in tagged {
            drop(self.lock_awake(digest, now));
        }
        done
    }

    /// Locks the table of `digest` with the key's records asleep, if it
    /// has any, built into objects: every way into a key's head comes
    /// through here (or finds the head there already, and then no record
    /// of the key is asleep).
    pub(crate) fn lock_awake(self: &Arc<Self>, digest: Digest, now: f64) -> MutexGuard<'_, Table> {
        let mut map = self.index.lock(digest.hash());
        if self.asleep.load(Ordering::Relaxed) == 0 || map.get(digest).is_some() {
            return map;
        }
        let woken = self.wake(&mut map, digest, now);
        if woken.is_empty() {
            return map;
        }
        drop(map);
        for (obj, replaced) in &woken {
            self.settle(obj, &[], replaced);
        }
        self.index.lock(digest.hash())
    }

    /// Lets go of the records asleep whose lifetime has ended.
    pub(crate) fn sweep_asleep(&self, now: f64) {
        if self.asleep.load(Ordering::Relaxed) == 0 {
            return;
        }
        for store in &self.stores {
            if let Some(engine) = store.engine().as_any().downcast_ref::<PersistEngine>() {
                engine.log.dormant.sweep(now);
            }
        }
    }

    /// Builds the records asleep under `digest` (from every store, oldest
    /// first) and enters them into its head.
    fn wake(self: &Arc<Self>, map: &mut Table, digest: Digest, now: f64) -> Woken {
        let mut built: Vec<(f64, Arc<Object>)> = Vec::new();
        for store in &self.stores {
            let Some(engine) = store.engine().as_any().downcast_ref::<PersistEngine>() else {
                continue;
            };
            for (at, _held) in engine.log.take_asleep(digest) {
                built.extend(self.build(store, &engine.log, at, now));
            }
        }
        built.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut woken = Vec::with_capacity(built.len());
        for (_, obj) in built {
            obj.set_digest(digest);
            let mut head = map.head_for(digest);
            let mut replaced = Vec::new();
            head.retain(|old| {
                let same = old.vary() == obj.vary();
                if same {
                    old.mark_removed();
                    replaced.push(old.clone());
                }
                !same
            });
            head.push_front(obj.clone());
            woken.push((obj, replaced));
        }
        woken
    }

    /// The object of the record at `at` (its segment held), with when it
    /// was inserted; None, and the record cleared, when it is damaged or
    /// its segment is being pushed out.
    fn build(
        &self,
        store: &Arc<Store>,
        log: &Arc<Log>,
        at: u64,
        now: f64,
    ) -> Option<(f64, Arc<Object>)> {
        let Some((obj, record, segments)) = log.build(at, store) else {
            log.damaged.fetch_add(1, Ordering::Relaxed);
            log.clear_record(at);
            return None;
        };
        let t = obj.timers();
        if t.t_origin + t.lifetime() <= now {
            COUNTERS.inc(Counter::n_expired);
            return None;
        }
        let obj = Arc::new(obj);
        if !log.adopt(&obj, &segments) {
            log.clear_record(at);
            COUNTERS.inc(Counter::n_lru_nuked);
            return None;
        }
        obj.set_record(at + STATE_OFFSET);
        self.attach(&obj, record.head.1 + record.body_len, 0);
        obj.set_ban(self.bans.at_time(record.inserted));
        self.restore_renditions(log, &obj, at);
        Some((record.inserted, obj))
    }

    /// Attaches the renditions written of the object whose record is at
    /// `at`: each still in a segment of the number it was written under,
    /// naming the record's segment under the number it has now.
    fn restore_renditions(&self, log: &Log, obj: &Arc<Object>, at: u64) {
        let frames = log
            .renditions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&at);
        let seq = |i: usize| format::short_seq(log.segments[i].seq.load(Ordering::Acquire));
        for frame_at in frames.unwrap_or_default() {
            let seg = log.segment_of(frame_at);
            let end = log.segment_start(seg) + log.segment_len;
            if frame_at + FRAME_HEADER_LEN > end {
                continue;
            }
            let raw = log.space.bytes(frame_at, FRAME_HEADER_LEN);
            let h = FrameHeader::decode(raw);
            if h.tag != format::TAG_RENDITION
                || h.seq != seq(seg)
                || frame_at + FRAME_HEADER_LEN + u64::from(h.len) > end
            {
                continue;
            }
            let payload = log
                .space
                .bytes(frame_at + FRAME_HEADER_LEN, u64::from(h.len));
            if !h.verify(raw, payload, log.secret) {
                continue;
            }
            let Some(f) = format::decode_rendition(payload) else {
                continue;
            };
            let slot = usize::from(f.slot);
            if f.obj_at != at || f.obj_seq != seq(log.segment_of(at)) {
                continue;
            }
            if obj.claim_rendition(slot) != crate::rendition::Claim::Yours {
                continue;
            }
            let r = crate::rendition::Rendition {
                head: Bytes::copy_from_slice(f.head),
                body: Bytes::copy_from_slice(f.body),
            };
            if self.hold_rendition(obj, slot, r, 0).is_none() {
                obj.give_up_rendition(slot, false);
            }
        }
    }
}

impl Log {
    /// Notes that a recovered `obj` has bytes in each of `segments`,
    /// unless one of them is being pushed out: then false, and the
    /// object must not be used.
    pub(super) fn adopt(&self, obj: &Arc<Object>, segments: &[usize]) -> bool {
        for &i in segments {
            let seg = &self.segments[i];
            let mut objects = seg.objects.lock().unwrap_or_else(|e| e.into_inner());
            if seg.evicting.load(Ordering::Relaxed) {
                return false;
            }
            objects.push(Arc::downgrade(obj));
        }
        true
    }

    /// A view of all of segment `i`, which holds it while it lives: the
    /// segment's own, kept for the objects built from it to slice, unless
    /// it is being pushed out.
    pub(super) fn segment_view(self: &Arc<Self>, i: usize) -> bytes::Bytes {
        let seg = &self.segments[i];
        let mut kept = seg.view.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(view) = &*kept {
            return view.clone();
        }
        let start = self.segment_start(i);
        let view = crate::space::view_of(&self.space, start, self.segment_len, Pin::new(self, i));
        if !seg.evicting.load(Ordering::Relaxed) {
            *kept = Some(view.clone());
        }
        view
    }

    /// Reads the record whose frame is at `at` (its segment held) and
    /// builds its object, head and body slicing views of their segments;
    /// with the segments it has bytes in. None when the record or its
    /// body is not what was written.
    fn build(
        self: &Arc<Self>,
        at: u64,
        store: &Arc<Store>,
    ) -> Option<(Object, Record, Vec<usize>)> {
        let seg = self.segment_of(at);
        let raw = self.space.bytes(at, FRAME_HEADER_LEN);
        let h = FrameHeader::decode(raw);
        let seq = |i: usize| format::short_seq(self.segments[i].seq.load(Ordering::Acquire));
        let end = self.segment_start(seg) + self.segment_len;
        if h.tag != format::TAG_OBJECT
            || h.state != LIVE
            || h.seq != seq(seg)
            || at + FRAME_HEADER_LEN + u64::from(h.len) > end
        {
            return None;
        }
        let payload = self.space.bytes(at + FRAME_HEADER_LEN, u64::from(h.len));
        if !h.verify(raw, payload, self.secret) {
            return None;
        }
        let record = format::decode_record(payload, at + FRAME_HEADER_LEN)?;
        if !self.body_holds(&record) {
            return None;
        }
        // The views hold their segments (the record's own is held already):
        // a segment still of the number the record names once held has
        // the bytes just checked, and keeps them.
        let mut segments = vec![seg];
        for &(run_at, _, run_seq) in &record.extents {
            let i = self.segment_of(run_at);
            if run_seq != format::INLINE && !segments.contains(&i) {
                segments.push(i);
            }
        }
        let views: Vec<(usize, Bytes)> = segments
            .iter()
            .map(|&i| (i, self.segment_view(i)))
            .collect();
        let unchanged = record.extents.iter().all(|&(run_at, _, run_seq)| {
            run_seq == format::INLINE || u64::from(seq(self.segment_of(run_at))) == run_seq
        });
        if !unchanged {
            return None;
        }
        let piece = |at: u64, len: u64| {
            let i = self.segment_of(at);
            let (_, view) = views.iter().find(|v| v.0 == i).expect("a view");
            let from = (at - self.segment_start(i)) as usize;
            view.slice(from..from + len as usize)
        };
        let head = piece(record.head.0, record.head.1);
        let chunks = record
            .extents
            .iter()
            .map(|&(at, len, _)| piece(at, len))
            .collect();
        let obj = object_of(&record, head, chunks, store)?;
        Some((obj, record, segments))
    }
}

/// The object a record describes, with its head and body.
fn object_of(r: &Record, head: Bytes, chunks: Vec<Bytes>, store: &Arc<Store>) -> Option<Object> {
    let vary = VarySpec::from_fields(
        r.vary
            .iter()
            .map(|(n, v)| (n.clone(), v.as_ref().map(|b| Bytes::copy_from_slice(b))))
            .collect(),
    );
    let obj = Object::new(ObjectInit {
        xid: r.xid,
        store: Some(store.clone()),
        kind: ObjKind::Normal,
        status: r.status,
        head: head.into(),
        headers: Headers::new(),
        body: Body::complete(chunks),
        vary,
        timers: Timers {
            t_origin: r.t_origin,
            ttl: r.ttl,
            grace: r.grace,
            keep: r.keep,
        },
    });
    if !r.gzip.is_empty() {
        if let Some(attr) = ATTR_CODEC.get().and_then(|c| (c.decode_gzip)(&r.gzip)) {
            obj.set_gzip(attr);
        }
    }
    if let Some(program) = &r.esi {
        obj.expect_esi();
        if !program.is_empty() {
            // An ESI program this build cannot read: delivered plain, the
            // page would show its markup.
            obj.set_esi(ATTR_CODEC.get().and_then(|c| (c.decode_esi)(program))?);
        }
    }
    Some(obj)
}
