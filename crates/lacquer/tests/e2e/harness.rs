//! The pieces every end-to-end test uses: the real `lacquer` binary
//! started as a subprocess on port 0, a raw blocking HTTP/1 client with its
//! own parser, and waiting on conditions with a deadline.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The longest [`Client::read_until`] reads for what it waits for.
pub const READ_UNTIL_LIMIT: Duration = Duration::from_secs(30);

static INSTANCE: AtomicUsize = AtomicUsize::new(0);

/// A running `lacquer serve`.
pub struct Lacquer {
    child: Child,
    /// The first listener (`-a 127.0.0.1:0`).
    pub addr: SocketAddr,
    /// Every listener, by name, as the daemon reported them.
    pub listens: Vec<(String, SocketAddr)>,
    /// The management interface (`-T`), if it is on.
    pub mgmt: Option<SocketAddr>,
    /// The `/metrics` endpoint, if `--metrics` was given.
    pub metrics: Option<SocketAddr>,
    /// The dashboard, if `--dashboard` was given.
    pub dashboard: Option<SocketAddr>,
    pub workdir: PathBuf,
}

impl Lacquer {
    /// Starts `lacquer serve -a 127.0.0.1:0 -b BACKEND ARGS…` and waits
    /// until it reports its listening address.
    pub fn start(backend: SocketAddr, args: &[&str]) -> Lacquer {
        let b = backend.to_string();
        let mut all = vec!["-b", b.as_str()];
        all.extend_from_slice(args);
        Lacquer::spawn(&all, None)
    }

    /// Starts `lacquer serve -f` with a VCL file from `tests/vcl/`, its
    /// `${name}` placeholders replaced.
    pub fn with_vcl(file: &str, vars: &[(&str, String)], args: &[&str]) -> Lacquer {
        Lacquer::spawn(args, Some(vcl_text(file, vars)))
    }

    pub fn spawn(args: &[&str], vcl: Option<String>) -> Lacquer {
        Lacquer::spawn_with(args, vcl, false)
    }

    /// [`Lacquer::start`], with the daemon's standard error a pipe whose
    /// reading end is closed at once: every write to it fails.
    pub fn start_with_stderr_closed(backend: SocketAddr, args: &[&str]) -> Lacquer {
        let b = backend.to_string();
        let mut all = vec!["-b", b.as_str()];
        all.extend_from_slice(args);
        Lacquer::spawn_with(&all, None, true)
    }

