//! The management interface end to end: the challenge-response login,
//! Varnish's framing and status codes, loading and switching programs
//! while requests run, parameters, backend health, start/stop, and the
//! `lacquer adm` client.

use crate::harness::{eventually, vcl_text, Lacquer};
use crate::origin::{Origin, Reply};
use lacquer_admin::{auth_response, parse_status_line, STATUS_LINE_LEN};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn origin() -> Origin {
    Origin::start(|req| Reply::ok(&format!("page {}", req.url)))
}

fn reload_vars(origin: &Origin, colour: &str) -> Vec<(&'static str, String)> {
    vec![
        ("origin_host", origin.addr.ip().to_string()),
        ("origin_port", origin.addr.port().to_string()),
        ("colour", colour.to_string()),
    ]
}

/// Writes `reload.vcl` in colour `colour` into the work directory.
fn write_program(lq: &Lacquer, origin: &Origin, colour: &str) -> std::path::PathBuf {
    let path = lq.workdir.join(format!("{colour}.vcl"));
    std::fs::write(&path, vcl_text("reload.vcl", &reload_vars(origin, colour))).unwrap();
    path
}

/// One framed response read off a raw socket.
fn read_frame(r: &mut BufReader<TcpStream>) -> Option<(u16, String)> {
    let mut line = Vec::new();
    r.read_until(b'\n', &mut line).ok()?;
    if line.is_empty() {
        return None;
    }
    assert_eq!(line.len(), STATUS_LINE_LEN, "{line:?}");
    let (status, len) = parse_status_line(&line).expect("status line");
    let mut body = vec![0; len + 1];
    r.read_exact(&mut body).unwrap();
    assert_eq!(body.pop(), Some(b'\n'));
    Some((status, String::from_utf8(body).unwrap()))
}

