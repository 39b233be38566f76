//! The deadlines of a client connection: the send clock of a response
//! (`send_timeout`, `idle_send_timeout`), the timer a connection keeps for
//! its waits between requests (`timeout_idle`, `timeout_linger`), and the
//! timeouts VCL sets for a session (`sess.*`). Each is a few words, as
//! they live in every connection's task.

use std::future::Future;
use std::time::{Duration, Instant};

/// Deadlines of one response delivery: `send_timeout` counts from when
/// the response was made, as varnishd counts it (on the wall clock, from
/// the request's last timestamp), and the clock is read only when a write
/// has to wait: a response the socket takes at once (most) reads none.
#[derive(Debug)]
pub(crate) struct SendClock {
    /// When the delivery began (seconds of the epoch).
    start: f64,
    /// `send_timeout` and `idle_send_timeout`, in seconds as the
    /// parameters give them: made durations only when a write waits.
    send: f64,
    idle: f64,
}

impl SendClock {
    /// A clock started now.
    pub fn new(send_timeout: Duration, idle_send_timeout: Duration) -> Self {
        SendClock::since(
            lacquer_core::time::now(),
            send_timeout.as_secs_f64(),
            idle_send_timeout.as_secs_f64(),
        )
    }

    /// A clock started at `start` (a time already read: the response's
    /// `Process` timestamp), with timeouts in seconds (a NaN or a
    /// negative one is none).
    pub fn since(start: f64, send_timeout: f64, idle_send_timeout: f64) -> Self {
        SendClock {
            start,
            send: send_timeout,
            idle: idle_send_timeout,
        }
    }

    /// How long the next write may wait: None once the deadline passed.
    pub(crate) fn next_limit(&self) -> Option<Duration> {
        let send = lacquer_core::params::Params::duration(self.send).as_secs_f64();
        let left = self.start + send - lacquer_core::time::now();
        if left.is_nan() || left <= 0.0 {
            return None;
        }
        let left = Duration::try_from_secs_f64(left).unwrap_or(Duration::MAX);
        Some(left.min(lacquer_core::params::Params::duration(self.idle)))
    }
}

/// A connection's timer for the waits between requests: made on the first
/// wait that cannot end at once and kept, so that a busy keep-alive
/// connection does not arm and clear a timer for every request. A wait
/// that must end sooner than the timer moves it; one that may end later
/// leaves it, and when it fires early it is moved on to that wait's
/// deadline then (about once a `timeout_linger` on a busy connection).
#[derive(Default)]
pub(crate) struct WaitTimer(Option<std::pin::Pin<Box<tokio::time::Sleep>>>);

impl WaitTimer {
    /// Runs `fut` until it ends (`Some`) or the deadline passes (`None`).
    /// The deadline is asked for, and the timer made or moved, only when
    /// `fut` first has to wait: a wait that ends at once (the next
    /// request already there) reads no clock and touches no timer. A
    /// plain future over `fut` and the timer (no state of its own to
    /// grow the connection's task).
    pub(crate) fn bound<'a, F: Future + Unpin + 'a>(
        &'a mut self,
        deadline: impl FnOnce() -> Instant + 'a,
        mut fut: F,
    ) -> impl Future<Output = Option<F::Output>> + 'a {
        use std::task::Poll;
        let mut deadline = Some(deadline);
        let mut armed: Option<tokio::time::Instant> = None;
        std::future::poll_fn(move |cx| {
            if let Poll::Ready(out) = std::pin::Pin::new(&mut fut).poll(cx) {
                return Poll::Ready(Some(out));
            }
            let at = match (armed, deadline.take()) {
                (Some(at), _) => at,
                (None, Some(deadline)) => {
                    let at = tokio::time::Instant::from_std(deadline());
                    match &mut self.0 {
                        Some(timer) if timer.deadline() > at => timer.as_mut().reset(at),
                        Some(_) => {}
                        None => self.0 = Some(Box::pin(tokio::time::sleep_until(at))),
                    }
                    armed = Some(at);
                    at
                }
                // Not reached: the deadline is taken when first armed.
                (None, None) => return Poll::Ready(None),
            };
            let Some(timer) = &mut self.0 else {
                return Poll::Ready(None);
            };
            loop {
                match timer.as_mut().poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(()) if tokio::time::Instant::now() >= at => {
                        return Poll::Ready(None)
                    }
                    // Set for an earlier wait: on to this one's deadline.
                    Poll::Ready(()) => timer.as_mut().reset(at),
                }
            }
        })
    }
}

