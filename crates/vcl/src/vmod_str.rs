//! vmod str, as varnish-modules has it: `count`, `startswith`,
//! `endswith`, `contains`, `take` (a slice by count and offset, either
//! counted from the end), `reverse`, `split` (the n-th token, from the end
//! when negative) and `token_intersect` (whether two token lists share
//! one). Strings are bytes; an unset string counts -1 and takes to unset.

use crate::types::scope::ALL;
use crate::types::{Type, Value};
use crate::vmod::{dflt, req, Ctx, Dflt, FuncSpec, Vmod};
use bytes::Bytes;

type R = Result<Value, crate::failure::VclFailure>;

fn count(_: &mut Ctx<'_>, a: &[Value]) -> R {
    Ok(Value::Int(match &a[0] {
        Value::Unset => -1,
        v => v.as_bytes().len() as i64,
    }))
}

fn both(a: &[Value]) -> Option<(&[u8], &[u8])> {
    if a[0].is_unset() || a[1].is_unset() {
        return None;
    }
    Some((a[0].as_bytes(), a[1].as_bytes()))
}

fn startswith(_: &mut Ctx<'_>, a: &[Value]) -> R {
    Ok(Value::Bool(both(a).is_some_and(|(s, p)| s.starts_with(p))))
}

fn endswith(_: &mut Ctx<'_>, a: &[Value]) -> R {
    Ok(Value::Bool(both(a).is_some_and(|(s, p)| s.ends_with(p))))
}

fn contains(_: &mut Ctx<'_>, a: &[Value]) -> R {
    Ok(Value::Bool(both(a).is_some_and(|(s, p)| {
        p.is_empty() || s.windows(p.len()).any(|w| w == p)
    })))
}

/// The bytes `take` picks: `n` from `offset` (negative offsets count from
/// the end, a negative `n` takes to the left of the offset).
fn take_range(len: usize, n: i64, offset: i64) -> (usize, usize) {
    let len = len as i64;
    let start = if offset < 0 { len + offset } else { offset }.clamp(0, len);
    let (from, to) = if n >= 0 {
        (start, start.saturating_add(n))
    } else {
        (start.saturating_add(n), start)
    };
    (from.clamp(0, len) as usize, to.clamp(0, len) as usize)
}

fn take(_: &mut Ctx<'_>, a: &[Value]) -> R {
    let Value::Str(s) = &a[0] else {
        return Ok(Value::Unset);
    };
    let (from, to) = take_range(s.len(), a[1].as_i64(), a[2].as_i64());
    Ok(Value::Str(s.slice(from..to)))
}

fn reverse(_: &mut Ctx<'_>, a: &[Value]) -> R {
    let Value::Str(s) = &a[0] else {
        return Ok(Value::Unset);
    };
    let mut out = s.to_vec();
    out.reverse();
    Ok(Value::Str(Bytes::from(out)))
}

fn tokens<'a>(s: &'a [u8], sep: &'a [u8]) -> impl DoubleEndedIterator<Item = &'a [u8]> {
    s.split(move |b| sep.contains(b)).filter(|t| !t.is_empty())
}

fn split(_: &mut Ctx<'_>, a: &[Value]) -> R {
    let Value::Str(s) = &a[0] else {
        return Ok(Value::Unset);
    };
    let n = a[1].as_i64();
    let sep = a[2].as_bytes();
    let found = match n {
        0 => None,
        n if n > 0 => tokens(s, sep).nth(n as usize - 1),
        n => tokens(s, sep).rev().nth(n.unsigned_abs() as usize - 1),
    };
    Ok(found.map_or(Value::Unset, |t| Value::Str(Bytes::copy_from_slice(t))))
}

fn token_intersect(_: &mut Ctx<'_>, a: &[Value]) -> R {
    let sep = a[2].as_bytes();
    let (one, two) = (a[0].as_bytes(), a[1].as_bytes());
    Ok(Value::Bool(
        tokens(one, sep).any(|t| tokens(two, sep).any(|u| u == t)),
    ))
}

const fn f(
    name: &'static str,
    params: &'static [crate::vmod::Param],
    ret: Type,
    call: crate::vmod::FuncCall,
) -> FuncSpec {
    crate::vmod::func("str", name, params, ret, ALL, call)
}

static FUNCTIONS: &[FuncSpec] = &[
    f("count", &[req("s", Type::String)], Type::Int, count),
    f(
        "startswith",
        &[req("s1", Type::String), req("s2", Type::String)],
        Type::Bool,
        startswith,
    ),
    f(
        "endswith",
        &[req("s1", Type::String), req("s2", Type::String)],
        Type::Bool,
        endswith,
    ),
    f(
        "contains",
        &[req("s1", Type::String), req("s2", Type::String)],
        Type::Bool,
        contains,
    ),
    f(
        "take",
        &[
            req("s", Type::String),
            req("n", Type::Int),
            dflt("offset", Type::Int, Dflt::Int(0)),
        ],
        Type::String,
        take,
    ),
    f("reverse", &[req("s", Type::String)], Type::String, reverse),
    f(
        "split",
        &[
            req("s", Type::String),
            req("n", Type::Int),
            dflt("sep", Type::String, Dflt::Str(" \t")),
        ],
        Type::String,
        split,
    ),
    f(
        "token_intersect",
        &[
            req("str1", Type::String),
            req("str2", Type::String),
            dflt("separators", Type::String, Dflt::Str(", ")),
        ],
        Type::Bool,
        token_intersect,
    ),
];

pub const VMOD: Vmod = Vmod {
    name: "str",
    functions: FUNCTIONS,
    classes: &[],
};

#[cfg(test)]
mod tests {
    use super::take_range;

    #[test]
    fn take_counts_from_either_end() {
        let s = "0123456789abcdef";
        let take = |n, o| {
            let (a, b) = take_range(s.len(), n, o);
            &s[a..b]
        };
        assert_eq!(take(2, 0), "01");
        assert_eq!(take(2, 5), "56");
        assert_eq!(take(2, -5), "bc");
        assert_eq!(take(-2, 5), "34");
        assert_eq!(take(-2, -5), "9a");
        assert_eq!(take(10, 10), "abcdef");
        assert_eq!(take(-30, 2), "01");
        assert_eq!(take(3, 99), "");
    }
}
