//! The cache: a sharded index from hash keys to object heads, each holding
//! the variants of one resource and at most one busy fetch with its waiting
//! list; expiry; storage with LRU eviction; bans. Locks here are short and
//! never held across an await.

#![forbid(unsafe_code)]

pub mod ban;
mod blocks;
pub mod body;
mod expiry;
pub mod file;
pub mod fill;
mod floats;
mod head;
mod heap;
mod index;
mod lru;
pub mod object;
mod packed;
pub mod persist;
pub mod rendition;
mod slot;
pub mod space;
pub mod store;
pub mod tags;
pub mod ttl;
mod vary;

use ban::{BanReq, Bans};
use index::Index;
use lacquer_core::counters::{Counter, StoreCounter, COUNTERS};
pub use object::Digest;
use object::{ObjKind, Object};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use store::Store;
use tags::TagIndex;
use tokio::sync::watch;

pub use body::{Body, BodyFailed, RangeReader, Whole};
pub use fill::{FillHandle, NoRoom};
pub use head::BusyState;
use head::{Busy, Head};
pub use object::{FieldValue, ObjectInit, Timers, ValueBytes, VarySpec};
pub use slot::FetchSlot;

/// The result of a lookup.
pub enum Lookup {
    /// A fresh object.
    Hit(Arc<Object>),
    /// A stale object within grace; `refresh` is set when this request must
    /// start the background fetch.
    Grace {
        obj: Arc<Object>,
        refresh: Option<FetchSlot>,
    },
    /// A hit-for-miss marker: fetch without coalescing.
    HitMiss {
        marker: Arc<Object>,
        slot: FetchSlot,
    },
    /// A hit-for-pass marker: pass.
    HitPass(Arc<Object>),
    /// Nothing usable: this request fetches, others wait on it.
    Miss(FetchSlot),
    /// Another request is fetching it: wait, then act on the state.
    Wait(watch::Receiver<BusyState>),
}

/// How objects leave the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removal {
    Expired,
    Nuked,
    Replaced,
    Failed,
    Purged,
    Banned,
}

/// How fresh a lookup wants an object: `req.grace` caps the grace it
/// accepts, and a client's `max-stale` and `min-fresh` (RFC 9111
/// §5.2.1.2, §5.2.1.3) widen and narrow what it accepts.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Wants {
    /// `req.grace`: at most this much of an object's grace.
    pub grace: Option<f64>,
    /// Staleness accepted beyond grace, unless the object forbids it.
    pub max_stale: Option<f64>,
    /// Time an object must stay fresh to be a hit.
    pub min_fresh: f64,
    /// `req.hash_ignore_vary`: the first variant found will do, whatever
    /// its `Vary` asks.
    pub ignore_vary: bool,
    /// `req.hash_ignore_busy`: a fetch under way is not waited for; the
    /// request fetches on its own.
    pub ignore_busy: bool,
}

impl Wants {
    /// How long past its TTL `obj` (with `left` seconds of it to go) may
    /// be delivered, a background fetch refreshing it. A fresh object
    /// that is not fresh enough for `min-fresh` is none of it, and
    /// neither is a stale one unless `max-stale` allows: the client wants
    /// a newer one.
    fn usable_grace(&self, obj: &Object, left: f64) -> f64 {
        if left > 0.0 || (self.min_fresh > 0.0 && self.max_stale.is_none()) {
            return f64::NEG_INFINITY;
        }
        let grace = obj.timers().grace;
        let mut usable = self.grace.map_or(grace, |g| g.min(grace));
        if let Some(max_stale) = self.max_stale {
            if max_stale > usable && !ttl::forbids_stale(&obj.headers()) {
                usable = max_stale;
            }
        }
        usable
    }
}

/// The object index and its stores.
pub struct Cache {
    index: Index,
    stores: Vec<Arc<Store>>,
    transient: Arc<Store>,
    next_store: AtomicUsize,
    /// Objects by the millisecond they are due.
    expiry: Mutex<expiry::Expiry>,
    bans: Bans,
    tags: TagIndex,
    /// Records a restart left asleep in the persistent stores, built into
    /// objects when their keys are first asked for (`persist::dormant`).
    asleep: Arc<AtomicU64>,
}

