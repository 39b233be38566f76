//! A backend's `.max_connections` and the queue of fetches waiting for a
//! connection when it is reached (`backend_wait_timeout`,
//! `backend_wait_limit`, or the backend's own `.wait_timeout` and
//! `.wait_limit`). With no queue, a fetch that finds every connection in
//! use fails at once as "busy", as in Varnish. Queued fetches are served
//! first come, first served.

use crate::BackendStats;
use lacquer_core::counters::BackendCounter;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::{Semaphore, SemaphorePermit};

/// How long, and how many, fetches may wait for a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WaitPolicy {
    /// Zero: no waiting.
    pub timeout: Duration,
    /// Zero: no queue.
    pub limit: u64,
}

/// Why no connection slot was had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// At `max_connections` with no room to wait.
    Busy,
    /// Waited for the whole `wait_timeout` in vain.
    WaitTimeout,
}

/// The connection slots of one backend.
#[derive(Debug)]
pub(crate) struct Slots {
    /// None when the backend has no `.max_connections`.
    permits: Option<Semaphore>,
    waiting: AtomicU64,
    /// Per-backend overrides of the wait policy.
    pub wait_timeout: Option<Duration>,
    pub wait_limit: Option<u64>,
}

/// The right to use one connection; given back when dropped.
#[derive(Debug)]
pub struct Slot<'a> {
    _permit: Option<SemaphorePermit<'a>>,
}

impl Slot<'_> {
    /// A slot of a backend without a limit.
    pub(crate) fn none() -> Slot<'static> {
        Slot { _permit: None }
    }
}

/// Whether a fetch waited for its slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Waited {
    No,
    Yes,
}

impl Slots {
    pub fn new(max_connections: Option<u64>) -> Slots {
        let permits = max_connections
            .filter(|&n| n > 0)
            .map(|n| Semaphore::new(n.min(Semaphore::MAX_PERMITS as u64) as usize));
        Slots {
            permits,
            waiting: AtomicU64::new(0),
            wait_timeout: None,
            wait_limit: None,
        }
    }

    /// Fetches queued now.
    pub fn waiting(&self) -> u64 {
        self.waiting.load(Ordering::Relaxed)
    }

    /// Connections that may still be opened without waiting, or None
    /// without a limit.
    pub fn available(&self) -> Option<usize> {
        self.permits.as_ref().map(|s| s.available_permits())
    }

    /// Takes a slot, waiting in line when the policy allows it; `stats`
    /// shows the line's length in its `waiting` gauge.
    pub async fn acquire<'a>(
        &'a self,
        policy: WaitPolicy,
        stats: Option<&'a BackendStats>,
    ) -> Result<(Slot<'a>, Waited), Refused> {
        let Some(permits) = &self.permits else {
            return Ok((Slot { _permit: None }, Waited::No));
        };
        if let Ok(p) = permits.try_acquire() {
            return Ok((Slot { _permit: Some(p) }, Waited::No));
        }
        let timeout = self.wait_timeout.unwrap_or(policy.timeout);
        let limit = self.wait_limit.unwrap_or(policy.limit);
        if timeout.is_zero() || limit == 0 {
            return Err(Refused::Busy);
        }
        // Join the queue only while it is shorter than the limit.
        let joined = self
            .waiting
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < limit).then_some(n + 1)
            });
        if joined.is_err() {
            return Err(Refused::Busy);
        }
        if let Some(stats) = stats {
            stats.inc(BackendCounter::waiting);
        }
        let _leave = Leave(&self.waiting, stats);
        match tokio::time::timeout(timeout, permits.acquire()).await {
            Ok(Ok(p)) => Ok((Slot { _permit: Some(p) }, Waited::Yes)),
            // The semaphore is never closed; treat it as busy if it were.
            Ok(Err(_)) => Err(Refused::Busy),
            Err(_) => Err(Refused::WaitTimeout),
        }
    }
}

/// Leaves the queue however the wait ends, cancellation included.
struct Leave<'a>(&'a AtomicU64, Option<&'a BackendStats>);

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
        if let Some(stats) = self.1 {
            stats.dec(BackendCounter::waiting);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
    }

    const QUEUE: WaitPolicy = WaitPolicy {
        timeout: Duration::from_secs(5),
        limit: 1,
    };

    #[test]
    fn no_limit_never_refuses() {
        rt().block_on(async {
            let s = Slots::new(None);
            let held = take(&s, 100).await;
            assert_eq!(held.len(), 100);
            let s = Slots::new(Some(0));
            assert!(s.acquire(WaitPolicy::default(), None).await.is_ok());
        });
    }

    async fn take(s: &Slots, n: usize) -> Vec<Slot<'_>> {
        let mut v = Vec::new();
        for _ in 0..n {
            v.push(s.acquire(WaitPolicy::default(), None).await.unwrap().0);
        }
        v
    }

    #[test]
    fn without_a_queue_a_full_backend_is_busy_at_once() {
        rt().block_on(async {
            let s = Slots::new(Some(2));
            let a = s.acquire(QUEUE, None).await.unwrap();
            let _b = s.acquire(WaitPolicy::default(), None).await.unwrap();
            assert_eq!(
                s.acquire(WaitPolicy::default(), None).await.unwrap_err(),
                Refused::Busy
            );
            drop(a);
            assert_eq!(
                s.acquire(WaitPolicy::default(), None).await.unwrap().1,
                Waited::No
            );
        });
    }

    #[test]
    fn a_waiter_gets_the_slot_given_back() {
        rt().block_on(async {
            let s = std::sync::Arc::new(Slots::new(Some(1)));
            let held = s.acquire(QUEUE, None).await.unwrap();
            let s2 = s.clone();
            let (tx, rx) = tokio::sync::oneshot::channel();
            let local = tokio::task::LocalSet::new();
            local
                .run_until(async {
                    let waiter = tokio::task::spawn_local(async move {
                        let r = s2.acquire(QUEUE, None).await.map(|(_, w)| w);
                        let _ = tx.send(());
                        r
                    });
                    while s.waiting() == 0 {
                        tokio::task::yield_now().await;
                    }
                    // The queue holds one: a second waiter is refused.
                    assert_eq!(s.acquire(QUEUE, None).await.unwrap_err(), Refused::Busy);
                    drop(held);
                    rx.await.unwrap();
                    assert_eq!(waiter.await.unwrap(), Ok(Waited::Yes));
                    assert_eq!(s.waiting(), 0);
                })
                .await;
        });
    }

    #[test]
    fn a_waiter_gives_up_after_the_timeout() {
        rt().block_on(async {
            let s = Slots::new(Some(1));
            let _held = s.acquire(QUEUE, None).await.unwrap();
            let short = WaitPolicy {
                timeout: Duration::from_millis(1),
                limit: 10,
            };
            assert_eq!(
                s.acquire(short, None).await.unwrap_err(),
                Refused::WaitTimeout
            );
            assert_eq!(s.waiting(), 0);
        });
    }

    #[test]
    fn the_backend_overrides_the_parameters() {
        rt().block_on(async {
            let mut s = Slots::new(Some(1));
            s.wait_limit = Some(0);
            let _held = s.acquire(QUEUE, None).await.unwrap();
            assert_eq!(s.acquire(QUEUE, None).await.unwrap_err(), Refused::Busy);
        });
    }
}
