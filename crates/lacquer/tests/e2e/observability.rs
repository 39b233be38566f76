//! The shared-memory log and counters as operators read them: `lacquer
//! log` with the seed's query, request grouping and timestamp fields,
//! a reader started late, `lacquer ncsa`, `top`, `hist` and `stat`.

use crate::harness::{eventually, Lacquer};
use crate::origin::{Origin, Reply};
use std::process::{Command, Output};
use std::time::Duration;

fn tool(lq: &Lacquer, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lacquer"))
        .args(args)
        .arg("-n")
        .arg(&lq.workdir)
        .output()
        .expect("lacquer runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The log from its oldest record, grouped and filtered as asked.
fn log(lq: &Lacquer, args: &[&str]) -> String {
    let mut all = vec!["log", "-d"];
    all.extend_from_slice(args);
    let o = tool(lq, &all);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    stdout(&o)
}

/// Vxids of the transaction headers in varnishlog output.
fn vxids(text: &str) -> Vec<u64> {
    text.lines()
        .filter(|l| l.contains("<< "))
        .filter_map(|l| l.split(">>").nth(1)?.trim().parse().ok())
        .collect()
}

fn origin() -> Origin {
    Origin::start(|req| match req.url.as_str() {
        "/broken" => Reply::ok("").status(500),
        "/slow" => Reply::ok("slow").delay(Duration::from_millis(700)),
        "/garbage" => {
            let mut r = Reply::ok("");
            r.raw = Some(b"this is not HTTP\r\n\r\n".to_vec());
            r
        }
        _ => Reply::ok("fine").header("Cache-Control", "max-age=60"),
    })
}

#[test]
fn the_seeds_query_finds_failing_fetches_and_nothing_else() {
    let o = origin();
    let lq = Lacquer::start(o.addr, &[]);
    let mut c = lq.connect();
    assert_eq!(c.get("/fine", &[]).status, 200);
    assert_eq!(c.get("/fine", &[]).status, 200);
    let broken = c.get("/broken", &[]);
    assert_eq!(broken.status, 500);
    let mut c = lq.connect();
    let garbage = c.get("/garbage", &[]);
    assert_eq!(garbage.status, 503);
    let q = "(*Error) or (BerespStatus >= 500)";
    let mut text = String::new();
    assert!(eventually(Duration::from_secs(5), || {
        text = log(&lq, &["-g", "request", "-q", q]);
        vxids(&text).len() == 4
    }));
    // Two groups: the 500 and the garbage, each a request with its fetch.
    assert_eq!(text.matches("<< Request  >>").count(), 2, "{text}");
    assert!(text.contains("BerespStatus   500"), "{text}");
    assert!(text.contains("FetchError"), "{text}");
    assert!(text.contains("ReqURL         /broken"));
    assert!(text.contains("ReqURL         /garbage"));
    assert!(!text.contains("ReqURL         /fine"), "{text}");
}

#[test]
fn request_grouping_shows_a_request_with_its_fetch() {
    let o = origin();
    let lq = Lacquer::start(o.addr, &[]);
    let miss = lq.get("/page");
    assert_eq!(miss.status, 200);
    let xid = miss.xids()[0];
    let mut text = String::new();
    assert!(eventually(Duration::from_secs(5), || {
        text = log(&lq, &["-g", "request", "-q", &format!("vxid == {xid}")]);
        text.contains("<< BeReq")
    }));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0].trim_end(), format!("*   << Request  >> {xid}"));
    assert!(lines.contains(&"-   ReqURL         /page"), "{text}");
    assert!(lines.contains(&"-   VCL_call       MISS"));
    let link = lines
        .iter()
        .find(|l| l.starts_with("-   Link"))
        .expect("a link");
    let bereq: u64 = link.split_whitespace().nth(3).unwrap().parse().unwrap();
    assert!(
        lines.contains(&format!("**  << BeReq    >> {bereq:<10}").as_str()),
        "{text}"
    );
    assert!(lines.contains(&"--  BereqURL       /page"));
    assert!(lines.contains(&format!("--  Begin          bereq {xid} fetch").as_str()));
    // Raw mode: every record on a line with its vxid and side.
    let raw = log(&lq, &["-g", "raw", "-i", "ReqURL,BereqURL"]);
    assert!(
        raw.contains(&format!("{xid:>10} ReqURL         c /page")),
        "{raw}"
    );
    assert!(raw.contains(&format!("{bereq:>10} BereqURL       b /page")));
}

