//! Which thread a connection belongs to: the worker whose event loop a
//! pooled HTTP/1 connection is registered with, or whose task drives an
//! HTTP/2 connection; and which of a pool's shelves a thread keeps its
//! idle connections on, and which of a backend's counter blocks it counts
//! in ([`slot`]).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// This thread, as a number: the address of a thread-local, distinct for
/// every live thread (each client worker runs one runtime on one thread).
pub(crate) fn this_thread() -> usize {
    thread_local! {
        static HERE: u8 = const { 0 };
    }
    HERE.with(|h| h as *const u8 as usize)
}

/// How many slots there are (a pool's shelves, a backend's counter
/// blocks): one per worker on machines of up to 64 cores; threads beyond
/// that many share them.
pub(crate) const SLOTS: usize = 64;

/// The slots live threads hold, a bit each.
static TAKEN: AtomicU64 = AtomicU64::new(0);
/// The next slot to share, once every slot is held.
static SHARED: AtomicUsize = AtomicUsize::new(0);

/// A thread's slot, given back when the thread ends.
struct Slot {
    index: usize,
    held: bool,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if self.held {
            TAKEN.fetch_and(!(1 << self.index), Ordering::AcqRel);
        }
    }
}

fn claim() -> Slot {
    let mut taken = TAKEN.load(Ordering::Relaxed);
    loop {
        let free = (!taken).trailing_zeros() as usize;
        if free >= SLOTS {
            return Slot {
                index: SHARED.fetch_add(1, Ordering::Relaxed) % SLOTS,
                held: false,
            };
        }
        match TAKEN.compare_exchange_weak(
            taken,
            taken | 1 << free,
            Ordering::AcqRel,
            Ordering::Relaxed,
        ) {
            Ok(_) => {
                return Slot {
                    index: free,
                    held: true,
                }
            }
            Err(now) => taken = now,
        }
    }
}

/// This thread's slot: the lowest no live thread holds when it first
/// asks (shared round the slots once more than [`SLOTS`] threads ask).
pub(crate) fn slot() -> usize {
    thread_local! {
        static SLOT: Slot = claim();
    }
    // A thread that is ending uses the first shelf.
    SLOT.try_with(|s| s.index).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_threads_hold_slots_of_their_own() {
        let mine = slot();
        assert_eq!(slot(), mine, "a thread keeps its slot");
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || {
            tx.send(slot()).unwrap();
            let _ = done_rx.recv();
        });
        let theirs = rx.recv().unwrap();
        assert_ne!(theirs, mine, "two live threads, two slots");
        drop(done_tx);
        other.join().unwrap();
    }
}
