//! How many requests are worked on at once, as Varnish's thread pools
//! bound it: at most `thread_pools` × `thread_pool_max` requests run (an
//! idle keep-alive session holds no place, as a session in Varnish's
//! waiter holds no thread); past that, up to `thread_pools` ×
//! `thread_queue_limit` wait for a place (`thread_queue_len`,
//! `threads_limited`, `sess_queued`), and any more are dropped with their
//! connection (`sess_dropped` for a session's first request,
//! `req_dropped` for a later one). A flood of slow requests then costs a
//! bounded amount of memory and backend work, and the requests already
//! admitted finish.
//!
//! Under a large bound (the default: 2 × 5000) a worker thread takes
//! places from the shared count [`LEASE`] at a time and keeps the ones it
//! frees, so that a request writes no memory other workers write: the
//! count is touched once per lease, not twice per request. A thread gives
//! its lease back at once when a request waits for a place, and as it
//! goes idle (tokio's park hook) once more than three quarters of the
//! bound are taken: below that, an idle thread keeps its free places, so
//! that a worker that serves a few requests between naps (many workers,
//! each a fraction of a core) does not write the shared count twice a nap.
//! The bound still holds exactly (a lease is taken only when it fits under
//! it); what idle threads keep (two leases each at most) is far less than
//! the quarter left free, and near the bound they give it back. A small
//! bound (a test's few places) takes no leases at all.

use lacquer_core::counters::{Counter, COUNTERS};
use lacquer_core::params::Params;
use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::Notify;

/// Places a worker takes from the shared count at once.
const LEASE: u64 = 16;
/// The smallest bound that places are leased under.
const LEASE_FROM: u64 = 1024;

/// The places for requests at work, and who waits for one.
#[derive(Default)]
pub(crate) struct Admission(Arc<Count>);

/// The count shared by every worker.
#[derive(Default)]
struct Count {
    /// Places taken: held by requests, or free in a worker's lease.
    active: AtomicU64,
    waiting: AtomicU64,
    freed: Notify,
}

impl Count {
    /// Takes `n` places at once if they fit under `max`.
    fn try_take(&self, max: u64, n: u64) -> bool {
        self.active
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |a| {
                (a.saturating_add(n) <= max).then_some(a + n)
            })
            .is_ok()
    }

    /// Gives `n` places back, waking one waiter if there is any (a waiter
    /// counts itself before it looks for a place, so it either sees these
    /// or is woken). One, not all: under a flood each place freed would
    /// otherwise wake the whole queue. A waiter that gets a place wakes the
    /// next while places are left (see [`Admission::admit`]), so places
    /// given back together, or freed before a woken waiter ran, reach as
    /// many waiters.
    fn give_back(&self, n: u64) {
        if n == 0 {
            return;
        }
        self.active.fetch_sub(n, Ordering::SeqCst);
        if self.waiting.load(Ordering::SeqCst) > 0 {
            self.freed.notify_one();
        }
    }
}

/// Free places a thread holds, taken from one admission's count.
struct Lease {
    of: Arc<Count>,
    free: u64,
    /// The bound its places were last taken under.
    max: u64,
}

impl Drop for Lease {
    /// A thread that ends, or moves to another daemon's places, gives its
    /// free ones back.
    fn drop(&mut self) {
        self.of.give_back(self.free);
    }
}

thread_local! {
    static LEASE_HELD: RefCell<Option<Lease>> = const { RefCell::new(None) };
}

/// Runs `f` on this thread's lease of `count`'s places, made (empty)
/// when the thread holds none or another's; None when the thread cannot
/// hold one (it is being torn down).
fn with_lease<T>(count: &Arc<Count>, f: impl FnOnce(&mut Lease) -> T) -> Option<T> {
    LEASE_HELD
        .try_with(|held| {
            let mut held = held.try_borrow_mut().ok()?;
            if !held.as_ref().is_some_and(|l| Arc::ptr_eq(&l.of, count)) {
                // The one held before gives its places back as it drops.
                *held = Some(Lease {
                    of: count.clone(),
                    free: 0,
                    max: u64::MAX,
                });
            }
            held.as_mut().map(f)
        })
        .ok()
        .flatten()
}

