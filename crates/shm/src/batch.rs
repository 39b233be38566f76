//! Per-worker log batches: a worker thread that asks for it gathers the
//! records of the transactions it finishes in a buffer of its own and
//! hands them to the ring together, so that the ring's writer lock and
//! header (lines every worker writes) are taken once per batch rather
//! than once per transaction. Threads that never asked (the CLI, tests)
//! write straight to the ring.
//!
//! A batch is written when it is full; when its worker is about to park
//! and the sweeper has ticked (every [`SWEEP`]) since the batch's first
//! records; and, for a worker that stays idle (or busy without parking),
//! by the sweeper itself, a thread that ticks every `SWEEP` and writes the
//! batches that have seen two ticks. A record so reaches readers within
//! two `SWEEP`s of its transaction's end, and a worker that naps between
//! a few connections (as each of eight busy cores does) writes the ring
//! about once per `SWEEP`, not at every nap; the sweeper, not the worker,
//! wakes to write what an idle worker left, and nobody reads a clock for
//! it (the ticks are a count the sweeper keeps). The sweeper sleeps while
//! no batch holds anything, and the thread that starts the next batch
//! wakes it, so an idle daemon does not wake for its log. When the
//! process is about to end ([`Log::write_through`]), each thread writes
//! its batch with its next records, and those at once, and [`flush_all`]
//! writes every batch.

use crate::ring::Log;
use lacquer_core::counters::{Counter, COUNTERS};
use std::cell::RefCell;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Once, OnceLock, TryLockError, Weak};
use std::time::Duration;

/// Bytes a worker gathers before it writes them to the ring.
const BATCH: usize = 32 << 10;

/// How often the sweeper ticks and looks at the batches.
pub const SWEEP: Duration = Duration::from_millis(5);

/// The sweeper's ticks so far.
static TICKS: AtomicU64 = AtomicU64::new(0);

#[derive(Default)]
struct Pending {
    log: Option<&'static Log>,
    buf: Vec<u8>,
    /// The tick at which the batch's first records were gathered (None
    /// while empty).
    since: Option<u64>,
}

impl Pending {
    fn flush(&mut self) {
        if let Some(log) = &self.log {
            if !self.buf.is_empty() {
                log.write(&self.buf);
            }
        }
        self.buf.clear();
        self.since = None;
    }

    /// Writes the batch if its first records were gathered `ticks` or
    /// more ticks before `now`, or the ring now writes through.
    fn flush_if_older(&mut self, now: u64, ticks: u64) {
        let Some(since) = self.since else {
            return;
        };
        if self.log.is_some_and(|l| l.writes_through()) || now.saturating_sub(since) >= ticks {
            self.flush();
        }
    }
}

impl Drop for Pending {
    /// A thread that ends writes what it gathered.
    fn drop(&mut self) {
        self.flush();
    }
}

/// A thread's batch, shared with the sweeper.
type Shelf = Arc<Mutex<Pending>>;

fn lock(shelf: &Mutex<Pending>) -> MutexGuard<'_, Pending> {
    shelf.lock().unwrap_or_else(|e| e.into_inner())
}

thread_local! {
    static MINE: RefCell<Option<Shelf>> = const { RefCell::new(None) };
}

/// Every batching thread's batch, for the sweeper and [`flush_all`].
static SHELVES: Mutex<Vec<Weak<Mutex<Pending>>>> = Mutex::new(Vec::new());

/// Makes this thread gather its transactions' records into batches; it
/// should then call [`going_idle`] before it parks (what is left when it
/// ends is written then).
pub fn batch_on_this_thread() {
    let _ = MINE.try_with(|mine| {
        let mut mine = mine.borrow_mut();
        if mine.is_none() {
            let shelf = Shelf::default();
            SHELVES
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(Arc::downgrade(&shelf));
            *mine = Some(shelf);
        }
    });
}

/// Runs `f` on this thread's batch, if it gathers one.
fn with_mine<R>(f: impl FnOnce(&mut Pending) -> R) -> Option<R> {
    // A thread being torn down may have lost its locals already.
    MINE.try_with(|mine| {
        let mine = mine.try_borrow().ok()?;
        let shelf = mine.as_ref()?;
        let mut pending = lock(shelf);
        Some(f(&mut pending))
    })
    .ok()
    .flatten()
}

/// This thread is about to park: writes its batch if the sweeper has
/// ticked since its first records, or at once where no sweeper runs;
/// otherwise the sweeper writes it in time.
pub fn going_idle() {
    let ticks = u64::from(SWEEPING.load(Ordering::Relaxed));
    with_mine(|p| p.flush_if_older(TICKS.load(Ordering::Relaxed), ticks));
}

