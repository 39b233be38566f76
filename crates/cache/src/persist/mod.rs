//! The persistent store (`-s name=persistent,PATH,SIZE`, also spelled
//! `deprecated_persistent`): a cache that is still warm after a restart
//! or a crash.
//!
//! The file is a log of segments (`format.rs`). Bodies are written as
//! they arrive, into the newest segment; once an object is whole and in
//! the index, its record (key, variant, timers, head, where its body is
//! and the body's checksum) follows. When the log has no free segment,
//! the oldest segment's objects are evicted and, once no reader holds
//! its bytes, it is written over: eviction is first in, first out by
//! segment. An object that leaves the cache gets its record's state word
//! cleared, so it stays gone after a restart; bans are written as frames
//! too, and applied again to what is recovered.
//!
//! A restart reads the records, not the bodies, and leaves them asleep
//! in the file (`dormant.rs`: 32 bytes each in memory); an object is
//! built from its record, and its body checked, when its key is first
//! asked for (`restore.rs`).
//!
//! Nothing here blocks on a reader: when every old segment is still
//! being read, a new object stays in memory only (`c_dropped`).

mod dormant;
mod engine;
mod format;
mod recover;
mod restore;

pub use engine::PersistEngine;
pub use recover::Recovery;
pub use restore::Restored;

#[cfg(test)]
mod tests;

use crate::object::{Attr, Object};
use crate::space::{FileSpace, Release};
use format::{FrameHeader, DEAD, FRAME_HEADER_LEN, SEGMENT_HEADER_LEN, SUPERBLOCK_LEN};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// What `-s persistent` asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PersistSpec {
    pub path: PathBuf,
    pub size: u64,
}

/// How the daemon's attributes of an object are written and read back:
/// what splicing needs of a gzip'd body, and an ESI page's program. An
/// object with an attribute the codec cannot write stays in memory only.
#[derive(Debug, Clone, Copy)]
pub struct AttrCodec {
    pub encode_gzip: fn(&Attr) -> Option<Vec<u8>>,
    pub decode_gzip: fn(&[u8]) -> Option<Attr>,
    pub encode_esi: fn(&Attr) -> Option<Vec<u8>>,
    pub decode_esi: fn(&[u8]) -> Option<Attr>,
}

/// The codec the daemon gives before it opens its stores.
pub static ATTR_CODEC: OnceLock<AttrCodec> = OnceLock::new();

/// Bodies of at most this many bytes, announced, are written inside their
/// object's record rather than in frames of their own.
const INLINE_MAX: u64 = 2048;

/// A record's state word is being cleared (see [`Log::tombstone`]).
const CLEARING: u64 = u64::MAX - 1;

/// One segment of the log.
#[derive(Debug, Default)]
struct Segment {
    /// Its sequence number (0: never written).
    seq: AtomicU64,
    /// Rooms and views of its bytes alive now.
    pins: AtomicUsize,
    /// Objects with bytes in it.
    objects: Mutex<Vec<Weak<Object>>>,
    /// Bans written in it.
    bans: Mutex<Vec<(f64, String)>>,
    /// The oldest insertion time of a record in it.
    oldest: Mutex<f64>,
    /// Its objects were told to go (set under `objects`' lock).
    evicting: AtomicBool,
    /// A view of all of it that the objects built from its records
    /// slice, made when first needed and let go when it is evicted.
    view: Mutex<Option<bytes::Bytes>>,
}

/// Where the log writes next.
#[derive(Debug)]
struct Head {
    current: Option<usize>,
    /// The next frame's offset in the file, and the current segment's end.
    at: u64,
    end: u64,
    next_seq: u64,
    /// Segments written, oldest first (the current one apart).
    order: VecDeque<usize>,
    free: Vec<usize>,
}

