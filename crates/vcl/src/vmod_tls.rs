//! vmod tls: what the TLS handshake of the client connection settled,
//! when Lacquer terminated it — whether there was one, the protocol
//! version, the cipher suite, the server name asked for (SNI) and the
//! ALPN protocol, and the client's certificate when `client-verify` asked
//! for one and it was verified. On the backend side (once there is a
//! response, as in `vcl_backend_response`) it is the backend
//! connection's handshake instead. Without TLS, strings are unset and
//! the booleans false.

use crate::types::Value;
use crate::vmod::{Ctx, Vmod};

type R = Result<Value, crate::failure::VclFailure>;

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

fn has_client_cert(c: &mut Ctx<'_>, _: &[Value]) -> R {
    Ok(Value::Bool(
        c.host.tls_session().is_some_and(|t| t.client_cert),
    ))
}

fn client_cert_cn(c: &mut Ctx<'_>, _: &[Value]) -> R {
    Ok(text(
        c.host
            .tls_session()
            .and_then(|t| t.client_cert_cn.as_deref()),
    ))
}

crate::vmod::argless_functions! {
    "tls";
    is_tls: Bool,
    version: String,
    cipher: String,
    authority: String,
    alpn: String,
    has_client_cert: Bool,
    client_cert_cn: String,
}

pub const VMOD: Vmod = Vmod {
    name: "tls",
    functions: FUNCTIONS,
    classes: &[],
};
