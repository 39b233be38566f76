//! Records asleep in a persistent store's file: what a restart indexes
//! instead of building objects. An entry is 32 bytes (the key's digest,
//! where the record is, when its lifetime ends, and the segment whose
//! reuse takes it), kept in small tables sorted by digest; the object is
//! built from its record the first time its key is asked for
//! (`restore.rs`), so a restart reads records, not bodies, and a million
//! objects cost 32 MB until they are asked for.
//!
//! An entry leaves when its key is asked for (taken to be built), when
//! its lifetime ends (the expiry thread's sweep), or when the segment it
//! depends on is reused (the log's eviction): each way counts as the
//! object's would.

use super::format::{self, FRAME_HEADER_LEN, STATE_OFFSET};
use super::Log;
use crate::ban::BanRef;
use crate::object::Digest;
use lacquer_core::counters::{Counter, COUNTERS};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};

/// Tables of records asleep in a store.
pub(crate) const SHARDS: usize = 64;

/// One record asleep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Entry {
    digest: Digest,
    /// The record's frame (0: gone; no frame starts there).
    at: u64,
    /// The second its lifetime ends (rounded up).
    expires: u32,
    /// The segment that takes it when reused.
    oldest: u32,
}

impl Entry {
    pub fn new(digest: Digest, at: u64, expires: f64, oldest: u32) -> Entry {
        Entry {
            digest,
            at,
            expires: expires.ceil().clamp(0.0, f64::from(u32::MAX)) as u32,
            oldest,
        }
    }

    fn is_live(&self) -> bool {
        self.at != 0
    }
}

/// The order entries are kept in.
fn order(d: Digest) -> [u64; 2] {
    d.halves()
}

/// The table a digest's entries are in.
pub(crate) fn shard_of(d: Digest) -> usize {
    (d.hash() >> 40) as usize % SHARDS
}

/// One table: entries sorted by digest (a key's records side by side, in
/// the order they were written); gone ones stay until the next sweep
/// compacts them.
#[derive(Debug, Default)]
struct Shard {
    entries: Vec<Entry>,
    live: usize,
    /// No entry's lifetime ends before this second.
    next_expiry: u32,
}

impl Shard {
    /// Where `d`'s entries start and end.
    fn range(&self, d: Digest) -> std::ops::Range<usize> {
        let start = self.entries.partition_point(|e| order(e.digest) < order(d));
        let len = self.entries[start..]
            .iter()
            .take_while(|e| e.digest == d)
            .count();
        start..start + len
    }

    /// Whether entry `i` (gone now) was its key's last live one.
    fn was_last(&self, i: usize) -> bool {
        let d = self.entries[i].digest;
        let same = |e: &&Entry| e.digest == d;
        !self.entries[..i]
            .iter()
            .rev()
            .take_while(same)
            .chain(self.entries[i + 1..].iter().take_while(same))
            .any(Entry::is_live)
    }

    /// Marks entry `i` gone; true when its key has no other.
    fn drop_entry(&mut self, i: usize) -> bool {
        self.entries[i].at = 0;
        self.live -= 1;
        self.was_last(i)
    }

    /// Frees the gone entries' room once they are half the table.
    fn compact(&mut self) {
        if self.live == 0 {
            self.entries = Vec::new();
        } else if self.live * 2 < self.entries.len() {
            self.entries.retain(Entry::is_live);
            self.entries.shrink_to_fit();
        }
    }

    fn recompute_expiry(&mut self) {
        self.next_expiry = self
            .entries
            .iter()
            .filter(|e| e.is_live())
            .map(|e| e.expires)
            .min()
            .unwrap_or(u32::MAX);
    }
}

/// A store's records asleep.
#[derive(Debug)]
pub(crate) struct Dormant {
    shards: Box<[Mutex<Shard>]>,
    live: AtomicU64,
    /// Records asleep in every store of the cache (the cache reads it to
    /// know whether a key it lacks may be asleep).
    total: OnceLock<Arc<AtomicU64>>,
    /// Holds the ban list from the oldest record's insertion on: a ban a
    /// record asleep has not been tested against is never deleted.
    ban: Mutex<Option<BanRef>>,
}

impl Default for Dormant {
    fn default() -> Dormant {
        Dormant {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            live: AtomicU64::new(0),
            total: OnceLock::new(),
            ban: Mutex::new(None),
        }
    }
}

/// How entries left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Left {
    /// Taken to be built.
    Woken,
    Expired,
    /// Their segment is reused.
    Evicted,
}

impl Dormant {
    fn shard(&self, i: usize) -> MutexGuard<'_, Shard> {
        self.shards[i].lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records asleep.
    pub fn len(&self) -> u64 {
        self.live.load(Ordering::Relaxed)
    }

