//! The VCL variable table of vcl-var(7): every variable declared once
//! with its type and the methods that may read, set and unset it. Header
//! variables (`req.http.*` …), `storage.<name>.*` and `param.<name>` are
//! families resolved by prefix.

use crate::types::scope::*;
use crate::types::{HttpKind, Type};

/// Which VCL versions a variable exists in, or may be set in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Versions {
    All,
    /// Only in `vcl 4.0`.
    V40,
    /// Only in `vcl 4.1`.
    V41,
    /// Everywhere, but writable only in `vcl 4.0`.
    WritableIn40,
}

/// The static description of a variable.
#[derive(Debug)]
pub struct VarSpec {
    pub var: Var,
    pub name: &'static str,
    pub ty: Type,
    pub read: u16,
    pub write: u16,
    pub unset: u16,
    pub versions: Versions,
}

macro_rules! var_table {
    ($( $id:ident = $name:literal : $ty:ident, r $r:expr, w $w:expr, u $u:expr, $ver:ident; )*) => {
        /// One identifier per variable.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Var { $( $id, )* }

        /// Every variable, in table order.
        pub static VARS: &[VarSpec] = &[ $( VarSpec {
            var: Var::$id,
            name: $name,
            ty: Type::$ty,
            read: $r,
            write: $w,
            unset: $u,
            versions: Versions::$ver,
        }, )* ];
    };
}

