//! Transaction ids (Varnish's vxids). Client requests, backend fetches and
//! sessions draw from one sequence; each thread takes a block at a time so
//! that allocation touches shared memory rarely. `debug.xid` restarts the
//! sequence at a given id and from then on hands ids out one by one, so
//! that a test's log has predictable ids.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

const BLOCK: u64 = 1024;
/// Ids stay below this bound and wrap, as Varnish's do.
const LIMIT: u64 = 1 << 30;

static NEXT_BLOCK: AtomicU64 = AtomicU64::new(0);
/// Set by `debug.xid`: the next id, handed out one at a time.
static SEQUENTIAL: AtomicU64 = AtomicU64::new(0);
static IS_SEQUENTIAL: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

thread_local! {
    static RANGE: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

/// Restarts the ids at `next`, handed out one by one from now on.
pub fn set_next(next: u64) {
    SEQUENTIAL.store(next.max(1), Ordering::SeqCst);
    IS_SEQUENTIAL.store(true, Ordering::SeqCst);
}

/// The id `debug.xid` would hand out next (or the next block's start).
pub fn peek() -> u64 {
    if IS_SEQUENTIAL.load(Ordering::Relaxed) {
        SEQUENTIAL.load(Ordering::Relaxed)
    } else {
        NEXT_BLOCK.load(Ordering::Relaxed) * BLOCK
    }
}

/// Returns a fresh transaction id (never 0).
pub fn next_vxid() -> u64 {
    if IS_SEQUENTIAL.load(Ordering::Relaxed) {
        return SEQUENTIAL.fetch_add(1, Ordering::Relaxed) % LIMIT;
    }
    RANGE.with(|range| {
        let (mut next, mut end) = range.get();
        if next >= end {
            let block = NEXT_BLOCK.fetch_add(1, Ordering::Relaxed) % (LIMIT / BLOCK);
            next = block * BLOCK;
            end = next + BLOCK;
            if next == 0 {
                next = 1;
            }
        }
        range.set((next + 1, end));
        next
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_nonzero() {
        let mut seen = std::collections::HashSet::new();
        for _ in 0..5000 {
            let id = next_vxid();
            assert_ne!(id, 0);
            assert!(seen.insert(id));
        }
        let other = std::thread::spawn(|| (0..100).map(|_| next_vxid()).collect::<Vec<_>>())
            .join()
            .unwrap();
        for id in other {
            assert!(seen.insert(id));
        }
    }
}
