//! Three daemons in a cluster on loopback, in front of one origin: they
//! find each other from one seed, each object is fetched from the origin
//! once for the whole cluster, a node killed (SIGKILL) leaves routing
//! while the others go on answering, and comes back when it restarts.

use crate::harness::{eventually, Lacquer};
use crate::origin::{Origin, Reply};
use std::time::{Duration, Instant};

/// A file holding the cluster's shared secret.
pub(crate) fn secret(tag: &str) -> std::path::PathBuf {
    let path =
        std::env::temp_dir().join(format!("lacquer-e2e-cluster-{}-{tag}", std::process::id()));
    std::fs::write(&path, "not so secret\n").unwrap();
    path
}

/// A node of the cluster in front of `origin`: with `-b`, or with
/// `vcl` when given.
fn node_with(
    origin: &Origin,
    name: &str,
    secret: &std::path::Path,
    join: Option<&str>,
    vcl: Option<String>,
) -> Lacquer {
    let secret = secret.to_str().unwrap();
    let backend = origin.addr.to_string();
    let mut args = vec![
        "--dashboard",
        "127.0.0.1:0",
        "-i",
        name,
        "--cluster-bind",
        "127.0.0.1:0",
        "--cluster-secret",
        secret,
    ];
    if vcl.is_none() {
        args.extend(["-b", backend.as_str()]);
    }
    if let Some(seed) = join {
        args.extend(["--cluster-join", seed]);
    }
    Lacquer::spawn(&args, vcl)
}

fn node(origin: &Origin, name: &str, secret: &std::path::Path, join: Option<&str>) -> Lacquer {
    node_with(origin, name, secret, join, None)
}

/// Where a node speaks SWIM, from `cluster.list -j`.
pub(crate) fn cluster_addr(n: &Lacquer) -> String {
    let list = n.cli_ok("cluster.list -j");
    let me = list
        .split("\"self\": true")
        .nth(1)
        .expect("this node is listed");
    let at = me.split("\"cluster\": \"").nth(1).unwrap();
    at[..at.find('"').unwrap()].to_string()
}

/// Whether a node sees one node down (out of routing).
fn sees_one_down(n: &Lacquer) -> bool {
    n.cli_ok("cluster.list -j")
        .matches("\"state\": \"down\"")
        .count()
        == 1
}

/// How many nodes a node sees alive.
pub(crate) fn alive(n: &Lacquer) -> usize {
    n.cli_ok("cluster.list -j")
        .matches("\"state\": \"alive\"")
        .count()
}

