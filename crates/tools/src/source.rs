//! What every log tool shares: the options varnishlog, varnishncsa,
//! varnishtop and varnishhist have in common (`-n -d -r -g -q -c -b -i
//! -I -x -X -k -T -L -R`), and the loop that reads records from a daemon's
//! ring or a dump file, groups them, filters them and hands each matching
//! group to the tool.

use lacquer_shm::group::{Group, Grouper, Grouping};
use lacquer_shm::query::{Query, View};
use lacquer_shm::{Lost, Reader, Record, Side, Tag};
use regex::bytes::Regex;
use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// How often an idle reader looks at the ring again.
const POLL: Duration = Duration::from_millis(10);
/// Bytes waiting that make a reader read again without pausing.
const PACE: u64 = 256 * 1024;

/// The options of the log tools.
pub struct LogOptions {
    pub workdir: Option<PathBuf>,
    pub from_oldest: bool,
    pub read_file: Option<PathBuf>,
    pub grouping: Grouping,
    pub query: Option<Query>,
    pub client_only: bool,
    pub backend_only: bool,
    pub include: Option<u128>,
    pub exclude: u128,
    pub include_re: Vec<(Option<u128>, Regex)>,
    pub exclude_re: Vec<(Option<u128>, Regex)>,
    pub max_groups: Option<u64>,
    pub timeout: Duration,
    pub limit: usize,
    /// `-R limit[/duration]`: at most this many transactions per period;
    /// the rest are suppressed.
    pub rate: Option<(u64, Duration)>,
    /// `-D`: run in the background.
    pub daemon: bool,
    /// `-P file`: write the process id there.
    pub pid_file: Option<PathBuf>,
    /// `-t seconds|off`: how long to wait for the daemon's log to appear
    /// (None: for ever).
    pub open_timeout: Option<Duration>,
}

impl LogOptions {
    pub fn new(grouping: Grouping) -> LogOptions {
        LogOptions {
            workdir: None,
            from_oldest: false,
            read_file: None,
            grouping,
            query: None,
            client_only: false,
            backend_only: false,
            include: None,
            exclude: 0,
            include_re: Vec::new(),
            exclude_re: Vec::new(),
            max_groups: None,
            timeout: Duration::from_secs(120),
            limit: 1000,
            rate: None,
            daemon: false,
            pid_file: None,
            open_timeout: Some(Duration::from_secs(5)),
        }
    }

