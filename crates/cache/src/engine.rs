//! Where a store's bytes live: the narrow interface between the cache and
//! a storage engine. The store above it (`store.rs`) keeps what every
//! engine shares: the byte budget, the LRU list, the `SMA`/`SMF`
//! counters. An engine only places bytes: it sets room aside, writes
//! bytes there and hands them back as a view that readers share without
//! copying, reads a range of that room back by its address, frees it,
//! and, when the process starts, lists what survived an earlier run.
//!
//! The memory engine (`malloc`) is the first: its bytes live on the heap
//! in the very buffers a fetch filled, so writing is free and the room
//! goes back to the allocator with the last view. A file engine maps its
//! file and hands out views of the mapping; the last view of an extent
//! dropped frees it (the view's owner carries the extent).

use bytes::Bytes;
use std::ops::Range;

/// Room an engine has set aside: its address in the engine's own space
/// (a file offset; [`Extent::IN_MEMORY`] for bytes that have no address
/// but their views) and its length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    pub at: u64,
    pub len: u64,
}

impl Extent {
    /// The address of bytes that live only in their views (the heap).
    pub const IN_MEMORY: u64 = u64::MAX;

    /// Whether the engine can find these bytes again by their address.
    pub fn is_placed(&self) -> bool {
        self.at != Self::IN_MEMORY
    }
}

/// A storage engine. The budget is not its business (the store charges
/// it before asking for room); placement is.
pub trait Engine: Send + Sync + std::fmt::Debug {
    /// Its kind, as `-s name=KIND,...` spells it.
    fn kind(&self) -> &'static str;

    /// Sets aside room for `len` bytes; None when the engine has no place
    /// for them (a full or fragmented file) even though the budget does.
    fn allocate(&self, len: u64) -> Option<Extent>;

    /// Writes `bytes` (exactly `extent.len` of them) into `extent` and
    /// returns them as stored: the view readers share. The room is freed
    /// when the last clone of that view is dropped.
    fn write(&self, extent: Extent, bytes: Bytes) -> Bytes;

    /// The bytes at `range` within a placed extent, read back by its
    /// address; None for bytes that have no address (the heap's are
    /// reachable only through the views `write` gave out) or a range
    /// past the extent.
    fn read(&self, extent: Extent, range: Range<u64>) -> Option<Bytes>;

    /// Gives room back that was set aside but never written (a fill that
    /// failed between the two).
    fn free(&self, extent: Extent);

    /// Visits every extent that survives from an earlier run of the
    /// process, for the cache to rebuild its index from. Memory survives
    /// nothing.
    fn iterate(&self, visit: &mut dyn FnMut(Extent));
}

/// The heap engine behind `-s malloc` and Transient.
#[derive(Debug, Default)]
pub struct Malloc;

impl Engine for Malloc {
    fn kind(&self) -> &'static str {
        "malloc"
    }

    fn allocate(&self, len: u64) -> Option<Extent> {
        Some(Extent {
            at: Extent::IN_MEMORY,
            len,
        })
    }

    fn write(&self, extent: Extent, bytes: Bytes) -> Bytes {
        debug_assert_eq!(extent.len, bytes.len() as u64);
        // The fetch's own buffer becomes the stored bytes: no copy.
        bytes
    }

    fn read(&self, extent: Extent, range: Range<u64>) -> Option<Bytes> {
        let _ = (extent, range);
        None
    }

    fn free(&self, _extent: Extent) {}

    fn iterate(&self, _visit: &mut dyn FnMut(Extent)) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_heap_keeps_the_fetchs_own_buffer() {
        let engine = Malloc;
        let bytes = Bytes::from_static(b"hello");
        let ext = engine.allocate(5).unwrap();
        assert!(!ext.is_placed());
        let stored = engine.write(ext, bytes.clone());
        assert_eq!(stored.as_ptr(), bytes.as_ptr());
        assert_eq!(engine.read(ext, 0..5), None);
        let mut seen = 0;
        engine.iterate(&mut |_| seen += 1);
        assert_eq!(seen, 0);
    }
}
