//! Assembles records into transactions and transactions into the groups
//! varnishlog reports (`-g raw|vxid|request|session`): a request with its
//! backend fetches, ESI sub-requests and restarts; a session with all its
//! requests. A group is reported when every transaction in it has ended,
//! or when it has waited longer than the reader's timeout.

use crate::query::View;
use crate::record::Record;
use crate::tags::Tag;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Hashes a vxid with one multiplication: the keys are the daemon's own
/// sequential numbers, not an attacker's, so SipHash's cost buys nothing
/// on a path taken once per record.
#[derive(Default)]
struct VxidHasher(u64);

impl Hasher for VxidHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (n ^ (n >> 29)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

type VxidHash = BuildHasherDefault<VxidHasher>;
use std::time::{Duration, Instant};

/// How records are grouped for reporting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grouping {
    Raw,
    Vxid,
    Request,
    Session,
}

impl Grouping {
    pub fn parse(s: &str) -> Option<Grouping> {
        Some(match s {
            "raw" => Grouping::Raw,
            "vxid" => Grouping::Vxid,
            "request" => Grouping::Request,
            "session" => Grouping::Session,
            _ => return None,
        })
    }
}

/// What a transaction is, from its `Begin` record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Session,
    Request,
    BeReq,
    /// A raw record, or a transaction whose start was not seen.
    Raw,
}

impl Kind {
    /// The label varnishlog prints in a group's header line.
    pub fn label(self) -> &'static str {
        match self {
            Kind::Session => "Session",
            Kind::Request => "Request",
            Kind::BeReq => "BeReq",
            Kind::Raw => "Record",
        }
    }
}

/// One transaction's records, with its place in a group.
#[derive(Debug, Clone)]
pub struct Transaction {
    pub vxid: u64,
    pub kind: Kind,
    pub level: u32,
    pub records: Vec<Record>,
    parent: Option<(u64, bool)>,
    /// Its children: first those it linked, in the order of its `Link`
    /// records, then those only their own `Begin` named (not linked yet),
    /// so that a group reads the same however its records were flushed.
    children: Vec<u64>,
    /// How many of `children` its `Link` records named.
    linked: usize,
    ended: bool,
    born: Instant,
}

impl Transaction {
    fn new(vxid: u64) -> Transaction {
        Transaction {
            vxid,
            kind: Kind::Raw,
            level: 1,
            // A client request logs about thirty records.
            records: Vec::with_capacity(32),
            parent: None,
            children: Vec::new(),
            linked: 0,
            ended: false,
            born: Instant::now(),
        }
    }

    pub fn view(&self) -> View<'_> {
        View {
            vxid: self.vxid,
            level: self.level,
            records: &self.records,
        }
    }
}

/// A group of transactions, in report order (parents before children).
pub type Group = Vec<Transaction>;

/// Collects records until their groups are complete.
pub struct Grouper {
    mode: Grouping,
    timeout: Duration,
    limit: usize,
    open: HashMap<u64, Transaction, VxidHash>,
}

impl Grouper {
    /// `timeout` is varnishlog's `-T`, `limit` its `-L` (how many
    /// incomplete transactions are held before the oldest is reported).
    pub fn new(mode: Grouping, timeout: Duration, limit: usize) -> Grouper {
        Grouper {
            mode,
            timeout,
            limit: limit.max(1),
            open: HashMap::default(),
        }
    }

    /// Takes one record; complete groups are appended to `out`.
    pub fn push(&mut self, rec: Record, out: &mut Vec<Group>) {
        if self.mode == Grouping::Raw {
            let mut t = Transaction::new(rec.vxid);
            t.level = 0;
            t.records.push(rec);
            out.push(vec![t]);
            return;
        }
        if rec.vxid == 0 {
            return;
        }
        let vxid = rec.vxid;
        let tag = rec.tag;
        let mode = self.mode;
        let t = self
            .open
            .entry(vxid)
            .or_insert_with(|| Transaction::new(vxid));
        match tag {
            Tag::Begin => {
                let (kind, parent) = parse_begin(&rec.payload, mode);
                t.kind = kind;
                t.parent = parent;
            }
            Tag::Link => {
                if let Some(child) = parse_link(&rec.payload, t.kind, mode) {
                    match t.children.iter().position(|&c| c == child) {
                        Some(at) if at < t.linked => {}
                        Some(at) => {
                            t.children.remove(at);
                            t.children.insert(t.linked, child);
                            t.linked += 1;
                        }
                        None => {
                            t.children.insert(t.linked, child);
                            t.linked += 1;
                        }
                    }
                }
            }
            _ => {}
        }
        t.records.push(rec);
        if tag == Tag::Begin {
            if let Some((parent, _)) = t.parent {
                let p = self
                    .open
                    .entry(parent)
                    .or_insert_with(|| Transaction::new(parent));
                if !p.children.contains(&vxid) {
                    p.children.push(vxid);
                }
            }
        }
        if tag == Tag::End {
            if let Some(t) = self.open.get_mut(&vxid) {
                t.ended = true;
            }
            let root = self.root_of(vxid);
            if self.complete(root) {
                self.emit_root(root, out);
            }
        }
        if self.open.len() > self.limit {
            self.force_oldest(out);
        }
    }

