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
use lacquer_cluster::standing::Standing;
use lacquer_cluster::{Cluster, Node, NodeState};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A peer's backend, by its name and where it is reached.
type PeerBackends = HashMap<(Arc<str>, SocketAddr), Arc<Backend>>;

/// What one other node did with this one (its `PEER.<node>` counters).
#[derive(Debug, Default)]
pub(crate) struct PeerCounters {
    pub fetch: AtomicU64,
    pub fetch_unreachable: AtomicU64,
    pub inval_sent: AtomicU64,
    pub inval_unanswered: AtomicU64,
    pub inval_applied: AtomicU64,
    /// The latest of its own invalidations applied here: its run and
    /// sequence number.
    applied_at: Mutex<(u64, u64)>,
}

impl PeerCounters {
    fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// How many of the invalidations it says it made were not applied
    /// here.
    fn lag(&self, standing: Option<Standing>) -> u64 {
        let Some(s) = standing else {
            return 0;
        };
        let (run, seq) = *self.applied_at.lock().unwrap_or_else(|e| e.into_inner());
        match run == s.run {
            true => s.position.saturating_sub(seq),
            false => s.position,
        }
    }
}

/// This node's cluster and its connections to the others.
pub(crate) struct Peers {
    pub cluster: Arc<Cluster>,
    /// A backend for each peer (its pool of connections), by address.
    backends: Mutex<PeerBackends>,
    /// What each other node did with this one, by its name.
    each: Mutex<HashMap<Arc<str>, Arc<PeerCounters>>>,
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
            each: Mutex::new(HashMap::new()),
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
    /// node owns the object. As the shard director does, an owner that
    /// started less than `rampup` seconds ago is passed over for the next
    /// node with a probability that falls from 1 to 0 over that time, and
    /// any owner with the probability `warmup`.
    pub fn route(&self, hash: &[u8], rampup: f64, warmup: f64) -> Vec<Arc<Backend>> {
        if self.cluster.is_cut() {
            return Vec::new();
        }
        let view = self.cluster.view();
        let key = lacquer_core::ring::digest_key(hash);
        let mut order: Vec<_> = view.candidates(key).collect();
        if order.len() > 1 && passed_over(&order[0].node, rampup, warmup) {
            order.swap(0, 1);
        }
        order
            .into_iter()
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
        drop(j);
        self.refresh_standing();
        id
    }

    /// The counters of the node named `name`.
    pub fn of(&self, name: &str) -> Arc<PeerCounters> {
        let mut each = self.each.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = each.get(name) {
            return c.clone();
        }
        each.entry(Arc::from(name)).or_default().clone()
    }

    /// The counters of the node a peer backend reaches.
    pub fn of_backend(&self, peer: &Backend) -> Arc<PeerCounters> {
        self.of(peer.name.strip_prefix("cluster.").unwrap_or(&peer.name))
    }

    /// A miss asked `peer`: whether it answered.
    pub fn count_fetch(&self, peer: &Backend, answered: bool) {
        let c = self.of_backend(peer);
        let s = &self.stats;
        tally(
            answered,
            [&c.fetch, &s.fetched],
            [&c.fetch_unreachable, &s.failed],
        );
    }

    /// An invalidation whose id is `id` (`name.run.seq`, made at node
    /// `name`) was applied here.
    pub fn count_applied_id(&self, id: &str) {
        PeerCounters::add(&self.stats.applied_from_peers, 1);
        let mut parts = id.rsplitn(3, '.');
        let (Some(seq), Some(run), Some(name)) = (parts.next(), parts.next(), parts.next()) else {
            return;
        };
        let (Ok(seq), Ok(run)) = (seq.parse::<u64>(), run.parse::<u64>()) else {
            return;
        };
        // Counted apart for the nodes there are, not for any name an id
        // carries.
        if !self
            .cluster
            .view()
            .nodes
            .iter()
            .any(|n| &*n.node.name == name)
        {
            return;
        }
        let c = self.of(name);
        PeerCounters::add(&c.inval_applied, 1);
        let mut at = c.applied_at.lock().unwrap_or_else(|e| e.into_inner());
        *at = (*at).max((run, seq));
    }

    /// Says anew where this node stands (its position, and what it
    /// lacks of every node it sees), in its next datagrams.
    pub fn refresh_standing(&self) {
        let view = self.cluster.view();
        let lag = view
            .nodes
            .iter()
            .filter(|n| !n.me && n.state.routable())
            .map(|n| self.of(&n.node.name).lag(n.standing))
            .sum();
        let position = self.journal.lock().unwrap_or_else(|e| e.into_inner()).seq;
        self.cluster.standings.set_own(Standing {
            run: self.cluster.me.run,
            position,
            lag,
        });
    }

