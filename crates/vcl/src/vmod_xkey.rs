//! vmod xkey: `xkey.purge(keys)` and `xkey.softpurge(keys)` invalidate
//! every object tagged with any of the keys (white space or comma
//! separated) through the cache's tag index, with vmod xkey's interface.
//! Objects are tagged by their `xkey`, `X-HashTwo`, `Surrogate-Key` and
//! `Cache-Tag` response headers.

use crate::types::scope::ALL;
use crate::types::{Type, Value};
use crate::vmod::{req, Ctx, FuncSpec, Vmod};

type R = Result<Value, crate::failure::VclFailure>;

fn purge(c: &mut Ctx<'_>, a: &[Value]) -> R {
    Ok(Value::Int(c.host.purge_tags(a[0].as_bytes(), false)))
}

fn softpurge(c: &mut Ctx<'_>, a: &[Value]) -> R {
    Ok(Value::Int(c.host.purge_tags(a[0].as_bytes(), true)))
}

static FUNCTIONS: &[FuncSpec] = &[
    FuncSpec {
        vmod: "xkey",
        name: "purge",
        ret: Type::Int,
        params: &[req("keys", Type::String)],
        scope: ALL,
        call: purge,
    },
    FuncSpec {
        vmod: "xkey",
        name: "softpurge",
        ret: Type::Int,
        params: &[req("keys", Type::String)],
        scope: ALL,
        call: softpurge,
    },
];

pub const VMOD: Vmod = Vmod {
    name: "xkey",
    functions: FUNCTIONS,
    classes: &[],
};
