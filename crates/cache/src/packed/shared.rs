//! Field values many objects share, kept once for the whole process: a
//! packed head names one by a two-byte number instead of holding its
//! bytes. Servers write the same `Server`, `Content-Type`,
//! `Cache-Control` and security-policy values on every response, and a
//! `Content-Security-Policy` alone can be longer than the object's body.
//!
//! A value gets a number the second time a fetch packs it (the first
//! sighting is noted by its hash only), so values seen once, which most
//! unique values are, take no room here. Numbers are never taken back:
//! what the table holds is bounded instead, by [`MAX_NUMBERS`] values of
//! at most [`MAX_VALUE`] bytes and [`MAX_BYTES`] in all; once full, new
//! values are kept in the heads that have them, as before.
//!
//! Reading a number is two loads and no lock; only a fetch that meets a
//! value its thread has not numbered yet takes the table's lock. A
//! thread remembers the numbers of values it met by their hashes alone
//! (checked against the table), so it keeps no copies of them.

use hashbrown::HashTable;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, RandomState};
use std::sync::{Mutex, OnceLock};

/// Values are numbered in pages of this many, each made when first used.
const PAGE: usize = 256;
/// The numbers there can be (two bytes).
pub(crate) const MAX_NUMBERS: usize = 1 << 16;
/// The longest value the table takes.
pub(crate) const MAX_VALUE: usize = 4096;
/// The bytes of values the table holds at most.
pub(crate) const MAX_BYTES: usize = 4 << 20;
/// The shortest value worth a number: a shorter one costs no more kept
/// in its head (its length byte and bytes) than a number does.
pub(crate) const MIN_VALUE: usize = 3;
/// First sightings remembered (by hash) before the oldest are forgotten.
const SIGHTINGS: usize = 4096;
/// Numbers a thread remembers for the values it packed.
const THREAD_NUMBERS: usize = 1024;

type Page = Box<[OnceLock<Box<[u8]>>]>;

struct Table {
    pages: [OnceLock<Page>; MAX_NUMBERS / PAGE],
    /// Keyed per process: nobody outside aims values at one hash.
    hasher: RandomState,
    admit: Mutex<Admit>,
}

/// What numbering needs, behind the lock. Values are found by their
/// hash and compared with the table's own copy: the table holds each
/// value once.
struct Admit {
    numbers: HashTable<u16>,
    seen_once: HashSet<u64>,
    bytes: usize,
}

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(Table::new)
}

impl Table {
    fn new() -> Table {
        Table {
            pages: [const { OnceLock::new() }; MAX_NUMBERS / PAGE],
            hasher: RandomState::new(),
            admit: Mutex::new(Admit {
                numbers: HashTable::new(),
                seen_once: HashSet::new(),
                bytes: 0,
            }),
        }
    }

    fn value(&self, n: u16) -> Option<&[u8]> {
        let n = usize::from(n);
        let page = self.pages[n / PAGE].get()?;
        page[n % PAGE].get().map(|v| &v[..])
    }
}

/// The value numbered `n`.
#[inline]
pub(crate) fn value(n: u16) -> Option<&'static [u8]> {
    table().value(n)
}

/// The number of `value` when it has one, or is given one now (its
/// second sighting, with room left); `None` otherwise.
pub(crate) fn number_of(value: &[u8]) -> Option<u16> {
    if !(MIN_VALUE..=MAX_VALUE).contains(&value.len()) {
        return None;
    }
    thread_local! {
        // By the value's hash, checked against the table's copy: a
        // thread keeps no copies of values.
        static KNOWN: RefCell<HashMap<u64, u16>> = RefCell::new(HashMap::new());
    }
    let table = table();
    let hash = table.hasher.hash_one(value);
    let known = KNOWN
        .try_with(|k| k.borrow().get(&hash).copied())
        .ok()
        .flatten();
    if let Some(n) = known.filter(|&n| table.value(n) == Some(value)) {
        return Some(n);
    }
    let n = number_under_lock(table, hash, value)?;
    let _ = KNOWN.try_with(|k| {
        let mut known = k.borrow_mut();
        if known.len() >= THREAD_NUMBERS {
            known.clear();
        }
        known.insert(hash, n);
    });
    Some(n)
}

fn number_under_lock(table: &Table, hash: u64, value: &[u8]) -> Option<u16> {
    let mut admit = table.admit.lock().unwrap_or_else(|p| p.into_inner());
    let same = |&n: &u16| table.value(n) == Some(value);
    if let Some(&n) = admit.numbers.find(hash, same) {
        return Some(n);
    }
    if !admit.seen_once.remove(&hash) {
        if admit.seen_once.len() >= SIGHTINGS {
            admit.seen_once.clear();
        }
        admit.seen_once.insert(hash);
        return None;
    }
    let next = admit.numbers.len();
    if next >= MAX_NUMBERS || admit.bytes + value.len() > MAX_BYTES {
        return None;
    }
    let page =
        table.pages[next / PAGE].get_or_init(|| (0..PAGE).map(|_| OnceLock::new()).collect());
    // Set before the number is handed out: a reader of the number always
    // finds its value.
    let _ = page[next % PAGE].set(value.into());
    admit.bytes += value.len();
    let n = next as u16;
    admit.numbers.insert_unique(hash, n, |&m| {
        table.hasher.hash_one(table.value(m).unwrap_or_default())
    });
    Some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_numbered_at_its_second_sighting_and_read_back() {
        let v = b"text/html; charset=shared-test-1";
        assert_eq!(number_of(v), None, "seen once");
        let n = number_of(v).expect("seen twice");
        assert_eq!(number_of(v), Some(n));
        assert_eq!(value(n), Some(&v[..]));
        // Another thread finds the same number.
        let there = std::thread::spawn(move || number_of(v)).join().unwrap();
        assert_eq!(there, Some(n));
        let w = b"max-age=shared-test-2";
        number_of(w);
        let m = number_of(w).unwrap();
        assert_ne!(m, n);
        assert_eq!(value(m), Some(&w[..]));
    }

    /// A table of its own, filled: what is numbered stays readable, and
    /// past its bytes nothing more is numbered.
    #[test]
    fn a_full_table_numbers_nothing_more() {
        let table = Table::new();
        let per = MAX_VALUE;
        let fits = MAX_BYTES / per;
        let mut numbers = Vec::new();
        for i in 0..fits + 3 {
            let mut v = vec![b'v'; per];
            v[..8].copy_from_slice(&(i as u64).to_le_bytes());
            let hash = table.hasher.hash_one(&v);
            assert_eq!(number_under_lock(&table, hash, &v), None, "seen once");
            let n = number_under_lock(&table, hash, &v);
            if i < fits {
                numbers.push((n.expect("room left"), v));
            } else {
                assert_eq!(n, None, "full");
            }
        }
        for (n, v) in &numbers {
            assert_eq!(table.value(*n), Some(&v[..]));
            let hash = table.hasher.hash_one(v);
            assert_eq!(number_under_lock(&table, hash, v), Some(*n));
        }
        // It counts what it holds, each value once.
        let admit = table.admit.lock().unwrap();
        assert_eq!(admit.bytes, fits * per);
        assert_eq!(admit.numbers.len(), fits);
    }

    #[test]
    fn values_too_short_or_too_long_are_never_numbered() {
        for v in [&b"ab"[..], &[b'x'; MAX_VALUE + 1][..]] {
            for _ in 0..3 {
                assert_eq!(number_of(v), None);
            }
        }
        assert_eq!(value(u16::MAX), None);
    }
}
