//! vmod std: conversions, logging, string helpers, health, bans and the
//! request-control functions of vmod_std(3).

use crate::types::scope::*;
use crate::types::{format_ip, HttpKind, Type, Value};
use crate::vmod::{dflt, opt, random, req, Ctx, Dflt, FuncSpec, Vmod};
use bytes::Bytes;
use lacquer_core::units::{parse_bytes, parse_duration};
use std::cell::RefCell;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::{Mutex, OnceLock};

type R = Result<Value, crate::failure::VclFailure>;

fn s(v: &Value) -> &[u8] {
    v.as_bytes()
}

fn text(v: &Value) -> &str {
    std::str::from_utf8(v.as_bytes()).unwrap_or("").trim()
}

fn given(v: &Value) -> bool {
    !v.is_unset()
}

/// The one conversion source that was given, besides `fallback`.
fn one_of<'a>(name: &str, args: &'a [Value], skip: usize) -> Result<(usize, &'a Value), String> {
    let mut found = None;
    for (i, v) in args.iter().enumerate() {
        if i == skip || !given(v) {
            continue;
        }
        if found.is_some() {
            return Err(format!(
                "std.{name}: only one argument may be given besides fallback"
            ));
        }
        found = Some((i, v));
    }
    found.ok_or_else(|| format!("std.{name}: no argument given"))
}

fn fallback_or(name: &str, fallback: &Value, what: &str) -> R {
    if given(fallback) {
        Ok(fallback.clone())
    } else {
        Err(format!("std.{name}: conversion failed ({what})").into())
    }
}

fn log(c: &mut Ctx<'_>, a: &[Value]) -> R {
    c.host.log(s(&a[0]));
    Ok(Value::Unset)
}

fn syslog(c: &mut Ctx<'_>, a: &[Value]) -> R {
    let msg: Vec<u8> = s(&a[1]).iter().copied().filter(|&b| b != 0).collect();
    send_syslog(a[0].as_i64(), &msg);
    c.host.log(&msg);
    Ok(Value::Unset)
}

/// Hands a message to the local syslog daemon (`/dev/log`, RFC 3164's
/// `<PRI>tag: message`), with LOG_USER as the facility when the priority
/// names none, as syslog(3) does. Nowhere to send it is not an error.
fn send_syslog(priority: i64, msg: &[u8]) {
    let priority = priority.clamp(0, 1023);
    let priority = if priority < 8 { priority | 8 } else { priority };
    let mut line = format!("<{priority}>lacquer[{}]: ", std::process::id()).into_bytes();
    line.extend_from_slice(msg);
    if let Ok(sock) = std::os::unix::net::UnixDatagram::unbound() {
        let _ = sock.send_to(&line, "/dev/log");
    }
}

fn toupper(_: &mut Ctx<'_>, a: &[Value]) -> R {
    Ok(Value::Str(Bytes::from(s(&a[0]).to_ascii_uppercase())))
}

fn tolower(_: &mut Ctx<'_>, a: &[Value]) -> R {
    Ok(Value::Str(Bytes::from(s(&a[0]).to_ascii_lowercase())))
}

fn random_fn(_: &mut Ctx<'_>, a: &[Value]) -> R {
    let (lo, hi) = (a[0].as_f64(), a[1].as_f64());
    Ok(Value::Real(lo + (hi - lo) * random()))
}

fn parse_int(t: &str) -> Option<i64> {
    let digits = t.strip_prefix(['-', '+']).unwrap_or(t);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    t.parse().ok()
}

fn integer(_: &mut Ctx<'_>, a: &[Value]) -> R {
    let (i, v) = one_of("integer", a, 1)?;
    let out = match i {
        0 => parse_int(text(v)),
        2 => Some(i64::from(v.as_bool())),
        3..=6 => {
            let f = v.as_f64();
            (f.is_finite() && f.abs() < 9.2e18).then_some(f as i64)
        }
        _ => None,
    };
    match out {
        Some(n) => Ok(Value::Int(n)),
        None => fallback_or("integer", &a[1], "not an integer"),
    }
}

