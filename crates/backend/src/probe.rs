//! Health probes, as Varnish runs them: every `.interval` a request
//! (`.request`, or a GET of `.url`) on a fresh connection that asks to be
//! closed, judged happy when the status is `.expected_response` within
//! `.timeout`. The last `.window` results decide: healthy while at least
//! `.threshold` of them were happy. `.initial` results count as happy at
//! the start. Each probe's steps (connected, sent, received, happy) are
//! kept as bit histories for `backend.list -p`, and each result is
//! described as a `Backend_health` record says it. One probe runs per
//! address and probe definition, shared by every backend (of every loaded
//! program) that names them ([`Probes`]).

use crate::{Address, Backend};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What a probe sends and how its results are judged.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ProbeSpec {
    /// The whole request, as sent.
    pub request: Vec<u8>,
    pub expected: u16,
    pub timeout: Duration,
    pub interval: Duration,
    /// 1 to 64 results.
    pub window: u32,
    pub threshold: u32,
    pub initial: u32,
}

impl ProbeSpec {
    /// The request for `.url` when no `.request` is given.
    pub fn get(url: &str, host: &str) -> Vec<u8> {
        format!("GET {url} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").into_bytes()
    }
}

/// The steps of one probe, in `Backend_health`'s flag order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Steps {
    /// Connected (over IPv4 or IPv6).
    pub connected_v4: bool,
    pub connected_v6: bool,
    pub send_error: bool,
    pub sent: bool,
    pub recv_error: bool,
    pub received: bool,
    pub happy: bool,
}

impl Steps {
    /// The eight flag characters (`4---X-RH`).
    pub fn flags(&self) -> String {
        let f = |on: bool, c: char| if on { c } else { '-' };
        [
            f(self.connected_v4, '4'),
            f(self.connected_v6, '6'),
            '-',
            f(self.send_error, 'x'),
            f(self.sent, 'X'),
            f(self.recv_error, 'r'),
            f(self.received, 'R'),
            f(self.happy, 'H'),
        ]
        .iter()
        .collect()
    }
}

/// One probe's result.
#[derive(Debug, Clone)]
pub struct ProbeResult {
    pub steps: Steps,
    /// Seconds from connecting to the status line, for a happy probe.
    pub time: f64,
    /// The status line, or what went wrong.
    pub message: String,
}

/// Bit histories, newest in bit 0.
#[derive(Debug, Default, Clone, Copy)]
struct History {
    v4: u64,
    v6: u64,
    send_error: u64,
    sent: u64,
    recv_error: u64,
    received: u64,
    happy: u64,
    /// The running average response time of happy probes.
    avg: f64,
    /// How many happy results the average has seen (at most 4 weigh).
    avg_n: u32,
}

/// A probe's state, shared by the backends it judges.
#[derive(Debug)]
pub struct Probe {
    pub addr: Address,
    pub spec: ProbeSpec,
    /// A TLS backend's probe speaks TLS too.
    tls: Option<crate::tls::BackendTls>,
    /// A backend that speaks HTTP/2 is probed over HTTP/2.
    h2: crate::h2::H2Mode,
    history: Mutex<History>,
    healthy: AtomicBool,
    /// The backends that follow it.
    backends: Mutex<Vec<Weak<Backend>>>,
    /// Its task has been started.
    started: AtomicBool,
}

/// The probes running, by address and definition, so that a program
/// loaded later (or a second backend on the same address) shares the
/// probe and its health instead of starting over from `.initial`.
#[derive(Debug, Default)]
pub struct Probes {
    live: Mutex<HashMap<ProbeKey, Weak<Probe>>>,
}

/// What makes two probes one: the address, the definition, for a TLS
/// backend how its connections are checked, and whether HTTP/2 is spoken.
type ProbeKey = (Address, ProbeSpec, Option<String>, crate::h2::H2Mode);

impl Probes {
    /// The live probe for this address, definition and TLS, or a new one.
    pub fn get(
        &self,
        addr: Address,
        spec: ProbeSpec,
        tls: Option<crate::tls::BackendTls>,
        h2: crate::h2::H2Mode,
    ) -> Arc<Probe> {
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        live.retain(|_, p| p.strong_count() > 0);
        let key = (addr, spec, tls.as_ref().map(|t| t.key.clone()), h2);
        if let Some(p) = live.get(&key).and_then(Weak::upgrade) {
            return p;
        }
        let mut probe = Probe::new(key.0.clone(), key.1.clone());
        probe.tls = tls;
        probe.h2 = h2;
        let probe = Arc::new(probe);
        live.insert(key, Arc::downgrade(&probe));
        probe
    }
}

