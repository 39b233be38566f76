//! Bans: the list of invalidation conditions, newest last, each object's
//! place in it (the newest ban it is known to have survived), testing at
//! lookup, duplicate collapsing, deletion of bans no object needs any more,
//! and `ban.list`. The lurker that tests `obj.*` bans in the background is
//! in [`lurker`].

pub mod expr;
mod lurker;

pub use expr::{BanReq, BanSpec};
pub use lurker::LurkConfig;

use crate::object::Object;
use arc_swap::ArcSwapOption;
use lacquer_core::counters::{Counter, COUNTERS};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// One ban.
#[derive(Debug)]
pub struct Ban {
    seq: u64,
    time: f64,
    /// `None` for the ban the list starts with, which bans nothing.
    spec: Option<BanSpec>,
    uses_req: bool,
    /// Nothing needs testing against it any more.
    completed: AtomicBool,
    /// The lurker is testing every older object against it.
    lurking: AtomicBool,
    /// Objects (and fetches under way) whose place in the list it is.
    refs: AtomicUsize,
}

impl Ban {
    fn new(seq: u64, time: f64, spec: Option<BanSpec>, completed: bool) -> Arc<Ban> {
        Arc::new(Ban {
            seq,
            time,
            uses_req: spec.as_ref().is_some_and(|s| s.uses_req()),
            spec,
            completed: AtomicBool::new(completed),
            lurking: AtomicBool::new(false),
            refs: AtomicUsize::new(0),
        })
    }

    fn is_completed(&self) -> bool {
        self.completed.load(Ordering::Acquire)
    }

    fn complete(&self) {
        if !self.completed.swap(true, Ordering::AcqRel) {
            COUNTERS.inc(Counter::bans_completed);
        }
    }

    fn matches(&self, obj: &Object, req: Option<BanReq<'_>>, tests: &mut u64) -> bool {
        self.spec
            .as_ref()
            .is_some_and(|s| s.matches(obj, req, self.time, tests))
    }
}

/// A hold on a ban: an object's place in the list, counted in the ban's
/// `refs` so that a ban someone still needs is never deleted.
#[derive(Debug)]
pub struct BanRef(Arc<Ban>);

impl BanRef {
    fn new(ban: &Arc<Ban>) -> BanRef {
        ban.refs.fetch_add(1, Ordering::Relaxed);
        BanRef(ban.clone())
    }

    /// The ban's place in the list: later bans have larger numbers.
    pub fn seq(&self) -> u64 {
        self.0.seq
    }
}

impl Drop for BanRef {
    fn drop(&mut self) {
        self.0.refs.fetch_sub(1, Ordering::Relaxed);
    }
}

/// An object's place in the list: a hold on a ban, counted in its
/// `refs` as a [`BanRef`] is, in one word that is moved forward without
/// a lock (a `Mutex` around a `BanRef` took two in every object).
#[derive(Debug, Default)]
pub(crate) struct BanPlace(ArcSwapOption<Ban>);

impl BanPlace {
    /// Moves the place to `ban` when it is later than where it is (never
    /// back). True when it moved.
    pub fn advance(&self, ban: &BanRef) -> bool {
        let new = &ban.0;
        let prev = self.0.rcu(|cur| match cur {
            Some(c) if c.seq >= new.seq => cur.clone(),
            _ => Some(new.clone()),
        });
        let moved = prev.as_ref().is_none_or(|p| p.seq < new.seq);
        if moved {
            // Taken while the caller's hold keeps the ban in the list.
            new.refs.fetch_add(1, Ordering::Relaxed);
            if let Some(p) = prev {
                p.refs.fetch_sub(1, Ordering::Relaxed);
            }
        }
        moved
    }

