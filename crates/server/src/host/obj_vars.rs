//! The `obj.*` variables of VCL, from an object (or none: a pass in
//! `vcl_deliver`); `obj_stale.*` in `vcl_backend_refresh` reads the same
//! of the object being revalidated.

use crate::host::resp::obj_reason;
use lacquer_cache::object::{ObjKind, Object};
use lacquer_vcl::{Value, Var};

/// An `obj.*` variable (or, with the same meaning, `obj_stale.*`) of an
/// object, or of none (a pass in `vcl_deliver`).
pub(crate) fn obj_var(obj: Option<&Object>, var: Var) -> Value {
    let now = lacquer_core::time::now;
    match var {
        Var::ObjAge => Value::Duration(obj.map_or(0.0, |o| now() - o.timers().t_origin)),
        Var::ObjCanEsi => Value::Bool(obj.is_some_and(|o| o.esi_expected())),
        Var::ObjGrace => Value::Duration(obj.map_or(0.0, |o| o.timers().grace)),
        Var::ObjHits => Value::Int(obj.map_or(0, |o| o.hits() as i64)),
        Var::ObjKeep => Value::Duration(obj.map_or(0.0, |o| o.timers().keep)),
        Var::ObjProto => Value::str("HTTP/1.1"),
        Var::ObjReason => obj.map_or(Value::Unset, |o| Value::Str(obj_reason(o))),
        Var::ObjStatus => Value::Int(obj.map_or(0, |o| i64::from(o.status()))),
        Var::ObjStorage => Value::Stevedore(
            format!(
                "storage.{}",
                obj.and_then(|o| o.store_name()).unwrap_or("Transient")
            )
            .into(),
        ),
        Var::ObjTime => Value::Time(obj.map_or_else(now, |o| o.timers().t_origin)),
        Var::ObjTtl => Value::Duration(obj.map_or(0.0, |o| o.ttl_left(now()))),
        // Without an object in vcl_deliver, the response is a pass
        // streamed straight through: uncacheable.
        Var::ObjUncacheable => {
            Value::Bool(obj.is_none_or(|o| o.kind() != ObjKind::Normal || o.key_is_unset()))
        }
        _ => Value::Unset,
    }
}
