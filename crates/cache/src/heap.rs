//! A binary heap of due seconds whose entries know their place: each
//! entry's owner is told its index as it moves ([`Places`]), so that
//! taking any entry out is O(log n) without a search, as Varnish's
//! objcores keep their place in its expiry heap. Times are seconds of the
//! epoch, rounded up (32 bits last past 2100). The expiry queues are
//! made of it (`expiry.rs`, and the LRU lists' own in `lru.rs`).

use crate::blocks::Blocks;

/// No place in a heap.
pub(crate) const NOT_QUEUED: u32 = u32::MAX;

/// Tells an entry's object where in its heap the entry is now
/// ([`NOT_QUEUED`]: out of it).
pub(crate) trait Places<R> {
    fn place(&self, entry: &R, at: u32);
}

/// A heap of due seconds and what they are for (`R`: an object, or a
/// node number), in two parallel block vectors (`blocks.rs`).
#[derive(Debug)]
pub(crate) struct Heap<R> {
    times: Blocks<u32>,
    refs: Blocks<R>,
}

impl<R> Default for Heap<R> {
    fn default() -> Self {
        Heap {
            times: Blocks::default(),
            refs: Blocks::default(),
        }
    }
}

/// The second (of the epoch) a time in milliseconds falls due: rounded
/// up, so that nothing leaves the queue before its time; past what 32
/// bits hold, the last second they do.
fn due_second(at_ms: u64) -> u32 {
    u32::try_from(at_ms.div_ceil(1000)).unwrap_or(u32::MAX)
}

impl<R> Heap<R> {
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.refs.len()
    }

    /// The entry at `i`.
    pub fn get(&self, i: usize) -> Option<&R> {
        self.refs.get(i)
    }

    /// Queues `r` due at `at_ms` (milliseconds of the epoch); false when
    /// the heap is full (four billion entries).
    pub fn push(&mut self, at_ms: u64, r: R, places: &impl Places<R>) -> bool {
        if self.refs.len() >= NOT_QUEUED as usize {
            return false;
        }
        let i = self.refs.len();
        self.times.push(due_second(at_ms));
        self.refs.push(r);
        places.place(&self.refs[i], i as u32);
        self.sift_up(i, places);
        true
    }

    /// Whether the first entry is due by `now_ms`.
    pub fn due(&self, now_ms: u64) -> bool {
        self.times
            .get(0)
            .is_some_and(|&t| u64::from(t) * 1000 <= now_ms)
    }

    /// Takes the entry at `i` out.
    pub fn take(&mut self, i: usize, places: &impl Places<R>) -> R {
        let last = self.refs.len() - 1;
        self.times.swap(i, last);
        self.refs.swap(i, last);
        self.times.pop();
        let gone = self.refs.pop().expect("an entry");
        places.place(&gone, NOT_QUEUED);
        if i < self.refs.len() {
            places.place(&self.refs[i], i as u32);
            let i = self.sift_up(i, places);
            self.sift_down(i, places);
        }
        gone
    }

    fn swap(&mut self, a: usize, b: usize, places: &impl Places<R>) {
        self.times.swap(a, b);
        self.refs.swap(a, b);
        places.place(&self.refs[a], a as u32);
        places.place(&self.refs[b], b as u32);
    }

    fn sift_up(&mut self, mut i: usize, places: &impl Places<R>) -> usize {
        while i > 0 {
            let parent = (i - 1) / 2;
            if self.times[parent] <= self.times[i] {
                break;
            }
            self.swap(parent, i, places);
            i = parent;
        }
        i
    }

    fn sift_down(&mut self, mut i: usize, places: &impl Places<R>) {
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut least = i;
            let len = self.refs.len();
            if l < len && self.times[l] < self.times[least] {
                least = l;
            }
            if r < len && self.times[r] < self.times[least] {
                least = r;
            }
            if least == i {
                return;
            }
            self.swap(i, least, places);
            i = least;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Milliseconds round up to the second; past 32 bits, the last.
    #[test]
    fn due_seconds_round_up() {
        assert_eq!(due_second(0), 0);
        assert_eq!(due_second(1), 1);
        assert_eq!(due_second(1000), 1);
        assert_eq!(due_second(1001), 2);
        assert_eq!(due_second(u64::MAX / 2), u32::MAX);
    }
}
