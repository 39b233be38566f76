//! A backend's `VBE.<vcl>.<name>.*` counters, counted by each thread in a
//! block of its own (one per thread slot, [`crate::here::slot`], made when
//! the slot first counts) and summed when read, so that fetches on
//! different workers write no counter line in common (as `MAIN`'s are).
//! Values that are only ever set (`happy`, `healthy`) live in one shared
//! block.

use crate::here::{slot, SLOTS};
use lacquer_core::counters::{BackendCounter, BackendCounters, VBE};
use std::sync::OnceLock;

/// A slot's counters, on cache lines of their own.
#[repr(align(64))]
struct Block(BackendCounters);

/// One backend's counters.
pub struct BackendStats {
    /// What `set` stores.
    set: BackendCounters,
    /// What each thread slot counted.
    slots: [OnceLock<Box<Block>>; SLOTS],
}

impl Default for BackendStats {
    fn default() -> Self {
        BackendStats {
            set: BackendCounters::new(),
            slots: std::array::from_fn(|_| OnceLock::new()),
        }
    }
}

impl std::fmt::Debug for BackendStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut values = Vec::new();
        self.snapshot(&mut values);
        f.debug_struct("BackendStats")
            .field("values", &values)
            .finish()
    }
}

impl BackendStats {
    /// This thread's block.
    #[inline]
    fn mine(&self) -> &BackendCounters {
        &self.slots[slot()]
            .get_or_init(|| Box::new(Block(BackendCounters::new())))
            .0
    }

    /// Adds one.
    #[inline]
    pub fn inc(&self, c: BackendCounter) {
        self.mine().inc(c);
    }

    /// Adds `n`.
    #[inline]
    pub fn add(&self, c: BackendCounter, n: u64) {
        if n != 0 {
            self.mine().add(c, n);
        }
    }

    /// Subtracts one from a gauge (the blocks wrap, so a gauge raised on
    /// one thread and lowered on another sums right).
    #[inline]
    pub fn dec(&self, c: BackendCounter) {
        self.mine().dec(c);
    }

    /// Sets a value that is only ever set (`happy`, `healthy`).
    pub fn set(&self, c: BackendCounter, v: u64) {
        self.set.set(c, v);
    }

    /// Reads a value: the sum over every slot.
    pub fn get(&self, c: BackendCounter) -> u64 {
        let mut all = Vec::with_capacity(VBE.len());
        self.snapshot(&mut all);
        all[c as usize]
    }

    /// Copies every value, in table order, onto `out`.
    pub fn snapshot(&self, out: &mut Vec<u64>) {
        let start = out.len();
        self.set.snapshot(out);
        for block in self.slots.iter().filter_map(OnceLock::get) {
            block.0.sum_into(&mut out[start..]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_count_apart_and_reads_sum_them() {
        let stats = std::sync::Arc::new(BackendStats::default());
        stats.inc(BackendCounter::req);
        stats.inc(BackendCounter::conn);
        stats.set(BackendCounter::happy, 0b101);
        let theirs = {
            let stats = stats.clone();
            std::thread::spawn(move || {
                stats.add(BackendCounter::req, 2);
                // A gauge raised here and lowered there.
                stats.dec(BackendCounter::conn);
                slot()
            })
            .join()
            .unwrap()
        };
        assert_ne!(
            theirs,
            slot(),
            "the other thread counted in a block of its own"
        );
        assert_eq!(stats.slots.iter().filter(|s| s.get().is_some()).count(), 2);
        assert_eq!(stats.get(BackendCounter::req), 3);
        assert_eq!(stats.get(BackendCounter::conn), 0);
        assert_eq!(stats.get(BackendCounter::happy), 0b101);
        let mut out = vec![7];
        stats.snapshot(&mut out);
        assert_eq!(out.len(), 1 + VBE.len(), "appended after what was there");
        assert_eq!(out[0], 7);
        assert_eq!(out[1 + BackendCounter::req as usize], 3);
    }
}