    /// Takes one option shared by the log tools; `Ok(false)` if `flag`
    /// is not one of them. `value` is called for options with an argument.
    pub fn take(
        &mut self,
        flag: char,
        value: &mut dyn FnMut() -> Result<String, String>,
    ) -> Result<bool, String> {
        match flag {
            'n' => self.workdir = Some(PathBuf::from(value()?)),
            'd' => self.from_oldest = true,
            'r' => self.read_file = Some(PathBuf::from(value()?)),
            'g' => {
                let v = value()?;
                self.grouping = Grouping::parse(&v).ok_or_else(|| {
                    format!("-g: unknown grouping \"{v}\" (raw, vxid, request, session)")
                })?;
            }
            'q' => {
                let v = value()?;
                self.query = Some(Query::parse(&v).map_err(|e| format!("-q: {e}"))?);
            }
            'c' => self.client_only = true,
            'b' => self.backend_only = true,
            'i' => {
                let tags = tag_list(&value()?)?;
                self.include = Some(self.include.unwrap_or(0) | tags);
            }
            'x' => self.exclude |= tag_list(&value()?)?,
            'I' => self.include_re.push(tag_regex(&value()?)?),
            'X' => self.exclude_re.push(tag_regex(&value()?)?),
            'k' => {
                let v = value()?;
                self.max_groups = Some(
                    v.parse()
                        .map_err(|_| format!("-k: \"{v}\" is not a number"))?,
                );
            }
            'T' => {
                let v = value()?;
                let secs: f64 = v
                    .parse()
                    .map_err(|_| format!("-T: \"{v}\" is not a number"))?;
                self.timeout = Duration::from_secs_f64(secs.max(0.0));
            }
            'D' => self.daemon = true,
            'P' => self.pid_file = Some(PathBuf::from(value()?)),
            't' => {
                let v = value()?;
                self.open_timeout = match v.as_str() {
                    "off" => None,
                    n => Some(Duration::from_secs_f64(
                        n.parse::<f64>()
                            .map_err(|_| format!("-t: \"{v}\" is not a number or off"))?
                            .max(0.0),
                    )),
                };
            }
            'R' => self.rate = Some(parse_rate(&value()?)?),
            'L' => {
                let v = value()?;
                self.limit = v
                    .parse()
                    .map_err(|_| format!("-L: \"{v}\" is not a number"))?;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Whether a record is shown (`-i -x -I -X -c -b`).
    pub fn shows(&self, r: &Record) -> bool {
        let bit = 1u128 << (r.tag as u8);
        if self.client_only && !self.backend_only && r.side == Side::Backend {
            return false;
        }
        if self.backend_only && !self.client_only && r.side == Side::Client {
            return false;
        }
        if self.include.is_some_and(|m| m & bit == 0) || self.exclude & bit != 0 {
            return false;
        }
        let applies = |tags: &Option<u128>| tags.is_none_or(|m| m & bit != 0);
        // A record whose tag some -I names must match one of them.
        let mut named = false;
        let mut matched = false;
        for (tags, re) in &self.include_re {
            if applies(tags) {
                named = true;
                matched = matched || re.is_match(&r.payload);
            }
        }
        if named && !matched {
            return false;
        }
        !self
            .exclude_re
            .iter()
            .any(|(tags, re)| applies(tags) && re.is_match(&r.payload))
    }

    fn group_matches(&self, g: &Group) -> bool {
        match &self.query {
            None => true,
            Some(q) => {
                let views: Vec<View<'_>> = g.iter().map(|t| t.view()).collect();
                q.matches(&views)
            }
        }
    }
}

/// `-R limit[/duration]`: `10`, `10/m`, `100/30s` (s, m, h, d; a second
/// when no period is given).
fn parse_rate(text: &str) -> Result<(u64, Duration), String> {
    let bad = || format!("-R: \"{text}\" is not limit[/duration]");
    let (limit, period) = text.split_once('/').unwrap_or((text, "1s"));
    let limit: u64 = limit.parse().map_err(|_| bad())?;
    let unit_at = period
        .find(|c: char| c.is_ascii_alphabetic())
        .ok_or_else(bad)?;
    let (n, unit) = period.split_at(unit_at);
    let n: f64 = if n.is_empty() {
        1.0
    } else {
        n.parse().map_err(|_| bad())?
    };
    let secs = match unit {
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        _ => return Err(bad()),
    } * n;
    if limit == 0 || !(secs > 0.0 && secs.is_finite()) {
        return Err(bad());
    }
    Ok((limit, Duration::from_secs_f64(secs)))
}

/// `-i ReqURL,Resp*`: a mask of the tags named.
pub fn tag_list(text: &str) -> Result<u128, String> {
    let mut mask = 0u128;
    for name in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let tags = Tag::matching(name);
        if tags.is_empty() {
            return Err(format!("unknown tag \"{name}\""));
        }
        for t in tags {
            mask |= 1u128 << (t as u8);
        }
    }
    Ok(mask)
}

/// `-I [taglist:]regex`.
fn tag_regex(text: &str) -> Result<(Option<u128>, Regex), String> {
    let (tags, re) = match text.split_once(':') {
        Some((tags, re)) if tag_list(tags).is_ok() => (Some(tag_list(tags)?), re),
        _ => (None, text),
    };
    let re = Regex::new(re).map_err(|e| format!("bad regex \"{re}\": {e}"))?;
    Ok((tags, re))
}

/// Magic at the start of a file written by `lacquer log -w`.
pub const DUMP_MAGIC: &[u8; 8] = b"LQVSLDMP";

/// What a tool does with each group; `false` stops the reading.
pub trait Sink {
    fn group(&mut self, g: &Group) -> bool;
    /// Called when nothing new has come for a while (to refresh a screen,
    /// flush output).
    fn idle(&mut self) -> bool {
        true
    }
}

/// Reads, groups and filters until the source ends (`-d`, `-r`), the sink
/// stops, or `-k` groups have been passed on.
pub fn read_records(opts: &LogOptions, sink: &mut dyn Sink) -> Result<(), String> {
    let mut grouper = Grouper::new(opts.grouping, opts.timeout, opts.limit);
    let mut groups = Vec::new();
    let mut passed = 0u64;
    // `-R`: the transactions let through in the current period.
    let mut window = (Instant::now(), 0u64);
    let mut deliver = |groups: &mut Vec<Group>, sink: &mut dyn Sink| -> bool {
        for g in groups.drain(..) {
            if !opts.group_matches(&g) {
                continue;
            }
            if let Some((limit, period)) = opts.rate {
                if window.0.elapsed() >= period {
                    window = (Instant::now(), 0);
                }
                if window.1 >= limit {
                    continue;
                }
                window.1 += 1;
            }
            if !sink.group(&g) {
                return false;
            }
            passed += 1;
            if opts.max_groups.is_some_and(|k| passed >= k) {
                return false;
            }
        }
        true
    };
    if let Some(path) = &opts.read_file {
        for rec in read_dump(path)? {
            grouper.push(rec, &mut groups);
            if !deliver(&mut groups, sink) {
                return Ok(());
            }
        }
        grouper.finish(&mut groups);
        deliver(&mut groups, sink);
        sink.idle();
        return Ok(());
    }
    let dir = opts
        .workdir
        .clone()
        .unwrap_or_else(lacquer_core::host::tool_workdir);
    // `-t`: the daemon may not have made its log yet.
    let started = Instant::now();
    let mut reader = loop {
        match Reader::open(&dir, opts.from_oldest) {
            Ok(r) => break r,
            Err(e) if opts.open_timeout.is_some_and(|t| started.elapsed() >= t) => {
                return Err(e.to_string())
            }
            Err(_) => std::thread::sleep(Duration::from_millis(250)),
        }
    };
    let mut records = Vec::new();
    let mut last_check = Instant::now();
    let mut last_idle = Instant::now();
    loop {
        records.clear();
        let got = match reader.poll(&mut records) {
            Ok(n) => n,
            Err(Lost::Overrun) => {
                eprintln!("Log overrun: the daemon overtook this reader; records were lost");
                0
            }
            Err(Lost::Restarted) => 0,
        };
        for rec in records.drain(..) {
            grouper.push(rec, &mut groups);
        }
        if !deliver(&mut groups, sink) {
            return Ok(());
        }
        // Read on at once only while a good part of a chunk waits: a
        // reader that keeps up reads in batches a poll apart, so it does
        // not pull the ring's head to and fro between the writer's core
        // and its own on every request.
        let behind = got > 0 && reader.behind() >= PACE;
        if behind && last_idle.elapsed() < Duration::from_millis(250) {
            continue;
        }
        if got == 0 && opts.from_oldest {
            grouper.finish(&mut groups);
            deliver(&mut groups, sink);
            sink.idle();
            return Ok(());
        }
        last_idle = Instant::now();
        if !sink.idle() {
            return Ok(());
        }
        if last_check.elapsed() >= Duration::from_secs(1) {
            last_check = Instant::now();
            grouper.expire(&mut groups);
            if !deliver(&mut groups, sink) {
                return Ok(());
            }
            if reader.replaced() {
                reader.reopen().map_err(|e| e.to_string())?;
            }
        }
        if !behind {
            std::thread::sleep(POLL);
        }
    }
}

/// The records of a file written by `lacquer log -w`.
pub fn read_dump(path: &std::path::Path) -> Result<Vec<Record>, String> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if bytes.len() < DUMP_MAGIC.len() || &bytes[..DUMP_MAGIC.len()] != DUMP_MAGIC {
        return Err(format!("{} is not a lacquer log file", path.display()));
    }
    let bytes = bytes::Bytes::from(bytes);
    let mut at = DUMP_MAGIC.len();
    let mut out = Vec::new();
    while at < bytes.len() {
        match lacquer_shm::record::decode_into(&bytes, at, &mut out) {
            Ok(Some(n)) => at += n,
            // A file cut short ends where its last whole record does.
            Ok(None) => break,
            Err(_) => return Err(format!("{}: corrupt record at byte {at}", path.display())),
        }
    }
    Ok(out)
}

/// Splits a command line the getopt way: `-abc`, `-n dir`, `-ndir`.
/// Calls `take` for each flag with a closure that yields its argument;
/// returns the operands.
pub fn getopt(
    args: &[String],
    with_value: &str,
    take: &mut dyn FnMut(char, Option<String>) -> Result<(), String>,
) -> Result<Vec<String>, String> {
    let mut operands = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        if a == "--" {
            operands.extend(args[i..].iter().cloned());
            break;
        }
        let Some(flags) = a.strip_prefix('-').filter(|f| !f.is_empty()) else {
            operands.push(a.clone());
            continue;
        };
        for (pos, flag) in flags.char_indices() {
            if with_value.contains(flag) {
                let rest = &flags[pos + flag.len_utf8()..];
                let value = if !rest.is_empty() {
                    rest.to_string()
                } else if i < args.len() {
                    i += 1;
                    args[i - 1].clone()
                } else {
                    return Err(format!("-{flag} needs a value"));
                };
                take(flag, Some(value))?;
                break;
            }
            take(flag, None)?;
        }
    }
    Ok(operands)
}

