//! Keeping connections moving when one worker falls behind. Each worker
//! accepts on a socket of its own (`daemon::listen`), and the kernel
//! picks the socket by a hash of the connection's addresses, blind to how
//! busy each worker is: a worker whose event loop is held by a long piece
//! of work (a page fault on a file store, a large body to compress), or
//! that has more than it can do, would leave the connections hashed to it
//! waiting in its socket's queue while other workers idle.
//!
//! A watcher on the control runtime looks at each socket's queue every
//! `worker_stall_limit`. A worker is behind when connections were
//! waiting in its queue at one look and it has taken fewer than that
//! many by the next (the queue is first in, first out, so at least one of
//! them has waited the whole time). The watcher then takes what waits in
//! that worker's queue and hands each connection to another worker in
//! turn, one not behind itself; from there the connection lives on that
//! worker as any other. A worker keeping up costs the watcher one
//! `getsockopt` a socket a look, and costs the worker one add to a count
//! of its own per connection.

use crate::daemon::workers::Workers;
use crate::transport::sockopt;
use crate::Shared;
use lacquer_core::counters::{Counter, COUNTERS};
use lacquer_core::params::Params;
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::runtime::Handle;

/// The most connections taken from one queue at one look.
const MOST_AT_ONCE: u32 = 4096;

/// How many connections each worker has taken from its socket of one
/// listener; each count written by its worker alone, on a cache line of
/// its own.
pub(crate) struct Taken(Box<[Slot]>);

#[repr(align(128))]
#[derive(Default)]
struct Slot(AtomicU64);

impl Taken {
    pub fn new(workers: usize) -> Taken {
        Taken((0..workers).map(|_| Slot::default()).collect())
    }

    fn get(&self, worker: usize) -> u64 {
        self.0[worker].0.load(Ordering::Relaxed)
    }
}

/// One worker's count in a [`Taken`].
pub(crate) struct TakenBy {
    all: Arc<Taken>,
    worker: usize,
}

impl TakenBy {
    pub fn new(all: &Arc<Taken>, worker: usize) -> TakenBy {
        TakenBy {
            all: all.clone(),
            worker,
        }
    }

    /// Counts a connection the worker took.
    #[inline]
    pub fn count(&self) {
        // Only this worker writes it: a load and a store, no locked add.
        let slot = &self.all.0[self.worker].0;
        slot.store(
            slot.load(Ordering::Relaxed).wrapping_add(1),
            Ordering::Relaxed,
        );
    }
}

/// Starts serving a connection the listener accepted, on the worker it
/// is called on: what the listener's own accept loops do with one.
pub(crate) type Start = Arc<dyn Fn(std::net::TcpStream, SocketAddr) + Send + Sync>;

/// What the watcher of one TCP listener needs: a copy of each worker's
/// socket, their counts, what starts a connection, and the workers to
/// start it on.
pub(crate) struct Watch {
    sockets: Vec<std::net::TcpListener>,
    taken: Arc<Taken>,
    start: Start,
    workers: Vec<Handle>,
}

impl Watch {
    pub fn new(
        sockets: Vec<std::net::TcpListener>,
        taken: Arc<Taken>,
        start: Start,
        workers: &Workers,
    ) -> Watch {
        Watch {
            sockets,
            taken,
            start,
            workers: workers.handles().to_vec(),
        }
    }
}

/// Takes a connection off a listener if one waits (`WouldBlock` if
/// none), non-blocking and close-on-exec.
pub(crate) fn accept_now(
    listener: &std::net::TcpListener,
) -> std::io::Result<(std::net::TcpStream, SocketAddr)> {
    let flags = libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
    let (socket, peer) = socket2::SockRef::from(listener).accept4(flags)?;
    // A TCP listener's peers have IP addresses.
    let peer = peer
        .as_socket()
        .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)));
    Ok((socket.into(), peer))
}

/// What one look saw of a worker's socket.
#[derive(Clone, Copy, Default)]
struct Seen {
    taken: u64,
    queued: u32,
}