/// What one recorded result did to the health.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub healthy: bool,
    pub changed: bool,
    pub good: u32,
    /// The `Backend_health` record's text after the backend name.
    pub line: String,
}

impl Probe {
    pub fn new(addr: Address, mut spec: ProbeSpec) -> Probe {
        spec.window = spec.window.clamp(1, 64);
        let initial = spec.initial.min(spec.window);
        let happy = if initial == 0 {
            0
        } else {
            u64::MAX >> (64 - initial)
        };
        let healthy = initial >= spec.threshold;
        Probe {
            addr,
            tls: None,
            h2: crate::h2::H2Mode::Off,
            backends: Mutex::new(Vec::new()),
            started: AtomicBool::new(false),
            healthy: AtomicBool::new(healthy),
            history: Mutex::new(History {
                happy,
                avg_n: initial,
                ..History::default()
            }),
            spec,
        }
    }

    pub fn healthy(&self) -> bool {
        self.healthy.load(Ordering::Relaxed)
    }

    /// Makes a backend follow this probe.
    pub fn follow(&self, backend: &Arc<Backend>) {
        let mut list = self.backends.lock().unwrap_or_else(|e| e.into_inner());
        list.retain(|b| b.strong_count() > 0);
        list.push(Arc::downgrade(backend));
    }

    /// The live backends that follow it.
    pub fn followers(&self) -> Vec<Arc<Backend>> {
        let list = self.backends.lock().unwrap_or_else(|e| e.into_inner());
        list.iter().filter_map(Weak::upgrade).collect()
    }

    /// Whether it should run: some backend of a warm program follows it
    /// (Varnish stops the probes of a cold program's backends).
    pub fn wanted(&self) -> bool {
        self.followers().iter().any(|b| b.is_warm())
    }

    /// True the first time only: the caller starts its task.
    pub fn claim_start(&self) -> bool {
        !self.started.swap(true, Ordering::AcqRel)
    }

    /// Runs the probe once, records the result and tells the backends
    /// that follow it.
    pub async fn run_once(&self) -> Recorded {
        let result = run(&self.addr, &self.spec, self.tls.as_ref(), self.h2).await;
        let recorded = self.record(&result);
        for b in self.followers() {
            b.probed(self, &recorded);
        }
        recorded
    }

    fn mask(&self) -> u64 {
        u64::MAX >> (64 - self.spec.window)
    }

    /// The happy history, newest in bit 0 (`VBE.*.happy`).
    pub fn happy_bits(&self) -> u64 {
        self.lock().happy
    }

