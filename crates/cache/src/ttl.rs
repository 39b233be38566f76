//! How long a backend response may be cached, by Varnish's rules: the
//! status decides whether it is cacheable at all, then `s-maxage`, then
//! `max-age`, then `Expires` against `Date`, else `default_ttl`; `Age`
//! moves the origin time back; `stale-while-revalidate` sets grace.
//! `stale-if-error` (RFC 5861, which Varnish ignores) makes keep at least
//! that long, so the object is still there to serve when a fetch fails.

use crate::object::Timers;
use lacquer_http::Headers;

/// The parameters the rules need.
#[derive(Debug, Clone, Copy)]
pub struct TtlDefaults {
    pub default_ttl: f64,
    pub default_grace: f64,
    pub default_keep: f64,
}

/// Allowed clock skew between us and the backend's `Date`, in seconds.
const CLOCK_SKEW: f64 = 10.0;

/// Finds a `Cache-Control` directive's numeric value.
pub fn cache_control_seconds(headers: &Headers, directive: &str) -> Option<f64> {
    for value in headers.get_all("cache-control") {
        for part in value.split(|&b| b == b',') {
            let part = lacquer_http::headers::trim(part);
            let (name, arg) = match part.iter().position(|&b| b == b'=') {
                Some(eq) => (&part[..eq], Some(&part[eq + 1..])),
                None => (part, None),
            };
            if !lacquer_http::headers::trim(name).eq_ignore_ascii_case(directive.as_bytes()) {
                continue;
            }
            let arg = lacquer_http::headers::trim(arg?);
            let arg = arg
                .strip_prefix(b"\"")
                .and_then(|a| a.strip_suffix(b"\""))
                .unwrap_or(arg);
            return Some(parse_delta_seconds(arg));
        }
    }
    None
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
    let age = headers
        .get("age")
        .map(|v| parse_delta_seconds(lacquer_http::headers::trim(v)))
        .unwrap_or(0.0);
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
    match status {
        200 | 203 | 204 | 300 | 301 | 304 | 404 | 410 | 414 => {}
        302 | 307 if max_age.is_some() || expires.is_some() => {}
        _ => {
            timers.ttl = -1.0;
            return timers;
        }
    }
    if let Some(seconds) = max_age {
        timers.ttl = seconds;
    } else if let Some(expires) = expires {
        let date = headers
            .get("date")
            .and_then(|v| lacquer_core::time::parse_http_date(v));
        // Use the backend's clock when it agrees with ours; else ours.
        let reference = match date {
            Some(date) if (date - now).abs() > CLOCK_SKEW => date,
            _ => now,
        };
        timers.ttl = if expires <= reference {
            0.0
        } else {
            expires - reference + age
        };
    }
    if let Some(swr) = cache_control_seconds(headers, "stale-while-revalidate") {
        timers.grace = swr;
    }
    if let Some(sie) = cache_control_seconds(headers, "stale-if-error") {
        timers.keep = timers.keep.max(sie);
    }
    timers
}

/// Whether a stale object may stand in for a failed fetch at `now`: its
/// `stale-if-error` window, counted from when it went stale, is open.
pub fn stale_if_error(headers: &Headers, timers: &Timers, now: f64) -> bool {
    cache_control_seconds(headers, "stale-if-error")
        .is_some_and(|sie| now <= timers.t_origin + timers.ttl + sie)
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: TtlDefaults = TtlDefaults {
        default_ttl: 120.0,
        default_grace: 10.0,
        default_keep: 0.0,
    };

    fn hdrs(pairs: &[(&'static str, String)]) -> Headers {
        let mut h = Headers::new();
        for (n, v) in pairs {
            h.append(*n, v.clone());
        }
        h
    }

    #[test]
    fn defaults_and_directives() {
        let now = 1_000_000.0;
        assert_eq!(rfc_ttl(200, &Headers::new(), now, &D).ttl, 120.0);
        let h = hdrs(&[("Cache-Control", "public, max-age=60".into())]);
        assert_eq!(rfc_ttl(200, &h, now, &D).ttl, 60.0);
        let h = hdrs(&[("Cache-Control", "max-age=60, s-maxage=30".into())]);
        assert_eq!(rfc_ttl(200, &h, now, &D).ttl, 30.0);
        let h = hdrs(&[("Cache-Control", "max-age=\"45\"".into())]);
        assert_eq!(rfc_ttl(200, &h, now, &D).ttl, 45.0);
        let h = hdrs(&[("Cache-Control", "max-age=abc".into())]);
        assert_eq!(rfc_ttl(200, &h, now, &D).ttl, 0.0);
        let h = hdrs(&[("Cache-Control", "max-age=99999999999999999999".into())]);
        assert!(rfc_ttl(200, &h, now, &D).ttl > 1e9);
    }

    #[test]
    fn status_rules() {
        let now = 1_000_000.0;
        assert_eq!(rfc_ttl(500, &Headers::new(), now, &D).ttl, -1.0);
        assert_eq!(rfc_ttl(302, &Headers::new(), now, &D).ttl, -1.0);
        let h = hdrs(&[("Cache-Control", "max-age=5".into())]);
        assert_eq!(rfc_ttl(302, &h, now, &D).ttl, 5.0);
        assert_eq!(rfc_ttl(404, &Headers::new(), now, &D).ttl, 120.0);
    }

    #[test]
    fn age_and_expires() {
        let now = 1_000_000.0;
        let h = hdrs(&[("Cache-Control", "max-age=60".into()), ("Age", "20".into())]);
        let t = rfc_ttl(200, &h, now, &D);
        assert_eq!(t.t_origin, now - 20.0);
        assert_eq!(t.t_origin + t.ttl - now, 40.0);
        let h = hdrs(&[
            ("Date", lacquer_core::time::http_date(now)),
            ("Expires", lacquer_core::time::http_date(now + 300.0)),
        ]);
        assert_eq!(rfc_ttl(200, &h, now, &D).ttl, 300.0);
        let h = hdrs(&[("Expires", "0".into())]);
        assert_eq!(rfc_ttl(200, &h, now, &D).ttl, 0.0);
        let h = hdrs(&[(
            "Cache-Control",
            "max-age=1, stale-while-revalidate=30".into(),
        )]);
        assert_eq!(rfc_ttl(200, &h, now, &D).grace, 30.0);
    }

    #[test]
    fn stale_if_error_keeps_the_object_and_opens_a_window() {
        let now = 1_000_000.0;
        let h = hdrs(&[("Cache-Control", "max-age=10, stale-if-error=100".into())]);
        let t = rfc_ttl(200, &h, now, &D);
        assert_eq!(t.keep, 100.0);
        assert!(stale_if_error(&h, &t, now + 109.0));
        assert!(!stale_if_error(&h, &t, now + 111.0));
        let plain = hdrs(&[("Cache-Control", "max-age=10".into())]);
        assert!(!stale_if_error(
            &plain,
            &rfc_ttl(200, &plain, now, &D),
            now + 11.0
        ));
    }
}
