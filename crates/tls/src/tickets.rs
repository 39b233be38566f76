//! Session tickets (TLS 1.2 tickets and TLS 1.3 PSK tickets), sealed
//! with keys every worker reads without a lock: the keys are one value
//! behind an atomically swapped pointer, read on every handshake that
//! makes or takes a ticket, and replaced (the current key becoming the
//! previous one) once a rotation period has passed, by whichever
//! handshake first notices. A ticket sealed with the current or the
//! previous key opens; an older one does not, so a ticket outlives its
//! key by at most one period and a key is forgotten after two.
//!
//! A ticket is the key's 16-byte name, a random 12-byte nonce, then the
//! session sealed with ChaCha20-Poly1305, the name as additional data.

use arc_swap::ArcSwap;
use ring::aead::{self, Aad, LessSafeKey, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};
use std::sync::Arc;

const NAME_LEN: usize = 16;
const NONCE_LEN: usize = 12;
/// The longest ticket opened: rustls's sessions are far smaller, and a
/// client's bytes cost nothing past this.
const MAX_TICKET: usize = 16 * 1024;

/// One sealing key and its name.
struct Key {
    name: [u8; NAME_LEN],
    key: LessSafeKey,
}

impl Key {
    fn new(rng: &SystemRandom) -> Option<Key> {
        let mut name = [0u8; NAME_LEN];
        let mut secret = [0u8; 32];
        rng.fill(&mut name).ok()?;
        rng.fill(&mut secret).ok()?;
        let key = UnboundKey::new(&aead::CHACHA20_POLY1305, &secret).ok()?;
        Some(Key {
            name,
            key: LessSafeKey::new(key),
        })
    }
}

/// The keys in use: tickets are sealed with `current` and open with it
/// or with `previous`.
struct Keys {
    current: Key,
    previous: Option<Key>,
    /// When `current` is to be replaced (seconds since the epoch).
    rotate_at: u64,
}

/// Seals and opens session tickets (rustls's `ProducesTickets`).
pub struct Tickets {
    keys: ArcSwap<Keys>,
    /// How long a key seals new tickets, in seconds.
    period: u32,
    rng: SystemRandom,
}

impl std::fmt::Debug for Tickets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tickets")
            .field("period", &self.period)
            .finish_non_exhaustive()
    }
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Tickets {
    /// Tickets whose keys each seal for `period` seconds (and open for
    /// two periods).
    pub fn new(period: u32) -> Result<Arc<Tickets>, String> {
        let rng = SystemRandom::new();
        let current = Key::new(&rng).ok_or("TLS tickets: no random key")?;
        let keys = Keys {
            current,
            previous: None,
            rotate_at: now() + u64::from(period),
        };
        Ok(Arc::new(Tickets {
            keys: ArcSwap::from_pointee(keys),
            period,
            rng,
        }))
    }

    /// The keys to use at `now`, rotated first when their period is over.
    fn keys_at(&self, now: u64) -> arc_swap::Guard<Arc<Keys>> {
        let keys = self.keys.load();
        if now < keys.rotate_at {
            return keys;
        }
        // Rotation: at most once a period, by the first handshake past
        // its end; the others go on with what they loaded.
        let Some(fresh) = Key::new(&self.rng) else {
            return keys;
        };
        let old: Arc<Keys> = arc_swap::Guard::into_inner(keys);
        let next = Arc::new(Keys {
            previous: Some(Key {
                name: old.current.name,
                key: old.current.key.clone(),
            }),
            current: fresh,
            rotate_at: now + u64::from(self.period),
        });
        let _ = self.keys.compare_and_swap(&old, next);
        self.keys.load()
    }

    fn seal_at(&self, plain: &[u8], now: u64) -> Option<Vec<u8>> {
        let keys = self.keys_at(now);
        let mut nonce = [0u8; NONCE_LEN];
        self.rng.fill(&mut nonce).ok()?;
        let mut out = Vec::with_capacity(NAME_LEN + NONCE_LEN + plain.len() + 16);
        out.extend_from_slice(&keys.current.name);
        out.extend_from_slice(&nonce);
        let mut sealed = plain.to_vec();
        keys.current
            .key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(&keys.current.name),
                &mut sealed,
            )
            .ok()?;
        out.extend_from_slice(&sealed);
        Some(out)
    }

    fn open_at(&self, ticket: &[u8], now: u64) -> Option<Vec<u8>> {
        if ticket.len() > MAX_TICKET || ticket.len() < NAME_LEN + NONCE_LEN {
            return None;
        }
        let (name, rest) = ticket.split_at(NAME_LEN);
        let (nonce, sealed) = rest.split_at(NONCE_LEN);
        let keys = self.keys_at(now);
        let key = [Some(&keys.current), keys.previous.as_ref()]
            .into_iter()
            .flatten()
            .find(|k| k.name[..] == *name)?;
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut buf = sealed.to_vec();
        let plain = key
            .key
            .open_in_place(nonce, Aad::from(name), &mut buf)
            .ok()?;
        let len = plain.len();
        buf.truncate(len);
        Some(buf)
    }
}

