//! Barriers: `barrier bN cond N` makes N actors meet at `barrier bN
//! sync`; `barrier bN sock N` also lets outside processes take part by
//! connecting to `${bN_sock}` (each connection counts as one arrival
//! and is answered when all have arrived). `-cyclic` barriers can be
//! used again once they open.

use crate::fail;
use crate::trace::{log, Fail, Step};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

pub struct Barrier {
    name: String,
    state: Mutex<State>,
    opened: Condvar,
    /// How long a sync may wait before the test fails.
    timeout: Duration,
}

struct State {
    expected: usize,
    waiting: usize,
    /// Counts openings, so waiters know theirs happened.
    generation: u64,
    cyclic: bool,
}

impl Barrier {
    pub fn new(name: &str, expected: usize, cyclic: bool, timeout: Duration) -> Barrier {
        Barrier {
            name: name.to_string(),
            state: Mutex::new(State {
                expected,
                waiting: 0,
                generation: 0,
                cyclic,
            }),
            opened: Condvar::new(),
            timeout,
        }
    }

    /// Arrives and waits until all have arrived.
    pub fn sync(&self, actor: &str) -> Step {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if !st.cyclic && st.generation > 0 {
            fail!("Barrier {} was already used and is not cyclic", self.name);
        }
        st.waiting += 1;
        log(
            3,
            actor,
            &format!(
                "Barrier({}) wait {} of {}",
                self.name, st.waiting, st.expected
            ),
        );
        if st.waiting >= st.expected {
            st.waiting = 0;
            st.generation += 1;
            self.opened.notify_all();
            return Ok(());
        }
        let mine = st.generation;
        let deadline = Instant::now() + self.timeout;
        while st.generation == mine {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                fail!("Barrier({}) timed out waiting", self.name);
            }
            st = self
                .opened
                .wait_timeout(st, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        Ok(())
    }
}

/// Serves a socket barrier: every connection is one arrival, answered
/// (and closed) when the barrier opens.
pub fn serve_socket(barrier: std::sync::Arc<Barrier>, listener: std::net::TcpListener) {
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let b = barrier.clone();
            std::thread::spawn(move || {
                use std::io::Write;
                let mut stream = stream;
                let name = b.name.clone();
                if let Err(Fail(m)) = b.sync(&name) {
                    crate::trace::fatal(&name, &m);
                }
                let _ = stream.write_all(b"\0");
            });
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn opens_when_all_arrive_and_cycles_only_when_cyclic() {
        let b = Arc::new(Barrier::new("b1", 2, true, Duration::from_secs(5)));
        for _ in 0..2 {
            let other = b.clone();
            let t = std::thread::spawn(move || other.sync("t").is_ok());
            assert!(b.sync("top").is_ok());
            assert!(t.join().unwrap());
        }
        let once = Barrier::new("b2", 1, false, Duration::from_secs(5));
        assert!(once.sync("top").is_ok());
        assert!(once.sync("top").is_err());
        let lonely = Barrier::new("b3", 2, false, Duration::from_millis(20));
        assert!(lonely.sync("top").unwrap_err().0.contains("timed out"));
    }
}
