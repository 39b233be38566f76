//! Every cluster datagram is sealed with the shared secret: a magic, the
//! sender's clock in milliseconds, the message, and an HMAC-SHA-256 over
//! all of them. A datagram whose seal does not verify (in constant time),
//! or whose time is more than [`MAX_SKEW_MS`] away from ours (a replay of
//! an old one), is dropped before foca reads a byte of it.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// What a sealed datagram starts with (and its version).
const MAGIC: &[u8; 4] = b"LQC2";
/// The seal's length.
const TAG: usize = 32;
/// What a seal adds to a message.
pub const OVERHEAD: usize = MAGIC.len() + 8 + TAG;
/// How far a datagram's time may be from ours, either way.
pub const MAX_SKEW_MS: u64 = 30_000;

type HmacSha256 = Hmac<Sha256>;

/// The shared secret's key.
#[derive(Clone)]
pub struct Key(HmacSha256);

impl Key {
    /// The key of `secret` (a secret file's bytes, surrounding white
    /// space and all: as varnishd reads `-S`).
    pub fn new(secret: &[u8]) -> Key {
        Key(HmacSha256::new_from_slice(secret).expect("HMAC takes a key of any length"))
    }

    /// The HMAC of `data`.
    pub(crate) fn tag(&self, data: &[u8]) -> [u8; 32] {
        let mut mac = self.0.clone();
        mac.update(data);
        mac.finalize().into_bytes().into()
    }

    /// Whether `tag` is the HMAC of `data` (compared in constant time).
    pub(crate) fn check_tag(&self, data: &[u8], tag: &[u8]) -> bool {
        let mut mac = self.0.clone();
        mac.update(data);
        mac.verify_slice(tag).is_ok()
    }

    /// `message` sealed at `now_ms`.
    pub fn seal(&self, message: &[u8], now_ms: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity(message.len() + OVERHEAD);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&now_ms.to_be_bytes());
        out.extend_from_slice(message);
        let mut mac = self.0.clone();
        mac.update(&out);
        out.extend_from_slice(&mac.finalize().into_bytes());
        out
    }

    /// The message inside a datagram, if its seal verifies and its time
    /// is within [`MAX_SKEW_MS`] of `now_ms`.
    pub fn open<'d>(&self, datagram: &'d [u8], now_ms: u64) -> Option<&'d [u8]> {
        if datagram.len() < OVERHEAD || !datagram.starts_with(MAGIC) {
            return None;
        }
        let (sealed, tag) = datagram.split_at(datagram.len() - TAG);
        let mut mac = self.0.clone();
        mac.update(sealed);
        mac.verify_slice(tag).ok()?;
        let mut time = [0; 8];
        time.copy_from_slice(&sealed[MAGIC.len()..MAGIC.len() + 8]);
        if u64::from_be_bytes(time).abs_diff(now_ms) > MAX_SKEW_MS {
            return None;
        }
        Some(&sealed[MAGIC.len() + 8..])
    }
}

/// The clock a seal carries: milliseconds since the epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_message_opens_only_with_the_key_in_time_and_whole() {
        let key = Key::new(b"secret\n");
        let sealed = key.seal(b"hello", 1_000_000);
        assert_eq!(key.open(&sealed, 1_000_000), Some(&b"hello"[..]));
        assert_eq!(
            key.open(&sealed, 1_000_000 + MAX_SKEW_MS),
            Some(&b"hello"[..])
        );
        // Another key, a replay too late, a flipped bit, a cut.
        assert_eq!(Key::new(b"other").open(&sealed, 1_000_000), None);
        assert_eq!(key.open(&sealed, 1_000_000 + MAX_SKEW_MS + 1), None);
        for i in 0..sealed.len() {
            let mut bad = sealed.clone();
            bad[i] ^= 1;
            assert_eq!(key.open(&bad, 1_000_000), None, "bit flipped in byte {i}");
        }
        for cut in 0..sealed.len() {
            assert_eq!(key.open(&sealed[..cut], 1_000_000), None);
        }
    }
}
