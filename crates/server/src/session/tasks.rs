//! Session tasks kept between connections. A session's task is made once
//! and serves connection after connection: when one ends, the task waits
//! on its worker thread's list of idle tasks, and the next connection
//! accepted on that thread is handed to it rather than to a new task.
//!
//! With one request a connection, making a task was a good part of a
//! request's cost: the task's memory (aligned, so the allocator's slow
//! path), the session's state boxed beside it (6 KiB), and both freed
//! again. A kept task costs none of that; it is the counterpart of an
//! idle thread in a Varnish thread pool, and `thread_pool_min` bounds how
//! many each worker keeps, as it bounds the threads Varnish keeps.
//!
//! An idle task holds no connection, no VCL program and no request state:
//! only its memory and a reference to the daemon.

use crate::session::serve_connection;
use crate::transport::io::{ClientStream, SessAddrs};
use crate::Shared;
use lacquer_core::counters::{Counter, COUNTERS};
use std::cell::RefCell;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

/// A connection to serve: its stream, its addresses, whether a PROXY
/// header comes first.
pub(crate) struct Conn {
    pub stream: Box<dyn ClientStream>,
    pub addrs: Arc<SessAddrs>,
    pub proxy: bool,
}

/// Where an idle task waits for its next connection.
struct Handoff {
    /// The address of the daemon state the task serves (only compared: a
    /// thread may, in tests, have served more than one daemon).
    daemon: usize,
    slot: Mutex<Slot>,
}

/// What an idle task is handed, and its waker while it waits.
#[derive(Default)]
struct Slot {
    next: Option<Next>,
    waker: Option<Waker>,
}

/// What ends an idle task's wait.
enum Next {
    Serve(Conn),
    /// Taken off its thread's list and not to be used again: it ends.
    LetGo,
}

thread_local! {
    /// This worker thread's idle tasks, the most recently idle last (its
    /// memory is the likeliest to be in the caches).
    static IDLE: RefCell<Vec<Arc<Handoff>>> = const { RefCell::new(Vec::new()) };
}

/// Serves `conn` on an idle task of this thread, or on a new one.
pub(crate) fn spawn_session(sh: &Arc<Shared>, conn: Conn) {
    let conn = match hand_to_idle(sh, conn) {
        Ok(()) => return,
        Err(conn) => conn,
    };
    COUNTERS.inc(Counter::sess_task_created);
    let sh = sh.clone();
    tokio::spawn(async move {
        // In `MAIN.sess_tasks` for as long as it lives (or until its
        // runtime drops it).
        let _live = COUNTERS.hold(Counter::sess_tasks);
        let handoff = Arc::new(Handoff {
            daemon: Arc::as_ptr(&sh) as usize,
            slot: Mutex::default(),
        });
        let mut conn = conn;
        loop {
            serve_connection(&sh, conn.stream, conn.addrs, conn.proxy).await;
            let keep = sh.params.thread_pool_min() as usize;
            if !go_idle(&handoff, keep) {
                return;
            }
            conn = match std::future::poll_fn(|cx| wait(&handoff, cx)).await {
                Next::Serve(conn) => conn,
                Next::LetGo => return,
            };
        }
    });
}

/// Puts a task that has served its connection on its thread's list, if
/// that holds fewer than `keep`; lets the oldest go past that (the
/// parameter was lowered).
fn go_idle(handoff: &Arc<Handoff>, keep: usize) -> bool {
    IDLE.try_with(|idle| {
        let mut idle = idle.borrow_mut();
        while idle.len() > keep {
            let oldest = idle.remove(0);
            COUNTERS.dec(Counter::sess_task_idle);
            give(&oldest, Next::LetGo);
        }
        if idle.len() == keep {
            return false;
        }
        idle.push(handoff.clone());
        COUNTERS.inc(Counter::sess_task_idle);
        true
    })
    .unwrap_or(false)
}

/// An idle task's wait: what it is handed, once it is.
fn wait(handoff: &Handoff, cx: &mut Context<'_>) -> Poll<Next> {
    let mut slot = lock(&handoff.slot);
    if let Some(next) = slot.next.take() {
        return Poll::Ready(next);
    }
    match &mut slot.waker {
        Some(w) => w.clone_from(cx.waker()),
        None => slot.waker = Some(cx.waker().clone()),
    }
    Poll::Pending
}

/// Gives `conn` to the task of this daemon that went idle last on this
/// thread, if there is one; gives it back otherwise.
fn hand_to_idle(sh: &Arc<Shared>, conn: Conn) -> Result<(), Conn> {
    let daemon = Arc::as_ptr(sh) as usize;
    let found = IDLE
        .try_with(|idle| {
            let mut idle = idle.borrow_mut();
            while let Some(h) = idle.pop() {
                COUNTERS.dec(Counter::sess_task_idle);
                if h.daemon != daemon {
                    // Another daemon's, in a test that ran two on this
                    // thread: not for this connection.
                    give(&h, Next::LetGo);
                } else if Arc::strong_count(&h) > 1 {
                    return Some(h);
                }
                // Else a task its runtime dropped: nothing waits on it.
            }
            None
        })
        .ok()
        .flatten();
    let Some(h) = found else {
        return Err(conn);
    };
    COUNTERS.inc(Counter::sess_task_reused);
    give(&h, Next::Serve(conn));
    Ok(())
}

/// Ends an idle task's wait with `next`.
fn give(h: &Handoff, next: Next) {
    let waker = {
        let mut slot = lock(&h.slot);
        slot.next = Some(next);
        slot.waker.take()
    };
    // The task went idle within a poll that stored its waker; none there
    // means it has not been polled since, and will find `next` when it is.
    if let Some(waker) = waker {
        waker.wake();
    }
}

fn lock(slot: &Mutex<Slot>) -> MutexGuard<'_, Slot> {
    slot.lock().unwrap_or_else(|e| e.into_inner())
}
