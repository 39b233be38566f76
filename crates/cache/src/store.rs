//! Storage: a named byte budget (`-s name=malloc,SIZE`, `-s
//! name=file,PATH,SIZE`) with its own LRU list, a persistent store that
//! manages its own space, plus the unbounded Transient store for
//! uncacheable and short-lived objects. Bytes are charged as a fetch stores them and released when the
//! last reference to the object goes away; where they live is the
//! store's engine's business: the [`Engine`] interface here, the engines
//! in `file.rs` and `persist/` (their rooms and views in `space.rs`).
//!
//! An engine places bytes: it sets room aside for a body
//! ([`Engine::allocate`]), the fill writes into that room and gets back
//! views that readers share without copying, and the room goes back to
//! the engine with its last view. An engine that keeps objects across
//! restarts also hears when an object is whole and inserted
//! ([`Engine::commit`]) and when it goes ([`Engine::forget`]). The
//! memory engine (`malloc`) places nothing: bytes stay on the heap in the
//! very buffers a fetch filled.

use crate::lru::{Lru, NIL, NO_SLOT};
use crate::object::Object;
use crate::space::Room;
use lacquer_core::counters::{StoreCounter, StoreCounters};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Where the next bytes of a body go.
pub enum Placement {
    /// They stay where they are, on the heap.
    Heap,
    /// In this room.
    Room(Room),
    /// Nowhere: the engine is full (evicting may make room).
    Full,
}

/// A storage engine. The budget is not its business (the store charges
/// it before asking for room); placement is.
pub trait Engine: Send + Sync + std::fmt::Debug {
    /// Its kind, as `-s name=KIND,...` spells it.
    fn kind(&self) -> &'static str;

    /// Itself, for the code that knows which engine it is.
    fn as_any(&self) -> &dyn std::any::Any;

    /// The section its counters are published under: `SMA` for memory,
    /// `SMF` for a file, `SMP` for a persistent store.
    fn section(&self) -> &'static str {
        "SMA"
    }

    /// Sets aside room for at least `need` bytes of `obj`'s body, and up
    /// to `hint` when that many are expected; `started` says earlier
    /// bytes of the body already went into this engine's rooms. Objects that lose their
    /// bytes to make that room (a persistent store reusing its oldest
    /// segment) are pushed on `evicted`, for the cache to remove.
    fn allocate(
        &self,
        need: u64,
        hint: u64,
        started: bool,
        obj: &Arc<Object>,
        evicted: &mut Vec<Arc<Object>>,
    ) -> Placement {
        let _ = (need, hint, started, obj, evicted);
        Placement::Heap
    }

    /// Whether a body announced as `len` bytes stays on the heap (the
    /// fetch may then make it one allocation with its head).
    fn keeps_on_heap(&self, len: u64) -> bool {
        let _ = len;
        true
    }

    /// The fill is done with a room: what it did not write may go back.
    fn trim(&self, room: Room) {
        drop(room);
    }

    /// The object's body is whole; `placed` lists where it went (in
    /// order), `heap` says some of it stayed on the heap. Objects the
    /// engine must push out to make room go through `remove`.
    fn commit(
        &self,
        obj: &Arc<Object>,
        placed: &[(u64, u64)],
        heap: bool,
        remove: &dyn Fn(&Arc<Object>),
    ) {
        let _ = (obj, placed, heap, remove);
    }

    /// The object is in the index now, under `key` (its body may still
    /// be filling).
    fn inserted(&self, obj: &Arc<Object>, key: &[u8], remove: &dyn Fn(&Arc<Object>)) {
        let _ = (obj, key, remove);
    }

    /// The object's timers changed (a soft purge): an engine that keeps
    /// objects across restarts keeps the new ones.
    fn retimed(&self, obj: &Object) {
        let _ = obj;
    }

    /// A ban was issued at `time`: an engine that keeps objects across
    /// restarts keeps the ban for them too.
    fn ban_added(&self, time: f64, text: &str, remove: &dyn Fn(&Arc<Object>)) {
        let _ = (time, text, remove);
    }

    /// A rendition of the object (its body in another coding) was kept
    /// beside it: an engine that keeps objects across restarts keeps it
    /// too (pushing objects out through `remove` for room).
    fn rendition_kept(
        &self,
        obj: &Arc<Object>,
        slot: usize,
        head: &[u8],
        body: &[u8],
        remove: &dyn Fn(&Arc<Object>),
    ) {
        let _ = (obj, slot, head, body, remove);
    }

    /// The object left the cache (purged, banned, replaced, evicted,
    /// expired): it must not come back.
    fn forget(&self, obj: &Object) {
        let _ = obj;
    }

    /// Bytes held and bytes free, when the engine keeps its own account
    /// rather than the store's budget.
    fn space(&self) -> Option<(u64, u64)> {
        None
    }

    /// Its own counters, after the seven every store has, in its
    /// section's order.
    fn extra_counters(&self, out: &mut Vec<u64>) {
        let _ = out;
    }
}

/// The heap engine behind `-s malloc` and Transient.
#[derive(Debug, Default)]
pub struct Malloc;

