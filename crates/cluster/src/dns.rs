//! Finding nodes in DNS, as a Kubernetes headless Service publishes them:
//! a name's A and AAAA records (every pod's address, one port for all),
//! or a service's SRV records (each pod's name and port, the pods' names
//! resolved to addresses from the answer's additional records or by A
//! and AAAA queries of their own). A stub resolver over UDP asks the
//! servers of `/etc/resolv.conf` (or the one `--cluster-dns` names), one
//! after another, a second each; an answer counts only from the server
//! asked, with the query's id and question, and its records only for the
//! names asked about. Messages are built and read by `simple-dns`.

use simple_dns::rdata::RData;
use simple_dns::{Name, Packet, PacketFlag, Question, CLASS, QCLASS, QTYPE, TYPE};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

/// How long one server is given to answer.
const WAIT: Duration = Duration::from_secs(1);
/// The most SRV targets followed from one answer.
const MAX_TARGETS: usize = 256;
/// The largest answer read (over UDP, as EDNS0 allows).
const MAX_ANSWER: usize = 4096;

/// Where queries go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolver {
    servers: Vec<SocketAddr>,
}

impl Resolver {
    /// The servers `/etc/resolv.conf` names (port 53); none when it
    /// cannot be read.
    pub fn system() -> Resolver {
        let text = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
        Resolver {
            servers: nameservers(&text),
        }
    }

    /// One server, at its address and port.
    pub fn at(server: SocketAddr) -> Resolver {
        Resolver {
            servers: vec![server],
        }
    }

    /// The addresses of `name`'s A and AAAA records, at `port`.
    pub async fn addresses(&self, name: &str, port: u16) -> Vec<SocketAddr> {
        let mut out = Vec::new();
        for qtype in [TYPE::A, TYPE::AAAA] {
            if let Some(answer) = self.ask(name, qtype).await {
                out.extend(addresses_in(&answer, name).map(|ip| SocketAddr::new(ip, port)));
            }
        }
        out
    }

    /// Where the SRV records of `name` point: each target's addresses at
    /// its port.
    pub async fn services(&self, name: &str) -> Vec<SocketAddr> {
        let Some(answer) = self.ask(name, TYPE::SRV).await else {
            return Vec::new();
        };
        let Ok(packet) = Packet::parse(&answer) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (target, port) in srv_targets(&packet, name).into_iter().take(MAX_TARGETS) {
            let given: Vec<IpAddr> = addresses_of(&packet.additional_records, &target).collect();
            if given.is_empty() {
                out.extend(self.addresses(&target, port).await);
            } else {
                out.extend(given.into_iter().map(|ip| SocketAddr::new(ip, port)));
            }
        }
        out
    }

    /// The answer to one question, from the first server that gives one.
    async fn ask(&self, name: &str, qtype: TYPE) -> Option<Vec<u8>> {
        let id = query_id();
        let query = query(id, name, qtype)?;
        for server in &self.servers {
            if let Some(answer) = ask_one(*server, &query, id, name, qtype).await {
                return Some(answer);
            }
        }
        None
    }
}

/// Whether `name` is a DNS name a query can carry: labels of 1 to 63
/// bytes (a final dot aside), 253 bytes at most.
pub fn valid_name(name: &str) -> bool {
    let name = name.strip_suffix('.').unwrap_or(name);
    !name.is_empty()
        && name.len() <= 253
        && name
            .split('.')
            .all(|l| !l.is_empty() && l.len() <= 63 && l.bytes().all(|b| b.is_ascii_graphic()))
}

/// The `nameserver` lines of a resolv.conf.
fn nameservers(text: &str) -> Vec<SocketAddr> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("nameserver"))
        .filter_map(|rest| rest.split_whitespace().next()?.parse::<IpAddr>().ok())
        .map(|ip| SocketAddr::new(ip, 53))
        .collect()
}

/// A query id no one off the path can guess: the standard library's
/// hasher keys are drawn from the system's randomness for each hasher.
fn query_id() -> u16 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u8(0);
    h.finish() as u16
}

/// A recursive query for `name`'s records of `qtype`.
fn query(id: u16, name: &str, qtype: TYPE) -> Option<Vec<u8>> {
    let mut packet = Packet::new_query(id);
    packet.set_flags(PacketFlag::RECURSION_DESIRED);
    packet.questions.push(Question::new(
        Name::new(name).ok()?,
        QTYPE::TYPE(qtype),
        QCLASS::CLASS(CLASS::IN),
        false,
    ));
    packet.build_bytes_vec().ok()
}

