//! Fetching through the cluster, so that the origin is asked once per
//! object per cluster: a cache fetch at a node that does not own the
//! object (by the ring over the nodes' names and the request's digest,
//! as `directors.shard()` with `by=HASH` picks) asks the owner first,
//! over a pooled connection, marked with the cluster's secret so that
//! the owner never routes it again; the owner coalesces it with its own
//! clients' and goes to the origin once. When the owner cannot be
//! reached within `cluster_connect_timeout`, the next node on the ring is
//! asked, and when none can, the origin: the client never sees the
//! difference. What a node fetched from a peer it keeps as any fetched
//! object (a tier of caches, as two Varnish layers would be).

use lacquer_backend::{Address, Backend};
use lacquer_cluster::{Cluster, Node};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A peer's backend, by its name and where it is reached.
type PeerBackends = HashMap<(Arc<str>, SocketAddr), Arc<Backend>>;

/// This node's cluster and its connections to the others.
pub(crate) struct Peers {
    pub cluster: Arc<Cluster>,
    /// A backend for each peer (its pool of connections), by address.
    backends: Mutex<PeerBackends>,
    pub stats: PeerStats,
    /// The invalidations applied here (see `host::spread`).
    pub journal: Mutex<crate::host::invalidation::Journal>,
    /// Invalidations made where nothing can wait for them (VCL's `ban()`,
    /// a vmod's purge), for a task to send everywhere: at most
    /// [`LATER_MAX`] waiting (past it they are counted and stay local,
    /// to be caught up from the journal).
    later: tokio::sync::mpsc::Sender<crate::host::invalidation::Invalidation>,
    /// That task's end of it, until the daemon starts the task.
    pub later_rx:
        Mutex<Option<tokio::sync::mpsc::Receiver<crate::host::invalidation::Invalidation>>>,
}

/// How many invalidations may wait to be sent everywhere.
const LATER_MAX: usize = 100_000;

/// What fetches through the cluster did.
#[derive(Debug, Default)]
pub(crate) struct PeerStats {
    /// Fetches a peer answered.
    pub fetched: AtomicU64,
    /// Peers that could not be reached (the next was tried).
    pub failed: AtomicU64,
    /// Requests whose peer mark did not verify.
    pub refused_marks: AtomicU64,
    /// Invalidations made here that a peer applied, or did not answer.
    pub spread_applied: AtomicU64,
    pub spread_failed: AtomicU64,
    /// Invalidations made elsewhere applied here.
    pub applied_from_peers: AtomicU64,
    /// Invalidations made faster than they could be sent (kept here).
    pub spread_dropped: AtomicU64,
}

impl Peers {
    pub fn new(cluster: Arc<Cluster>) -> Self {
        let (later, later_rx) = tokio::sync::mpsc::channel(LATER_MAX);
        Peers {
            later,
            later_rx: Mutex::new(Some(later_rx)),
            cluster,
            backends: Mutex::new(HashMap::new()),
            stats: PeerStats::default(),
            journal: Default::default(),
        }
    }

    /// The backend that reaches `node`.
    pub fn backend(&self, node: &Node) -> Arc<Backend> {
        let mut backends = self.backends.lock().unwrap_or_else(|e| e.into_inner());
        backends
            .entry((node.name.clone(), node.http))
            .or_insert_with(|| {
                let endpoint = node.http.to_string();
                Arc::new(Backend::new(
                    &format!("cluster.{}", node.name),
                    &endpoint,
                    Address::Tcp(node.http),
                    &endpoint,
                ))
            })
            .clone()
    }

    /// The peers a cache fetch of the object whose hash input is `hash`
    /// asks before the origin: the owner and each next node on the ring,
    /// up to this node (which goes to the origin itself). Empty when this
    /// node owns the object.
    pub fn route(&self, hash: &[u8]) -> Vec<Arc<Backend>> {
        if self.cluster.is_cut() {
            return Vec::new();
        }
        let view = self.cluster.view();
        let key = lacquer_core::ring::digest_key(hash);
        view.candidates(key)
            .take_while(|n| !n.me)
            .map(|n| self.backend(&n.node))
            .collect()
    }

    /// The name of the node that owns the object whose hash input is
    /// `hash`, and whether it is this one (vmod cluster).
    pub fn owner_of(&self, hash: &[u8]) -> Option<(String, bool)> {
        let view = self.cluster.view();
        let owner = view.owner(lacquer_core::ring::digest_key(hash))?;
        Some((owner.node.name.to_string(), owner.me))
    }

    /// The mark of a request this node sends a peer.
    pub fn mark(&self, method: &[u8], url: &[u8]) -> String {
        let now = lacquer_cluster::seal::now_ms();
        self.cluster
            .key
            .mark(&self.cluster.me.name, now, method, url)
    }

