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
    String::from_utf8_lossy(&imf_fixdate(t as u64)).into_owned()
}

/// Parses any of the three HTTP date formats; `None` for anything else.
pub fn parse_http_date(text: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(text).ok()?.trim();
    let t = httpdate::parse_http_date(s).ok()?;
    Some(t.duration_since(UNIX_EPOCH).ok()?.as_secs_f64())
}

const WEEKDAYS: [&[u8; 3]; 7] = [b"Sun", b"Mon", b"Tue", b"Wed", b"Thu", b"Fri", b"Sat"];
const MONTHS: [&[u8; 3]; 12] = [
    b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec",
];

/// The IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`) of whole seconds
/// since the epoch, written without formatting machinery: a stored head
/// keeps its dates as seconds and writes them again on every hit. Times
/// past the end of year 9999 are written as that end.
pub fn imf_fixdate(secs: u64) -> [u8; 29] {
    // Clamped first: no date is u64::MAX, the mark of an empty entry.
    let secs = secs.min(LATEST_HTTP_DATE as u64);
    // Each thread keeps the last two dates it wrote: a hit writes its
    // `Date` (now, the same for a second of hits) and its stored
    // `Last-Modified` (the same for every hit on one object).
    type Kept = [(u64, [u8; 29]); 2];
    thread_local! {
        static KEPT: std::cell::Cell<Kept> = const {
            std::cell::Cell::new([(u64::MAX, [0; 29]); 2])
        };
    }
    KEPT.try_with(|kept| {
        let mut k = kept.get();
        if let Some((_, text)) = k.iter().find(|(s, _)| *s == secs) {
            return *text;
        }
        let text = write_imf_fixdate(secs);
        k[1] = k[0];
        k[0] = (secs, text);
        kept.set(k);
        text
    })
    .unwrap_or_else(|_| write_imf_fixdate(secs))
}

fn write_imf_fixdate(secs: u64) -> [u8; 29] {
    let days = secs / 86_400;
    let in_day = secs % 86_400;
    let mut out = *b"Thu, 01 Jan 1970 00:00:00 GMT";
    out[..16].copy_from_slice(&day_text(days));
    two_digits(&mut out[17..19], (in_day / 3600) as u32);
    two_digits(&mut out[20..22], (in_day / 60 % 60) as u32);
    two_digits(&mut out[23..25], (in_day % 60) as u32);
    out
}

/// The day part of an IMF-fixdate (`Sun, 06 Nov 1994`) of a day since
/// the epoch. Each thread keeps the last one it wrote: the dates of one
/// response (its `Date`, its `Last-Modified`) and of the next mostly fall
/// on the same day, and the calendar's divisions are most of the cost.
fn day_text(days: u64) -> [u8; 16] {
    thread_local! {
        static LAST: std::cell::Cell<(u64, [u8; 16])> = const {
            std::cell::Cell::new((u64::MAX, [0; 16]))
        };
    }
    let write = |days: u64| {
        let (year, month, day) = civil_from_days(days);
        let mut out = *b"Thu, 01 Jan 1970";
        // 1 January 1970 was a Thursday.
        out[..3].copy_from_slice(WEEKDAYS[((days + 4) % 7) as usize]);
        two_digits(&mut out[5..7], day);
        out[8..11].copy_from_slice(MONTHS[month as usize - 1]);
        two_digits(&mut out[12..14], year / 100);
        two_digits(&mut out[14..16], year % 100);
        out
    };
    LAST.try_with(|last| match last.get() {
        (d, text) if d == days => text,
        _ => {
            let text = write(days);
            last.set((days, text));
            text
        }
    })
    .unwrap_or_else(|_| write(days))
}

/// The seconds an IMF-fixdate says, when `text` is one exactly as
/// [`imf_fixdate`] writes it (so that writing them gives `text` back);
/// `None` for anything else, a date before 1970 included.
pub fn parse_imf_fixdate(text: &[u8]) -> Option<u64> {
    let text: &[u8; 29] = text.try_into().ok()?;
    let number = |at: usize, len: usize| -> Option<u64> {
        text[at..at + len].iter().try_fold(0u64, |n, &b| {
            b.is_ascii_digit().then(|| n * 10 + u64::from(b - b'0'))
        })
    };
    let month = MONTHS.iter().position(|m| &text[8..11] == *m)? as u64 + 1;
    let (day, year) = (number(5, 2)?, number(12, 4)?);
    let (hour, minute, second) = (number(17, 2)?, number(20, 2)?, number(23, 2)?);
    if year < 1970 || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let days = days_from_civil(year as i64, month as i64, day as i64) as u64;
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second;
    (imf_fixdate(secs) == *text).then_some(secs)
}

