//! Wall-clock time as Varnish uses it (seconds since the epoch as `f64`) and
//! HTTP dates, with the `Date` header text formatted at most once a second
//! per thread.

use std::cell::RefCell;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Seconds since the epoch, as a float.
#[inline]
pub fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs_f64()
}

/// Formats a time as an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`).
/// The latest time an HTTP date can say (the end of year 9999).
pub const LATEST_HTTP_DATE: f64 = 253_402_300_799.0;

/// Whether `t` can be written as an HTTP date.
pub fn formattable(t: f64) -> bool {
    t.is_finite() && (0.0..=LATEST_HTTP_DATE).contains(&t)
}

/// Formats `t` as an HTTP date; times it cannot say are clamped to the
/// epoch or the end of year 9999 (see [`formattable`]).
pub fn http_date(t: f64) -> String {
    let t = if t.is_finite() && t > 0.0 {
        t.min(LATEST_HTTP_DATE)
    } else {
        0.0
    };
    httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(t as u64))
}

/// Parses any of the three HTTP date formats; `None` for anything else.
pub fn parse_http_date(text: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(text).ok()?.trim();
    let t = httpdate::parse_http_date(s).ok()?;
    Some(t.duration_since(UNIX_EPOCH).ok()?.as_secs_f64())
}

thread_local! {
    static DATE_CACHE: RefCell<(u64, String)> = const { RefCell::new((0, String::new())) };
}

/// Calls `f` with the current `Date` header value, reformatting it only
/// when the second has changed since this thread last asked.
pub fn with_date<R>(now: f64, f: impl FnOnce(&str) -> R) -> R {
    let second = now as u64;
    DATE_CACHE.with(|cell| {
        let mut cache = cell.borrow_mut();
        if cache.0 != second || cache.1.is_empty() {
            cache.0 = second;
            cache.1 = http_date(second as f64);
        }
        f(&cache.1)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn date_round_trip() {
        let text = http_date(784111777.0);
        assert_eq!(text, "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(parse_http_date(text.as_bytes()), Some(784111777.0));
        assert_eq!(
            parse_http_date(b"Sunday, 06-Nov-94 08:49:37 GMT"),
            Some(784111777.0)
        );
        assert_eq!(
            parse_http_date(b"Sun Nov  6 08:49:37 1994"),
            Some(784111777.0)
        );
        assert_eq!(parse_http_date(b"yesterday"), None);
        with_date(784111777.5, |d| {
            assert_eq!(d, "Sun, 06 Nov 1994 08:49:37 GMT")
        });
    }
}
