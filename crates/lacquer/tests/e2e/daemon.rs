//! Start-up as a packaged daemon: one daemon to a work directory (its
//! `_.pid` locked, as varnishd's), and root given up by default once the
//! sockets are bound.

use crate::harness::{Lacquer, Reaped};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How a `lacquer serve` started by a test went.
enum Started {
    /// It said `Child launched OK` (after `Listen` lines, the first of
    /// which is here); killed when dropped.
    Running(Reaped, Option<std::net::SocketAddr>),
    /// It ended first: exit code and standard error.
    Refused(i32, String),
}

/// Starts `lacquer serve ARGS… -n WORKDIR` and waits, at most 20 s, for it
/// to say it runs or to end.
fn serve(workdir: &Path, args: &[&str]) -> Started {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lacquer"))
        .arg("serve")
        .args(["-a", "127.0.0.1:0", "-b", "127.0.0.1:1", "-n"])
        .arg(workdir)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("lacquer starts");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut listen = None;
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(rest) = line.strip_prefix("Listen ") {
                let parts: Vec<&str> = rest.split_whitespace().collect();
                listen = listen.or_else(|| format!("{}:{}", parts[1], parts[2]).parse().ok());
            }
            if line == "Child launched OK" {
                let _ = tx.send(listen);
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(listen) = rx.try_recv() {
            return Started::Running(Reaped(child), listen);
        }
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
            return Started::Refused(status.code().unwrap_or(-1), err);
        }
        assert!(
            Instant::now() < deadline,
            "lacquer serve neither ran nor ended"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A process's real user id, from /proc.
fn uid_of(pid: u32) -> u32 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// A user's id by name, where the system has that user.
fn user_id(name: &str) -> Option<u32> {
    let out = Command::new("id").args(["-u", name]).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().parse().ok())
        .flatten()
}

#[test]
fn a_second_daemon_is_refused_a_live_ones_work_directory() {
    let first = Lacquer::start("127.0.0.1:1".parse().unwrap(), &["-T", "127.0.0.1:0"]);
    let pid_file = first.workdir.join("_.pid");
    assert_eq!(
        std::fs::read_to_string(&pid_file).unwrap(),
        format!("{}\n", first.pid())
    );
    match serve(&first.workdir, &["-j", "none"]) {
        Started::Running(..) => panic!("a second daemon took a live one's work directory"),
        Started::Refused(code, err) => {
            assert_ne!(code, 0);
            assert!(
                err.contains(&format!("already running (pid={})", first.pid())),
                "{err}"
            );
        }
    }
    // The first is untouched: its counters and its CLI are its own.
    assert!(first.cli_ok("status").contains("running"));
    let stat = Command::new(env!("CARGO_BIN_EXE_lacquer"))
        .args(["stat", "-1", "-f", "MAIN.uptime", "-n"])
        .arg(&first.workdir)
        .output()
        .unwrap();
    assert!(stat.status.success(), "{stat:?}");
    assert!(String::from_utf8_lossy(&stat.stdout).contains("MAIN.uptime"));
}

#[test]
fn a_dead_daemons_work_directory_is_taken_over() {
    let dir = std::env::temp_dir().join(format!("lacquer-e2e-stale-{}", std::process::id()));
    let Started::Running(mut first, _) = serve(&dir, &["-j", "none"]) else {
        panic!("the first daemon did not start");
    };
    // Killed without a chance to clean up: its _.pid stays behind.
    first.0.kill().unwrap();
    first.0.wait().unwrap();
    let left = std::fs::read_to_string(dir.join("_.pid")).unwrap();
    assert_eq!(left.trim(), first.0.id().to_string());
    let Started::Running(second, _) = serve(&dir, &["-j", "none"]) else {
        panic!("a dead daemon's work directory was not taken over");
    };
    assert_eq!(
        std::fs::read_to_string(dir.join("_.pid")).unwrap(),
        format!("{}\n", second.0.id())
    );
    drop(second);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn root_is_given_up_by_default() {
    let dir = std::env::temp_dir().join(format!("lacquer-e2e-jail-{}", std::process::id()));
    let me = uid_of(std::process::id());
    let package_user = ["lacquer", "varnish"].into_iter().find_map(user_id);
    match (serve(&dir, &[]), me, package_user) {
        // Not root: there is nothing to give up.
        (Started::Running(d, _), me, _) if me != 0 => assert_eq!(uid_of(d.0.id()), me),
        (Started::Running(d, _), _, Some(uid)) => assert_eq!(uid_of(d.0.id()), uid),
        (Started::Running(d, _), _, None) => {
            panic!(
                "root with no user to become kept root: {}",
                uid_of(d.0.id())
            )
        }
        (Started::Refused(code, err), 0, None) => {
            assert_eq!(code, 1);
            assert!(
                err.contains("-j none") && err.contains("lacquer") && err.contains("varnish"),
                "{err}"
            );
            // Refused before anything was bound or written.
            assert!(!dir.join("_.vsl").exists());
        }
        (Started::Refused(_, err), _, _) => panic!("refused to start: {err}"),
    }
    let _ = std::fs::remove_dir_all(&dir);
    if me != 0 {
        return;
    }
    // Root with an explicit user becomes it, and the work directory is
    // its; root with -j none stays root.
    let nobody = user_id("nobody").expect("the system has nobody");
    let Started::Running(jailed, _) = serve(&dir, &["-j", "unix,user=nobody"]) else {
        panic!("-j unix,user=nobody did not start");
    };
    assert_eq!(uid_of(jailed.0.id()), nobody);
    let owner = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&dir).unwrap());
    assert_eq!(owner, nobody);
    drop(jailed);
    let _ = std::fs::remove_dir_all(&dir);
    let Started::Running(root, _) = serve(&dir, &["-j", "none"]) else {
        panic!("-j none did not start");
    };
    assert_eq!(uid_of(root.0.id()), 0);
    drop(root);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn fetch_errors_go_to_the_log_and_not_to_standard_error() {
    let dir = std::env::temp_dir().join(format!("lacquer-e2e-quiet-{}", std::process::id()));
    let Started::Running(mut daemon, Some(addr)) = serve(&dir, &["-j", "none"]) else {
        panic!("the daemon did not start");
    };
    // -b 127.0.0.1:1: nothing listens there.
    for _ in 0..3 {
        let resp = crate::harness::Client::connect(addr).get("/", &[]);
        assert_eq!(resp.status, 503);
    }
    daemon.0.kill().unwrap();
    daemon.0.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut daemon.0.stderr.take().unwrap(), &mut err).unwrap();
    assert!(
        !err.contains("FetchError") && !err.contains("refused"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_second_daemon_is_refused_a_live_ones_port_whatever_its_workers() {
    // Each worker's socket shares the port with SO_REUSEPORT: a second
    // daemon of the same user must not join them and take half the
    // traffic.
    let first = Lacquer::start("127.0.0.1:1".parse().unwrap(), &["-p", "workers=2"]);
    let dir = std::env::temp_dir().join(format!("lacquer-e2e-port2-{}", std::process::id()));
    let addr = first.addr.to_string();
    match serve(&dir, &["-j", "none", "-p", "workers=2", "-a", &addr]) {
        Started::Running(..) => panic!("a second daemon took the port of a live one"),
        Started::Refused(code, err) => {
            assert_ne!(code, 0);
            assert!(
                err.contains("Could not bind") && err.contains(&addr),
                "{err}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(first.get("/").status, 503);
}