    /// Happy results in the window.
    pub fn good(&self) -> u32 {
        (self.lock().happy & self.mask()).count_ones()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, History> {
        self.history.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The record for the state as it starts: `Went healthy|sick`.
    pub fn initial_line(&self) -> String {
        let healthy = self.healthy();
        format!(
            "Went {} -------H {} {} {} 0.000000 0.000000 \"\"",
            if healthy { "healthy" } else { "sick" },
            self.good(),
            self.spec.threshold,
            self.spec.window
        )
    }

    /// Adds a result to the histories and decides the health again.
    pub fn record(&self, r: &ProbeResult) -> Recorded {
        let mut h = self.lock();
        let s = r.steps;
        let push = |bits: &mut u64, on: bool| *bits = (*bits << 1) | u64::from(on);
        push(&mut h.v4, s.connected_v4);
        push(&mut h.v6, s.connected_v6);
        push(&mut h.send_error, s.send_error);
        push(&mut h.sent, s.sent);
        push(&mut h.recv_error, s.recv_error);
        push(&mut h.received, s.received);
        push(&mut h.happy, s.happy);
        if s.happy {
            h.avg_n = (h.avg_n + 1).min(4);
            h.avg += (r.time - h.avg) / f64::from(h.avg_n.max(1));
        }
        let good = (h.happy & self.mask()).count_ones();
        let healthy = good >= self.spec.threshold;
        let changed = self.healthy.swap(healthy, Ordering::Relaxed) != healthy;
        let line = format!(
            "{} {} {} {} {} {} {:.6} {:.6} \"{}\"",
            if changed { "Went" } else { "Still" },
            if healthy { "healthy" } else { "sick" },
            s.flags(),
            good,
            self.spec.threshold,
            self.spec.window,
            if s.received { r.time } else { 0.0 },
            h.avg,
            r.message
        );
        Recorded {
            healthy,
            changed,
            good,
            line,
        }
    }

    /// `backend.list -p`'s details: the counts and a line per step,
    /// oldest result on the left.
    pub fn details(&self) -> String {
        let h = *self.lock();
        let good = (h.happy & self.mask()).count_ones();
        let mut out = format!(
            " Current states  good: {good:2} threshold: {:2} window: {:2}\n",
            self.spec.threshold, self.spec.window
        );
        out.push_str(&format!(
            "  Average response time of good probes: {:.6}\n",
            h.avg
        ));
        out.push_str("  Oldest ================================================== Newest\n");
        let lines: [(u64, char, &str); 7] = [
            (h.v4, '4', "Good IPv4"),
            (h.v6, '6', "Good IPv6"),
            (h.send_error, 'x', "Error Xmit"),
            (h.sent, 'X', "Good Xmit"),
            (h.recv_error, 'r', "Error Recv"),
            (h.received, 'R', "Good Recv"),
            (h.happy, 'H', "Happy"),
        ];
        for (bits, c, what) in lines {
            // As varnishd: the happy row always, the others once set.
            if bits == 0 && c != 'H' {
                continue;
            }
            let row: String = (0..64)
                .rev()
                .map(|i| if bits >> i & 1 == 1 { c } else { '-' })
                .collect();
            out.push_str(&format!("  {row} {what}\n"));
        }
        out.push('\n');
        out
    }
}

/// Runs one probe against `addr` (over TLS for a TLS backend, as a
/// stream of a new HTTP/2 connection for one that speaks HTTP/2).
pub async fn run(
    addr: &Address,
    spec: &ProbeSpec,
    tls: Option<&crate::tls::BackendTls>,
    h2: crate::h2::H2Mode,
) -> ProbeResult {
    let mut steps = Steps::default();
    let start = Instant::now();
    let attempt = async {
        let mut stream = addr
            .connect()
            .await
            .map_err(|e| format!("Open error {}", os_error(&e)))?;
        // A Unix socket counts as the IPv4 bit, as in Varnish.
        if addr.ip().is_ipv4() {
            steps.connected_v4 = true;
        } else {
            steps.connected_v6 = true;
        }
        if let Some(tls) = tls {
            stream = tls
                .wrap(stream, spec.timeout)
                .await
                .map_err(|e| format!("TLS error {e}"))?;
        }
        if h2.speaks_h2(&stream) {
            let conn = crate::h2::H2Conn::handshake(stream, spec.timeout)
                .await
                .map_err(|e| format!("Open error ({e})"))?;
            stream = Box::new(conn.open());
        }
        let sent = async {
            stream.write_all(&spec.request).await?;
            // Out of a TLS connection's records too.
            stream.flush().await
        };
        if let Err(e) = sent.await {
            steps.send_error = true;
            return Err(format!("Write error {}", os_error(&e)));
        }
        steps.sent = true;
        // The status line is what counts; the rest is read and dropped
        // until the backend closes, as asked.
        let mut head = Vec::with_capacity(256);
        let mut buf = [0u8; 1024];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) => break,
                Ok(n) => {
                    if head.len() < 1024 {
                        head.extend_from_slice(&buf[..n]);
                    }
                }
                Err(e) if head.is_empty() => {
                    steps.recv_error = true;
                    return Err(format!("Read error {}", os_error(&e)));
                }
                Err(_) => break,
            }
        }
        let line = head
            .split(|&b| b == b'\r' || b == b'\n')
            .next()
            .unwrap_or(&[]);
        let line = String::from_utf8_lossy(line).into_owned();
        let status = line.split(' ').nth(1).and_then(|s| s.parse::<u16>().ok());
        match status {
            Some(status) if line.starts_with("HTTP/1.") => {
                steps.received = true;
                steps.happy = status == spec.expected;
                Ok(line)
            }
            _ => {
                steps.recv_error = true;
                Err("Not an HTTP response".to_string())
            }
        }
    };
    let outcome = tokio::time::timeout(spec.timeout, attempt).await;
    let message = match outcome {
        Ok(Ok(line)) => line,
        Ok(Err(e)) => e,
        Err(_) => {
            if steps.sent {
                steps.recv_error = true;
            }
            "Poll error 110 (Connection timed out)".to_string()
        }
    };
    ProbeResult {
        steps,
        time: start.elapsed().as_secs_f64(),
        message,
    }
}

