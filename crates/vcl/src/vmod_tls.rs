//! vmod tls: what the TLS handshake of the client connection settled,
//! when Lacquer terminated it — whether there was one, the protocol
//! version, the cipher suite, the server name asked for (SNI) and the
//! ALPN protocol. Without TLS, strings are unset and `is_tls()` false.

use crate::types::scope::CLIENT_BACKEND;
use crate::types::{Type, Value};
use crate::vmod::{Ctx, FuncSpec, Vmod};

type R = Result<Value, String>;

fn text(v: Option<&str>) -> Value {
    v.map_or(Value::Unset, Value::str)
}

fn is_tls(c: &mut Ctx<'_>, _: &[Value]) -> R {
    Ok(Value::Bool(c.host.tls_session().is_some()))
}

fn version(c: &mut Ctx<'_>, _: &[Value]) -> R {
    Ok(text(c.host.tls_session().map(|t| t.version)))
}

fn cipher(c: &mut Ctx<'_>, _: &[Value]) -> R {
    Ok(text(c.host.tls_session().map(|t| t.cipher.as_str())))
}

fn authority(c: &mut Ctx<'_>, _: &[Value]) -> R {
    Ok(text(c.host.tls_session().and_then(|t| t.sni.as_deref())))
}

fn alpn(c: &mut Ctx<'_>, _: &[Value]) -> R {
    Ok(text(c.host.tls_session().and_then(|t| t.alpn.as_deref())))
}

macro_rules! functions {
    ($( $name:ident: $ret:ident ),* $(,)?) => {
        static FUNCTIONS: &[FuncSpec] = &[ $(
            FuncSpec {
                vmod: "tls",
                name: stringify!($name),
                ret: Type::$ret,
                params: &[],
                scope: CLIENT_BACKEND,
                call: $name,
            },
        )* ];
    };
}

functions! {
    is_tls: Bool,
    version: String,
    cipher: String,
    authority: String,
    alpn: String,
}

pub const VMOD: Vmod = Vmod {
    name: "tls",
    functions: FUNCTIONS,
    classes: &[],
};
