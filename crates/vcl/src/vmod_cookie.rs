//! vmod cookie, as bundled with Varnish 7: a request's cookies parsed
//! once (`cookie.parse(req.http.cookie)`), then read, set, deleted or
//! filtered by name (a comma-separated list, or a regular expression),
//! and written back with `cookie.get_string()`. The parsed cookies are
//! the task's own: a client request and its backend fetch each have theirs.

use crate::types::scope::{ALL, CLIENT_BACKEND};
use crate::types::{Type, Value};
use crate::vmod::{req, Ctx, FuncSpec, Vmod};
use bytes::Bytes;

type R = Result<Value, crate::failure::VclFailure>;

/// The cookies of one task, in the order they came.
#[derive(Default)]
struct Jar(Vec<(Bytes, Bytes)>);

fn jar<'c>(c: &'c mut Ctx<'_>) -> Option<&'c mut Jar> {
    c.host.task_privs().map(|p| p.get::<Jar>("cookie"))
}

fn trim(b: &[u8]) -> &[u8] {
    let start = b
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .unwrap_or(b.len());
    let end = b
        .iter()
        .rposition(|c| !c.is_ascii_whitespace())
        .map_or(start, |e| e + 1);
    &b[start..end.max(start)]
}

fn parse(c: &mut Ctx<'_>, a: &[Value]) -> R {
    let header = Bytes::copy_from_slice(a[0].as_bytes());
    let Some(jar) = jar(c) else {
        return Ok(Value::Unset);
    };
    jar.0.clear();
    for pair in header.split(|&b| b == b';') {
        let pair = trim(pair);
        if pair.is_empty() {
            continue;
        }
        let (name, value) = match pair.iter().position(|&b| b == b'=') {
            Some(eq) => (trim(&pair[..eq]), trim(&pair[eq + 1..])),
            None => (pair, &b""[..]),
        };
        if name.is_empty() {
            continue;
        }
        set_in(jar, name, value);
    }
    Ok(Value::Unset)
}

fn set_in(jar: &mut Jar, name: &[u8], value: &[u8]) {
    let value = Bytes::copy_from_slice(value);
    match jar.0.iter_mut().find(|(n, _)| n == name) {
        Some(slot) => slot.1 = value,
        None => jar.0.push((Bytes::copy_from_slice(name), value)),
    }
}

fn set(c: &mut Ctx<'_>, a: &[Value]) -> R {
    let (name, value) = (a[0].as_bytes().to_vec(), a[1].as_bytes().to_vec());
    if let Some(jar) = jar(c) {
        if !name.is_empty() {
            set_in(jar, &name, &value);
        }
    }
    Ok(Value::Unset)
}

fn get(c: &mut Ctx<'_>, a: &[Value]) -> R {
    let name = a[0].as_bytes().to_vec();
    Ok(jar(c)
        .and_then(|j| j.0.iter().find(|(n, _)| **n == name[..]))
        .map_or(Value::Unset, |(_, v)| Value::Str(v.clone())))
}

fn isset(c: &mut Ctx<'_>, a: &[Value]) -> R {
    let name = a[0].as_bytes().to_vec();
    Ok(Value::Bool(
        jar(c).is_some_and(|j| j.0.iter().any(|(n, _)| **n == name[..])),
    ))
}

fn delete(c: &mut Ctx<'_>, a: &[Value]) -> R {
    let name = a[0].as_bytes().to_vec();
    if let Some(jar) = jar(c) {
        jar.0.retain(|(n, _)| **n != name[..]);
    }
    Ok(Value::Unset)
}

fn clean(c: &mut Ctx<'_>, _: &[Value]) -> R {
    if let Some(jar) = jar(c) {
        jar.0.clear();
    }
    Ok(Value::Unset)
}

/// The names of a comma-separated list.
fn names(list: &[u8]) -> Vec<Vec<u8>> {
    list.split(|&b| b == b',')
        .map(trim)
        .filter(|n| !n.is_empty())
        .map(<[u8]>::to_vec)
        .collect()
}

fn filter(c: &mut Ctx<'_>, a: &[Value]) -> R {
    let listed = names(a[0].as_bytes());
    if let Some(jar) = jar(c) {
        jar.0.retain(|(n, _)| !listed.iter().any(|l| **l == n[..]));
    }
    Ok(Value::Unset)
}