/// The log: the file and its segments.
#[derive(Debug)]
pub(crate) struct Log {
    space: Arc<FileSpace>,
    path: PathBuf,
    secret: u64,
    segment_len: u64,
    segments: Box<[Segment]>,
    head: Mutex<Head>,
    /// Objects whole but not yet in the index, with where their body
    /// went; and objects in the index whose body is still coming, with
    /// their key. The record is written when both halves are known.
    pending: Mutex<Vec<Pending>>,
    written: AtomicU64,
    /// What `written` was when the last completed sync began.
    synced: AtomicU64,
    /// The most bytes written ahead of the last sync.
    unsynced_max: AtomicU64,
    syncing: AtomicBool,
    objects_written: AtomicU64,
    /// The heads (as text) and bodies of the objects written, without
    /// the records' framing: what write amplification is measured
    /// against.
    content_written: AtomicU64,
    dropped: AtomicU64,
    recovered: AtomicU64,
    damaged: AtomicU64,
    reused: AtomicU64,
    /// Records a restart left asleep in the file.
    dormant: dormant::Dormant,
    /// The rendition frames a restart found, by the object frame each
    /// names: attached when the object is built.
    renditions: Mutex<std::collections::HashMap<u64, Vec<u64>>>,
}

/// An object of which one half of what its record needs is known.
type Pending = (Weak<Object>, Half);

/// What is known first of what a record needs.
#[derive(Debug)]
enum Half {
    /// The body is whole, and went there.
    Body(Vec<(u64, u64)>),
    /// The object is in the index under this key.
    Key(Arc<[u8]>),
    /// The body stayed on the heap: there will be no record.
    Unwritten,
}

/// Takes `obj`'s entry off the pending list.
fn take_pending(pending: &mut Vec<Pending>, obj: &Arc<Object>) -> Option<Half> {
    let i = pending
        .iter()
        .position(|(w, _)| std::ptr::eq(w.as_ptr(), Arc::as_ptr(obj)))?;
    Some(pending.swap_remove(i).1)
}

/// Puts `obj`'s first half on the pending list, letting go of entries
/// whose object is gone (a body that failed after its insert).
fn put_pending(pending: &mut Vec<Pending>, obj: &Arc<Object>, half: Half) {
    pending.retain(|(w, _)| w.strong_count() > 0);
    pending.push((Arc::downgrade(obj), half));
}

/// What reserving room in the log came to.
enum Reserve {
    /// A frame at this offset, in this segment.
    At(u64, usize),
    /// The oldest segment's objects were pushed out; ask again.
    Evicting,
    /// Every old segment is still being read.
    Busy,
}

impl Log {
    fn lock_head(&self) -> std::sync::MutexGuard<'_, Head> {
        self.head.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn segment_of(&self, at: u64) -> usize {
        ((at - SUPERBLOCK_LEN) / self.segment_len) as usize
    }

    fn segment_start(&self, i: usize) -> u64 {
        SUPERBLOCK_LEN + i as u64 * self.segment_len
    }

    /// The most payload one frame holds.
    fn capacity(&self) -> u64 {
        self.segment_len - SEGMENT_HEADER_LEN - FRAME_HEADER_LEN
    }

    /// Sets aside a frame of `min..=max` payload bytes (as many as the
    /// current segment has, at least `min`) and writes `header` for it
    /// (given the payload length, the frame's offset and the sequence
    /// number) while the frame is still the log's newest, so that the
    /// walk through the segment never meets a hole.
    ///
    /// With `past_limit`, even when writing is more than
    /// `persistent_unsynced_max` ahead of the disk (the rest of a body
    /// already begun, and its record: the limit turns new objects away,
    /// it does not cut one in two).
    fn reserve(
        &self,
        past_limit: bool,
        min: u64,
        max: u64,
        evicted: &mut Vec<Arc<Object>>,
        header: &mut dyn FnMut(u64, u64, u64) -> Vec<u8>,
    ) -> (Reserve, u64) {
        let ahead = self.written.load(Ordering::Relaxed) - self.synced.load(Ordering::Relaxed);
        if !past_limit && ahead > self.unsynced_max.load(Ordering::Relaxed) {
            // The disk is behind: nothing new until it catches up.
            return (Reserve::Busy, 0);
        }
        let mut head = self.lock_head();
        loop {
            if let Some(cur) = head.current {
                let room = head.end.saturating_sub(head.at + FRAME_HEADER_LEN);
                if room >= format::align(min) {
                    let len = max.min(room);
                    let at = head.at;
                    let seq = self.segments[cur].seq.load(Ordering::Relaxed);
                    let bytes = header(len, at, seq);
                    if self.space.write_at(&bytes, at).is_err() {
                        return (Reserve::Busy, 0);
                    }
                    head.at += FRAME_HEADER_LEN + format::align(len);
                    self.written
                        .fetch_add(FRAME_HEADER_LEN + format::align(len), Ordering::Relaxed);
                    return (Reserve::At(at, cur), len);
                }
                head.current = None;
                head.order.push_back(cur);
            }
            let next = match head.free.pop() {
                Some(i) => i,
                None => match self.reusable(&mut head, evicted) {
                    Ok(i) => i,
                    Err(r) => return (r, 0),
                },
            };
            self.open(&mut head, next);
        }
    }