/// Writes every thread's batch now (the process is about to end).
pub fn flush_all() {
    sweep(TICKS.load(Ordering::Relaxed), 0);
}

/// Writes each batch gathered `ticks` or more ticks before `now`, skipping
/// those whose thread is adding to them this instant (it writes them
/// itself in time). Says whether any batch may still hold records.
fn sweep(now: u64, ticks: u64) -> bool {
    sweep_shelves(
        &mut SHELVES.lock().unwrap_or_else(|e| e.into_inner()),
        now,
        ticks,
    )
}

/// [`sweep`] over `shelves`, dropping those of threads that ended.
fn sweep_shelves(shelves: &mut Vec<Weak<Mutex<Pending>>>, now: u64, ticks: u64) -> bool {
    let mut left = false;
    shelves.retain(|weak| {
        let Some(shelf) = weak.upgrade() else {
            return false;
        };
        let mut pending = match shelf.try_lock() {
            Ok(pending) => pending,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => {
                left = true;
                return true;
            }
        };
        pending.flush_if_older(now, ticks);
        left |= pending.since.is_some();
        true
    });
    left
}

/// Whether the sweeper runs: until it does, a worker about to park writes
/// its batch whatever its age.
static SWEEPING: AtomicBool = AtomicBool::new(false);

/// The sweeper's thread, once it runs.
static SWEEPER: OnceLock<std::thread::Thread> = OnceLock::new();

/// Set while the sweeper sleeps until a batch starts (nothing was
/// gathered anywhere): an idle daemon does not wake for its log.
static ASLEEP: AtomicBool = AtomicBool::new(false);

/// Starts the sweeper (once per process): a thread that writes, every
/// [`SWEEP`], the batches idle workers left, and sleeps while there are
/// none.
pub fn start_sweeper() {
    static STARTED: Once = Once::new();
    STARTED.call_once(|| {
        let started = std::thread::Builder::new()
            .name("log-sweeper".into())
            .spawn(sweeper);
        match started {
            Ok(_) => SWEEPING.store(true, Ordering::Relaxed),
            // Without it, batches are written when they fill and as their
            // workers park.
            Err(e) => eprintln!("Cannot start the log sweeper: {e}"),
        }
    });
}

