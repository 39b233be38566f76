//! How long a backend response may be cached. Varnish's rules first: the
//! status decides whether it is cacheable at all, then `s-maxage`, then
//! `max-age`, then `Expires` against `Date`, else `default_ttl`; `Age`
//! moves the origin time back; `stale-while-revalidate` sets grace.
//! Numbers in `Cache-Control` are read as varnishd reads them
//! ([`cache_control_seconds`]).
//!
//! Unless `varnish_compat_ttl` is on, RFC 9111 and RFC 9213 refine them,
//! never caching longer than varnishd would from `Cache-Control` alone:
//! the directives come from `Lacquer-Cache-Control`, else
//! `CDN-Cache-Control`, else `Cache-Control`. A targeted field (one
//! varnishd ignores) is read as the RFCs have it: it silences `Expires`,
//! its `no-store`, `private` or `no-cache` makes the TTL 0, a
//! delta-seconds value that is not all digits (`1.5`, `10s`, `-1`) means
//! stale, and the RFC's list of cacheable statuses applies (308, 405 and
//! 501 too, 302, 303 and 307 with a lifetime or `public`). With plain
//! `Cache-Control`, varnishd's statuses and numbers stand. Either way,
//! `must-revalidate`, `proxy-revalidate` and `s-maxage` forbid serving
//! stale, so grace is 0 and `stale-if-error` is not honoured;
//! `stale-if-error` (RFC 5861, which Varnish ignores) makes keep at least
//! that long, so the object is still there to serve when a fetch fails.
//! Without an explicit lifetime the freshness is heuristic (§4.2.2), and
//! only for the statuses that allow it: `default_ttl`, shortened to a
//! tenth of the time since `Last-Modified` when that is less. A request's
//! `max-stale` and `min-fresh` (§5.2.1) are read here too
//! ([`RequestWants`]).

use crate::object::Timers;
use lacquer_http::Headers;

/// The parameters the rules need.
#[derive(Debug, Clone, Copy)]
pub struct TtlDefaults {
    pub default_ttl: f64,
    pub default_grace: f64,
    pub default_keep: f64,
    /// `varnish_compat_ttl`: Varnish's rules only.
    pub varnish_compat: bool,
}

/// The cache-control fields that target this cache (RFC 9213), most
/// specific first.
pub const TARGETED_FIELDS: [&str; 2] = ["lacquer-cache-control", "cdn-cache-control"];

/// The field whose directives decide for this cache: the first targeted
/// field with a value, else `Cache-Control` (always it in compat mode).
pub fn control_field(headers: &Headers, varnish_compat: bool) -> &'static str {
    if !varnish_compat {
        for name in TARGETED_FIELDS {
            if headers
                .get_all(name)
                .any(|v| !lacquer_http::headers::trim(v).is_empty())
            {
                return name;
            }
        }
    }
    "cache-control"
}

/// The directives of one cache-control field line, split at the commas
/// that are not inside a quoted string (`no-cache="Set-Cookie, X-Id"` is
/// one directive).
fn split_directives(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = value;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let (mut quoted, mut escaped) = (false, false);
        let end = rest
            .iter()
            .position(|&b| {
                match b {
                    _ if escaped => escaped = false,
                    b'\\' if quoted => escaped = true,
                    b'"' => quoted = !quoted,
                    b',' if !quoted => return true,
                    _ => {}
                }
                false
            })
            .unwrap_or(rest.len());
        let part = &rest[..end];
        rest = rest.get(end + 1..).unwrap_or_default();
        Some(part)
    })
}

/// A directive of a cache-control field: Some(argument) when present
/// (an empty slice for a directive without one), unquoted.
fn directive<'a>(headers: &'a Headers, field: &'a str, name: &str) -> Option<&'a [u8]> {
    for value in headers.get_all(field) {
        for part in split_directives(value) {
            let part = lacquer_http::headers::trim(part);
            let (n, arg) = match part.iter().position(|&b| b == b'=') {
                Some(eq) => (&part[..eq], &part[eq + 1..]),
                None => (part, &b""[..]),
            };
            if lacquer_http::headers::trim(n).eq_ignore_ascii_case(name.as_bytes()) {
                let arg = lacquer_http::headers::trim(arg);
                return Some(
                    arg.strip_prefix(b"\"")
                        .and_then(|a| a.strip_suffix(b"\""))
                        .unwrap_or(arg),
                );
            }
        }
    }
    None
}

