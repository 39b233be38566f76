//! The expiry queues: objects by the second their lifetime ends, in
//! binary heaps whose entries know their place (`heap.rs`: each object
//! keeps its index in its heap, as Varnish's objcores do), so that taking
//! one out is O(log n) without a search. An entry's time is rounded up to the
//! second (32 bits last past 2100); the queues are read once a second, so
//! an object leaves at most about two seconds after its lifetime ends;
//! lookups test the exact time and never serve it past its end.
//!
//! An object of a store with eviction lists is queued in those lists'
//! heap (`lru.rs`), by the number of its node there, which holds the
//! object already: 8 bytes an entry. The rest (Transient, a persistent
//! store, objects of no store) are queued here by the object itself: 12
//! bytes an entry.

use crate::heap::{Heap, Places, NOT_QUEUED};
use crate::object::Object;
use crate::{Cache, Removal};
use lacquer_core::counters::{Counter, COUNTERS};
use std::sync::Arc;

/// An object queued by itself: it keeps its place.
struct ByObject;

impl Places<Arc<Object>> for ByObject {
    fn place(&self, obj: &Arc<Object>, at: u32) {
        obj.set_expiry_slot(at);
    }
}

/// The cache's own queue, of objects not in eviction lists.
#[derive(Debug, Default)]
pub(crate) struct Expiry {
    heap: Heap<Arc<Object>>,
}

impl Expiry {
    /// Queues an object due at `at` (milliseconds of the epoch). An
    /// object already queued moves to its new time.
    pub fn insert(&mut self, at: u64, obj: &Arc<Object>) {
        self.remove(obj);
        // Past four billion queued, an object lives until evicted.
        self.heap.push(at, obj.clone(), &ByObject);
    }

    /// Takes an object out of the queue; false when it was not in it.
    pub fn remove(&mut self, obj: &Object) -> bool {
        let i = obj.expiry_slot();
        if i == NOT_QUEUED {
            return false;
        }
        let i = i as usize;
        if !self
            .heap
            .get(i)
            .is_some_and(|o| std::ptr::eq(Arc::as_ptr(o), obj))
        {
            return false;
        }
        self.heap.take(i, &ByObject);
        true
    }

    /// The next object due by `now` (milliseconds), out of the queue.
    pub fn pop_due(&mut self, now: u64) -> Option<Arc<Object>> {
        self.heap.due(now).then(|| self.heap.take(0, &ByObject))
    }

    /// Objects queued.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.heap.len()
    }
}

impl Cache {
    /// Removes every object whose lifetime has ended; returns how many.
    pub fn expire(&self, now: f64) -> usize {
        self.sweep_asleep(now);
        let now_ms = (now * 1000.0) as u64;
        let mut due = Vec::new();
        {
            let mut exp = self.expiry.lock().unwrap_or_else(|e| e.into_inner());
            while let Some(obj) = exp.pop_due(now_ms) {
                due.push(obj);
            }
        }
        for store in &self.stores {
            store.expiry_pop_due(now_ms, &mut due);
        }
        let mut n = 0;
        for obj in due {
            if obj.expires_at() <= now {
                self.remove(&obj, Removal::Expired);
                n += 1;
            } else if !obj.is_removed() {
                self.schedule(&obj);
            }
        }
        n
    }

    /// Queues an object for the end of its lifetime (again, when it is
    /// queued already): in its store's eviction lists when it is on
    /// them, else in the cache's own queue.
    pub(crate) fn schedule(&self, obj: &Arc<Object>) {
        let at = obj.expires_at();
        let at_ms = if at.is_finite() {
            (at.max(0.0) * 1000.0).min(u64::MAX as f64 / 2.0) as u64
        } else {
            u64::MAX / 2
        };
        COUNTERS.inc(Counter::exp_mailed);
        COUNTERS.inc(Counter::exp_received);
        if obj.store().is_some_and(|s| s.expiry_insert(obj, at_ms)) {
            return;
        }
        let mut exp = self.expiry.lock().unwrap_or_else(|e| e.into_inner());
        // Removed meanwhile: its removal found no entry, and none is made.
        if !obj.is_removed() {
            exp.insert(at_ms, obj);
        }
    }

    /// Takes an object out of whichever expiry queue holds it.
    pub(crate) fn unschedule(&self, obj: &Object) {
        if obj.store().is_some_and(|s| s.expiry_remove(obj)) {
            return;
        }
        let mut exp = self.expiry.lock().unwrap_or_else(|e| e.into_inner());
        exp.remove(obj);
    }

    /// Objects queued for expiry, in every queue (for tests).
    #[cfg(test)]
    pub(crate) fn queued(&self) -> usize {
        let own = self.expiry.lock().unwrap().len();
        own + self.stores.iter().map(|s| s.expiry_len()).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn objects(n: usize) -> Vec<Arc<Object>> {
        (0..n)
            .map(|_| Arc::new(crate::tests::plain_object()))
            .collect()
    }

    #[test]
    fn objects_come_out_in_time_order_and_leave_from_anywhere() {
        let objs = objects(200);
        let mut q = Expiry::default();
        // Times in a scrambled order, some equal (whole seconds, in
        // milliseconds).
        let due = |i: usize| ((i * 7919) % 100) as u64 * 1000;
        for (i, o) in objs.iter().enumerate() {
            q.insert(due(i), o);
        }
        assert_eq!(q.len(), 200);
        // Every third leaves from wherever it is.
        for o in objs.iter().step_by(3) {
            assert!(q.remove(o));
            assert!(!q.remove(o), "only once");
            assert_eq!(o.expiry_slot(), NOT_QUEUED);
        }
        // One moves to a later time.
        q.insert(1_000_000, &objs[1]);
        let mut last = 0;
        let mut out = Vec::new();
        while let Some(o) = q.pop_due(999_999) {
            let at = out.len();
            out.push(o);
            let t = objs.iter().position(|x| Arc::ptr_eq(x, &out[at])).unwrap();
            assert!(due(t) >= last, "in order");
            last = due(t);
        }
        assert_eq!(out.len(), 200 - 67 - 1);
        assert!(out.iter().all(|o| o.expiry_slot() == NOT_QUEUED));
        assert!(q.pop_due(999_999).is_none(), "the moved one is not due yet");
        assert!(Arc::ptr_eq(&q.pop_due(1_000_000).unwrap(), &objs[1]));
        assert_eq!(q.len(), 0);
    }

    /// A time is due at the end of its second, never before it; past
    /// what 32 bits of seconds hold, at the last of them.
    #[test]
    fn times_fall_due_at_the_end_of_their_second() {
        let objs = objects(3);
        let mut q = Expiry::default();
        q.insert(5_001, &objs[0]);
        q.insert(5_000, &objs[1]);
        q.insert(u64::MAX / 2, &objs[2]);
        assert!(Arc::ptr_eq(&q.pop_due(5_000).unwrap(), &objs[1]));
        assert!(q.pop_due(5_999).is_none(), "5.001 s is not due at 5.999");
        assert!(Arc::ptr_eq(&q.pop_due(6_000).unwrap(), &objs[0]));
        assert!(q.pop_due(u64::from(u32::MAX) * 1000 - 1).is_none());
        assert!(Arc::ptr_eq(
            &q.pop_due(u64::from(u32::MAX) * 1000).unwrap(),
            &objs[2]
        ));
    }
}
