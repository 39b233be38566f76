//! Sans-IO HTTP/1: the header map, strict request parsing (the smuggling
//! defences live here), backend response parsing, body framing and the
//! chunked transfer coding; and HTTP/3's frames and QPACK (`h3`). Nothing
//! here touches a socket.

#![forbid(unsafe_code)]

pub mod chunked;
pub mod h3;
pub mod headers;
pub mod proxy;
pub mod request;
pub mod response;
pub mod status;

pub use headers::{ConnectionOptions, Header, Headers};
pub use request::{parse_request, RequestError, RequestHead, RequestLimits};
pub use response::{parse_response, ResponseError, ResponseHead, ResponseLimits};
pub use status::Status;

/// Header slots parsed without a heap allocation (`http_max_hdr`'s default).
pub(crate) const STACK_HEADERS: usize = 64;

/// The protocol version of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    Http10,
    Http11,
    /// A request that came as an HTTP/2 stream (its head is made into
    /// HTTP/1.1's shape to be parsed; this says where it came from).
    Http2,
    /// A request that came as an HTTP/3 request stream (as for HTTP/2).
    Http3,
}

impl Version {
    pub fn as_str(self) -> &'static str {
        match self {
            Version::Http10 => "HTTP/1.0",
            Version::Http11 => "HTTP/1.1",
            Version::Http2 => "HTTP/2.0",
            Version::Http3 => "HTTP/3.0",
        }
    }
}

/// How a message body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body at all.
    None,
    /// Exactly this many bytes.
    Length(u64),
    /// The chunked transfer coding.
    Chunked,
    /// Everything until the connection closes (responses only).
    UntilClose,
}

/// The standard reason phrase for a status code.
pub fn reason_phrase(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        101 => "Switching Protocols",
        102 => "Processing",
        103 => "Early Hints",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        203 => "Non-Authoritative Information",
        204 => "No Content",
        205 => "Reset Content",
        206 => "Partial Content",
        207 => "Multi-Status",
        208 => "Already Reported",
        226 => "IM Used",
        300 => "Multiple Choices",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        305 => "Use Proxy",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        402 => "Payment Required",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        407 => "Proxy Authentication Required",
        408 => "Request Timeout",
        409 => "Conflict",
        410 => "Gone",
        411 => "Length Required",
        412 => "Precondition Failed",
        413 => "Payload Too Large",
        414 => "URI Too Long",
        415 => "Unsupported Media Type",
        416 => "Range Not Satisfiable",
        417 => "Expectation Failed",
        421 => "Misdirected Request",
        422 => "Unprocessable Entity",
        423 => "Locked",
        424 => "Failed Dependency",
        425 => "Too Early",
        426 => "Upgrade Required",
        428 => "Precondition Required",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        451 => "Unavailable For Legal Reasons",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        506 => "Variant Also Negotiates",
        507 => "Insufficient Storage",
        508 => "Loop Detected",
        510 => "Not Extended",
        511 => "Network Authentication Required",
        _ => "Unknown HTTP Status",
    }
}

/// Parses a Content-Length value: digits only, no sign, no list.
pub fn parse_content_length(value: &[u8]) -> Option<u64> {
    if value.is_empty() || value.len() > 19 || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    // At most 2^63 - 1, as Varnish reads it (signed): anything larger is
    // no length at all.
    std::str::from_utf8(value)
        .ok()?
        .parse::<u64>()
        .ok()
        .filter(|n| *n <= i64::MAX as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_length_values() {
        assert_eq!(parse_content_length(b"0"), Some(0));
        assert_eq!(parse_content_length(b"1234"), Some(1234));
        assert_eq!(parse_content_length(b""), None);
        assert_eq!(parse_content_length(b"+1"), None);
        assert_eq!(parse_content_length(b"1,1"), None);
        assert_eq!(parse_content_length(b" 1"), None);
        assert_eq!(parse_content_length(b"99999999999999999999"), None);
        assert_eq!(
            parse_content_length(b"9223372036854775807"),
            Some(i64::MAX as u64)
        );
        assert_eq!(parse_content_length(b"9223372036854775808"), None);
    }
}