/// The timeouts of one session, as `sess.*` in VCL sets them.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SessTimeouts {
    pub send: SessTimeout,
    pub idle_send: SessTimeout,
    pub idle: SessTimeout,
    pub linger: SessTimeout,
}

/// A timeout VCL may have set for a session: seconds, or NaN while it has
/// not (one word where an `Option<f64>` takes two: these live in every
/// connection's state and every request's).
#[derive(Debug, Clone, Copy)]
pub(crate) struct SessTimeout(f64);

impl Default for SessTimeout {
    fn default() -> Self {
        SessTimeout(f64::NAN)
    }
}

impl SessTimeout {
    /// Set to `secs` (NaN leaves it unset).
    pub fn set(secs: f64) -> SessTimeout {
        SessTimeout(secs)
    }

    /// The seconds set, or `default` (the parameter) when none were.
    pub fn or(self, default: f64) -> f64 {
        if self.0.is_nan() {
            default
        } else {
            self.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block_on(f: impl Future<Output = ()>) {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
            .block_on(f);
    }

    fn after(ms: u64) -> Instant {
        Instant::now() + Duration::from_millis(ms)
    }

    #[test]
    fn send_timeout_counts_from_the_start_of_the_delivery() {
        let now = lacquer_core::time::now();
        let secs = Duration::from_secs;
        // Time before the first wait (a backend streaming slowly) counts.
        assert_eq!(SendClock::since(now - 10.0, 5.0, 60.0).next_limit(), None);
        let left = SendClock::since(now - 1.0, 5.0, 60.0).next_limit().unwrap();
        assert!(
            left <= secs(4) && left > Duration::from_millis(3500),
            "{left:?}"
        );
        // Each wait is bounded by idle_send_timeout too.
        assert_eq!(SendClock::since(now, 5.0, 1.0).next_limit(), Some(secs(1)));
        // A timeout too large for a Duration is a long one (the most a
        // parameter can say), not a panic.
        for huge in [f64::INFINITY, 1e300] {
            let left = SendClock::since(now, huge, huge).next_limit();
            assert!(left.is_some_and(|d| d > secs(999_000_000)), "{left:?}");
        }
        // Unset (NaN) or negative: no time to wait at all.
        for none in [f64::NAN, -1.0] {
            assert_eq!(SendClock::since(now, none, 60.0).next_limit(), None);
            assert_eq!(
                SendClock::since(now, 60.0, none).next_limit(),
                Some(Duration::ZERO)
            );
        }
    }

    #[test]
    fn a_wait_ends_with_its_future_or_at_its_deadline() {
        block_on(async {
            let mut timer = WaitTimer::default();
            let asked = std::cell::Cell::new(false);
            let deadline = || {
                asked.set(true);
                after(1000)
            };
            assert_eq!(timer.bound(deadline, std::future::ready(7)).await, Some(7));
            assert!(!asked.get(), "a wait over at once reads no clock");
            assert!(timer.0.is_none(), "and makes no timer");
            let start = Instant::now();
            let never = std::future::pending::<()>();
            assert_eq!(timer.bound(|| after(30), never).await, None);
            assert!(start.elapsed() >= Duration::from_millis(30));
        });
    }

    #[test]
    fn the_kept_timer_follows_each_waits_deadline() {
        block_on(async {
            let mut timer = WaitTimer::default();
            // Set for a short wait, then fired: a later wait runs to its
            // own deadline, not the timer's.
            assert_eq!(
                timer
                    .bound(|| after(20), std::future::pending::<()>())
                    .await,
                None
            );
            let start = Instant::now();
            assert_eq!(
                timer
                    .bound(|| after(80), std::future::pending::<()>())
                    .await,
                None
            );
            assert!(start.elapsed() >= Duration::from_millis(80));
            // Set far off by a wait that ended at once: a shorter wait
            // moves it sooner.
            assert_eq!(
                timer.bound(|| after(60_000), std::future::ready(())).await,
                Some(())
            );
            let start = Instant::now();
            assert_eq!(
                timer
                    .bound(|| after(30), std::future::pending::<()>())
                    .await,
                None
            );
            let took = start.elapsed();
            assert!(took >= Duration::from_millis(30) && took < Duration::from_secs(30));
            // Set to end sooner than a later wait, which it does not cut short.
            assert_eq!(
                timer.bound(|| after(10), std::future::ready(())).await,
                Some(())
            );
            let start = Instant::now();
            assert_eq!(
                timer
                    .bound(|| after(60), std::future::pending::<()>())
                    .await,
                None
            );
            assert!(start.elapsed() >= Duration::from_millis(60));
        });
    }
}