/// The flags of the shared options that take a value.
pub const SHARED_WITH_VALUE: &str = "nrgqixIXkTLPtR";

/// Set in the environment of the copy `-D` starts, which runs in the
/// background and must not start another.
const DAEMONIZED: &str = "LACQUER_TOOL_DAEMONIZED";

/// `-D` and `-P`: starts a copy of this command in the background (with
/// its output to nowhere) and writes its process id to the `-P` file, or
/// writes this process's own. `Err` carries the exit status of a process
/// that has handed over to its copy.
pub fn daemonize(tool: &str, opts: &LogOptions) -> Result<(), ExitCode> {
    let write_pid = |pid: u32| {
        if let Some(path) = &opts.pid_file {
            if let Err(e) = std::fs::write(path, format!("{pid}\n")) {
                eprintln!("lacquer {tool}: -P {}: {e}", path.display());
                return Err(ExitCode::FAILURE);
            }
        }
        Ok(())
    };
    if !opts.daemon || std::env::var_os(DAEMONIZED).is_some() {
        return write_pid(std::process::id());
    }
    let exe = std::env::current_exe().map_err(|e| {
        eprintln!("lacquer {tool}: -D: {e}");
        ExitCode::FAILURE
    })?;
    let child = std::process::Command::new(exe)
        .args(std::env::args_os().skip(1))
        .env(DAEMONIZED, "1")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| {
            eprintln!("lacquer {tool}: -D: {e}");
            ExitCode::FAILURE
        })?;
    write_pid(child.id())?;
    Err(ExitCode::SUCCESS)
}