#[test]
fn login_is_challenge_response_over_the_secret_file() {
    let lq = Lacquer::start(origin().addr, &[]);
    let secret = std::fs::read(lq.workdir.join("_.secret")).unwrap();
    let connect = || {
        let s = TcpStream::connect(lq.mgmt.unwrap()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        (s.try_clone().unwrap(), BufReader::new(s))
    };

    let (mut w, mut r) = connect();
    let (status, body) = read_frame(&mut r).unwrap();
    assert_eq!(status, 107);
    assert!(body.ends_with("\n\nAuthentication required.\n"), "{body:?}");
    let challenge = body[..32].to_string();
    // Before the login only ping answers.
    w.write_all(b"ping\nvcl.list\n").unwrap();
    assert!(read_frame(&mut r).unwrap().1.starts_with("PONG "));
    assert_eq!(read_frame(&mut r).unwrap().0, 101);
    let answer = auth_response(&challenge, &secret);
    w.write_all(format!("auth {answer}\n").as_bytes()).unwrap();
    let (status, banner) = read_frame(&mut r).unwrap();
    assert_eq!(status, 200);
    assert!(banner.contains("Type 'help' for command list."));
    w.write_all(b"vcl.list\n\nstatus\nquit\n").unwrap();
    assert!(read_frame(&mut r).unwrap().1.contains("boot"));
    assert_eq!(
        read_frame(&mut r).unwrap(),
        (200, "Child in state running".to_string())
    );
    assert_eq!(read_frame(&mut r).unwrap().0, 500);
    assert!(read_frame(&mut r).is_none(), "quit closes");

    // A wrong answer closes the connection; so does a stale challenge.
    let (mut w, mut r) = connect();
    let (_, body) = read_frame(&mut r).unwrap();
    assert_ne!(&body[..32], challenge, "every login gets a new challenge");
    w.write_all(format!("auth {answer}\n").as_bytes()).unwrap();
    assert_eq!(read_frame(&mut r).unwrap().0, 500);
    assert!(read_frame(&mut r).is_none());

    // Before the login, a stranger cannot make the daemon buffer much.
    let (mut w, mut r) = connect();
    read_frame(&mut r).unwrap();
    let mut flood = b"ping << END\n".to_vec();
    flood.extend_from_slice(&[b'x'; 8192]);
    let _ = w.write_all(&flood);
    assert_eq!(read_frame(&mut r).map(|f| f.0), Some(400));
    assert!(read_frame(&mut r).is_none());
}

#[test]
fn status_codes_and_argument_counts() {
    let lq = Lacquer::start(origin().addr, &[]);
    let mut cli = lq.cli();
    let mut run = |line: &str| cli.send_line(line).unwrap();
    assert_eq!(run("nosuch").0, 101);
    assert_eq!(run("vcl.load onlyname").0, 104);
    assert_eq!(run("vcl.load a b c d").0, 105);
    assert_eq!(
        run("vcl.use nosuch"),
        (106, "No VCL named nosuch known\n".into())
    );
    // varnishd's words and codes for the errors its own tests check.
    assert_eq!(
        run("vcl.show nosuch"),
        (106, "No VCL named 'nosuch'".into())
    );
    assert_eq!(
        run("vcl.discard nosuch"),
        (106, "No VCL name matches nosuch\n".into())
    );
    assert_eq!(run("storage.list x"), (105, "Too many parameters\n".into()));
    assert_eq!(run("backend.list -x"), (106, "Invalid flag x".into()));
    let (status, body) = run("ping \"unterminated");
    assert_eq!(status, 100);
    assert!(body.contains("Missing '\"'"), "{body}");
    assert_eq!(run("start"), (300, "Child in state running".into()));
    assert_eq!(run("panic.show").0, 300);
    let (status, help) = run("help");
    assert_eq!(status, 200);
    for cmd in [
        "vcl.load",
        "vcl.inline",
        "param.set",
        "backend.set_health",
        "panic.show",
    ] {
        assert!(help.contains(cmd), "{cmd} in help");
    }
    let (status, body) = run("status -j");
    assert_eq!(status, 200);
    assert!(body.starts_with("[ 2, [\"status\", \"-j\"], "), "{body}");
    assert!(body.contains("\"running\""));
    // A response longer than cli_limit is cut and marked truncated.
    assert_eq!(run("param.set cli_limit 128").0, 200);
    let (status, body) = run("help");
    assert_eq!((status, body.len()), (201, 128));
}

#[test]
fn programs_load_switch_and_discard_without_losing_objects() {
    let origin = origin();
    let lq = Lacquer::with_vcl("reload.vcl", &reload_vars(&origin, "blue"), &[]);
    let r = lq.get("/a");
    assert_eq!(r.header("X-Program"), Some("blue"));
    assert_eq!(r.header("X-Hits"), Some("0"));

    // A program that does not compile is refused with the compiler's
    // message; the running one carries on.
    let broken = lq.workdir.join("broken.vcl");
    std::fs::write(
        &broken,
        "vcl 4.1;\nbackend b none;\nsub vcl_recv {\n  set req.nosuch = 1;\n}\n",
    )
    .unwrap();
    let (status, msg) = lq.cli_run(&format!("vcl.load broken {}", broken.display()));
    assert_eq!(status, 106);
    assert!(msg.contains("broken.vcl:4:7"), "{msg}");
    assert!(msg.contains("VCL compilation failed"), "{msg}");
    assert_eq!(lq.get("/a").header("X-Program"), Some("blue"));

    // vcl.load from a file, vcl.inline from a here document.
    let green = write_program(&lq, &origin, "green");
    lq.cli_ok(&format!("vcl.load green {}", green.display()));
    let red = vcl_text("reload.vcl", &reload_vars(&origin, "red"));
    lq.cli_ok(&format!("vcl.inline red << END\n{red}\nEND"));
    assert_eq!(
        lq.cli_run(&format!("vcl.load green {}", green.display())).0,
        106,
        "names are unique"
    );
    let list = lq.cli_ok("vcl.list");
    let rows: Vec<Vec<&str>> = list
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 3, "{list}");
    assert_eq!(rows[0], ["active", "auto", "warm", "0", "boot"]);
    assert_eq!(rows[1], ["available", "auto", "warm", "0", "green"]);

    assert_eq!(lq.cli_ok("vcl.use green"), "VCL 'green' now active");
    let r = lq.get("/a");
    assert_eq!(r.header("X-Program"), Some("green"));
    assert_eq!(r.header("X-Hits"), Some("2"), "the cached object survived");
    assert_eq!(origin.count("/a"), 1);
    lq.cli_ok("vcl.use red");
    assert_eq!(lq.get("/a").header("X-Program"), Some("red"));
    // A pass that fails still goes through vcl_deliver with its 503.
    lq.cli_ok("backend.set_health red.origin sick");
    let r = lq.get("/nocache/down");
    assert_eq!(r.status, 503);
    assert_eq!(r.header("X-Program"), Some("red"));
    lq.cli_ok("backend.set_health red.origin auto");

    assert_eq!(lq.cli_run("vcl.discard red").0, 300, "the active one stays");
    lq.cli_ok("vcl.discard boot gr*");
    assert_eq!(lq.cli_ok("vcl.list").lines().count(), 1);
    assert!(lq.cli_ok("vcl.show").contains("\"red\""));
    let verbose = lq.cli_ok("vcl.show -v red");
    assert!(verbose.contains("// VCL.SHOW 0 "), "{verbose}");
    assert!(verbose.contains("<builtin>"));
    assert_eq!(lq.get("/a").header("X-Hits"), Some("4"));
}