/// The fields a shared cache must not store or send again unvalidated:
/// those a qualified `private="..."` or `no-cache="..."` names in the
/// deciding field (RFC 9111 §5.2.2.4, §5.2.2.7), lowercase. Lacquer keeps
/// them out of the stored object and gives them only to the client whose
/// request fetched the response. Empty in compat mode, as in Varnish.
pub fn withheld_fields(headers: &Headers, varnish_compat: bool) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    if varnish_compat {
        return names;
    }
    let field = control_field(headers, false);
    for directive_name in ["private", "no-cache"] {
        let Some(arg) = directive(headers, field, directive_name) else {
            continue;
        };
        for name in arg.split(|&b| b == b',') {
            let name = lacquer_http::headers::trim(name);
            let Ok(name) = std::str::from_utf8(name) else {
                continue;
            };
            let name = name.to_ascii_lowercase();
            if !name.is_empty() && !names.contains(&name) {
                names.push(name);
            }
        }
    }
    names
}

/// A delta-seconds argument as RFC 9111 §1.2.2 has it: digits only
/// (saturating at 2^31); anything else is invalid, which means stale.
fn strict_delta_seconds(arg: &[u8]) -> f64 {
    if arg.is_empty() || !arg.iter().all(u8::is_ascii_digit) {
        return 0.0;
    }
    parse_delta_seconds(arg)
}

/// Whether a request's `Cache-Control` says `only-if-cached` (RFC 9111
/// §5.2.1.7): it wants a stored response or a 504.
pub fn only_if_cached(req: &Headers) -> bool {
    directive(req, "cache-control", "only-if-cached").is_some()
}

/// What a request's `Cache-Control` asks of a stored response, as far
/// as Lacquer honours it (RFC 9111 §5.2.1). `no-cache` and `max-age` are
/// not honoured: browsers send them on every reload, and obeying them
/// would turn a reload storm into a backend storm.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RequestWants {
    /// `max-stale`: how stale a response the client accepts (without a
    /// value, any).
    pub max_stale: Option<f64>,
    /// `min-fresh`: how long a response must stay fresh to be used
    /// without asking the backend.
    pub min_fresh: f64,
}

/// Reads [`RequestWants`] from a request; invalid values are ignored.
pub fn request_wants(req: &Headers) -> RequestWants {
    if !req.contains("cache-control") {
        return RequestWants::default();
    }
    let valid = |a: &[u8]| !a.is_empty() && a.iter().all(u8::is_ascii_digit);
    let max_stale = directive(req, "cache-control", "max-stale").and_then(|a| {
        if a.is_empty() {
            Some(f64::INFINITY)
        } else {
            valid(a).then(|| parse_delta_seconds(a))
        }
    });
    let min_fresh = directive(req, "cache-control", "min-fresh")
        .filter(|a| valid(a))
        .map_or(0.0, parse_delta_seconds);
    RequestWants {
        max_stale,
        min_fresh,
    }
}

/// Whether a stored response forbids being served stale whatever the
/// client accepts: `must-revalidate`, `proxy-revalidate` or `s-maxage`
/// in the field that decides (RFC 9111 §5.2.2.2, §5.2.2.8, §5.2.2.10).
pub fn forbids_stale(headers: &Headers) -> bool {
    let field = control_field(headers, false);
    ["must-revalidate", "proxy-revalidate", "s-maxage"]
        .iter()
        .any(|n| directive(headers, field, n).is_some())
}

/// Allowed clock skew between us and the backend's `Date`, in seconds.
const CLOCK_SKEW: f64 = 10.0;

/// A `Cache-Control` directive's number as varnishd 7.1 reads it: from
/// the first `Cache-Control` field only, decimal digits after `=` (white
/// space and a `+` before them allowed), ending the value or followed by
/// `.` (so `1.5` is 1) or white space; anything else (`10s`, `0x10`, a
/// quoted or textual value, a leading `-`) is 0. Past 2^32 - 1 it is
/// 2^32 - 1, kept as varnishd keeps a TTL (single precision). None when
/// the directive is absent or has no value.
pub fn cache_control_seconds(headers: &Headers, directive: &str) -> Option<f64> {
    let value = headers.get("cache-control")?;
    for part in value.split(|&b| b == b',') {
        let part = lacquer_http::headers::trim(part);
        let Some(eq) = part.iter().position(|&b| b == b'=') else {
            continue;
        };
        if !lacquer_http::headers::trim(&part[..eq]).eq_ignore_ascii_case(directive.as_bytes()) {
            continue;
        }
        return Some(f64::from(varnishd_seconds(&part[eq + 1..]) as f32));
    }
    None
}

