//! The test's trace: lines of `level actor message`, written as they
//! happen (the runner that started this test keeps them, and prints them
//! with `-v` or when the test fails), and the way a test fails: a fatal
//! error ends the whole test process, after its daemons are stopped.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// Why an actor stopped: the message of a failed step.
#[derive(Debug)]
pub struct Fail(pub String);

pub type Step<T = ()> = Result<T, Fail>;

/// Fails the current step with a formatted message.
#[macro_export]
macro_rules! fail {
    ($($arg:tt)*) => { return Err($crate::trace::Fail(format!($($arg)*))) };
}

struct Clock {
    start: Instant,
    last_ms: u128,
}

static CLOCK: Mutex<Option<Clock>> = Mutex::new(None);
static FAILED: AtomicBool = AtomicBool::new(false);
/// Called before the process exits on a failure: stops the daemons.
static CLEANUP: Mutex<Vec<Box<dyn FnMut() + Send>>> = Mutex::new(Vec::new());

/// Writes one trace line; `level` is 0 (`----`, an error) to 4 (`****`).
pub fn log(level: usize, actor: &str, msg: &str) {
    let mut guard = CLOCK.lock().unwrap_or_else(|p| p.into_inner());
    let clock = guard.get_or_insert_with(|| Clock {
        start: Instant::now(),
        last_ms: 0,
    });
    // Through print! so that unit tests capture it.
    let mut out = String::new();
    let ms = clock.start.elapsed().as_millis();
    if ms > clock.last_ms {
        clock.last_ms = ms;
        out.push_str(&format!("**** dT    {:.3}\n", ms as f64 / 1000.0));
    }
    let stars = match level {
        0 => "----",
        1 => "*",
        2 => "**",
        3 => "***",
        _ => "****",
    };
    let mut lines = msg.split('\n').peekable();
    while let Some(line) = lines.next() {
        if line.is_empty() && lines.peek().is_none() && msg.len() > 1 {
            break;
        }
        out.push_str(&format!("{stars:<4} {actor:<5} {line}\n"));
    }
    print!("{out}");
    let _ = std::io::stdout().flush();
}

/// Logs bytes on the wire, one trace line per line of data, escaping
/// what is not printable (`\r`, `\t`, `\xNN`) as varnishtest does.
pub fn dump(actor: &str, prefix: &str, data: &[u8]) {
    let mut text = String::new();
    let mut line = String::new();
    for &b in data {
        match b {
            b'\n' => {
                text.push_str(&format!("{prefix}|{line}\n"));
                line.clear();
            }
            b'\r' => line.push_str("\\r"),
            b'\t' => line.push_str("\\t"),
            b'\\' => line.push_str("\\\\"),
            0x20..=0x7e => line.push(b as char),
            _ => line.push_str(&format!("\\x{b:02x}")),
        }
    }
    if !line.is_empty() {
        text.push_str(&format!("{prefix}|{line}\n"));
    }
    if !text.is_empty() {
        log(4, actor, text.trim_end_matches('\n'));
    }
}

/// Registers work to do before the test process exits on a failure.
pub fn on_failure(f: Box<dyn FnMut() + Send>) {
    CLEANUP.lock().unwrap_or_else(|p| p.into_inner()).push(f);
}

/// Ends the test as failed: logs the message, runs the clean-ups, exits.
pub fn fatal(actor: &str, msg: &str) -> ! {
    if !FAILED.swap(true, Ordering::SeqCst) {
        log(0, actor, msg);
        let mut cleanups = std::mem::take(&mut *CLEANUP.lock().unwrap_or_else(|p| p.into_inner()));
        for c in cleanups.iter_mut() {
            c();
        }
        log(1, "top", "TEST FAILED");
        let _ = std::io::stdout().flush();
        std::process::exit(2);
    }
    // Another thread is already ending the process: what went wrong
    // here is most likely a consequence.
    loop {
        std::thread::park();
    }
}