impl Seen {
    /// Whether the worker is behind: connections waited at the last look
    /// and it took fewer than that many since.
    fn behind(self, now: Seen) -> bool {
        self.queued > 0 && now.taken.wrapping_sub(self.taken) < u64::from(self.queued)
    }
}

/// The shortest time between two looks at the queues, whatever
/// `worker_stall_limit` says (above 0): a tiny limit would otherwise wake
/// the control thread thousands of times a second.
const SHORTEST_LOOK: Duration = Duration::from_millis(5);

/// Watches a listener's sockets until the task is aborted (`stop`, with
/// the listener's accept loops).
pub(crate) async fn watch(sh: Arc<Shared>, w: Watch) {
    let mut last: Vec<Option<Seen>> = vec![None; w.sockets.len()];
    let mut turn = 0usize;
    loop {
        let limit = Params::duration(sh.params.worker_stall_limit());
        if limit.is_zero() {
            // Off: looked at again in a second, from a fresh start.
            last.fill(None);
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        tokio::time::sleep(limit.max(SHORTEST_LOOK)).await;
        let now: Vec<Seen> = (0..w.sockets.len()).map(|i| w.seen(i)).collect();
        let behind: Vec<bool> = (0..now.len())
            .map(|i| last[i].is_some_and(|before| before.behind(now[i])))
            .collect();
        for (i, &late) in behind.iter().enumerate() {
            if late && now[i].queued > 0 {
                w.take_from(i, now[i].queued, &behind, &mut turn);
            }
        }
        for (i, slot) in last.iter_mut().enumerate() {
            // Read again where connections were taken from it.
            *slot = Some(if behind[i] { w.seen(i) } else { now[i] });
        }
    }
}

impl Watch {
    fn seen(&self, worker: usize) -> Seen {
        Seen {
            taken: self.taken.get(worker),
            queued: sockopt::accept_queue(self.sockets[worker].as_fd()).unwrap_or(0),
        }
    }

    /// Takes up to `queued` connections waiting on `from`'s socket and
    /// starts each on the next worker that is not behind.
    fn take_from(&self, from: usize, queued: u32, behind: &[bool], turn: &mut usize) {
        let n = self.workers.len();
        for _ in 0..queued.min(MOST_AT_ONCE) {
            let Some(to) = (1..=n)
                .map(|k| (*turn + k) % n)
                .find(|&j| j != from && !behind.get(j).copied().unwrap_or(true))
            else {
                return;
            };
            let Ok((stream, peer)) = accept_now(&self.sockets[from]) else {
                // Taken meanwhile by its own worker, or a failure that
                // worker's loop counts when it meets it.
                return;
            };
            *turn = to;
            COUNTERS.inc(Counter::sess_rebalanced);
            let start = self.start.clone();
            self.workers[to].spawn(async move { start(stream, peer) });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_is_behind_when_it_took_fewer_than_had_waited() {
        let seen = |taken, queued| Seen { taken, queued };
        // Nothing waited: never behind, however little it took.
        assert!(!seen(5, 0).behind(seen(5, 9)));
        // Three waited and it took them all (and more came): keeping up.
        assert!(!seen(5, 3).behind(seen(8, 4)));
        // Three waited and it took two: the third waited the whole time.
        assert!(seen(5, 3).behind(seen(7, 1)));
        // Stalled: took none.
        assert!(seen(5, 1).behind(seen(5, 1)));
        // The count wraps.
        assert!(!seen(u64::MAX, 1).behind(seen(0, 0)));
    }

    #[test]
    fn counts_are_each_on_a_line_of_their_own() {
        assert!(std::mem::align_of::<Slot>() >= 128);
        let all = Arc::new(Taken::new(3));
        let (a, b) = (TakenBy::new(&all, 0), TakenBy::new(&all, 2));
        a.count();
        b.count();
        b.count();
        assert_eq!((all.get(0), all.get(1), all.get(2)), (1, 0, 2));
    }
}