#[test]
fn switching_programs_under_load_loses_no_request() {
    let origin = origin();
    let lq = Arc::new(Lacquer::with_vcl(
        "reload.vcl",
        &reload_vars(&origin, "blue"),
        &[],
    ));
    let green = write_program(&lq, &origin, "green");
    lq.cli_ok(&format!("vcl.load green {}", green.display()));

    let done = Arc::new(AtomicBool::new(false));
    let served = Arc::new(AtomicUsize::new(0));
    let clients: Vec<_> = (0..4)
        .map(|n| {
            let (lq, done, served) = (lq.clone(), done.clone(), served.clone());
            std::thread::spawn(move || {
                let mut c = lq.connect();
                let mut seen = std::collections::HashSet::new();
                let mut i = 0;
                while !done.load(Ordering::SeqCst) {
                    // Cached and passed requests, on one keep-alive connection.
                    let url = if i % 3 == 0 {
                        format!("/nocache/{n}")
                    } else {
                        format!("/page/{}", i % 7)
                    };
                    let r = c.get(&url, &[]);
                    assert_eq!(r.status, 200, "{url}");
                    assert_eq!(r.text(), format!("page {url}"));
                    seen.insert(r.header("X-Program").unwrap().to_string());
                    served.fetch_add(1, Ordering::SeqCst);
                    i += 1;
                }
                seen
            })
        })
        .collect();
    let mut cli = lq.cli();
    for round in 0..20 {
        let target = served.load(Ordering::SeqCst) + 20;
        assert!(eventually(Duration::from_secs(20), || served
            .load(Ordering::SeqCst)
            >= target));
        let name = if round % 2 == 0 { "green" } else { "boot" };
        assert_eq!(cli.send_line(&format!("vcl.use {name}")).unwrap().0, 200);
    }
    let target = served.load(Ordering::SeqCst) + 20;
    assert!(eventually(Duration::from_secs(20), || served
        .load(Ordering::SeqCst)
        >= target));
    done.store(true, Ordering::SeqCst);
    for c in clients {
        let seen = c.join().expect("no client saw a failure");
        assert!(seen.contains("blue") && seen.contains("green"), "{seen:?}");
    }
}