    /// Puts a restart's records to sleep (once, at start): `tables[i]`
    /// holds the entries of table `i`, in the order written. `total` counts records asleep
    /// in every store; `ban` is the place in the ban list of the oldest.
    /// Counted as objects (`n_object`, `n_objectcore`, `n_objecthead`),
    /// and as Varnish counts objects of a persistent store not yet brought
    /// back (`n_vampireobject`).
    pub fn fill(&self, tables: Vec<Vec<Entry>>, total: Arc<AtomicU64>, ban: BanRef) {
        let total = self.total.get_or_init(|| total);
        let (mut n, mut heads) = (0, 0);
        for (i, mut entries) in tables.into_iter().enumerate() {
            if entries.is_empty() {
                continue;
            }
            // Stable: a key's records stay in the order written.
            entries.sort_by_key(|e| order(e.digest));
            entries.shrink_to_fit();
            heads += 1 + entries
                .windows(2)
                .filter(|w| w[0].digest != w[1].digest)
                .count();
            n += entries.len();
            let mut shard = self.shard(i % SHARDS);
            debug_assert!(shard.entries.is_empty(), "filled once, at start");
            shard.live = entries.len();
            shard.entries = entries;
            shard.recompute_expiry();
        }
        if n == 0 {
            return;
        }
        *self.ban.lock().unwrap_or_else(|e| e.into_inner()) = Some(ban);
        self.live.fetch_add(n as u64, Ordering::Relaxed);
        total.fetch_add(n as u64, Ordering::Relaxed);
        COUNTERS.add(Counter::n_object, n as u64);
        COUNTERS.add(Counter::n_objectcore, n as u64);
        COUNTERS.add(Counter::n_objecthead, heads as u64);
        COUNTERS.add(Counter::n_vampireobject, n as u64);
    }

    /// Counts entries that left, and lets go of the ban list once none
    /// is asleep.
    fn left(&self, n: u64, heads: u64, how: Left) {
        if n == 0 {
            return;
        }
        COUNTERS.sub(Counter::n_object, n);
        COUNTERS.sub(Counter::n_objectcore, n);
        COUNTERS.sub(Counter::n_objecthead, heads);
        COUNTERS.sub(Counter::n_vampireobject, n);
        match how {
            Left::Woken => {}
            Left::Expired => COUNTERS.add(Counter::n_expired, n),
            Left::Evicted => COUNTERS.add(Counter::n_lru_nuked, n),
        }
        if let Some(total) = self.total.get() {
            total.fetch_sub(n, Ordering::Relaxed);
        }
        if self.live.fetch_sub(n, Ordering::AcqRel) == n {
            self.ban.lock().unwrap_or_else(|e| e.into_inner()).take();
        }
    }

    /// Takes the records asleep under `d`, in the order written, calling
    /// `hold` on each under the table's lock (so that its segment is held
    /// before anything can reuse it).
    pub fn take<T>(&self, d: Digest, mut hold: impl FnMut(u64) -> T) -> Vec<(u64, T)> {
        let mut shard = self.shard(shard_of(d));
        let range = shard.range(d);
        let mut out = Vec::new();
        for i in range {
            let e = shard.entries[i];
            if e.is_live() {
                shard.entries[i].at = 0;
                shard.live -= 1;
                out.push((e.at, hold(e.at)));
            }
        }
        shard.compact();
        drop(shard);
        self.left(out.len() as u64, u64::from(!out.is_empty()), Left::Woken);
        out
    }

    /// Lets go of every record whose lifetime ended by `now`; returns
    /// how many.
    pub fn sweep(&self, now: f64) -> u64 {
        let now = now.max(0.0).min(f64::from(u32::MAX)) as u32;
        let (mut n, mut heads) = (0, 0);
        for i in 0..SHARDS {
            let mut shard = self.shard(i);
            if shard.next_expiry > now {
                continue;
            }
            for j in 0..shard.entries.len() {
                let e = shard.entries[j];
                if e.is_live() && e.expires <= now {
                    n += 1;
                    heads += u64::from(shard.drop_entry(j));
                }
            }
            shard.compact();
            shard.recompute_expiry();
        }
        self.left(n, heads, Left::Expired);
        n
    }

    /// Lets go of every record that segment `seg` takes with it; returns
    /// the frames of those whose record is in another segment (the
    /// caller clears their state words: they must not come back).
    fn evict(&self, seg: u32, record_segment: impl Fn(u64) -> usize) -> Vec<u64> {
        let (mut n, mut heads) = (0, 0);
        let mut elsewhere = Vec::new();
        for i in 0..SHARDS {
            let mut shard = self.shard(i);
            if shard.live == 0 {
                continue;
            }
            for j in 0..shard.entries.len() {
                let e = shard.entries[j];
                if e.is_live() && e.oldest == seg {
                    n += 1;
                    heads += u64::from(shard.drop_entry(j));
                    if record_segment(e.at) != seg as usize {
                        elsewhere.push(e.at);
                    }
                }
            }
            shard.compact();
        }
        self.left(n, heads, Left::Evicted);
        elsewhere
    }
}

/// Holds a segment: it is not written over while a pin or a view of its
/// bytes lives. Holds its log weakly, so that the log's own cached views
/// do not keep it alive.
#[derive(Debug)]
pub(crate) struct Pin {
    log: Weak<Log>,
    segment: usize,
}