var_table! {
    ClientIdentity = "client.identity": String, r CLIENT_BACKEND, w CLIENT, u NONE, All;
    ClientIp = "client.ip": Ip, r CLIENT_BACKEND, w NONE, u NONE, All;
    ServerHostname = "server.hostname": String, r ALL, w NONE, u NONE, All;
    ServerIdentity = "server.identity": String, r ALL, w NONE, u NONE, All;
    ServerIp = "server.ip": Ip, r CLIENT_BACKEND, w NONE, u NONE, All;
    RemoteIp = "remote.ip": Ip, r CLIENT_BACKEND, w NONE, u NONE, All;
    LocalIp = "local.ip": Ip, r CLIENT_BACKEND, w NONE, u NONE, All;
    LocalEndpoint = "local.endpoint": String, r CLIENT_BACKEND, w NONE, u NONE, V41;
    LocalSocket = "local.socket": String, r CLIENT_BACKEND, w NONE, u NONE, V41;
    Req = "req": Http, r CLIENT, w NONE, u NONE, All;
    ReqBackendHint = "req.backend_hint": Backend, r CLIENT, w CLIENT, u NONE, All;
    ReqCanGzip = "req.can_gzip": Bool, r CLIENT, w NONE, u NONE, All;
    ReqEsi = "req.esi": Bool, r CLIENT, w CLIENT, u NONE, V40;
    ReqEsiLevel = "req.esi_level": Int, r CLIENT, w NONE, u NONE, All;
    ReqGrace = "req.grace": Duration, r CLIENT, w CLIENT, u CLIENT, All;
    ReqHash = "req.hash": Blob, r REQ_HASH, w NONE, u NONE, All;
    ReqHashAlwaysMiss = "req.hash_always_miss": Bool, r CLIENT, w CLIENT, u NONE, All;
    ReqHashIgnoreBusy = "req.hash_ignore_busy": Bool, r CLIENT, w CLIENT, u NONE, All;
    ReqHashIgnoreVary = "req.hash_ignore_vary": Bool, r CLIENT, w CLIENT, u NONE, All;
    ReqIsHitmiss = "req.is_hitmiss": Bool, r CLIENT, w NONE, u NONE, All;
    ReqIsHitpass = "req.is_hitpass": Bool, r CLIENT, w NONE, u NONE, All;
    ReqMethod = "req.method": String, r CLIENT, w CLIENT, u NONE, All;
    ReqProto = "req.proto": String, r CLIENT, w CLIENT, u NONE, WritableIn40;
    ReqRestarts = "req.restarts": Int, r CLIENT, w NONE, u NONE, All;
    ReqStorage = "req.storage": Stevedore, r CLIENT, w CLIENT, u NONE, All;
    ReqTime = "req.time": Time, r CLIENT, w NONE, u NONE, All;
    ReqTransport = "req.transport": String, r CLIENT, w NONE, u NONE, All;
    ReqTtl = "req.ttl": Duration, r CLIENT, w CLIENT, u CLIENT, All;
    ReqMaxAge = "req.max_age": Duration, r CLIENT, w CLIENT, u CLIENT, All;
    ReqUrl = "req.url": String, r CLIENT, w CLIENT, u NONE, All;
    ReqXid = "req.xid": String, r CLIENT, w NONE, u NONE, All;
    ReqTopMethod = "req_top.method": String, r CLIENT, w NONE, u NONE, All;
    ReqTopProto = "req_top.proto": String, r CLIENT, w NONE, u NONE, All;
    ReqTopTime = "req_top.time": Time, r CLIENT, w NONE, u NONE, All;
    ReqTopUrl = "req_top.url": String, r CLIENT, w NONE, u NONE, All;
    Bereq = "bereq": Http, r BACKEND, w NONE, u NONE, All;
    BereqBackend = "bereq.backend": Backend, r PIPE_BACKEND, w PIPE_BACKEND, u NONE, All;
    BereqBetweenBytesTimeout = "bereq.between_bytes_timeout": Duration, r BACKEND, w BACKEND, u NONE, All;
    BereqBody = "bereq.body": Body, r NONE, w NONE, u BE_FETCH, All;
    BereqConnectTimeout = "bereq.connect_timeout": Duration, r PIPE_BACKEND, w PIPE_BACKEND, u NONE, All;
    BereqFirstByteTimeout = "bereq.first_byte_timeout": Duration, r BACKEND, w BACKEND, u NONE, All;
    BereqHash = "bereq.hash": Blob, r PIPE_BACKEND, w NONE, u NONE, All;
    BereqIsBgfetch = "bereq.is_bgfetch": Bool, r BACKEND, w NONE, u NONE, All;
    BereqIsHitmiss = "bereq.is_hitmiss": Bool, r BACKEND, w NONE, u NONE, All;
    BereqIsHitpass = "bereq.is_hitpass": Bool, r BACKEND, w NONE, u NONE, All;
    BereqMethod = "bereq.method": String, r PIPE_BACKEND, w PIPE_BACKEND, u NONE, All;
    BereqProto = "bereq.proto": String, r PIPE_BACKEND, w PIPE_BACKEND, u NONE, WritableIn40;
    BereqRetries = "bereq.retries": Int, r BACKEND, w NONE, u NONE, All;
    BereqRetryConnect = "bereq.retry_connect": Bool, r PIPE_BACKEND, w PIPE_BACKEND, u NONE, All;
    BereqTime = "bereq.time": Time, r PIPE_BACKEND, w NONE, u NONE, All;
    BereqUncacheable = "bereq.uncacheable": Bool, r BACKEND, w NONE, u NONE, All;
    BereqUrl = "bereq.url": String, r PIPE_BACKEND, w PIPE_BACKEND, u NONE, All;
    BereqXid = "bereq.xid": String, r PIPE_BACKEND, w NONE, u NONE, All;
    Beresp = "beresp": Http, r BERESP, w NONE, u NONE, All;
    BerespAge = "beresp.age": Duration, r BERESP, w NONE, u NONE, All;
    BerespBackend = "beresp.backend": Backend, r BERESP, w NONE, u NONE, All;
    BerespBackendIp = "beresp.backend.ip": Ip, r BE_RESPONSE, w NONE, u NONE, V40;
    BerespBackendName = "beresp.backend.name": String, r BERESP, w NONE, u NONE, All;
    BerespBody = "beresp.body": Body, r NONE, w BE_ERROR, u NONE, All;
    BerespDoEsi = "beresp.do_esi": Bool, r BERESP, w BERESP, u NONE, All;
    BerespDoGunzip = "beresp.do_gunzip": Bool, r BERESP, w BERESP, u NONE, All;
    BerespDoGzip = "beresp.do_gzip": Bool, r BERESP, w BERESP, u NONE, All;
    BerespDoStream = "beresp.do_stream": Bool, r BERESP, w BERESP, u NONE, All;
    BerespFilters = "beresp.filters": String, r BE_RESPONSE, w BE_RESPONSE, u NONE, All;
    BerespGrace = "beresp.grace": Duration, r BERESP, w BERESP, u NONE, All;
    BerespKeep = "beresp.keep": Duration, r BERESP, w BERESP, u NONE, All;
    BerespProto = "beresp.proto": String, r BERESP, w BERESP, u NONE, WritableIn40;
    BerespReason = "beresp.reason": String, r BERESP, w BERESP, u NONE, All;
    BerespStatus = "beresp.status": Int, r BERESP, w BERESP, u NONE, All;
    BerespStorage = "beresp.storage": Stevedore, r BERESP, w BERESP, u NONE, All;
    BerespStorageHint = "beresp.storage_hint": String, r BERESP, w BERESP, u NONE, V40;
    BerespTime = "beresp.time": Time, r BERESP, w NONE, u NONE, All;
    BerespTransitBuffer = "beresp.transit_buffer": Bytes, r BE_RESPONSE, w BE_RESPONSE, u NONE, All;
    BerespTtl = "beresp.ttl": Duration, r BERESP, w BERESP, u NONE, All;
    BerespUncacheable = "beresp.uncacheable": Bool, r BERESP, w BERESP, u NONE, All;
    BerespWas304 = "beresp.was_304": Bool, r BERESP, w NONE, u NONE, All;
    ObjAge = "obj.age": Duration, r HIT_DELIVER, w NONE, u NONE, All;
    ObjCanEsi = "obj.can_esi": Bool, r HIT_DELIVER, w NONE, u NONE, All;
    ObjGrace = "obj.grace": Duration, r HIT_DELIVER, w NONE, u NONE, All;
    ObjHits = "obj.hits": Int, r HIT_DELIVER, w NONE, u NONE, All;
    ObjKeep = "obj.keep": Duration, r HIT_DELIVER, w NONE, u NONE, All;
    ObjProto = "obj.proto": String, r HIT, w NONE, u NONE, All;
    ObjReason = "obj.reason": String, r HIT, w NONE, u NONE, All;
    ObjStatus = "obj.status": Int, r HIT, w NONE, u NONE, All;
    ObjStorage = "obj.storage": Stevedore, r HIT_DELIVER, w NONE, u NONE, All;
    ObjTime = "obj.time": Time, r HIT_DELIVER, w NONE, u NONE, All;
    ObjTtl = "obj.ttl": Duration, r HIT_DELIVER, w NONE, u NONE, All;
    ObjUncacheable = "obj.uncacheable": Bool, r DELIVER, w NONE, u NONE, All;
    ObjStale = "obj_stale": Http, r BE_REFRESH, w NONE, u NONE, All;
    ObjStaleAge = "obj_stale.age": Duration, r BE_REFRESH, w NONE, u NONE, All;
    ObjStaleCanEsi = "obj_stale.can_esi": Bool, r BE_REFRESH, w NONE, u NONE, All;
    ObjStaleGrace = "obj_stale.grace": Duration, r BE_REFRESH, w NONE, u NONE, All;
    ObjStaleHits = "obj_stale.hits": Int, r BE_REFRESH, w NONE, u NONE, All;
    ObjStaleIsValid = "obj_stale.is_valid": Bool, r BE_REFRESH, w NONE, u NONE, All;
    ObjStaleKeep = "obj_stale.keep": Duration, r BE_REFRESH, w NONE, u NONE, All;
    ObjStaleProto = "obj_stale.proto": String, r BE_REFRESH, w NONE, u NONE, All;
    ObjStaleReason = "obj_stale.reason": String, r BE_REFRESH, w NONE, u NONE, All;
    ObjStaleStatus = "obj_stale.status": Int, r BE_REFRESH, w NONE, u NONE, All;
    ObjStaleStorage = "obj_stale.storage": Stevedore, r BE_REFRESH, w NONE, u NONE, All;
    ObjStaleTime = "obj_stale.time": Time, r BE_REFRESH, w NONE, u NONE, All;
    ObjStaleTtl = "obj_stale.ttl": Duration, r BE_REFRESH, w NONE, u NONE, All;
    ObjStaleUncacheable = "obj_stale.uncacheable": Bool, r BE_REFRESH, w NONE, u NONE, All;
    Resp = "resp": Http, r DELIVER_SYNTH, w NONE, u NONE, All;
    RespBody = "resp.body": Body, r NONE, w SYNTH, u NONE, All;
    RespDoEsi = "resp.do_esi": Bool, r DELIVER_SYNTH, w DELIVER_SYNTH, u NONE, V41;
    RespFilters = "resp.filters": String, r DELIVER_SYNTH, w DELIVER_SYNTH, u NONE, All;
    RespIsStreaming = "resp.is_streaming": Bool, r DELIVER_SYNTH, w NONE, u NONE, All;
    RespProto = "resp.proto": String, r DELIVER_SYNTH, w DELIVER_SYNTH, u NONE, WritableIn40;
    RespReason = "resp.reason": String, r DELIVER_SYNTH, w DELIVER_SYNTH, u NONE, All;
    RespStatus = "resp.status": Int, r DELIVER_SYNTH, w DELIVER_SYNTH, u NONE, All;
    RespTime = "resp.time": Time, r DELIVER_SYNTH, w NONE, u NONE, All;
    Now = "now": Time, r ALL, w NONE, u NONE, All;
    SessIdleSendTimeout = "sess.idle_send_timeout": Duration, r CLIENT, w CLIENT, u NONE, All;
    SessSendTimeout = "sess.send_timeout": Duration, r CLIENT, w CLIENT, u NONE, All;
    SessTimeoutIdle = "sess.timeout_idle": Duration, r CLIENT, w CLIENT, u NONE, All;
    SessTimeoutLinger = "sess.timeout_linger": Duration, r CLIENT, w CLIENT, u NONE, All;
    SessXid = "sess.xid": String, r CLIENT_BACKEND, w NONE, u NONE, V41;
}

