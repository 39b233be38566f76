//! The persistent store as the cache sees it ([`PersistEngine`]): where
//! a new object's body goes, what a commit, a removal, a new rendition,
//! a changed TTL or a ban writes to the log, and how full it is.

use super::format::{self, FrameHeader, FRAME_HEADER_LEN};
use super::{put_pending, take_pending, Half, Log, Reserve, INLINE_MAX};
use crate::object::Object;
use crate::space::Room;
use crate::store::{Engine, Placement};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The engine of one persistent store.
#[derive(Debug)]
pub struct PersistEngine {
    pub(super) log: Arc<Log>,
}

impl PersistEngine {
    /// The store's file.
    pub fn path(&self) -> &std::path::Path {
        &self.log.path
    }

    /// Has the disk confirm what was written (now and then, so that a
    /// power cut loses little and writing never runs far ahead of the
    /// disk). One sync at a time: a call during another returns at once.
    pub fn sync(&self) {
        let log = &self.log;
        if log.syncing.swap(true, Ordering::AcqRel) {
            return;
        }
        let upto = log.written.load(Ordering::Acquire);
        if log.space.sync().is_ok() {
            log.synced.fetch_max(upto, Ordering::AcqRel);
        }
        log.syncing.store(false, Ordering::Release);
    }

    /// Sets `persistent_unsynced_max`.
    pub fn set_unsynced_max(&self, bytes: u64) {
        self.log.unsynced_max.store(bytes, Ordering::Relaxed);
    }

    /// Whether more than half of `persistent_unsynced_max` waits for the
    /// disk (time for a sync before the next regular one).
    pub fn wants_sync(&self) -> bool {
        let log = &self.log;
        let ahead = log.written.load(Ordering::Relaxed) - log.synced.load(Ordering::Relaxed);
        ahead > log.unsynced_max.load(Ordering::Relaxed) / 2
    }

    /// Segments in use now.
    fn segments_in_use(&self) -> u64 {
        let head = self.log.lock_head();
        head.order.len() as u64 + u64::from(head.current.is_some())
    }
}

impl Engine for PersistEngine {
    fn keeps_on_heap(&self, len: u64) -> bool {
        len <= INLINE_MAX
    }

