//! The fetch slot: the right to put a fetched object into the index,
//! with the busy state that makes other requests for the key wait on that
//! fetch, and what follows an object's entry into the index (counters,
//! tags, the variants it replaces, its LRU place, its store's engine, its
//! expiry and the bans it missed).

use crate::ban::BanRef;
use crate::head::{Busy, BusyState};
use crate::object::{ObjKind, Object};
use crate::{index, tags, Cache, Removal};
use lacquer_core::counters::{Counter, COUNTERS};
use lacquer_http::Headers;
use std::sync::Arc;

/// The right (and duty) to put a fetched object into the index. Dropping
/// it without using it wakes the waiters to look up again.
pub struct FetchSlot {
    pub(crate) cache: Arc<Cache>,
    /// The key's digest, computed once at lookup, and the key itself, for
    /// an engine that writes it down.
    pub(crate) key: index::SlotKey,
    pub(crate) busy: Option<Arc<Busy>>,
    /// The newest ban when the fetch began: the object's place in the list.
    pub(crate) ban: Option<BanRef>,
    /// A stale object (within grace or keep, whole) the fetch may
    /// revalidate instead of fetching whole, or fall back on.
    pub(crate) stale: Option<Arc<Object>>,
}

impl Cache {
    /// What follows an object's entry into the index: counters, its
    /// surrogate keys, the variants it replaced going, its LRU place, its
    /// store's engine told, its expiry, and the bans it missed.
    pub(crate) fn settle(
        self: &Arc<Self>,
        obj: &Arc<Object>,
        key: &[u8],
        replaced: &[Arc<Object>],
    ) {
        let cache = self;
        if obj.kind() == ObjKind::Normal {
            COUNTERS.inc(Counter::n_object);
            let tags = tags::tags_of_fields(obj.fields().map(|(n, v)| (n, v.bytes())));
            if !tags.is_empty() && obj.extra().tags.set(tags.into_boxed_slice()).is_ok() {
                let tags = obj.tags().expect("just set");
                cache.tags.add(obj, tags);
                // Removed meanwhile: its removal could not see the tags.
                if obj.is_removed() {
                    cache.tags.remove(obj, tags);
                }
            }
        }
        COUNTERS.inc(Counter::n_objectcore);
        for old in replaced {
            cache.forget(old, Removal::Replaced);
        }
        if let Some(store) = obj.store() {
            if store.has_lru() {
                store.lru_insert(obj, lacquer_core::time::now());
            }
            store
                .engine()
                .inserted(obj, key, &|victim| cache.remove(victim, Removal::Nuked));
        }
        cache.schedule(obj);
        if cache.bans.check_at_insert(obj) {
            cache.remove(obj, Removal::Banned);
        }
    }
}

impl FetchSlot {
    /// Completes once no request waits for this fetch's object (at once
    /// when none ever did; a request arriving later finds the object
    /// busy and waits again, so this may be asked again).
    pub async fn unwaited(&self) {
        if let Some(busy) = &self.busy {
            busy.tx.closed().await;
        }
    }

    /// The stale object this fetch may revalidate, or fall back on when
    /// it fails (`stale-if-error`).
    pub fn stale(&self) -> Option<&Arc<Object>> {
        self.stale.as_ref()
    }

    /// Puts an object (or marker) into the index, replacing the variants
    /// the fetching request selected, and wakes the waiters.
    pub fn insert(mut self, obj: &Arc<Object>, req: &Headers) {
        let cache = self.cache.clone();
        let digest = self.key.digest();
        obj.set_digest(digest);
        if let Some(ban) = self.ban.take() {
            obj.set_ban(ban);
        }
        let mut replaced = Vec::new();
        {
            let mut map = cache.lock_awake(digest, lacquer_core::time::now());
            let mut head = map.head_for(digest);
            // Its fetch ends first: a first miss's head is then its
            // object alone, with nothing boxed on the way.
            let mine = match (&self.busy, head.busy()) {
                (Some(mine), Some(current)) => Arc::ptr_eq(mine, current),
                _ => false,
            };
            if mine {
                head.set_busy(None);
            }
            // An object with no TTL serves its own request only: it does
            // not replace what is there (a graced variant stays usable).
            let replaces = obj.kind() != ObjKind::Normal || obj.timers().ttl > 0.0;
            head.retain(|old| {
                let same_variant = replaces && old.vary().as_ref().is_none_or(|v| v.matches(req));
                if same_variant {
                    old.mark_removed();
                    replaced.push(old.clone());
                }
                !same_variant
            });
            head.push_front(obj.clone());
        }
        cache.settle(obj, self.key.key(), &replaced);
        if let Some(busy) = self.busy.take() {
            busy.tx.send_replace(BusyState::Relookup);
        }
    }

    /// Gives up without inserting. Waiters get `deliver` if given (the
    /// error response of a failed fetch), else look up again.
    pub fn abandon(mut self, deliver: Option<Arc<Object>>) {
        self.release(match deliver {
            Some(obj) => BusyState::Deliver(obj),
            None => BusyState::Relookup,
        });
    }

    fn release(&mut self, state: BusyState) {
        let Some(busy) = self.busy.take() else { return };
        {
            let digest = self.key.digest();
            let mut map = self.cache.index.lock(digest.hash());
            if let Some(mut head) = map.get_mut(digest) {
                if head.busy().is_some_and(|b| Arc::ptr_eq(b, &busy)) {
                    head.set_busy(None);
                }
                // An emptied head is not put back.
                if head.is_empty() {
                    COUNTERS.dec(Counter::n_objecthead);
                }
            };
        }
        busy.tx.send_replace(state);
    }
}

impl Drop for FetchSlot {
    fn drop(&mut self) {
        self.release(BusyState::Relookup);
    }
}
