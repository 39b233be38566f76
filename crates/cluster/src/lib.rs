//! The cluster: which nodes there are, which of them are alive, and which
//! one owns a key. Membership is SWIM (with suspicion and
//! infection-style dissemination) as the `foca` crate implements it, over
//! UDP, every datagram sealed with a shared secret (`seal`); nodes are
//! found from seeds given as addresses, or as DNS names (A/AAAA or SRV
//! records, `dns`) resolved anew while the node is alone. `node` is a
//! node's identity and how it is written, `codec` foca's messages on the
//! wire, `standing` where each node stands with invalidations (told in
//! every datagram), `view` a node's view of the cluster and the ring over
//! it (the shard director's), and `run` the task that speaks SWIM on the
//! node's behalf and publishes each new view.

#![forbid(unsafe_code)]

pub mod codec;
pub mod dns;
pub mod node;
pub mod peer;
mod run;
pub mod seal;
pub mod standing;
pub mod view;

pub use node::Node;
pub use view::{NodeInfo, NodeState, View};

use arc_swap::ArcSwap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Where a node looks for the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seed {
    Addr(SocketAddr),
    /// A DNS name whose A and AAAA records are the nodes' (what a
    /// Kubernetes headless Service publishes), at a port.
    Dns {
        name: String,
        port: u16,
    },
    /// A DNS name whose SRV records name the nodes and their ports (what
    /// a Kubernetes headless Service publishes for a named port:
    /// `_PORT._udp.SERVICE.NAMESPACE.svc.cluster.local`).
    Srv {
        name: String,
    },
}

/// The cluster port a DNS seed without one is taken at.
pub const DEFAULT_PORT: u16 = 7946;

impl Seed {
    /// `--cluster-join`'s list: `ADDR:PORT[,ADDR:PORT…]`,
    /// `dns:NAME[:PORT]` or `srv:NAME`.
    pub fn parse_list(spec: &str) -> Result<Vec<Seed>, String> {
        let mut seeds = Vec::new();
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            if let Some(name) = part.strip_prefix("srv:") {
                if !dns::valid_name(name) {
                    return Err(format!("--cluster-join {part}: not a DNS name"));
                }
                seeds.push(Seed::Srv {
                    name: name.to_string(),
                });
                continue;
            }
            if let Some(dns) = part.strip_prefix("dns:") {
                let (name, port) = match dns.rsplit_once(':') {
                    Some((name, port)) => (
                        name,
                        port.parse()
                            .map_err(|_| format!("--cluster-join {part}: bad port"))?,
                    ),
                    None => (dns, DEFAULT_PORT),
                };
                if name.is_empty() {
                    return Err(format!("--cluster-join {part}: no name"));
                }
                seeds.push(Seed::Dns {
                    name: name.to_string(),
                    port,
                });
                continue;
            }
            let addr = part.parse().map_err(|_| {
                format!("--cluster-join {part}: not ADDR:PORT, dns:NAME nor srv:NAME")
            })?;
            seeds.push(Seed::Addr(addr));
        }
        if seeds.is_empty() {
            return Err("--cluster-join: no seed".to_string());
        }
        Ok(seeds)
    }
}

/// How a node joins the cluster.
#[derive(Debug, Clone)]
pub struct Config {
    /// Its name on the ring (`-i`).
    pub name: String,
    /// Where it speaks SWIM (UDP); port 0 takes one the kernel picks.
    pub bind: SocketAddr,
    /// Where its peers send it requests.
    pub http: SocketAddr,
    /// Where it looks for the others (none: it starts a cluster alone).
    pub join: Vec<Seed>,
    /// The shared secret every datagram is sealed with.
    pub secret: Vec<u8>,
    /// Points of each node on the ring (the shard director's `replicas`).
    pub replicas: u32,
    /// The DNS server `dns:` and `srv:` seeds are asked (`--cluster-dns`);
    /// None: `srv:` asks the servers of `/etc/resolv.conf` and `dns:` the
    /// system's resolver.
    pub dns: Option<SocketAddr>,
}

/// What the cluster's datagrams did, for counters.
#[derive(Debug, Default)]
pub struct Stats {
    /// Datagrams received whose seal verified.
    pub received: AtomicU64,
    /// Datagrams sent.
    pub sent: AtomicU64,
    /// Datagrams dropped: their seal did not verify or was too old.
    pub refused: AtomicU64,
    /// Sealed datagrams foca could not read.
    pub malformed: AtomicU64,
    /// Changes of membership seen (a node up, down, renamed).
    pub changes: AtomicU64,
}

