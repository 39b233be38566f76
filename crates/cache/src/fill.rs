//! A body being filled into an object the cache owns: begun with the
//! object's first charge (its head and any length announced ahead),
//! charged to its store as bytes come, and finished; a handle dropped
//! unfinished fails the body (its readers see it end short) and removes
//! the object, so a fetch that ends early, for whatever reason, never
//! leaves an object that looks whole.

use crate::object::Object;
use crate::space::Room;
use crate::store::Placement;
use crate::store::Store;
use crate::{Cache, Removal};
use bytes::Bytes;
use lacquer_core::counters::StoreCounter;
use std::sync::Arc;

/// The store had no room for more of the body, even after evicting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoRoom;

/// The filling of one object's body.
pub struct FillHandle<'c> {
    cache: &'c Cache,
    obj: Arc<Object>,
    store: Arc<Store>,
    /// Body bytes charged up front (an announced length).
    reserved: u64,
    /// Body bytes kept so far.
    stored: u64,
    nuke_limit: u64,
    done: bool,
    /// The room the store's engine set aside that bytes go into next.
    room: Option<Room>,
    /// Where the body went in the engine's file, in order (start, length).
    placed: Vec<(u64, u64)>,
    /// Some of the body stayed on the heap (the engine had no place).
    heap: bool,
}

/// The room asked for when the body's length is not announced: the tail
/// not written goes back when the fill ends.
const UNANNOUNCED_ROOM: u64 = 64 << 10;

impl Cache {
    /// Charges `obj` to the store it was made for, for `head` bytes and
    /// `reserved` body bytes (an announced length, so that a full store is
    /// a clean failure before anyone sees the object) and hands back the
    /// handle its body is filled through; None when the store has no room
    /// (or the object was made for none).
    pub fn begin_fill(
        &self,
        obj: &Arc<Object>,
        head: u64,
        reserved: u64,
        nuke_limit: u64,
    ) -> Option<FillHandle<'_>> {
        if !self.attach(obj, head + reserved, nuke_limit) {
            return None;
        }
        let store = obj.store()?.clone();
        Some(FillHandle {
            cache: self,
            obj: obj.clone(),
            store,
            reserved,
            stored: 0,
            nuke_limit,
            done: false,
            room: None,
            placed: Vec::new(),
            heap: false,
        })
    }
}

impl FillHandle<'_> {
    /// The object being filled.
    pub fn obj(&self) -> &Arc<Object> {
        &self.obj
    }

    /// The store it is charged to.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// Body bytes kept so far.
    pub fn stored(&self) -> u64 {
        self.stored
    }

    /// Charges `n` more body bytes about to be kept (past what was
    /// reserved, the store grows, evicting as it must).
    pub fn charge(&mut self, n: u64) -> Result<(), NoRoom> {
        let before = self.stored;
        self.stored += n;
        let extra = self.stored.saturating_sub(self.reserved.max(before));
        if extra == 0 || self.cache.grow(&self.obj, extra, self.nuke_limit) {
            Ok(())
        } else {
            Err(NoRoom)
        }
    }

    /// Charges and appends bytes to the body (readers see them at once).
    pub fn push(&mut self, bytes: Bytes) -> Result<(), NoRoom> {
        self.charge(bytes.len() as u64)?;
        self.push_charged(bytes)
    }

    /// Appends bytes already charged (a body held whole, charged as it
    /// came in): the store's engine places them, and readers get its
    /// view of them.
    pub fn push_charged(&mut self, bytes: Bytes) -> Result<(), NoRoom> {
        if bytes.is_empty() {
            return Ok(());
        }
        if self.heap {
            // The engine keeps this body on the heap (malloc always): no
            // need to ask again for every piece.
            self.obj.body().push(bytes);
            return Ok(());
        }
        let mut rest = &bytes[..];
        while !rest.is_empty() {
            if self.room.as_ref().is_none_or(|r| r.remaining() == 0) {
                if let Some(full) = self.room.take() {
                    self.store.engine().trim(full);
                }
                match self.new_room(rest.len() as u64)? {
                    Some(room) => self.room = Some(room),
                    None => {
                        // The engine keeps these bytes on the heap.
                        self.heap = true;
                        let at = bytes.len() - rest.len();
                        self.obj.body().push(bytes.slice(at..));
                        return Ok(());
                    }
                }
            }
            let room = self.room.as_mut().expect("a room");
            let n = room.remaining().min(rest.len() as u64) as usize;
            let at = room.at() + room.written();
            let view = room.write(&rest[..n]).map_err(|_| {
                self.store.stats.inc(StoreCounter::c_fail);
                NoRoom
            })?;
            match self.placed.last_mut() {
                Some((start, len)) if *start + *len == at => *len += n as u64,
                _ => self.placed.push((at, n as u64)),
            }
            self.obj.body().push(view);
            rest = &rest[n..];
        }
        Ok(())
    }

    /// Room for at least `need` more bytes (as many as the body is still
    /// expected to bring), evicting up to `nuke_limit` objects while the
    /// engine is full; None when the engine keeps the bytes on the heap.
    fn new_room(&mut self, need: u64) -> Result<Option<Room>, NoRoom> {
        let hint = match self.obj.body().known_len() {
            Some(len) => len.saturating_sub(self.placed_len()).max(need),
            None => need.max(UNANNOUNCED_ROOM),
        };
        let (mut nuked, mut rounds) = (0, 0);
        loop {
            let mut evicted = Vec::new();
            let placement = self.store.engine().allocate(
                need,
                hint,
                !self.placed.is_empty(),
                &self.obj,
                &mut evicted,
            );
            for victim in &evicted {
                self.cache.remove(victim, Removal::Nuked);
            }
            match placement {
                Placement::Room(room) => return Ok(Some(room)),
                Placement::Heap => return Ok(None),
                Placement::Full => {}
            }
            if !evicted.is_empty() {
                // The engine pushed a segment's objects out (however many:
                // `nuke_limit` bounds the LRU's, not this): ask again.
                rounds += 1;
                if rounds <= 8 {
                    continue;
                }
            }
            if nuked >= self.nuke_limit {
                lacquer_core::counters::COUNTERS
                    .inc(lacquer_core::counters::Counter::n_lru_limited);
                self.store.stats.inc(StoreCounter::c_fail);
                return Err(NoRoom);
            }
            match self.store.lru_pop() {
                Some(victim) if !Arc::ptr_eq(&victim, &self.obj) => {
                    self.cache.remove(&victim, Removal::Nuked);
                    nuked += 1;
                }
                Some(_) => {}
                None => {
                    self.store.stats.inc(StoreCounter::c_fail);
                    return Err(NoRoom);
                }
            }
        }
    }

    fn placed_len(&self) -> u64 {
        self.placed.iter().map(|(_, len)| len).sum()
    }

    /// Ends the body: it is whole. The engine gets the unused room back,
    /// and hears where the body went.
    pub fn finish(mut self) {
        self.done = true;
        if let Some(room) = self.room.take() {
            self.store.engine().trim(room);
        }
        self.obj.body().finish();
        let cache = self.cache;
        self.store
            .engine()
            .commit(&self.obj, &self.placed, self.heap, &|victim| {
                cache.remove(victim, Removal::Nuked)
            });
    }
}

impl Drop for FillHandle<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.obj.body().fail();
            self.cache.remove(&self.obj, Removal::Failed);
        }
    }
}