impl Engine for Malloc {
    fn kind(&self) -> &'static str {
        "malloc"
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// A storage backend with a byte budget.
#[derive(Debug)]
pub struct Store {
    name: String,
    budget: u64,
    used: AtomicU64,
    /// Its `SMA.<name>.*` counters; `g_bytes` and `g_space` are filled
    /// in by [`Store::counters`].
    pub stats: StoreCounters,
    lru: Option<Mutex<Lru<Object>>>,
    engine: Box<dyn Engine>,
    vcl_name: Arc<str>,
}

impl Store {
    /// A `malloc` store with a budget and an LRU list.
    pub fn malloc(name: &str, budget: u64) -> Arc<Store> {
        Store::new(name, budget, Box::new(Malloc))
    }

    /// A store with a budget and an LRU list over any engine.
    pub fn new(name: &str, budget: u64, engine: Box<dyn Engine>) -> Arc<Store> {
        Arc::new(Store::build(name, budget, true, engine))
    }

    /// A store whose engine keeps its own account of space and decides
    /// itself what goes when it is full (a persistent store's oldest
    /// segment): no budget, no LRU list.
    pub fn self_managed(name: &str, engine: Box<dyn Engine>) -> Arc<Store> {
        Arc::new(Store::build(name, u64::MAX, false, engine))
    }

    /// The Transient store: on the heap, unbounded unless given a
    /// budget, no LRU.
    pub fn transient(budget: Option<u64>) -> Arc<Store> {
        Arc::new(Store::build(
            "Transient",
            budget.unwrap_or(u64::MAX),
            false,
            Box::new(Malloc),
        ))
    }

