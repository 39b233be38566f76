//! How a response goes out, decided one way for an object delivered from
//! the cache (a hit or a miss) and for a passed response relayed as it
//! comes: whether the client's own conditions make it a 304, whether a
//! body follows the head, how that body is framed, whether its ETag is
//! weakened, and how the connection goes on. Pure functions of the
//! request, the response's status and validators, and the length of the
//! body as it goes out; each caller applies what they decide to its head
//! (the stored head's bytes, or a passed response's fields) and sends.

use crate::client::conditional::{not_modified, Validators};
use crate::host::req::{Outcome, Req};
use crate::transport::wire::WireBody;
use lacquer_core::close::CloseReason;
use lacquer_http::{Headers, Version};

/// What the request asks of its response.
#[derive(Clone, Copy)]
pub(crate) struct Asked<'r> {
    /// The request's fields, whose conditions a 200 is judged by; None
    /// for an ESI include, whose page's conditions are not its own.
    pub conditions: Option<&'r Headers>,
    pub is_get: bool,
    pub is_head: bool,
    pub http10: bool,
    /// The connection may be kept once the response is out.
    pub keep: bool,
}

impl<'r> Asked<'r> {
    /// What `req` asks; `include` for an ESI include's request.
    pub fn of(req: &'r Req, keep: bool, include: bool) -> Self {
        Asked {
            conditions: (!include).then_some(&req.head.headers),
            is_get: req.head.method_is("GET"),
            is_head: req.is_head(),
            http10: req.head.version == Version::Http10,
            keep,
        }
    }
}

/// The status a response goes out with, and whether a body follows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Answer {
    pub status: u16,
    /// The client's own conditions hold: a 304 in place of the 200.
    pub not_modified: bool,
    /// No body follows the head (1xx, 204, 304), whatever it says of one.
    pub bodyless: bool,
}

impl Answer {
    /// Whether the ETag the head carries is weakened: the body goes out
    /// other than stored or sent (inflated, includes expanded, decoded,
    /// compressed), and there is one.
    pub fn weakens_etag(&self, transformed: bool) -> bool {
        transformed && !self.bodyless
    }
}

/// The answer to `ask` of a response with `status`: a GET's or HEAD's 200
/// whose `validators` meet the request's conditions (judged at `now`) is a
/// 304. The validators are looked at only when there are conditions.
pub(crate) fn answer(
    ask: &Asked<'_>,
    status: u16,
    validators: impl FnOnce() -> Validators,
    now: f64,
) -> Answer {
    let not_modified = status == 200
        && (ask.is_get || ask.is_head)
        && ask
            .conditions
            .is_some_and(|fields| not_modified(fields, validators, now));
    let status = if not_modified { 304 } else { status };
    Answer {
        status,
        not_modified,
        bodyless: status == 204 || status == 304 || status < 200,
    }
}

/// How the body after the head is delimited, and how the connection goes
/// on once it is out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Framed {
    pub wire: WireBody,
    pub keep: bool,
    pub http10: bool,
    /// Whether body bytes follow the head (none for a HEAD).
    pub sends_body: bool,
}

impl Framed {
    /// How the connection goes on once the response is out.
    pub fn outcome(&self) -> Outcome {
        match (self.keep, self.wire) {
            (true, _) => Outcome::KeepAlive,
            (false, WireBody::Close) => Outcome::Close(CloseReason::TxEof),
            (false, _) if self.http10 => Outcome::Close(CloseReason::ReqHttp10),
            _ => Outcome::Close(CloseReason::ReqClose),
        }
    }
}