/// A tool's own options: handles `flag` (with `value` yielding its
/// argument) and says whether it was one of them.
pub type OwnOptions<'a> =
    dyn FnMut(char, &mut dyn FnMut() -> Result<String, String>) -> Result<bool, String> + 'a;

/// Parses a log tool's command line: `-h`, the tool's own options (those
/// in `own_with_value` take a value), then the shared ones into `opts`.
/// `Err` carries the exit status when the tool should stop at once: help
/// printed (0) or a usage error reported (2).
pub fn parse_args(
    tool: &str,
    usage: &str,
    args: &[String],
    opts: &mut LogOptions,
    own_with_value: &str,
    own: &mut OwnOptions<'_>,
) -> Result<(), ExitCode> {
    let mut help = false;
    let with_value = format!("{SHARED_WITH_VALUE}{own_with_value}");
    let parsed = getopt(args, &with_value, &mut |flag, value| {
        let mut v = || {
            value
                .clone()
                .ok_or_else(|| format!("-{flag} needs a value"))
        };
        if flag == 'h' {
            help = true;
        } else if !own(flag, &mut v)? && !opts.take(flag, &mut v)? {
            return Err(format!("unknown option -{flag}"));
        }
        Ok(())
    });
    let error = match parsed {
        Ok(ops) if ops.is_empty() => None,
        Ok(ops) => Some(format!("unexpected argument \"{}\"", ops[0])),
        Err(e) => Some(e),
    };
    if let Some(e) = error {
        eprintln!("lacquer {tool}: {e}\n{usage}");
        return Err(ExitCode::from(2));
    }
    if help {
        println!("{usage}");
        return Err(ExitCode::SUCCESS);
    }
    Ok(())
}