    /// The other nodes that take requests.
    pub fn others(&self) -> Vec<Arc<Backend>> {
        if self.cluster.is_cut() {
            return Vec::new();
        }
        let view = self.cluster.view();
        view.nodes
            .iter()
            .filter(|n| !n.me && n.state.routable())
            .map(|n| self.backend(&n.node))
            .collect()
    }

    /// Sends an invalidation made here to the other nodes, from a task
    /// of its own (see `host::spread::send_later`).
    pub fn spread_later(&self, inv: crate::host::invalidation::Invalidation) {
        if let Err(full) = self.later.try_send(inv) {
            // Kept in the journal, for the others to read when they next
            // see this node come up.
            self.record_own(&full.into_inner());
            self.stats.spread_dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Records an invalidation made here in the journal under a new id
    /// (`name.run.seq`); the id.
    pub fn record_own(&self, inv: &crate::host::invalidation::Invalidation) -> String {
        let mut j = self.journal.lock().unwrap_or_else(|e| e.into_inner());
        j.seq += 1;
        let me = &self.cluster.me;
        let id = format!("{}.{}.{}", me.name, me.run, j.seq);
        j.record(id.clone(), inv.clone());
        id
    }

    pub fn count_refused_mark(&self) {
        self.stats.refused_marks.fetch_add(1, Ordering::Relaxed);
    }

    /// The `CLUSTER` counters, in their table's order.
    pub fn counters(&self, out: &mut Vec<u64>) {
        let view = self.cluster.view();
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let (s, c) = (&self.stats, &self.cluster.stats);
        let down = view
            .nodes
            .iter()
            .filter(|n| n.state == lacquer_cluster::NodeState::Down)
            .count();
        let (journal, made) = {
            let j = self.journal.lock().unwrap_or_else(|e| e.into_inner());
            (j.len() as u64, j.own())
        };
        out.extend([
            view.routable() as u64,
            down as u64,
            load(&s.fetched),
            load(&s.failed),
            made,
            load(&s.spread_applied),
            load(&s.spread_failed),
            load(&s.applied_from_peers),
            load(&s.spread_dropped),
            journal,
            load(&s.refused_marks),
            load(&c.received),
            load(&c.sent),
            load(&c.refused),
            load(&c.malformed),
            load(&c.changes),
        ]);
    }

    /// Each peer's backend, by its name, for its `VBE.cluster.<peer>`
    /// counters.
    pub fn peer_backends(&self) -> Vec<(Arc<str>, Arc<Backend>)> {
        let backends = self.backends.lock().unwrap_or_else(|e| e.into_inner());
        backends
            .iter()
            .map(|((name, _), b)| (name.clone(), b.clone()))
            .collect()
    }

    /// An invalidation made here went to peers: how many applied it, how
    /// many did not answer.
    pub fn count_spread(&self, applied: usize, failed: usize) {
        let s = &self.stats;
        s.spread_applied
            .fetch_add(applied as u64, Ordering::Relaxed);
        s.spread_failed.fetch_add(failed as u64, Ordering::Relaxed);
    }

    /// An invalidation made elsewhere was applied here.
    pub fn count_applied(&self) {
        self.stats
            .applied_from_peers
            .fetch_add(1, Ordering::Relaxed);
    }
}

/// `head` (a request head as it goes to the origin) with the peer mark
/// added.
pub(crate) fn marked(head: &[u8], mark: &str) -> Vec<u8> {
    let end = head.len().saturating_sub(2);
    let mut out = Vec::with_capacity(head.len() + mark.len() + 20);
    out.extend_from_slice(&head[..end]);
    out.extend_from_slice(b"Lacquer-Peer: ");
    out.extend_from_slice(mark.as_bytes());
    out.extend_from_slice(b"\r\n\r\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mark_goes_before_the_empty_line() {
        let head = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";
        assert_eq!(
            marked(head, "n 1 ab"),
            b"GET / HTTP/1.1\r\nHost: a\r\nLacquer-Peer: n 1 ab\r\n\r\n"
        );
    }
}

#[cfg(test)]
mod counter_tests {
    use super::*;

    #[test]
    fn the_counters_fill_their_table() {
        let cluster = Cluster::start(lacquer_cluster::Config {
            name: "n".into(),
            bind: "127.0.0.1:0".parse().unwrap(),
            http: "127.0.0.1:80".parse().unwrap(),
            join: Vec::new(),
            secret: b"s".to_vec(),
            replicas: 67,
        })
        .unwrap();
        let peers = Peers::new(cluster);
        let mut v = Vec::new();
        peers.counters(&mut v);
        assert_eq!(v.len(), lacquer_core::counters::CLUSTER.len());
        assert_eq!(v[lacquer_core::counters::ClusterCounter::nodes as usize], 1);
    }
}
