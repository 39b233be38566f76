//! The thread that speaks SWIM for a node: a task reads datagrams and
//! opens their seals, timers foca asks for come back as events, and one
//! loop hands each event to foca, sends what it says to send (sealed),
//! and publishes a new view when membership changed (and once a second,
//! for suspicions, which foca does not announce). While the node knows no
//! other, it announces itself to its seeds each second (DNS names
//! resolved anew each time), which is also how a node cut off finds its
//! way back.

use crate::codec::Wire;
use crate::dns::Resolver;
use crate::node::Node;
use crate::seal::{self, Key};
use crate::standing::{self, Standing};
use crate::view::{NodeState, View};
use crate::{Cluster, Config, Seed, Stats};
use foca::{AccumulatingRuntime, Foca, NoCustomBroadcast, OwnedNotification, State, Timer};
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::UdpSocket;
use tokio::sync::mpsc;

/// How often a node alone announces itself to its seeds, and the view is
/// published anew.
const TICK: Duration = Duration::from_secs(1);

/// The largest datagram read.
const MAX_DATAGRAM: usize = 64 * 1024;

enum Event {
    Data(Vec<u8>),
    Timer(Timer<Node>),
    Tick,
}

type Swim = Foca<Node, Wire, SplitMix, NoCustomBroadcast>;

/// Starts the node's SWIM thread on `socket`.
pub(crate) fn spawn(
    cluster: Arc<Cluster>,
    socket: std::net::UdpSocket,
    config: Config,
) -> std::io::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name("cluster".to_string())
        .spawn(move || rt.block_on(run(cluster, socket, config)))?;
    Ok(())
}

/// SWIM's timings, for nodes on one network: a probe every 750 ms, an
/// answer within 300 ms, and a node suspected for 1.5 s before it is down
/// (a node that dies is out of routing within about three seconds).
fn swim_config() -> foca::Config {
    let mut c = foca::Config::new_lan(NonZeroU32::new(16).expect("not zero"));
    c.probe_period = Duration::from_millis(750);
    c.probe_rtt = Duration::from_millis(300);
    c.suspect_to_down_after = Duration::from_millis(1500);
    c.max_packet_size =
        std::num::NonZeroUsize::new(1400 - seal::OVERHEAD - standing::LEN).expect("not zero");
    c.notify_down_members = true;
    c
}

async fn run(cluster: Arc<Cluster>, socket: std::net::UdpSocket, config: Config) {
    let Ok(socket) = UdpSocket::from_std(socket) else {
        return;
    };
    let socket = Arc::new(socket);
    let key = cluster.key.clone();
    let (tx, mut rx) = mpsc::unbounded_channel();
    tokio::spawn(receive(
        socket.clone(),
        key.clone(),
        tx.clone(),
        cluster.clone(),
    ));
    let ticks = tx.clone();
    tokio::spawn(async move {
        let mut every = tokio::time::interval(TICK);
        loop {
            every.tick().await;
            if ticks.send(Event::Tick).is_err() {
                return;
            }
        }
    });
    let mut swim: Swim = Foca::new(
        cluster.me.clone(),
        swim_config(),
        SplitMix::seeded(cluster.me.run ^ u64::from(cluster.local.port())),
        Wire,
    );
    let mut out = AccumulatingRuntime::new();
    let mut suspicions = Suspicions::default();
    announce(&mut swim, &mut out, &config.join, config.dns).await;
    let sender = Sender {
        cluster: &cluster,
        socket: &socket,
        key: &key,
        events: &tx,
    };
    sender.flush(&mut out).await;
    while let Some(event) = rx.recv().await {
        let tick = matches!(event, Event::Tick);
        let _ = match event {
            Event::Data(data) => swim.handle_data(&data, &mut out).map_err(|_| {
                Stats::add(&cluster.stats.malformed);
            }),
            Event::Timer(timer) => swim.handle_timer(timer, &mut out).map_err(drop),
            Event::Tick => {
                if swim.num_members() == 0 {
                    announce(&mut swim, &mut out, &config.join, config.dns).await;
                }
                suspicions.raise_lingering(&mut swim, &mut out);
                Ok(())
            }
        };
        // A change of membership is published at once; a suspicion
        // (which foca does not announce, and which routes as before)
        // with the next tick.
        let changed = sender.flush(&mut out).await;
        if changed || tick {
            publish(&cluster, &swim, config.replicas, changed);
        }
    }
}

/// How long a suspicion may stand before it is said again: twice the
/// time a suspected node has to refute it.
const LINGERING: Duration = Duration::from_secs(3);

/// Suspicions that neither ended nor were refuted. A node refutes a
/// suspicion when it hears of it; when every datagram that said it was
/// lost (a partition: the suspicion's rounds of gossip went nowhere) and
/// the node answers probes again, nothing would ever end it, and it
/// would stay suspect for good. Such a suspicion is said again, one
/// incarnation higher, and gossiped anew: the node hears it and refutes
/// it, or fails a probe and is declared down.
#[derive(Default)]
struct Suspicions {
    /// Each suspected node, at the incarnation it was suspected, and
    /// since when.
    since: Vec<(Node, u16, std::time::Instant)>,
}

