//! The live dashboard (`--dashboard`): its page asks for nothing from
//! anywhere else, `/events` sends the counters a second at a time (the
//! recent ones first), `/log` follows the transactions a VSL query
//! matches, `/metrics` is there too, and nothing on it changes the daemon.
//! (A real browser loads the page in `scripts/test-dashboard`.)

use crate::harness::{Client, Lacquer};
use crate::origin::{Origin, Reply};

fn origin() -> Origin {
    Origin::start(|_| Reply::ok("fine").header("Cache-Control", "max-age=60"))
}

#[test]
fn the_dashboard_serves_its_page_snapshots_log_tails_and_metrics() {
    let o = origin();
    let lq = Lacquer::start(o.addr, &["--dashboard", "127.0.0.1:0"]);
    let board = lq.dashboard.expect("the daemon reported its dashboard");
    let mut c = lq.connect();
    assert_eq!(c.get("/a", &[]).status, 200);
    assert_eq!(c.get("/a", &[]).status, 200);

    let mut d = Client::connect(board);
    let page = d.get("/", &[]);
    assert_eq!(page.status, 200);
    assert_eq!(
        page.header("Content-Type"),
        Some("text/html; charset=utf-8")
    );
    let csp = page.header("Content-Security-Policy").unwrap_or_default();
    assert!(csp.contains("default-src 'none'") && csp.contains("connect-src 'self'"));
    let text = page.text();
    assert!(text.contains("new EventSource(\"events\")"));
    for external in ["src=\"http", "href=\"http", "url(http", "@import"] {
        assert!(!text.contains(external), "the page loads {external}…");
    }
    assert!(page.body.len() < 200 * 1024);

    // Snapshots come a second apart; one soon shows the hit.
    let mut events = Client::connect(board);
    events.send(b"GET /events HTTP/1.1\r\nHost: t\r\n\r\n");
    let head = events.read_head();
    assert_eq!(head.status, 200);
    assert_eq!(head.header("Content-Type"), Some("text/event-stream"));
    let seen = events.read_until(b"\"cache_hit\":1,");
    let seen = String::from_utf8_lossy(&seen);
    assert!(seen.contains("\"cache_miss\":1,"), "{seen}");
    assert!(seen.contains("\"name\":\"default\""), "the backend: {seen}");
    assert!(seen.contains("\"active\":true"), "the program: {seen}");

    // A tail follows what its query matches, as `lacquer log` prints it.
    let mut tail = Client::connect(board);
    tail.send(b"GET /log?q=ReqURL+eq+%22%2Fb%22 HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(tail.read_head().status, 200);
    assert_eq!(c.get("/c", &[]).status, 200);
    assert_eq!(c.get("/b", &[]).status, 200);
    let got = tail.read_until(b"ReqURL         /b");
    let got = String::from_utf8_lossy(&got);
    assert!(got.contains("data: *   << Request  >>"), "{got}");
    assert!(!got.contains("ReqURL         /c"), "{got}");

    // The URLs the log saw are ranked. Counts decay by a tenth a second,
    // so on a loaded machine the two /a of the start could fall behind
    // /b and /c by now: three more put it first whatever the delay.
    for _ in 0..3 {
        assert_eq!(c.get("/a", &[]).status, 200);
    }
    let ranked = events.read_until(b"\"top\":[[\"/a\",");
    assert!(!ranked.is_empty());

    // A query that does not parse is answered at once.
    let bad = d.get("/log?q=ReqURL+%3D%3D%3D", &[]);
    assert_eq!(bad.status, 400);
    assert!(bad.text().contains("Query error"), "{}", bad.text());
    assert_eq!(d.get("/metrics", &[]).status, 200);
    assert_eq!(d.get("/nothing", &[]).status, 404);
    // Read-only: no method but GET and HEAD.
    let post = d.request("POST", "/", &[("Content-Length", "0")]);
    assert_eq!(post.status, 405);
    // A malformed request gets a 400 and a close.
    let mut broken = Client::connect(board);
    broken.send(b"GET / HTTP/1.1\r\nNo colon here\r\n\r\n");
    assert_eq!(broken.read_response(false).status, 400);
    assert!(broken.closed());
}

fn post_action(board: std::net::SocketAddr, form: &str) -> crate::harness::Resp {
    let mut c = Client::connect(board);
    c.send(
        format!(
            "POST /action HTTP/1.1\r\nHost: t\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{form}",
            form.len()
        )
        .as_bytes(),
    );
    c.read_response(false)
}

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'.' | b'_' | b'-' => (b as char).to_string(),
            b' ' => "+".to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// With `--dashboard-secret`, a page that answers a fresh challenge may
/// ban, purge tags, set a backend's health and switch programs, and
/// nothing else; a challenge answers once. Without it, nothing acts.
#[test]
fn dashboard_actions_need_the_secret_and_a_fresh_challenge() {
    let o = origin();
    let dir = std::env::temp_dir().join(format!("lacquer-dash-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let secret_file = dir.join("dashboard.secret");
    std::fs::write(&secret_file, "open sesame\n").unwrap();
    let secret_arg = secret_file.display().to_string();
    let lq = Lacquer::start(
        o.addr,
        &[
            "--dashboard",
            "127.0.0.1:0",
            "--dashboard-secret",
            &secret_arg,
        ],
    );
    let board = lq.dashboard.unwrap();
    let mut c = lq.connect();
    assert_eq!(c.get("/a", &[]).status, 200);
    assert_eq!(c.get("/a", &[]).status, 200);
    assert_eq!(o.count("/a"), 1, "the second was a hit");
    let mut d = Client::connect(board);
    assert!(
        d.get("/", &[]).text().contains("if (true) {"),
        "the page offers actions"
    );

    let challenge = d.get("/challenge", &[]).text();
    let response = lacquer_admin::auth_response(&challenge, b"open sesame\n");
    let form = |command: &str, challenge: &str, response: &str| {
        format!(
            "challenge={challenge}&response={response}&command={}",
            encode(command)
        )
    };
    let ran = post_action(board, &form("ban req.url ~ ^/a", &challenge, &response));
    assert_eq!(ran.status, 200, "{}", ran.text());
    assert!(ran.text().starts_with("200\n"), "{}", ran.text());
    assert_eq!(c.get("/a", &[]).status, 200);
    assert_eq!(o.count("/a"), 2, "banned, so fetched again");
    // The same answer again: the challenge is used up.
    let replay = post_action(board, &form("ban req.url ~ ^/a", &challenge, &response));
    assert_eq!(replay.status, 403);
    // A wrong answer, and a command the dashboard does not run.
    let challenge = d.get("/challenge", &[]).text();
    let wrong = lacquer_admin::auth_response(&challenge, b"guess\n");
    assert_eq!(
        post_action(board, &form("ban req.url ~ .", &challenge, &wrong)).status,
        403
    );
    let challenge = d.get("/challenge", &[]).text();
    let response = lacquer_admin::auth_response(&challenge, b"open sesame\n");
    let refused = post_action(
        board,
        &form("param.set default_ttl 1", &challenge, &response),
    );
    assert_eq!(refused.status, 403);
    assert!(refused.text().contains("Only ban"), "{}", refused.text());
    // A command the table refuses says so in its status.
    let challenge = d.get("/challenge", &[]).text();
    let response = lacquer_admin::auth_response(&challenge, b"open sesame\n");
    let unknown = post_action(board, &form("vcl.use nosuch", &challenge, &response));
    assert!(unknown.text().starts_with("106\n"), "{}", unknown.text());
    // A form too large for an action is refused without being read.
    let mut big = Client::connect(board);
    big.send(b"POST /action HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\n");
    assert_eq!(big.read_response(false).status, 413);
    assert!(big.closed());
    let _ = std::fs::remove_dir_all(&dir);

    // Without the secret the dashboard only reads.
    let ro = Lacquer::start(o.addr, &["--dashboard", "127.0.0.1:0"]);
    let board = ro.dashboard.unwrap();
    let mut d = Client::connect(board);
    assert_eq!(d.get("/challenge", &[]).status, 404);
    assert!(d.get("/", &[]).text().contains("if (false) {"));
    assert_eq!(
        post_action(board, "challenge=a&response=b&command=ban").status,
        405
    );
}