fn real(_: &mut Ctx<'_>, a: &[Value]) -> R {
    let (i, v) = one_of("real", a, 1)?;
    let out = match i {
        0 => text(v).parse::<f64>().ok().filter(|f| f.is_finite()),
        3 => Some(f64::from(u8::from(v.as_bool()))),
        _ => Some(v.as_f64()),
    };
    match out {
        Some(f) => Ok(Value::Real(f)),
        None => fallback_or("real", &a[1], "not a number"),
    }
}

fn duration(_: &mut Ctx<'_>, a: &[Value]) -> R {
    let (i, v) = one_of("duration", a, 1)?;
    let out = match i {
        0 => {
            let t = text(v);
            if t.ends_with(|c: char| c.is_ascii_alphabetic()) {
                parse_duration(t).ok()
            } else {
                None
            }
        }
        _ => Some(v.as_f64()),
    };
    match out {
        Some(f) => Ok(Value::Duration(f)),
        None => fallback_or("duration", &a[1], "not a duration"),
    }
}

fn bytes_fn(_: &mut Ctx<'_>, a: &[Value]) -> R {
    let (i, v) = one_of("bytes", a, 1)?;
    let out = match i {
        0 => parse_bytes(text(v)).ok().map(|n| n as f64),
        _ => Some(v.as_f64()).filter(|f| *f >= 0.0),
    };
    match out {
        Some(f) => Ok(Value::Bytes(f)),
        None => fallback_or("bytes", &a[1], "not a byte count"),
    }
}

fn ip(_: &mut Ctx<'_>, a: &[Value]) -> R {
    let t = text(&a[0]);
    let port: u16 = text(&a[3]).parse().unwrap_or(80);
    if let Ok(ip) = t.parse::<IpAddr>() {
        return Ok(Value::Ip(Some(SocketAddr::new(ip, port))));
    }
    if let Ok(sa) = t.parse::<SocketAddr>() {
        return Ok(Value::Ip(Some(sa)));
    }
    if a[2].as_bool() && !t.is_empty() {
        if let Some(sa) = (t, port)
            .to_socket_addrs()
            .ok()
            .and_then(|mut it| it.next())
        {
            return Ok(Value::Ip(Some(sa)));
        }
    }
    fallback_or("ip", &a[1], "not an address")
}

fn time(_: &mut Ctx<'_>, a: &[Value]) -> R {
    let (i, v) = one_of("time", a, 1)?;
    let out = match i {
        0 => {
            let t = text(v);
            lacquer_core::time::parse_http_date(t.as_bytes())
                .or_else(|| t.parse::<f64>().ok().filter(|f| f.is_finite()))
        }
        _ => Some(v.as_f64()),
    };
    match out {
        Some(f) => Ok(Value::Time(f)),
        None => fallback_or("time", &a[1], "not a time"),
    }
}

fn healthy(c: &mut Ctx<'_>, a: &[Value]) -> R {
    let Value::Backend(b) = a[0] else {
        return Ok(Value::Bool(false));
    };
    Ok(Value::Bool(c.prog.healthy(b, c.host)))
}

fn port(_: &mut Ctx<'_>, a: &[Value]) -> R {
    Ok(Value::Int(match a[0] {
        Value::Ip(Some(sa)) => i64::from(sa.port()),
        _ => 0,
    }))
}

fn querysort(_: &mut Ctx<'_>, a: &[Value]) -> R {
    let url = s(&a[0]);
    let Some(q) = url.iter().position(|&b| b == b'?') else {
        return Ok(a[0].clone());
    };
    let mut params: Vec<&[u8]> = url[q + 1..]
        .split(|&b| b == b'&')
        .filter(|p| !p.is_empty())
        .collect();
    params.sort();
    let mut out = url[..q].to_vec();
    if !params.is_empty() {
        out.push(b'?');
        out.extend_from_slice(&params.join(&b'&'));
    }
    Ok(Value::Str(Bytes::from(out)))
}

fn collect(c: &mut Ctx<'_>, a: &[Value]) -> R {
    let Value::Header(kind, ref name) = a[0] else {
        return Ok(Value::Unset);
    };
    let all = c.host.header_all(kind, name);
    if all.len() > 1 {
        let joined = all.join(s(&a[1]));
        c.host.unset_header(kind, name);
        c.host.set_header(kind, name, Bytes::from(joined))?;
    }
    Ok(Value::Unset)
}