/// The exit status of a tool whose reading ended with `result`.
pub fn exit(tool: &str, result: Result<(), String>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lacquer {tool}: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_limits_read_as_varnishlog_writes_them() {
        assert_eq!(parse_rate("10").unwrap(), (10, Duration::from_secs(1)));
        assert_eq!(parse_rate("10/m").unwrap(), (10, Duration::from_secs(60)));
        assert_eq!(
            parse_rate("100/30s").unwrap(),
            (100, Duration::from_secs(30))
        );
        for bad in ["", "x", "0", "10/", "10/3", "10/w", "-1/s"] {
            assert!(parse_rate(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn getopt_forms() {
        let args: Vec<String> = ["-dg", "request", "-nwork", "-q", "ReqURL", "x", "-1"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let mut seen = Vec::new();
        let ops = getopt(&args, "gnq", &mut |f, v| {
            seen.push((f, v));
            Ok(())
        })
        .unwrap();
        assert_eq!(ops, vec!["x".to_string()]);
        assert_eq!(
            seen,
            vec![
                ('d', None),
                ('g', Some("request".into())),
                ('n', Some("work".into())),
                ('q', Some("ReqURL".into())),
                ('1', None)
            ]
        );
        assert!(getopt(&["-g".to_string()], "g", &mut |_, _| Ok(())).is_err());
    }

    #[test]
    fn record_filters() {
        let mut o = LogOptions::new(Grouping::Vxid);
        let v = |s: &str| {
            let s = s.to_string();
            move || Ok(s.clone())
        };
        o.take('i', &mut v("Req*,RespStatus")).unwrap();
        o.take('x', &mut v("ReqHeader")).unwrap();
        o.take('I', &mut v("ReqURL:^/api")).unwrap();
        let rec = |tag, p: &str| Record::new(1, tag, Side::Client, p.as_bytes());
        assert!(o.shows(&rec(Tag::ReqURL, "/api/x")));
        assert!(!o.shows(&rec(Tag::ReqURL, "/static")));
        assert!(o.shows(&rec(Tag::RespStatus, "200")));
        assert!(!o.shows(&rec(Tag::ReqHeader, "Host: a")));
        assert!(!o.shows(&rec(Tag::BerespStatus, "200")));
        assert!(o.take('i', &mut v("Nope")).is_err());
        assert!(!o.take('z', &mut v("")).unwrap());
    }
}
