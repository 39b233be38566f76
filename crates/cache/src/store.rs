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

use crate::blocks::Blocks;
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

/// The eviction lists, a segmented LRU: a new object starts on the
/// probation list and moves to the protected one when it is asked for
/// again; eviction takes probation's least recently used first. A crawl
/// of objects asked once therefore churns probation and leaves what is
/// asked again alone (`bench/scan.sh`). Protected holds at most
/// [`PROTECTED_SHARE`] of the objects; past it, its least recently used
/// goes back to probation. Both are doubly linked lists in one slab, so
/// objects are moved and removed by index without searching.
#[derive(Debug, Default)]
struct Lru {
    nodes: Blocks<LruNode>,
    free: Vec<u32>,
    lists: [List; 2],
}

/// The two segments, as indices into `Lru::lists`.
const PROBATION: usize = 0;
const PROTECTED: usize = 1;

/// The most of the listed objects the protected segment holds, in
/// percent.
const PROTECTED_SHARE: usize = 80;

#[derive(Debug, Default, Clone, Copy)]
struct List {
    head: Option<usize>,
    tail: Option<usize>,
    len: usize,
}

/// One object's place on the lists: 16 bytes. Links are slab indices in
/// 31 bits; the top bit of `prev` says which segment the node is on.
#[derive(Debug)]
struct LruNode {
    prev: u32,
    next: u32,
    obj: Option<Arc<Object>>,
}

/// An object on no list, as its `lru_slot` says it.
const NO_SLOT: usize = u32::MAX as usize;

/// No node (the end of a list).
const NIL: u32 = 0x7fff_ffff;
const SEGMENT_BIT: u32 = 1 << 31;

impl LruNode {
    fn new(obj: Arc<Object>) -> LruNode {
        LruNode {
            prev: NIL,
            next: NIL,
            obj: Some(obj),
        }
    }

    fn prev(&self) -> Option<usize> {
        let p = self.prev & !SEGMENT_BIT;
        (p != NIL).then_some(p as usize)
    }

    fn set_prev(&mut self, p: Option<usize>) {
        self.prev = (self.prev & SEGMENT_BIT) | p.map_or(NIL, |p| p as u32);
    }

    fn next(&self) -> Option<usize> {
        (self.next != NIL).then_some(self.next as usize)
    }

    fn set_next(&mut self, n: Option<usize>) {
        self.next = n.map_or(NIL, |n| n as u32);
    }

    fn segment(&self) -> usize {
        (self.prev >> 31) as usize
    }

    fn set_segment(&mut self, seg: usize) {
        self.prev = (self.prev & !SEGMENT_BIT) | ((seg as u32) << 31);
    }
}

impl Lru {
    fn unlink(&mut self, i: usize) {
        let (prev, next, seg) = (
            self.nodes[i].prev(),
            self.nodes[i].next(),
            self.nodes[i].segment(),
        );
        let list = &mut self.lists[seg];
        match prev {
            Some(p) => self.nodes[p].set_next(next),
            None => list.head = next,
        }
        match next {
            Some(n) => self.nodes[n].set_prev(prev),
            None => list.tail = prev,
        }
        list.len -= 1;
        self.nodes[i].set_prev(None);
        self.nodes[i].set_next(None);
    }

    fn push_front(&mut self, i: usize, seg: usize) {
        let list = &mut self.lists[seg];
        self.nodes[i].set_next(list.head);
        self.nodes[i].set_prev(None);
        self.nodes[i].set_segment(seg);
        if let Some(h) = list.head {
            self.nodes[h].set_prev(Some(i));
        }
        list.head = Some(i);
        if list.tail.is_none() {
            list.tail = Some(i);
        }
        list.len += 1;
    }

    fn insert(&mut self, obj: Arc<Object>) -> usize {
        let node = LruNode::new(obj);
        let i = match self.free.pop() {
            Some(i) => {
                let i = i as usize;
                self.nodes[i] = node;
                i
            }
            None => {
                self.nodes.push(node);
                self.nodes.len() - 1
            }
        };
        self.push_front(i, PROBATION);
        i
    }