impl Stats {
    fn add(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// A running membership: this node's view, kept up to date by its own
/// thread.
pub struct Cluster {
    view: ArcSwap<View>,
    /// Where this node speaks SWIM.
    pub local: SocketAddr,
    pub stats: Stats,
    /// This node.
    pub me: Node,
    /// The shared secret's key: seals datagrams and marks peer requests.
    pub key: seal::Key,
    /// Cut off (`debug.cluster_cut`): every datagram in and out is
    /// dropped, as a partition would, and the node's peers are out of
    /// its reach. For testing what a partition does.
    cut: std::sync::atomic::AtomicBool,
    /// Where this node and the others stand with invalidations.
    pub standings: standing::Standings,
    /// Woken when a view with a change of membership is published.
    changed: tokio::sync::Notify,
}

impl Cluster {
    /// Binds the cluster socket and starts speaking SWIM, on a thread of
    /// its own (membership is never stalled by request work, nor the
    /// other way round). Fails when the socket cannot be bound.
    pub fn start(config: Config) -> std::io::Result<Arc<Cluster>> {
        let socket = std::net::UdpSocket::bind(config.bind)?;
        socket.set_nonblocking(true)?;
        let local = socket.local_addr()?;
        let me = Node {
            name: Arc::from(config.name.as_str()),
            addr: local,
            http: config.http,
            // Each start a later run than the last (its identity is new).
            run: seal::now_ms(),
        };
        let cluster = Arc::new(Cluster {
            view: ArcSwap::from_pointee(View::new(&me, [], config.replicas)),
            local,
            stats: Stats::default(),
            me,
            key: seal::Key::new(&config.secret),
            cut: Default::default(),
            changed: Default::default(),
            standings: Default::default(),
        });
        run::spawn(cluster.clone(), socket, config)?;
        Ok(cluster)
    }

    /// This node's view now.
    pub fn view(&self) -> Arc<View> {
        self.view.load_full()
    }

    /// Publishes `view`; `changed` when membership changed.
    fn publish(&self, view: View, changed: bool) {
        self.view.store(Arc::new(view));
        if changed {
            self.changed.notify_waiters();
        }
    }

    /// Waits for the next view published with a change of membership,
    /// or `at_most`.
    pub async fn changed(&self, at_most: std::time::Duration) {
        let _ = tokio::time::timeout(at_most, self.changed.notified()).await;
    }

    /// Cuts the node off from its cluster, or restores it.
    pub fn set_cut(&self, cut: bool) {
        self.cut.store(cut, Ordering::Relaxed);
    }

    /// Whether the node is cut off.
    pub fn is_cut(&self) -> bool {
        self.cut.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn start(name: &str, join: Vec<Seed>, secret: &[u8]) -> Arc<Cluster> {
        Cluster::start(Config {
            name: name.to_string(),
            bind: "127.0.0.1:0".parse().unwrap(),
            http: "127.0.0.1:80".parse().unwrap(),
            join,
            secret: secret.to_vec(),
            replicas: 67,
            dns: None,
        })
        .unwrap()
    }

    /// Waits up to 15 s for `ok` to hold.
    fn wait_for(what: &str, ok: impl Fn() -> bool) {
        let until = Instant::now() + Duration::from_secs(15);
        while !ok() {
            assert!(Instant::now() < until, "{what}: not within 15 s");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn nodes_find_each_other_from_one_seed_and_a_wrong_secret_stays_out() {
        let a = start("a", Vec::new(), b"s3cret");
        let seed = vec![Seed::Addr(a.local)];
        let b = start("b", seed.clone(), b"s3cret");
        let c = start("c", seed.clone(), b"s3cret");
        let intruder = start("x", seed, b"guess");
        let all = [&a, &b, &c];
        wait_for("three nodes alive in every view", || {
            all.iter().all(|n| {
                let v = n.view();
                v.routable() == 3 && v.nodes.iter().all(|i| i.state == NodeState::Alive)
            })
        });
        // Every view gives each key the same owner.
        let views: Vec<_> = all.iter().map(|n| n.view()).collect();
        for key in (0..u32::MAX).step_by(99_999_989) {
            let owners: Vec<_> = views
                .iter()
                .map(|v| v.owner(key).unwrap().node.name.clone())
                .collect();
            assert!(owners.windows(2).all(|w| w[0] == w[1]), "{owners:?}");
        }
        assert!(a.stats.refused.load(Ordering::Relaxed) > 0);
        assert_eq!(intruder.view().routable(), 1);
        assert!(views
            .iter()
            .all(|v| v.nodes.iter().all(|n| &*n.node.name != "x")));
    }

    #[test]
    fn a_join_list_reads_addresses_and_dns_names() {
        assert_eq!(
            Seed::parse_list("127.0.0.1:7000, [::1]:7001").unwrap(),
            [
                Seed::Addr("127.0.0.1:7000".parse().unwrap()),
                Seed::Addr("[::1]:7001".parse().unwrap())
            ]
        );
        assert_eq!(
            Seed::parse_list("dns:cache.default.svc").unwrap(),
            [Seed::Dns {
                name: "cache.default.svc".to_string(),
                port: DEFAULT_PORT
            }]
        );
        assert_eq!(
            Seed::parse_list("dns:cache:7000").unwrap(),
            [Seed::Dns {
                name: "cache".to_string(),
                port: 7000
            }]
        );
        assert_eq!(
            Seed::parse_list("srv:_cluster._udp.cache.default.svc.cluster.local").unwrap(),
            [Seed::Srv {
                name: "_cluster._udp.cache.default.svc.cluster.local".to_string()
            }]
        );
        for bad in [
            "",
            "nowhere",
            "dns:",
            "dns:x:port",
            "1.2.3.4",
            "srv:",
            "srv:a..b",
        ] {
            assert!(Seed::parse_list(bad).is_err(), "{bad}");
        }
    }
}