    fn spawn_with(args: &[&str], vcl: Option<String>, stderr_closed: bool) -> Lacquer {
        let workdir = std::env::temp_dir().join(format!(
            "lacquer-e2e-{}-{}",
            std::process::id(),
            INSTANCE.fetch_add(1, Ordering::SeqCst)
        ));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_lacquer"));
        // As varnishtest does, the daemon stays who runs the tests.
        cmd.arg("serve")
            .args(["-j", "none", "-a", "127.0.0.1:0", "-n"])
            .arg(&workdir);
        if let Some(text) = vcl {
            std::fs::create_dir_all(&workdir).unwrap();
            let path = workdir.join("test.vcl");
            std::fs::write(&path, text).unwrap();
            cmd.arg("-f").arg(path);
        }
        let mut child = cmd
            .args(args)
            .stdout(Stdio::piped())
            .stderr(if stderr_closed {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .spawn()
            .expect("lacquer starts");
        drop(child.stderr.take());
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let mut addr = None;
        let mut listens = Vec::new();
        let mut mgmt = None;
        let mut metrics = None;
        let mut dashboard = None;
        for line in lines.by_ref() {
            let line = line.expect("stdout readable");
            if let Some(rest) = line.strip_prefix("Listen ") {
                let parts: Vec<&str> = rest.split_whitespace().collect();
                if let Ok(a) = format!("{}:{}", parts[1], parts[2]).parse() {
                    addr.get_or_insert(a);
                    listens.push((parts[0].to_string(), a));
                }
            }
            if let Some(rest) = line.strip_prefix("Management ") {
                let parts: Vec<&str> = rest.split_whitespace().collect();
                mgmt.get_or_insert(format!("{}:{}", parts[0], parts[1]).parse().unwrap());
            }
            if let Some(rest) = line.strip_prefix("Metrics ") {
                let parts: Vec<&str> = rest.split_whitespace().collect();
                metrics.get_or_insert(format!("{}:{}", parts[0], parts[1]).parse().unwrap());
            }
            if let Some(rest) = line.strip_prefix("Dashboard ") {
                let parts: Vec<&str> = rest.split_whitespace().collect();
                dashboard.get_or_insert(format!("{}:{}", parts[0], parts[1]).parse().unwrap());
            }
            if line == "Child launched OK" {
                break;
            }
        }
        // Keep draining stdout so the child never blocks on it.
        std::thread::spawn(move || for _ in lines {});
        Lacquer {
            child,
            addr: addr.expect("lacquer reported its address"),
            listens,
            mgmt,
            metrics,
            dashboard,
            workdir,
        }
    }

    /// A logged-in management connection, with the secret the daemon
    /// wrote to its work directory.
    pub fn cli(&self) -> lacquer_admin::Client {
        let secret = std::fs::read(self.workdir.join("_.secret")).expect("secret file");
        let addr = self.mgmt.expect("management interface on").to_string();
        lacquer_admin::Client::connect(&addr, Some(&secret), Duration::from_secs(20))
            .expect("management login")
    }

    /// One management command on a fresh connection: status and body.
    pub fn cli_run(&self, line: &str) -> (u16, String) {
        self.cli().send_line(line).expect("management command")
    }

    /// Runs a management command that must succeed; its body.
    pub fn cli_ok(&self, line: &str) -> String {
        let (status, body) = self.cli_run(line);
        assert_eq!(status, 200, "{line}: {body}");
        body
    }

    /// A counter's value, as `lacquer stat -1 -f NAME` shows it (0 when
    /// it is not shown).
    pub fn counter(&self, name: &str) -> u64 {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_lacquer"))
            .args(["stat", "-1", "-f", name, "-n"])
            .arg(&self.workdir)
            .output()
            .expect("lacquer stat");
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .nth(1)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    /// The address of the listener with this name.
    pub fn listen(&self, name: &str) -> SocketAddr {
        self.listens
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, a)| *a)
            .unwrap_or_else(|| panic!("no listener {name}: {:?}", self.listens))
    }

    pub fn connect(&self) -> Client {
        Client::connect(self.addr)
    }

    /// One GET on a fresh connection.
    pub fn get(&self, url: &str) -> Resp {
        self.connect().get(url, &[])
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// How the process ended, once it has (None while it runs).
    pub fn exit_status(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().unwrap()
    }
}

/// A child process of a test, killed and reaped when the test ends,
/// whether it passed or not.
pub struct Reaped(pub std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Lacquer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.workdir);
    }
}

/// A VCL file of the suite with `${name}` placeholders replaced.
pub fn vcl_text(file: &str, vars: &[(&str, String)]) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/vcl")
        .join(file);
    let mut text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    for (name, value) in vars {
        text = text.replace(&format!("${{{name}}}"), value);
    }
    text
}

/// `lacquer serve -C -f` on a text: exit code, stdout, stderr.
pub fn compile_vcl(text: &str) -> (i32, String, String) {
    let dir = std::env::temp_dir().join(format!(
        "lacquer-e2e-vcc-{}-{}",
        std::process::id(),
        INSTANCE.fetch_add(1, Ordering::SeqCst)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("input.vcl");
    std::fs::write(&path, text).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_lacquer"))
        .args(["serve", "-C", "-f"])
        .arg(&path)
        .output()
        .expect("lacquer runs");
    let _ = std::fs::remove_dir_all(&dir);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A parsed response.
#[derive(Debug, Clone)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn count(&self, name: &str) -> usize {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .count()
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).to_string()
    }

    /// The ids in X-Varnish.
    pub fn xids(&self) -> Vec<u64> {
        self.header("x-varnish")
            .unwrap_or("")
            .split_whitespace()
            .map(|s| s.parse().unwrap())
            .collect()
    }
}

