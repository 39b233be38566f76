//! What the daemon publishes in its work directory (`-n`) for tools to
//! read without talking to it, as Varnish's shared memory is read: the
//! counters, and the log — its tag table, record format, ring, and the
//! per-transaction buffers that write to it.

pub mod batch;
pub mod counters;
pub mod group;
pub mod heap;
pub mod mapped;
pub mod packed;
pub mod prometheus;
pub mod query;
pub mod record;
pub mod ring;
pub mod tags;

pub use record::{Limits, Record, Side, Txn};
pub use ring::{Log, Lost, OpenError, Reader};
pub use tags::Tag;
