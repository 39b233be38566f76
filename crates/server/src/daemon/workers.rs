//! The client workers: `workers` threads (one per core by default), each
//! running an event loop of its own (a single-threaded runtime with its
//! own reactor and timers). Each TCP listener has a socket per worker
//! (`SO_REUSEPORT`, so the kernel spreads new connections over them by
//! their addresses, as nginx's `reuseport` does) and each worker accepts
//! on its own, so accepting scales with the workers instead of queueing
//! behind one accept loop. A connection then lives its whole life on the
//! worker that accepted it: its session, its requests, the fetches and
//! ESI includes they start, its timers; nothing of it is handed to
//! another thread. Work shared between workers (the cache, a fetch
//! others wait on) meets through the cache's own locks and channels.
//!
//! The rest of the daemon (the management interface, the dashboard,
//! health probes, the once-a-second housekeeping) runs on a separate
//! small runtime, so that none of it takes a client worker's time.

use lacquer_core::counters::{Counter, COUNTERS};
use std::sync::mpsc;
use tokio::runtime::Handle;

/// The running client workers.
#[derive(Clone)]
pub(crate) struct Workers {
    handles: Vec<Handle>,
}

impl Workers {
    /// Starts `count` worker threads (at least one) and waits until each
    /// runs its event loop.
    pub fn start(count: usize) -> Result<Workers, String> {
        // The workers themselves, counted as they start; the threads
        // their runtimes start (for blocking work) count themselves.
        COUNTERS.add(Counter::threads, count.max(1) as u64);
        COUNTERS.add(Counter::threads_created, count.max(1) as u64);
        let count = count.max(1);
        let (tx, rx) = mpsc::channel();
        for index in 0..count {
            let tx = tx.clone();
            std::thread::Builder::new()
                .name("lacquer-worker".into())
                .spawn(move || run_worker(index, tx))
                .map_err(|e| format!("Cannot start worker {index}: {e}"))?;
        }
        drop(tx);
        let mut handles: Vec<Option<Handle>> = vec![None; count];
        for _ in 0..count {
            let (index, started) = rx
                .recv()
                .map_err(|_| "A worker ended as it started".to_string())?;
            handles[index] = Some(started?);
        }
        Ok(Workers {
            handles: handles.into_iter().flatten().collect(),
        })
    }

    /// How many workers `-p workers` asks for: 0 is one per core.
    pub fn count(params: &lacquer_core::params::Params) -> usize {
        match params.workers() {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n as usize,
        }
    }

    /// Each worker's runtime, in worker order.
    pub fn handles(&self) -> &[Handle] {
        &self.handles
    }

    pub fn len(&self) -> usize {
        self.handles.len()
    }
}

/// A worker thread: builds its runtime, reports it, and runs it for the
/// rest of the process's life.
fn run_worker(index: usize, started: mpsc::Sender<(usize, Result<Handle, String>)>) {
    let mut builder = tokio::runtime::Builder::new_current_thread();
    let runtime = count_threads(&mut builder)
        // Workers gather their log records into batches, written when a
        // batch fills, or has waited a little and the worker goes idle
        // (or the sweeper finds it).
        .on_thread_park(|| {
            lacquer_shm::batch::going_idle();
            // No place for a request waits on a thread with nothing to do
            // when places run short.
            crate::session::admission::idle_lease();
        })
        .enable_all()
        .build();
    let runtime = match runtime {
        Ok(runtime) => runtime,
        Err(e) => {
            let _ = started.send((index, Err(format!("Cannot start worker {index}: {e}"))));
            return;
        }
    };
    lacquer_shm::batch::batch_on_this_thread();
    lacquer_shm::batch::start_sweeper();
    let _ = started.send((index, Ok(runtime.handle().clone())));
    // Its tasks run while it waits on nothing, for ever.
    runtime.block_on(std::future::pending::<()>());
}

/// Has a runtime count the threads it starts and stops (its blocking
/// pool's, and a multi-threaded one's workers) in `MAIN.threads`,
/// `threads_created` and `threads_destroyed`, as varnishd counts its pools'.
pub(crate) fn count_threads(builder: &mut tokio::runtime::Builder) -> &mut tokio::runtime::Builder {
    builder
        .on_thread_start(|| {
            COUNTERS.inc(Counter::threads);
            COUNTERS.inc(Counter::threads_created);
        })
        .on_thread_stop(|| {
            COUNTERS.dec(Counter::threads);
            COUNTERS.inc(Counter::threads_destroyed);
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each worker runs what is spawned on it on its own thread, and what
    /// a task spawns stays there.
    #[test]
    fn tasks_stay_on_the_worker_they_were_given() {
        let workers = Workers::start(3).unwrap();
        assert_eq!(workers.len(), 3);
        let mut threads = Vec::new();
        for handle in workers.handles() {
            let (tx, rx) = mpsc::channel();
            handle.spawn(async move {
                let own = std::thread::current().id();
                let child = tokio::spawn(async { std::thread::current().id() });
                tx.send((own, child.await.unwrap())).unwrap();
            });
            let (own, child) = rx.recv().unwrap();
            assert_eq!(own, child, "a task's own spawn ran elsewhere");
            threads.push(own);
        }
        threads.sort_by_key(|t| format!("{t:?}"));
        threads.dedup();
        assert_eq!(threads.len(), 3, "two workers shared a thread");
    }
}