    fn kind(&self) -> &'static str {
        "persistent"
    }

    fn section(&self) -> &'static str {
        "SMP"
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn allocate(
        &self,
        need: u64,
        hint: u64,
        started: bool,
        obj: &Arc<Object>,
        evicted: &mut Vec<Arc<Object>>,
    ) -> Placement {
        let log = &self.log;
        if obj
            .body()
            .known_len()
            .is_some_and(|len| self.keeps_on_heap(len))
        {
            // Written inline in the record once whole: no frame of its own.
            return Placement::Heap;
        }
        let max = hint.max(need).min(log.capacity()).min(u32::MAX as u64);
        let min = need.clamp(1, 4096).min(max);
        let secret = log.secret;
        let mut header =
            |len: u64, _: u64, seq: u64| FrameHeader::body(seq, len as u32, secret).to_vec();
        match log.reserve(started, min, max, evicted, &mut header) {
            (Reserve::At(at, seg), len) => {
                log.segments[seg].pins.fetch_add(1, Ordering::AcqRel);
                log.register(seg, obj);
                Placement::Room(Room::new(
                    log.space.clone(),
                    at + FRAME_HEADER_LEN,
                    len,
                    log.clone(),
                ))
            }
            (Reserve::Evicting, _) => Placement::Full,
            (Reserve::Busy, _) => Placement::Heap,
        }
    }

    fn trim(&self, room: Room) {
        let log = &self.log;
        let start = room.at();
        let written = room.written();
        let mut head = log.lock_head();
        let seg = log.segment_of(start);
        let end = start + format::align(written + room.remaining());
        if head.current == Some(seg) && head.at == end {
            // The newest frame: shorten it to what was written.
            let seq = log.segments[seg].seq.load(Ordering::Relaxed);
            let header = FrameHeader::body(seq, written as u32, log.secret);
            if log
                .space
                .write_at(&header, start - FRAME_HEADER_LEN)
                .is_ok()
            {
                head.at = start + format::align(written);
                log.written.fetch_sub(end - head.at, Ordering::Relaxed);
            }
        }
        drop(head);
        room.trim(|_, _| {});
    }

    fn commit(
        &self,
        obj: &Arc<Object>,
        placed: &[(u64, u64)],
        heap: bool,
        remove: &dyn Fn(&Arc<Object>),
    ) {
        if obj.kind() != crate::object::ObjKind::Normal {
            return;
        }
        let inline = heap
            && placed.is_empty()
            && obj.body().known_len().is_some_and(|len| len <= INLINE_MAX);
        let log = &self.log;
        let mut pending = log.pending.lock().unwrap_or_else(|e| e.into_inner());
        if heap && !inline {
            log.dropped.fetch_add(1, Ordering::Relaxed);
            if take_pending(&mut pending, obj).is_none() {
                put_pending(&mut pending, obj, Half::Unwritten);
            }
            return;
        }
        let key = match take_pending(&mut pending, obj) {
            Some(Half::Key(key)) => key,
            _ => return put_pending(&mut pending, obj, Half::Body(placed.to_vec())),
        };
        drop(pending);
        log.write_record(obj, &key, placed, lacquer_core::time::now(), remove);
    }

    fn inserted(&self, obj: &Arc<Object>, key: &[u8], remove: &dyn Fn(&Arc<Object>)) {
        // A recovered object has its record already.
        if obj.kind() != crate::object::ObjKind::Normal || obj.record() != u64::MAX {
            return;
        }
        let log = &self.log;
        let placed = {
            let mut pending = log.pending.lock().unwrap_or_else(|e| e.into_inner());
            match take_pending(&mut pending, obj) {
                Some(Half::Body(placed)) => placed,
                Some(Half::Unwritten) => return,
                _ => return put_pending(&mut pending, obj, Half::Key(Arc::from(key))),
            }
        };
        log.write_record(obj, key, &placed, lacquer_core::time::now(), remove);
    }

    fn forget(&self, obj: &Object) {
        self.log.tombstone(obj);
    }

    fn rendition_kept(
        &self,
        obj: &Arc<Object>,
        slot: usize,
        head: &[u8],
        body: &[u8],
        remove: &dyn Fn(&Arc<Object>),
    ) {
        self.log.write_rendition(obj, slot, head, body, remove);
    }

    fn retimed(&self, obj: &Object) {
        self.log.retime(obj);
    }

    fn ban_added(&self, time: f64, text: &str, remove: &dyn Fn(&Arc<Object>)) {
        let log = &self.log;
        let payload = format::encode_ban(time, text);
        let secret = log.secret;
        let mut frame_of =
            |_: u64, _: u64, seq: u64| format::sealed_frame(format::TAG_BAN, seq, &payload, secret);
        if let Some((_, seg)) =
            log.reserve_record(true, payload.len() as u64, remove, &mut frame_of)
        {
            log.segments[seg]
                .bans
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((time, text.to_string()));
        }
    }

    fn space(&self) -> Option<(u64, u64)> {
        let total = self.log.segments.len() as u64;
        let used = self.segments_in_use();
        Some((
            used * self.log.segment_len,
            (total - used) * self.log.segment_len,
        ))
    }

    fn extra_counters(&self, out: &mut Vec<u64>) {
        let l = &self.log;
        out.push(self.segments_in_use());
        for c in [
            &l.written,
            &l.objects_written,
            &l.content_written,
            &l.dropped,
            &l.recovered,
            &l.damaged,
            &l.reused,
        ] {
            out.push(c.load(Ordering::Relaxed));
        }
        out.push(l.dormant.len());
    }
}
