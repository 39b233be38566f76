//! vmod unix: who is at the other end of a client connection that came
//! through a Unix domain socket listener — `uid()`, `gid()`, `user()`,
//! `group()`, with vmod unix's interface. On any other connection they
//! give -1 or an unset string, with a `VCL_Error` record.

use crate::socket::PeerCredentials;
use crate::types::scope::CLIENT;
use crate::types::{Type, Value};
use crate::vmod::{Ctx, FuncSpec, Vmod};

type R = Result<Value, crate::failure::VclFailure>;

fn credentials(c: &mut Ctx<'_>) -> Option<PeerCredentials> {
    let found = c.host.peer_credentials();
    if found.is_none() {
        c.host
            .error("vmod unix: not listening on a Unix domain socket");
    }
    found
}

fn uid(c: &mut Ctx<'_>, _: &[Value]) -> R {
    Ok(Value::Int(credentials(c).map_or(-1, |p| i64::from(p.uid))))
}

fn gid(c: &mut Ctx<'_>, _: &[Value]) -> R {
    Ok(Value::Int(credentials(c).map_or(-1, |p| i64::from(p.gid))))
}

fn user(c: &mut Ctx<'_>, _: &[Value]) -> R {
    Ok(credentials(c)
        .and_then(|p| p.user)
        .map_or(Value::Unset, |u| Value::str(&u)))
}

fn group(c: &mut Ctx<'_>, _: &[Value]) -> R {
    Ok(credentials(c)
        .and_then(|p| p.group)
        .map_or(Value::Unset, |g| Value::str(&g)))
}

static FUNCTIONS: &[FuncSpec] = &[
    FuncSpec {
        vmod: "unix",
        name: "uid",
        ret: Type::Int,
        params: &[],
        scope: CLIENT,
        call: uid,
    },
    FuncSpec {
        vmod: "unix",
        name: "gid",
        ret: Type::Int,
        params: &[],
        scope: CLIENT,
        call: gid,
    },
    FuncSpec {
        vmod: "unix",
        name: "user",
        ret: Type::String,
        params: &[],
        scope: CLIENT,
        call: user,
    },
    FuncSpec {
        vmod: "unix",
        name: "group",
        ret: Type::String,
        params: &[],
        scope: CLIENT,
        call: group,
    },
];

pub const VMOD: Vmod = Vmod {
    name: "unix",
    functions: FUNCTIONS,
    classes: &[],
};