fn fileread(_: &mut Ctx<'_>, a: &[Value]) -> R {
    static FILES: OnceLock<Mutex<HashMap<String, Bytes>>> = OnceLock::new();
    let path = text(&a[0]).to_string();
    let files = FILES.get_or_init(Default::default);
    let mut files = files.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(b) = files.get(&path) {
        return Ok(Value::Str(b.clone()));
    }
    let data = std::fs::read(&path).map_err(|e| format!("std.fileread: {path}: {e}"))?;
    let b = Bytes::from(data);
    files.insert(path, b.clone());
    Ok(Value::Str(b))
}

fn strstr(_: &mut Ctx<'_>, a: &[Value]) -> R {
    let (hay, needle) = (s(&a[0]), s(&a[1]));
    if a[0].is_unset() || a[1].is_unset() {
        return Ok(Value::Unset);
    }
    match hay.windows(needle.len().max(1)).position(|w| w == needle) {
        Some(i) if !needle.is_empty() => Ok(Value::Str(Bytes::copy_from_slice(&hay[i..]))),
        _ if needle.is_empty() => Ok(a[0].clone()),
        _ => Ok(Value::Unset),
    }
}

/// Shell-style matching as fnmatch(3) does it.
pub fn fnmatch(p: &[u8], s: &[u8], pathname: bool, noescape: bool, period: bool) -> bool {
    fn go(p: &[u8], s: &[u8], o: (bool, bool, bool), at_start: bool) -> bool {
        let (pathname, noescape, period) = o;
        let leading_dot = period && at_start && s.first() == Some(&b'.');
        match p.first() {
            None => s.is_empty(),
            Some(b'*') => {
                if leading_dot {
                    return false;
                }
                let rest = &p[1..];
                for i in 0..=s.len() {
                    if i > 0 && pathname && s[i - 1] == b'/' {
                        break;
                    }
                    if go(rest, &s[i..], o, i == 0 && at_start) {
                        return true;
                    }
                }
                false
            }
            Some(b'?') => {
                let Some(&c) = s.first() else { return false };
                if (pathname && c == b'/') || leading_dot {
                    return false;
                }
                go(&p[1..], &s[1..], o, pathname && c == b'/')
            }
            Some(b'[') => {
                let Some(&c) = s.first() else { return false };
                if (pathname && c == b'/') || leading_dot {
                    return false;
                }
                let mut i = 1;
                let negate = matches!(p.get(1), Some(b'!') | Some(b'^'));
                if negate {
                    i += 1;
                }
                let mut matched = false;
                let mut first = true;
                while i < p.len() && (first || p[i] != b']') {
                    first = false;
                    let lo = p[i];
                    if p.get(i + 1) == Some(&b'-') && p.get(i + 2).is_some_and(|&b| b != b']') {
                        if lo <= c && c <= p[i + 2] {
                            matched = true;
                        }
                        i += 3;
                    } else {
                        if lo == c {
                            matched = true;
                        }
                        i += 1;
                    }
                }
                if i >= p.len() {
                    // No closing bracket: '[' is an ordinary character.
                    return c == b'[' && go(&p[1..], &s[1..], o, false);
                }
                matched != negate && go(&p[i + 1..], &s[1..], o, pathname && c == b'/')
            }
            Some(b'\\') if !noescape && p.len() > 1 => {
                s.first() == Some(&p[1]) && go(&p[2..], &s[1..], o, false)
            }
            Some(&c) => s.first() == Some(&c) && go(&p[1..], &s[1..], o, pathname && c == b'/'),
        }
    }
    go(p, s, (pathname, noescape, period), true)
}

fn fnmatch_fn(_: &mut Ctx<'_>, a: &[Value]) -> R {
    Ok(Value::Bool(fnmatch(
        s(&a[0]),
        s(&a[1]),
        a[2].as_bool(),
        a[3].as_bool(),
        a[4].as_bool(),
    )))
}

thread_local! {
    static BAN_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
}