fn two_digits(out: &mut [u8], n: u32) {
    out[0] = b'0' + (n / 10 % 10) as u8;
    out[1] = b'0' + (n % 10) as u8;
}

/// Year, month (1–12) and day (1–31) of a day counted from 1 January
/// 1970, in the proleptic Gregorian calendar (by 400-year eras, whose
/// days repeat; years counted from March so that a leap day ends one).
fn civil_from_days(days: u64) -> (u32, u32, u32) {
    // Days from 1 March of year 0 to 1 January 1970.
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_from_march + 2) / 5 + 1) as u32;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    } as u32;
    let year = (year_of_era + era * 400 + u64::from(month <= 2)) as u32;
    (year, month, day)
}

/// The day counted from 1 January 1970 of a date in the proleptic
/// Gregorian calendar (negative before it): the inverse of
/// [`civil_from_days`], and what a certificate's validity is read with.
pub fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_from_march = if month > 2 { month - 3 } else { month + 9 };
    let day_of_year = (153 * month_from_march + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
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

    #[test]
    fn fixdates_are_written_and_read_as_httpdate_does() {
        let mut t = 0u64;
        // Every day from 1970 to past 2400 at a varying time of day, and
        // the last second that can be said.
        while t < 14_000_000_000 {
            // httpdate's formatter, which `http_date` used before.
            let text = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(t));
            assert_eq!(&imf_fixdate(t)[..], text.as_bytes(), "{t}");
            assert_eq!(http_date(t as f64), text);
            assert_eq!(parse_imf_fixdate(text.as_bytes()), Some(t), "{text}");
            // The day just written is kept: the day's last second, then
            // the day before, are written from it and past it.
            for other in [t - t % 86_400 + 86_399, t.saturating_sub(86_400)] {
                let text = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(other));
                assert_eq!(&imf_fixdate(other)[..], text.as_bytes(), "{other}");
            }
            t += 86_400 + 3_607;
        }
        let last = LATEST_HTTP_DATE as u64;
        assert_eq!(&imf_fixdate(last)[..], b"Fri, 31 Dec 9999 23:59:59 GMT");
        assert_eq!(imf_fixdate(u64::MAX), imf_fixdate(last));
        assert_eq!(parse_imf_fixdate(&imf_fixdate(last)), Some(last));
    }

    #[test]
    fn kept_dates_are_the_ones_asked_for() {
        // Two dates alternate (a hit's Date and Last-Modified), a third
        // pushes the older out, and each is written as itself throughout.
        let dates = [
            1_795_691_000u64,
            1_700_000_000,
            1_795_691_001,
            1_700_000_000,
        ];
        for _ in 0..3 {
            for t in dates {
                let text = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(t));
                assert_eq!(&imf_fixdate(t)[..], text.as_bytes(), "{t}");
            }
        }
    }

    #[test]
    fn days_are_counted_from_1970_either_way() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(1969, 12, 31), -1);
        for days in [0u64, 59, 60, 11_016, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y.into(), m.into(), d.into()), days as i64);
        }
    }

    #[test]
    fn only_a_fixdate_written_as_it_would_be_is_read_as_one() {
        for odd in [
            &b"Sat, 06 Nov 1994 08:49:37 GMT"[..],
            b"Sun, 06 Nov 1994 08:49:60 GMT",
            b"Sun, 06 Nov 1994 24:49:37 GMT",
            b"Sun, 6 Nov 1994 08:49:37 GMT ",
            b"Sun, 06 nov 1994 08:49:37 GMT",
            b"Sun, 06 Nov 1994 08:49:37 UTC",
            b"Thu, 31 Nov 1994 08:49:37 GMT",
            b"Tue, 29 Feb 2022 00:00:00 GMT",
            b"Wed, 31 Dec 1969 23:59:59 GMT",
            b"Sun, 06 Nov 1994 08:49:37 GMT\r",
            b"Sun, 06 Nov 1994 08:4a:37 GMT",
            b"",
        ] {
            assert_eq!(
                parse_imf_fixdate(odd),
                None,
                "{}",
                String::from_utf8_lossy(odd)
            );
        }
        assert_eq!(
            parse_imf_fixdate(b"Tue, 29 Feb 2000 00:00:00 GMT"),
            Some(951_782_400)
        );
        assert_eq!(parse_imf_fixdate(b"Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
    }
}
