//! The client steps of one request, as vcl-step(7) draws them: what each
//! step carries, the steps each may lead to, and their names in the log.
//! `client::request` runs them, one after another, from `Transport` to
//! `Done`; each step is a function that names the next.
//!
//! The table of transitions ([`NEXT`]) is checked on every transition of
//! a debug build, and drawn in `docs/architecture-notes.md` ("The client
//! steps"), which a test keeps in step with it.

use crate::host::client_host::Resp;
use crate::host::req::{Outcome, Req};
use crate::host::vcl::Loaded;
use bytes::Bytes;
use lacquer_cache::object::Object;
use lacquer_cache::FetchSlot;
use lacquer_vcl::Action;
use std::sync::Arc;

/// Where a request is: the step it is about to run, with what that step
/// needs from the one before.
pub(crate) enum Step {
    /// Handed over by its transport: answers made before VCL (an ACME
    /// challenge), and a body read first for `std.cache_req_body`.
    Transport,
    /// `vcl_recv`.
    Recv,
    /// `return (vcl(label))`: the request starts over in that program.
    Vcl(Arc<Loaded>),
    /// `vcl_hash`, then where `vcl_recv`'s choice leads.
    Hash(Action),
    /// The key's objects purged, then `vcl_purge`.
    Purge,
    /// `vcl_pass`, then the backend's answer, not kept.
    Pass,
    /// `vcl_pipe`, then the connection handed to the backend.
    Pipe,
    /// The cache looked up (waiting on a busy object as needed).
    Lookup,
    /// `vcl_hit` with the object found.
    Hit(Arc<Object>),
    /// `vcl_miss`, then the fetch waited for (`slot` is the right to fill
    /// the key; `hitmiss` when a hit-for-miss marker sent it here).
    Miss { slot: FetchSlot, hitmiss: bool },
    /// `vcl_deliver` for an object, with the response built from it.
    Deliver { obj: Arc<Object>, resp: Resp },
    /// `vcl_synth`.
    Synth { status: u16, reason: Option<Bytes> },
    /// VCL failed: a 503 from `vcl_synth`, and the connection closes.
    VclFail,
    /// `return (restart)`: counted, then `vcl_recv` again.
    Restart,
    /// The response written.
    Transmit(Transmit),
    /// Answered: what becomes of the connection.
    Done(Outcome),
}

/// What the transmit step writes.
pub(crate) struct Transmit {
    pub obj: Arc<Object>,
    /// The response `vcl_deliver` saw (None for one `vcl_synth` built:
    /// it is in the object).
    pub resp: Option<Resp>,
    pub hit: bool,
    pub synthetic: bool,
    pub keep: bool,
    /// When the response was made (its `Process` timestamp).
    pub now: f64,
}

/// A step without what it carries: its name in the log and in
/// [`NEXT`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Name {
    Transport,
    Recv,
    Vcl,
    Hash,
    Purge,
    Pass,
    Pipe,
    Lookup,
    Hit,
    Miss,
    Deliver,
    Synth,
    VclFail,
    Restart,
    Transmit,
    Done,
}

impl Step {
    pub(crate) fn name(&self) -> Name {
        match self {
            Step::Transport => Name::Transport,
            Step::Recv => Name::Recv,
            Step::Vcl(_) => Name::Vcl,
            Step::Hash(_) => Name::Hash,
            Step::Purge => Name::Purge,
            Step::Pass => Name::Pass,
            Step::Pipe => Name::Pipe,
            Step::Lookup => Name::Lookup,
            Step::Hit(_) => Name::Hit,
            Step::Miss { .. } => Name::Miss,
            Step::Deliver { .. } => Name::Deliver,
            Step::Synth { .. } => Name::Synth,
            Step::VclFail => Name::VclFail,
            Step::Restart => Name::Restart,
            Step::Transmit(_) => Name::Transmit,
            Step::Done(_) => Name::Done,
        }
    }
}