/// Sends `query` to `server` and waits [`WAIT`] for its answer.
async fn ask_one(
    server: SocketAddr,
    query: &[u8],
    id: u16,
    name: &str,
    qtype: TYPE,
) -> Option<Vec<u8>> {
    let local: SocketAddr = match server {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let socket = tokio::net::UdpSocket::bind(local).await.ok()?;
    socket.connect(server).await.ok()?;
    socket.send(query).await.ok()?;
    let mut buf = vec![0u8; MAX_ANSWER];
    let read = async {
        loop {
            let n = socket.recv(&mut buf).await.ok()?;
            if answers(&buf[..n], id, name, qtype) {
                return Some(buf[..n].to_vec());
            }
        }
    };
    tokio::time::timeout(WAIT, read).await.ok()?
}

/// Whether `data` is an answer to the query `id` for `name` and `qtype`.
fn answers(data: &[u8], id: u16, name: &str, qtype: TYPE) -> bool {
    let Ok(packet) = Packet::parse(data) else {
        return false;
    };
    packet.id() == id
        && packet.has_flags(PacketFlag::RESPONSE)
        && packet.questions.len() == 1
        && same_name(&packet.questions[0].qname, name)
        && packet.questions[0].qtype == QTYPE::TYPE(qtype)
}

/// Whether a name in a message is `name` (letter case aside, a final dot
/// or not).
fn same_name(n: &Name<'_>, name: &str) -> bool {
    n.to_string()
        .trim_end_matches('.')
        .eq_ignore_ascii_case(name.trim_end_matches('.'))
}

/// The addresses of `name` among an answer's records.
fn addresses_in(answer: &[u8], name: &str) -> impl Iterator<Item = IpAddr> {
    let found: Vec<IpAddr> = match Packet::parse(answer) {
        Ok(packet) => addresses_of(&packet.answers, name).collect(),
        Err(_) => Vec::new(),
    };
    found.into_iter()
}

/// The A and AAAA records of `name` among `records`. (A CNAME is not
/// followed: the names a headless Service publishes have none.)
fn addresses_of<'r>(
    records: &'r [simple_dns::ResourceRecord<'_>],
    name: &'r str,
) -> impl Iterator<Item = IpAddr> + 'r {
    records
        .iter()
        .filter(move |r| same_name(&r.name, name))
        .filter_map(|r| match &r.rdata {
            RData::A(a) => Some(IpAddr::V4(Ipv4Addr::from(a.address))),
            RData::AAAA(a) => Some(IpAddr::V6(Ipv6Addr::from(a.address))),
            _ => None,
        })
}

/// The targets and ports of `name`'s SRV records, the lowest priority
/// first ("." stands for no service).
fn srv_targets(packet: &Packet<'_>, name: &str) -> Vec<(String, u16)> {
    let mut found: Vec<(u16, String, u16)> = packet
        .answers
        .iter()
        .filter(|r| same_name(&r.name, name))
        .filter_map(|r| match &r.rdata {
            RData::SRV(srv) => Some((srv.priority, srv.target.to_string(), srv.port)),
            _ => None,
        })
        .filter(|(_, target, _)| !target.trim_end_matches('.').is_empty())
        .collect();
    found.sort();
    found.dedup();
    found.into_iter().map(|(_, t, p)| (t, p)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use simple_dns::{rdata, ResourceRecord};

    #[test]
    fn resolv_conf_names_its_servers() {
        let text = "# comment\nsearch svc.cluster.local\nnameserver 10.96.0.10\nnameserver ::1\nnameserver nonsense\noptions ndots:5\n";
        assert_eq!(
            nameservers(text),
            [
                "10.96.0.10:53".parse::<SocketAddr>().unwrap(),
                "[::1]:53".parse().unwrap()
            ]
        );
    }

    fn answer<'a>(
        id: u16,
        name: &'a str,
        qtype: TYPE,
        records: Vec<ResourceRecord<'a>>,
    ) -> Vec<u8> {
        let mut p = Packet::new_reply(id);
        p.questions.push(Question::new(
            Name::new_unchecked(name),
            QTYPE::TYPE(qtype),
            QCLASS::CLASS(CLASS::IN),
            false,
        ));
        p.answers = records;
        p.build_bytes_vec().unwrap()
    }

    fn record<'a>(name: &'a str, rdata: RData<'a>) -> ResourceRecord<'a> {
        ResourceRecord::new(Name::new_unchecked(name), CLASS::IN, 30, rdata)
    }

    #[test]
    fn an_answer_counts_for_its_own_query_and_names_only() {
        let a = answer(
            7,
            "nodes.test",
            TYPE::A,
            vec![
                record(
                    "nodes.test",
                    RData::A(rdata::A {
                        address: 0x7f000002,
                    }),
                ),
                record(
                    "other.test",
                    RData::A(rdata::A {
                        address: 0x0a000001,
                    }),
                ),
            ],
        );
        assert!(answers(&a, 7, "NODES.test.", TYPE::A));
        assert!(!answers(&a, 8, "nodes.test", TYPE::A));
        assert!(!answers(&a, 7, "other.test", TYPE::A));
        assert!(!answers(&a, 7, "nodes.test", TYPE::AAAA));
        // A query is not an answer.
        assert!(!answers(
            &query(7, "nodes.test", TYPE::A).unwrap(),
            7,
            "nodes.test",
            TYPE::A
        ));
        let found: Vec<IpAddr> = addresses_in(&a, "nodes.test").collect();
        assert_eq!(found, ["127.0.0.2".parse::<IpAddr>().unwrap()]);
        for cut in 0..a.len() {
            assert!(!answers(&a[..cut], 7, "nodes.test", TYPE::A) || cut == a.len());
        }
    }

    #[test]
    fn srv_targets_come_by_priority_and_skip_the_empty_one() {
        let srv = |priority, port, target| {
            RData::SRV(rdata::SRV {
                priority,
                weight: 0,
                port,
                target: Name::new_unchecked(target),
            })
        };
        let data = answer(
            1,
            "_c._udp.s.test",
            TYPE::SRV,
            vec![
                record("_c._udp.s.test", srv(2, 7002, "b.s.test")),
                record("_c._udp.s.test", srv(1, 7001, "a.s.test")),
                record("_c._udp.s.test", srv(1, 7009, ".")),
                record("_x._udp.s.test", srv(0, 9, "x.s.test")),
            ],
        );
        let packet = Packet::parse(&data).unwrap();
        assert_eq!(
            srv_targets(&packet, "_c._udp.s.test"),
            [
                ("a.s.test".to_string(), 7001),
                ("b.s.test".to_string(), 7002)
            ]
        );
    }
}
