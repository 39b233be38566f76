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

use lacquer_core::counters::{Counter, COUNTERS};
use lacquer_core::params::Params;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::Notify;

/// The places for requests at work, and who waits for one.
#[derive(Default)]
pub(crate) struct Admission {
    active: AtomicU64,
    waiting: AtomicU64,
    freed: Notify,
}

/// A place held by a request at work; given back when dropped.
pub(crate) struct Place<'a>(&'a Admission);

impl Drop for Place<'_> {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::SeqCst);
        // Only a waiter needs waking (a waiter counts itself before it
        // looks for a place, so it either sees this one or is woken).
        if self.0.waiting.load(Ordering::SeqCst) > 0 {
            self.0.freed.notify_one();
        }
    }
}

impl Admission {
    /// A place at once, if one is free (the common case, which needs no
    /// future).
    pub fn try_admit(&self, params: &Params) -> Option<Place<'_>> {
        let max = params
            .thread_pools()
            .max(1)
            .saturating_mul(params.thread_pool_max());
        // Lazily: a Place made and dropped would give back a place never taken.
        self.try_take(max).then(|| Place(self))
    }

    /// A place for a request, waiting in the queue when all are taken;
    /// None when the queue is full too (the request is dropped).
    pub async fn admit(&self, params: &Params, first: bool) -> Option<Place<'_>> {
        let pools = params.thread_pools().max(1);
        let max = pools.saturating_mul(params.thread_pool_max());
        if self.try_take(max) {
            return Some(Place(self));
        }
        COUNTERS.inc(Counter::threads_limited);
        let queue = pools.saturating_mul(params.thread_queue_limit());
        if self.waiting.fetch_add(1, Ordering::SeqCst) >= queue {
            self.waiting.fetch_sub(1, Ordering::SeqCst);
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
            self.waiting.load(Ordering::Relaxed),
        );
        loop {
            let freed = self.freed.notified();
            if self.try_take(max) {
                break;
            }
            freed.await;
        }
        let left = self.waiting.fetch_sub(1, Ordering::SeqCst) - 1;
        COUNTERS.set(Counter::thread_queue_len, left);
        Some(Place(self))
    }

    fn try_take(&self, max: u64) -> bool {
        self.active
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < max).then_some(n + 1)
            })
            .is_ok()
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
        assert_eq!(a.active.load(Ordering::Relaxed), 5);
        // The sixth waits; the seventh finds the queue full.
        let waiter = a.admit(&p, false);
        let mut waiter = std::pin::pin!(waiter);
        assert!(futures_poll(&mut waiter).is_none());
        assert!(a.admit(&p, false).await.is_none());
        held.pop();
        let place = waiter.await;
        assert!(place.is_some());
        assert_eq!(a.active.load(Ordering::Relaxed), 5);
        drop(place);
        drop(held);
        assert_eq!(a.active.load(Ordering::Relaxed), 0);
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
