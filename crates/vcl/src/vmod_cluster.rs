//! vmod cluster: what the node's cluster says of the request, for VCL
//! that wants to see or steer what the daemon does by itself (a cache
//! miss asks the owner of its object first): `cluster.self()` (this
//! node's name), `cluster.owner()` (the node that owns the request's
//! object, by its digest as `directors.shard()` hashes it) and
//! `cluster.is_owner()`, and `cluster.backend()`: a backend that is the
//! owner of the request's object, so that VCL can send passes to the
//! owner too (as a self-routing Varnish cluster does), with the
//! program's default backend where this node owns it. Outside a cluster the names are unset and
//! `is_owner()` is true (a node alone owns everything); before
//! `vcl_hash` has made the digest (in `vcl_recv`), `owner()` is unset and
//! `is_owner()` true.

use crate::types::{scope, Type, Value};
use crate::vmod::{Ctx, FuncSpec, Vmod};

type R = Result<Value, crate::failure::VclFailure>;

fn name(v: Option<String>) -> Value {
    v.map_or(Value::Unset, |s| Value::Str(bytes::Bytes::from(s)))
}

fn self_name(c: &mut Ctx<'_>, _: &[Value]) -> R {
    Ok(name(c.host.cluster_self()))
}

fn owner(c: &mut Ctx<'_>, _: &[Value]) -> R {
    Ok(name(c.host.cluster_owner().map(|(owner, _)| owner)))
}

fn is_owner(c: &mut Ctx<'_>, _: &[Value]) -> R {
    Ok(Value::Bool(c.host.cluster_owner().is_none_or(|(_, me)| me)))
}

fn backend(_: &mut Ctx<'_>, _: &[Value]) -> R {
    Ok(Value::Backend(crate::types::BackendRef::Cluster))
}

static FUNCTIONS: &[FuncSpec] = &[
    FuncSpec {
        vmod: "cluster",
        name: "backend",
        ret: Type::Backend,
        params: &[],
        scope: scope::CLIENT_BACKEND,
        call: backend,
    },
    FuncSpec {
        vmod: "cluster",
        name: "self",
        ret: Type::String,
        params: &[],
        scope: scope::CLIENT_BACKEND,
        call: self_name,
    },
    FuncSpec {
        vmod: "cluster",
        name: "owner",
        ret: Type::String,
        params: &[],
        scope: scope::CLIENT_BACKEND,
        call: owner,
    },
    FuncSpec {
        vmod: "cluster",
        name: "is_owner",
        ret: Type::Bool,
        params: &[],
        scope: scope::CLIENT_BACKEND,
        call: is_owner,
    },
];

pub const VMOD: Vmod = Vmod {
    name: "cluster",
    functions: FUNCTIONS,
    classes: &[],
};