impl Var {
    pub fn spec(self) -> &'static VarSpec {
        &VARS[self as usize]
    }

    pub fn name(self) -> &'static str {
        self.spec().name
    }

    pub fn by_name(name: &str) -> Option<Var> {
        VARS.iter()
            .find(|v| v.name.eq_ignore_ascii_case(name))
            .map(|v| v.var)
    }
}

/// A header family: `req.http.` and its siblings.
pub struct HeaderFamily {
    pub kind: HttpKind,
    pub prefix: &'static str,
    pub read: u16,
    pub write: u16,
}

pub static HEADER_FAMILIES: &[HeaderFamily] = &[
    HeaderFamily {
        kind: HttpKind::Req,
        prefix: "req.http.",
        read: CLIENT,
        write: CLIENT,
    },
    HeaderFamily {
        kind: HttpKind::ReqTop,
        prefix: "req_top.http.",
        read: CLIENT,
        write: NONE,
    },
    HeaderFamily {
        kind: HttpKind::Bereq,
        prefix: "bereq.http.",
        read: PIPE_BACKEND,
        write: PIPE_BACKEND,
    },
    HeaderFamily {
        kind: HttpKind::Beresp,
        prefix: "beresp.http.",
        read: BERESP,
        write: BERESP,
    },
    HeaderFamily {
        kind: HttpKind::Obj,
        prefix: "obj.http.",
        read: HIT,
        write: NONE,
    },
    HeaderFamily {
        kind: HttpKind::ObjStale,
        prefix: "obj_stale.http.",
        read: BE_REFRESH,
        write: NONE,
    },
    HeaderFamily {
        kind: HttpKind::Resp,
        prefix: "resp.http.",
        read: DELIVER_SYNTH,
        write: DELIVER_SYNTH,
    },
];