#[test]
fn three_nodes_fetch_each_object_once_and_outlive_one_killed() {
    let origin = Origin::start(|s| {
        Reply::ok(&format!("body of {}", s.url)).header("Cache-Control", "max-age=300")
    });
    let secret = secret("three");
    let a = node(&origin, "a", &secret, None);
    let seed = cluster_addr(&a);
    let b = node(&origin, "b", &secret, Some(&seed));
    let c = node(&origin, "c", &secret, Some(&seed));
    assert!(
        eventually(Duration::from_secs(15), || [&a, &b, &c]
            .iter()
            .all(|n| alive(n) == 3)),
        "{}",
        a.cli_ok("cluster.list")
    );
    // Each URL asked once at every node: the origin sees it once.
    for i in 0..150 {
        for n in [&a, &b, &c] {
            let url = format!("/o/{i}");
            let r = n.get(&url);
            assert_eq!(r.status, 200, "{url}");
            assert_eq!(r.text(), format!("body of {url}"));
            assert_eq!(
                r.count("x-varnish"),
                1,
                "{url}: {:?}",
                r.header("x-varnish")
            );
        }
    }
    for i in 0..150 {
        assert_eq!(origin.count(&format!("/o/{i}")), 1, "/o/{i}");
    }
    // A copy from the owner is kept (cluster_copy_ttl, 120 s): asked
    // again, nothing goes through the owner. With 0 nothing is kept:
    // every miss at a non-owner goes through the owner again.
    // (Read from cluster.list, which reads them as they are now: the
    // counters' copy for the tools lags by up to a flush.)
    let fetched = || {
        let list = a.cli_ok("cluster.list");
        let at = list.split("Peer fetches: ").nth(1).unwrap();
        at[..at.find(' ').unwrap()].parse::<u64>().unwrap()
    };
    let twice = |prefix: &str| {
        let start = fetched();
        for _ in 0..2 {
            for i in 0..30 {
                assert_eq!(a.get(&format!("/{prefix}/{i}")).status, 200);
            }
        }
        fetched() - start
    };
    let kept = twice("kept");
    assert!(kept > 0, "some of 30 URLs are another node's");
    a.cli_ok("param.set cluster_copy_ttl 0");
    let through = twice("not-kept");
    a.cli_ok("param.set cluster_copy_ttl 120");
    assert!(through > kept * 3 / 2, "kept {kept}, not kept {through}");
    for i in 0..30 {
        assert_eq!(origin.count(&format!("/not-kept/{i}")), 1);
    }
    // A mark that does not verify is taken off and counts for nothing;
    // none reaches the origin.
    let r = a.connect().get("/forged", &[("Lacquer-Peer", "b 1 00")]);
    assert_eq!(r.status, 200);
    assert!(origin
        .seen()
        .iter()
        .all(|s| s.header("lacquer-peer").is_none()));
    assert!(a.cli_ok("cluster.list").contains("marks refused: 1"));
    // SIGKILL one: the others answer every request meanwhile, and take
    // it out of routing.
    drop(c);
    let killed = Instant::now();
    let mut i = 0;
    while !(sees_one_down(&a) && sees_one_down(&b)) {
        assert!(
            killed.elapsed() < Duration::from_secs(15),
            "the killed node is still routed to"
        );
        for n in [&a, &b] {
            let r = n.get(&format!("/k/{i}"));
            assert_eq!(r.status, 200, "/k/{i} while a node is down");
        }
        i += 1;
    }
    let out_after = killed.elapsed();
    // The log says so (a Cluster record per change of membership).
    let log = std::process::Command::new(env!("CARGO_BIN_EXE_lacquer"))
        .args(["log", "-d", "-g", "raw", "-i", "Cluster", "-n"])
        .arg(&a.workdir)
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&log.stdout);
    let said = |state: &str| {
        log.lines()
            .any(|l| l.contains("Cluster") && l.contains(" c ") && l.contains(state))
    };
    assert!(said(" alive ") && said(" down "), "{log}");
    for n in [&a, &b] {
        for i in 0..20 {
            assert_eq!(n.get(&format!("/after/{i}")).status, 200);
        }
    }
    // Restarted, it rejoins and takes its share again.
    let c = node(&origin, "c", &secret, Some(&seed));
    assert!(eventually(Duration::from_secs(15), || {
        [&a, &b, &c].iter().all(|n| alive(n) == 3)
    }));
    let list = c.cli_ok("cluster.list");
    assert!(list.contains("c (this node)"), "{list}");
    eprintln!("a killed node was out of routing after {out_after:?}");
    let _ = std::fs::remove_file(secret);
}

