//! The command line: varnishd's flags, one clear line per mistake.

use std::process::Command;

fn lacquer(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_lacquer"))
        .args(args)
        .output()
        .expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[test]
fn parameters_are_listed_with_defaults() {
    let (code, out, _) = lacquer(&["serve", "-x", "parameter"]);
    assert_eq!(code, 0);
    for name in [
        "default_ttl",
        "default_grace",
        "default_keep",
        "uncacheable_ttl",
        "shortlived",
        "timeout_idle",
        "send_timeout",
        "idle_send_timeout",
        "connect_timeout",
        "first_byte_timeout",
        "between_bytes_timeout",
        "backend_idle_timeout",
        "http_req_hdr_len",
        "http_req_size",
        "http_resp_hdr_len",
        "http_resp_size",
        "http_max_hdr",
        "nuke_limit",
        "http_range_support",
        "max_restarts",
        "max_retries",
    ] {
        assert!(
            out.contains(&format!("\n{name}\n")) || out.starts_with(&format!("{name}\n")),
            "{name} missing"
        );
    }
    assert!(out.contains("default_ttl\n~~~~~~~~~~~\n\t* Units: seconds\n\t* Default: 120.000"));
    assert!(out.contains("http_req_hdr_len\n~~~~~~~~~~~~~~~~\n\t* Units: bytes\n\t* Default: 8k"));
}

#[test]
fn bad_arguments_exit_2_with_one_line() {
    for (args, needle) in [
        (
            &["serve", "-b", "127.0.0.1:1", "-s", "malloc,12q"][..],
            "12q",
        ),
        (
            &["serve", "-b", "127.0.0.1:1", "-a", "nonsense"][..],
            "nonsense",
        ),
        (
            &["serve", "-b", "127.0.0.1:1", "-p", "nosuch=1"][..],
            "nosuch",
        ),
        (
            &["serve", "-b", "127.0.0.1:1", "-p", "default_ttl=soon"][..],
            "soon",
        ),
        (&["serve", "-b", "127.0.0.1:1", "-Q"][..], "-Q"),
        (
            &["serve", "-b", "127.0.0.1:1", "-f", "default.vcl"][..],
            "only one of -b and -f",
        ),
        (
            &["serve", "-b", "127.0.0.1:1", "-T", "127.0.0.1:99999"][..],
            "99999",
        ),
        (&["serve"][..], "backend"),
    ] {
        let (code, out, err) = lacquer(args);
        assert_eq!(code, 2, "{args:?}");
        assert!(out.is_empty());
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn a_missing_secret_file_stops_start_up() {
    let dir = std::env::temp_dir().join(format!("lacquer-e2e-nosecret-{}", std::process::id()));
    let (code, out, err) = lacquer(&[
        "serve",
        "-j",
        "none",
        "-a",
        "127.0.0.1:0",
        "-b",
        "127.0.0.1:1",
        "-n",
        dir.to_str().unwrap(),
        "-S",
        "/nonexistent/secret",
    ]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(code, 1);
    assert!(!out.contains("Child launched OK"));
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains("Cannot open -S file (/nonexistent/secret)"),
        "{err}"
    );
}

#[test]
fn port_in_use_is_a_clear_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let dir = std::env::temp_dir().join(format!("lacquer-e2e-port-{}", std::process::id()));
    let (code, _, err) = lacquer(&[
        "serve",
        "-j",
        "none",
        "-a",
        &addr,
        "-b",
        "127.0.0.1:1",
        "-n",
        dir.to_str().unwrap(),
    ]);
    assert_ne!(code, 0);
    assert!(
        err.contains("Could not bind") && err.contains(&addr),
        "{err}"
    );
    assert!(!err.contains("panicked"));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn version() {
    let (code, out, _) = lacquer(&["serve", "-V"]);
    assert_eq!(code, 0);
    assert!(out.contains("Lacquer/"));
}

/// A Varnish 3 program (the directors, grace and ACL of an old Drupal
/// article): refused with the way out named, and `upgrade-vcl` writes a
/// 4.1 program that compiles.
#[test]
fn varnish_3_vcl_is_named_and_upgraded() {
    let old = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/vcl/varnish3.vcl");
    let (code, _, err) = lacquer(&["serve", "-C", "-f", old]);
    assert_eq!(code, 2);
    assert!(
        err.contains("This is VCL 3.0") && err.contains("lacquer upgrade-vcl"),
        "{err}"
    );
    let (code, new, err) = lacquer(&["upgrade-vcl", old]);
    assert_eq!(code, 0, "{err}");
    assert!(new.starts_with("vcl 4.1;"), "{new}");
    assert!(
        new.contains("new ssl_director = directors.round_robin();"),
        "{new}"
    );
    let dir = std::env::temp_dir().join(format!("lacquer-e2e-upgrade-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("new.vcl");
    std::fs::write(&path, &new).unwrap();
    let (code, out, err) = lacquer(&["serve", "-C", "-f", path.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}\n{new}");
    // A 4.1 program is left alone.
    let (code, _, err) = lacquer(&["upgrade-vcl", &path.to_string_lossy()]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(code, 1, "{err}");
}

/// `-x vsl`, `-x cli`, `-x builtin`, `-x optstring`, `-x counters` and
/// `-x vcl` print their tables.
#[test]
fn describe_prints_the_tables() {
    for (what, want) in [
        ("vsl", "ReqURL"),
        ("cli", "vcl.label <label> <configname>"),
        ("builtin", "sub vcl_builtin_recv"),
        ("optstring", "a:b:"),
        ("counters", "MAIN.cache_hit\n"),
        ("cli", "vcl.deps [-j]"),
        ("vcl", "beresp.ttl\n~~~~~~~~~~\n\tType: DURATION\n"),
    ] {
        let (code, out, err) = lacquer(&["serve", "-x", what]);
        assert_eq!(code, 0, "{what}: {err}");
        assert!(out.contains(want), "-x {what}:\n{out}");
    }
}

/// `lacquer demo`: the built-in site behind Lacquer, on one command —
/// ESI pages, a hit on the second request, a 1 MiB object, a tagged item
/// purged by its tag.
#[test]
fn the_demo_runs_with_nothing_else() {
    use std::io::{BufRead, BufReader};
    let dir = std::env::temp_dir().join(format!("lacquer-demo-{}", std::process::id()));
    let mut demo = crate::harness::Reaped(
        Command::new(env!("CARGO_BIN_EXE_lacquer"))
            .args([
                "demo",
                "-a",
                "127.0.0.1:0",
                "--dashboard",
                "127.0.0.1:0",
                "-n",
            ])
            .arg(&dir)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let child = &mut demo.0;
    // What it says to try names where it listens, not port 0.
    let mut banner = String::new();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    while !banner.contains("lacquer log -n") {
        assert!(err.read_line(&mut banner).unwrap() > 0, "{banner}");
    }
    std::thread::spawn(move || for _ in err.lines() {});
    let mut addr = None;
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some(rest) = line.strip_prefix("Listen ") {
            let p: Vec<&str> = rest.split_whitespace().collect();
            addr = Some(format!("{}:{}", p[1], p[2]));
        }
        if line == "Child launched OK" {
            break;
        }
    }
    std::thread::spawn(move || for _ in lines {});
    let addr: std::net::SocketAddr = addr.expect("a listener").parse().unwrap();
    assert!(
        banner.contains(&format!("curl -i http://{addr}/ ")),
        "{addr}: {banner}"
    );
    assert!(!banner.contains(":0/"), "{banner}");
    let mut c = crate::harness::Client::connect(addr);
    let page = c.get("/", &[]);
    assert_eq!(page.status, 200);
    let text = page.text();
    assert!(
        text.contains("News, cached") && text.contains("The clock"),
        "{text}"
    );
    assert!(!text.contains("esi:include"), "{text}");
    assert_eq!(c.get("/", &[]).header("X-Cache"), Some("HIT"));
    assert_eq!(c.get("/large", &[]).body.len(), 1 << 20);
    assert_eq!(c.get("/api/item/7", &[]).header("X-Cache"), Some("MISS"));
    assert_eq!(c.get("/api/item/7", &[]).header("X-Cache"), Some("HIT"));
    let purged = c.request("PURGE", "/", &[("xkey-purge", "item-7")]);
    assert_eq!(purged.status, 200);
    assert_eq!(c.get("/api/item/7", &[]).header("X-Cache"), Some("MISS"));
    assert!(c.get("/cookie", &[]).header("Set-Cookie").is_some());
    drop(demo);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A daemon whose standard error is gone (a pipe whose reader left)
/// reports fetch errors there without a panic, and SIGTERM still ends it
/// with status 0: a failed write to standard error panicked the fetch's
/// task, and the signal task's left the daemon running.
#[test]
fn a_closed_standard_error_panics_nothing_and_sigterm_still_stops_the_daemon() {
    use crate::harness::Lacquer;
    // Nothing listens on the discard port: every fetch fails.
    let mut l =
        Lacquer::start_with_stderr_closed("127.0.0.1:9".parse().unwrap(), &["-T", "127.0.0.1:0"]);
    let mut c = l.connect();
    for _ in 0..3 {
        assert_eq!(c.get("/", &[]).status, 503);
    }
    let mut cli = l.cli();
    let (status, body) = cli.send_line("panic.show").unwrap();
    assert_eq!(status, 300, "{body}");
    assert_eq!(exit_on_signal(&mut l, "-TERM"), Some(0));
}

/// Sends `signal` to the daemon and waits (10 s at most) for it to end:
/// its exit code (None if it went on, or ended by a signal).
fn exit_on_signal(l: &mut crate::harness::Lacquer, signal: &str) -> Option<i32> {
    use std::time::Duration;
    let pid = l.pid().to_string();
    let sent = Command::new("kill").args([signal, &pid]).status().unwrap();
    assert!(sent.success(), "kill {signal}");
    let mut status = None;
    crate::harness::eventually(Duration::from_secs(10), || {
        status = l.exit_status();
        status.is_some()
    });
    status.and_then(|s| s.code())
}

/// SIGTERM and SIGINT end the daemon as they end varnishd, with status
/// 0 (through `exit`, so that what runs at exit runs), whether it has
/// served or not.
#[test]
fn term_and_int_end_the_daemon_with_status_zero() {
    use crate::harness::Lacquer;
    for signal in ["-TERM", "-INT"] {
        let mut l = Lacquer::start("127.0.0.1:9".parse().unwrap(), &[]);
        assert_eq!(exit_on_signal(&mut l, signal), Some(0), "{signal}");
    }
}

/// Every command answers `--help` (and its Varnish tool's help flag) with
/// its own usage on standard output and exit 0; `lacquer --help` lists
/// each command's usage as that command prints it.
#[test]
fn every_command_prints_its_usage_when_asked() {
    let (code, all, _) = lacquer(&["--help"]);
    assert_eq!(code, 0);
    for (command, flag) in [
        ("serve", "-?"),
        ("adm", "-h"),
        ("stat", "-h"),
        ("log", "-h"),
        ("ncsa", "-h"),
        ("top", "-h"),
        ("hist", "-h"),
        ("test", "-h"),
        ("reload", "-h"),
        ("demo", "-h"),
        ("upgrade-vcl", "-h"),
    ] {
        for asked in ["--help", flag] {
            let (code, out, err) = lacquer(&[command, asked]);
            assert_eq!(code, 0, "lacquer {command} {asked}: {err}");
            let rest = out.strip_prefix(&format!("usage: lacquer {command}"));
            assert!(
                rest.is_some_and(|r| r.starts_with([' ', '\n'])),
                "lacquer {command} {asked} printed {out:?}"
            );
            assert!(err.is_empty(), "lacquer {command} {asked}: {err}");
            // The overall list holds the same usage (a command's option
            // lines come after it, past a blank line): serve's first, the
            // others after it, indented as one list.
            let usage = out.split("\n\n").next().unwrap_or_default();
            let listed = match command {
                "serve" => usage.trim_end().to_string(),
                _ => usage.trim_end().replacen("usage: ", "       ", 1),
            };
            if command != "serve" {
                assert!(
                    out.contains("\n    -h, --help  ") || out.contains("-h, --help"),
                    "{out}"
                );
            }
            assert!(
                all.contains(&listed),
                "lacquer --help lacks {command}'s usage:\n{listed}\n--- in ---\n{all}"
            );
        }
    }
    // `-h` is varnishd's hash option, and still needs its value.
    let (code, _, err) = lacquer(&["serve", "-h"]);
    assert_eq!(code, 2, "{err}");
}
