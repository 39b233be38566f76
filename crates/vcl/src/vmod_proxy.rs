//! vmod proxy: what the PROXY version 2 header of the client connection
//! said, with vmod proxy's interface — the ALPN and authority fields, and
//! from the SSL field whether the client spoke TLS, its certificate, the
//! verify result, version, cipher and certificate algorithms. Without a
//! header (or a field), strings are unset and booleans false.

use crate::types::Value;
use crate::vmod::{Ctx, Vmod};

type R = Result<Value, crate::failure::VclFailure>;

const ALPN: u8 = 0x01;
const AUTHORITY: u8 = 0x02;
const SSL: u8 = 0x20;
const SSL_VERSION: u8 = 0x21;
const SSL_CN: u8 = 0x22;
const SSL_CIPHER: u8 = 0x23;
const SSL_SIG_ALG: u8 = 0x24;
const SSL_KEY_ALG: u8 = 0x25;

/// The SSL field's client flags.
const CLIENT_SSL: u8 = 0x01;
const CLIENT_CERT_CONN: u8 = 0x02;
const CLIENT_CERT_SESS: u8 = 0x04;

fn field(c: &Ctx<'_>, kind: u8, sub: Option<u8>) -> Value {
    match c.host.proxy_field(kind, sub) {
        Some(v) => Value::Str(bytes::Bytes::from(v)),
        None => Value::Unset,
    }
}

fn alpn(c: &mut Ctx<'_>, _: &[Value]) -> R {
    Ok(field(c, ALPN, None))
}

fn authority(c: &mut Ctx<'_>, _: &[Value]) -> R {
    Ok(field(c, AUTHORITY, None))
}

fn flag(c: &Ctx<'_>, bit: u8) -> Value {
    Value::Bool(
        c.host
            .proxy_ssl()
            .is_some_and(|(client, _)| client & bit != 0),
    )
}

fn is_ssl(c: &mut Ctx<'_>, _: &[Value]) -> R {
    Ok(flag(c, CLIENT_SSL))
}

fn client_has_cert_sess(c: &mut Ctx<'_>, _: &[Value]) -> R {
    Ok(flag(c, CLIENT_CERT_SESS))
}

fn client_has_cert_conn(c: &mut Ctx<'_>, _: &[Value]) -> R {
    Ok(flag(c, CLIENT_CERT_CONN))
}

fn ssl_verify_result(c: &mut Ctx<'_>, _: &[Value]) -> R {
    // 0 is X509_V_OK: verified, or no certificate to verify.
    Ok(Value::Int(
        c.host.proxy_ssl().map_or(0, |(_, v)| i64::from(v)),
    ))
}

fn ssl_version(c: &mut Ctx<'_>, _: &[Value]) -> R {
    Ok(field(c, SSL, Some(SSL_VERSION)))
}

fn client_cert_cn(c: &mut Ctx<'_>, _: &[Value]) -> R {
    Ok(field(c, SSL, Some(SSL_CN)))
}

fn ssl_cipher(c: &mut Ctx<'_>, _: &[Value]) -> R {
    Ok(field(c, SSL, Some(SSL_CIPHER)))
}

fn cert_sign(c: &mut Ctx<'_>, _: &[Value]) -> R {
    Ok(field(c, SSL, Some(SSL_SIG_ALG)))
}

fn cert_key(c: &mut Ctx<'_>, _: &[Value]) -> R {
    Ok(field(c, SSL, Some(SSL_KEY_ALG)))
}

crate::vmod::argless_functions! {
    "proxy";
    alpn: String,
    authority: String,
    is_ssl: Bool,
    client_has_cert_sess: Bool,
    client_has_cert_conn: Bool,
    ssl_verify_result: Int,
    ssl_version: String,
    client_cert_cn: String,
    ssl_cipher: String,
    cert_sign: String,
    cert_key: String,
}

pub const VMOD: Vmod = Vmod {
    name: "proxy",
    functions: FUNCTIONS,
    classes: &[],
};