    /// Lets go of the hold.
    pub fn release(&self) {
        if let Some(p) = self.0.swap(None) {
            p.refs.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Drop for BanPlace {
    fn drop(&mut self) {
        self.release();
    }
}

/// What `ban.list` shows of one ban.
#[derive(Debug, Clone, PartialEq)]
pub struct BanInfo {
    pub time: f64,
    pub refs: usize,
    pub completed: bool,
    pub spec: String,
}

/// The ban list.
#[derive(Debug)]
pub struct Bans {
    /// Oldest first; never empty.
    list: Mutex<Vec<Arc<Ban>>>,
    /// The newest ban's number, readable without the lock.
    head_seq: AtomicU64,
    added: Condvar,
    added_flag: Mutex<bool>,
    /// Told of every ban added (a persistent store writes it down).
    journal: std::sync::OnceLock<Journal>,
}

/// Hears of a ban added: its time and text.
pub type BanListener = dyn Fn(f64, &str) + Send + Sync;

/// What hears of each ban added.
pub struct Journal(pub Box<BanListener>);

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Journal")
    }
}

impl Bans {
    /// A list holding only a completed ban made at `now`, which new
    /// objects start from.
    pub fn new(now: f64) -> Bans {
        let first = Ban::new(1, now, None, true);
        COUNTERS.inc(Counter::bans_added);
        COUNTERS.inc(Counter::bans);
        COUNTERS.inc(Counter::bans_completed);
        Bans {
            list: Mutex::new(vec![first]),
            head_seq: AtomicU64::new(1),
            added: Condvar::new(),
            added_flag: Mutex::new(false),
            journal: std::sync::OnceLock::new(),
        }
    }

    /// Sets what hears of each ban added from now on.
    pub fn set_journal(&self, journal: Journal) {
        let _ = self.journal.set(journal);
    }

    /// Puts back bans recovered from storage, oldest first, as uncompleted
    /// bans with their own times (at start, before any object exists).
    /// Bans already in the list with the same time and text are skipped.
    pub fn restore(&self, mut bans: Vec<(f64, BanSpec)>) {
        bans.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut list = self.lock();
        for (time, spec) in bans {
            if list
                .iter()
                .any(|b| b.time == time && b.spec.as_ref().is_some_and(|s| s.text() == spec.text()))
            {
                continue;
            }
            let uses_req = spec.uses_req();
            // Older than the list's newest: it goes before the bans made
            // after it, numbers and all.
            let pos = list
                .iter()
                .position(|b| b.time > time)
                .unwrap_or(list.len());
            list.insert(pos, Ban::new(0, time, Some(spec), false));
            count_added(uses_req);
        }
        // Objects older than every restored ban start from a ban that
        // bans nothing, before them all.
        if list.first().is_some_and(|b| b.spec.is_some()) {
            let time = list[0].time;
            list.insert(0, Ban::new(0, time, None, true));
            COUNTERS.inc(Counter::bans_added);
            COUNTERS.inc(Counter::bans);
            COUNTERS.inc(Counter::bans_completed);
        }
        // Numbered again in order (nothing holds a number yet).
        let renumbered: Vec<Arc<Ban>> = list
            .iter()
            .enumerate()
            .map(|(i, b)| Ban::new(i as u64 + 1, b.time, b.spec.clone(), b.is_completed()))
            .collect();
        *list = renumbered;
        self.head_seq.store(list.len() as u64, Ordering::Release);
    }