fn ban(c: &mut Ctx<'_>, a: &[Value]) -> R {
    let r = c.host.ban(s(&a[0]));
    let ok = r.is_ok();
    BAN_ERROR.with(|e| *e.borrow_mut() = r.err().map(|e| e.to_string()).unwrap_or_default());
    Ok(Value::Bool(ok))
}

fn ban_error(_: &mut Ctx<'_>, _: &[Value]) -> R {
    Ok(BAN_ERROR.with(|e| Value::str(&e.borrow())))
}

fn timestamp(c: &mut Ctx<'_>, a: &[Value]) -> R {
    c.host.timestamp(s(&a[0]));
    Ok(Value::Unset)
}

fn set_ip_tos(c: &mut Ctx<'_>, a: &[Value]) -> R {
    let tos = a[0].as_i64().clamp(0, 255) as u8;
    let Some(sock) = c.host.client_socket() else {
        return Ok(Value::Unset);
    };
    if sock.set_tos(tos).is_err() {
        c.host.error("std.set_ip_tos(): setsockopt failed");
    }
    Ok(Value::Unset)
}

fn rollback(c: &mut Ctx<'_>, a: &[Value]) -> R {
    if let Value::Http(kind) = a[0] {
        if !matches!(kind, HttpKind::Req | HttpKind::Bereq) {
            return Err("std.rollback: only req and bereq can be rolled back".into());
        }
        c.host.rollback(kind)?;
    }
    Ok(Value::Unset)
}

fn cache_req_body(c: &mut Ctx<'_>, a: &[Value]) -> R {
    Ok(Value::Bool(c.host.cache_req_body(a[0].as_f64() as u64)))
}

fn now(_: &mut Ctx<'_>, _: &[Value]) -> R {
    Ok(Value::Time(lacquer_core::time::now()))
}

fn getenv(_: &mut Ctx<'_>, a: &[Value]) -> R {
    Ok(std::env::var(text(&a[0])).map_or(Value::Unset, |v| Value::str(&v)))
}

fn syntax(c: &mut Ctx<'_>, a: &[Value]) -> R {
    let (major, minor) = c.prog.version;
    let have = f64::from(major) + f64::from(minor) / 10.0;
    Ok(Value::Bool(a[0].as_f64() <= have + 1e-9))
}

fn late_100_continue(_: &mut Ctx<'_>, _: &[Value]) -> R {
    Ok(Value::Unset)
}

/// An IP formatted without port (used by tests of the conversions).
pub fn ip_text(v: &Value) -> String {
    let mut out = Vec::new();
    if let Value::Ip(a) = v {
        format_ip(&mut out, *a);
    }
    String::from_utf8(out).unwrap_or_default()
}

const fn f(
    name: &'static str,
    ret: Type,
    params: &'static [crate::vmod::Param],
    scope: u16,
    call: crate::vmod::FuncCall,
) -> FuncSpec {
    FuncSpec {
        vmod: "std",
        name,
        ret,
        params,
        scope,
        call,
    }
}

use Type as T;