/// A raw HTTP/1 client connection.
pub struct Client {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        stream.set_nodelay(true).unwrap();
        Client {
            stream,
            buf: Vec::new(),
        }
    }

    pub fn send(&mut self, raw: &[u8]) {
        self.stream.write_all(raw).expect("send");
    }

    /// Sends a GET with `Host: test` and the given headers, reads the answer.
    pub fn get(&mut self, url: &str, headers: &[(&str, &str)]) -> Resp {
        self.request("GET", url, headers)
    }

    pub fn request(&mut self, method: &str, url: &str, headers: &[(&str, &str)]) -> Resp {
        let mut raw = format!("{method} {url} HTTP/1.1\r\n");
        if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
            raw.push_str("Host: test\r\n");
        }
        for (n, v) in headers {
            raw.push_str(&format!("{n}: {v}\r\n"));
        }
        raw.push_str("\r\n");
        self.send(raw.as_bytes());
        self.read_response(method == "HEAD")
    }

    fn fill(&mut self) -> usize {
        let mut tmp = [0u8; 65536];
        match self.stream.read(&mut tmp) {
            Ok(n) => {
                self.buf.extend_from_slice(&tmp[..n]);
                n
            }
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => 0,
            Err(e) => panic!("read failed: {e}"),
        }
    }

    fn fill_to(&mut self, want: usize) {
        while self.buf.len() < want {
            assert!(self.fill() > 0, "connection closed inside a response");
        }
    }

    /// Reads on until `needle` has come (a stream's body, after
    /// [`Client::read_head`]); returns everything read since the head.
    /// A stream that keeps sending without it fails the test after
    /// [`READ_UNTIL_LIMIT`] (each read alone is bounded by the socket's
    /// timeout; an event stream never lets that one pass).
    pub fn read_until(&mut self, needle: &[u8]) -> Vec<u8> {
        let deadline = Instant::now() + READ_UNTIL_LIMIT;
        while !self.buf.windows(needle.len()).any(|w| w == needle) {
            assert!(
                Instant::now() < deadline,
                "no {:?} in {:?} of reading; the last bytes: {:?}",
                String::from_utf8_lossy(needle),
                READ_UNTIL_LIMIT,
                String::from_utf8_lossy(&self.buf[self.buf.len().saturating_sub(200)..])
            );
            assert!(self.fill() > 0, "connection closed before {needle:?}");
        }
        self.buf.clone()
    }

    /// Reads just a response head; the body stays unread.
    pub fn read_head(&mut self) -> Resp {
        let end = loop {
            if let Some(p) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break p + 4;
            }
            assert!(
                self.fill() > 0,
                "connection closed before a response head: {:?}",
                String::from_utf8_lossy(&self.buf)
            );
        };
        let head = String::from_utf8_lossy(&self.buf[..end]).to_string();
        self.buf.drain(..end);
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap();
        assert!(
            status_line.starts_with("HTTP/1.1 "),
            "status line {status_line:?}"
        );
        let status = status_line[9..12].parse().unwrap();
        let headers = lines
            .filter(|l| !l.is_empty())
            .map(|l| {
                let (n, v) = l.split_once(':').expect("header has a colon");
                (n.trim().to_string(), v.trim().to_string())
            })
            .collect();
        Resp {
            status,
            headers,
            body: Vec::new(),
        }
    }

    /// Reads up to `n` body bytes that have arrived or arrive next.
    pub fn read_some(&mut self, n: usize) -> Vec<u8> {
        if self.buf.is_empty() {
            self.fill();
        }
        let take = n.min(self.buf.len());
        self.buf.drain(..take).collect()
    }

    /// Reads a whole response.
    pub fn read_response(&mut self, head_request: bool) -> Resp {
        let mut resp = self.read_head();
        if head_request || resp.status == 204 || resp.status == 304 || resp.status < 200 {
            return resp;
        }
        if resp
            .header("transfer-encoding")
            .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
        {
            loop {
                let line_end = loop {
                    if let Some(p) = self.buf.windows(2).position(|w| w == b"\r\n") {
                        break p;
                    }
                    assert!(self.fill() > 0, "closed inside chunked body");
                };
                let line = String::from_utf8_lossy(&self.buf[..line_end]).to_string();
                self.buf.drain(..line_end + 2);
                let size = usize::from_str_radix(line.trim(), 16).expect("chunk size");
                self.fill_to(size + 2);
                resp.body.extend_from_slice(&self.buf[..size]);
                assert_eq!(&self.buf[size..size + 2], b"\r\n");
                self.buf.drain(..size + 2);
                if size == 0 {
                    break;
                }
            }
        } else if let Some(n) = resp.header("content-length") {
            let n: usize = n.parse().unwrap();
            self.fill_to(n);
            resp.body = self.buf.drain(..n).collect();
        } else {
            while self.fill() > 0 {}
            resp.body = std::mem::take(&mut self.buf);
        }
        resp
    }

    /// Whether the server closes the connection (within the read timeout)
    /// without sending anything more.
    pub fn closed(&mut self) -> bool {
        self.buf.is_empty() && self.fill() == 0
    }
}

/// Polls `cond` until it holds or `limit` passes.
/// After a worker was held for 8 s (`debug.worker.stall 0 8`) at `began`
/// and clients were answered: none waited for it (the watcher took
/// their connections to the other worker, `MAIN.sess_rebalanced`).
pub fn none_waited_for_the_held_worker(lq: &Lacquer, began: Instant) {
    assert!(
        began.elapsed() < Duration::from_secs(6),
        "a connection waited for the held worker ({:?})",
        began.elapsed()
    );
    assert!(eventually(Duration::from_secs(5), || lq
        .counter("MAIN.sess_rebalanced")
        > 0));
}

pub fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() > end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