/// Headers VCL may read but never set or unset: they frame the message.
pub const PROTECTED_HEADERS: &[&str] = &["content-length", "transfer-encoding"];

/// Finds the header family a name belongs to, with the header name.
pub fn header_family(name: &str) -> Option<(&'static HeaderFamily, &str)> {
    HEADER_FAMILIES.iter().find_map(|f| {
        let n = name.get(..f.prefix.len())?;
        n.eq_ignore_ascii_case(f.prefix)
            .then(|| (f, &name[f.prefix.len()..]))
    })
}

/// The fields of `storage.<name>.<field>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorageField {
    FreeSpace,
    UsedSpace,
    Happy,
}

impl StorageField {
    pub fn by_name(name: &str) -> Option<(StorageField, Type)> {
        match name {
            "free_space" => Some((StorageField::FreeSpace, Type::Bytes)),
            "used_space" => Some((StorageField::UsedSpace, Type::Bytes)),
            "happy" => Some((StorageField::Happy, Type::Bool)),
            _ => None,
        }
    }
}

/// Why a variable Varnish lets VCL set is refused when the program loads,
/// rather than set to no effect: Lacquer writes every status line as
/// HTTP/1.1.
pub fn not_settable_in_lacquer(var: Var) -> Option<&'static str> {
    match var {
        Var::BerespProto | Var::RespProto => {
            Some("responses are HTTP/1.1 (the protocol is not stored or sent as set)")
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_in_enum_order_and_names_are_unique() {
        for (i, spec) in VARS.iter().enumerate() {
            assert_eq!(spec.var as usize, i, "{}", spec.name);
            assert_eq!(Var::by_name(spec.name), Some(spec.var));
        }
        assert_eq!(Var::by_name("REQ.URL"), Some(Var::ReqUrl));
        let (f, h) = header_family("beresp.http.Cache-Control").unwrap();
        assert_eq!((f.kind, h), (HttpKind::Beresp, "Cache-Control"));
        assert!(header_family("beresp.ttl").is_none());
    }
}
