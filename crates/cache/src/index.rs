//! The index: a key's head (its variants and busy fetch) found through
//! one of many small locked tables. A request's key is hashed once, to a
//! 128-bit digest; the digest picks the table, finds the entry in it, and
//! travels with the fetch slot so that the insert hashes nothing again.
//! Objects keep the digest, never the key: 16 bytes inline instead of a
//! key on the heap; a head (`head.rs`) is found by its objects' digest.

use crate::head::Head;
use crate::object::Digest;
use hashbrown::HashTable;
use lacquer_core::counters::{Counter, COUNTERS};
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, MutexGuard};

const SHARDS: usize = 64;

/// A key and its digest in one allocation, as a fetch carries them: the
/// digest's 16 bytes, then the key.
#[derive(Debug, Clone)]
pub(crate) struct SlotKey(Arc<[u8]>);

impl SlotKey {
    pub fn new(digest: Digest, key: &[u8]) -> SlotKey {
        let [a, b] = digest.halves();
        let (a, b) = (a.to_ne_bytes(), b.to_ne_bytes());
        // An iterator of known length: collected in one allocation.
        SlotKey(a.iter().chain(&b).chain(key).copied().collect())
    }

    pub fn digest(&self) -> Digest {
        let half = |at: usize| {
            let mut b = [0; 8];
            b.copy_from_slice(&self.0[at..at + 8]);
            u64::from_ne_bytes(b)
        };
        Digest::from_halves([half(0), half(8)])
    }

    pub fn key(&self) -> &[u8] {
        &self.0[16..]
    }
}

/// Where a head's entry goes in its table.
fn hash_of(h: &Head) -> u64 {
    h.digest().map_or(0, |d| d.hash())
}

/// The sharded index.
pub(crate) struct Index {
    shards: Box<[Mutex<Table>]>,
    hashers: [RandomState; 2],
}

/// One shard's table.
#[derive(Default)]
pub(crate) struct Table(HashTable<Head>);

impl Index {
    pub fn new() -> Index {
        Index {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            hashers: [RandomState::new(), RandomState::new()],
        }
    }

    /// A key's digest (keyed per process, so that nobody outside can aim
    /// keys at one table, or two keys at one digest).
    pub fn digest(&self, key: &[u8]) -> Digest {
        Digest::from_halves([self.hashers[0].hash_one(key), self.hashers[1].hash_one(key)])
    }

    /// Locks the table a hash falls in. The table's own probe uses the
    /// hash's low and top bits; the shard takes bits from the middle.
    pub fn lock(&self, hash: u64) -> MutexGuard<'_, Table> {
        let shard = (hash >> 32) as usize % SHARDS;
        self.shards[shard].lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The shards, for a walk over every head (the ban lurker).
    pub fn shards(&self) -> &[Mutex<Table>] {
        &self.shards
    }

    /// Heads in the index.
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).0.len())
            .sum()
    }
}

impl Table {
    pub fn iter(&self) -> impl Iterator<Item = &Head> {
        self.0.iter()
    }

    pub fn get(&self, d: Digest) -> Option<&Head> {
        self.0.find(d.hash(), |h| h.digest() == Some(d))
    }

    pub fn get_mut(&mut self, d: Digest) -> Option<&mut Head> {
        self.0.find_mut(d.hash(), |h| h.digest() == Some(d))
    }

    /// Adds a head (with a variant or a fetch) for a key not in the
    /// table.
    pub fn insert(&mut self, head: Head) -> &mut Head {
        let hash = hash_of(&head);
        self.0.insert_unique(hash, head, hash_of).into_mut()
    }

    /// The key's head, made (and counted in `n_objecthead`) when there
    /// is none; the caller gives a new one its variant before it lets go
    /// of the table.
    pub fn head_for(&mut self, d: Digest) -> &mut Head {
        self.0
            .entry(d.hash(), |h| h.digest() == Some(d), hash_of)
            .or_insert_with(|| {
                COUNTERS.inc(Counter::n_objecthead);
                Head::Empty
            })
            .into_mut()
    }

    /// Takes out the key's head (an emptied one included: it is found
    /// by where it is, not by its digest).
    pub fn remove(&mut self, d: Digest) {
        if let Ok(entry) = self
            .0
            .find_entry(d.hash(), |h| h.digest().is_none_or(|x| x == d))
        {
            entry.remove();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_key_carries_its_digest_and_key() {
        let index = Index::new();
        let d = index.digest(b"/a\0example.com");
        assert_eq!(d, index.digest(b"/a\0example.com"));
        assert_ne!(d, index.digest(b"/b\0example.com"));
        let k = SlotKey::new(d, b"/a\0example.com");
        assert_eq!(k.digest(), d);
        assert_eq!(k.key(), b"/a\0example.com");
        assert_eq!(std::mem::size_of::<SlotKey>(), 16);
        // Another process (another index) draws other secret keys.
        assert_ne!(Index::new().digest(b"/a\0example.com"), d);
    }
}
