//! The log tag table: every record type the daemon writes, declared once
//! with Varnish's name (vsl(7)) and a one-line description. The enum, the
//! name lookup and `lacquer log --list-tags` all come from this table.

macro_rules! tag_table {
    (@masked masked) => { true };
    (@masked) => { false };
    ($( $name:ident = $code:literal $(, $masked:ident)?, $doc:literal; )*) => {
        /// A log record's type.
        #[allow(non_camel_case_types)]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        pub enum Tag { $( $name = $code, )* }

        /// Every tag, in table order.
        pub static TAGS: &[Tag] = &[ $( Tag::$name, )* ];

        impl Tag {
            /// The tag's name as Varnish spells it.
            pub fn name(self) -> &'static str {
                match self { $( Tag::$name => stringify!($name), )* }
            }

            /// What the record carries.
            pub fn doc(self) -> &'static str {
                match self { $( Tag::$name => $doc, )* }
            }

            /// Whether Varnish leaves the tag out of the log by default
            /// (`vsl_mask`): marked `masked` in the table.
            pub fn masked_by_default(self) -> bool {
                match self { $( Tag::$name => tag_table!(@masked $($masked)?), )* }
            }

            /// The tag with this wire code.
            pub fn from_code(code: u8) -> Option<Tag> {
                match code { $( $code => Some(Tag::$name), )* _ => None }
            }
        }
    };
}

tag_table! {
    Begin = 1, "First record of a transaction: type (sess, req, bereq), parent vxid, reason.";
    End = 2, "Last record of a transaction.";
    Link = 3, "A child transaction: type, vxid, reason.";
    SessOpen = 4, "Client connection opened: remote address and port, listener, local address and port, time, descriptor.";
    SessClose = 5, "Client connection closed: reason and duration.";
    SessError = 6, "A client connection could not be accepted.";
    ReqStart = 7, "Client request start: client address, port and listener.";
    ReqMethod = 8, "Client request method.";
    ReqURL = 9, "Client request URL.";
    ReqProtocol = 10, "Client request protocol.";
    ReqHeader = 11, "Client request header, as `Name: value`.";
    ReqUnset = 12, "Client request header removed.";
    ReqAcct = 13, "Client byte counts: header, body and total received; header, body and total sent.";
    RespProtocol = 14, "Client response protocol.";
    RespStatus = 15, "Client response status.";
    RespReason = 16, "Client response reason.";
    RespHeader = 17, "Client response header, as `Name: value`.";
    RespUnset = 18, "Client response header removed.";
    BereqMethod = 19, "Backend request method.";
    BereqURL = 20, "Backend request URL.";
    BereqProtocol = 21, "Backend request protocol.";
    BereqHeader = 22, "Backend request header, as `Name: value`.";
    BereqUnset = 23, "Backend request header removed.";
    BereqAcct = 24, "Backend byte counts: header, body and total sent; header, body and total received.";
    BerespProtocol = 25, "Backend response protocol.";
    BerespStatus = 26, "Backend response status.";
    BerespReason = 27, "Backend response reason.";
    BerespHeader = 28, "Backend response header, as `Name: value`.";
    BerespUnset = 29, "Backend response header removed.";
    ObjProtocol = 30, masked, "Object protocol.";
    ObjStatus = 31, masked, "Object status.";
    ObjReason = 32, masked, "Object reason.";
    ObjHeader = 33, masked, "Object header.";
    ObjUnset = 34, "Object header removed.";
    VCL_call = 35, "VCL method called.";
    VCL_return = 36, "What the VCL method returned.";
    VCL_Log = 37, "A std.log() message.";
    VCL_Error = 38, "A VCL execution error.";
    VCL_acl = 39, "An ACL check: MATCH or NO_MATCH, the ACL, the address.";
    VCL_use = 40, "The VCL program the transaction runs.";
    VCL_trace = 41, masked, "VCL trace data.";
    Timestamp = 42, "Timing: label, absolute time, time since the start of the transaction, time since the last timestamp.";
    TTL = 43, "TTL, grace and keep set on an object: source, ttl, grace, keep, reference time, [age, date, expires, max-age,] cacheable or uncacheable.";
    Hit = 44, "Object found in cache: its vxid, remaining ttl, grace, keep.";
    HitMiss = 45, "Hit-for-miss object found: its vxid, remaining ttl.";
    HitPass = 46, "Hit-for-pass object found: its vxid, remaining ttl.";
    Hash = 47, masked, "A value added to the lookup hash.";
    Storage = 48, "Where the object is stored: storage type and name.";
    Length = 49, "Size of the object body.";
    Filters = 50, "Body filters applied.";
    Fetch_Body = 51, "How the backend body is read: mode number, mode name, stream or -.";
    Backend = 52, "Backend selected.";
    BackendOpen = 53, "Backend connection opened: descriptor, backend, remote address and port, local address and port, connect or reuse.";
    BackendClose = 54, "Backend connection closed or recycled: descriptor, backend, close or recycle, reason.";
    BackendReuse = 55, "Backend connection put up for reuse.";
    Backend_health = 56, "A backend health probe result.";
    FetchError = 57, "Why a backend fetch failed.";
    Error = 58, "Error messages.";
    Notice = 59, "Informational messages about request handling.";
    Debug = 60, masked, "Debug messages.";
    LostHeader = 61, "A header that did not fit.";
    BogoHeader = 62, "The start of a header that could not be parsed.";
    HttpGarbage = 63, "An unparseable HTTP request.";
    PipeAcct = 64, "Pipe byte counts: client request headers, backend request headers, piped from client, piped to client.";
    ESI_xmlerror = 65, "An ESI parser error or warning.";
    Gzip = 66, "Gzip or gunzip work done on a body.";
    ExpBan = 67, "Object removed by a ban.";
    ExpKill = 68, masked, "Object expiry event.";
    CLI = 69, "Management interface traffic.";
    Proxy = 70, "PROXY protocol information.";
    VSL = 71, "Log reader warnings and errors.";
    ProxyGarbage = 72, "A PROXY protocol header that could not be read.";
    Cluster = 73, "A change of the cluster's membership as this node sees it: a node, its run, its new state and addresses (Lacquer only).";
}