/// The framing of a response to `ask` whose body, as it goes out, is
/// `length` bytes (None: not known before it ends). A body of unknown
/// length is chunked, or delimited by the close for an HTTP/1.0 client;
/// a HEAD's head says what it says of a length it does not know.
pub(crate) fn frame(ask: &Asked<'_>, bodyless: bool, length: Option<u64>) -> Framed {
    let wire = match length {
        _ if bodyless => WireBody::Bodyless,
        Some(n) => WireBody::Length(n),
        None if ask.is_head => WireBody::HeadUnknown,
        None if ask.http10 => WireBody::Close,
        None => WireBody::Chunked,
    };
    Framed {
        wire,
        keep: ask.keep && wire != WireBody::Close,
        http10: ask.http10,
        sends_body: !bodyless && !ask.is_head,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn fields(lines: &[(&str, &str)]) -> Headers {
        let mut h = Headers::default();
        for (name, value) in lines {
            h.append(
                Bytes::copy_from_slice(name.as_bytes()),
                Bytes::copy_from_slice(value.as_bytes()),
            );
        }
        h
    }

    fn ask(conditions: Option<&Headers>) -> Asked<'_> {
        Asked {
            conditions,
            is_get: true,
            is_head: false,
            http10: false,
            keep: true,
        }
    }

    fn etag(v: &'static str) -> impl FnOnce() -> Validators {
        move || Validators {
            etag: Some(Bytes::from_static(v.as_bytes())),
            last_modified: None,
        }
    }

    #[test]
    fn a_200_whose_validators_meet_the_conditions_is_a_bodyless_304() {
        let h = fields(&[("If-None-Match", "\"v1\"")]);
        let a = answer(&ask(Some(&h)), 200, etag("\"v1\""), 0.0);
        assert_eq!(
            a,
            Answer {
                status: 304,
                not_modified: true,
                bodyless: true
            }
        );
        assert!(!a.weakens_etag(true));
        let other = answer(&ask(Some(&h)), 200, etag("\"v2\""), 0.0);
        assert_eq!((other.status, other.bodyless), (200, false));
        assert!(other.weakens_etag(true) && !other.weakens_etag(false));
    }

    #[test]
    fn conditions_hold_only_for_a_get_or_head_200_of_the_client_itself() {
        let h = fields(&[("If-None-Match", "*")]);
        // Another status, another method, an include: never a 304, and
        // the validators are not even looked at.
        let never = || -> Validators { panic!("validators looked at") };
        assert_eq!(answer(&ask(Some(&h)), 404, never, 0.0).status, 404);
        let post = Asked {
            is_get: false,
            ..ask(Some(&h))
        };
        assert_eq!(answer(&post, 200, never, 0.0).status, 200);
        assert_eq!(answer(&ask(None), 200, never, 0.0).status, 200);
        let head = Asked {
            is_get: false,
            is_head: true,
            ..ask(Some(&h))
        };
        assert_eq!(answer(&head, 200, etag("\"x\""), 0.0).status, 304);
    }

    #[test]
    fn statuses_without_a_body() {
        let a = ask(None);
        let none = || -> Validators { unreachable!() };
        for (status, bodyless) in [
            (100, true),
            (200, false),
            (204, true),
            (304, true),
            (404, false),
        ] {
            assert_eq!(answer(&a, status, none, 0.0).bodyless, bodyless, "{status}");
        }
    }

    #[test]
    fn framing_follows_the_length_the_method_and_the_version() {
        let get = ask(None);
        let head = Asked {
            is_head: true,
            is_get: false,
            ..get
        };
        let old = Asked {
            http10: true,
            ..get
        };
        let cases = [
            (get, false, Some(5), WireBody::Length(5), true, true),
            (get, false, None, WireBody::Chunked, true, true),
            (get, true, Some(5), WireBody::Bodyless, true, false),
            (head, false, Some(5), WireBody::Length(5), true, false),
            (head, false, None, WireBody::HeadUnknown, true, false),
            (old, false, None, WireBody::Close, false, true),
            (old, false, Some(0), WireBody::Length(0), true, true),
        ];
        for (ask, bodyless, length, wire, keep, sends) in cases {
            let f = frame(&ask, bodyless, length);
            assert_eq!((f.wire, f.keep, f.sends_body), (wire, keep, sends));
        }
    }

    #[test]
    fn the_connection_closes_for_the_reason_that_ends_it() {
        let get = ask(None);
        let closing = Asked { keep: false, ..get };
        let old = Asked {
            http10: true,
            keep: false,
            ..get
        };
        assert_eq!(frame(&get, false, Some(1)).outcome(), Outcome::KeepAlive);
        assert_eq!(
            frame(&closing, false, Some(1)).outcome(),
            Outcome::Close(CloseReason::ReqClose)
        );
        assert_eq!(
            frame(&old, false, Some(1)).outcome(),
            Outcome::Close(CloseReason::ReqHttp10)
        );
        assert_eq!(
            frame(&old, false, None).outcome(),
            Outcome::Close(CloseReason::TxEof)
        );
    }
}
