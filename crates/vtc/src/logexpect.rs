//! `logexpect lN -v vN [-g grouping] [-q query] [-d 0|1] { expect skip
//! vxid tag [regex] … } -start|-wait|-run`: reads the daemon's
//! shared-memory log as varnishtest's logexpect does and checks that its
//! records come in the order the spec lists. `skip` is how many records
//! may come before the next match (`*`: any number), `vxid` a number,
//! `*` or `=` (the vxid of the last match), `tag` a tag name or `*`.

use crate::fail;
use crate::script::Command;
use crate::state::World;
use crate::trace::{fatal, log, Fail, Step};
use lacquer_shm::group::{Grouper, Grouping};
use lacquer_shm::query::{Query, View};
use lacquer_shm::{Reader, Record, Tag};
use regex::bytes::Regex;
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

#[derive(Debug)]
enum Skip {
    Any,
    Exactly(usize),
}

#[derive(Debug)]
enum Vxid {
    Any,
    Same,
    Id(u64),
}

#[derive(Debug)]
struct Expect {
    skip: Skip,
    vxid: Vxid,
    tag: Option<Tag>,
    re: Option<Regex>,
    text: String,
}

pub struct LogExpect {
    pub name: String,
    workdir: Option<PathBuf>,
    grouping: Grouping,
    query: Option<String>,
    from_head: bool,
    spec: Vec<Expect>,
    thread: Option<JoinHandle<()>>,
}

impl LogExpect {
    pub fn new(name: &str) -> LogExpect {
        LogExpect {
            name: name.to_string(),
            workdir: None,
            grouping: Grouping::Vxid,
            query: None,
            from_head: false,
            spec: Vec::new(),
            thread: None,
        }
    }

    /// Takes the options and the spec of one `logexpect` command, starting
    /// or waiting as it asks.
    pub fn command(&mut self, world: &Arc<World>, cmd: &Command) -> Step {
        let words = &cmd.words[2..];
        let mut i = 0;
        while i < words.len() {
            let w = &words[i];
            let mut value = || {
                i += 1;
                words
                    .get(i)
                    .map(|w| w.text.clone())
                    .ok_or_else(|| Fail(format!("logexpect: {} needs a value", w.text)))
            };
            match w.text.as_str() {
                _ if w.block => self.spec = parse_spec(&world.macros.expand(&w.text)?)?,
                "-v" => self.workdir = Some(world.tmpdir.join(value()?)),
                "-g" => {
                    let g = value()?;
                    self.grouping = Grouping::parse(&g)
                        .ok_or_else(|| Fail(format!("logexpect: unknown grouping \"{g}\"")))?;
                }
                "-q" => self.query = Some(value()?),
                "-d" => self.from_head = value()? == "1",
                "-start" => self.start(world)?,
                "-wait" => self.wait(),
                "-run" => {
                    self.start(world)?;
                    self.wait();
                }
                other => fail!("logexpect: unknown option \"{other}\""),
            }
            i += 1;
        }
        Ok(())
    }