static FUNCTIONS: &[FuncSpec] = &[
    f("log", T::Void, &[req("s", T::String)], ALL, log),
    f(
        "syslog",
        T::Void,
        &[req("priority", T::Int), req("s", T::String)],
        ALL,
        syslog,
    ),
    f("toupper", T::String, &[req("s", T::String)], ALL, toupper),
    f("tolower", T::String, &[req("s", T::String)], ALL, tolower),
    f(
        "random",
        T::Real,
        &[req("lo", T::Real), req("hi", T::Real)],
        ALL,
        random_fn,
    ),
    f(
        "integer",
        T::Int,
        &[
            opt("s", T::String),
            opt("fallback", T::Int),
            opt("bool", T::Bool),
            opt("bytes", T::Bytes),
            opt("duration", T::Duration),
            opt("real", T::Real),
            opt("time", T::Time),
        ],
        ALL,
        integer,
    ),
    f(
        "real",
        T::Real,
        &[
            opt("s", T::String),
            opt("fallback", T::Real),
            opt("integer", T::Int),
            opt("bool", T::Bool),
            opt("bytes", T::Bytes),
            opt("duration", T::Duration),
            opt("time", T::Time),
        ],
        ALL,
        real,
    ),
    f(
        "duration",
        T::Duration,
        &[
            opt("s", T::String),
            opt("fallback", T::Duration),
            opt("real", T::Real),
            opt("integer", T::Int),
        ],
        ALL,
        duration,
    ),
    f(
        "bytes",
        T::Bytes,
        &[
            opt("s", T::String),
            opt("fallback", T::Bytes),
            opt("real", T::Real),
            opt("integer", T::Int),
        ],
        ALL,
        bytes_fn,
    ),
    f(
        "ip",
        T::Ip,
        &[
            req("s", T::String),
            opt("fallback", T::Ip),
            dflt("resolve", T::Bool, Dflt::Bool(true)),
            dflt("p", T::String, Dflt::Str("80")),
        ],
        ALL,
        ip,
    ),
    f(
        "time",
        T::Time,
        &[
            opt("s", T::String),
            opt("fallback", T::Time),
            opt("real", T::Real),
            opt("integer", T::Int),
        ],
        ALL,
        time,
    ),
    f("healthy", T::Bool, &[req("be", T::Backend)], ALL, healthy),
    f("port", T::Int, &[req("ip", T::Ip)], ALL, port),
    f(
        "querysort",
        T::String,
        &[req("s", T::String)],
        ALL,
        querysort,
    ),
    f(
        "collect",
        T::Void,
        &[
            req("hdr", T::Header),
            dflt("sep", T::String, Dflt::Str(", ")),
        ],
        CLIENT_BACKEND,
        collect,
    ),
    f("fileread", T::String, &[req("s", T::String)], ALL, fileread),
    f(
        "strstr",
        T::String,
        &[req("s1", T::String), req("s2", T::String)],
        ALL,
        strstr,
    ),
    f(
        "fnmatch",
        T::Bool,
        &[
            req("pattern", T::String),
            req("subject", T::String),
            dflt("pathname", T::Bool, Dflt::Bool(true)),
            dflt("noescape", T::Bool, Dflt::Bool(false)),
            dflt("period", T::Bool, Dflt::Bool(false)),
        ],
        ALL,
        fnmatch_fn,
    ),
    f("ban", T::Bool, &[req("s", T::String)], ALL, ban),
    f("ban_error", T::String, &[], ALL, ban_error),
    f(
        "timestamp",
        T::Void,
        &[req("s", T::String)],
        CLIENT_BACKEND,
        timestamp,
    ),
    f(
        "set_ip_tos",
        T::Void,
        &[req("tos", T::Int)],
        CLIENT,
        set_ip_tos,
    ),
    f(
        "rollback",
        T::Void,
        &[req("h", T::Http)],
        CLIENT_BACKEND,
        rollback,
    ),
    f(
        "cache_req_body",
        T::Bool,
        &[req("size", T::Bytes)],
        RECV,
        cache_req_body,
    ),
    f("now", T::Time, &[], ALL, now),
    f("getenv", T::String, &[req("name", T::String)], ALL, getenv),
    f("syntax", T::Bool, &[req("version", T::Real)], ALL, syntax),
    f(
        "late_100_continue",
        T::Void,
        &[req("late", T::Bool)],
        RECV,
        late_100_continue,
    ),
];

pub const VMOD: Vmod = Vmod {
    name: "std",
    functions: FUNCTIONS,
    classes: &[],
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnmatch_follows_the_shell() {
        assert!(fnmatch(b"*.jpg", b"a.jpg", true, false, false));
        assert!(!fnmatch(b"*.jpg", b"d/a.jpg", true, false, false));
        assert!(fnmatch(b"*.jpg", b"d/a.jpg", false, false, false));
        assert!(fnmatch(b"/a/[bc]?/*", b"/a/cx/y", true, false, false));
        assert!(!fnmatch(b"/a/[!bc]?/*", b"/a/cx/y", true, false, false));
        assert!(fnmatch(b"\\*", b"*", true, false, false));
        assert!(!fnmatch(b"*", b".hidden", true, false, true));
    }

    #[test]
    fn integers_are_strict() {
        assert_eq!(parse_int(" 12".trim()), Some(12));
        assert_eq!(parse_int("-3"), Some(-3));
        assert_eq!(parse_int("1x"), None);
        assert_eq!(parse_int(""), None);
    }
}