    fn build(name: &str, budget: u64, lru: bool, engine: Box<dyn Engine>) -> Store {
        Store {
            name: name.to_string(),
            budget,
            used: AtomicU64::new(0),
            stats: StoreCounters::new(),
            lru: lru.then(|| Mutex::new(Lru::default())),
            engine,
            vcl_name: format!("storage.{name}").into(),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its name as VCL writes it (`storage.s0`), which is also how a
    /// STEVEDORE value prints.
    pub fn vcl_name(&self) -> Arc<str> {
        self.vcl_name.clone()
    }

    /// Where its bytes live.
    pub fn engine(&self) -> &dyn Engine {
        &*self.engine
    }

    /// The byte budget (`u64::MAX` when unbounded).
    pub fn budget(&self) -> u64 {
        self.budget
    }

    /// Bytes in use (`g_bytes`).
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// Bytes still available (`g_space`).
    pub fn space(&self) -> u64 {
        self.budget.saturating_sub(self.used())
    }

    /// Pushes its counters in the order of the `SMA` table.
    /// Bytes held and bytes still free, as `g_bytes` and `g_space` give
    /// them: the engine's own account where it keeps one (0 free for an
    /// unbounded store).
    pub fn account(&self) -> (u64, u64) {
        match self.engine.space() {
            Some(account) => account,
            None if self.budget == u64::MAX => (self.used(), 0),
            None => (self.used(), self.space()),
        }
    }

    /// Pushes its counters in the order of its section's table (`SMA`,
    /// `SMF` or `SMP`: the seven every store has, then the engine's).
    pub fn counters(&self, out: &mut Vec<u64>) {
        let (used, space) = self.account();
        self.stats.set(StoreCounter::g_bytes, used);
        self.stats.set(StoreCounter::g_space, space);
        self.stats.snapshot(out);
        self.engine.extra_counters(out);
    }

    /// Charges `n` bytes if they fit the budget.
    pub fn try_reserve(&self, n: u64) -> bool {
        let mut cur = self.used.load(Ordering::Relaxed);
        loop {
            let next = match cur.checked_add(n) {
                Some(next) if next <= self.budget => next,
                _ => return false,
            };
            match self
                .used
                .compare_exchange_weak(cur, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => {
                    self.stats.add(StoreCounter::c_bytes, n);
                    return true;
                }
                Err(actual) => cur = actual,
            }
        }
    }

    /// Returns bytes to the budget.
    pub(crate) fn release(&self, n: u64) {
        if n > 0 {
            self.used.fetch_sub(n, Ordering::Relaxed);
            self.stats.add(StoreCounter::c_freed, n);
        }
        self.stats.dec(StoreCounter::g_alloc);
    }

    /// Whether it keeps an LRU list (a persistent store and Transient do
    /// not).
    pub fn has_lru(&self) -> bool {
        self.lru.is_some()
    }

    /// Puts an object on the front of the LRU list.
    pub(crate) fn lru_insert(&self, obj: &Arc<Object>, now: f64) {
        if let Some(lru) = &self.lru {
            let mut lru = lru.lock().unwrap_or_else(|e| e.into_inner());
            if obj.is_removed() || obj.lru_slot.load(Ordering::Relaxed) != u32::MAX {
                return;
            }
            if lru.free.is_empty() && lru.nodes.len() >= NIL as usize {
                // Two billion objects listed: this one is never evicted,
                // and the budget still holds (its allocations fail).
                return;
            }
            let slot = lru.insert(obj.clone());
            obj.lru_slot.store(slot as u32, Ordering::Relaxed);
            obj.set_lru_stamp(now);
        }
    }

    /// Moves an object asked for again to the front of the protected
    /// list: at once from probation, then at most once per `interval`
    /// (a hot object costs the list's lock once per interval, not per
    /// hit).
    pub(crate) fn lru_touch(&self, obj: &Object, now: f64, interval: f64) -> bool {
        let Some(lru) = &self.lru else { return false };
        if obj.lru_protected() && obj.since_lru_stamp(now) < interval {
            return false;
        }
        let mut lru = lru.lock().unwrap_or_else(|e| e.into_inner());
        let slot = obj.lru_slot.load(Ordering::Relaxed) as usize;
        if slot == NO_SLOT || lru.nodes.get(slot).is_none_or(|n| n.obj.is_none()) {
            return false;
        }
        lru.touch(slot);
        obj.set_lru_protected(true);
        obj.set_lru_stamp(now);
        true
    }

    /// Takes an object off the LRU list.
    pub(crate) fn lru_remove(&self, obj: &Object) -> Option<Arc<Object>> {
        let lru = self.lru.as_ref()?;
        let mut lru = lru.lock().unwrap_or_else(|e| e.into_inner());
        let slot = obj.lru_slot.swap(u32::MAX, Ordering::Relaxed) as usize;
        if slot == NO_SLOT {
            return None;
        }
        lru.remove(slot)
    }

    /// Takes the object to evict off the lists: probation's least
    /// recently used, else protected's.
    pub(crate) fn lru_pop(&self) -> Option<Arc<Object>> {
        let lru = self.lru.as_ref()?;
        let mut lru = lru.lock().unwrap_or_else(|e| e.into_inner());
        let victim = lru.victim()?;
        let obj = lru.remove(victim)?;
        obj.lru_slot.store(u32::MAX, Ordering::Relaxed);
        Some(obj)
    }

    /// Whether an object is on the protected list (for tests).
    #[cfg(test)]
    pub(crate) fn lru_is_protected(&self, obj: &Object) -> bool {
        let Some(lru) = &self.lru else { return false };
        let lru = lru.lock().unwrap_or_else(|e| e.into_inner());
        let slot = obj.lru_slot.load(Ordering::Relaxed) as usize;
        slot != NO_SLOT && lru.is_protected(slot)
    }

    /// Queues an object on the lists for the end of its lifetime (at
    /// `at_ms`, milliseconds of the epoch). False when it is on no list:
    /// the cache's own queue takes it then. A removed object is queued
    /// nowhere.
    pub(crate) fn expiry_insert(&self, obj: &Object, at_ms: u64) -> bool {
        let Some(lru) = &self.lru else { return false };
        let mut lru = lru.lock().unwrap_or_else(|e| e.into_inner());
        let Some(slot) = listed(&lru, obj) else {
            return false;
        };
        if !obj.is_removed() {
            lru.schedule(slot, at_ms);
        }
        true
    }

    /// Takes an object on the lists out of their expiry queue; false when
    /// it is on no list.
    pub(crate) fn expiry_remove(&self, obj: &Object) -> bool {
        let Some(lru) = &self.lru else { return false };
        let mut lru = lru.lock().unwrap_or_else(|e| e.into_inner());
        let Some(slot) = listed(&lru, obj) else {
            return false;
        };
        lru.unschedule(slot);
        true
    }

    /// Pushes the listed objects due by `now_ms` on `out`, out of the
    /// queue (still on the lists).
    pub(crate) fn expiry_pop_due(&self, now_ms: u64, out: &mut Vec<Arc<Object>>) {
        let Some(lru) = &self.lru else { return };
        let mut lru = lru.lock().unwrap_or_else(|e| e.into_inner());
        while let Some(obj) = lru.pop_due(now_ms) {
            out.push(obj);
        }
    }

    /// Objects queued for expiry on the lists (for tests).
    #[cfg(test)]
    pub(crate) fn expiry_len(&self) -> usize {
        self.lru
            .as_ref()
            .map_or(0, |l| l.lock().unwrap_or_else(|e| e.into_inner()).queued())
    }

    /// Objects on the LRU list.
    pub fn lru_len(&self) -> usize {
        match &self.lru {
            Some(lru) => {
                let lru = lru.lock().unwrap_or_else(|e| e.into_inner());
                lru.nodes.len() - lru.free.len()
            }
            None => 0,
        }
    }
}

/// The node of an object on the lists (read under their lock).
fn listed(lru: &Lru<Object>, obj: &Object) -> Option<usize> {
    let slot = obj.lru_slot.load(Ordering::Relaxed) as usize;
    let node = lru.nodes.get(slot)?.obj.as_ref()?;
    std::ptr::eq(Arc::as_ptr(node), obj).then_some(slot)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_heap_places_nothing() {
        let obj = Arc::new(crate::tests::plain_object());
        let mut evicted = Vec::new();
        assert!(matches!(
            Malloc.allocate(5, 5, false, &obj, &mut evicted),
            Placement::Heap
        ));
    }
}
