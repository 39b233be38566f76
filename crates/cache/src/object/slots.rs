//! The slots where an object keeps its renditions (its body in another
//! coding): their states and what a made one holds. How they are claimed,
//! made and kept is `crate::rendition`'s.

use bytes::Bytes;
use lacquer_core::counters::{Counter, COUNTERS};
use std::sync::atomic::AtomicU8;
use std::sync::OnceLock;

/// Slots an object has: one per coding the daemon makes renditions in.
pub const SLOTS: usize = 2;

/// Nobody made it yet.
pub(crate) const IDLE: u8 = 0;
/// Someone is making it.
pub(crate) const MAKING: u8 = 1;
/// It is there.
pub(crate) const READY: u8 = 2;
/// Not to be made: the body does not suit, or making it failed.
pub(crate) const DECLINED: u8 = 3;

/// One coding's slot.
#[derive(Debug, Default)]
pub(crate) struct Slot {
    pub(crate) state: AtomicU8,
    pub(crate) made: OnceLock<Rendition>,
}

/// A body in another coding, with the head that goes with it.
#[derive(Debug)]
pub struct Rendition {
    /// The status line and fields (each line ending in CRLF, no blank
    /// line), as the object's head with its coding's `Content-Encoding`,
    /// a weak `ETag` and `Vary: Accept-Encoding`.
    pub head: Bytes,
    pub body: Bytes,
}

impl Drop for Rendition {
    fn drop(&mut self) {
        COUNTERS.dec(Counter::g_renditions);
    }
}
