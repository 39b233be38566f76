//! The log as the dashboard reads it: a thread that follows the daemon's
//! own log ring, grouped by request as `lacquer log -g request` reads it,
//! and keeps what the page shows of it — each client request's response
//! time (`Timestamp: Resp`, since the request began), the most requested
//! URLs (counts that decay, as `lacquer top -i ReqURL` ranks them), the
//! responses by status class, each backend's response times (`Timestamp:
//! Beresp`, since its fetch began, under the backend `BackendOpen` names),
//! and the live tails the page asks for with a VSL query. It costs the workers
//! nothing: they write the ring as always, and this thread reads it on its
//! own. Everything it keeps is bounded, since URLs come from clients.

use bytes::Bytes;
use lacquer_shm::group::{Group, Grouping, Kind};
use lacquer_shm::query::{Query, View};
use lacquer_shm::Tag;
use lacquer_tools::source::{read_records, LogOptions, Sink};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

/// Response times kept between two samples (a fair sample of them past
/// that).
const MAX_TIMES: usize = 50_000;
/// URLs ranked at once; past that the least requested are forgotten.
const MAX_URLS: usize = 4096;
/// The longest URL kept (longer ones are cut).
const MAX_URL_LEN: usize = 200;
/// How much of a URL's count is left after a second (as `lacquer top`).
const DECAY: f64 = 0.9;
/// Backends whose times are kept at once (names come from programs, but
/// the bound holds whatever they load).
const MAX_BACKENDS: usize = 256;
/// Times kept per backend between two samples.
const MAX_BACKEND_TIMES: usize = 4096;
/// Tails open at once.
const MAX_TAILS: usize = 16;
/// Transactions a tail holds for a page that reads slowly; past that
/// they are dropped.
const TAIL_ROOM: usize = 256;

/// What the log said over the last second.
pub(crate) struct LogSample {
    /// Client requests finished.
    pub requests: u64,
    /// Response time percentiles, in seconds (None without requests).
    pub p50: Option<f64>,
    pub p99: Option<f64>,
    /// The most requested URLs, most first, with their decayed counts.
    pub top: Vec<(String, f64)>,
    /// Responses by status class: 1xx to 5xx (others are not counted).
    pub status: [u64; 5],
    /// Each backend that answered: its name and its response time
    /// percentiles (p50, p99), in seconds, by name.
    pub backends: Vec<(String, f64, f64)>,
}

/// A page's live tail: the transactions its query matches, formatted as
/// `lacquer log` prints them.
struct Tail {
    query: Option<Query>,
    tx: mpsc::Sender<Bytes>,
}

#[derive(Default)]
struct Kept {
    times: Vec<f64>,
    /// Requests seen since the last sample (more than `times` holds when
    /// it filled).
    seen: u64,
    urls: HashMap<Box<[u8]>, f64>,
    status: [u64; 5],
    backends: HashMap<Box<str>, Vec<f64>>,
    tails: Vec<Tail>,
}

/// What the log watcher shares with the dashboard's tasks.
#[derive(Default)]
pub(crate) struct LogWatch {
    kept: Mutex<Kept>,
}

