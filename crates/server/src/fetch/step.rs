//! The backend steps of one fetch (a cache fetch or a pass), as
//! vcl-step(7) draws the backend side: what each step carries, the steps
//! each may lead to, and their names in the log. `fetch::backend_steps`
//! runs them from `Fetch` to `Done`; each step is a function that names
//! the next.
//!
//! Two enums, because a connection is borrowed from the backend it was
//! opened to: [`Step`] is a fetch's course (the request made, the backend
//! tried, an error, a retry), [`OnConn`] the steps taken with a response
//! in hand, on its connection, inside `startfetch`. One table of
//! transitions ([`NEXT`]) covers both; a debug build checks every
//! transition against it, and `docs/architecture-notes.md` ("The backend
//! steps") draws it, kept in step by a test.

use crate::host::backend_host::{Bereq, Beresp};
use bytes::Bytes;
use lacquer_backend::{Conn, Timeouts};
use lacquer_http::{ResponseHead, Status};
use lacquer_vcl::Action;

/// Where a fetch is: the step it is about to run.
pub(crate) enum Step<D> {
    /// `vcl_backend_fetch` makes the request.
    Fetch,
    /// A backend picked (through directors), the request and its body
    /// sent, the response head read; then the steps on its connection.
    StartFetch,
    /// `vcl_backend_error` with this status and reason (`attempted`: an
    /// exchange was tried, and its end is logged).
    Error {
        status: Status,
        reason: Option<Bytes>,
        attempted: bool,
    },
    /// `return (retry)` with retries left: counted, then the request made
    /// again.
    Retry,
    /// The fetch's end, as its mode makes it.
    Done(D),
}

/// Which backend a response came from (its index in the program) and
/// when; whether another node of the cluster answered in its place.
#[derive(Clone, Copy)]
pub(crate) struct Came {
    pub backend: usize,
    pub at: f64,
    pub peer: bool,
}

/// A response head in hand, on the connection it came on.
pub(crate) struct Got<'b> {
    pub conn: Conn<'b>,
    pub resp: ResponseHead,
    pub came: Came,
    pub t: Timeouts,
}

/// A step taken with a response in hand. One lives on a fetch's stack
/// and moves a step at a time: its size costs less than boxing the
/// response would, an allocation per fetch.
#[allow(clippy::large_enum_variant)]
pub(crate) enum OnConn<'b, D> {
    /// A 304 for the stale object a conditional fetch revalidates:
    /// `vcl_backend_refresh` decides what it makes of it.
    CondFetch(Got<'b>),
    /// `vcl_backend_response`.
    Response(Got<'b>),
    /// The response taken (`deliver`, or `pass` in `action`): its body
    /// stored or streamed, as the mode does.
    Body {
        got: Got<'b>,
        beresp: Beresp,
        action: Action,
    },
    /// Done with the connection: the fetch goes on there.
    Then(Step<D>),
}

/// A step without what it carries: its name in the log and in [`NEXT`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Name {
    Fetch,
    StartFetch,
    CondFetch,
    Response,
    Body,
    Error,
    Retry,
    Done,
}

impl<D> Step<D> {
    pub(crate) fn name(&self) -> Name {
        match self {
            Step::Fetch => Name::Fetch,
            Step::StartFetch => Name::StartFetch,
            Step::Error { .. } => Name::Error,
            Step::Retry => Name::Retry,
            Step::Done(_) => Name::Done,
        }
    }
}

impl<D> OnConn<'_, D> {
    pub(crate) fn name(&self) -> Name {
        match self {
            OnConn::CondFetch(_) => Name::CondFetch,
            OnConn::Response(_) => Name::Response,
            OnConn::Body { .. } => Name::Body,
            OnConn::Then(step) => step.name(),
        }
    }
}

impl Name {
    /// The step's name as the log writes it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Name::Fetch => "fetch",
            Name::StartFetch => "startfetch",
            Name::CondFetch => "condfetch",
            Name::Response => "response",
            Name::Body => "fetchbody",
            Name::Error => "error",
            Name::Retry => "retry",
            Name::Done => "done",
        }
    }

    /// Whether a step may lead to `next`.
    pub(crate) fn may_lead_to(self, next: Name) -> bool {
        NEXT.iter()
            .any(|(from, to)| *from == self && to.contains(&next))
    }
}

/// Logs that a step starts, under `debug=+req_state` (the caller checks):
/// the backend side's counterpart of the client steps' records
/// (varnishd logs only those).
pub(crate) fn log_start(bereq: &mut Bereq, name: Name) {
    bereq.log.fmt(
        lacquer_shm::Tag::Debug,
        format_args!(
            "vxid {} STP_Fetch Step {}",
            bereq.xid | 1 << 31,
            name.as_str()
        ),
    );
}

/// Each step and the steps it may lead to. A fetch starts at `Fetch` and
/// ends at `Done`.
pub(crate) const NEXT: &[(Name, &[Name])] = {
    use Name::*;
    &[
        (Fetch, &[StartFetch, Error, Done]),
        (StartFetch, &[CondFetch, Response, Error, Done]),
        (CondFetch, &[Response, Retry, Error, Done]),
        (Response, &[Body, Retry, Error, Done]),
        (Body, &[Error, Done]),
        (Error, &[Retry, Done]),
        (Retry, &[Fetch]),
        (Done, &[]),
    ]
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_drawing_of_the_backend_steps_is_the_table() {
        let table: Vec<(String, Vec<String>)> = NEXT
            .iter()
            .filter(|(_, to)| !to.is_empty())
            .map(|(from, to)| {
                (
                    from.as_str().to_string(),
                    to.iter().map(|n| n.as_str().to_string()).collect(),
                )
            })
            .collect();
        assert_eq!(crate::client::step::tests::drawn("backend-steps"), table);
    }

    #[test]
    fn every_backend_step_is_reached_and_leads_on_to_the_end() {
        let mut seen = vec![Name::Fetch];
        let mut i = 0;
        while i < seen.len() {
            for (f, to) in NEXT {
                if *f == seen[i] {
                    for n in *to {
                        if !seen.contains(n) {
                            seen.push(*n);
                        }
                    }
                }
            }
            i += 1;
        }
        for (n, to) in NEXT {
            assert!(seen.contains(n), "{n:?} is never reached");
            assert_eq!(to.is_empty(), *n == Name::Done, "{n:?}");
        }
    }
}
