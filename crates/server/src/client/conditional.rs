//! Conditional requests and byte ranges, as a delivery judges them:
//! whether a request's validators (`If-None-Match`, `If-Modified-Since`)
//! make the answer a 304, and which single range (`Range`, `If-Range`)
//! it asks of a body, if it can be had.

use crate::host::resp::Resp;
use bytes::Bytes;
use lacquer_cache::object::Object;
use lacquer_http::headers::trim;
use lacquer_http::Headers;

fn etag_matches(list: &[u8], etag: &[u8], weak: bool) -> bool {
    let strip = |t: &[u8]| -> Vec<u8> { t.strip_prefix(b"W/").unwrap_or(t).to_vec() };
    if !weak && etag.starts_with(b"W/") {
        return false;
    }
    let ours = strip(trim(etag));
    list.split(|&b| b == b',').any(|t| {
        let t = trim(t);
        t == b"*" || ((weak || !t.starts_with(b"W/")) && strip(t) == ours)
    })
}

/// The validators a response goes out with.
pub(crate) struct Validators {
    pub etag: Option<Bytes>,
    pub last_modified: Option<f64>,
}

impl Validators {
    /// The object's, or, once vcl_deliver has run, the response's as VCL
    /// left them (a `Last-Modified` it rewrote is the one compared).
    /// Without a `Last-Modified`, the time the object was fetched stands
    /// for it, as in Varnish.
    pub fn of(obj: &Object, resp: Option<&Resp>) -> Self {
        let (etag, last_modified) = match resp {
            Some(r) => (
                r.get(Some(obj), "etag"),
                r.get(Some(obj), "last-modified")
                    .map(|v| lacquer_core::time::parse_http_date(&v)),
            ),
            None => (
                obj.etag(),
                obj.has_header("last-modified").then(|| obj.last_modified()),
            ),
        };
        Validators {
            etag,
            last_modified: match last_modified {
                Some(parsed) => parsed,
                None => Some(obj.timers().t_origin.floor()),
            },
        }
    }
}

/// Whether a conditional GET/HEAD is answered 304 given the response's
/// validators, which are looked up only for a request that has a
/// condition (most have none).
pub(crate) fn not_modified(
    req: &Headers,
    validators: impl FnOnce() -> Validators,
    now: f64,
) -> bool {
    let inm = req.get("if-none-match");
    let ims = req.get("if-modified-since");
    if inm.is_none() && ims.is_none() {
        return false;
    }
    let v = validators();
    if let Some(inm) = inm {
        // A range asks for bytes: only a strong validator vouches for
        // them (as in Varnish); otherwise weak comparison.
        let weak = !req.contains("range");
        return match v.etag {
            Some(etag) => etag_matches(inm, &etag, weak),
            None => trim(inm) == b"*",
        };
    }
    if let Some(ims) = ims {
        let (Some(ims), Some(lm)) = (lacquer_core::time::parse_http_date(ims), v.last_modified)
        else {
            return false;
        };
        return ims <= now && lm <= ims;
    }
    false
}

/// The outcome of a Range header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Range {
    Full,
    Partial { start: u64, end: u64, total: u64 },
    Unsatisfiable { total: u64 },
}

fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 19 || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(s).ok()?.parse().ok()
}

/// The total of a window whose body's length is not known yet.
pub(crate) const UNKNOWN_TOTAL: u64 = u64::MAX;

/// A closed range (`bytes=a-b`, a ≤ b) for a body whose length is not
/// known yet; anything else (open, suffix, several, If-Range) is served
/// whole.
pub(crate) fn open_range(req: &Headers) -> Option<(u64, u64)> {
    if req.get("if-range").is_some() {
        return None;
    }
    let value = trim(req.get("range")?);
    if value.len() < 6 || !value[..6].eq_ignore_ascii_case(b"bytes=") {
        return None;
    }
    let spec = trim(&value[6..]);
    let dash = spec.iter().position(|&b| b == b'-')?;
    let start = parse_u64(trim(&spec[..dash]))?;
    let end = parse_u64(trim(&spec[dash + 1..]))?;
    (start <= end).then_some((start, end))
}

/// Evaluates a single byte range against a body of known length. Anything
/// else (several ranges, other units, a failed If-Range) is a full
/// response, as RFC 9110 permits.
pub(crate) fn range(req: &Headers, obj: &Object, total: u64) -> Range {
    let Some(value) = req.get("range") else {
        return Range::Full;
    };
    if let Some(if_range) = req.get("if-range") {
        let if_range = trim(if_range);
        let ok = if if_range.starts_with(b"\"") || if_range.starts_with(b"W/") {
            obj.etag()
                .as_ref()
                .is_some_and(|e| etag_matches(if_range, e, false))
        } else {
            match (
                lacquer_core::time::parse_http_date(if_range),
                obj.last_modified(),
            ) {
                (Some(a), Some(b)) => a == b,
                _ => false,
            }
        };
        if !ok {
            return Range::Full;
        }
    }
    // As varnishd: an empty body goes out whole; any range it cannot
    // serve (another unit, several ranges, a malformed or reversed one,
    // one past the end) is answered 416.
    if total == 0 {
        return Range::Full;
    }
    let refused = Range::Unsatisfiable { total };
    let value = trim(value);
    if value.len() < 6 || !value[..6].eq_ignore_ascii_case(b"bytes=") {
        return refused;
    }
    let spec = trim(&value[6..]);
    let Some(dash) = spec.iter().position(|&b| b == b'-') else {
        return refused;
    };
    let (a, b) = (trim(&spec[..dash]), trim(&spec[dash + 1..]));
    if a.is_empty() {
        return match parse_u64(b) {
            Some(n) if n > 0 => Range::Partial {
                start: total.saturating_sub(n),
                end: total - 1,
                total,
            },
            _ => refused,
        };
    }
    let Some(start) = parse_u64(a) else {
        return refused;
    };
    let end = if b.is_empty() {
        u64::MAX
    } else {
        match parse_u64(b) {
            Some(e) => e,
            None => return refused,
        }
    };
    if end < start || start >= total {
        return refused;
    }
    Range::Partial {
        start,
        end: end.min(total - 1),
        total,
    }
}

#[cfg(test)]
#[path = "conditional_tests.rs"]
mod tests;
