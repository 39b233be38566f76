//! The last panic, kept for `panic.show`, and how many there have been
//! (`MGT.child_panic`): a bug in one request's task is
//! caught by the runtime and that request fails, but the operator must
//! still see that it happened, where, and with what backtrace.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// When the last panic happened (epoch seconds) and its report.
static LAST: Mutex<Option<(f64, String)>> = Mutex::new(None);

/// Panics since start (`MGT.child_panic`).
static COUNT: AtomicU64 = AtomicU64::new(0);

/// How many panics there have been since start.
pub(crate) fn count() -> u64 {
    COUNT.load(Ordering::Relaxed)
}

/// Installs the hook that records every panic before the default one
/// prints it.
pub(crate) fn install_hook() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let thread = std::thread::current();
        let mut text = format!(
            "Panic in thread {}: {info}\nBacktrace:\n{}",
            thread.name().unwrap_or("<unnamed>"),
            std::backtrace::Backtrace::force_capture()
        );
        if !text.ends_with('\n') {
            text.push('\n');
        }
        COUNT.fetch_add(1, Ordering::Relaxed);
        *LAST.lock().unwrap_or_else(|p| p.into_inner()) = Some((lacquer_core::time::now(), text));
        default(info);
    }));
}

/// The last panic, if one happened since the last `clear`.
pub(crate) fn last() -> Option<(f64, String)> {
    LAST.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// Forgets the last panic; whether there was one.
pub(crate) fn clear() -> bool {
    LAST.lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
        .is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_is_kept_until_cleared() {
        install_hook();
        let _ = std::thread::Builder::new()
            .name("doomed".into())
            .spawn(|| panic!("bad state 42"))
            .unwrap()
            .join();
        let (when, text) = last().expect("recorded");
        assert!(count() >= 1);
        assert!(when > 0.0);
        assert!(text.contains("Panic in thread doomed"), "{text}");
        assert!(text.contains("bad state 42"), "{text}");
        assert!(text.contains("Backtrace:"));
        assert!(clear());
        assert!(last().is_none());
        assert!(!clear());
    }
}
