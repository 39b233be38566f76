//! What an invalidation is as the nodes of a cluster pass it on (a purge
//! of a hash key, a ban expression, a tag purge), how it is written in a
//! request's query and read back, how a node applies it, and the journal
//! in which a node keeps what it applied, each once (see `host::spread`).

use crate::Shared;
use bytes::Bytes;
use std::collections::{HashSet, VecDeque};

/// How many invalidations a journal keeps.
const JOURNAL_MAX: usize = 10_000;

/// The most bytes a journal's text may take (a peer reads it whole, up
/// to [`JOURNAL_BYTES`]): the oldest go first past it.
const JOURNAL_KEPT_BYTES: usize = JOURNAL_BYTES / 2;

/// The largest journal a node reads from a peer.
pub(crate) const JOURNAL_BYTES: usize = 16 << 20;

/// One invalidation as nodes pass it on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Invalidation {
    /// Every variant under a hash key (`return (purge)`, vmod purge).
    Purge { key: Bytes },
    /// A ban expression, as `ban()` and the CLI's `ban` take it.
    Ban { expr: String },
    /// Objects with any of these tags (`xkey.purge`, `xkey.softpurge`).
    Tags { tags: String, soft: bool },
}

impl Invalidation {
    /// Its kind and argument, as a query string carries them.
    pub fn query(&self) -> String {
        match self {
            Invalidation::Purge { key } => format!("kind=purge&arg={}", hex(key)),
            Invalidation::Ban { expr } => format!("kind=ban&arg={}", percent(expr.as_bytes())),
            Invalidation::Tags { tags, soft } => format!(
                "kind={}&arg={}",
                if *soft { "softxkey" } else { "xkey" },
                percent(tags.as_bytes())
            ),
        }
    }

    /// What [`Invalidation::query`] wrote.
    pub fn from_parts(kind: &str, arg: &[u8]) -> Option<Invalidation> {
        let text = || String::from_utf8(unpercent(arg)?).ok();
        Some(match kind {
            "purge" => Invalidation::Purge {
                key: Bytes::from(unhex(arg)?),
            },
            "ban" => Invalidation::Ban { expr: text()? },
            "xkey" | "softxkey" => Invalidation::Tags {
                tags: text()?,
                soft: kind == "softxkey",
            },
            _ => return None,
        })
    }

    /// Applies it at this node; how many objects it acted on (a ban: 0).
    pub fn apply(&self, sh: &Shared) -> usize {
        match self {
            Invalidation::Purge { key } => crate::host::purge::by_key(sh, key, None),
            Invalidation::Ban { expr } => {
                // It parsed where it was made; one that does not here (a
                // node of another version) is dropped.
                let _ = crate::host::vcl::add_ban(sh.cache.bans(), &sh.params, expr.as_bytes());
                0
            }
            Invalidation::Tags { tags, soft } => {
                crate::host::purge::by_tags(sh, tags.as_bytes(), *soft)
            }
        }
    }
}

/// The invalidations a node applied, each once, newest last.
#[derive(Default)]
pub(crate) struct Journal {
    /// The number of this node's last own invalidation.
    pub seq: u64,
    seen: HashSet<String>,
    /// Each with the length of its line in the journal's text.
    kept: VecDeque<(String, Invalidation, usize)>,
    /// The length of the journal's text.
    bytes: usize,
}

impl Journal {
    /// Records `inv` under `id`; false when it was applied before.
    pub fn record(&mut self, id: String, inv: Invalidation) -> bool {
        if !self.seen.insert(id.clone()) {
            return false;
        }
        let line = id.len() + 1 + inv.query().len() + 1;
        self.bytes += line;
        self.kept.push_back((id, inv, line));
        while self.kept.len() > JOURNAL_MAX || self.bytes > JOURNAL_KEPT_BYTES {
            let Some((old, _, line)) = self.kept.pop_front() else {
                break;
            };
            self.bytes -= line;
            self.seen.remove(&old);
        }
        true
    }

    /// How many invalidations it keeps.
    pub fn len(&self) -> usize {
        self.kept.len()
    }

    /// How many invalidations this node made.
    pub fn own(&self) -> u64 {
        self.seq
    }

    /// The journal as a peer reads it: a line an invalidation, its id and
    /// its query.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for (id, inv, _) in &self.kept {
            out.push_str(id);
            out.push(' ');
            out.push_str(&inv.query());
            out.push('\n');
        }
        out
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &[u8]) -> Option<Vec<u8>> {
    let pairs = text.chunks_exact(2);
    if !pairs.remainder().is_empty() {
        return None;
    }
    pairs
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok())
        .collect()
}

/// Every byte but letters, digits and `-._~` as `%XX`.
pub(crate) fn percent(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

pub(crate) fn unpercent(text: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        if text[i] == b'%' {
            let pair = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?);
            i += 3;
        } else {
            out.push(text[i]);
            i += 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_invalidation_reads_back_from_its_query() {
        let all = [
            Invalidation::Purge {
                key: Bytes::from_static(b"/a\0example.com\0"),
            },
            Invalidation::Ban {
                expr: "req.url ~ ^/news && obj.http.x != \"a b&c=d%\"".into(),
            },
            Invalidation::Tags {
                tags: "t1 t2,t3".into(),
                soft: true,
            },
            Invalidation::Tags {
                tags: "t".into(),
                soft: false,
            },
        ];
        for inv in all {
            let q = inv.query();
            assert!(!q.contains(' ') && q.matches('&').count() == 1, "{q}");
            let (kind, arg) = q.split_once('&').unwrap();
            let kind = kind.strip_prefix("kind=").unwrap();
            let arg = arg.strip_prefix("arg=").unwrap();
            assert_eq!(Invalidation::from_parts(kind, arg.as_bytes()), Some(inv));
        }
        assert_eq!(Invalidation::from_parts("purge", b"abc"), None);
        assert_eq!(Invalidation::from_parts("ban", b"%zz"), None);
        assert_eq!(Invalidation::from_parts("nuke", b""), None);
    }

    #[test]
    fn a_journal_records_each_id_once_and_forgets_the_oldest() {
        let mut j = Journal::default();
        let ban = |n: usize| Invalidation::Ban {
            expr: format!("req.url == /{n}"),
        };
        assert!(j.record("a.1.1".into(), ban(1)));
        assert!(!j.record("a.1.1".into(), ban(1)));
        for n in 2..=JOURNAL_MAX + 1 {
            assert!(j.record(format!("a.1.{n}"), ban(n)));
        }
        assert_eq!(j.kept.len(), JOURNAL_MAX);
        // The oldest is forgotten, and would be taken again.
        assert!(j.record("a.1.1".into(), ban(1)));
        let text = j.text();
        assert!(text
            .lines()
            .last()
            .unwrap()
            .starts_with("a.1.1 kind=ban&arg="));
        assert_eq!(text.len(), j.bytes);
    }

    #[test]
    fn a_journal_stays_within_what_a_peer_reads() {
        let mut j = Journal::default();
        let big = "x".repeat(100_000);
        for n in 0..200 {
            let ban = Invalidation::Ban {
                expr: format!("req.url == /{n}{big}"),
            };
            assert!(j.record(format!("a.1.{n}"), ban));
        }
        assert!(j.bytes <= JOURNAL_KEPT_BYTES && j.text().len() == j.bytes);
        assert!(j.len() < 200 && j.len() > 10);
    }
}