impl LogWatch {
    /// Starts following the log in `workdir` on a thread of its own.
    pub fn open(workdir: PathBuf) -> Result<Arc<LogWatch>, String> {
        let watch = Arc::new(LogWatch::default());
        let mut sink = Watcher {
            watch: watch.clone(),
            opts: LogOptions::new(Grouping::Request),
            out: Vec::new(),
        };
        let mut read = LogOptions::new(Grouping::Request);
        read.workdir = Some(workdir);
        read.open_timeout = None;
        std::thread::Builder::new()
            .name("dashboard-log".into())
            .spawn(move || {
                let _ = read_records(&read, &mut sink);
            })
            .map_err(|e| format!("Cannot start the dashboard's log reader: {e}"))?;
        Ok(watch)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.kept.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes the last second's times and ranks the URLs (their counts
    /// decay as it does).
    pub fn sample(&self, rows: usize) -> LogSample {
        let mut kept = self.lock();
        let mut times = std::mem::take(&mut kept.times);
        let requests = std::mem::take(&mut kept.seen);
        times.sort_by(f64::total_cmp);
        let at = |q: f64| {
            let last = times.len().checked_sub(1)?;
            times.get(((last as f64) * q).round() as usize).copied()
        };
        let (p50, p99) = (at(0.5), at(0.99));
        let mut top: Vec<(String, f64)> = kept
            .urls
            .iter()
            .map(|(u, n)| (String::from_utf8_lossy(u).into_owned(), *n))
            .collect();
        top.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        top.truncate(rows);
        for n in kept.urls.values_mut() {
            *n *= DECAY;
        }
        kept.urls.retain(|_, n| *n >= 0.01);
        let status = std::mem::take(&mut kept.status);
        let mut backends: Vec<(String, f64, f64)> = kept
            .backends
            .drain()
            .filter_map(|(name, mut times)| {
                times.sort_by(f64::total_cmp);
                let last = times.len().checked_sub(1)?;
                let at = |q: f64| times[((last as f64) * q).round() as usize];
                Some((name.into_string(), at(0.5), at(0.99)))
            })
            .collect();
        backends.sort_by(|a, b| a.0.cmp(&b.0));
        LogSample {
            requests,
            p50,
            p99,
            top,
            status,
            backends,
        }
    }

    /// Opens a tail of the transactions `query` matches (all without
    /// one); None when too many are open.
    pub fn tail(&self, query: Option<Query>) -> Option<mpsc::Receiver<Bytes>> {
        let mut kept = self.lock();
        kept.tails.retain(|t| !t.tx.is_closed());
        if kept.tails.len() >= MAX_TAILS {
            return None;
        }
        let (tx, rx) = mpsc::channel(TAIL_ROOM);
        kept.tails.push(Tail { query, tx });
        Some(rx)
    }
}

/// The sink the log reader hands each request group.
struct Watcher {
    watch: Arc<LogWatch>,
    opts: LogOptions,
    out: Vec<u8>,
}

/// What a client request transaction says: its response time, URL and
/// final status.
struct RequestFacts<'g> {
    time: Option<f64>,
    url: Option<&'g [u8]>,
    status: Option<u16>,
}

/// The time since its transaction began that a `Timestamp` record of
/// `label` gives.
fn stamp(payload: &[u8], label: &[u8]) -> Option<f64> {
    if !payload.starts_with(label) {
        return None;
    }
    std::str::from_utf8(payload)
        .ok()?
        .split_whitespace()
        .nth(2)?
        .parse::<f64>()
        .ok()
}

/// The facts of the group's client request transaction.
fn request_facts(g: &Group) -> Option<RequestFacts<'_>> {
    let t = g.iter().find(|t| t.kind == Kind::Request)?;
    let mut facts = RequestFacts {
        time: None,
        url: None,
        status: None,
    };
    for r in &t.records {
        match r.tag {
            Tag::ReqURL if facts.url.is_none() => facts.url = Some(&r.payload[..]),
            // The last one: the status the client got.
            Tag::RespStatus => {
                facts.status = std::str::from_utf8(&r.payload)
                    .ok()
                    .and_then(|s| s.trim().parse().ok());
            }
            Tag::Timestamp => {
                if let Some(t) = stamp(&r.payload, b"Resp:") {
                    facts.time = Some(t);
                }
            }
            _ => {}
        }
    }
    Some(facts)
}

/// Each backend request transaction's backend and response time (from
/// its start to the response's head).
fn backend_times(g: &Group) -> impl Iterator<Item = (&str, f64)> {
    g.iter().filter(|t| t.kind == Kind::BeReq).filter_map(|t| {
        let mut name = None;
        let mut time = None;
        for r in &t.records {
            match r.tag {
                Tag::BackendOpen => {
                    name = std::str::from_utf8(&r.payload)
                        .ok()
                        .and_then(|s| s.split_whitespace().nth(1));
                }
                Tag::Timestamp => {
                    if let Some(t) = stamp(&r.payload, b"Beresp:") {
                        time = Some(t);
                    }
                }
                _ => {}
            }
        }
        Some((name?, time?))
    })
}