/// Gives this thread's free places back to their count: as the thread
/// goes idle, so that no place waits on a thread with nothing to do.
pub(crate) fn give_back_lease() {
    let _ = LEASE_HELD.try_with(|held| {
        if let Ok(mut held) = held.try_borrow_mut() {
            if let Some(lease) = held.as_mut() {
                let free = std::mem::take(&mut lease.free);
                lease.of.give_back(free);
            }
        }
    });
}

/// As the thread goes idle: gives its free places back once more than
/// three quarters of the bound are taken, and keeps them otherwise (see
/// the module's description).
pub(crate) fn idle_lease() {
    let _ = LEASE_HELD.try_with(|held| {
        if let Ok(mut held) = held.try_borrow_mut() {
            if let Some(lease) = held.as_mut() {
                let active = lease.of.active.load(Ordering::Relaxed);
                if lease.free > 0 && active > lease.max - lease.max / 4 {
                    let free = std::mem::take(&mut lease.free);
                    lease.of.give_back(free);
                }
            }
        }
    });
}

/// A place held by a request at work; given back when dropped.
pub(crate) struct Place<'a> {
    of: &'a Admission,
    /// Taken under a bound large enough to lease: it goes back to this
    /// thread's lease, unless someone waits.
    leased: bool,
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        let count = &self.of.0;
        if self.leased && count.waiting.load(Ordering::SeqCst) == 0 {
            let kept = with_lease(count, |lease| {
                lease.free += 1;
                // A thread that frees more than it takes (places taken on
                // other threads end here) keeps at most two leases' worth.
                if lease.free > 2 * LEASE {
                    lease.free -= LEASE;
                    count.give_back(LEASE);
                }
            });
            if kept.is_some() {
                return;
            }
        }
        count.give_back(1);
        if self.leased {
            // Someone waits: this thread's free places go to them too.
            give_back_lease();
        }
    }
}

impl Admission {
    fn bound(params: &Params) -> u64 {
        params
            .thread_pools()
            .max(1)
            .saturating_mul(params.thread_pool_max())
    }