#[test]
fn session_grouping_and_binary_files() {
    let o = origin();
    let lq = Lacquer::start(o.addr, &[]);
    let mut c = lq.connect();
    assert_eq!(c.get("/one", &[]).status, 200);
    assert_eq!(c.get("/two", &[]).status, 200);
    drop(c);
    // The session ends when the client closes: then it is one group with
    // both requests and their fetches, one level down each.
    let mut text = String::new();
    assert!(eventually(Duration::from_secs(5), || {
        text = log(&lq, &["-g", "session", "-q", "ReqURL eq \"/two\""]);
        text.contains("<< Session")
    }));
    assert!(text.starts_with("*   << Session  >> "), "{text}");
    assert_eq!(text.matches("**  << Request  >>").count(), 2, "{text}");
    assert_eq!(text.matches("*** << BeReq    >>").count(), 2, "{text}");
    assert!(text.contains("--  ReqURL         /one"));
    assert!(text.contains("SessClose      REM_CLOSE"), "{text}");
    // Written to a file and read back: the same records, filtered then.
    let file = lq.workdir.join("dump.bin");
    let f = file.to_str().unwrap();
    log(&lq, &["-w", f]);
    // -r reads the file; the -n the helper adds is not consulted.
    let back = stdout(&tool(
        &lq,
        &["log", "-r", f, "-g", "request", "-i", "ReqURL,BereqURL"],
    ));
    assert_eq!(back.matches("<< Request  >>").count(), 2, "{back}");
    assert!(back.contains("-   ReqURL         /two"));
    assert!(back.contains("--  BereqURL       /two"));
    let o = Command::new(env!("CARGO_BIN_EXE_lacquer"))
        .args([
            "log",
            "-r",
            lq.workdir.join("test-absent").to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(!o.status.success());
}

#[test]
fn timestamp_fields_find_only_the_slow_request() {
    let o = origin();
    let lq = Lacquer::start(o.addr, &[]);
    let mut c = lq.connect();
    assert_eq!(c.get("/quick", &[]).status, 200);
    assert_eq!(c.get("/slow", &[]).status, 200);
    assert_eq!(c.get("/quick", &[]).status, 200);
    let mut text = String::new();
    assert!(eventually(Duration::from_secs(5), || {
        text = log(&lq, &["-q", "Timestamp:Resp[2] > 0.5", "-i", "ReqURL"]);
        !text.is_empty()
    }));
    assert_eq!(vxids(&text).len(), 1, "{text}");
    assert!(text.contains("ReqURL         /slow"));
    assert!(!text.contains("/quick"));
}

/// `-R limit/duration`: past the limit, transactions are suppressed.
#[test]
fn a_rate_limit_suppresses_the_transactions_past_it() {
    let o = origin();
    let lq = Lacquer::start(o.addr, &[]);
    let mut c = lq.connect();
    for n in 0..5 {
        assert_eq!(c.get(&format!("/r{n}"), &[]).status, 200);
    }
    let mut text = String::new();
    assert!(eventually(Duration::from_secs(5), || {
        text = log(&lq, &["-g", "request", "-i", "ReqURL"]);
        vxids(&text).len() >= 5
    }));
    let limited = log(&lq, &["-g", "request", "-i", "ReqURL", "-R", "2/m"]);
    assert_eq!(limited.matches("<< Request").count(), 2, "{limited}");
}

#[test]
fn a_reader_started_later_catches_up_and_follows() {
    let o = origin();
    let lq = Lacquer::start(o.addr, &[]);
    for i in 0..50 {
        lq.get(&format!("/before{i}"));
    }
    // Started after the writer: with -d it sees what is already there.
    let before = log(&lq, &["-i", "ReqURL"]);
    assert_eq!(before.matches("/before").count(), 50, "{before}");
    // Following: a reader at the head sees what comes next, and only that.
    let mut follower = Command::new(env!("CARGO_BIN_EXE_lacquer"))
        .args(["log", "-q", "ReqURL", "-i", "ReqURL", "-k", "3", "-n"])
        .arg(&lq.workdir)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The follower opens the ring at its head; requests made once it is
    // running reach it. Keep requesting until it has three and exits.
    let mut n = 0;
    assert!(eventually(Duration::from_secs(10), || {
        n += 1;
        lq.get(&format!("/after{n}"));
        matches!(follower.try_wait(), Ok(Some(_)))
    }));
    let mut out = String::new();
    std::io::Read::read_to_string(follower.stdout.as_mut().unwrap(), &mut out).unwrap();
    let urls: Vec<&str> = out.lines().filter(|l| l.contains("ReqURL")).collect();
    assert_eq!(urls.len(), 3, "{out}");
    assert!(
        urls.iter().all(|l| l.contains("ReqURL         /after")),
        "{out}"
    );
}

#[test]
fn ncsa_top_hist_and_stat_read_the_same_instance() {
    let o = origin();
    let lq = Lacquer::start(o.addr, &[]);
    let mut c = lq.connect();
    for _ in 0..3 {
        assert_eq!(
            c.get("/n", &[("User-Agent", "probe/1"), ("Referer", "http://r/")])
                .status,
            200
        );
    }
    assert!(eventually(Duration::from_secs(5), || {
        stdout(&tool(&lq, &["stat", "-1", "-f", "MAIN.cache_hit"]))
            .starts_with("MAIN.cache_hit               2 ")
    }));
    let stat = stdout(&tool(&lq, &["stat", "-1", "-f", "MAIN.cache_hit"]));
    assert_eq!(stat.lines().count(), 1, "{stat}");
    let json = stdout(&tool(&lq, &["stat", "-j", "-f", "client_req"]));
    assert!(json.contains("\"MAIN.client_req\": {"), "{json}");
    assert!(json.contains("\"value\": 3"), "{json}");

    let ncsa = stdout(&tool(&lq, &["ncsa", "-d"]));
    let lines: Vec<&str> = ncsa.lines().collect();
    assert_eq!(lines.len(), 3, "{ncsa}");
    assert!(lines[0].starts_with("127.0.0.1 - - ["), "{ncsa}");
    assert!(lines[0].contains("\"GET http://"), "{ncsa}");
    assert!(
        lines[0].ends_with("/n HTTP/1.1\" 200 4 \"http://r/\" \"probe/1\""),
        "{ncsa}"
    );
    let handling = stdout(&tool(
        &lq,
        &["ncsa", "-d", "-F", "%s %{Varnish:handling}x %U"],
    ));
    assert_eq!(handling, "200 miss /n\n200 hit /n\n200 hit /n\n");

    let top = stdout(&tool(&lq, &["top", "-1", "-i", "ReqURL"]));
    assert_eq!(top, "     3.00 ReqURL         /n\n");

    let hist = stdout(&tool(&lq, &["hist", "-1"]));
    assert!(hist.starts_with("2 hits, 1 misses"), "{hist}");
    assert!(hist.contains('|') && hist.contains('#'), "{hist}");
}

#[test]
fn tools_name_a_missing_instance() {
    let o = tool_without_instance(&["log", "-d"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no log at") && err.contains("-n"), "{err}");
    let o = tool_without_instance(&["stat", "-1", "-t", "0"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("is lacquer running"));
    let o = tool_without_instance(&["log", "-q", "ReqURL ~ \"(\""]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("column"));
}

fn tool_without_instance(args: &[&str]) -> Output {
    let dir = std::env::temp_dir().join(format!("lacquer-no-instance-{}", std::process::id()));
    Command::new(env!("CARGO_BIN_EXE_lacquer"))
        .args(args)
        .arg("-n")
        .arg(dir)
        .output()
        .unwrap()
}

#[test]
fn metrics_endpoint_serves_the_counters_in_prometheus_format() {
    let o = origin();
    let lq = Lacquer::start(o.addr, &["--metrics", "127.0.0.1:0"]);
    let mut c = lq.connect();
    assert_eq!(c.get("/m", &[]).status, 200);
    assert_eq!(c.get("/m", &[]).status, 200);
    let addr = lq.metrics.expect("the daemon reported its metrics address");
    let mut scrape = crate::harness::Client::connect(addr);
    let r = scrape.get("/metrics", &[]);
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("Content-Type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    let text = r.text();
    assert!(text.contains("# TYPE lacquer_main_cache_hit_total counter\n"));
    assert!(
        text.contains("\nlacquer_main_cache_hit_total 1\n"),
        "{text}"
    );
    assert!(
        text.contains("\nlacquer_main_cache_miss_total 1\n"),
        "{text}"
    );
    assert!(text.contains("\nlacquer_vbe_req_total{vcl=\"boot\",backend=\"default\"} 1\n"));
    // The per-backend up gauge, and varnishd's management counters.
    assert!(
        text.contains("\nlacquer_vbe_healthy{vcl=\"boot\",backend=\"default\"} 1\n"),
        "{text}"
    );
    assert!(
        text.contains("\nlacquer_mgt_child_start_total 1\n"),
        "{text}"
    );
    assert!(
        text.contains("\nlacquer_mgt_child_panic_total 0\n"),
        "{text}"
    );
    assert!(
        text.contains("\nlacquer_sma_c_req_total{store=\"s0\"} 1\n"),
        "{text}"
    );
    // The same connection serves another scrape; other paths are 404.
    assert_eq!(scrape.get("/metrics?x=1", &[]).status, 200);
    assert_eq!(scrape.get("/", &[]).status, 404);
    // A malformed request gets a 400 and a closed connection.
    let mut bad = crate::harness::Client::connect(addr);
    bad.send(b"GET /metrics HTTP/1.1\r\nNo colon here\r\n\r\n");
    assert_eq!(bad.read_response(false).status, 400);
    assert!(bad.closed());
}

/// varnishncsa as its packaged service runs it: in the background (`-D`),
/// its process id in a file (`-P`), lines appended to a file (`-w`, `-a`).
#[test]
fn ncsa_runs_as_a_service_writing_a_file() {
    let o = Origin::start(|_| Reply::ok("body"));
    let lq = Lacquer::start(o.addr, &[]);
    let dir = lq.workdir.join("ncsa-service");
    std::fs::create_dir_all(&dir).unwrap();
    let (log, pid_file) = (dir.join("access.log"), dir.join("ncsa.pid"));
    std::fs::write(&log, "an earlier line\n").unwrap();
    // `-f`: the format from a file's first line.
    let format = dir.join("format");
    std::fs::write(&format, "%s %U\nignored\n").unwrap();
    let started = tool(
        &lq,
        &[
            "ncsa",
            "-D",
            "-a",
            "-P",
            pid_file.to_str().unwrap(),
            "-w",
            log.to_str().unwrap(),
            "-f",
            format.to_str().unwrap(),
        ],
    );
    assert!(started.status.success(), "{started:?}");
    // The daemon writes its pid once it runs, after the parent returned.
    let read_pid = || {
        std::fs::read_to_string(&pid_file)
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    assert!(eventually(Duration::from_secs(10), || read_pid()
        .parse::<u32>()
        .is_ok()));
    let pid = read_pid();
    let mut c = lq.connect();
    assert!(eventually(Duration::from_secs(10), || {
        assert_eq!(c.get("/logged", &[]).status, 200);
        std::fs::read_to_string(&log).is_ok_and(|t| t.contains("200 /logged"))
    }));
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.starts_with("an earlier line\n"), "{text}");
    let _ = Command::new("kill").arg(&pid).status();
}
