//! The mark a request carries from one node to the owner of its object:
//! `Lacquer-Peer: NAME TIME TAG`, the sending node's name, its clock in
//! milliseconds and an HMAC-SHA-256 (hex) over both and the request's
//! method and URL, made with the cluster's secret. The owner takes a
//! request so marked as its peer's and never routes its fetch again; a
//! mark that does not verify is removed and counts for nothing. A mark
//! seen again (a replay within the time allowed) can only make the node
//! that gets it fetch from the origin itself, for that one URL.

use crate::seal::{Key, MAX_SKEW_MS};

/// The field that carries the mark.
pub const FIELD: &str = "lacquer-peer";

/// What the tag is made over, apart from a seal's messages.
const DOMAIN: &[u8] = b"lacquer peer request\0";

impl Key {
    fn peer_tag(&self, name: &str, time: u64, method: &[u8], url: &[u8]) -> [u8; 32] {
        self.tag(&self.peer_tag_input(name, time, method, url))
    }

    /// The mark of a request `name` sends now.
    pub fn mark(&self, name: &str, now_ms: u64, method: &[u8], url: &[u8]) -> String {
        let tag = self.peer_tag(name, now_ms, method, url);
        let mut out = format!("{name} {now_ms} ");
        for b in tag {
            out.push_str(&format!("{b:02x}"));
        }
        out
    }

    /// The sending node's name, if `mark` verifies for this request.
    pub fn verify_mark<'m>(
        &self,
        mark: &'m [u8],
        now_ms: u64,
        method: &[u8],
        url: &[u8],
    ) -> Option<&'m str> {
        let mark = std::str::from_utf8(mark).ok()?;
        let mut parts = mark.split(' ');
        let (name, time, hex) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() || hex.len() != 64 {
            return None;
        }
        let time: u64 = time.parse().ok()?;
        if time.abs_diff(now_ms) > MAX_SKEW_MS {
            return None;
        }
        let mut tag = [0u8; 32];
        for (i, b) in tag.iter_mut().enumerate() {
            *b = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        self.check_tag(&self.peer_tag_input(name, time, method, url), &tag)
            .then_some(name)
    }

    fn peer_tag_input(&self, name: &str, time: u64, method: &[u8], url: &[u8]) -> Vec<u8> {
        let mut parts =
            Vec::with_capacity(DOMAIN.len() + name.len() + method.len() + url.len() + 12);
        parts.extend_from_slice(DOMAIN);
        parts.extend_from_slice(name.as_bytes());
        parts.push(0);
        parts.extend_from_slice(&time.to_be_bytes());
        parts.extend_from_slice(method);
        parts.push(0);
        parts.extend_from_slice(url);
        parts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_verifies_for_its_request_only() {
        let key = Key::new(b"s");
        let mark = key.mark("node-a", 5_000_000, b"GET", b"/x");
        let m = mark.as_bytes();
        assert_eq!(key.verify_mark(m, 5_000_000, b"GET", b"/x"), Some("node-a"));
        assert_eq!(key.verify_mark(m, 5_000_000, b"GET", b"/y"), None);
        assert_eq!(key.verify_mark(m, 5_000_000, b"HEAD", b"/x"), None);
        assert_eq!(
            Key::new(b"t").verify_mark(m, 5_000_000, b"GET", b"/x"),
            None
        );
        assert_eq!(
            key.verify_mark(m, 5_000_000 + MAX_SKEW_MS + 1, b"GET", b"/x"),
            None
        );
        let forged = mark.replace("node-a", "node-b");
        assert_eq!(
            key.verify_mark(forged.as_bytes(), 5_000_000, b"GET", b"/x"),
            None
        );
        for bad in ["", "a", "a 1", "a 1 zz", "a x 00", "a 1 00 extra"] {
            assert_eq!(
                key.verify_mark(bad.as_bytes(), 1, b"GET", b"/x"),
                None,
                "{bad}"
            );
        }
    }
}
