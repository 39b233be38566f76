//! What the daemon writes to the shared-memory log, in the forms vsl(7)
//! gives: heads as sent and received, VCL calls and returns, backend
//! connections, TTLs. The records themselves are buffered per
//! transaction by `lacquer_shm::Txn`.

use lacquer_core::counters::{Counter, COUNTERS};
use lacquer_core::params::Params;
use lacquer_http::{Headers, ResponseHead, Version};
use lacquer_shm::record::{default_mask, push_u64};
use lacquer_shm::{Tag, Txn};
use lacquer_vcl::{Action, Method};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The tags left out of the log (`vsl_mask`), as two halves of a bit set
/// any thread reads without a lock.
fn mask_words() -> &'static [AtomicU64; 2] {
    static MASK: OnceLock<[AtomicU64; 2]> = OnceLock::new();
    MASK.get_or_init(|| {
        let m = default_mask();
        [AtomicU64::new(m as u64), AtomicU64::new((m >> 64) as u64)]
    })
}

/// The tags left out of the log.
pub(crate) fn mask() -> u128 {
    let [lo, hi] = mask_words();
    u128::from(lo.load(Ordering::Relaxed)) | (u128::from(hi.load(Ordering::Relaxed)) << 64)
}

/// Applies a `vsl_mask` value to the mask in force, as varnishd does:
/// `-Tag` leaves a tag out, `+Tag` (or a bare name) puts it back, a glob
/// (`Req*`) names several, `default` restores Varnish's list and `none`
/// logs every tag. Names of tags Lacquer never writes change nothing.
/// The parameter then shows the resulting mask as a `-Tag` list.
pub(crate) fn set_mask(params: &Params, text: &str) -> Result<(), String> {
    let mut mask = mask();
    for word in text.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        let (leave_out, name) = match word.as_bytes()[0] {
            b'-' => (true, &word[1..]),
            b'+' => (false, &word[1..]),
            _ => (false, word),
        };
        match name {
            "default" => mask = default_mask(),
            "none" => mask = 0,
            _ => {
                for tag in Tag::matching(name) {
                    let bit = 1u128 << (tag as u8);
                    if leave_out {
                        mask |= bit;
                    } else {
                        mask &= !bit;
                    }
                }
            }
        }
    }
    let shown: Vec<String> = lacquer_shm::tags::TAGS
        .iter()
        .filter(|t| mask & (1u128 << (**t as u8)) != 0)
        .map(|t| format!("-{}", t.name()))
        .collect();
    let shown = if shown.is_empty() {
        "none".to_string()
    } else {
        shown.join(",")
    };
    params.set("vsl_mask", &shown).map_err(|e| e.to_string())?;
    let [lo, hi] = mask_words();
    lo.store(mask as u64, Ordering::Relaxed);
    hi.store((mask >> 64) as u64, Ordering::Relaxed);
    Ok(())
}

fn proto(v: Version) -> &'static [u8] {
    v.as_str().as_bytes()
}

/// Logs a backend response head as received.
pub(crate) fn beresp(log: &mut Txn, resp: &ResponseHead) {
    if !log.active() {
        return;
    }
    log.bytes(Tag::BerespProtocol, proto(resp.version));
    log.with(Tag::BerespStatus, |b| push_u64(b, u64::from(resp.status)));
    log.bytes(Tag::BerespReason, &resp.reason);
    headers(log, Tag::BerespHeader, &resp.headers);
}

fn headers(log: &mut Txn, tag: Tag, h: &Headers) {
    for h in h.iter() {
        log.header(tag, &h.name, &h.value);
    }
}

/// `VCL_call`, before a method runs: what the method logs follows it.
pub(crate) fn vcl_call(log: &mut Txn, method: Method) {
    if !log.active() {
        return;
    }
    log.word(Tag::VCL_call, method.call_word());
}

/// `VCL_return`, once the method has run.
pub(crate) fn vcl_return(log: &mut Txn, action: &Action) {
    if log.active() {
        log.word(Tag::VCL_return, action.word());
    }
}

/// Runs one VCL method, the one way every method is run: `VCL_call`, the
/// method, a failure counted in `MAIN.vcl_fail`, then `VCL_return` (after
/// `before_return`, for what varnishd logs before it). `log` finds, in
/// the host, the transaction the records go to.
pub(crate) fn run_method<H: lacquer_vcl::Host>(
    program: &lacquer_vcl::Program,
    method: Method,
    host: &mut H,
    log: fn(&mut H) -> &mut Txn,
    before_return: impl FnOnce(&mut H, &Action),
) -> Action {
    vcl_call(log(host), method);
    let action = lacquer_vcl::run(program, method, host);
    if action == Action::Fail {
        COUNTERS.inc(Counter::vcl_fail);
    }
    before_return(host, &action);
    vcl_return(log(host), &action);
    action
}

