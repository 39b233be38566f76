//! Storage: a named byte budget (`-s name=malloc,SIZE`) with its own LRU
//! list, plus the unbounded Transient store for uncacheable and short-lived
//! objects. Bytes are charged as a fetch stores them and released when the
//! last reference to the object goes away; where they live is the
//! store's engine's business (`engine.rs`).

use crate::engine::{Engine, Malloc};
use crate::object::Object;
use lacquer_core::counters::{StoreCounter, StoreCounters};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The LRU list: a doubly linked list in a slab, so objects can be moved
/// and removed by index without searching.
#[derive(Debug, Default)]
struct Lru {
    nodes: Vec<LruNode>,
    free: Vec<usize>,
    head: Option<usize>,
    tail: Option<usize>,
}

#[derive(Debug)]
struct LruNode {
    prev: Option<usize>,
    next: Option<usize>,
    obj: Option<Arc<Object>>,
}

impl Lru {
    fn unlink(&mut self, i: usize) {
        let (prev, next) = (self.nodes[i].prev, self.nodes[i].next);
        match prev {
            Some(p) => self.nodes[p].next = next,
            None => self.head = next,
        }
        match next {
            Some(n) => self.nodes[n].prev = prev,
            None => self.tail = prev,
        }
        self.nodes[i].prev = None;
        self.nodes[i].next = None;
    }

    fn push_front(&mut self, i: usize) {
        self.nodes[i].next = self.head;
        self.nodes[i].prev = None;
        if let Some(h) = self.head {
            self.nodes[h].prev = Some(i);
        }
        self.head = Some(i);
        if self.tail.is_none() {
            self.tail = Some(i);
        }
    }

    fn insert(&mut self, obj: Arc<Object>) -> usize {
        let node = LruNode {
            prev: None,
            next: None,
            obj: Some(obj),
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.nodes[i] = node;
                i
            }
            None => {
                self.nodes.push(node);
                self.nodes.len() - 1
            }
        };
        self.push_front(i);
        i
    }

    fn remove(&mut self, i: usize) -> Option<Arc<Object>> {
        let obj = self.nodes.get_mut(i)?.obj.take()?;
        self.unlink(i);
        self.free.push(i);
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
    pub fn counters(&self, out: &mut Vec<u64>) {
        self.stats.set(StoreCounter::g_bytes, self.used());
        let space = if self.budget == u64::MAX {
            0
        } else {
            self.space()
        };
        self.stats.set(StoreCounter::g_space, space);
        self.stats.snapshot(out);
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

    /// Puts an object on the front of the LRU list.
    pub(crate) fn lru_insert(&self, obj: &Arc<Object>, now: f64) {
        if let Some(lru) = &self.lru {
            let mut lru = lru.lock().unwrap_or_else(|e| e.into_inner());
            if obj.is_removed() || obj.lru_slot.load(Ordering::Relaxed) != usize::MAX {
                return;
            }
            let slot = lru.insert(obj.clone());
            obj.lru_slot.store(slot, Ordering::Relaxed);
            obj.lru_stamp.set(now);
        }
    }

    /// Moves an object to the front, at most once per `interval`.
    pub(crate) fn lru_touch(&self, obj: &Object, now: f64, interval: f64) -> bool {
        let Some(lru) = &self.lru else { return false };
        if now - obj.lru_stamp.get() < interval {
            return false;
        }
        let mut lru = lru.lock().unwrap_or_else(|e| e.into_inner());
        let slot = obj.lru_slot.load(Ordering::Relaxed);
        if slot == usize::MAX || lru.nodes.get(slot).is_none_or(|n| n.obj.is_none()) {
            return false;
        }
        lru.unlink(slot);
        lru.push_front(slot);
        obj.lru_stamp.set(now);
        true
    }

    /// Takes an object off the LRU list.
    pub(crate) fn lru_remove(&self, obj: &Object) -> Option<Arc<Object>> {
        let lru = self.lru.as_ref()?;
        let mut lru = lru.lock().unwrap_or_else(|e| e.into_inner());
        let slot = obj.lru_slot.swap(usize::MAX, Ordering::Relaxed);
        if slot == usize::MAX {
            return None;
        }
        lru.remove(slot)
    }

    /// Takes the least recently used object off the list, to be evicted.
    pub(crate) fn lru_pop(&self) -> Option<Arc<Object>> {
        let lru = self.lru.as_ref()?;
        let mut lru = lru.lock().unwrap_or_else(|e| e.into_inner());
        let tail = lru.tail?;
        let obj = lru.remove(tail)?;
        obj.lru_slot.store(usize::MAX, Ordering::Relaxed);
        Some(obj)
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
