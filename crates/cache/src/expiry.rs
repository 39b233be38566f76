//! The expiry queue: every indexed object by the second its lifetime
//! ends, in a binary heap whose entries know their place (each object
//! keeps its index in the heap, as Varnish's objcores do), so that taking
//! one out is O(log n) without a search. An entry is 12 bytes: the time,
//! rounded up to the second (32 bits last past 2100), beside the object,
//! in two parallel block vectors. The queue is read once a second, so an
//! object leaves it at most about two seconds after its lifetime ends;
//! lookups test the exact time and never serve it past its end.

use crate::blocks::Blocks;
use crate::object::{Object, NOT_QUEUED};
use crate::{Cache, Removal};
use lacquer_core::counters::{Counter, COUNTERS};
use std::sync::Arc;

#[derive(Debug, Default)]
pub(crate) struct Expiry {
    /// In blocks rather than doubling vectors (`blocks.rs`): each entry's
    /// time (seconds of the epoch) and object, at the same index.
    times: Blocks<u32>,
    objs: Blocks<Arc<Object>>,
}

/// The second (of the epoch) a time in milliseconds falls due: rounded
/// up, so that nothing leaves the queue before its time; past what 32
/// bits hold, the last second they do.
fn due_second(at_ms: u64) -> u32 {
    u32::try_from(at_ms.div_ceil(1000)).unwrap_or(u32::MAX)
}

impl Expiry {
    /// Queues an object due at `at` (milliseconds of the epoch). An
    /// object already queued moves to its new time.
    pub fn insert(&mut self, at: u64, obj: &Arc<Object>) {
        self.remove(obj);
        if self.objs.len() >= NOT_QUEUED as usize {
            // Four billion queued: this one lives until evicted.
            return;
        }
        let i = self.objs.len();
        self.times.push(due_second(at));
        self.objs.push(obj.clone());
        obj.set_expiry_slot(i as u32);
        self.sift_up(i);
    }

    /// Takes an object out of the queue; false when it was not in it.
    pub fn remove(&mut self, obj: &Object) -> bool {
        let i = obj.expiry_slot();
        if i == NOT_QUEUED {
            return false;
        }
        let i = i as usize;
        if !self
            .objs
            .get(i)
            .is_some_and(|o| std::ptr::eq(Arc::as_ptr(o), obj))
        {
            return false;
        }
        self.take(i);
        true
    }

    /// The next object due by `now` (milliseconds), out of the queue.
    pub fn pop_due(&mut self, now: u64) -> Option<Arc<Object>> {
        if u64::from(*self.times.get(0)?) * 1000 > now {
            return None;
        }
        Some(self.take(0))
    }

    /// Objects queued.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.objs.len()
    }

    fn take(&mut self, i: usize) -> Arc<Object> {
        let last = self.objs.len() - 1;
        self.times.swap(i, last);
        self.objs.swap(i, last);
        self.times.pop();
        let gone = self.objs.pop().expect("an entry");
        gone.set_expiry_slot(NOT_QUEUED);
        if i < self.objs.len() {
            self.objs[i].set_expiry_slot(i as u32);
            let i = self.sift_up(i);
            self.sift_down(i);
        }
        gone
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.times.swap(a, b);
        self.objs.swap(a, b);
        self.objs[a].set_expiry_slot(a as u32);
        self.objs[b].set_expiry_slot(b as u32);
    }

    fn sift_up(&mut self, mut i: usize) -> usize {
        while i > 0 {
            let parent = (i - 1) / 2;
            if self.times[parent] <= self.times[i] {
                break;
            }
            self.swap(parent, i);
            i = parent;
        }
        i
    }

    fn sift_down(&mut self, mut i: usize) {
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut least = i;
            let len = self.objs.len();
            if l < len && self.times[l] < self.times[least] {
                least = l;
            }
            if r < len && self.times[r] < self.times[least] {
                least = r;
            }
            if least == i {
                return;
            }
            self.swap(i, least);
            i = least;
        }
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

    pub(crate) fn schedule(&self, obj: &Arc<Object>) {
        let at = obj.expires_at();
        let at_ms = if at.is_finite() {
            (at.max(0.0) * 1000.0).min(u64::MAX as f64 / 2.0) as u64
        } else {
            u64::MAX / 2
        };
        COUNTERS.inc(Counter::exp_mailed);
        COUNTERS.inc(Counter::exp_received);
        let mut exp = self.expiry.lock().unwrap_or_else(|e| e.into_inner());
        // Removed meanwhile: its removal found no entry, and none is made.
        if !obj.is_removed() {
            exp.insert(at_ms, obj);
        }
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
        assert_eq!(due_second(0), 0);
        assert_eq!(due_second(1), 1);
    }
}