#[test]
fn parameters_change_at_run_time() {
    let origin = origin();
    let lq = Lacquer::start(origin.addr, &[]);
    let long = "x".repeat(100);
    assert_eq!(lq.get("/").status, 200);
    assert_eq!(
        lq.cli_run("param.set http_req_hdr_len 10"),
        (
            106,
            "Must be at least 40b\n\n(attempting to set param 'http_req_hdr_len' to '10')"
                .to_string()
        )
    );
    assert_eq!(lq.cli_run("param.set nosuch 1").0, 106);
    // varnishd's bounds, in its words.
    assert_eq!(
        lq.cli_run("param.set thread_pools 100"),
        (
            106,
            "Must be no more than 32\n\n(attempting to set param 'thread_pools' to '100')"
                .to_string()
        )
    );
    lq.cli_ok("param.set http_req_hdr_len 64");
    let r = lq.connect().get("/", &[("X-Long", &long)]);
    assert!(r.status >= 400, "a 100-byte header is now too long");
    assert!(lq
        .cli_ok("param.show changed")
        .starts_with("http_req_hdr_len "));
    let shown = lq.cli_ok("param.show http_req_hdr_len");
    assert!(shown.contains("Value is: 64b [bytes]"), "{shown}");
    assert!(shown.contains("Default is: 8k"), "{shown}");
    lq.cli_ok("param.reset http_req_hdr_len");
    assert_eq!(lq.cli_ok("param.show changed"), "");
    assert_eq!(lq.connect().get("/", &[("X-Long", &long)]).status, 200);
    let all = lq.cli_ok("param.show");
    assert!(all
        .lines()
        .any(|l| l.starts_with("default_ttl ") && l.ends_with("(default)")));
    // Typed as varnishd types them: numbers, booleans, strings; a bound
    // only where there is one.
    for (name, value) in [
        ("default_ttl", "120.0"),
        ("thread_pools", "2"),
        ("workspace_client", "98304"),
        ("http_gzip_support", "true"),
        ("vcl_path", "\"/etc/varnish:/usr/share/varnish/vcl\""),
    ] {
        let j = lq.cli_ok(&format!("param.show -j {name}"));
        assert!(
            j.contains(&format!("\"name\": \"{name}\""))
                && j.contains(&format!("\"value\": {value},")),
            "{j}"
        );
    }
    let j = lq.cli_ok("param.show -j http_gzip_support");
    assert!(!j.contains("\"minimum\"") && !j.contains("null"), "{j}");
}

#[test]
fn backend_health_can_be_forced() {
    let origin = origin();
    let lq = Lacquer::start(origin.addr, &[]);
    let list = lq.cli_ok("backend.list");
    assert!(list.starts_with("Backend name"), "{list}");
    assert!(
        list.contains("boot.default") && list.contains("healthy"),
        "{list}"
    );
    lq.cli_ok("backend.set_health default sick");
    assert_eq!(lq.get("/sick").status, 503);
    assert!(lq.cli_ok("backend.list boot.def*").contains(" sick "));
    assert_eq!(lq.cli_run("backend.set_health nosuch sick").0, 106);
    assert_eq!(lq.cli_run("backend.set_health default maybe").0, 106);
    lq.cli_ok("backend.set_health * auto");
    assert_eq!(lq.get("/well").status, 200);
    assert_eq!(origin.count("/sick"), 0);
}

#[test]
fn stop_holds_new_clients_until_start() {
    let origin = origin();
    let lq = Lacquer::start(origin.addr, &[]);
    let mut before = lq.connect();
    assert_eq!(before.get("/", &[]).status, 200);
    lq.cli_ok("stop");
    assert_eq!(lq.cli_ok("status"), "Child in state stopped");
    assert_eq!(lq.cli_run("stop").0, 300);
    // The address stays bound: a client that connects now waits.
    let mut waiting = TcpStream::connect(lq.addr).unwrap();
    waiting
        .write_all(b"GET /late HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    lq.cli_ok("start");
    let mut answer = String::new();
    waiting.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("page /late"));
}