    /// Reports groups that have waited longer than the timeout.
    pub fn expire(&mut self, out: &mut Vec<Group>) {
        let now = Instant::now();
        loop {
            let old = self
                .roots()
                .into_iter()
                .find(|&r| now.duration_since(self.open[&r].born) >= self.timeout);
            match old {
                Some(r) => self.emit_root(r, out),
                None => break,
            }
        }
    }

    /// Reports everything still held, complete or not (at the end of a
    /// file or of `-d`'s pass over the ring).
    pub fn finish(&mut self, out: &mut Vec<Group>) {
        while let Some(&r) = self.roots().first() {
            self.emit_root(r, out);
        }
    }

    fn emit_root(&mut self, root: u64, out: &mut Vec<Group>) {
        let g = self.take(root);
        // Placeholders never begun (a parent we never saw) are not reported.
        let g: Group = g.into_iter().filter(|t| !t.records.is_empty()).collect();
        if !g.is_empty() && self.reportable(&g[0]) {
            out.push(g);
        }
    }

    fn force_oldest(&mut self, out: &mut Vec<Group>) {
        let oldest = self.roots().into_iter().min_by_key(|r| self.open[r].born);
        if let Some(r) = oldest {
            self.emit_root(r, out);
        }
    }

    fn roots(&self) -> Vec<u64> {
        let mut roots: Vec<u64> = self
            .open
            .values()
            .filter(|t| t.parent.is_none_or(|(p, _)| !self.open.contains_key(&p)))
            .map(|t| t.vxid)
            .collect();
        roots.sort_by_key(|r| self.open[r].born);
        roots
    }

    fn root_of(&self, mut vxid: u64) -> u64 {
        let mut hops = 0;
        while let Some((parent, _)) = self.open.get(&vxid).and_then(|t| t.parent) {
            if !self.open.contains_key(&parent) || hops > 64 {
                break;
            }
            vxid = parent;
            hops += 1;
        }
        vxid
    }

    fn complete(&self, vxid: u64) -> bool {
        let mut stack = vec![(vxid, 0)];
        while let Some((v, depth)) = stack.pop() {
            match self.open.get(&v) {
                Some(t) if t.ended && depth < 64 => {
                    stack.extend(t.children.iter().map(|&c| (c, depth + 1)));
                }
                _ => return false,
            }
        }
        true
    }

    /// Removes a group from the open set, in report order with levels.
    fn take(&mut self, root: u64) -> Group {
        let mut group = Vec::new();
        let mut stack = vec![(root, 1u32)];
        while let Some((v, level)) = stack.pop() {
            let Some(mut t) = self.open.remove(&v) else {
                continue;
            };
            t.level = level;
            for &c in t.children.iter().rev() {
                let same_level = self
                    .open
                    .get(&c)
                    .and_then(|ct| ct.parent)
                    .is_some_and(|(_, restart)| restart);
                stack.push((c, if same_level { level } else { level + 1 }));
            }
            group.push(t);
        }
        group
    }

    fn reportable(&self, root: &Transaction) -> bool {
        match self.mode {
            Grouping::Request => root.kind != Kind::Session,
            _ => true,
        }
    }
}

/// The kind and, when the grouping links it to one, the parent of a
/// transaction from its `Begin` payload (`req 1000 rxreq`). The flag says
/// the child stays at its parent's level (a restart).
fn parse_begin(payload: &[u8], mode: Grouping) -> (Kind, Option<(u64, bool)>) {
    let text = String::from_utf8_lossy(payload);
    let mut f = text.split_ascii_whitespace();
    let kind = match f.next() {
        Some("sess") => Kind::Session,
        Some("req") => Kind::Request,
        Some("bereq") => Kind::BeReq,
        _ => Kind::Raw,
    };
    let parent: u64 = f.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let reason = f.next().unwrap_or("");
    if parent == 0 {
        return (kind, None);
    }
    let linked = match (mode, kind, reason) {
        (Grouping::Vxid | Grouping::Raw, _, _) => false,
        (Grouping::Request, Kind::Request, "rxreq") => false,
        (_, Kind::Request | Kind::BeReq, _) => true,
        _ => false,
    };
    (kind, linked.then_some((parent, reason == "restart")))
}

