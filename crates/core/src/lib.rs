//! Lacquer's foundation: time and duration parsing, request ids, the
//! parameter table, the counter table, session close reasons and regex
//! compilation, the shard director's hash ring, the byte buffers a thread
//! keeps for reuse, and short texts
//! kept padded for the log. Every other
//! crate depends on this one; it depends on nothing
//! of ours.

#![forbid(unsafe_code)]

pub mod close;
pub mod counters;
pub mod glob;
pub mod host;
pub mod ids;
pub mod json;
pub mod params;
pub mod regex;
pub mod ring;
pub mod spare;
pub mod time;
pub mod units;
pub mod word;

/// The product version, as shown in `Via` and `-V`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The short product token used in `Via` headers: `Lacquer/0.1`.
pub fn product_token() -> String {
    let mut parts = VERSION.split('.');
    let major = parts.next().unwrap_or("0");
    let minor = parts.next().unwrap_or("0");
    format!("Lacquer/{major}.{minor}")
}