/// A soft purge (vmod purge's `soft`, xkey's `softpurge`): new lifetimes
/// that only ever shorten an object's. `ttl` counts from now; a negative
/// `grace` or `keep` leaves that one as it is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SoftPurge {
    pub ttl: f64,
    pub grace: f64,
    pub keep: f64,
}

impl SoftPurge {
    /// Stale at once, grace and keep untouched.
    pub const STALE: SoftPurge = SoftPurge {
        ttl: 0.0,
        grace: -1.0,
        keep: -1.0,
    };

    /// The timers after the purge, or None when it changes nothing.
    pub fn reduce(&self, t: Timers, now: f64) -> Option<Timers> {
        let mut out = t;
        let ttl = now + self.ttl.max(0.0) - t.t_origin;
        if ttl < t.ttl {
            out.ttl = ttl;
        }
        if self.grace >= 0.0 && self.grace < t.grace {
            out.grace = self.grace;
        }
        if self.keep >= 0.0 && self.keep < t.keep {
            out.keep = self.keep;
        }
        (out != t).then_some(out)
    }
}

impl Cache {
    /// A cache over the given stores (round-robin) and a Transient store.
    pub fn new(stores: Vec<Arc<Store>>, transient: Arc<Store>) -> Arc<Cache> {
        let cache = Arc::new(Cache {
            index: Index::new(),
            stores,
            transient,
            next_store: AtomicUsize::new(0),
            expiry: Mutex::default(),
            bans: Bans::new(lacquer_core::time::now()),
            tags: TagIndex::new(),
            asleep: Arc::default(),
        });
        // Stores that keep objects across restarts keep the bans too.
        let weak = Arc::downgrade(&cache);
        cache
            .bans
            .set_journal(ban::Journal(Box::new(move |time, text| {
                if let Some(cache) = weak.upgrade() {
                    for store in &cache.stores {
                        store
                            .engine()
                            .ban_added(time, text, &|victim| cache.remove(victim, Removal::Nuked));
                    }
                }
            })));
        cache
    }

    /// The ban list.
    pub fn bans(&self) -> &Bans {
        &self.bans
    }

    pub fn stores(&self) -> &[Arc<Store>] {
        &self.stores
    }

    pub fn transient(&self) -> &Arc<Store> {
        &self.transient
    }

    /// Looks a key up for a request. Objects found are first tested
    /// against the bans added since they were last tested.
    pub fn lookup(
        self: &Arc<Self>,
        key: &[u8],
        req: BanReq<'_>,
        now: f64,
        lru_interval: f64,
    ) -> Lookup {
        self.lookup_wanting(key, req, now, lru_interval, Wants::default())
    }

    /// A lookup by a request that says how fresh an object must be
    /// ([`Wants`]): an object that does not qualify is not delivered,
    /// but its fetch may still revalidate it.
    pub fn lookup_wanting(
        self: &Arc<Self>,
        key: &[u8],
        req: BanReq<'_>,
        now: f64,
        lru_interval: f64,
        wants: Wants,
    ) -> Lookup {
        let mut banned = Vec::new();
        let found = self.lookup_locked(key, req, now, lru_interval, wants, &mut banned);
        for obj in &banned {
            self.forget(obj, Removal::Banned);
        }
        found
    }