/// The child a `Link` record names, when the grouping follows it.
fn parse_link(payload: &[u8], parent_kind: Kind, mode: Grouping) -> Option<u64> {
    let text = String::from_utf8_lossy(payload);
    let mut f = text.split_ascii_whitespace();
    let kind = f.next()?;
    let child: u64 = f.next()?.parse().ok()?;
    match (mode, parent_kind, kind) {
        (Grouping::Vxid | Grouping::Raw, _, _) => None,
        (Grouping::Request, Kind::Session, _) => None,
        (_, _, "req" | "bereq") => Some(child),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Side;

    fn r(vxid: u64, tag: Tag, p: &str) -> Record {
        let side = if p.starts_with("bereq") {
            Side::Backend
        } else {
            Side::Client
        };
        Record::new(vxid, tag, side, p.as_bytes())
    }

    /// A session 1 with request 2 whose fetch 3 ends first, as the
    /// daemon writes them.
    fn miss() -> Vec<Record> {
        vec![
            r(3, Tag::Begin, "bereq 2 fetch"),
            r(3, Tag::BerespStatus, "200"),
            r(3, Tag::End, ""),
            r(2, Tag::Begin, "req 1 rxreq"),
            r(2, Tag::ReqURL, "/"),
            r(2, Tag::Link, "bereq 3 fetch"),
            r(2, Tag::End, ""),
            r(1, Tag::Begin, "sess 0 HTTP/1"),
            r(1, Tag::Link, "req 2 rxreq"),
            r(1, Tag::End, ""),
        ]
    }

    fn run(mode: Grouping, recs: Vec<Record>) -> Vec<Vec<(u64, u32, Kind)>> {
        let mut g = Grouper::new(mode, Duration::from_secs(120), 1000);
        let mut out = Vec::new();
        for rec in recs {
            g.push(rec, &mut out);
        }
        out.iter()
            .map(|grp| grp.iter().map(|t| (t.vxid, t.level, t.kind)).collect())
            .collect()
    }

    #[test]
    fn vxid_reports_each_transaction_at_its_end() {
        let got = run(Grouping::Vxid, miss());
        assert_eq!(
            got,
            vec![
                vec![(3, 1, Kind::BeReq)],
                vec![(2, 1, Kind::Request)],
                vec![(1, 1, Kind::Session)]
            ]
        );
    }

    #[test]
    fn request_groups_a_request_with_its_fetch() {
        let got = run(Grouping::Request, miss());
        assert_eq!(got, vec![vec![(2, 1, Kind::Request), (3, 2, Kind::BeReq)]]);
    }

    #[test]
    fn session_groups_everything() {
        let got = run(Grouping::Session, miss());
        assert_eq!(
            got,
            vec![vec![
                (1, 1, Kind::Session),
                (2, 2, Kind::Request),
                (3, 3, Kind::BeReq)
            ]]
        );
    }

    #[test]
    fn a_child_ending_after_its_parent_is_waited_for() {
        let recs = vec![
            r(2, Tag::Begin, "req 1 rxreq"),
            r(2, Tag::Link, "bereq 3 bgfetch"),
            r(2, Tag::End, ""),
            r(3, Tag::Begin, "bereq 2 bgfetch"),
            r(3, Tag::End, ""),
        ];
        let got = run(Grouping::Request, recs);
        assert_eq!(got, vec![vec![(2, 1, Kind::Request), (3, 2, Kind::BeReq)]]);
    }

    #[test]
    fn children_come_in_the_order_their_parent_linked_them() {
        // The include (4) and the fetch of the page (3) flushed their
        // records before the page's links: the group reads as linked.
        let recs = vec![
            r(4, Tag::Begin, "req 2 esi"),
            r(4, Tag::End, ""),
            r(3, Tag::Begin, "bereq 2 fetch"),
            r(3, Tag::End, ""),
            r(2, Tag::Begin, "req 1 rxreq"),
            r(2, Tag::Link, "bereq 3 fetch"),
            r(2, Tag::Link, "req 4 esi"),
            r(2, Tag::End, ""),
        ];
        let got = run(Grouping::Request, recs);
        assert_eq!(
            got,
            vec![vec![
                (2, 1, Kind::Request),
                (3, 2, Kind::BeReq),
                (4, 2, Kind::Request)
            ]]
        );
    }

    #[test]
    fn restarts_keep_their_level_and_raw_keeps_everything() {
        let recs = vec![
            r(5, Tag::Begin, "req 2 restart"),
            r(5, Tag::End, ""),
            r(2, Tag::Begin, "req 1 rxreq"),
            r(2, Tag::Link, "req 5 restart"),
            r(2, Tag::End, ""),
        ];
        let got = run(Grouping::Request, recs.clone());
        assert_eq!(
            got,
            vec![vec![(2, 1, Kind::Request), (5, 1, Kind::Request)]]
        );
        let mut raw = recs;
        raw.push(r(0, Tag::CLI, "Rd ping"));
        assert_eq!(run(Grouping::Raw, raw).len(), 6);
    }

    #[test]
    fn incomplete_groups_come_out_at_finish_and_when_too_many() {
        let mut g = Grouper::new(Grouping::Vxid, Duration::from_secs(120), 2);
        let mut out = Vec::new();
        g.push(r(7, Tag::Begin, "req 1 rxreq"), &mut out);
        g.push(r(8, Tag::Begin, "req 1 rxreq"), &mut out);
        assert!(out.is_empty());
        g.push(r(9, Tag::Begin, "req 1 rxreq"), &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0][0].vxid, 7);
        g.finish(&mut out);
        assert_eq!(out.len(), 3);
        let mut g = Grouper::new(Grouping::Vxid, Duration::ZERO, 100);
        let mut out = Vec::new();
        g.push(r(7, Tag::Begin, "req 1 rxreq"), &mut out);
        g.expire(&mut out);
        assert_eq!(out.len(), 1);
    }
}