impl Pin {
    pub fn new(log: &Arc<Log>, segment: usize) -> Pin {
        log.segments[segment].pins.fetch_add(1, Ordering::AcqRel);
        Pin {
            log: Arc::downgrade(log),
            segment,
        }
    }
}

impl Drop for Pin {
    fn drop(&mut self) {
        if let Some(log) = self.log.upgrade() {
            log.segments[self.segment]
                .pins
                .fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl Log {
    /// The records asleep under `d`, taken, in the order written, each
    /// with its record's segment held.
    pub(crate) fn take_asleep(self: &Arc<Self>, d: Digest) -> Vec<(u64, Pin)> {
        self.dormant
            .take(d, |at| Pin::new(self, self.segment_of(at)))
    }

    /// The segment `seg` is being pushed out: the records asleep that
    /// depend on it go, and those whose record is elsewhere are cleared
    /// so that they stay gone (the head is held: nothing is reused
    /// meanwhile).
    pub(super) fn evict_asleep(&self, seg: usize) {
        if self.dormant.len() == 0 {
            return;
        }
        for at in self.dormant.evict(seg as u32, |at| self.segment_of(at)) {
            self.clear_record(at);
        }
    }

    /// Clears the state word of the record whose frame is at `at` (its
    /// segment must be held, or the head).
    pub(crate) fn clear_record(&self, at: u64) {
        let _ = self
            .space
            .write_at(&format::DEAD.to_le_bytes(), at + STATE_OFFSET);
    }

    /// The key of the record whose frame is at `at`.
    pub(crate) fn key_at(&self, at: u64) -> Option<&[u8]> {
        let len = u64::from(format::u32_at(self.space.bytes(at, FRAME_HEADER_LEN), 0));
        format::record_key(self.space.bytes(at + FRAME_HEADER_LEN, len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(a: u64, b: u64) -> Digest {
        Digest::from_halves([a << 40, b])
    }

    fn entry(d: Digest, at: u64, expires: u32, oldest: u32) -> Entry {
        Entry {
            digest: d,
            at,
            expires,
            oldest,
        }
    }

    #[test]
    fn an_entry_is_thirty_two_bytes() {
        assert_eq!(std::mem::size_of::<Entry>(), 32);
    }

    #[test]
    fn a_keys_records_are_taken_together_in_the_order_written() {
        let dormant = Dormant::default();
        let total = Arc::new(AtomicU64::new(0));
        let bans = crate::ban::Bans::new(1.0);
        let (a, b, c) = (digest(1, 1), digest(1, 2), digest(2, 1));
        let mut tables = vec![Vec::new(); SHARDS];
        for (d, at) in [(b, 800), (a, 100), (c, 300), (b, 200), (a, 50)] {
            tables[shard_of(d)].push(entry(d, at, 1000, 0));
        }
        dormant.fill(tables, total.clone(), bans.head());
        assert_eq!((dormant.len(), total.load(Ordering::Relaxed)), (5, 5));
        let took: Vec<u64> = dormant.take(b, |_| ()).iter().map(|t| t.0).collect();
        assert_eq!(took, [800, 200], "in the order written");
        assert!(dormant.take(b, |_| ()).is_empty(), "once");
        let took: Vec<u64> = dormant.take(a, |_| ()).iter().map(|t| t.0).collect();
        assert_eq!(took, [100, 50]);
        assert_eq!(total.load(Ordering::Relaxed), 1);
        assert_eq!(bans.list()[0].refs, 1, "the ban list is held");
        assert_eq!(dormant.take(c, |at| at * 2)[0], (300, 600));
        assert_eq!(dormant.len(), 0);
        assert_eq!(bans.list()[0].refs, 0, "and let go once none is asleep");
    }

    #[test]
    fn sweeps_and_evictions_let_go_of_what_they_take() {
        let dormant = Dormant::default();
        let bans = crate::ban::Bans::new(1.0);
        let mut tables = vec![Vec::new(); SHARDS];
        let d = |i: u64| digest(i, i);
        for i in 0..100u64 {
            // Expiring at 10..110; every tenth depends on segment 3,
            // its record in segment 4 for the odd ones.
            let oldest = if i % 10 == 0 { 3 } else { 5 };
            tables[shard_of(d(i))].push(entry(d(i), 1000 + i * 8 + (i % 2), 10 + i as u32, oldest));
        }
        dormant.fill(tables, Arc::new(AtomicU64::new(0)), bans.head());
        assert_eq!(dormant.sweep(9.5), 0);
        assert_eq!(dormant.sweep(30.0), 21, "expiring at 10..=30");
        let elsewhere = dormant.evict(3, |at| if at % 2 == 1 { 4 } else { 3 });
        // 30, 40, ... 90 remain of segment 3's, the odd ones none.
        assert_eq!(dormant.len(), 100 - 21 - 7);
        assert!(elsewhere.is_empty());
        let elsewhere = dormant.evict(5, |at| if at % 2 == 1 { 4 } else { 5 });
        assert_eq!(elsewhere.len(), 40, "the odd ones of 21..100");
        assert_eq!(dormant.len(), 0);
        assert!(dormant
            .shards
            .iter()
            .all(|s| s.lock().unwrap().entries.is_empty()));
    }
}
