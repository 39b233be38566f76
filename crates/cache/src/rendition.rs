//! Renditions: an object's body in another content coding (br, zstd),
//! made once, off the request path, by whoever first asks, and kept
//! beside the object: charged to its store, gone when it goes (evicted,
//! purged, banned, replaced). Each coding has a slot whose state says
//! whether the rendition is there, being made, or not worth making, so
//! that however many clients ask at once, one makes it.

pub use crate::object::slots::{Rendition, SLOTS};
use crate::object::slots::{DECLINED, IDLE, MAKING, READY};
use crate::object::Object;
use crate::Cache;
use lacquer_core::counters::{Counter, COUNTERS};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// What a request finds in an object's slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// It is there: deliver it.
    Ready,
    /// The caller is to make it (and then [`Cache::keep_rendition`] or
    /// [`Object::give_up_rendition`]).
    Yours,
    /// Someone is making it, or it is not to be made.
    No,
}

impl Object {
    /// The rendition in `slot`, once made.
    #[inline]
    pub fn rendition(&self, slot: usize) -> Option<&Rendition> {
        self.extra_if_made()?.renditions.get(slot)?.made.get()
    }

    /// Whether the slot has nothing in it and nobody making it (or the
    /// object has no slots yet): read without making any.
    pub fn rendition_idle(&self, slot: usize) -> bool {
        match self.extra_if_made() {
            None => true,
            Some(e) => e
                .renditions
                .get(slot)
                .is_some_and(|s| s.state.load(Ordering::Acquire) == IDLE),
        }
    }

    /// Whether the rendition in `slot` is there, or the caller is to make
    /// it: the first to ask of an idle slot is (once).
    pub fn claim_rendition(&self, slot: usize) -> Claim {
        if self.rendition(slot).is_some() {
            return Claim::Ready;
        }
        if slot >= SLOTS || self.is_removed() || self.no_rendition() {
            return Claim::No;
        }
        let state = &self.extra().renditions[slot].state;
        // Read first: a slot that is busy or declined is not written to.
        if state.load(Ordering::Acquire) != IDLE {
            return Claim::No;
        }
        match state.compare_exchange(IDLE, MAKING, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => Claim::Yours,
            Err(READY) => Claim::Ready,
            Err(_) => Claim::No,
        }
    }

    /// The caller of a [`Claim::Yours`] did not make the rendition:
    /// `for_good` says it is not to be tried again (the body does not
    /// suit); else a later request may ask again.
    pub fn give_up_rendition(&self, slot: usize, for_good: bool) {
        if let Some(s) = self.extra_if_made().and_then(|e| e.renditions.get(slot)) {
            let to = if for_good { DECLINED } else { IDLE };
            let _ = s
                .state
                .compare_exchange(MAKING, to, Ordering::AcqRel, Ordering::Acquire);
        }
    }
}

impl Cache {
    /// Keeps a rendition the caller made of `obj` (after a
    /// [`Claim::Yours`]), charging its bytes to the object's store,
    /// evicting up to `nuke_limit` objects for room. False (and the slot
    /// declined) when there is no room or the object left the cache.
    pub fn keep_rendition(
        &self,
        obj: &Arc<Object>,
        slot: usize,
        r: Rendition,
        nuke_limit: u64,
    ) -> bool {
        let Some(r) = self.hold_rendition(obj, slot, r, nuke_limit) else {
            return false;
        };
        if let Some(store) = obj.store() {
            let remove = |victim: &Arc<Object>| self.remove(victim, crate::Removal::Nuked);
            store
                .engine()
                .rendition_kept(obj, slot, &r.head, &r.body, &remove);
        }
        true
    }

    /// [`Cache::keep_rendition`] without telling the store's engine (a
    /// rendition it restored).
    pub(crate) fn hold_rendition<'o>(
        &self,
        obj: &'o Arc<Object>,
        slot: usize,
        r: Rendition,
        nuke_limit: u64,
    ) -> Option<&'o Rendition> {
        let cost = (r.head.len() + r.body.len()) as u64;
        COUNTERS.inc(Counter::g_renditions);
        let kept = !obj.is_removed() && self.grow(obj, cost, nuke_limit);
        let s = &obj.extra().renditions[slot];
        if kept && s.made.set(r).is_ok() {
            s.state.store(READY, Ordering::Release);
            return s.made.get();
        }
        s.state.store(DECLINED, Ordering::Release);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{cache, stored_obj};
    use bytes::Bytes;

    fn rendition(len: usize) -> Rendition {
        Rendition {
            head: Bytes::from_static(b"HTTP/1.1 200 OK\r\nContent-Encoding: br\r\n"),
            body: Bytes::from(vec![7u8; len]),
        }
    }

    #[test]
    fn one_asker_makes_it_and_the_store_is_charged() {
        let c = cache(1 << 20);
        let obj = stored_obj(&c, 60.0, 0.0, 1000.0);
        assert!(c.attach(&obj, 100, 0));
        let store = obj.store().unwrap().clone();
        let before = store.used();
        assert_eq!(obj.claim_rendition(0), Claim::Yours);
        assert_eq!(obj.claim_rendition(0), Claim::No, "being made");
        assert!(!obj.rendition_idle(0));
        assert_eq!(obj.claim_rendition(1), Claim::Yours, "each coding its own");
        assert!(c.keep_rendition(&obj, 0, rendition(1000), 0));
        assert_eq!(obj.claim_rendition(0), Claim::Ready);
        assert_eq!(obj.rendition(0).unwrap().body.len(), 1000);
        let head_len = obj.rendition(0).unwrap().head.len() as u64;
        assert_eq!(store.used(), before + 1000 + head_len);
        // Given back: a later request may ask again; declined: never.
        obj.give_up_rendition(1, false);
        assert_eq!(obj.claim_rendition(1), Claim::Yours);
        obj.give_up_rendition(1, true);
        assert_eq!(obj.claim_rendition(1), Claim::No);
        // The object's drop gives the rendition's bytes back too.
        drop(obj);
        assert_eq!(store.used(), 0);
    }

    #[test]
    fn no_room_or_a_removed_object_keeps_nothing() {
        let c = cache(4096);
        let obj = stored_obj(&c, 60.0, 0.0, 1000.0);
        assert!(c.attach(&obj, 100, 0));
        assert_eq!(obj.claim_rendition(0), Claim::Yours);
        assert!(!c.keep_rendition(&obj, 0, rendition(10_000), 0));
        assert!(obj.rendition(0).is_none());
        assert_eq!(obj.claim_rendition(0), Claim::No, "declined");
        let other = stored_obj(&c, 60.0, 0.0, 1000.0);
        assert!(c.attach(&other, 100, 0));
        c.remove(&other, crate::Removal::Purged);
        assert_eq!(other.claim_rendition(0), Claim::No);
        let fresh = stored_obj(&c, 60.0, 0.0, 1000.0);
        assert!(fresh.rendition_idle(1));
        assert!(
            !fresh.has_extra(),
            "asking whether it is idle makes no slot"
        );
        fresh.set_no_rendition();
        assert_eq!(fresh.claim_rendition(1), Claim::No, "found not to suit");
    }
}