    /// A hold on the newest ban no later than `time`: the place in the
    /// list of an object inserted then, so that every later ban is
    /// tested against it.
    pub fn at_time(&self, time: f64) -> BanRef {
        let list = self.lock();
        let i = list.iter().rposition(|b| b.time <= time).unwrap_or(0);
        BanRef::new(&list[i])
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Ban>>> {
        self.list.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The newest ban's number.
    #[inline]
    pub fn head_seq(&self) -> u64 {
        self.head_seq.load(Ordering::Acquire)
    }

    /// A hold on the newest ban, for an object about to be made.
    pub fn head(&self) -> BanRef {
        let list = self.lock();
        BanRef::new(list.last().expect("the ban list is never empty"))
    }

    /// Adds a ban issued at `now`. With `dups`, older identical bans are
    /// marked completed.
    pub fn add(&self, spec: BanSpec, now: f64, dups: bool) {
        let uses_req = spec.uses_req();
        let spec_text = spec.text().to_string();
        let mut list = self.lock();
        if dups {
            for old in list.iter() {
                let same = old.spec.as_ref().is_some_and(|s| s.text() == spec.text());
                if same && !old.is_completed() {
                    old.complete();
                    COUNTERS.inc(Counter::bans_dups);
                }
            }
        }
        let seq = list.last().map_or(1, |b| b.seq) + 1;
        list.push(Ban::new(seq, now, Some(spec), false));
        self.head_seq.store(seq, Ordering::Release);
        drop(list);
        count_added(uses_req);
        if let Some(journal) = self.journal.get() {
            (journal.0)(now, spec_text.as_str());
        }
        *self.added_flag.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.added.notify_all();
    }

    /// Waits until a ban is added or the timeout passes.
    pub fn wait_for_ban(&self, timeout: Duration) {
        let flag = self.added_flag.lock().unwrap_or_else(|e| e.into_inner());
        let (mut flag, _) = self
            .added
            .wait_timeout_while(flag, timeout, |added| !*added)
            .unwrap_or_else(|e| e.into_inner());
        *flag = false;
    }

    /// The bans newer than `seq`, newest first.
    fn newer_than(&self, seq: u64) -> Vec<Arc<Ban>> {
        let list = self.lock();
        list.iter()
            .rev()
            .take_while(|b| b.seq > seq)
            .cloned()
            .collect()
    }

    /// Tests an object found at lookup against the bans added since its
    /// place in the list. True when a ban kills it; otherwise it moves to
    /// the newest ban.
    pub fn check_at_lookup(&self, obj: &Object, req: BanReq<'_>) -> bool {
        let newer = self.newer_than(obj.ban_seq());
        let Some(newest) = newer.first() else {
            return false;
        };
        let mut tests = 0;
        let killed = newer
            .iter()
            .filter(|b| !b.is_completed())
            .any(|b| b.matches(obj, Some(req), &mut tests));
        COUNTERS.inc(Counter::bans_tested);
        COUNTERS.add(Counter::bans_tests_tested, tests);
        if killed {
            COUNTERS.inc(Counter::bans_obj_killed);
            return true;
        }
        obj.set_ban(BanRef::new(newest));
        false
    }

    /// Tests an object just inserted against the bans a lookup would skip
    /// but it was never tested against: bans completed (or being
    /// completed by the lurker) while it was being fetched. True when one
    /// kills it.
    pub fn check_at_insert(&self, obj: &Object) -> bool {
        if obj.ban_seq() >= self.head_seq() {
            return false;
        }
        let mut tests = 0;
        self.newer_than(obj.ban_seq()).iter().any(|b| {
            !b.uses_req
                && (b.is_completed() || b.lurking.load(Ordering::SeqCst))
                && b.matches(obj, None, &mut tests)
        })
    }

    /// Deletes the oldest bans while no object holds on to them (the
    /// newest always stays). Returns how many went.
    pub fn clean_tail(&self) -> usize {
        let mut list = self.lock();
        let mut n = 0;
        while list.len() > 1 && list[0].refs.load(Ordering::Acquire) == 0 {
            let ban = list.remove(0);
            n += 1;
            COUNTERS.dec(Counter::bans);
            if ban.is_completed() {
                COUNTERS.dec(Counter::bans_completed);
            }
            if ban.spec.is_some() {
                COUNTERS.dec(if ban.uses_req {
                    Counter::bans_req
                } else {
                    Counter::bans_obj
                });
            }
        }
        COUNTERS.add(Counter::bans_deleted, n as u64);
        n
    }

    /// Every ban, newest first. As in Varnish, a completed ban shows no
    /// specification: nothing is tested against it any more.
    pub fn list(&self) -> Vec<BanInfo> {
        let list = self.lock();
        list.iter()
            .rev()
            .map(|b| {
                let completed = b.is_completed();
                BanInfo {
                    time: b.time,
                    refs: b.refs.load(Ordering::Relaxed),
                    completed,
                    spec: match &b.spec {
                        Some(s) if !completed => s.text().to_string(),
                        _ => String::new(),
                    },
                }
            })
            .collect()
    }

    /// `ban.list` as text: time, objects holding on, `C` when completed,
    /// and the specification.
    pub fn list_text(&self) -> String {
        let mut out = String::from("Present bans:\n");
        for b in self.list() {
            let flag = if b.completed { "C" } else { "-" };
            let _ = writeln!(out, "{:10.6} {:5} {flag}  {}", b.time, b.refs, b.spec);
        }
        out
    }
}

/// Counts a ban added to the list.
fn count_added(uses_req: bool) {
    COUNTERS.inc(Counter::bans_added);
    COUNTERS.inc(Counter::bans);
    COUNTERS.inc(if uses_req {
        Counter::bans_req
    } else {
        Counter::bans_obj
    });
}

#[cfg(test)]
mod tests;