    fn start(&mut self, world: &Arc<World>) -> Step {
        let Some(dir) = self.workdir.clone() else {
            fail!("logexpect {}: -v is needed", self.name);
        };
        let query = match &self.query {
            Some(q) => Some(Query::parse(q).map_err(|e| Fail(format!("logexpect -q: {e}")))?),
            None => None,
        };
        let mut reader = Reader::open(&dir, self.from_head)
            .map_err(|e| Fail(format!("logexpect {}: {e}", self.name)))?;
        let spec = std::mem::take(&mut self.spec);
        let (name, grouping) = (self.name.clone(), self.grouping);
        let limit = world.http_timeout;
        log(2, &name, "begin");
        self.thread = Some(std::thread::spawn(move || {
            let mut m = Matcher {
                name: name.clone(),
                spec,
                at: 0,
                skipped: 0,
                last_vxid: 0,
            };
            let mut grouper = Grouper::new(grouping, Duration::from_secs(120), 10_000);
            let (mut records, mut groups) = (Vec::new(), Vec::new());
            let end = Instant::now() + limit;
            while !m.done() {
                records.clear();
                if reader.poll(&mut records).is_err() {
                    fatal(&name, "log overrun");
                }
                for r in records.drain(..) {
                    grouper.push(r, &mut groups);
                }
                for g in groups.drain(..) {
                    let views: Vec<View<'_>> = g.iter().map(|t| t.view()).collect();
                    if query.as_ref().is_some_and(|q| !q.matches(&views)) {
                        continue;
                    }
                    for t in &g {
                        for r in &t.records {
                            if let Err(Fail(msg)) = m.feed(r) {
                                fatal(&name, &msg);
                            }
                        }
                    }
                }
                if Instant::now() > end {
                    fatal(&name, &format!("timeout waiting for: {}", m.pending()));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            log(2, &name, "end");
        }));
        Ok(())
    }

    pub fn wait(&mut self) {
        if let Some(t) = self.thread.take() {
            log(2, &self.name, "Waiting for logexp");
            let _ = t.join();
        }
    }
}

struct Matcher {
    name: String,
    spec: Vec<Expect>,
    at: usize,
    skipped: usize,
    last_vxid: u64,
}

impl Matcher {
    fn done(&self) -> bool {
        self.at >= self.spec.len()
    }

    fn pending(&self) -> String {
        self.spec
            .get(self.at)
            .map_or_else(String::new, |e| e.text.clone())
    }

    fn feed(&mut self, r: &Record) -> Step {
        let Some(e) = self.spec.get(self.at) else {
            return Ok(());
        };
        let vxid_ok = match e.vxid {
            Vxid::Any => true,
            Vxid::Same => r.vxid == self.last_vxid,
            Vxid::Id(v) => r.vxid == v,
        };
        let ok = vxid_ok
            && e.tag.is_none_or(|t| t == r.tag)
            && e.re.as_ref().is_none_or(|re| re.is_match(&r.payload));
        let line = format!(
            "{:>4} {:<14} {} {}",
            r.vxid,
            r.tag.name(),
            r.side.marker(),
            r.text()
        );
        if ok {
            log(3, &self.name, &format!("match| {line}"));
            self.last_vxid = r.vxid;
            self.at += 1;
            self.skipped = 0;
            return Ok(());
        }
        match e.skip {
            Skip::Any => {
                log(4, &self.name, &format!("skip| {line}"));
                Ok(())
            }
            Skip::Exactly(n) if self.skipped < n => {
                self.skipped += 1;
                log(4, &self.name, &format!("skip| {line}"));
                Ok(())
            }
            Skip::Exactly(_) => Err(Fail(format!("bad| {line} (expected: {})", e.text))),
        }
    }
}

fn parse_spec(text: &str) -> Step<Vec<Expect>> {
    let mut out = Vec::new();
    for cmd in crate::script::parse(text)? {
        let w: Vec<&str> = cmd.words.iter().map(|w| w.text.as_str()).collect();
        match w[0] {
            "expect" => {
                if w.len() < 4 || w.len() > 5 {
                    fail!("logexpect: expect needs skip, vxid, tag and an optional regex");
                }
                let skip = match w[1] {
                    "*" => Skip::Any,
                    n => Skip::Exactly(
                        n.parse()
                            .map_err(|_| Fail(format!("logexpect: bad skip \"{n}\"")))?,
                    ),
                };
                let vxid = match w[2] {
                    "*" => Vxid::Any,
                    "=" => Vxid::Same,
                    n => Vxid::Id(
                        n.parse()
                            .map_err(|_| Fail(format!("logexpect: bad vxid \"{n}\"")))?,
                    ),
                };
                let tag = match w[3] {
                    "*" => None,
                    t => Some(
                        Tag::by_name(t)
                            .ok_or_else(|| Fail(format!("logexpect: unknown tag \"{t}\"")))?,
                    ),
                };
                let re = match w.get(4) {
                    Some(r) => Some(
                        Regex::new(r)
                            .map_err(|e| Fail(format!("logexpect: bad regex \"{r}\": {e}")))?,
                    ),
                    None => None,
                };
                out.push(Expect {
                    skip,
                    vxid,
                    tag,
                    re,
                    text: w[1..].join(" "),
                });
            }
            other => fail!("logexpect: unknown spec command \"{other}\""),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lacquer_shm::Side;

    #[test]
    fn matching_in_order_with_skips() {
        let spec = parse_spec(
            "expect 0 1001 Begin \"^req\"\nexpect * = ReqURL /foo\nexpect 0 = ReqProtocol",
        )
        .unwrap();
        let mut m = Matcher {
            name: "l1".into(),
            spec,
            at: 0,
            skipped: 0,
            last_vxid: 0,
        };
        let r = |vxid, tag, p: &str| Record::new(vxid, tag, Side::Client, p.as_bytes());
        m.feed(&r(1001, Tag::Begin, "req 1000 rxreq")).unwrap();
        m.feed(&r(1001, Tag::ReqMethod, "GET")).unwrap();
        m.feed(&r(1002, Tag::ReqURL, "/foo")).unwrap();
        m.feed(&r(1001, Tag::ReqURL, "/foo")).unwrap();
        assert!(!m.done());
        assert!(m.feed(&r(1001, Tag::ReqHeader, "Host: x")).is_err());
        m.feed(&r(1001, Tag::ReqProtocol, "HTTP/1.1")).unwrap();
        assert!(m.done());
        assert!(parse_spec("expect 0 x Begin").is_err());
        assert!(parse_spec("expect 0 1 NoTag").is_err());
        assert!(parse_spec("frobnicate").is_err());
    }
}