fn adm(lq: &Lacquer, args: &[&str], stdin: &str) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lacquer"))
        .arg("adm")
        .arg("-n")
        .arg(&lq.workdir)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn adm_finds_the_daemon_through_its_work_directory() {
    let origin = origin();
    let lq = Lacquer::start(origin.addr, &[]);
    let (code, out, _) = adm(&lq, &["vcl.list"], "");
    assert_eq!(code, 0);
    assert!(out.contains("active") && out.contains("boot"), "{out}");
    let (code, out, err) = adm(&lq, &["vcl.use", "nosuch"], "");
    assert_eq!(code, 1);
    assert_eq!(out, "No VCL named nosuch known\n");
    assert_eq!(err, "Command failed with error code 106\n");
    // Quotes travel to the daemon untouched, as with varnishadm.
    let (code, out, _) = adm(&lq, &["help", "\"vcl.use\""], "");
    assert_eq!(code, 0);
    assert!(out.starts_with("vcl.use <configname>"), "{out}");

    // Without a command, commands come from standard input, here
    // documents included.
    let program = format!(
        "vcl 4.1;\nbackend b {{ .host = \"{}\"; .port = \"{}\"; }}\nsub vcl_deliver {{ set resp.http.X-Via-Adm = \"yes\"; }}\n",
        origin.addr.ip(),
        origin.addr.port()
    );
    let script = format!("vcl.inline fromadm << EOF\n{program}EOF\n\nvcl.use fromadm\nping\n");
    let (code, out, err) = adm(&lq, &[], &script);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("VCL 'fromadm' now active"), "{out}");
    assert!(out.contains("PONG"), "{out}");
    assert_eq!(lq.get("/").header("X-Via-Adm"), Some("yes"));

    let (code, _, err) = adm(&lq, &["-T", "127.0.0.1:1", "ping"], "");
    assert_eq!(code, 2);
    assert!(err.contains("Cannot connect"), "{err}");
}

#[test]
fn management_can_be_turned_off_or_left_open() {
    let lq = Lacquer::start(origin().addr, &["-T", "none"]);
    assert!(lq.mgmt.is_none());
    let (code, _, err) = adm(&lq, &["ping"], "");
    assert_eq!(code, 2);
    assert!(err.contains("disabled"), "{err}");

    let secret_dir =
        std::env::temp_dir().join(format!("lacquer-e2e-secret-{}", std::process::id()));
    std::fs::create_dir_all(&secret_dir).unwrap();
    let secret = secret_dir.join("secret");
    std::fs::write(&secret, "s3cret\n").unwrap();
    let lq = Lacquer::start(origin().addr, &["-S", secret.to_str().unwrap()]);
    let c = lacquer_admin::Client::connect(
        &lq.mgmt.unwrap().to_string(),
        Some(b"s3cret\n"),
        Duration::from_secs(20),
    );
    assert!(c.is_ok());
    assert!(lacquer_admin::Client::connect(
        &lq.mgmt.unwrap().to_string(),
        Some(b"wrong\n"),
        Duration::from_secs(20)
    )
    .is_err());
    let lq = Lacquer::start(origin().addr, &["-S", "none"]);
    let mut c = lacquer_admin::Client::connect(
        &lq.mgmt.unwrap().to_string(),
        None,
        Duration::from_secs(20),
    )
    .unwrap();
    assert_eq!(c.send_line("status").unwrap().0, 200);
    let _ = std::fs::remove_dir_all(&secret_dir);
}