impl rustls::server::ProducesTickets for Tickets {
    fn enabled(&self) -> bool {
        true
    }

    fn lifetime(&self) -> u32 {
        // A ticket opens for at most two periods; tell clients one.
        self.period
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        self.seal_at(plain, now())
    }

    fn decrypt(&self, cipher: &[u8]) -> Option<Vec<u8>> {
        self.open_at(cipher, now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ticket_opens_with_its_key_and_not_when_touched() {
        let t = Tickets::new(3600).unwrap();
        let now = now();
        let ticket = t.seal_at(b"session state", now).unwrap();
        assert_eq!(t.open_at(&ticket, now).unwrap(), b"session state");
        // Any byte changed (name, nonce, sealed text, tag): refused.
        for i in 0..ticket.len() {
            let mut bad = ticket.clone();
            bad[i] ^= 1;
            assert_eq!(t.open_at(&bad, now), None, "byte {i}");
        }
        assert_eq!(t.open_at(&ticket[..20], now), None);
        assert_eq!(t.open_at(&[], now), None);
        assert_eq!(t.open_at(&vec![0; MAX_TICKET + 1], now), None);
        // Another daemon's keys open nothing of ours.
        let other = Tickets::new(3600).unwrap();
        assert_eq!(other.open_at(&ticket, now), None);
    }

    #[test]
    fn keys_rotate_and_a_ticket_opens_for_two_periods_at_most() {
        let t = Tickets::new(100).unwrap();
        let start = now();
        let first = t.seal_at(b"one", start).unwrap();
        // One period on: a new key seals, the old one still opens.
        let later = start + 101;
        let second = t.seal_at(b"two", later).unwrap();
        assert_ne!(first[..NAME_LEN], second[..NAME_LEN]);
        assert_eq!(t.open_at(&first, later).unwrap(), b"one");
        assert_eq!(t.open_at(&second, later).unwrap(), b"two");
        // Two periods on: the first key is gone.
        let much_later = later + 101;
        let _ = t.seal_at(b"three", much_later).unwrap();
        assert_eq!(t.open_at(&first, much_later), None);
        assert_eq!(t.open_at(&second, much_later).unwrap(), b"two");
    }

    #[test]
    fn tickets_are_sealed_from_many_threads_at_once() {
        let t = Tickets::new(1).unwrap();
        let start = now();
        let threads: Vec<_> = (0..4)
            .map(|i| {
                let t = t.clone();
                std::thread::spawn(move || {
                    for n in 0..200u64 {
                        // Time moving on under them: rotations race. The
                        // threads' clocks stay within one period of each
                        // other, as one clock read by all keeps them: a
                        // thread that others had left two rotations
                        // behind would hold a ticket whose key is gone,
                        // as a ticket that old would be.
                        let at = start + n / 100;
                        let plain = format!("{i}/{n}");
                        let sealed = t.seal_at(plain.as_bytes(), at).unwrap();
                        assert_eq!(t.open_at(&sealed, at).unwrap(), plain.as_bytes());
                    }
                })
            })
            .collect();
        for th in threads {
            th.join().unwrap();
        }
    }
}