impl Name {
    /// The step's name as the log writes it (`STP_Req Step` and this),
    /// in varnishd's words where it has the step (its `lookup` is our
    /// hash, lookup and hit, its `fetch` part of our miss).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Name::Transport => "transport",
            Name::Recv => "recv",
            Name::Vcl => "vcl",
            Name::Hash => "hash",
            Name::Purge => "purge",
            Name::Pass => "pass",
            Name::Pipe => "pipe",
            Name::Lookup => "lookup",
            Name::Hit => "hit",
            Name::Miss => "miss",
            Name::Deliver => "deliver",
            Name::Synth => "synth",
            Name::VclFail => "vclfail",
            Name::Restart => "restart",
            Name::Transmit => "transmit",
            Name::Done => "finish",
        }
    }

    /// Whether a step may lead to `next`.
    pub(crate) fn may_lead_to(self, next: Name) -> bool {
        NEXT.iter()
            .any(|(from, to)| *from == self && to.contains(&next))
    }
}

/// Logs that a step starts, as varnishd does under `debug=+req_state`
/// (the client's vxid with its mark), with the program's name where it
/// prints the session's and the program's addresses.
pub(crate) fn log_start(req: &mut Req, name: Name, vcl: &str) {
    req.log.fmt(
        lacquer_shm::Tag::Debug,
        format_args!(
            "vxid {} STP_Req Step {} vcl {vcl}",
            req.xid | 1 << 30,
            name.as_str()
        ),
    );
}

/// Each step and the steps it may lead to. A request starts at
/// `Transport` and ends at `Done`.
pub(crate) const NEXT: &[(Name, &[Name])] = {
    use Name::*;
    &[
        (Transport, &[Recv, Done]),
        (Recv, &[Hash, Vcl, VclFail]),
        (Vcl, &[Transport]),
        (
            Hash,
            &[Lookup, Purge, Pass, Pipe, Synth, Restart, VclFail, Done],
        ),
        (Purge, &[Synth, Restart, VclFail]),
        (Lookup, &[Hit, Miss, Pass, Deliver]),
        (Hit, &[Deliver, Pass, Synth, Restart, VclFail]),
        (Miss, &[Deliver, Pass, Synth, Restart, VclFail, Done]),
        (Pass, &[Deliver, Synth, Restart, VclFail, Done]),
        (Pipe, &[Synth, Done]),
        (Deliver, &[Transmit, Synth, Restart, VclFail, Done]),
        (Synth, &[Transmit, Restart, Done]),
        (VclFail, &[Synth]),
        (Restart, &[Recv, Synth, Done]),
        (Transmit, &[Done]),
        (Done, &[]),
    ]
};

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A drawing of steps in the architecture notes: the lines of the
    /// block fenced as `fence`, `FROM -> TO, TO…` (the backend steps'
    /// test reads its drawing with it too).
    pub(crate) fn drawn(fence: &str) -> Vec<(String, Vec<String>)> {
        let notes = include_str!("../../../../docs/architecture-notes.md");
        let start = notes
            .find(&format!("```{fence}"))
            .unwrap_or_else(|| panic!("the notes draw {fence}"));
        let body = &notes[start..];
        let body = &body[body.find('\n').unwrap() + 1..];
        let body = &body[..body.find("```").unwrap()];
        body.lines()
            .filter(|l| l.contains("->"))
            .map(|l| {
                let (from, to) = l.split_once("->").unwrap();
                let to = to
                    .split(',')
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect();
                (from.trim().to_string(), to)
            })
            .collect()
    }

    #[test]
    fn the_drawing_of_the_steps_is_the_table() {
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
        assert_eq!(drawn("client-steps"), table);
    }

    #[test]
    fn every_step_is_reached_and_leads_on_to_the_end() {
        let all: Vec<Name> = NEXT.iter().map(|(n, _)| *n).collect();
        // Reached from Transport.
        let mut seen = vec![Name::Transport];
        let mut i = 0;
        while i < seen.len() {
            let from = seen[i];
            for (f, to) in NEXT {
                if *f == from {
                    for n in *to {
                        if !seen.contains(n) {
                            seen.push(*n);
                        }
                    }
                }
            }
            i += 1;
        }
        for n in &all {
            assert!(seen.contains(n), "{n:?} is never reached");
        }
        // Each step but Done leads somewhere, and Done nowhere.
        for (from, to) in NEXT {
            assert_eq!(to.is_empty(), *from == Name::Done, "{from:?}");
        }
        assert!(Name::Restart.may_lead_to(Name::Recv));
        assert!(!Name::Transmit.may_lead_to(Name::Recv));
    }
}