fn keep(c: &mut Ctx<'_>, a: &[Value]) -> R {
    let listed = names(a[0].as_bytes());
    if let Some(jar) = jar(c) {
        jar.0.retain(|(n, _)| listed.iter().any(|l| **l == n[..]));
    }
    Ok(Value::Unset)
}

fn regex(v: &Value) -> Option<std::sync::Arc<lacquer_core::regex::Regex>> {
    match v {
        Value::Regex(r) => Some(r.0.clone()),
        _ => None,
    }
}

fn filter_re(c: &mut Ctx<'_>, a: &[Value]) -> R {
    let Some(re) = regex(&a[0]) else {
        return Ok(Value::Unset);
    };
    if let Some(jar) = jar(c) {
        jar.0.retain(|(n, _)| !re.is_match(n));
    }
    Ok(Value::Unset)
}

fn keep_re(c: &mut Ctx<'_>, a: &[Value]) -> R {
    let Some(re) = regex(&a[0]) else {
        return Ok(Value::Unset);
    };
    if let Some(jar) = jar(c) {
        jar.0.retain(|(n, _)| re.is_match(n));
    }
    Ok(Value::Unset)
}

fn get_re(c: &mut Ctx<'_>, a: &[Value]) -> R {
    let Some(re) = regex(&a[0]) else {
        return Ok(Value::Unset);
    };
    Ok(jar(c)
        .and_then(|j| j.0.iter().find(|(n, _)| re.is_match(n)))
        .map_or(Value::Unset, |(_, v)| Value::Str(v.clone())))
}

fn get_string(c: &mut Ctx<'_>, _: &[Value]) -> R {
    let Some(jar) = jar(c) else {
        return Ok(Value::Unset);
    };
    // As Varnish writes it: each cookie ends with ';', separated by a
    // space ("a=1; b=2;").
    let mut out = Vec::new();
    for (i, (n, v)) in jar.0.iter().enumerate() {
        if i > 0 {
            out.push(b' ');
        }
        out.extend_from_slice(n);
        out.push(b'=');
        out.extend_from_slice(v);
        out.push(b';');
    }
    Ok(Value::Str(Bytes::from(out)))
}

fn format_date(_: &mut Ctx<'_>, a: &[Value]) -> R {
    let when = a[0].as_f64() + a[1].as_f64();
    Ok(Value::str(&lacquer_core::time::http_date(when)))
}

const fn f(
    name: &'static str,
    ret: Type,
    params: &'static [crate::vmod::Param],
    call: crate::vmod::FuncCall,
) -> FuncSpec {
    crate::vmod::func("cookie", name, params, ret, CLIENT_BACKEND, call)
}

static FUNCTIONS: &[FuncSpec] = &[
    f(
        "parse",
        Type::Void,
        &[req("cookieheader", Type::String)],
        parse,
    ),
    f(
        "set",
        Type::Void,
        &[req("cookiename", Type::String), req("value", Type::String)],
        set,
    ),
    f("get", Type::String, &[req("cookiename", Type::String)], get),
    f(
        "isset",
        Type::Bool,
        &[req("cookiename", Type::String)],
        isset,
    ),
    f(
        "delete",
        Type::Void,
        &[req("cookiename", Type::String)],
        delete,
    ),
    f("clean", Type::Void, &[], clean),
    f("filter", Type::Void, &[req("filter", Type::String)], filter),
    f("keep", Type::Void, &[req("filter", Type::String)], keep),
    f(
        "filter_re",
        Type::Void,
        &[req("expression", Type::Regex)],
        filter_re,
    ),
    f(
        "keep_re",
        Type::Void,
        &[req("expression", Type::Regex)],
        keep_re,
    ),
    f(
        "get_re",
        Type::String,
        &[req("expression", Type::Regex)],
        get_re,
    ),
    f("get_string", Type::String, &[], get_string),
    crate::vmod::func(
        "cookie",
        "format_date",
        &[req("now", Type::Time), req("timedelta", Type::Duration)],
        Type::String,
        ALL,
        format_date,
    ),
];

pub const VMOD: Vmod = Vmod {
    name: "cookie",
    functions: FUNCTIONS,
    classes: &[],
};
