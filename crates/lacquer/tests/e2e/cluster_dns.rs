//! Nodes that find each other in DNS, against a real DNS server
//! (dnsmasq) serving what a Kubernetes headless Service publishes: SRV
//! records naming each pod and its port (`--cluster-join srv:NAME`), and
//! one name's A records with every pod's address (`dns:NAME:PORT`).

use crate::cluster::{alive, cluster_addr, secret};
use crate::harness::{eventually, Lacquer};
use crate::origin::{Origin, Reply};
use std::net::UdpSocket;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A UDP port free at `ip` now.
fn free_port(ip: &str) -> u16 {
    UdpSocket::bind((ip, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// dnsmasq on loopback with `records` (its own options), answering
/// nothing else; stopped when dropped.
struct Dns {
    child: Child,
    port: u16,
}

impl Dns {
    fn start(records: &[String]) -> Dns {
        // dnsmasq binds the port over TCP too, where it may be taken:
        // then it exits, and another port is tried.
        for _ in 0..5 {
            let port = free_port("127.0.0.1");
            let child = Command::new("dnsmasq")
                .args([
                    "--keep-in-foreground",
                    "--conf-file=/dev/null",
                    "--pid-file=",
                    "--listen-address=127.0.0.1",
                    "--bind-interfaces",
                    "--no-resolv",
                    "--no-hosts",
                    "--user=root",
                ])
                .arg(format!("--port={port}"))
                .args(records)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("dnsmasq (Debian's dnsmasq-base; scripts/test installs it)");
            let mut dns = Dns { child, port };
            // Up once it answers a query of its own names.
            let up = eventually(Duration::from_secs(10), || {
                if matches!(dns.child.try_wait(), Ok(Some(_))) {
                    return true;
                }
                let s = UdpSocket::bind("127.0.0.1:0").unwrap();
                s.set_read_timeout(Some(Duration::from_millis(200)))
                    .unwrap();
                // A query for "ready." (type A): any answer will do.
                let q = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x05ready\x00\x00\x01\x00\x01";
                s.send_to(q, ("127.0.0.1", port)).is_ok() && s.recv(&mut [0u8; 512]).is_ok()
            });
            if up && matches!(dns.child.try_wait(), Ok(None)) {
                return dns;
            }
        }
        panic!("dnsmasq did not answer");
    }

    fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for Dns {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn node(
    origin: &Origin,
    name: &str,
    bind: &str,
    join: &str,
    dns: &Dns,
    s: &std::path::Path,
) -> Lacquer {
    let backend = origin.addr.to_string();
    let dns = dns.addr();
    Lacquer::spawn(
        &[
            "-b",
            &backend,
            "-i",
            name,
            "--cluster-bind",
            bind,
            "--cluster-secret",
            s.to_str().unwrap(),
            "--cluster-join",
            join,
            "--cluster-dns",
            &dns,
        ],
        None,
    )
}

#[test]
fn nodes_find_each_other_through_srv_and_a_records() {
    let origin = Origin::start(|_| Reply::ok("x").header("Cache-Control", "max-age=60"));
    let secret = secret("dns");
    // SRV: each pod by its name and port, as for a named port.
    let (pa, pb) = (free_port("127.0.0.1"), free_port("127.0.0.1"));
    // A: one name, every pod's address, one port.
    let pc = free_port("127.0.0.2");
    let service = "_cluster._udp.cache.lq.test";
    let dns = Dns::start(&[
        format!("--srv-host={service},a.cache.lq.test,{pa}"),
        format!("--srv-host={service},b.cache.lq.test,{pb}"),
        "--host-record=a.cache.lq.test,127.0.0.1".into(),
        "--host-record=b.cache.lq.test,127.0.0.1".into(),
        "--host-record=pods.lq.test,127.0.0.2".into(),
        "--host-record=pods.lq.test,127.0.0.3".into(),
    ]);
    let srv = format!("srv:{service}");
    let a = node(
        &origin,
        "a",
        &format!("127.0.0.1:{pa}"),
        &srv,
        &dns,
        &secret,
    );
    let b = node(
        &origin,
        "b",
        &format!("127.0.0.1:{pb}"),
        &srv,
        &dns,
        &secret,
    );
    assert!(
        eventually(Duration::from_secs(15), || alive(&a) == 2 && alive(&b) == 2),
        "{}",
        a.cli_ok("cluster.list")
    );
    assert_eq!(cluster_addr(&b), format!("127.0.0.1:{pb}"));
    let seeds = format!("dns:pods.lq.test:{pc}");
    let c = node(
        &origin,
        "c",
        &format!("127.0.0.2:{pc}"),
        &seeds,
        &dns,
        &secret,
    );
    let d = node(
        &origin,
        "d",
        &format!("127.0.0.3:{pc}"),
        &seeds,
        &dns,
        &secret,
    );
    assert!(
        eventually(Duration::from_secs(15), || alive(&c) == 2 && alive(&d) == 2),
        "{}",
        c.cli_ok("cluster.list")
    );
    let _ = std::fs::remove_file(secret);
}