    fn lookup_locked(
        self: &Arc<Self>,
        key: &[u8],
        req: BanReq<'_>,
        now: f64,
        lru_interval: f64,
        wants: Wants,
        banned: &mut Vec<Arc<Object>>,
    ) -> Lookup {
        let digest = self.index.digest(key);
        let mut map = self.lock_awake(digest, now);
        let head_seq = self.bans.head_seq();
        let head = match map.get(digest) {
            None => {
                let (busy, _) = Busy::new(digest);
                map.insert(Head::Fetching(busy.clone()));
                COUNTERS.inc(Counter::n_objecthead);
                drop(map);
                return Lookup::Miss(self.slot(digest, key, Some(busy)));
            }
            Some(head) => head,
        };
        // The one change a lookup makes before it decides: variants newer
        // bans kill leave the head. A lookup that changes nothing reads
        // the head in place, found once.
        let head = if head.objs().iter().any(|o| o.ban_seq() < head_seq) {
            if let Some(mut head) = map.get_mut(digest) {
                head.retain(|o| {
                    let dead = o.ban_seq() < head_seq && self.bans.check_at_lookup(o, req);
                    if dead {
                        o.mark_removed();
                        banned.push(o.clone());
                    }
                    !dead
                });
            };
            // None: every variant was banned (the head, still counted,
            // went).
            map.get(digest)
        } else {
            Some(head)
        };
        let objs = head.map_or(&[][..], |h| h.objs());
        let head_busy = head.and_then(|h| h.busy());
        let req = req.headers;
        let mut grace: Option<&Arc<Object>> = None;
        // An object past its grace but within keep, that a conditional
        // fetch can revalidate or a failed one fall back on.
        let mut kept: Option<&Arc<Object>> = None;
        for obj in objs {
            if !wants.ignore_vary && obj.vary().as_ref().is_some_and(|v| !v.matches(req)) {
                continue;
            }
            let left = obj.ttl_left(now);
            match obj.kind() {
                ObjKind::HitMiss if left > 0.0 => {
                    let marker = obj.clone();
                    drop(map);
                    return Lookup::HitMiss {
                        marker,
                        slot: self.slot(digest, key, None),
                    };
                }
                ObjKind::HitPass if left > 0.0 => return Lookup::HitPass(obj.clone()),
                ObjKind::HitMiss | ObjKind::HitPass => continue,
                ObjKind::Normal => {
                    // Stored with no TTL at all, an object served only the
                    // request that fetched it: as in Varnish, lookups pass
                    // over it (it does not hide a graced older one).
                    if obj.body().is_failed() || obj.timers().ttl <= 0.0 {
                        continue;
                    }
                    if left > 0.0 && !obj.min_fresh_refuses(wants.min_fresh, left, now) {
                        let obj = obj.clone();
                        drop(map);
                        self.touch(&obj, now, lru_interval);
                        count_hit(&obj, false);
                        return Lookup::Hit(obj);
                    }
                    let t = obj.timers();
                    let usable = wants.usable_grace(obj, left);
                    if grace.is_none() && left + usable > 0.0 {
                        grace = Some(obj);
                    } else if kept.is_none()
                        && left + t.grace.max(0.0) + t.keep > 0.0
                        && obj.body().is_complete()
                    {
                        kept = Some(obj);
                    }
                }
            }
        }
        let grace = grace.cloned();
        if head_busy.is_some() && grace.is_none() && wants.ignore_busy {
            // Its own fetch, which replaces the variant when it is done
            // and makes nobody wait.
            drop(map);
            return Lookup::Miss(self.slot(digest, key, None));
        }
        // Predictive vary: a fetch under way for another variant is not
        // waited for; this request fetches its own.
        let other_variant = head_busy
            .and_then(|b| b.vary.as_ref())
            .is_some_and(|v| !v.matches(req));
        if other_variant && grace.is_none() && !wants.ignore_vary {
            drop(map);
            return Lookup::Miss(self.slot(digest, key, None));
        }
        if let Some(busy) = head_busy {
            return match grace {
                Some(obj) => {
                    count_hit(&obj, true);
                    Lookup::Grace { obj, refresh: None }
                }
                None => Lookup::Wait(busy.tx.subscribe()),
            };
        }
        let kept = kept.cloned();
        let predicted = objs.iter().find_map(|o| o.vary()).map(|v| v.predict(req));
        let (busy, _) = Busy::predicting(digest, predicted);
        let banned_out = match map.get_mut(digest) {
            Some(mut head) => {
                head.set_busy(Some(busy.clone()));
                false
            }
            None => true,
        };
        if banned_out {
            // Its variants were all banned just now: the key's head (still
            // counted) comes back as this fetch.
            map.insert(Head::Fetching(busy.clone()));
        }
        drop(map);
        let mut slot = self.slot(digest, key, Some(busy));
        match grace {
            Some(obj) => {
                self.touch(&obj, now, lru_interval);
                count_hit(&obj, true);
                slot.stale = obj.body().is_complete().then(|| obj.clone());
                Lookup::Grace {
                    obj,
                    refresh: Some(slot),
                }
            }
            None => {
                slot.stale = kept;
                Lookup::Miss(slot)
            }
        }
    }

    /// A lookup that ignores what is stored (`req.hash_always_miss`): the
    /// request fetches a fresh copy that replaces its variant, without
    /// making others wait on it.
    pub fn lookup_fresh_fetch(self: &Arc<Self>, key: &[u8]) -> Lookup {
        let digest = self.index.digest(key);
        Lookup::Miss(self.slot(digest, key, None))
    }