    /// Moves an object asked for again to the front of the protected
    /// list, sending protected's oldest back to probation past its share.
    fn touch(&mut self, i: usize) {
        self.unlink(i);
        self.push_front(i, PROTECTED);
        let total = self.lists[PROBATION].len + self.lists[PROTECTED].len;
        if self.lists[PROTECTED].len * 100 > total * PROTECTED_SHARE {
            if let Some(oldest) = self.lists[PROTECTED].tail {
                self.unlink(oldest);
                self.push_front(oldest, PROBATION);
                if let Some(o) = &self.nodes[oldest].obj {
                    o.set_lru_protected(false);
                }
            }
        }
    }

    /// The object to evict: probation's least recently used, else
    /// protected's.
    fn victim(&self) -> Option<usize> {
        self.lists[PROBATION].tail.or(self.lists[PROTECTED].tail)
    }

    #[cfg(test)]
    fn is_protected(&self, i: usize) -> bool {
        self.nodes[i].segment() == PROTECTED
    }

    fn remove(&mut self, i: usize) -> Option<Arc<Object>> {
        let obj = self.nodes.get_mut(i)?.obj.take()?;
        self.unlink(i);
        self.free.push(i as u32);
        Some(obj)
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
    lru: Option<Mutex<Lru>>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blocks::BLOCK;

    #[test]
    fn the_heap_places_nothing() {
        let obj = Arc::new(crate::tests::plain_object());
        let mut evicted = Vec::new();
        assert!(matches!(
            Malloc.allocate(5, 5, false, &obj, &mut evicted),
            Placement::Heap
        ));
    }

    #[test]
    fn lists_span_blocks_of_the_slab_and_reuse_freed_nodes() {
        let mut lru = Lru::default();
        let objs: Vec<_> = (0..BLOCK + 10)
            .map(|_| Arc::new(crate::tests::plain_object()))
            .collect();
        let slots: Vec<_> = objs.iter().map(|o| lru.insert(o.clone())).collect();
        assert_eq!(lru.nodes.blocks().len(), 2);
        assert!(lru.nodes.blocks().iter().all(|b| b.capacity() == BLOCK));
        // Oldest first, across the block boundary.
        for (i, o) in objs.iter().enumerate().take(BLOCK + 2) {
            let victim = lru.victim().expect("a victim");
            assert_eq!(victim, slots[i]);
            assert!(Arc::ptr_eq(&lru.remove(victim).expect("listed"), o));
        }
        // The last block's node asked again is protected; freed nodes are
        // taken again before the slab grows.
        lru.touch(slots[BLOCK + 5]);
        assert!(lru.is_protected(slots[BLOCK + 5]));
        let again = lru.insert(Arc::new(crate::tests::plain_object()));
        assert!(again < BLOCK + 2, "a freed node is reused");
        assert_eq!(lru.nodes.len(), BLOCK + 10);
        assert_eq!(lru.lists[PROBATION].len + lru.lists[PROTECTED].len, 9);
    }

    #[test]
    fn a_list_node_is_sixteen_bytes_and_keeps_its_links_and_segment() {
        assert_eq!(std::mem::size_of::<LruNode>(), 16);
        let mut n = LruNode::new(Arc::new(crate::tests::plain_object()));
        assert_eq!((n.prev(), n.next(), n.segment()), (None, None, PROBATION));
        n.set_segment(PROTECTED);
        n.set_prev(Some(7));
        n.set_next(Some(NIL as usize - 1));
        assert_eq!(
            (n.prev(), n.next(), n.segment()),
            (Some(7), Some(NIL as usize - 1), PROTECTED)
        );
        n.set_prev(None);
        assert_eq!((n.prev(), n.segment()), (None, PROTECTED));
        n.set_segment(PROBATION);
        assert_eq!((n.prev(), n.segment()), (None, PROBATION));
    }
}
