//! A store's eviction lists (a segmented LRU over a slab of nodes) and
//! the expiry queue of the objects on them, under the store's one lock:
//! the queue names objects by their node, which holds the object already.

use crate::blocks::Blocks;
use crate::heap::{Heap, Places, NOT_QUEUED};
use std::sync::Arc;

/// What the lists hold (an object): told its place in their expiry queue
/// and whether it is on the protected segment.
pub(crate) trait Listed {
    fn expiry_slot(&self) -> u32;
    fn set_expiry_slot(&self, at: u32);
    fn set_lru_protected(&self, on: bool);
}

/// The eviction lists, a segmented LRU: a new object starts on the
/// probation list and moves to the protected one when it is asked for
/// again; eviction takes probation's least recently used first. A crawl
/// of objects asked once therefore churns probation and leaves what is
/// asked again alone (`bench/scan.sh`). Protected holds at most
/// [`PROTECTED_SHARE`] of the objects; past it, its least recently used
/// goes back to probation. Both are doubly linked lists in one slab, so
/// objects are moved and removed by index without searching.
#[derive(Debug)]
pub(crate) struct Lru<T> {
    pub(crate) nodes: Blocks<LruNode<T>>,
    pub(crate) free: Vec<u32>,
    lists: [List; 2],
    /// The listed objects' expiry queue, by node number: the node holds
    /// the object, so an entry is its due second and that number.
    expiry: Heap<u32>,
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
pub(crate) struct LruNode<T> {
    prev: u32,
    next: u32,
    pub(crate) obj: Option<Arc<T>>,
}

/// An object on no list, as its `lru_slot` says it.
pub(crate) const NO_SLOT: usize = u32::MAX as usize;

/// No node (the end of a list).
pub(crate) const NIL: u32 = 0x7fff_ffff;
const SEGMENT_BIT: u32 = 1 << 31;

impl<T> LruNode<T> {
    fn new(obj: Arc<T>) -> LruNode<T> {
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

impl<T> Default for Lru<T> {
    fn default() -> Self {
        Lru {
            nodes: Blocks::default(),
            free: Vec::new(),
            lists: [List::default(); 2],
            expiry: Heap::default(),
        }
    }
}

impl<T: Listed> Lru<T> {
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

    pub(crate) fn insert(&mut self, obj: Arc<T>) -> usize {
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
    pub(crate) fn touch(&mut self, i: usize) {
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
    pub(crate) fn victim(&self) -> Option<usize> {
        self.lists[PROBATION].tail.or(self.lists[PROTECTED].tail)
    }

    #[cfg(test)]
    pub(crate) fn is_protected(&self, i: usize) -> bool {
        self.nodes[i].segment() == PROTECTED
    }

    /// Takes a node off its list and out of the expiry queue; gives
    /// back its object.
    pub(crate) fn remove(&mut self, i: usize) -> Option<Arc<T>> {
        self.nodes.get(i)?.obj.as_ref()?;
        self.unschedule(i);
        let obj = self.nodes.get_mut(i)?.obj.take()?;
        self.unlink(i);
        self.free.push(i as u32);
        Some(obj)
    }

    /// Where node `i`'s entry is in the expiry queue, if it has one.
    fn queued_at(&self, i: usize) -> Option<usize> {
        let obj = self.nodes.get(i)?.obj.as_ref()?;
        let at = obj.expiry_slot();
        (at != NOT_QUEUED && self.expiry.get(at as usize) == Some(&(i as u32)))
            .then_some(at as usize)
    }

    /// Queues node `i`'s object due at `at_ms` (milliseconds of the
    /// epoch), moving it when it is queued already.
    pub(crate) fn schedule(&mut self, i: usize, at_ms: u64) {
        self.unschedule(i);
        // Past four billion queued, an object lives until evicted.
        self.expiry.push(at_ms, i as u32, &self.nodes);
    }

    /// Takes node `i`'s object out of the expiry queue; false when it was
    /// not in it.
    pub(crate) fn unschedule(&mut self, i: usize) -> bool {
        let Some(at) = self.queued_at(i) else {
            return false;
        };
        self.expiry.take(at, &self.nodes);
        true
    }

    /// The next object due by `now_ms`, out of the queue (still listed).
    pub(crate) fn pop_due(&mut self, now_ms: u64) -> Option<Arc<T>> {
        if !self.expiry.due(now_ms) {
            return None;
        }
        let i = self.expiry.take(0, &self.nodes);
        self.nodes.get(i as usize)?.obj.clone()
    }

    /// Objects queued for expiry.
    #[cfg(test)]
    pub(crate) fn queued(&self) -> usize {
        self.expiry.len()
    }
}

/// A node's object keeps its place in the expiry queue.
impl<T: Listed> Places<u32> for Blocks<LruNode<T>> {
    fn place(&self, node: &u32, at: u32) {
        if let Some(obj) = self.get(*node as usize).and_then(|n| n.obj.as_ref()) {
            obj.set_expiry_slot(at);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blocks::BLOCK;

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
        assert_eq!(std::mem::size_of::<LruNode<crate::object::Object>>(), 16);
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

    /// Listed objects are queued by node: the queue follows their times,
    /// leaves them on the lists when they fall due, and loses their entry
    /// when their node goes (evicted or removed), wherever it was.
    #[test]
    fn the_lists_queue_their_objects_by_node() {
        let mut lru = Lru::default();
        let objs: Vec<_> = (0..50)
            .map(|_| Arc::new(crate::tests::plain_object()))
            .collect();
        let slots: Vec<_> = objs.iter().map(|o| lru.insert(o.clone())).collect();
        // Due seconds scrambled, in milliseconds.
        let due = |i: usize| ((i * 37) % 50) as u64 * 1000 + 1000;
        for (i, &s) in slots.iter().enumerate() {
            lru.schedule(s, due(i));
        }
        assert_eq!(lru.queued(), 50);
        // Moved to a later time: queued once.
        lru.schedule(slots[3], 100_000);
        assert_eq!(lru.queued(), 50);
        // The oldest evicted, and every fifth removed: out of the queue.
        let victim = lru.victim().unwrap();
        assert!(Arc::ptr_eq(&lru.remove(victim).unwrap(), &objs[0]));
        for &s in slots.iter().skip(5).step_by(5) {
            lru.remove(s);
        }
        assert_eq!(lru.queued(), 40);
        assert!(objs
            .iter()
            .step_by(5)
            .all(|o| o.expiry_slot() == NOT_QUEUED));
        assert!(!lru.unschedule(slots[5]), "gone with its node");
        // Out in time order, still listed.
        let mut last = 0;
        let mut n = 0;
        while let Some(o) = lru.pop_due(60_000) {
            let i = objs.iter().position(|x| Arc::ptr_eq(x, &o)).unwrap();
            assert!(due(i) >= last, "in order");
            last = due(i);
            assert_eq!(o.expiry_slot(), NOT_QUEUED);
            n += 1;
        }
        assert_eq!(n, 39, "all but the one moved later");
        assert!(Arc::ptr_eq(&lru.pop_due(100_000).unwrap(), &objs[3]));
        assert_eq!(lru.queued(), 0);
        assert_eq!(
            lru.nodes.len() - lru.free.len(),
            40,
            "due objects stay listed"
        );
    }
}