    fn slot(self: &Arc<Self>, digest: Digest, key: &[u8], busy: Option<Arc<Busy>>) -> FetchSlot {
        FetchSlot {
            cache: self.clone(),
            key: index::SlotKey::new(digest, key),
            busy,
            ban: Some(self.bans.head()),
            stale: None,
        }
    }

    fn touch(&self, obj: &Arc<Object>, now: f64, interval: f64) {
        if let Some(store) = obj.store() {
            if store.lru_touch(obj, now, interval) {
                COUNTERS.inc(Counter::n_lru_moved);
            }
        }
    }

    /// The store a new object goes to: Transient for what will not be
    /// kept (`transient`: uncacheable, or shorter-lived than
    /// `shortlived`), else the one VCL named (`beresp.storage`), else the
    /// next of the `-s` stores in turn.
    pub fn store_for(&self, transient: bool, named: Option<&str>) -> Arc<Store> {
        if transient || self.stores.is_empty() {
            return self.transient.clone();
        }
        if let Some(store) = named.and_then(|name| self.store_named(name)) {
            return store;
        }
        let i = self.next_store.fetch_add(1, Ordering::Relaxed) % self.stores.len();
        self.stores[i].clone()
    }

    /// The store called `name` (Transient included).
    pub fn store_named(&self, name: &str) -> Option<Arc<Store>> {
        if name == self.transient.name() {
            return Some(self.transient.clone());
        }
        self.stores.iter().find(|s| s.name() == name).cloned()
    }

    /// Charges an object to the store it was made for (once), with its
    /// fixed overhead and the given bytes. Evicts up to `nuke_limit`
    /// objects to make room; false when there still is none. An object
    /// made for no store, or already charged, is left as it is (true).
    pub fn attach(&self, obj: &Arc<Object>, bytes: u64, nuke_limit: u64) -> bool {
        if !obj.set_attached() {
            return true;
        }
        let Some(store) = obj.store().cloned() else {
            return true;
        };
        store.stats.inc(StoreCounter::c_req);
        store.stats.inc(StoreCounter::g_alloc);
        self.allocate(obj, &store, object::OBJECT_OVERHEAD + bytes, nuke_limit)
    }

    /// Charges more bytes to an object's store, evicting as needed.
    pub fn grow(&self, obj: &Arc<Object>, bytes: u64, nuke_limit: u64) -> bool {
        match obj.store() {
            Some(store) => {
                let store = store.clone();
                self.allocate(obj, &store, bytes, nuke_limit)
            }
            None => true,
        }
    }

    fn allocate(&self, obj: &Arc<Object>, store: &Arc<Store>, bytes: u64, nuke_limit: u64) -> bool {
        let mut nuked = 0;
        loop {
            if store.try_reserve(bytes) {
                obj.allocated.fetch_add(bytes, Ordering::Relaxed);
                return true;
            }
            if nuked >= nuke_limit {
                COUNTERS.inc(Counter::n_lru_limited);
                store.stats.inc(StoreCounter::c_fail);
                return false;
            }
            match store.lru_pop() {
                Some(victim) if !Arc::ptr_eq(&victim, obj) => {
                    self.remove(&victim, Removal::Nuked);
                    nuked += 1;
                }
                Some(_) => continue,
                None => {
                    store.stats.inc(StoreCounter::c_fail);
                    return false;
                }
            }
        }
    }

    /// Takes an object out of the index, its LRU list and the expiry queue.
    pub fn remove(&self, obj: &Arc<Object>, why: Removal) {
        if obj.mark_removed() {
            return;
        }
        if let Some(digest) = obj.digest() {
            let mut map = self.index.lock(digest.hash());
            if let Some(mut head) = map.get_mut(digest) {
                head.retain(|o| !Arc::ptr_eq(o, obj));
                // An emptied head is not put back.
                if head.is_empty() {
                    COUNTERS.dec(Counter::n_objecthead);
                }
            };
        }
        self.forget(obj, why);
    }

    /// The objects stored under a key, every variant.
    fn variants(self: &Arc<Self>, key: &[u8]) -> Vec<Arc<Object>> {
        let digest = self.index.digest(key);
        let map = self.lock_awake(digest, lacquer_core::time::now());
        map.get(digest)
            .map(|h| h.objs().to_vec())
            .unwrap_or_default()
    }

