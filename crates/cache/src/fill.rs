//! A body being filled into an object the cache owns: begun with the
//! object's first charge (its head and any length announced ahead),
//! charged to its store as bytes come, and finished; a handle dropped
//! unfinished fails the body (its readers see it end short) and removes
//! the object, so a fetch that ends early, for whatever reason, never
//! leaves an object that looks whole.

use crate::object::Object;
use crate::store::Store;
use crate::{Cache, Removal};
use bytes::Bytes;
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
}

impl Cache {
    /// Charges `obj` to `store` for `head` bytes and `reserved` body bytes
    /// (an announced length, so that a full store is a clean failure
    /// before anyone sees the object) and hands back the handle its body
    /// is filled through; None when the store has no room.
    pub fn begin_fill(
        &self,
        obj: &Arc<Object>,
        store: Arc<Store>,
        head: u64,
        reserved: u64,
        nuke_limit: u64,
    ) -> Option<FillHandle<'_>> {
        if !self.attach(obj, store.clone(), head + reserved, nuke_limit) {
            return None;
        }
        Some(FillHandle {
            cache: self,
            obj: obj.clone(),
            store,
            reserved,
            stored: 0,
            nuke_limit,
            done: false,
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
        let engine = self.store.engine();
        let extent = engine.allocate(bytes.len() as u64).ok_or(NoRoom)?;
        self.obj.body().push(engine.write(extent, bytes));
        Ok(())
    }

    /// Ends the body: it is whole.
    pub fn finish(mut self) {
        self.done = true;
        self.obj.body().finish();
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
