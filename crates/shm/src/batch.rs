//! Per-worker log batches: a worker thread that asks for it gathers the
//! records of the transactions it finishes in a buffer of its own and
//! hands them to the ring together, when the buffer is full or the
//! worker runs out of work (it is about to park), so that the ring's
//! writer lock is taken once per batch rather than once per transaction.
//! Threads that never asked (the CLI, tests) write straight to the ring.
//!
//! A batch waits at most until its worker goes idle: under load, for a
//! buffer's worth of transactions; otherwise not at all. When the process
//! is about to end ([`Log::write_through`]), each thread writes its batch
//! with its next records, and those at once.

use crate::ring::Log;
use lacquer_core::counters::{Counter, COUNTERS};
use std::cell::RefCell;

/// Bytes a worker gathers before it writes them to the ring.
const BATCH: usize = 32 << 10;

#[derive(Default)]
struct Pending {
    enabled: bool,
    log: Option<&'static Log>,
    buf: Vec<u8>,
}

impl Pending {
    fn flush(&mut self) {
        if let Some(log) = &self.log {
            if !self.buf.is_empty() {
                log.write(&self.buf);
            }
        }
        self.buf.clear();
    }
}

impl Drop for Pending {
    /// A thread that ends writes what it gathered.
    fn drop(&mut self) {
        self.flush();
    }
}

thread_local! {
    static PENDING: RefCell<Pending> = RefCell::new(Pending::default());
}

/// Makes this thread gather its transactions' records into batches; it
/// must then call [`flush_this_thread`] before it parks (what is left
/// when it ends is written then).
pub fn batch_on_this_thread() {
    PENDING.with(|p| p.borrow_mut().enabled = true);
}

/// Writes what this thread has gathered to the ring.
pub fn flush_this_thread() {
    // A thread being torn down may have lost its locals already.
    let _ = PENDING.try_with(|p| {
        if let Ok(mut p) = p.try_borrow_mut() {
            p.flush();
        }
    });
}

impl Log {
    /// Hands whole records to the ring: gathered on a batching thread,
    /// written at once on any other.
    pub(crate) fn write_batched(&'static self, records: &[u8]) {
        write(self, records);
    }
}

fn write(log: &'static Log, records: &[u8]) {
    let direct = PENDING
        .try_with(|p| {
            let Ok(mut p) = p.try_borrow_mut() else {
                return true;
            };
            if !p.enabled {
                return true;
            }
            if log.writes_through() {
                p.flush();
                return true;
            }
            if !p.log.is_some_and(|l| std::ptr::eq(l, log)) {
                p.flush();
                p.log = Some(log);
            }
            if p.buf.len() + records.len() > log.batch_limit(BATCH) {
                COUNTERS.inc(Counter::shm_flushes);
                p.flush();
            }
            p.buf.extend_from_slice(records);
            false
        })
        .unwrap_or(true);
    if direct {
        log.write(records);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ring::Reader;

    /// A fresh ring in its own directory, a reader at its start and one
    /// record to write.
    fn ring(name: &str) -> (std::path::PathBuf, &'static Log, Reader, Vec<u8>) {
        let dir = std::env::temp_dir().join(format!("lq-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = Log::create(&dir, 1 << 20).unwrap().leak();
        let reader = Reader::open(&dir, true).unwrap();
        let mut rec = Vec::new();
        crate::Record::new(1, crate::Tag::Debug, crate::Side::Client, b"x").encode(&mut rec);
        (dir, log, reader, rec)
    }

    fn records_in(reader: &mut Reader) -> usize {
        let mut out = Vec::new();
        reader.poll(&mut out).unwrap();
        out.len()
    }

    /// A batching thread that runs `body` in step with the test: each
    /// `pause()` of the thread waits for the test's `step()` to have seen
    /// it and for its next `step()` (or `finish()`) to let it on.
    struct Lockstep {
        paused: std::sync::mpsc::Receiver<()>,
        go: std::sync::mpsc::Sender<()>,
        thread: std::thread::JoinHandle<()>,
    }

    impl Lockstep {
        fn start(body: impl FnOnce(&dyn Fn()) + Send + 'static) -> Lockstep {
            let (paused_tx, paused) = std::sync::mpsc::channel();
            let (go, go_rx) = std::sync::mpsc::channel::<()>();
            let thread = std::thread::spawn(move || {
                batch_on_this_thread();
                body(&|| {
                    paused_tx.send(()).unwrap();
                    go_rx.recv().unwrap();
                });
            });
            let first = Lockstep { paused, go, thread };
            first.paused.recv().unwrap();
            first
        }

        /// Lets the thread on to its next pause.
        fn step(&self) {
            self.go.send(()).unwrap();
            self.paused.recv().unwrap();
        }

        /// Lets the thread on to its end.
        fn finish(self) {
            self.go.send(()).unwrap();
            self.thread.join().unwrap();
        }
    }

    #[test]
    fn a_batching_thread_writes_when_it_flushes_or_ends_others_at_once() {
        let (dir, log, mut reader, rec) = ring("batch");
        write(log, &rec);
        assert_eq!(records_in(&mut reader), 1, "a plain thread writes at once");
        let worker = {
            let rec = rec.clone();
            Lockstep::start(move |pause| {
                write(log, &rec);
                write(log, &rec);
                pause();
                flush_this_thread();
                pause();
                write(log, &rec);
            })
        };
        assert_eq!(records_in(&mut reader), 0, "gathered, not yet written");
        worker.step();
        assert_eq!(records_in(&mut reader), 2, "flushed together");
        worker.finish();
        assert_eq!(records_in(&mut reader), 1, "written as the thread ended");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn once_the_log_writes_through_a_batch_goes_with_the_next_records() {
        let (dir, log, mut reader, rec) = ring("through");
        let worker = Lockstep::start(move |pause| {
            write(log, &rec);
            write(log, &rec);
            pause();
            write(log, &rec);
            pause();
        });
        assert_eq!(records_in(&mut reader), 0, "gathered");
        log.write_through();
        worker.step();
        // The thread has neither flushed nor ended: its next record took
        // the two gathered ones with it.
        assert_eq!(records_in(&mut reader), 3, "written through");
        worker.finish();
        std::fs::remove_dir_all(&dir).ok();
    }
}