/// varnishd's reading of a number of seconds in a header (C's `strtoul`
/// in base 10, then only white space, `.` or the end may follow).
fn varnishd_seconds(text: &[u8]) -> u32 {
    if text.first() == Some(&b'-') {
        return 0;
    }
    let mut rest = text;
    while let [b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c, tail @ ..] = rest {
        rest = tail;
    }
    let negative = match rest {
        [b'+', tail @ ..] => {
            rest = tail;
            false
        }
        [b'-', tail @ ..] => {
            rest = tail;
            true
        }
        _ => false,
    };
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 {
        return 0;
    }
    let mut value: u64 = 0;
    for &b in &rest[..digits] {
        value = value.saturating_mul(10).saturating_add(u64::from(b - b'0'));
    }
    // strtoul negates what follows a `-`: anything but 0 is then past
    // every 32-bit value.
    let value = match (negative, value) {
        (true, 0) => 0,
        (true, _) => u64::MAX,
        (false, v) => v,
    };
    let value = u32::try_from(value).unwrap_or(u32::MAX);
    let tail = rest[digits..]
        .iter()
        .find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'));
    match tail {
        None | Some(b'.') => value,
        Some(_) => 0,
    }
}

/// Parses delta-seconds leniently: leading digits count, overflow saturates,
/// anything unparsable is 0 (treat as stale).
pub fn parse_delta_seconds(text: &[u8]) -> f64 {
    let digits: Vec<u8> = text
        .iter()
        .copied()
        .take_while(u8::is_ascii_digit)
        .collect();
    if digits.is_empty() {
        return 0.0;
    }
    let s = std::str::from_utf8(&digits).unwrap_or("0");
    s.parse::<f64>().unwrap_or(0.0).min(2_147_483_648.0)
}

/// The timers for a backend response received at `now`, as Varnish
/// computes them before `vcl_backend_response` runs. A TTL of -1 means not
/// cacheable by status.
pub fn rfc_ttl(status: u16, headers: &Headers, now: f64, d: &TtlDefaults) -> Timers {
    if d.varnish_compat {
        return varnish_ttl(status, headers, now, d);
    }
    let field = control_field(headers, false);
    let targeted = field != "cache-control";
    // A field meant for this cache is read as RFC 9111 has it; plain
    // Cache-Control as varnishd reads it, so that it caches nothing
    // varnishd would not (and nothing less long).
    let seconds = |name: &str| {
        if targeted {
            directive(headers, field, name).map(strict_delta_seconds)
        } else {
            cache_control_seconds(headers, name)
        }
    };
    let age = age_seconds(headers);
    let mut timers = Timers {
        t_origin: now - age,
        ttl: d.default_ttl,
        grace: d.default_grace,
        keep: d.default_keep,
    };
    let s_maxage = seconds("s-maxage");
    let max_age = s_maxage.or_else(|| seconds("max-age"));
    let expires = if targeted {
        None
    } else {
        headers
            .get("expires")
            .map(|v| lacquer_core::time::parse_http_date(v).unwrap_or(0.0))
    };
    let explicit = max_age.is_some() || expires.is_some();
    let public = directive(headers, field, "public").is_some();
    let cacheable = if targeted {
        rfc_cacheable_status(status, explicit || public)
    } else {
        varnish_cacheable_status(status, explicit)
    };
    if !cacheable {
        // Not to be stored: no lifetime (0, as varnishd 7 says; its
        // default grace and keep stay, and no stale-while-revalidate).
        timers.ttl = 0.0;
        return timers;
    }
    let refused = ["no-store", "private", "no-cache"]
        .iter()
        .any(|n| directive(headers, field, n).is_some_and(|a| a.is_empty()));
    if targeted && refused {
        timers.ttl = 0.0;
    } else if let Some(seconds) = max_age {
        timers.ttl = seconds;
    } else if let Some(expires) = expires {
        timers.ttl = expires_ttl(headers, expires, now, true);
    } else if let Some(heuristic) = last_modified_ttl(headers, now) {
        timers.ttl = timers.ttl.min(heuristic);
    }
    let must_revalidate = s_maxage.is_some()
        || directive(headers, field, "must-revalidate").is_some()
        || directive(headers, field, "proxy-revalidate").is_some();
    if must_revalidate {
        timers.grace = 0.0;
        return timers;
    }
    if let Some(swr) = seconds("stale-while-revalidate") {
        timers.grace = swr;
    }
    if let Some(sie) = seconds("stale-if-error") {
        timers.keep = timers.keep.max(sie);
    }
    timers
}

/// Whether a status may be cached by Varnish's list: 302 and 307 only
/// with an explicit lifetime.
fn varnish_cacheable_status(status: u16, explicit_lifetime: bool) -> bool {
    match status {
        200 | 203 | 204 | 300 | 301 | 304 | 404 | 410 | 414 => true,
        302 | 307 => explicit_lifetime,
        _ => false,
    }
}