#[test]
fn cluster_options_are_checked() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lacquer"))
        .args([
            "serve",
            "-b",
            "127.0.0.1:1",
            "--cluster-bind",
            "127.0.0.1:0",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--cluster-secret"));
}

/// A program that purges on `PURGE`, in front of `origin`.
fn purging_vcl(origin: &Origin) -> String {
    format!(
        "vcl 4.1;\nimport cluster;\n\
         backend default {{ .host = \"127.0.0.1\"; .port = \"{}\"; }}\n\
         sub vcl_recv {{ if (req.method == \"PURGE\") {{ return (purge); }} \
         if (req.method == \"BAN\") {{ ban(\"req.url ~ \" + req.url); return (synth(204)); }} \
         if (req.url ~ \"^/self-routed/\") {{ set req.backend_hint = cluster.backend(); return (pass); }} }}\n\
         sub vcl_backend_response {{ set beresp.http.x-owner = cluster.owner(); \
         if (!beresp.http.x-fetched-by) {{ set beresp.http.x-fetched-by = server.identity; }} }}\n\
         sub vcl_deliver {{ set resp.http.x-self = cluster.self(); \
         set resp.http.x-is-owner = cluster.is_owner(); \
         set resp.http.x-owner-here = cluster.owner(); }}\n",
        origin.addr.port()
    )
}

fn purging_node(
    origin: &Origin,
    name: &str,
    secret: &std::path::Path,
    join: Option<&str>,
) -> Lacquer {
    node_with(origin, name, secret, join, Some(purging_vcl(origin)))
}

/// Three purging nodes, a, b and c, that see each other alive: the
/// secret's file, the seed (a's cluster address) and the nodes.
fn three_purging_nodes(origin: &Origin, tag: &str) -> (std::path::PathBuf, String, [Lacquer; 3]) {
    let secret = secret(tag);
    let a = purging_node(origin, "a", &secret, None);
    let seed = cluster_addr(&a);
    let b = purging_node(origin, "b", &secret, Some(&seed));
    let c = purging_node(origin, "c", &secret, Some(&seed));
    assert!(eventually(Duration::from_secs(15), || [&a, &b, &c]
        .iter()
        .all(|n| alive(n) == 3)));
    (secret, seed, [a, b, c])
}

#[test]
fn purges_bans_and_tag_purges_reach_every_node_and_one_that_missed_them_catches_up() {
    // Each answer names how many times the origin was asked for its URL.
    let origin = Origin::start(|s| {
        Reply::ok(&format!("{}", s.url.len()))
            .header("Cache-Control", "max-age=300")
            .header("xkey", "tag-x")
    });
    let versions = {
        let seen = &origin;
        move |url: &str| seen.count(url)
    };
    let (secret, seed, [a, b, c]) = three_purging_nodes(&origin, "spread");
    let all = [&a, &b, &c];
    let urls = ["/p/1", "/b/1", "/x/1"];
    for url in urls {
        let mut owners = Vec::new();
        let mut owning = 0;
        for (n, name) in all.iter().zip(["a", "b", "c"]) {
            let r = n.get(url);
            assert_eq!(r.status, 200);
            // vmod cluster: the same owner everywhere (on the backend
            // side and in vcl_deliver), each node itself, one owner.
            owners.push(r.header("x-owner").unwrap().to_string());
            assert_eq!(r.header("x-owner-here"), r.header("x-owner"));
            assert_eq!(r.header("x-self"), Some(name));
            owning += usize::from(r.header("x-is-owner") == Some("true"));
        }
        assert_eq!(owning, 1, "{url}");
        assert!(owners.windows(2).all(|w| w[0] == w[1]), "{owners:?}");
        assert!(["a", "b", "c"].contains(&owners[0].as_str()));
        assert_eq!(versions(url), 1, "{url}");
    }
    // cluster.backend(): a pass goes through the owner, which passes
    // to the origin (its default backend).
    for (n, i) in all.iter().zip(0..) {
        let r = n.get("/self-routed/1");
        assert_eq!(r.status, 200);
        assert_eq!(r.header("x-fetched-by"), r.header("x-owner-here"));
        assert_eq!(origin.count("/self-routed/1"), i + 1);
    }
    // A purge at one node: gone from all three, as its answer says.
    let r = a.connect().request("PURGE", "/p/1", &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("lacquer-invalidated"), Some("3/3"));
    // A ban from the CLI, a tag purge from the CLI.
    assert!(b.cli_ok("ban req.url ~ ^/b/").contains("on 3/3 nodes"));
    assert!(c.cli_ok("xkey.purge tag-x").contains("on 3/3 nodes"));
    // Every node now fetches each anew (the first through the owner, the
    // others from it): one more origin request a URL, and none serves the
    // old copy. /x/1 carries the tag; /p/1 and /b/1 do too, and were
    // invalidated twice over, which changes nothing.
    for url in urls {
        for n in all {
            assert_eq!(n.get(url).status, 200);
        }
        assert_eq!(versions(url), 2, "{url}");
    }
    // A node down misses a ban; restarted, it reads it from the others.
    drop(c);
    assert!(eventually(Duration::from_secs(15), || sees_one_down(&a)
        && sees_one_down(&b)));
    let reply = a.cli_ok("ban req.url ~ ^/while-away/");
    assert!(reply.contains("on 2/2 nodes"), "{reply}");
    // Applied before it serves: as soon as it says it runs, it has applied
    // the four invalidations made while it was away or before it came
    // (its ban list may have let the bans go already: its cache is empty).
    let c = purging_node(&origin, "c", &secret, Some(&seed));
    let list = c.cli_ok("cluster.list");
    assert!(
        list.contains("4 made elsewhere applied here; journal of 4"),
        "{list}"
    );
    let list = a.cli_ok("cluster.list");
    assert!(list.contains("Invalidations: 2 made here"), "{list}");
    // Every node knows where the others stand: a made two, and no node
    // lacks any; each peer's counters say what it did with this node.
    let standing = |n: &Lacquer, of: &str| {
        let list = n.cli_ok("cluster.list -j");
        let at = list
            .split(&format!("\"name\": \"{of}\""))
            .nth(1)
            .unwrap()
            .to_string();
        let field = |f: &str| {
            let v = at.split(&format!("\"{f}\": ")).nth(1).unwrap();
            v[..v.find(|c: char| !c.is_ascii_alphanumeric()).unwrap()].to_string()
        };
        (field("position"), field("lag"))
    };
    assert!(eventually(Duration::from_secs(10), || {
        [&b, &c]
            .iter()
            .all(|n| standing(n, "a") == ("2".into(), "0".into()))
    }));
    assert!(eventually(Duration::from_secs(10), || {
        c.counter("PEER.a.inval_applied") == 2 && a.counter("PEER.b.inval_sent") >= 1
    }));
    // The counters say it too, for varnishstat's tools and /metrics.
    assert!(eventually(Duration::from_secs(10), || {
        a.counter("CLUSTER.inval_made") == 2 && a.counter("CLUSTER.nodes") == 3
    }));
    assert!(eventually(Duration::from_secs(10), || {
        all_fetches(&[&a, &b]) > 0
    }));
    let _ = std::fs::remove_file(secret);
}

/// The misses the owners answered, over these nodes.
fn all_fetches(nodes: &[&Lacquer]) -> u64 {
    nodes.iter().map(|n| n.counter("CLUSTER.fetch")).sum()
}

#[test]
fn a_node_cut_off_serves_nothing_purged_while_away_once_back_and_vcl_bans_spread() {
    let origin = Origin::start(|s| {
        Reply::ok(&format!("{}", s.url.len())).header("Cache-Control", "max-age=300")
    });
    let (secret, _, [a, b, c]) = three_purging_nodes(&origin, "cut");
    let all = [&a, &b, &c];
    let ask_everywhere = |url: &str| {
        for n in all {
            assert_eq!(n.get(url).status, 200, "{url}");
        }
    };
    // VCL's ban() goes everywhere from the queue, without a caller
    // waiting on it.
    ask_everywhere("/vb/1");
    let applied = |n: &Lacquer| n.counter("CLUSTER.inval_applied");
    let r = a.connect().request("BAN", "/vb/", &[]);
    assert_eq!(r.status, 204);
    assert!(eventually(Duration::from_secs(10), || applied(&b) == 1
        && applied(&c) == 1));
    ask_everywhere("/vb/1");
    assert_eq!(origin.count("/vb/1"), 2);
    // Cut c off: the others take it out of routing, and it them.
    ask_everywhere("/cut/1");
    ask_everywhere("/cut/2");
    assert_eq!(
        c.cli_ok("debug.cluster.cut on"),
        "This node is cut off from its cluster"
    );
    assert!(eventually(Duration::from_secs(15), || sees_one_down(&a)
        && sees_one_down(&b)
        && alive(&c) == 1));
    assert!(c.cli_ok("cluster.list").contains("cut off"));
    // The dashboard of any node shows the cluster as that node sees it.
    let mut events = crate::harness::Client::connect(a.dashboard.unwrap());
    events.send(b"GET /events HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(events.read_head().status, 200);
    let seen = events.read_until(b"\"name\":\"c\",\"self\":false,\"state\":\"down\"");
    let seen = String::from_utf8_lossy(&seen);
    assert!(
        seen.contains("\"cluster\":{\"self\":\"a\",\"cut\":false"),
        "{seen}"
    );
    assert!(
        seen.contains("\"name\":\"b\",\"self\":false,\"state\":\"alive\""),
        "{seen}"
    );
    let mut events = crate::harness::Client::connect(c.dashboard.unwrap());
    events.send(b"GET /events HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(events.read_head().status, 200);
    assert!(!events.read_until(b"\"cut\":true").is_empty());
    // A purge and a ban while it is away reach the two nodes in reach.
    let r = a.connect().request("PURGE", "/cut/1", &[]);
    assert_eq!(r.header("lacquer-invalidated"), Some("2/2"));
    assert!(b.cli_ok("ban req.url ~ ^/cut/2").contains("on 2/2 nodes"));
    // Cut off, c still has what it had (a partition's price) and fetches
    // what it lacks from the origin itself.
    assert_eq!(c.get("/cut/1").status, 200);
    assert_eq!(origin.count("/cut/1"), 1);
    // Back: as soon as it sees the others again it applies what they did
    // meanwhile, and serves none of it.
    c.cli_ok("debug.cluster.cut off");
    assert!(
        eventually(Duration::from_secs(15), || all
            .iter()
            .all(|n| alive(n) == 3)),
        "{}\n{}\n{}",
        a.cli_ok("cluster.list"),
        b.cli_ok("cluster.list"),
        c.cli_ok("cluster.list")
    );
    let before = origin.count("/cut/1");
    assert_eq!(c.get("/cut/1").status, 200);
    assert_eq!(
        origin.count("/cut/1"),
        before + 1,
        "c served a purged object"
    );
    assert_eq!(c.get("/cut/2").status, 200);
    assert_eq!(origin.count("/cut/2"), 2, "c served a banned object");
    let _ = std::fs::remove_file(secret);
}
