//! The index: a key's head (its variants and busy fetch) found through
//! one of many small locked tables. A request's key is hashed once, to a
//! 128-bit digest; the digest picks the table, finds the entry in it, and
//! travels with the fetch slot so that the insert hashes nothing again.
//! Objects keep the digest, never the key: 16 bytes inline instead of a
//! key on the heap; a head (`head.rs`) is found by its objects' digest.
//!
//! A table is two: keys that hold one variant and no fetch (nearly all,
//! once a cache is warm) are entered as their object alone, 8 bytes an
//! entry; the others (a fetch under way, several variants) as a head,
//! 16. A lookup that finds a key reads it in place; a change takes the
//! key's head out and puts it back where its new form belongs
//! ([`HeadMut`]), or nowhere once it is empty.

use crate::head::{Busy, Head};
use crate::object::{Digest, Object};
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

/// Where a key of one variant goes in its table.
fn hash_of_one(o: &Arc<Object>) -> u64 {
    o.digest().map_or(0, |d| d.hash())
}

/// The sharded index.
pub(crate) struct Index {
    shards: Box<[Mutex<Table>]>,
    /// The digest's key, drawn at start from the process's random
    /// hash state.
    keys: [u64; 2],
}

/// One shard's table: keys of one variant and no fetch, and the others.
#[derive(Default)]
pub(crate) struct Table {
    ones: HashTable<Arc<Object>>,
    rest: HashTable<Head>,
}

/// A key's head as its table holds it, read in place.
#[derive(Clone, Copy)]
pub(crate) enum HeadView<'a> {
    One(&'a Arc<Object>),
    Rest(&'a Head),
}

impl<'a> HeadView<'a> {
    /// The variants, newest first.
    #[inline]
    pub fn objs(self) -> &'a [Arc<Object>] {
        match self {
            HeadView::One(o) => std::slice::from_ref(o),
            HeadView::Rest(h) => h.objs(),
        }
    }

    /// The fetch under way.
    #[inline]
    pub fn busy(self) -> Option<&'a Arc<Busy>> {
        match self {
            HeadView::One(_) => None,
            HeadView::Rest(h) => h.busy(),
        }
    }
}

/// A key's head taken out of its table to be changed; it goes back,
/// into the part its form belongs in, when this is dropped (an emptied
/// head stays out: the key has left the table).
pub(crate) struct HeadMut<'t> {
    table: &'t mut Table,
    hash: u64,
    head: Head,
}

impl std::ops::Deref for HeadMut<'_> {
    type Target = Head;

    fn deref(&self) -> &Head {
        &self.head
    }
}

impl std::ops::DerefMut for HeadMut<'_> {
    fn deref_mut(&mut self) -> &mut Head {
        &mut self.head
    }
}

impl Drop for HeadMut<'_> {
    fn drop(&mut self) {
        let head = std::mem::take(&mut self.head);
        self.table.put(self.hash, head);
    }
}

impl Index {
    pub fn new() -> Index {
        Index {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            keys: {
                let random = RandomState::new();
                [random.hash_one(0u8), random.hash_one(1u8)]
            },
        }
    }

    /// A key's digest (keyed per process, so that nobody outside can aim
    /// keys at one table, or two keys at one digest).
    /// One pass of a keyed 128-bit hash: the key's bytes are read once.
    pub fn digest(&self, key: &[u8]) -> Digest {
        use siphasher::sip128::{Hasher128, SipHasher13};
        use std::hash::Hasher;
        let mut h = SipHasher13::new_with_keys(self.keys[0], self.keys[1]);
        h.write(key);
        let d = h.finish128();
        Digest::from_halves([d.h1, d.h2])
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
            .map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).len())
            .sum()
    }
}

