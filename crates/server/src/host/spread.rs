//! Invalidations everywhere: a purge, a ban or a tag purge made at one
//! node of a cluster is sent at once, in parallel, to every other node
//! that takes requests, each of which applies it and says so; the node
//! where it was made learns how many applied it. Each node keeps a
//! journal of the invalidations it applied (its own and others', each
//! once, by the id its first node gave it), and whenever it sees a node
//! come up (a restart, a partition healed) it reads that node's journal
//! and applies what it missed: nothing invalidated on one side is served
//! on the other once they meet again. An invalidation travels as the
//! query of a marked request (`/.lacquer/invalidate?...`), which only a
//! node that knows the secret can make.

use crate::host::invalidation::{percent, unpercent, Invalidation, JOURNAL_BYTES};
use crate::host::peers::Peers;
use crate::Shared;
use lacquer_backend::{Backend, Timeouts};
use lacquer_core::params::Params;
use std::collections::HashSet;
use std::sync::Arc;

/// The path a node sends an invalidation to.
pub(crate) const INVALIDATE: &str = "/.lacquer/invalidate";
/// The path of a node's journal.
pub(crate) const JOURNAL: &str = "/.lacquer/journal";

/// How far an invalidation went: the nodes that applied it (this one
/// included), of the nodes that take requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reach {
    pub applied: usize,
    pub of: usize,
}

impl std::fmt::Display for Reach {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.applied, self.of)
    }
}

/// Sends `inv`, applied here already, to every other node that takes
/// requests, all at once; how far it went. None outside a cluster.
pub(crate) async fn everywhere(sh: &Shared, inv: Invalidation) -> Option<Reach> {
    let peers = sh.cluster.as_ref()?;
    let id = peers.record_own(&inv);
    let url = format!("{INVALIDATE}?id={}&{}", percent(id.as_bytes()), inv.query());
    let targets = peers.others();
    let of = targets.len() + 1;
    let t = peer_timeouts(&sh.params);
    let limits = sh.response_limits();
    let sends = targets.iter().map(|peer| {
        let head = request_head(peers, peer, &url);
        async move {
            let ok = matches!(ask(peer, &head, &t, &limits, 0).await, Some((200 | 204, _)));
            peers.count_spread(peer, ok);
            ok
        }
    });
    let applied = join_all(sends).await.into_iter().filter(|ok| *ok).count() + 1;
    Some(Reach { applied, of })
}

/// Sends the invalidations made where nothing could wait for them
/// ([`Peers::spread_later`]) everywhere, one after another, for the
/// daemon's life.
pub(crate) async fn send_later(sh: Arc<Shared>) {
    let Some(peers) = sh.cluster.as_ref() else {
        return;
    };
    let Some(mut rx) = peers
        .later_rx
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
    else {
        return;
    };
    while let Some(inv) = rx.recv().await {
        let _ = everywhere(&sh, inv).await;
    }
}

/// Sends `inv`, applied here, everywhere later: in a cluster only.
pub(crate) fn later(sh: &Shared, inv: impl FnOnce() -> Invalidation) {
    if let Some(peers) = &sh.cluster {
        peers.spread_later(inv());
    }
}

/// What a peer's marked request to [`INVALIDATE`] or [`JOURNAL`] gets:
/// the status and body of the answer; None for any other path.
pub(crate) fn answer_peer(sh: &Shared, url: &[u8]) -> Option<(u16, String)> {
    let peers = sh.cluster.as_ref()?;
    let url = std::str::from_utf8(url).ok()?;
    if peers.cluster.is_cut() && (url == JOURNAL || url.starts_with(INVALIDATE)) {
        return Some((503, "cut off from the cluster\n".into()));
    }
    if url == JOURNAL {
        let j = peers.journal.lock().unwrap_or_else(|e| e.into_inner());
        return Some((200, j.text()));
    }
    let query = url.strip_prefix(INVALIDATE)?.strip_prefix('?')?;
    let field = |name: &str| query_field(query, name);
    let parsed = field("id")
        .and_then(|id| String::from_utf8(unpercent(id.as_bytes())?).ok())
        .zip(field("kind").zip(field("arg")))
        .and_then(|(id, (kind, arg))| Some((id, Invalidation::from_parts(kind, arg.as_bytes())?)));
    let Some((id, inv)) = parsed else {
        return Some((400, "malformed invalidation\n".into()));
    };
    apply_once(sh, peers, id, inv);
    Some((204, String::new()))
}

/// Applies `inv` unless it was applied here before.
fn apply_once(sh: &Shared, peers: &Peers, id: String, inv: Invalidation) -> bool {
    let fresh = peers
        .journal
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .record(id.clone(), inv.clone());
    if fresh {
        inv.apply(sh);
        peers.count_applied_id(&id);
    }
    fresh
}

/// Reads the journal of every node that came up since the last look (a
/// node met for the first time, a restart, the end of a partition) and
/// applies what this node missed: as soon as membership changes, and
/// once a second for the daemon's life.
pub(crate) async fn catch_up(sh: Arc<Shared>) {
    let Some(peers) = sh.cluster.as_ref() else {
        return;
    };
    // The runs of the nodes whose journals were read while they were up.
    let mut read: HashSet<(Arc<str>, u64)> = HashSet::new();
    loop {
        peers
            .cluster
            .changed(std::time::Duration::from_secs(1))
            .await;
        let view = peers.cluster.view();
        let up: Vec<_> = view
            .nodes
            .iter()
            .filter(|n| !n.me && n.state == lacquer_cluster::NodeState::Alive)
            .map(|n| n.node.clone())
            .collect();
        // A node that went down is read again when it comes back.
        read.retain(|(name, run)| up.iter().any(|n| n.name == *name && n.run == *run));
        for node in up {
            if read.contains(&(node.name.clone(), node.run)) {
                continue;
            }
            if read_journal(&sh, peers, &node).await {
                read.insert((node.name.clone(), node.run));
            }
        }
    }
}