    /// A place at once, if one is free (the common case, which needs no
    /// future).
    pub fn try_admit(&self, params: &Params) -> Option<Place<'_>> {
        let max = Self::bound(params);
        // Lazily: a Place made and dropped would give back a place never taken.
        self.take(max).map(|leased| Place { of: self, leased })
    }

    /// A place for a request, waiting in the queue when all are taken;
    /// None when the queue is full too (the request is dropped).
    pub async fn admit(&self, params: &Params, first: bool) -> Option<Place<'_>> {
        let pools = params.thread_pools().max(1);
        let max = Self::bound(params);
        if let Some(leased) = self.take(max) {
            return Some(Place { of: self, leased });
        }
        let count = &self.0;
        COUNTERS.inc(Counter::threads_limited);
        let queue = pools.saturating_mul(params.thread_queue_limit());
        if count.waiting.fetch_add(1, Ordering::SeqCst) >= queue {
            count.waiting.fetch_sub(1, Ordering::SeqCst);
            COUNTERS.inc(if first {
                Counter::sess_dropped
            } else {
                Counter::req_dropped
            });
            return None;
        }
        COUNTERS.inc(Counter::sess_queued);
        COUNTERS.set(
            Counter::thread_queue_len,
            count.waiting.load(Ordering::Relaxed),
        );
        // This thread's own free places first: it is about to wait.
        give_back_lease();
        loop {
            let freed = count.freed.notified();
            if count.try_take(max, 1) {
                break;
            }
            freed.await;
        }
        let left = count.waiting.fetch_sub(1, Ordering::SeqCst) - 1;
        COUNTERS.set(Counter::thread_queue_len, left);
        // Wakes came one per give-back: pass one on while places are left.
        if left > 0 && count.active.load(Ordering::SeqCst) < max {
            count.freed.notify_one();
        }
        Some(Place {
            of: self,
            leased: max >= LEASE_FROM,
        })
    }

    /// A place under `max`: from this thread's lease, or a new lease, or
    /// one place alone; whether it was taken under leasing (None: no place
    /// is free).
    fn take(&self, max: u64) -> Option<bool> {
        let count = &self.0;
        if max < LEASE_FROM {
            return count.try_take(max, 1).then_some(false);
        }
        let from_lease = with_lease(count, |lease| {
            lease.max = max;
            // A free place is counted already; under a bound lowered since
            // it was leased it stays free.
            if lease.free > 0 && count.active.load(Ordering::Relaxed) <= max {
                lease.free -= 1;
                return true;
            }
            // One for this request, the rest kept.
            if count.try_take(max, LEASE) {
                lease.free = LEASE - 1;
                return true;
            }
            false
        });
        if from_lease == Some(true) {
            return Some(true);
        }
        count.try_take(max, 1).then_some(true)
    }

    /// Places taken from the shared count (held or free in leases).
    #[cfg(test)]
    fn active(&self) -> u64 {
        self.0.active.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_bounded_then_queued_then_refused() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(bounded());
    }

    async fn bounded() {
        let p = Params::default();
        p.set("thread_pools", "1").unwrap();
        p.set("thread_pool_max", "5").unwrap();
        p.set("thread_queue_limit", "1").unwrap();
        let a = Admission::default();
        let mut held = Vec::new();
        for _ in 0..5 {
            held.push(a.admit(&p, true).await.expect("a place"));
        }
        // No place now, and trying takes none away.
        assert!(a.try_admit(&p).is_none());
        assert_eq!(a.active(), 5);
        // The sixth waits; the seventh finds the queue full.
        let waiter = a.admit(&p, false);
        let mut waiter = std::pin::pin!(waiter);
        assert!(futures_poll(&mut waiter).is_none());
        assert!(a.admit(&p, false).await.is_none());
        held.pop();
        let place = waiter.await;
        assert!(place.is_some());
        assert_eq!(a.active(), 5);
        drop(place);
        drop(held);
        assert_eq!(a.active(), 0);
    }

    fn params(pools: &str, max: &str, queue: &str) -> Params {
        let p = Params::default();
        p.set("thread_pools", pools).unwrap();
        p.set("thread_pool_max", max).unwrap();
        p.set("thread_queue_limit", queue).unwrap();
        p
    }

    /// Under a large bound a thread takes a lease of places at once,
    /// serves its next requests from it, and gives what is free back as
    /// it goes idle.
    #[test]
    fn a_thread_leases_places_and_gives_the_free_ones_back_when_idle() {
        let p = params("1", "2048", "10");
        let a = Admission::default();
        let first = a.try_admit(&p).expect("a place");
        assert_eq!(a.active(), LEASE, "one lease taken");
        drop(first);
        assert_eq!(a.active(), LEASE, "freed into the lease");
        let held: Vec<_> = (0..LEASE).map(|_| a.try_admit(&p).unwrap()).collect();
        assert_eq!(a.active(), LEASE, "all from the lease");
        let more = a.try_admit(&p).unwrap();
        assert_eq!(a.active(), 2 * LEASE, "a second lease");
        give_back_lease();
        assert_eq!(a.active(), LEASE + 1, "the free ones given back");
        drop(more);
        drop(held);
        give_back_lease();
        assert_eq!(a.active(), 0);
    }

    /// An idle thread keeps its free places while most of the bound is
    /// free, and gives them back once more than three quarters are taken.
    #[test]
    fn an_idle_thread_keeps_its_lease_until_places_run_short() {
        let p = params("1", "2048", "10");
        let a = Admission::default();
        drop(a.try_admit(&p).expect("a place"));
        assert_eq!(a.active(), LEASE);
        idle_lease();
        assert_eq!(a.active(), LEASE, "kept, far from the bound");
        // Others' requests take most of the places.
        a.0.active.fetch_add(1600, Ordering::SeqCst);
        idle_lease();
        assert_eq!(a.active(), 1600, "given back near the bound");
        a.0.active.fetch_sub(1600, Ordering::SeqCst);
    }

    /// Leases never take the count past the bound: near it, places are
    /// taken one at a time.
    #[test]
    fn leases_keep_to_the_bound() {
        let p = params("1", "1030", "0");
        let a = Admission::default();
        let mut held = Vec::new();
        while let Some(place) = a.try_admit(&p) {
            held.push(place);
            assert!(held.len() <= 1030);
        }
        assert_eq!(held.len(), 1030);
        assert_eq!(a.active(), 1030);
        // Lowered: the places freed into this thread's lease are not
        // taken again past the new bound.
        drop(held.pop());
        p.set("thread_pool_max", "1024").unwrap();
        assert!(a.try_admit(&p).is_none());
        drop(held);
        give_back_lease();
        assert_eq!(a.active(), 0);
    }

    /// Runs a request on its own thread that finds no place and waits;
    /// once it waits, `release` runs here, and this returns once the
    /// request got a place (and gave it back, as its thread went idle).
    fn waits_on_another_thread(a: &Admission, p: &Params, release: impl FnOnce()) {
        std::thread::scope(|s| {
            let (queued_tx, queued) = std::sync::mpsc::channel();
            let (got_tx, got) = std::sync::mpsc::channel();
            s.spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_time()
                    .build()
                    .unwrap();
                rt.block_on(async {
                    let wait = a.admit(p, false);
                    let mut wait = std::pin::pin!(wait);
                    assert!(futures_poll(&mut wait).is_none(), "no place free here");
                    queued_tx.send(()).unwrap();
                    let limit = std::time::Duration::from_secs(10);
                    if let Ok(place) = tokio::time::timeout(limit, wait).await {
                        got_tx.send(()).unwrap();
                        drop(place);
                        give_back_lease();
                    }
                });
            });
            queued.recv().unwrap();
            release();
            assert!(got.recv().is_ok(), "the waiter got no place");
        });
    }

    /// A request waiting for a place gets one that another thread holds
    /// free in its lease as that thread goes idle, or one another thread
    /// frees; a place freed on another thread than it was taken on goes
    /// to that thread's lease.
    #[test]
    fn a_waiter_gets_the_places_other_threads_free() {
        let p = params("1", "1024", "10");
        let a = Admission::default();
        let mut held: Vec<_> = std::iter::from_fn(|| a.try_admit(&p)).collect();
        assert_eq!(held.len(), 1024);
        drop(held.pop());
        assert_eq!(a.active(), 1024, "free in this thread's lease");
        waits_on_another_thread(&a, &p, give_back_lease);
        assert_eq!(a.active(), 1023);
        held.push(a.try_admit(&p).expect("the one given back"));
        assert_eq!(a.active(), 1024);
        waits_on_another_thread(&a, &p, || drop(held.pop()));
        assert_eq!(a.active(), 1023);
        std::thread::scope(|s| {
            let place = held.pop().unwrap();
            s.spawn(move || {
                drop(place);
                give_back_lease();
            });
        });
        assert_eq!(a.active(), 1022);
        drop(held);
        give_back_lease();
        assert_eq!(a.active(), 0);
    }

    /// Places given back together (a lease, as its thread goes idle)
    /// reach as many waiters: one wake, then each waiter that gets a place
    /// wakes the next, rather than the whole queue waking for each place.
    #[test]
    fn places_given_back_together_reach_every_waiter() {
        let p = params("1", "1024", "10");
        let a = Admission::default();
        let mut held: Vec<_> = std::iter::from_fn(|| a.try_admit(&p)).collect();
        drop(held.drain(..3));
        assert_eq!(a.active(), 1024, "three free in this thread's lease");
        std::thread::scope(|s| {
            let (queued_tx, queued) = std::sync::mpsc::channel();
            let (a, p) = (&a, &p);
            let waiters = s.spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_time()
                    .build()
                    .unwrap();
                rt.block_on(async {
                    let mut waits: Vec<_> = (0..3).map(|_| Box::pin(a.admit(p, false))).collect();
                    for w in &mut waits {
                        assert!(futures_poll(w).is_none(), "queued");
                    }
                    queued_tx.send(()).unwrap();
                    let limit = std::time::Duration::from_secs(10);
                    let all = futures_util::future::join_all(waits);
                    let got = tokio::time::timeout(limit, all).await;
                    let ok = got.is_ok_and(|places| places.iter().all(Option::is_some));
                    give_back_lease();
                    ok
                })
            });
            queued.recv().unwrap();
            give_back_lease();
            assert!(waiters.join().unwrap(), "every waiter got a place");
        });
        drop(held);
        give_back_lease();
        assert_eq!(a.active(), 0);
    }

    /// Polls a future once.
    fn futures_poll<F: std::future::Future + Unpin>(f: &mut F) -> Option<F::Output> {
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        match std::pin::Pin::new(f).poll(&mut cx) {
            std::task::Poll::Ready(v) => Some(v),
            std::task::Poll::Pending => None,
        }
    }
}