    /// Each other node's `PEER` counters, by its name, in their table's
    /// order.
    pub fn each_peer(&self) -> Vec<(Arc<str>, Vec<u64>)> {
        let view = self.cluster.view();
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        view.nodes
            .iter()
            .filter(|n| !n.me)
            .map(|n| {
                let c = self.of(&n.node.name);
                let state = match n.state {
                    NodeState::Alive => 2,
                    NodeState::Suspect => 1,
                    NodeState::Down => 0,
                };
                let standing = n.standing.unwrap_or_default();
                let values = vec![
                    state,
                    (n.share * 1e6).round() as u64,
                    load(&c.fetch),
                    load(&c.fetch_unreachable),
                    load(&c.inval_sent),
                    load(&c.inval_unanswered),
                    load(&c.inval_applied),
                    standing.position,
                    c.lag(n.standing),
                    standing.lag,
                ];
                (n.node.name.clone(), values)
            })
            .collect()
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

    /// An invalidation made here went to `peer`: whether it applied it.
    pub fn count_spread(&self, peer: &Backend, applied: bool) {
        let c = self.of_backend(peer);
        let s = &self.stats;
        tally(
            applied,
            [&c.inval_sent, &s.spread_applied],
            [&c.inval_unanswered, &s.spread_failed],
        );
    }
}

/// Adds one to a peer's counter and to the all-peers one: the pair
/// `yes` when `ok`, else the pair `no`.
fn tally(ok: bool, yes: [&AtomicU64; 2], no: [&AtomicU64; 2]) {
    for c in if ok { yes } else { no } {
        c.fetch_add(1, Ordering::Relaxed);
    }
}

/// Whether a request for a key `owner` owns goes to the next node
/// first: while the owner ramps up (its run began less than `rampup`
/// seconds ago: the later, the likelier it is taken), or to warm the next
/// node up (`warmup` of the time).
fn passed_over(owner: &Node, rampup: f64, warmup: f64) -> bool {
    let random = lacquer_vcl::vmod::random();
    let up = lacquer_cluster::seal::now_ms().saturating_sub(owner.run) as f64 / 1000.0;
    if rampup > 0.0 && up < rampup {
        return random * rampup >= up;
    }
    warmup > 0.0 && random < warmup
}

/// Logs each change of membership this node sees, as a `Cluster` record
/// (`NAME RUN STATE CLUSTER_ADDR HTTP_ADDR`), for the daemon's life.
pub(crate) async fn log_membership(sh: Arc<crate::Shared>) {
    let Some(peers) = sh.cluster.as_ref() else {
        return;
    };
    let mut known: HashMap<(Arc<str>, u64), NodeState> = HashMap::new();
    loop {
        let view = peers.cluster.view();
        for n in view.nodes.iter().filter(|n| !n.me) {
            let key = (n.node.name.clone(), n.node.run);
            if known.get(&key) == Some(&n.state) {
                continue;
            }
            known.insert(key, n.state);
            let mut txn = sh.txn(0, lacquer_shm::Side::None);
            txn.fmt(
                lacquer_shm::Tag::Cluster,
                format_args!(
                    "{} {} {} {} {}",
                    n.node.name,
                    n.node.run,
                    n.state.word(),
                    n.node.addr,
                    n.node.http
                ),
            );
        }
        // The runs no longer in the view are forgotten.
        known.retain(|(name, run), _| {
            view.nodes
                .iter()
                .any(|n| n.node.name == *name && n.node.run == *run)
        });
        peers
            .cluster
            .changed(std::time::Duration::from_secs(1))
            .await;
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
    fn an_owner_ramps_up_and_a_share_warms_the_next_node() {
        let node = |age_ms: u64| Node {
            name: Arc::from("n"),
            addr: "127.0.0.1:1".parse().unwrap(),
            http: "127.0.0.1:2".parse().unwrap(),
            run: lacquer_cluster::seal::now_ms() - age_ms,
        };
        let share = |owner: &Node, rampup, warmup| {
            (0..10_000)
                .filter(|_| passed_over(owner, rampup, warmup))
                .count() as f64
                / 10_000.0
        };
        // Off: the owner always.
        assert_eq!(share(&node(0), 0.0, 0.0), 0.0);
        // Up for a quarter of its 60 s ramp: passed over about 3 times in 4.
        let quarter = share(&node(15_000), 60.0, 0.0);
        assert!((0.7..0.8).contains(&quarter), "{quarter}");
        // Ramped up: only warmup passes it over.
        assert_eq!(share(&node(61_000), 60.0, 0.0), 0.0);
        let warm = share(&node(61_000), 60.0, 0.1);
        assert!((0.08..0.12).contains(&warm), "{warm}");
    }

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
            dns: None,
        })
        .unwrap();
        let peers = Peers::new(cluster);
        let mut v = Vec::new();
        peers.counters(&mut v);
        assert_eq!(v.len(), lacquer_core::counters::CLUSTER.len());
        assert_eq!(v[lacquer_core::counters::ClusterCounter::nodes as usize], 1);
    }
}