impl Sink for Watcher {
    fn group(&mut self, g: &Group) -> bool {
        let facts = request_facts(g);
        let mut kept = self.watch.lock();
        for (name, time) in backend_times(g) {
            let room = kept.backends.len() < MAX_BACKENDS;
            match kept.backends.get_mut(name) {
                Some(times) if times.len() < MAX_BACKEND_TIMES => times.push(time),
                Some(_) => {}
                None if room => {
                    kept.backends.insert(name.into(), vec![time]);
                }
                None => {}
            }
        }
        if let Some(RequestFacts { time, url, status }) = facts {
            if let Some(class @ 1..=5) = status.map(|s| s / 100) {
                kept.status[usize::from(class) - 1] += 1;
            }
            kept.seen += 1;
            if let Some(time) = time {
                if kept.times.len() < MAX_TIMES {
                    kept.times.push(time);
                } else {
                    // Keep a fair sample: each request replaces a kept one
                    // with the chance the room leaves it.
                    let slot =
                        (kept.seen.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 11) % kept.seen.max(1);
                    if let Some(t) = kept.times.get_mut(slot as usize) {
                        *t = time;
                    }
                }
            }
            if let Some(url) = url {
                let url = &url[..url.len().min(MAX_URL_LEN)];
                let full = kept.urls.len() >= MAX_URLS;
                match kept.urls.get_mut(url) {
                    Some(n) => *n += 1.0,
                    None if !full => {
                        kept.urls.insert(url.into(), 1.0);
                    }
                    None => {}
                }
            }
        }
        if kept.tails.is_empty() {
            return true;
        }
        let views: Vec<View<'_>> = g.iter().map(|t| t.view()).collect();
        self.out.clear();
        kept.tails.retain(|tail| {
            if tail.tx.is_closed() {
                return false;
            }
            if tail.query.as_ref().is_none_or(|q| q.matches(&views)) {
                if self.out.is_empty() {
                    lacquer_tools::log::format_group(&self.opts, g, &mut self.out);
                }
                // A page that does not keep up misses transactions.
                let _ = tail.tx.try_send(Bytes::copy_from_slice(&self.out));
            }
            true
        });
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lacquer_shm::group::Grouper;
    use lacquer_shm::{Record, Side};
    use std::time::Duration;

    fn group(vxid: u64, url: &str, resp: &str) -> Group {
        let mut grouper = Grouper::new(Grouping::Request, Duration::from_secs(5), 100);
        let mut out = Vec::new();
        for (tag, payload) in [
            (Tag::Begin, "req 1 rxreq".to_string()),
            (Tag::ReqURL, url.to_string()),
            (Tag::Timestamp, format!("Resp: 100.0 {resp} 0.0")),
            (Tag::End, String::new()),
        ] {
            grouper.push(
                Record::new(vxid, tag, Side::Client, payload.as_bytes()),
                &mut out,
            );
        }
        grouper.finish(&mut out);
        out.pop().unwrap()
    }

    fn watcher() -> Watcher {
        Watcher {
            watch: Arc::new(LogWatch::default()),
            opts: LogOptions::new(Grouping::Request),
            out: Vec::new(),
        }
    }

    #[test]
    fn times_become_percentiles_and_urls_a_ranking() {
        let mut w = watcher();
        for i in 0..100u64 {
            let url = if i % 4 == 0 { "/a" } else { "/b" };
            w.group(&group(
                i + 1,
                url,
                &format!("{:.3}", (i + 1) as f64 / 1000.0),
            ));
        }
        let s = w.watch.sample(10);
        assert_eq!(s.requests, 100);
        assert_eq!(s.p50, Some(0.051));
        assert_eq!(s.p99, Some(0.099));
        assert_eq!(s.top[0], ("/b".to_string(), 75.0));
        assert_eq!(s.top[1], ("/a".to_string(), 25.0));
        // The next second has no requests, and the counts decayed.
        let s = w.watch.sample(10);
        assert_eq!((s.requests, s.p50), (0, None));
        assert!((s.top[0].1 - 67.5).abs() < 1e-9);
    }

    #[test]
    fn statuses_are_counted_by_class_and_backend_times_by_name() {
        let mut w = watcher();
        for (i, (status, backend, beresp)) in [
            ("200", "b1", "0.010"),
            ("304", "b1", "0.030"),
            ("503", "b2", "0.500"),
        ]
        .into_iter()
        .enumerate()
        {
            let (req, bereq) = (10 * i as u64 + 1, 10 * i as u64 + 2);
            let mut grouper = Grouper::new(Grouping::Request, Duration::from_secs(5), 100);
            let mut out = Vec::new();
            let records = [
                (req, Side::Client, Tag::Begin, "req 1 rxreq".to_string()),
                (req, Side::Client, Tag::ReqURL, "/x".to_string()),
                (req, Side::Client, Tag::Link, format!("bereq {bereq} fetch")),
                (req, Side::Client, Tag::RespStatus, "200".to_string()),
                // The status the client got is the last one logged.
                (req, Side::Client, Tag::RespStatus, status.to_string()),
                (req, Side::Client, Tag::End, String::new()),
                (
                    bereq,
                    Side::Backend,
                    Tag::Begin,
                    format!("bereq {req} fetch"),
                ),
                (
                    bereq,
                    Side::Backend,
                    Tag::BackendOpen,
                    format!("25 {backend} 127.0.0.1 80 127.0.0.1 5000 connect"),
                ),
                (
                    bereq,
                    Side::Backend,
                    Tag::Timestamp,
                    format!("Beresp: 100.0 {beresp} 0.0"),
                ),
                (bereq, Side::Backend, Tag::End, String::new()),
            ];
            for (vxid, side, tag, payload) in records {
                grouper.push(Record::new(vxid, tag, side, payload.as_bytes()), &mut out);
            }
            grouper.finish(&mut out);
            for g in &out {
                w.group(g);
            }
        }
        let s = w.watch.sample(10);
        assert_eq!(s.status, [0, 1, 1, 0, 1]);
        assert_eq!(
            s.backends,
            vec![
                ("b1".to_string(), 0.030, 0.030),
                ("b2".to_string(), 0.5, 0.5)
            ]
        );
        let s = w.watch.sample(10);
        assert_eq!((s.status, s.backends.len()), ([0; 5], 0));
    }

    #[test]
    fn what_clients_send_is_bounded() {
        let mut w = watcher();
        let long = format!("/{}", "x".repeat(5000));
        w.group(&group(1, &long, "0.001"));
        for i in 0..(MAX_URLS as u64 + 100) {
            w.group(&group(i + 2, &format!("/u{i}"), "0.001"));
        }
        let kept = w.watch.lock();
        assert_eq!(kept.urls.len(), MAX_URLS);
        assert!(kept.urls.keys().all(|u| u.len() <= MAX_URL_LEN));
    }

    #[test]
    fn tails_get_what_their_query_matches() {
        let mut w = watcher();
        let q = Query::parse("ReqURL ~ \"^/a\"").unwrap();
        let mut a = w.watch.tail(Some(q)).unwrap();
        let mut all = w.watch.tail(None).unwrap();
        w.group(&group(1, "/b", "0.001"));
        w.group(&group(2, "/a", "0.001"));
        let text = String::from_utf8(a.try_recv().unwrap().to_vec()).unwrap();
        assert!(text.contains("ReqURL         /a"), "{text}");
        assert!(a.try_recv().is_err());
        assert!(all.try_recv().is_ok() && all.try_recv().is_ok());
        drop(all);
        w.group(&group(3, "/c", "0.001"));
        assert_eq!(w.watch.lock().tails.len(), 1, "a closed tail is dropped");
    }
}
