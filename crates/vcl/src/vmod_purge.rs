//! vmod purge: `purge.hard()` and `purge.soft(ttl, grace, keep)` act on
//! every variant stored under the request's hash, from `vcl_hit` and
//! `vcl_miss`, as vmod_purge(3).

use crate::types::scope::{HIT, MISS};
use crate::types::{Type, Value};
use crate::vmod::{dflt, Ctx, Dflt, FuncSpec, Vmod};

type R = Result<Value, crate::failure::VclFailure>;

fn hard(c: &mut Ctx<'_>, _: &[Value]) -> R {
    Ok(Value::Int(c.host.purge(None)))
}

fn soft(c: &mut Ctx<'_>, a: &[Value]) -> R {
    // All three zero ends the objects at once: a hard purge.
    let how = [0, 1, 2].map(|i| a[i].as_f64());
    Ok(Value::Int(c.host.purge(Some(how))))
}

static FUNCTIONS: &[FuncSpec] = &[
    FuncSpec {
        vmod: "purge",
        name: "hard",
        ret: Type::Int,
        params: &[],
        scope: HIT | MISS,
        call: hard,
    },
    FuncSpec {
        vmod: "purge",
        name: "soft",
        ret: Type::Int,
        params: &[
            dflt("ttl", Type::Duration, Dflt::Duration(0.0)),
            dflt("grace", Type::Duration, Dflt::Duration(-1.0)),
            dflt("keep", Type::Duration, Dflt::Duration(-1.0)),
        ],
        scope: HIT | MISS,
        call: soft,
    },
];

pub const VMOD: Vmod = Vmod {
    name: "purge",
    functions: FUNCTIONS,
    classes: &[],
};