impl Tag {
    /// The tag with this name, ignoring case as Varnish's tools do.
    pub fn by_name(name: &str) -> Option<Tag> {
        TAGS.iter()
            .copied()
            .find(|t| t.name().eq_ignore_ascii_case(name))
    }

    /// The tags a name matches: an exact name, or a glob with `*` at the
    /// start or the end (`Req*`, `*Error`), as vsl-query(7) allows.
    pub fn matching(pattern: &str) -> Vec<Tag> {
        TAGS.iter()
            .copied()
            .filter(|t| tag_glob(pattern, t.name()))
            .collect()
    }
}

fn tag_glob(pattern: &str, name: &str) -> bool {
    let p = pattern.to_ascii_lowercase();
    let n = name.to_ascii_lowercase();
    match (p.strip_prefix('*'), p.strip_suffix('*')) {
        _ if p == "*" => true,
        (Some(rest), _) => n.ends_with(rest),
        (None, Some(rest)) => n.starts_with(rest),
        (None, None) => n == p,
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn varnish_masks_eight_tags_by_default() {
        let masked: Vec<&str> = TAGS
            .iter()
            .filter(|t| t.masked_by_default())
            .map(|t| t.name())
            .collect();
        let varnish = [
            "ObjProtocol",
            "ObjStatus",
            "ObjReason",
            "ObjHeader",
            "VCL_trace",
            "Hash",
            "Debug",
            "ExpKill",
        ];
        assert_eq!(masked, varnish);
    }

    use super::*;

    #[test]
    fn codes_round_trip() {
        for &t in TAGS {
            assert_eq!(Tag::from_code(t as u8), Some(t));
            assert_eq!(Tag::by_name(t.name()), Some(t));
        }
        assert_eq!(Tag::from_code(0), None);
    }

    #[test]
    fn globs() {
        let errors = Tag::matching("*Error");
        assert!(errors.contains(&Tag::FetchError));
        assert!(errors.contains(&Tag::VCL_Error));
        assert!(errors.contains(&Tag::Error));
        assert!(!errors.contains(&Tag::ReqURL));
        let req = Tag::matching("Req*");
        assert!(req.contains(&Tag::ReqURL) && req.contains(&Tag::ReqAcct));
        assert!(!req.contains(&Tag::RespStatus));
        assert_eq!(Tag::matching("requrl"), vec![Tag::ReqURL]);
    }
}
