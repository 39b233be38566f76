//! vmod bodyaccess, as varnish-modules has it: the request body that
//! `std.cache_req_body` kept, put into the hash (`hash_req_body`, for
//! caching POST requests by their body), measured (`len_req_body`),
//! matched against a regular expression (`rematch_req_body`) or logged
//! (`log_req_body`). Without a kept body they answer -1.

use crate::types::scope::{CLIENT, HASH};
use crate::types::{Type, Value};
use crate::vmod::{dflt, req, Ctx, Dflt, FuncSpec, Vmod};

type R = Result<Value, crate::failure::VclFailure>;

fn body(c: &mut Ctx<'_>, what: &str) -> Option<bytes::Bytes> {
    let body = c.host.cached_req_body();
    if body.is_none() {
        c.host.error(&format!(
            "bodyaccess.{what}: the request body was not cached"
        ));
    }
    body
}

fn hash_req_body(c: &mut Ctx<'_>, _: &[Value]) -> R {
    if let Some(b) = body(c, "hash_req_body") {
        c.host.hash_data(&b);
    }
    Ok(Value::Unset)
}

fn len_req_body(c: &mut Ctx<'_>, _: &[Value]) -> R {
    Ok(Value::Int(
        body(c, "len_req_body").map_or(-1, |b| b.len() as i64),
    ))
}

fn rematch_req_body(c: &mut Ctx<'_>, a: &[Value]) -> R {
    let Value::Regex(re) = &a[0] else {
        return Ok(Value::Int(-1));
    };
    let re = re.0.clone();
    Ok(Value::Int(match body(c, "rematch_req_body") {
        None => -1,
        Some(b) => i64::from(re.is_match(&b)),
    }))
}

fn log_req_body(c: &mut Ctx<'_>, a: &[Value]) -> R {
    let prefix = a[0].as_bytes().to_vec();
    let length = a[1].as_i64().max(1) as usize;
    if let Some(b) = body(c, "log_req_body") {
        for piece in b.chunks(length) {
            let mut line = prefix.clone();
            line.extend_from_slice(piece);
            c.host.log(&line);
        }
    }
    Ok(Value::Unset)
}

static FUNCTIONS: &[FuncSpec] = &[
    FuncSpec {
        vmod: "bodyaccess",
        name: "hash_req_body",
        ret: Type::Void,
        params: &[],
        scope: HASH,
        call: hash_req_body,
    },
    FuncSpec {
        vmod: "bodyaccess",
        name: "len_req_body",
        ret: Type::Int,
        params: &[],
        scope: CLIENT,
        call: len_req_body,
    },
    FuncSpec {
        vmod: "bodyaccess",
        name: "rematch_req_body",
        ret: Type::Int,
        params: &[req("re", Type::Regex)],
        scope: CLIENT,
        call: rematch_req_body,
    },
    FuncSpec {
        vmod: "bodyaccess",
        name: "log_req_body",
        ret: Type::Void,
        params: &[
            dflt("prefix", Type::String, Dflt::Str("")),
            dflt("length", Type::Int, Dflt::Int(200)),
        ],
        scope: CLIENT,
        call: log_req_body,
    },
];

pub const VMOD: Vmod = Vmod {
    name: "bodyaccess",
    functions: FUNCTIONS,
    classes: &[],
};
