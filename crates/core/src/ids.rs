//! Transaction ids (Varnish's vxids). Client requests, backend fetches and
//! sessions draw from one sequence; each thread takes a block at a time so
//! that allocation touches shared memory rarely.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

const BLOCK: u64 = 1024;
/// Ids stay below this bound and wrap, as Varnish's do.
const LIMIT: u64 = 1 << 30;

static NEXT_BLOCK: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static RANGE: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

/// Returns a fresh transaction id (never 0).
pub fn next_vxid() -> u64 {
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