/// How long a node that joins a cluster waits to meet another before it
/// takes clients all the same (the others may all be down).
const JOIN_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Before a node that joins a cluster (`joins`: it was given seeds) takes
/// clients: waits, at most [`JOIN_WAIT`], to meet another node, then
/// applies what the journals of every node it met have and its own
/// lacks, so that nothing invalidated while it was away (restarted, cut
/// off) is served by it. A node that starts a cluster does not wait.
pub(crate) async fn before_serving(sh: &Shared, joins: bool) {
    let Some(peers) = sh.cluster.as_ref().filter(|_| joins) else {
        return;
    };
    let start = std::time::Instant::now();
    loop {
        let view = peers.cluster.view();
        let met: Vec<_> = view
            .nodes
            .iter()
            .filter(|n| !n.me && n.state == lacquer_cluster::NodeState::Alive)
            .map(|n| n.node.clone())
            .collect();
        if !met.is_empty() {
            for node in &met {
                read_journal(sh, peers, node).await;
            }
            return;
        }
        if start.elapsed() > JOIN_WAIT {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// Applies what `node`'s journal has and this node's lacks; false when
/// it could not be read.
async fn read_journal(sh: &Shared, peers: &Peers, node: &lacquer_cluster::Node) -> bool {
    let peer = peers.backend(node);
    let head = request_head(peers, &peer, JOURNAL);
    let t = peer_timeouts(&sh.params);
    let Some((200, body)) = ask(&peer, &head, &t, &sh.response_limits(), JOURNAL_BYTES).await
    else {
        return false;
    };
    for line in body.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let Ok(line) = std::str::from_utf8(line) else {
            continue;
        };
        let Some((id, query)) = line.split_once(' ') else {
            continue;
        };
        let field = |name: &str| query_field(query, name);
        if let Some(inv) = field("kind")
            .zip(field("arg"))
            .and_then(|(kind, arg)| Invalidation::from_parts(kind, arg.as_bytes()))
        {
            apply_once(sh, peers, id.to_string(), inv);
        }
    }
    true
}

/// The value of `name` in a query string (`a=1&b=2`), as written.
fn query_field<'q>(query: &'q str, name: &str) -> Option<&'q str> {
    query
        .split('&')
        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
}

/// The head of a marked GET of `url` to `peer`.
fn request_head(peers: &Peers, peer: &Backend, url: &str) -> Vec<u8> {
    let mark = peers.mark(b"GET", url.as_bytes());
    format!(
        "GET {url} HTTP/1.1\r\nHost: {}\r\nLacquer-Peer: {mark}\r\n\r\n",
        peer.host_header
    )
    .into_bytes()
}

/// Sends `head` to `peer` and reads the answer's status and body (at
/// most `max_body` bytes, else None).
async fn ask(
    peer: &Backend,
    head: &[u8],
    t: &Timeouts,
    limits: &lacquer_http::ResponseLimits,
    max_body: usize,
) -> Option<(u16, Vec<u8>)> {
    let how = lacquer_backend::Ask {
        is_head: false,
        extra_chance: true,
        interim: None,
    };
    let (mut conn, resp) = peer.exchange(head, &[], t, limits, how).await.ok()?;
    let mut reader = conn.body(resp.framing);
    let mut body = Vec::new();
    while let Some(piece) = conn.read_body(&mut reader, t).await.ok()? {
        if body.len() + piece.len() > max_body {
            return None;
        }
        body.extend_from_slice(&piece);
    }
    conn.finish(true);
    Some((resp.status, body))
}

/// How long a node waits on another for an invalidation or a journal.
fn peer_timeouts(p: &Params) -> Timeouts {
    let connect = Params::duration(p.cluster_connect_timeout());
    Timeouts {
        connect,
        first_byte: connect * 4,
        between_bytes: connect * 4,
        idle: Params::duration(p.backend_idle_timeout()),
        holddown_local: std::time::Duration::ZERO,
        holddown_remote: std::time::Duration::ZERO,
        proxy_for: None,
        wait: lacquer_backend::WaitPolicy {
            timeout: std::time::Duration::ZERO,
            limit: 0,
        },
    }
}

/// Runs every future at once; their outputs in order.
async fn join_all<F: std::future::Future>(futures: impl IntoIterator<Item = F>) -> Vec<F::Output> {
    let mut pending: Vec<_> = futures.into_iter().map(|f| Some(Box::pin(f))).collect();
    let mut out: Vec<Option<F::Output>> = (0..pending.len()).map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut left = false;
        for (slot, done) in pending.iter_mut().zip(out.iter_mut()) {
            if let Some(f) = slot {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => {
                        *done = Some(v);
                        *slot = None;
                    }
                    std::task::Poll::Pending => left = true,
                }
            }
        }
        if left {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    out.into_iter().flatten().collect()
}