/// `111 (Connection refused)`, as Varnish words socket errors.
fn os_error(e: &std::io::Error) -> String {
    let code = e.raw_os_error().unwrap_or(0);
    let text = e.to_string();
    // io::Error's text ends with " (os error N)"; keep the words.
    let words = text.split(" (os error").next().unwrap_or(&text);
    format!("{code} ({words})")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::h2::H2Mode;

    const ADDR: Address = Address::Tcp(std::net::SocketAddr::new(
        std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        9,
    ));

    fn spec(window: u32, threshold: u32, initial: u32) -> ProbeSpec {
        ProbeSpec {
            request: ProbeSpec::get("/", "h"),
            expected: 200,
            timeout: Duration::from_secs(1),
            interval: Duration::from_secs(1),
            window,
            threshold,
            initial,
        }
    }

    fn result(happy: bool) -> ProbeResult {
        ProbeResult {
            steps: Steps {
                connected_v4: true,
                sent: true,
                received: happy,
                recv_error: !happy,
                happy,
                ..Steps::default()
            },
            time: 0.002,
            message: if happy {
                "HTTP/1.1 200 OK"
            } else {
                "Read error"
            }
            .to_string(),
        }
    }

    #[test]
    fn threshold_over_the_window_decides_and_changes_are_reported() {
        let p = Probe::new(ADDR, spec(4, 2, 1));
        assert!(!p.healthy());
        assert!(p.initial_line().starts_with("Went sick -------H 1 2 4 "));
        let r = p.record(&result(true));
        assert!(r.healthy && r.changed && r.good == 2);
        assert!(
            r.line
                .starts_with("Went healthy 4---X-RH 2 2 4 0.002000 0.001000 \"HTTP/1.1 200 OK\""),
            "{}",
            r.line
        );
        let r = p.record(&result(false));
        assert!(r.healthy && !r.changed, "{}", r.line);
        assert!(
            r.line.starts_with("Still healthy 4---Xr-- 2 2 4 0.000000"),
            "{}",
            r.line
        );
        p.record(&result(false));
        let r = p.record(&result(false));
        assert!(!r.healthy && r.changed);
        assert!(r.line.starts_with("Went sick"));
        assert!(p.details().contains("Happy\n"));
    }

    #[test]
    fn initial_at_threshold_starts_healthy() {
        assert!(Probe::new(ADDR, spec(8, 3, 3)).healthy());
        assert!(!Probe::new(ADDR, spec(8, 3, 2)).healthy());
        assert_eq!(Probe::new(ADDR, spec(64, 1, 64)).good(), 64);
    }

    #[test]
    fn probes_are_shared_by_address_and_definition() {
        let probes = Probes::default();
        let a = probes.get(ADDR, spec(4, 2, 1), None, H2Mode::Off);
        let b = probes.get(ADDR, spec(4, 2, 1), None, H2Mode::Off);
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(
            &a,
            &probes.get(ADDR, spec(4, 2, 2), None, H2Mode::Off)
        ));
        // Once nobody holds it, the next program gets a fresh one.
        let weak = Arc::downgrade(&a);
        drop((a, b));
        assert!(weak.upgrade().is_none());
        assert_eq!(probes.get(ADDR, spec(4, 2, 1), None, H2Mode::Off).good(), 1);
    }

    #[test]
    fn only_warm_followers_want_a_probe() {
        let probe = Arc::new(Probe::new(ADDR, spec(4, 2, 1)));
        let backend = |name: &str| {
            let b = Backend::new(name, "h:9", ADDR, "h").with_probe(probe.clone());
            let b = Arc::new(b);
            b.follow_probe();
            b
        };
        let (old, new) = (backend("old"), backend("new"));
        assert!(probe.wanted());
        new.set_warm(false);
        assert!(probe.wanted());
        old.set_warm(false);
        assert!(!probe.wanted());
        new.set_warm(true);
        assert!(probe.wanted());
    }
}
