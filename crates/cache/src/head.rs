//! A key's head in the index: the variants stored under the key (newest
//! first) and the fetch under way that other requests for it wait on. A
//! head is 16 bytes: most keys have one variant and no fetch, held as
//! that object alone; a first miss is its fetch alone; anything else is
//! boxed. A head keeps no digest of its own: it is found by its newest
//! variant's, or while it has none by its fetch's.

use crate::object::{Digest, Object, VarySpec};
use std::sync::Arc;
use tokio::sync::watch;

/// What waiters on a busy object are told when it resolves.
#[derive(Debug, Clone)]
pub enum BusyState {
    Pending,
    /// Look the object up again: it was inserted (or a marker was).
    Relookup,
    /// Deliver this object (the fetch failed; this is its error response).
    Deliver(Arc<Object>),
}

/// A fetch under way for a key.
#[derive(Debug)]
pub(crate) struct Busy {
    pub(crate) tx: watch::Sender<BusyState>,
    /// The variant the fetch is expected to bring, predicted from the
    /// stored variants' `Vary` and the fetching request: a request that
    /// would not select it does not wait for it.
    pub(crate) vary: Option<VarySpec>,
    /// The key's digest (a head with no variant yet is found by it).
    pub(crate) digest: Digest,
}

impl Busy {
    pub(crate) fn new(digest: Digest) -> (Arc<Busy>, watch::Receiver<BusyState>) {
        Busy::predicting(digest, None)
    }

    pub(crate) fn predicting(
        digest: Digest,
        vary: Option<VarySpec>,
    ) -> (Arc<Busy>, watch::Receiver<BusyState>) {
        let (tx, rx) = watch::channel(BusyState::Pending);
        (Arc::new(Busy { tx, vary, digest }), rx)
    }
}

/// A key's variants and its fetch under way.
#[derive(Debug, Default)]
pub(crate) enum Head {
    /// Neither: a head being emptied, which leaves its table before
    /// anything else looks at it.
    #[default]
    Empty,
    /// One variant and no fetch (most keys).
    One(Arc<Object>),
    /// A fetch and no variant yet (a first miss).
    Fetching(Arc<Busy>),
    /// Several variants, or variants and a fetch.
    Full(Box<Full>),
}

/// A head of several variants, or of variants and a fetch.
#[derive(Debug, Default)]
pub(crate) struct Full {
    objs: Vec<Arc<Object>>,
    busy: Option<Arc<Busy>>,
}

impl Head {
    /// The variants, newest first.
    #[inline]
    pub fn objs(&self) -> &[Arc<Object>] {
        match self {
            Head::One(o) => std::slice::from_ref(o),
            Head::Full(f) => &f.objs,
            Head::Empty | Head::Fetching(_) => &[],
        }
    }

    /// The fetch under way.
    #[inline]
    pub fn busy(&self) -> Option<&Arc<Busy>> {
        match self {
            Head::Fetching(b) => Some(b),
            Head::Full(f) => f.busy.as_ref(),
            Head::Empty | Head::One(_) => None,
        }
    }

    /// Neither a variant nor a fetch: the head leaves its table.
    pub fn is_empty(&self) -> bool {
        matches!(self, Head::Empty)
    }

    /// The key's digest, as its newest variant or its fetch knows it
    /// (None for a head being emptied).
    pub fn digest(&self) -> Option<Digest> {
        match self.objs().first() {
            Some(o) => o.digest(),
            None => self.busy().map(|b| b.digest),
        }
    }

    /// Keeps the variants `keep` says to keep, in order.
    pub fn retain(&mut self, mut keep: impl FnMut(&Arc<Object>) -> bool) {
        match self {
            Head::One(o) => {
                if !keep(o) {
                    *self = Head::Empty;
                }
            }
            Head::Full(f) => {
                f.objs.retain(|o| keep(o));
                self.compact();
            }
            Head::Empty | Head::Fetching(_) => {}
        }
    }

    /// Puts the newest variant first.
    pub fn push_front(&mut self, obj: Arc<Object>) {
        *self = match std::mem::take(self) {
            Head::Empty => Head::One(obj),
            Head::One(old) => Head::full(vec![obj, old], None),
            Head::Fetching(b) => Head::full(vec![obj], Some(b)),
            Head::Full(mut f) => {
                f.objs.insert(0, obj);
                Head::Full(f)
            }
        };
    }

    /// Sets (or with None ends) the fetch under way.
    pub fn set_busy(&mut self, busy: Option<Arc<Busy>>) {
        *self = match (std::mem::take(self), busy) {
            (Head::Empty | Head::Fetching(_), None) => Head::Empty,
            (Head::Empty | Head::Fetching(_), Some(b)) => Head::Fetching(b),
            (Head::One(o), None) => Head::One(o),
            (Head::One(o), Some(b)) => Head::full(vec![o], Some(b)),
            (Head::Full(mut f), busy) => {
                f.busy = busy;
                let mut head = Head::Full(f);
                head.compact();
                head
            }
        };
    }

    fn full(objs: Vec<Arc<Object>>, busy: Option<Arc<Busy>>) -> Head {
        Head::Full(Box::new(Full { objs, busy }))
    }

    /// A boxed head that one of the other forms can hold takes it.
    fn compact(&mut self) {
        let Head::Full(f) = self else { return };
        let simpler = match (f.objs.len(), &f.busy) {
            (0, None) => Head::Empty,
            (0, Some(_)) => Head::Fetching(f.busy.take().expect("a fetch")),
            (1, None) => Head::One(f.objs.pop().expect("one")),
            _ => return,
        };
        *self = simpler;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_is_two_words_and_boxes_only_what_few_keys_have() {
        assert_eq!(std::mem::size_of::<Head>(), 16);
        let d = Digest::from_halves([7, 8]);
        let a = Arc::new(crate::tests::plain_object());
        let b = Arc::new(crate::tests::plain_object());
        a.set_digest(d);
        b.set_digest(d);
        let (busy, _) = Busy::new(d);
        // A first miss: its fetch alone, then its object alone.
        let mut h = Head::Empty;
        h.set_busy(Some(busy.clone()));
        assert!(matches!(h, Head::Fetching(_)));
        assert_eq!(h.digest(), Some(d));
        h.set_busy(None);
        h.push_front(a.clone());
        assert!(matches!(h, Head::One(_)));
        assert_eq!(h.digest(), Some(d));
        // A refresh: the object and a fetch, boxed, back to the object.
        h.set_busy(Some(busy.clone()));
        assert!(matches!(h, Head::Full(_)));
        assert!(h.busy().is_some() && h.objs().len() == 1);
        h.set_busy(None);
        assert!(matches!(h, Head::One(_)));
        // Two variants, newest first; one goes, then the other.
        h.push_front(b.clone());
        assert_eq!(h.objs().len(), 2);
        assert!(Arc::ptr_eq(&h.objs()[0], &b), "newest first");
        h.retain(|o| Arc::ptr_eq(o, &a));
        assert!(matches!(h, Head::One(ref o) if Arc::ptr_eq(o, &a)));
        h.retain(|_| false);
        assert!(h.is_empty());
        assert_eq!(h.digest(), None);
        // Variants gone while a fetch is under way: the fetch alone.
        h.push_front(a.clone());
        h.set_busy(Some(busy));
        h.retain(|_| false);
        assert!(matches!(h, Head::Fetching(_)));
    }
}