impl Table {
    /// Every key's head (the ban lurker's walk).
    pub fn iter(&self) -> impl Iterator<Item = HeadView<'_>> {
        self.ones
            .iter()
            .map(HeadView::One)
            .chain(self.rest.iter().map(HeadView::Rest))
    }

    /// Keys in the table.
    pub fn len(&self) -> usize {
        self.ones.len() + self.rest.len()
    }

    /// The key's head, read in place.
    #[inline]
    pub fn get(&self, d: Digest) -> Option<HeadView<'_>> {
        let hash = d.hash();
        if let Some(o) = self.ones.find(hash, |o| o.digest() == Some(d)) {
            return Some(HeadView::One(o));
        }
        self.rest
            .find(hash, |h| h.digest() == Some(d))
            .map(HeadView::Rest)
    }

    /// The key's head, taken out to be changed.
    pub fn get_mut(&mut self, d: Digest) -> Option<HeadMut<'_>> {
        let head = self.take(d)?;
        Some(HeadMut {
            table: self,
            hash: d.hash(),
            head,
        })
    }

    /// Adds a head (with a variant or a fetch) for a key not in the
    /// table.
    pub fn insert(&mut self, head: Head) {
        let hash = hash_of(&head);
        self.put(hash, head);
    }

    /// The key's head, made (and counted in `n_objecthead`) when there
    /// is none; the caller gives a new one its variant before it lets go
    /// of it.
    pub fn head_for(&mut self, d: Digest) -> HeadMut<'_> {
        let head = self.take(d).unwrap_or_else(|| {
            COUNTERS.inc(Counter::n_objecthead);
            Head::Empty
        });
        HeadMut {
            table: self,
            hash: d.hash(),
            head,
        }
    }

    /// Takes the key's head out of the table.
    fn take(&mut self, d: Digest) -> Option<Head> {
        let hash = d.hash();
        if let Ok(entry) = self.ones.find_entry(hash, |o| o.digest() == Some(d)) {
            return Some(Head::One(entry.remove().0));
        }
        let entry = self.rest.find_entry(hash, |h| h.digest() == Some(d)).ok()?;
        Some(entry.remove().0)
    }

    /// Enters a head where its form belongs (an empty one nowhere).
    fn put(&mut self, hash: u64, head: Head) {
        match head {
            Head::Empty => {}
            Head::One(o) => {
                self.ones.insert_unique(hash, o, hash_of_one);
            }
            head => {
                self.rest.insert_unique(hash, head, hash_of);
            }
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

    /// A key of one variant is its object alone in the table; a fetch or
    /// a second variant moves it to the heads, and back; an emptied head
    /// leaves.
    #[test]
    fn a_key_sits_where_its_form_belongs() {
        let index = Index::new();
        let d = index.digest(b"/one");
        let obj = |d: Digest| {
            let o = Arc::new(crate::tests::plain_object());
            o.set_digest(d);
            o
        };
        let (a, b) = (obj(d), obj(d));
        let mut t = Table::default();
        t.head_for(d).push_front(a.clone());
        assert_eq!((t.ones.len(), t.rest.len()), (1, 0));
        assert!(matches!(t.get(d), Some(HeadView::One(o)) if Arc::ptr_eq(o, &a)));
        // A refresh under way: a head with the object and the fetch.
        let (busy, _) = Busy::new(d);
        t.get_mut(d).unwrap().set_busy(Some(busy.clone()));
        assert_eq!((t.ones.len(), t.rest.len()), (0, 1));
        assert!(t.get(d).unwrap().busy().is_some());
        assert_eq!(t.get(d).unwrap().objs().len(), 1);
        t.get_mut(d).unwrap().set_busy(None);
        assert_eq!((t.ones.len(), t.rest.len()), (1, 0));
        // Two variants, then one again, then none.
        t.get_mut(d).unwrap().push_front(b.clone());
        assert_eq!((t.ones.len(), t.rest.len(), t.len()), (0, 1, 1));
        let objs = t.get(d).unwrap().objs().to_vec();
        assert!(Arc::ptr_eq(&objs[0], &b) && Arc::ptr_eq(&objs[1], &a));
        t.get_mut(d).unwrap().retain(|o| Arc::ptr_eq(o, &a));
        assert_eq!((t.ones.len(), t.rest.len()), (1, 0));
        t.get_mut(d).unwrap().retain(|_| false);
        assert_eq!(t.len(), 0);
        assert!(t.get(d).is_none() && t.get_mut(d).is_none());
        // A first miss: the fetch alone, among the heads.
        t.insert(Head::Fetching(busy));
        assert_eq!((t.ones.len(), t.rest.len()), (0, 1));
        // Other keys alongside are found by their own digests.
        let e = index.digest(b"/two");
        t.head_for(e).push_front(obj(e));
        assert_eq!(t.iter().count(), 2);
        assert_eq!(t.iter().map(|h| h.objs().len()).sum::<usize>(), 1);
        assert!(t.get(e).is_some_and(|h| h.busy().is_none()));
        assert!(t.get(d).is_some_and(|h| h.objs().is_empty()));
    }
}