/// Where an object's times came from, as the `TTL` record names it.
#[derive(Clone, Copy)]
pub(crate) enum TtlSource<'a> {
    /// The caching rules, from the backend's headers (and whether
    /// varnishd's rules alone read them: `varnish_compat_ttl`).
    Rfc(&'a Headers, bool),
    /// VCL set them.
    Vcl,
    /// `return (pass(…))` made it a hit-for-pass.
    Hfp,
}

impl TtlSource<'_> {
    /// The record's first word.
    fn word(self) -> &'static [u8] {
        match self {
            TtlSource::Rfc(..) => b"RFC",
            TtlSource::Vcl => b"VCL",
            TtlSource::Hfp => b"HFP",
        }
    }
}

/// A `TTL` record: source, ttl, grace, keep, reference time, and for the
/// RFC source the time the age counts from, Date, Expires and max-age.
pub(crate) struct TtlRecord<'a> {
    pub source: TtlSource<'a>,
    pub timers: lacquer_cache::object::Timers,
    pub cacheable: bool,
}

pub(crate) fn ttl(log: &mut Txn, r: &TtlRecord<'_>) {
    if !log.wants(Tag::TTL) {
        return;
    }
    let int = |b: &mut Vec<u8>, v: f64| {
        if v < 0.0 {
            b.push(b'-');
        }
        push_u64(b, v.abs() as u64);
    };
    log.with(Tag::TTL, |b| {
        b.extend_from_slice(r.source.word());
        for v in [
            r.timers.ttl,
            r.timers.grace,
            r.timers.keep,
            r.timers.t_origin,
        ] {
            b.push(b' ');
            int(b, v);
        }
        if let TtlSource::Rfc(h, compat) = r.source {
            let date = h.get("date").and_then(http_date).unwrap_or(0.0);
            let expires = h.get("expires").and_then(http_date).unwrap_or(0.0);
            let max_age = lacquer_cache::ttl::logged_max_age(h, compat);
            for v in [r.timers.t_origin, date, expires, max_age] {
                b.push(b' ');
                int(b, v);
            }
        }
        b.extend_from_slice(if r.cacheable {
            b" cacheable"
        } else {
            b" uncacheable"
        });
    });
}

fn http_date(v: &bytes::Bytes) -> Option<f64> {
    let t = httpdate::parse_http_date(std::str::from_utf8(v).ok()?).ok()?;
    t.duration_since(std::time::UNIX_EPOCH)
        .ok()
        .map(|d| d.as_secs_f64())
}

/// A record of numbers separated by spaces (`ReqAcct`, `BereqAcct`).
pub(crate) fn numbers(log: &mut Txn, tag: Tag, values: &[u64]) {
    log.numbers(tag, values);
}

#[cfg(test)]
mod tests {
    use super::*;
    use lacquer_shm::{Limits, Log, Reader, Side};

    #[test]
    fn heads_and_calls_are_logged_as_varnish_names_them() {
        let dir = std::env::temp_dir().join(format!("lacquer-vsl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = Log::create(&dir, 1 << 16).unwrap().leak();
        let mut reader = Reader::open(&dir, false).unwrap();
        let limits = Limits {
            reclen: 255,
            buffer: 4096,
            mask: mask(),
        };
        let mut t = Txn::new(Some(log), 5, Side::Client, limits);
        t.head(
            lacquer_shm::packed::HeadKind::Resp,
            b"HTTP/1.1 404 Not Found\r\nVia: 1.1 x\r\nContent-Length: 0\r\n\r\n",
        );
        vcl_call(&mut t, Method::BackendFetch);
        vcl_return(&mut t, &Action::Fetch);
        t.end();
        let mut got = Vec::new();
        reader.poll(&mut got).unwrap();
        let lines: Vec<String> = got
            .iter()
            .map(|r| format!("{} {}", r.tag.name(), r.text()))
            .collect();
        assert_eq!(
            lines,
            [
                "RespProtocol HTTP/1.1",
                "RespStatus 404",
                "RespReason Not Found",
                "RespHeader Via: 1.1 x",
                "RespHeader Content-Length: 0",
                "VCL_call BACKEND_FETCH",
                "VCL_return fetch",
                "End ",
            ]
        );
    }
}