impl Suspicions {
    fn raise_lingering(&mut self, swim: &mut Swim, out: &mut AccumulatingRuntime<Node>) {
        let now = std::time::Instant::now();
        let suspects: Vec<(Node, u16)> = swim
            .iter_membership_state()
            .filter(|m| m.state() == State::Suspect)
            .map(|m| (m.id().clone(), m.incarnation()))
            .collect();
        self.since
            .retain(|(n, inc, _)| suspects.iter().any(|(m, i)| m == n && i == inc));
        let mut again = Vec::new();
        for (node, inc) in suspects {
            match self.since.iter().find(|(n, i, _)| *n == node && *i == inc) {
                Some((_, _, at)) if now.duration_since(*at) > LINGERING => {
                    again.push(foca::Member::new(node, inc.wrapping_add(1), State::Suspect));
                }
                Some(_) => {}
                None => self.since.push((node, inc, now)),
            }
        }
        if !again.is_empty() {
            let _ = swim.apply_many(again.into_iter(), true, out);
        }
    }
}

/// The view foca's members make now.
fn publish(cluster: &Cluster, swim: &Swim, replicas: u32, changed: bool) {
    let others = swim.iter_membership_state().map(|m| {
        let state = match m.state() {
            State::Alive => NodeState::Alive,
            State::Suspect => NodeState::Suspect,
            State::Down => NodeState::Down,
        };
        (m.id().clone(), state)
    });
    let mut view = View::new(&cluster.me, others, replicas);
    for n in &mut view.nodes {
        n.standing = match n.me {
            true => Some(cluster.standings.own()),
            false => cluster.standings.of(n.node.addr),
        };
    }
    cluster.publish(view, changed);
}

/// Announces this node to every seed (DNS names resolved now).
async fn announce(
    swim: &mut Swim,
    out: &mut AccumulatingRuntime<Node>,
    seeds: &[Seed],
    dns: Option<std::net::SocketAddr>,
) {
    for seed in seeds {
        let addrs: Vec<std::net::SocketAddr> = match (seed, dns) {
            (Seed::Addr(addr), _) => vec![*addr],
            (Seed::Dns { name, port }, Some(server)) => {
                Resolver::at(server).addresses(name, *port).await
            }
            (Seed::Dns { name, port }, None) => {
                match tokio::net::lookup_host((name.as_str(), *port)).await {
                    Ok(found) => found.collect(),
                    Err(_) => Vec::new(),
                }
            }
            (Seed::Srv { name }, server) => {
                let resolver = server.map_or_else(Resolver::system, Resolver::at);
                resolver.services(name).await
            }
        };
        let me = swim.identity().addr;
        for addr in addrs.into_iter().filter(|a| *a != me) {
            let _ = swim.announce(Node::seed(addr), &mut *out);
        }
    }
}

/// Where what foca asks for goes.
struct Sender<'a> {
    cluster: &'a Cluster,
    socket: &'a UdpSocket,
    key: &'a Key,
    events: &'a mpsc::UnboundedSender<Event>,
}

impl Sender<'_> {
    /// Sends what foca wrote (sealed), schedules the timers it asked
    /// for; true when membership changed.
    async fn flush(&self, out: &mut AccumulatingRuntime<Node>) -> bool {
        while let Some((to, data)) = out.to_send() {
            if self.cluster.is_cut() {
                continue;
            }
            let mut message = self.cluster.standings.own().encode().to_vec();
            message.extend_from_slice(&data);
            let sealed = self.key.seal(&message, seal::now_ms());
            if self.socket.send_to(&sealed, to.addr).await.is_ok() {
                Stats::add(&self.cluster.stats.sent);
            }
        }
        while let Some((after, timer)) = out.to_schedule() {
            let events = self.events.clone();
            tokio::spawn(async move {
                tokio::time::sleep(after).await;
                let _ = events.send(Event::Timer(timer));
            });
        }
        let mut changed = false;
        while let Some(n) = out.to_notify() {
            if matches!(
                n,
                OwnedNotification::MemberUp(_)
                    | OwnedNotification::MemberDown(_)
                    | OwnedNotification::Rename(..)
            ) {
                Stats::add(&self.cluster.stats.changes);
            }
            changed = true;
        }
        changed
    }
}

/// Reads datagrams; those whose seal opens become events.
async fn receive(
    socket: Arc<UdpSocket>,
    key: Key,
    events: mpsc::UnboundedSender<Event>,
    cluster: Arc<Cluster>,
) {
    let mut buf = vec![0u8; MAX_DATAGRAM];
    loop {
        let Ok((n, from)) = socket.recv_from(&mut buf).await else {
            continue;
        };
        if cluster.is_cut() {
            continue;
        }
        let Some(message) = key.open(&buf[..n], seal::now_ms()) else {
            Stats::add(&cluster.stats.refused);
            continue;
        };
        Stats::add(&cluster.stats.received);
        let Some((standing, message)) = Standing::decode(message) else {
            Stats::add(&cluster.stats.malformed);
            continue;
        };
        cluster.standings.heard(from, standing);
        if events.send(Event::Data(message.to_vec())).is_err() {
            return;
        }
    }
}

/// The random numbers foca picks members with: SplitMix64, seeded per
/// node (nothing here needs them to be unguessable).
pub(crate) struct SplitMix(u64);

impl SplitMix {
    fn seeded(seed: u64) -> Self {
        SplitMix(seed)
    }
}

impl rand::RngCore for SplitMix {
    fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn fill_bytes(&mut self, dst: &mut [u8]) {
        for chunk in dst.chunks_mut(8) {
            let n = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&n[..chunk.len()]);
        }
    }
}
