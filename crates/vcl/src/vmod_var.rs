//! vmod var, as varnish-modules has it: named variables of the task
//! (`var.set("k", v)`, `var.get("k")`, and typed `set_int`, `set_real`,
//! `set_duration`, `set_ip`, `set_backend` with their getters), and
//! `global_set`/`global_get` strings shared by every request. A client
//! request and its backend fetch each have their own task variables.

use crate::types::scope::{ALL, CLIENT_BACKEND};
use crate::types::{BackendRef, Type, Value};
use crate::vmod::{req, Ctx, FuncSpec, Vmod};
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

type R = Result<Value, crate::failure::VclFailure>;

/// The variables of one task, by name and type.
#[derive(Default)]
struct Vars(Vec<(Bytes, Value)>);

fn set_var(c: &mut Ctx<'_>, name: &Value, value: Value) {
    let name = Bytes::copy_from_slice(name.as_bytes());
    if let Some(vars) = c.host.task_privs().map(|p| p.get::<Vars>("var")) {
        match vars.0.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = value,
            None => vars.0.push((name, value)),
        }
    }
}

/// A variable's value if it is of the type asked for.
fn get_var(c: &mut Ctx<'_>, name: &Value, ty: fn(&Value) -> bool) -> Option<Value> {
    let name = name.as_bytes();
    c.host
        .task_privs()
        .map(|p| p.get::<Vars>("var"))
        .and_then(|vars| vars.0.iter().find(|(n, _)| **n == *name))
        .map(|(_, v)| v.clone())
        .filter(ty)
}

fn set(c: &mut Ctx<'_>, a: &[Value]) -> R {
    let value = match &a[1] {
        Value::Str(s) => Value::Str(s.clone()),
        _ => Value::Unset,
    };
    set_var(c, &a[0], value);
    Ok(Value::Unset)
}

fn get(c: &mut Ctx<'_>, a: &[Value]) -> R {
    Ok(get_var(c, &a[0], |v| matches!(v, Value::Str(_))).unwrap_or(Value::Unset))
}

fn set_int(c: &mut Ctx<'_>, a: &[Value]) -> R {
    set_var(c, &a[0], Value::Int(a[1].as_i64()));
    Ok(Value::Unset)
}

fn get_int(c: &mut Ctx<'_>, a: &[Value]) -> R {
    Ok(get_var(c, &a[0], |v| matches!(v, Value::Int(_))).unwrap_or(Value::Int(0)))
}

fn set_real(c: &mut Ctx<'_>, a: &[Value]) -> R {
    set_var(c, &a[0], Value::Real(a[1].as_f64()));
    Ok(Value::Unset)
}

fn get_real(c: &mut Ctx<'_>, a: &[Value]) -> R {
    Ok(get_var(c, &a[0], |v| matches!(v, Value::Real(_))).unwrap_or(Value::Real(0.0)))
}

fn set_duration(c: &mut Ctx<'_>, a: &[Value]) -> R {
    set_var(c, &a[0], Value::Duration(a[1].as_f64()));
    Ok(Value::Unset)
}

fn get_duration(c: &mut Ctx<'_>, a: &[Value]) -> R {
    Ok(get_var(c, &a[0], |v| matches!(v, Value::Duration(_))).unwrap_or(Value::Duration(0.0)))
}

fn set_ip(c: &mut Ctx<'_>, a: &[Value]) -> R {
    set_var(c, &a[0], a[1].clone());
    Ok(Value::Unset)
}

fn get_ip(c: &mut Ctx<'_>, a: &[Value]) -> R {
    Ok(get_var(c, &a[0], |v| matches!(v, Value::Ip(_))).unwrap_or(Value::Ip(None)))
}

fn set_backend(c: &mut Ctx<'_>, a: &[Value]) -> R {
    set_var(c, &a[0], a[1].clone());
    Ok(Value::Unset)
}

fn get_backend(c: &mut Ctx<'_>, a: &[Value]) -> R {
    Ok(get_var(c, &a[0], |v| matches!(v, Value::Backend(_)))
        .unwrap_or(Value::Backend(BackendRef::None)))
}

fn clear(c: &mut Ctx<'_>, _: &[Value]) -> R {
    if let Some(vars) = c.host.task_privs().map(|p| p.get::<Vars>("var")) {
        vars.0.clear();
    }
    Ok(Value::Unset)
}

/// The strings `global_set` keeps, for every request of every program.
fn globals() -> &'static Mutex<HashMap<Vec<u8>, Bytes>> {
    static GLOBALS: OnceLock<Mutex<HashMap<Vec<u8>, Bytes>>> = OnceLock::new();
    GLOBALS.get_or_init(Mutex::default)
}

fn global_set(_: &mut Ctx<'_>, a: &[Value]) -> R {
    let mut g = globals().lock().unwrap_or_else(|p| p.into_inner());
    match &a[1] {
        Value::Str(s) => g.insert(a[0].as_bytes().to_vec(), s.clone()),
        _ => g.remove(a[0].as_bytes()),
    };
    Ok(Value::Unset)
}

fn global_get(_: &mut Ctx<'_>, a: &[Value]) -> R {
    let g = globals().lock().unwrap_or_else(|p| p.into_inner());
    Ok(g.get(a[0].as_bytes())
        .map_or(Value::Unset, |v| Value::Str(v.clone())))
}

macro_rules! functions {
    ($( $name:ident ($($p:ident: $t:ident),*) -> $ret:ident, $scope:ident; )*) => {
        static FUNCTIONS: &[FuncSpec] = &[ $(
            FuncSpec {
                vmod: "var",
                name: stringify!($name),
                ret: Type::$ret,
                params: &[ $( req(stringify!($p), Type::$t), )* ],
                scope: $scope,
                call: $name,
            },
        )* ];
    };
}

functions! {
    set(name: String, string: String) -> Void, CLIENT_BACKEND;
    get(name: String) -> String, CLIENT_BACKEND;
    set_int(name: String, int: Int) -> Void, CLIENT_BACKEND;
    get_int(name: String) -> Int, CLIENT_BACKEND;
    set_real(name: String, real: Real) -> Void, CLIENT_BACKEND;
    get_real(name: String) -> Real, CLIENT_BACKEND;
    set_duration(name: String, duration: Duration) -> Void, CLIENT_BACKEND;
    get_duration(name: String) -> Duration, CLIENT_BACKEND;
    set_ip(name: String, ip: Ip) -> Void, CLIENT_BACKEND;
    get_ip(name: String) -> Ip, CLIENT_BACKEND;
    set_backend(name: String, backend: Backend) -> Void, CLIENT_BACKEND;
    get_backend(name: String) -> Backend, CLIENT_BACKEND;
    clear() -> Void, CLIENT_BACKEND;
    global_set(name: String, string: String) -> Void, ALL;
    global_get(name: String) -> String, ALL;
}

pub const VMOD: Vmod = Vmod {
    name: "var",
    functions: FUNCTIONS,
    classes: &[],
};