    /// Removes every variant stored under a key (`return (purge)`);
    /// returns how many objects went.
    pub fn purge(self: &Arc<Self>, key: &[u8]) -> usize {
        let objs = self.variants(key);
        for obj in &objs {
            self.remove(obj, Removal::Purged);
        }
        objs.len()
    }

    /// Soft-purges every variant stored under a key (vmod purge's
    /// `soft`); returns how many objects it shortened.
    pub fn soft_purge(self: &Arc<Self>, key: &[u8], how: SoftPurge, now: f64) -> usize {
        let objs = self.variants(key);
        objs.iter().filter(|o| self.reduce(o, how, now)).count()
    }

    /// Purges (or with `soft`, soft-purges) every object carrying any of
    /// the tags; returns how many objects it acted on.
    pub fn purge_tags<'a>(
        &self,
        tags: impl Iterator<Item = &'a [u8]>,
        soft: Option<SoftPurge>,
        now: f64,
    ) -> usize {
        let mut objs: Vec<Arc<Object>> = Vec::new();
        for tag in tags {
            objs.extend(self.tags.objects(tag));
        }
        objs.sort_unstable_by_key(|o| Arc::as_ptr(o) as usize);
        objs.dedup_by(|a, b| Arc::ptr_eq(a, b));
        let mut n = 0;
        for obj in &objs {
            if obj.is_removed() {
                continue;
            }
            match soft {
                Some(how) => {
                    self.reduce(obj, how, now);
                }
                None => self.remove(obj, Removal::Purged),
            }
            n += 1;
        }
        n
    }

    /// How many distinct tags stored objects carry.
    pub fn tag_count(&self) -> usize {
        self.tags.len()
    }

    /// Applies a soft purge to one object: new timers and a new place in
    /// the expiry queue, or removal when its lifetime is over. True when
    /// its lifetime was shortened.
    fn reduce(&self, obj: &Arc<Object>, how: SoftPurge, now: f64) -> bool {
        let Some(timers) = how.reduce(obj.timers(), now) else {
            return false;
        };
        self.unschedule(obj);
        obj.set_timers(timers);
        if let Some(store) = obj.store() {
            store.engine().retimed(obj);
        }
        if obj.expires_at() <= now {
            self.remove(obj, Removal::Purged);
        } else if !obj.is_removed() {
            self.schedule(obj);
        }
        true
    }

    /// Bookkeeping for an object already unlinked from its head.
    fn forget(&self, obj: &Arc<Object>, why: Removal) {
        obj.release_ban();
        if let Some(store) = obj.store() {
            store.engine().forget(obj);
        }
        if let Some(tags) = obj.tags() {
            self.tags.remove(obj, tags);
        }
        if let Some(store) = obj.store() {
            store.lru_remove(obj);
        }
        if obj.digest().is_some() {
            // Its entry on the lists went with its node. Under the lock,
            // always: a schedule racing with this removal either comes
            // first (and its entry goes here) or sees the object removed.
            let mut exp = self.expiry.lock().unwrap_or_else(|e| e.into_inner());
            exp.remove(obj);
        }
        if obj.digest().is_some() {
            if obj.kind() == ObjKind::Normal {
                COUNTERS.dec(Counter::n_object);
            }
            COUNTERS.dec(Counter::n_objectcore);
        }
        match why {
            Removal::Expired => COUNTERS.inc(Counter::n_expired),
            Removal::Nuked => COUNTERS.inc(Counter::n_lru_nuked),
            _ => {}
        }
    }

    /// Distinct keys in the index (`n_objecthead`).
    pub fn heads(&self) -> usize {
        self.index.len()
    }
}

/// Counts a hit where the lookup makes it: `MAIN.cache_hit` (and
/// `cache_hit_grace` for a stale object delivered in grace) and the
/// object's own count (`obj.hits`).
fn count_hit(obj: &Object, grace: bool) {
    COUNTERS.inc(Counter::cache_hit);
    if grace {
        COUNTERS.inc(Counter::cache_hit_grace);
    }
    obj.hits.fetch_add(1, Ordering::Relaxed);
}

#[cfg(test)]
mod object_tests;
#[cfg(test)]
mod tests;
