//! vmod header, as varnish-modules has it: work on every line of a
//! header, where plain VCL sees one — `append` a line beside the others
//! (a second Set-Cookie), `copy` every line to another header, `get` the
//! first line matching a regular expression, `remove` the lines matching
//! one.

use crate::types::scope::CLIENT_BACKEND;
use crate::types::{HttpKind, Type, Value};
use crate::vmod::{req, Ctx, FuncSpec, Vmod};

type R = Result<Value, crate::failure::VclFailure>;

fn header(v: &Value) -> Option<(HttpKind, &str)> {
    match v {
        Value::Header(kind, name) => Some((*kind, name)),
        _ => None,
    }
}

fn regex(v: &Value) -> Option<&lacquer_core::regex::Regex> {
    match v {
        Value::Regex(r) => Some(&r.0),
        _ => None,
    }
}

fn append(c: &mut Ctx<'_>, a: &[Value]) -> R {
    if let (Some((kind, name)), Value::Str(value)) = (header(&a[0]), &a[1]) {
        c.host.append_header(kind, name, value.clone())?;
    }
    Ok(Value::Unset)
}

fn copy(c: &mut Ctx<'_>, a: &[Value]) -> R {
    let (Some((from, src)), Some((to, dst))) = (header(&a[0]), header(&a[1])) else {
        return Ok(Value::Unset);
    };
    for value in c.host.header_all(from, src) {
        c.host.append_header(to, dst, value)?;
    }
    Ok(Value::Unset)
}

fn get(c: &mut Ctx<'_>, a: &[Value]) -> R {
    let (Some((kind, name)), Some(re)) = (header(&a[0]), regex(&a[1])) else {
        return Ok(Value::Unset);
    };
    Ok(c.host
        .header_all(kind, name)
        .into_iter()
        .find(|v| re.is_match(v))
        .map_or(Value::Unset, Value::Str))
}

fn remove(c: &mut Ctx<'_>, a: &[Value]) -> R {
    let (Some((kind, name)), Some(re)) = (header(&a[0]), regex(&a[1])) else {
        return Ok(Value::Unset);
    };
    let all = c.host.header_all(kind, name);
    if !all.iter().any(|v| re.is_match(v)) {
        return Ok(Value::Unset);
    }
    c.host.unset_header(kind, name);
    for value in all.into_iter().filter(|v| !re.is_match(v)) {
        c.host.append_header(kind, name, value)?;
    }
    Ok(Value::Unset)
}

const fn f(
    name: &'static str,
    params: &'static [crate::vmod::Param],
    ret: Type,
    call: crate::vmod::FuncCall,
) -> FuncSpec {
    crate::vmod::func("header", name, params, ret, CLIENT_BACKEND, call)
}

static FUNCTIONS: &[FuncSpec] = &[
    f(
        "append",
        &[req("header", Type::Header), req("value", Type::String)],
        Type::Void,
        append,
    ),
    f(
        "copy",
        &[req("src", Type::Header), req("dst", Type::Header)],
        Type::Void,
        copy,
    ),
    f(
        "get",
        &[req("header", Type::Header), req("regex", Type::Regex)],
        Type::String,
        get,
    ),
    f(
        "remove",
        &[req("header", Type::Header), req("regex", Type::Regex)],
        Type::Void,
        remove,
    ),
];

pub const VMOD: Vmod = Vmod {
    name: "header",
    functions: FUNCTIONS,
    classes: &[],
};