    /// The oldest segment nothing holds any more, taken off the list; or
    /// the oldest one's objects pushed out.
    fn reusable(&self, head: &mut Head, evicted: &mut Vec<Arc<Object>>) -> Result<usize, Reserve> {
        let ready = head.order.iter().position(|&i| self.is_unheld(i));
        if let Some(pos) = ready {
            self.reused.fetch_add(1, Ordering::Relaxed);
            return Ok(head.order.remove(pos).expect("found"));
        }
        let Some(&oldest) = head
            .order
            .iter()
            .find(|&&i| !self.segments[i].evicting.load(Ordering::Relaxed))
        else {
            return Err(Reserve::Busy);
        };
        let seg = &self.segments[oldest];
        {
            let objects = seg.objects.lock().unwrap_or_else(|e| e.into_inner());
            seg.evicting.store(true, Ordering::Relaxed);
            evicted.extend(objects.iter().filter_map(Weak::upgrade));
        }
        self.evict_asleep(oldest);
        drop(seg.view.lock().unwrap_or_else(|e| e.into_inner()).take());
        Err(Reserve::Evicting)
    }

    /// Whether a segment can be written over: no view of its bytes, and
    /// every object with a record in it gone with its record cleared.
    fn is_unheld(&self, i: usize) -> bool {
        let seg = &self.segments[i];
        if seg.pins.load(Ordering::Acquire) != 0 {
            return false;
        }
        let objects = seg.objects.lock().unwrap_or_else(|e| e.into_inner());
        objects.iter().all(|w| match w.upgrade() {
            None => true,
            Some(o) => o.is_removed() && o.record() == u64::MAX,
        })
    }

    /// Starts writing segment `i` under the next sequence number, and
    /// writes again the bans it held that may still apply to an object
    /// elsewhere.
    fn open(&self, head: &mut Head, i: usize) {
        let seq = head.next_seq;
        head.next_seq += 1;
        let seg = &self.segments[i];
        let old_bans = std::mem::take(&mut *seg.bans.lock().unwrap_or_else(|e| e.into_inner()));
        seg.objects
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        *seg.oldest.lock().unwrap_or_else(|e| e.into_inner()) = f64::INFINITY;
        seg.evicting.store(false, Ordering::Relaxed);
        seg.seq.store(seq, Ordering::Release);
        let start = self.segment_start(i);
        let _ = self
            .space
            .write_at(&format::segment_header(seq, self.secret), start);
        head.current = Some(i);
        head.at = start + SEGMENT_HEADER_LEN;
        head.end = start + self.segment_len;
        let oldest_object = head
            .order
            .iter()
            .map(|&j| {
                *self.segments[j]
                    .oldest
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
            })
            .fold(f64::INFINITY, f64::min);
        for (time, text) in old_bans {
            if time > oldest_object {
                self.write_ban_locked(head, time, &text);
            }
        }
    }

    /// Writes a ban frame into the current segment (the head is held).
    fn write_ban_locked(&self, head: &mut Head, time: f64, text: &str) {
        let payload = format::encode_ban(time, text);
        let len = payload.len() as u64;
        let Some(cur) = head.current else { return };
        if head.at + FRAME_HEADER_LEN + format::align(len) > head.end {
            return;
        }
        let seq = self.segments[cur].seq.load(Ordering::Relaxed);
        let frame = format::sealed_frame(format::TAG_BAN, seq, &payload, self.secret);
        if self.space.write_at(&frame, head.at).is_ok() {
            head.at += FRAME_HEADER_LEN + format::align(len);
            self.segments[cur]
                .bans
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((time, text.to_string()));
        }
    }

