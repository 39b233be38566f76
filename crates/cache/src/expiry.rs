//! The expiry queue: every indexed object by the millisecond its lifetime
//! ends, in a binary heap whose entries know their place (each object
//! keeps its index in the heap, as Varnish's objcores do), so that taking
//! one out is O(log n) without a search. An entry is 16 bytes: the time
//! and the object.

use crate::blocks::Blocks;
use crate::object::{Object, NOT_QUEUED};
use crate::{Cache, Removal};
use lacquer_core::counters::{Counter, COUNTERS};
use std::sync::Arc;

#[derive(Debug, Default)]
pub(crate) struct Expiry {
    /// In blocks rather than a doubling vector (`blocks.rs`).
    heap: Blocks<Entry>,
}

#[derive(Debug)]
struct Entry {
    at: u64,
    obj: Arc<Object>,
}

impl Expiry {
    /// Queues an object due at `at` (milliseconds of the epoch). An
    /// object already queued moves to its new time.
    pub fn insert(&mut self, at: u64, obj: &Arc<Object>) {
        self.remove(obj);
        if self.heap.len() >= NOT_QUEUED as usize {
            // Four billion queued: this one lives until evicted.
            return;
        }
        let i = self.heap.len();
        self.heap.push(Entry {
            at,
            obj: obj.clone(),
        });
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
            .heap
            .get(i)
            .is_some_and(|e| std::ptr::eq(Arc::as_ptr(&e.obj), obj))
        {
            return false;
        }
        self.take(i);
        true
    }

    /// The next object due by `now` (milliseconds), out of the queue.
    pub fn pop_due(&mut self, now: u64) -> Option<Arc<Object>> {
        if self.heap.get(0)?.at > now {
            return None;
        }
        Some(self.take(0))
    }

    /// Objects queued.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    fn take(&mut self, i: usize) -> Arc<Object> {
        let last = self.heap.len() - 1;
        self.heap.swap(i, last);
        let gone = self.heap.pop().expect("an entry");
        gone.obj.set_expiry_slot(NOT_QUEUED);
        if i < self.heap.len() {
            self.heap[i].obj.set_expiry_slot(i as u32);
            let i = self.sift_up(i);
            self.sift_down(i);
        }
        gone.obj
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        self.heap[a].obj.set_expiry_slot(a as u32);
        self.heap[b].obj.set_expiry_slot(b as u32);
    }

    fn sift_up(&mut self, mut i: usize) -> usize {
        while i > 0 {
            let parent = (i - 1) / 2;
            if self.heap[parent].at <= self.heap[i].at {
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
            if l < self.heap.len() && self.heap[l].at < self.heap[least].at {
                least = l;
            }
            if r < self.heap.len() && self.heap[r].at < self.heap[least].at {
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
        // Times in a scrambled order, some equal.
        for (i, o) in objs.iter().enumerate() {
            q.insert(((i * 7919) % 100) as u64, o);
        }
        assert_eq!(q.len(), 200);
        // Every third leaves from wherever it is.
        for o in objs.iter().step_by(3) {
            assert!(q.remove(o));
            assert!(!q.remove(o), "only once");
            assert_eq!(o.expiry_slot(), NOT_QUEUED);
        }
        // One moves to a later time.
        q.insert(1000, &objs[1]);
        let mut last = 0;
        let mut out = Vec::new();
        while let Some(o) = q.pop_due(999) {
            let at = out.len();
            out.push(o);
            let t = objs.iter().position(|x| Arc::ptr_eq(x, &out[at])).unwrap();
            let due = ((t * 7919) % 100) as u64;
            assert!(due >= last, "in order");
            last = due;
        }
        assert_eq!(out.len(), 200 - 67 - 1);
        assert!(out.iter().all(|o| o.expiry_slot() == NOT_QUEUED));
        assert!(q.pop_due(999).is_none(), "the moved one is not due yet");
        assert!(Arc::ptr_eq(&q.pop_due(1000).unwrap(), &objs[1]));
        assert_eq!(q.len(), 0);
    }

    #[test]
    fn an_entry_is_sixteen_bytes() {
        assert_eq!(std::mem::size_of::<Entry>(), 16);
    }
}