/// Whether a status may be stored under RFC 9111: the heuristically
/// cacheable ones (RFC 9110 §15.1) but 206, since Lacquer stores only
/// complete responses, and 304 as Varnish does; redirects that are not
/// heuristically cacheable with an explicit lifetime or `public`. Other
/// statuses are not stored even when a blanket header gives them a
/// lifetime (the RFC permits a cache not to store): an error page
/// cached for an hour is worse than a fetch.
fn rfc_cacheable_status(status: u16, explicit_lifetime: bool) -> bool {
    match status {
        200 | 203 | 204 | 300 | 301 | 304 | 308 | 404 | 405 | 410 | 414 | 501 => true,
        302 | 303 | 307 => explicit_lifetime,
        _ => false,
    }
}

/// The heuristic lifetime RFC 9111 §4.2.2 suggests: a tenth of the time
/// between `Last-Modified` and the response's `Date` (our clock when
/// there is none). None without a usable `Last-Modified`.
fn last_modified_ttl(headers: &Headers, now: f64) -> Option<f64> {
    let modified = lacquer_core::time::parse_http_date(headers.get("last-modified")?)?;
    let date = headers
        .get("date")
        .and_then(|v| lacquer_core::time::parse_http_date(v))
        .unwrap_or(now);
    (modified <= date).then(|| (date - modified) / 10.0)
}

/// The `s-maxage` or `max-age` the rules read (the deciding field's, as
/// the mode parses it), for the `TTL` log record; 0 when there is none.
pub fn logged_max_age(headers: &Headers, varnish_compat: bool) -> f64 {
    if varnish_compat {
        return cache_control_seconds(headers, "s-maxage")
            .or_else(|| cache_control_seconds(headers, "max-age"))
            .unwrap_or(0.0);
    }
    let field = control_field(headers, false);
    directive(headers, field, "s-maxage")
        .or_else(|| directive(headers, field, "max-age"))
        .map_or(0.0, strict_delta_seconds)
}

/// The lifetime `Expires` gives: `Expires` less the response's `Date`
/// (RFC 9111 §4.2.1; with `rfc`, whenever there is one), or less our
/// clock (Varnish uses `Date` only when the clocks disagree by more than
/// the skew). Counted from the origin time, which `Age` moved back, so an
/// `Age` past the lifetime makes the response stale on arrival, whichever
/// clock is fast.
fn expires_ttl(headers: &Headers, expires: f64, now: f64, rfc: bool) -> f64 {
    let date = headers
        .get("date")
        .and_then(|v| lacquer_core::time::parse_http_date(v));
    let reference = match date {
        Some(date) if rfc || (date - now).abs() > CLOCK_SKEW => date,
        _ => now,
    };
    (expires - reference).max(0.0)
}

/// The first value of `Age` (a list such as `7200, 0` is read by its
/// first), when it is delta-seconds.
fn age_seconds(headers: &Headers) -> f64 {
    headers
        .get("age")
        .and_then(|v| v.split(|&b| b == b',').next())
        .map(lacquer_http::headers::trim)
        .filter(|v| !v.is_empty() && v.iter().all(u8::is_ascii_digit))
        .map_or(0.0, parse_delta_seconds)
}

/// Varnish's rules alone (`varnish_compat_ttl`).
fn varnish_ttl(status: u16, headers: &Headers, now: f64, d: &TtlDefaults) -> Timers {
    let age = age_seconds(headers);
    let t_origin = now - age;
    let mut timers = Timers {
        t_origin,
        ttl: d.default_ttl,
        grace: d.default_grace,
        keep: d.default_keep,
    };
    let max_age = cache_control_seconds(headers, "s-maxage")
        .or_else(|| cache_control_seconds(headers, "max-age"));
    let expires = headers.get("expires").map(|v| {
        // An invalid Expires means "already expired" (RFC 9111 §5.3).
        lacquer_core::time::parse_http_date(v).unwrap_or(0.0)
    });
    if !varnish_cacheable_status(status, max_age.is_some() || expires.is_some()) {
        timers.ttl = 0.0;
        return timers;
    }
    if let Some(seconds) = max_age {
        timers.ttl = seconds;
    } else if let Some(expires) = expires {
        timers.ttl = expires_ttl(headers, expires, now, false);
    }
    if let Some(swr) = cache_control_seconds(headers, "stale-while-revalidate") {
        timers.grace = swr;
    }
    timers
}

/// Whether a stale object may stand in for a failed fetch at `now`: its
/// `stale-if-error` window, counted from when it went stale, is open, and
/// nothing forbids serving it stale.
pub fn stale_if_error(headers: &Headers, timers: &Timers, now: f64) -> bool {
    let field = control_field(headers, false);
    !forbids_stale(headers)
        && directive(headers, field, "stale-if-error")
            .map(strict_delta_seconds)
            .is_some_and(|sie| now <= timers.t_origin + timers.ttl + sie)
}

#[cfg(test)]
#[path = "ttl_tests.rs"]
mod tests;