    /// Notes that `obj` has bytes in segment `i`.
    fn register(&self, i: usize, obj: &Arc<Object>) {
        let mut objects = self.segments[i]
            .objects
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if objects
            .last()
            .is_none_or(|w| !std::ptr::eq(w.as_ptr(), Arc::as_ptr(obj)))
        {
            objects.push(Arc::downgrade(obj));
        }
    }

    /// Clears an object's record state word: it is gone for good. The
    /// record stays marked while the word is written, so that its segment
    /// is not written over meanwhile.
    fn tombstone(&self, obj: &Object) {
        let at = obj.swap_record(CLEARING);
        if at < CLEARING {
            let _ = self.space.write_at(&DEAD.to_le_bytes(), at);
        }
        if at != CLEARING {
            obj.set_record(u64::MAX);
        }
    }

    /// Reserves a frame of exactly `len` bytes for a record, evicting the
    /// oldest segment's objects (through `remove`) as often as it takes.
    fn reserve_record(
        &self,
        past_limit: bool,
        len: u64,
        remove: &dyn Fn(&Arc<Object>),
        header: &mut dyn FnMut(u64, u64, u64) -> Vec<u8>,
    ) -> Option<(u64, usize)> {
        for _ in 0..8 {
            let mut evicted = Vec::new();
            match self.reserve(past_limit, len, len, &mut evicted, header).0 {
                Reserve::At(at, seg) => return Some((at, seg)),
                Reserve::Evicting => evicted.iter().for_each(remove),
                Reserve::Busy => break,
            }
        }
        // An object that finds the log full of readers stays in memory
        // only.
        self.dropped.fetch_add(1, Ordering::Relaxed);
        None
    }

    /// Writes an object's new timers into its record (a soft purge), and
    /// the record's checksum again. A kill between the two writes loses
    /// the object at the next start (its checksum fails), never more.
    fn retime(&self, obj: &Object) {
        let state_at = obj.record();
        if state_at >= CLEARING {
            return;
        }
        let frame_at = state_at - format::STATE_OFFSET;
        // One at a time; the segment is not reused while the record is.
        let _head = self.lock_head();
        let raw = self.space.bytes(frame_at, FRAME_HEADER_LEN).to_vec();
        let h = FrameHeader::decode(&raw);
        let payload_at = frame_at + FRAME_HEADER_LEN;
        let mut payload = self.space.bytes(payload_at, u64::from(h.len)).to_vec();
        if h.tag != format::TAG_OBJECT || !h.verify(&raw, &payload, self.secret) {
            return;
        }
        let t = obj.timers();
        if format::retime(&mut payload, t.t_origin, t.ttl, t.grace, t.keep).is_none() {
            return;
        }
        let sum = format::checksum(self.secret, &[&raw[..9], &payload]);
        let _ = self
            .space
            .write_at(&payload[..format::TIMERS_END], payload_at)
            .and_then(|_| self.space.write_at(&sum.to_le_bytes(), frame_at + 12));
    }

    /// Writes a rendition of an object that has a record, after it (the
    /// objects of a segment reused for room go through `remove`). Its
    /// bytes stay in memory as well: a segment reused later only loses
    /// it for the next start.
    fn write_rendition(
        &self,
        obj: &Object,
        slot: usize,
        head: &[u8],
        body: &[u8],
        remove: &dyn Fn(&Arc<Object>),
    ) {
        let state_at = obj.record();
        if !(format::STATE_OFFSET..CLEARING).contains(&state_at) {
            return;
        }
        let obj_at = state_at - format::STATE_OFFSET;
        let obj_seq = format::short_seq(
            self.segments[self.segment_of(obj_at)]
                .seq
                .load(Ordering::Acquire),
        );
        let payload = format::encode_rendition(obj_at, obj_seq, slot as u8, head, body);
        let len = payload.len() as u64;
        if len > self.capacity() {
            return;
        }
        let secret = self.secret;
        let mut frame_of = |_: u64, _: u64, seq: u64| {
            format::sealed_frame(format::TAG_RENDITION, seq, &payload, secret)
        };
        for _ in 0..8 {
            let mut evicted = Vec::new();
            match self.reserve(false, len, len, &mut evicted, &mut frame_of).0 {
                Reserve::At(..) => {
                    self.content_written.fetch_add(len, Ordering::Relaxed);
                    return;
                }
                Reserve::Evicting => evicted.iter().for_each(remove),
                Reserve::Busy => return,
            }
        }
    }