fn sweeper() {
    let _ = SWEEPER.set(std::thread::current());
    loop {
        std::thread::sleep(SWEEP);
        let now = TICKS.fetch_add(1, Ordering::Relaxed) + 1;
        // A batch that has seen one tick is its worker's to write as it
        // parks; one that has seen two, its worker is idle (or has not
        // parked since).
        if sweep(now, 2) {
            continue;
        }
        // Nothing gathered anywhere: sleep until a batch starts. Either
        // the look below sees a batch that started since, or its thread
        // sees `ASLEEP` and wakes the sweeper (`wake_sweeper`).
        ASLEEP.store(true, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        if sweep(now, u64::MAX) {
            ASLEEP.store(false, Ordering::Relaxed);
            continue;
        }
        while ASLEEP.load(Ordering::Acquire) {
            std::thread::park();
        }
    }
}

/// A batch has just started: wakes the sweeper if it sleeps.
fn wake_sweeper() {
    fence(Ordering::SeqCst);
    if ASLEEP.load(Ordering::Relaxed) && ASLEEP.swap(false, Ordering::AcqRel) {
        if let Some(sweeper) = SWEEPER.get() {
            sweeper.unpark();
        }
    }
}

impl Log {
    /// Hands whole records to the ring: gathered on a batching thread,
    /// written at once on any other.
    pub(crate) fn write_batched(&'static self, records: &[u8]) {
        write(self, records);
    }
}

fn write(log: &'static Log, records: &[u8]) {
    let gathered = with_mine(|p| {
        if log.writes_through() {
            p.flush();
            return false;
        }
        if !p.log.is_some_and(|l| std::ptr::eq(l, log)) {
            p.flush();
            p.log = Some(log);
        }
        if p.buf.len() + records.len() > log.batch_limit(BATCH) {
            COUNTERS.inc(Counter::shm_flushes);
            p.flush();
        }
        if p.since.is_none() {
            p.since = Some(TICKS.load(Ordering::Relaxed));
            wake_sweeper();
        }
        p.buf.extend_from_slice(records);
        true
    });
    if gathered != Some(true) {
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
                with_mine(Pending::flush);
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
    fn a_thread_going_idle_writes_its_batch_once_it_has_waited() {
        let (dir, log, mut reader, rec) = ring("idle");
        let worker = Lockstep::start(move |pause| {
            write(log, &rec);
            let since = with_mine(|p| p.since).flatten().unwrap();
            with_mine(|p| p.flush_if_older(since, 1));
            pause();
            with_mine(|p| p.flush_if_older(since + 1, 1));
            pause();
            write(log, &rec);
            // No sweeper runs in this process: going idle writes at once.
            going_idle();
            pause();
        });
        assert_eq!(records_in(&mut reader), 0, "no tick yet: not written");
        worker.step();
        assert_eq!(records_in(&mut reader), 1, "written after a tick");
        worker.step();
        assert_eq!(records_in(&mut reader), 1, "written as it went idle");
        worker.finish();
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn the_sweeper_writes_what_an_idle_thread_left_and_forgets_ended_threads() {
        let (dir, log, mut reader, rec) = ring("sweep");
        let (shelf_tx, shelf_rx) = std::sync::mpsc::channel();
        let worker = Lockstep::start(move |pause| {
            write(log, &rec);
            let mine = MINE.with(|m| m.borrow().as_ref().map(Arc::downgrade));
            shelf_tx.send(mine.unwrap()).unwrap();
            pause();
            write(log, &rec);
            pause();
        });
        let mut shelves = vec![shelf_rx.recv().unwrap()];
        let since = lock(&shelves[0].upgrade().unwrap()).since.unwrap();
        assert!(sweep_shelves(&mut shelves, since + 1, 2), "records left");
        assert_eq!(
            records_in(&mut reader),
            0,
            "one tick old: left to its thread"
        );
        {
            // A batch its thread holds is left to the thread.
            let shelf = shelves[0].upgrade().unwrap();
            let _held = lock(&shelf);
            assert!(sweep_shelves(&mut shelves, since + 2, 2), "maybe left");
            assert_eq!(records_in(&mut reader), 0, "held by its thread");
        }
        assert!(!sweep_shelves(&mut shelves, since + 2, 2), "none left");
        assert_eq!(records_in(&mut reader), 1, "swept at two ticks");
        worker.step();
        worker.finish();
        assert_eq!(records_in(&mut reader), 1, "written as the thread ended");
        sweep_shelves(&mut shelves, since + 9, 0);
        assert!(shelves.is_empty(), "an ended thread's shelf is forgotten");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn threads_and_a_sweeper_at_once_lose_nothing_and_keep_each_threads_order() {
        const THREADS: u64 = 4;
        const EACH: u64 = 4000;
        let (dir, log, mut reader, _) = ring("race");
        let shelves = Arc::new(Mutex::new(Vec::new()));
        let done = Arc::new(AtomicBool::new(false));
        let sweeper = {
            let (shelves, done) = (shelves.clone(), done.clone());
            std::thread::spawn(move || {
                let mut now = 0;
                while !done.load(Ordering::Relaxed) {
                    now += 1;
                    sweep_shelves(&mut shelves.lock().unwrap(), now, now % 3);
                    std::thread::yield_now();
                }
            })
        };
        let writers: Vec<_> = (1..=THREADS)
            .map(|id| {
                let shelves = shelves.clone();
                std::thread::spawn(move || {
                    batch_on_this_thread();
                    let mine = MINE.with(|m| m.borrow().as_ref().map(Arc::downgrade));
                    shelves.lock().unwrap().push(mine.unwrap());
                    let mut rec = Vec::new();
                    for seq in 0..EACH {
                        rec.clear();
                        let text = seq.to_string();
                        crate::Record::new(
                            id,
                            crate::Tag::Debug,
                            crate::Side::Client,
                            text.as_bytes(),
                        )
                        .encode(&mut rec);
                        write(log, &rec);
                        if seq % 97 == 0 {
                            going_idle();
                        }
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        done.store(true, Ordering::Relaxed);
        sweeper.join().unwrap();
        let mut out = Vec::new();
        while reader.poll(&mut out).unwrap() > 0 {}
        let mut next = [0u64; THREADS as usize + 1];
        for r in &out {
            let seq: u64 = std::str::from_utf8(&r.payload).unwrap().parse().unwrap();
            assert_eq!(
                seq, next[r.vxid as usize],
                "thread {}'s records in order",
                r.vxid
            );
            next[r.vxid as usize] += 1;
        }
        assert!(
            next[1..].iter().all(|&n| n == EACH),
            "every record: {next:?}"
        );
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