/// Several `-f`: each is loaded, the earlier ones as boot0, boot1, … and
/// the last as the active "boot"; `-f ""` starts without a program, and a
/// `-I` file that loads and uses one starts serving.
#[test]
fn several_programs_at_start_and_none_until_the_cli_file() {
    let o = Origin::start(|_| Reply::ok("served"));
    let dir = std::env::temp_dir().join(format!("lacquer-e2e-boot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let program = |name: &str, header: &str| {
        let path = dir.join(name);
        std::fs::write(
            &path,
            format!(
                "vcl 4.1;\nbackend default {{ .host = \"{}\"; .port = \"{}\"; }}\nsub vcl_deliver {{ set resp.http.program = \"{header}\"; }}\n",
                o.addr.ip(),
                o.addr.port()
            ),
        )
        .unwrap();
        path.display().to_string()
    };
    let (first, second) = (
        program("first.vcl", "first"),
        program("second.vcl", "second"),
    );
    let lq = Lacquer::spawn(&["-f", &first, "-f", &second], None);
    let (_, list, _) = adm(&lq, &["vcl.list"], "");
    assert!(list.contains("boot0"), "{list}");
    assert!(
        list.lines()
            .any(|l| l.starts_with("active") && l.ends_with(" boot")),
        "{list}"
    );
    let mut c = lq.connect();
    assert_eq!(c.get("/", &[]).header("program"), Some("second"));

    let cli = dir.join("start.cli");
    std::fs::write(&cli, format!("vcl.load later {first}\nvcl.use later\n")).unwrap();
    let lq = Lacquer::spawn(&["-f", "", "-I", cli.to_str().unwrap()], None);
    let mut c = lq.connect();
    assert_eq!(c.get("/", &[]).header("program"), Some("first"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `-M`: the daemon connects out and offers its management interface
/// there (here without a secret: the banner, then commands).
#[test]
fn reverse_cli_connects_out() {
    let o = Origin::start(|_| Reply::ok("x"));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let at = listener.local_addr().unwrap().to_string();
    let b = o.addr.to_string();
    let _lq = Lacquer::spawn(&["-b", &b, "-S", "none", "-M", &at], None);
    let (mut s, _) = listener.accept().unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let read_reply = |s: &mut TcpStream| {
        let mut line = [0u8; STATUS_LINE_LEN];
        s.read_exact(&mut line).unwrap();
        let (status, len) = parse_status_line(&line).unwrap();
        let mut body = vec![0u8; len + 1];
        s.read_exact(&mut body).unwrap();
        (status, String::from_utf8_lossy(&body).into_owned())
    };
    let (status, banner) = read_reply(&mut s);
    assert_eq!(status, 200, "{banner}");
    s.write_all(b"ping\n").unwrap();
    let (status, pong) = read_reply(&mut s);
    assert_eq!(status, 200);
    assert!(pong.starts_with("PONG "), "{pong}");
}

/// `lacquer reload`: a new program under a new name, switched to while
/// requests run; earlier reloads discarded; a program that does not
/// compile changes nothing.
#[test]
fn reload_loads_switches_and_discards_as_varnishreload() {
    let origin = origin();
    let lq = Lacquer::with_vcl("reload.vcl", &reload_vars(&origin, "red"), &[]);
    let reload = |path: &std::path::Path, extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_lacquer"))
            .arg("reload")
            .arg("-n")
            .arg(&lq.workdir)
            .args(extra)
            .arg(path)
            .output()
            .unwrap()
    };
    let blue = write_program(&lq, &origin, "blue");
    let first = reload(&blue, &[]);
    assert!(first.status.success(), "{first:?}");
    let second = reload(&blue, &[]);
    assert!(second.status.success(), "{second:?}");
    let list = lq.cli_ok("vcl.list");
    let reloads: Vec<&str> = list.lines().filter(|l| l.contains("reload_")).collect();
    assert_eq!(
        reloads.len(),
        1,
        "the earlier reload was discarded:\n{list}"
    );
    assert!(reloads[0].starts_with("active"), "{list}");
    assert_eq!(lq.get("/x").header("X-Program"), Some("blue"));

    let broken = lq.workdir.join("broken.vcl");
    std::fs::write(&broken, "vcl 4.1;\nbackend b { .host = \"127.0.0.1\" }\n").unwrap();
    let failed = reload(&broken, &[]);
    assert!(!failed.status.success());
    assert!(String::from_utf8_lossy(&failed.stderr).contains("broken.vcl"));
    assert_eq!(lq.cli_ok("vcl.list"), list, "nothing changed");

    // Without a file: the file the active program came from, read again.
    let green = write_program(&lq, &origin, "green");
    std::fs::rename(&green, &blue).unwrap();
    let again = Command::new(env!("CARGO_BIN_EXE_lacquer"))
        .arg("reload")
        .arg("-n")
        .arg(&lq.workdir)
        .output()
        .unwrap();
    assert!(again.status.success(), "{again:?}");
    assert_eq!(lq.get("/x").header("X-Program"), Some("green"));
}