    /// Writes the record of an object that is whole and in the index.
    fn write_record(
        &self,
        obj: &Arc<Object>,
        key: &[u8],
        placed: &[(u64, u64)],
        now: f64,
        remove: &dyn Fn(&Arc<Object>),
    ) {
        if obj.is_removed() {
            return;
        }
        // What the record's short fields cannot hold stays in memory only.
        let too_long = key.len() > usize::from(u16::MAX)
            || placed.len() > usize::from(u16::MAX)
            || obj
                .vary()
                .is_some_and(|v| v.fields().len() > usize::from(u16::MAX));
        if too_long {
            return;
        }
        let esi = match (obj.esi_expected(), obj.esi_attr()) {
            (false, _) => None,
            (true, None) => Some(Vec::new()),
            (true, Some(attr)) => match ATTR_CODEC.get().and_then(|c| (c.encode_esi)(attr)) {
                Some(program) => Some(program),
                None => return,
            },
        };
        let gzip = match obj.gzip_attr() {
            None => Vec::new(),
            Some(attr) => match ATTR_CODEC.get().and_then(|c| (c.encode_gzip)(attr)) {
                Some(g) => g,
                None => return,
            },
        };
        let Some(whole) = obj.body().whole() else {
            return;
        };
        let mut sum = crc32fast::Hasher::new();
        let mut body_len = 0;
        for c in whole.pieces() {
            sum.update(c);
            body_len += c.len() as u64;
        }
        let placed_len: u64 = placed.iter().map(|(_, l)| l).sum();
        let inline = placed.is_empty() && body_len > 0 && body_len <= INLINE_MAX;
        if placed_len != body_len && !inline {
            return;
        }
        let inline_body = inline.then(|| whole.to_vec());
        let extents = if inline {
            vec![(0, body_len, 0)]
        } else {
            placed
                .iter()
                .map(|&(at, len)| {
                    let seq = self.segments[self.segment_of(at)]
                        .seq
                        .load(Ordering::Acquire);
                    (at, len, u64::from(format::short_seq(seq)))
                })
                .collect()
        };
        let t = obj.timers();
        let record = format::Record {
            inserted: now,
            xid: obj.xid(),
            status: obj.status(),
            t_origin: t.t_origin,
            ttl: t.ttl,
            grace: t.grace,
            keep: t.keep,
            key: Arc::from(key),
            vary: obj
                .vary()
                .map(|v| {
                    v.fields()
                        .iter()
                        .map(|(n, v)| (n.clone(), v.as_ref().map(|b| b.to_vec())))
                        .collect()
                })
                .unwrap_or_default(),
            head: (0, 0),
            gzip,
            esi,
            body_len,
            body_sum: sum.finalize(),
            extents,
        };
        let head = obj.head_bytes();
        let stored = head.len() as u64 + body_len;
        let (payload, _) = format::encode_record(&record, &head, inline_body.as_deref());
        let len = payload.len() as u64;
        if len > self.capacity() {
            return;
        }
        let secret = self.secret;
        let mut frame_of = |_: u64, _: u64, seq: u64| {
            format::sealed_frame(format::TAG_OBJECT, seq, &payload, secret)
        };
        // The record of a body already in the log is written even past
        // `persistent_unsynced_max`: the body's bytes would be lost
        // without it.
        let past_limit = !placed.is_empty();
        let Some((at, seg)) = self.reserve_record(past_limit, len, remove, &mut frame_of) else {
            return;
        };
        self.register(seg, obj);
        {
            let mut oldest = self.segments[seg]
                .oldest
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            *oldest = oldest.min(now);
        }
        obj.set_record(at + format::STATE_OFFSET);
        self.objects_written.fetch_add(1, Ordering::Relaxed);
        self.content_written.fetch_add(stored, Ordering::Relaxed);
        if obj.is_removed() {
            self.tombstone(obj);
        }
    }
}

impl Release for Log {
    fn release(&self, at: u64, _len: u64) {
        self.segments[self.segment_of(at)]
            .pins
            .fetch_sub(1, Ordering::AcqRel);
    }
}
