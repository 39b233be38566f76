//! `lacquer ncsa`: varnishncsa. One NCSA combined log line per client
//! request (or per backend request with `-b`), built from the request's
//! log records, with varnishncsa's format characters for `-F`.

use crate::help;
use crate::source::{self, LogOptions, Sink};
use lacquer_shm::group::{Group, Grouping, Kind, Transaction};
use lacquer_shm::Tag;
use std::io::Write;
use std::process::ExitCode;

/// The command's options, as `-h` prints them.
pub const USAGE: &str =
    "usage: lacquer ncsa [-n workdir] [-d] [-r file] [-b | -c] [-E] [-F format | -f formatfile]
                    [-q query] [-k count] [-w file [-a]] [-D] [-P pidfile] [-t seconds|off]
                    [-R limit[/duration]] [-T seconds] [-L limit]";

/// Each option, as `--help` shows it.
pub const OPTIONS: &[help::OptionLine] = &[
    help::WORKDIR,
    help::HEAD,
    help::READ_FILE,
    (
        "-b",
        "A line for each backend request instead of each client request",
    ),
    ("-c", "A line for each client request (the default)"),
    ("-E", "Lines for ESI includes too"),
    (
        "-F format",
        "The line's format, in varnishncsa's format characters (default: NCSA combined)",
    ),
    (
        "-f formatfile",
        "Read the format from this file's first line",
    ),
    help::QUERY,
    help::COUNT,
    (
        "-w file",
        "Write the lines to this file instead of standard output",
    ),
    (
        "-a",
        "With -w: append to the file instead of replacing what it holds",
    ),
    help::DAEMON,
    help::PID_FILE,
    help::OPEN_TIMEOUT,
    help::RATE,
    help::TIMEOUT,
    help::LIMIT,
    help::HELP,
];

/// varnishncsa's default: the NCSA combined log format.
pub const DEFAULT_FORMAT: &str = "%h %l %u %t \"%r\" %s %b \"%{Referer}i\" \"%{User-agent}i\"";

pub fn main(args: &[String]) -> ExitCode {
    let mut opts = LogOptions::new(Grouping::Request);
    let mut format = DEFAULT_FORMAT.to_string();
    let (mut write_file, mut append, mut esi) = (None, false, false);
    let parsed = source::parse_args("ncsa", USAGE, args, &mut opts, "Ffw", &mut |flag, v| {
        match flag {
            'F' => format = v()?,
            'f' => {
                let path = v()?;
                let text = std::fs::read_to_string(&path).map_err(|e| format!("-f {path}: {e}"))?;
                // The file's first line is the format.
                format = text.lines().next().unwrap_or_default().to_string();
            }
            'w' => write_file = Some(v()?),
            'a' => append = true,
            'E' => esi = true,
            'g' | 'i' | 'x' | 'I' | 'X' => return Err(format!("-{flag} is not a ncsa option")),
            _ => return Ok(false),
        }
        Ok(true)
    });
    if let Err(code) = parsed {
        return code;
    }
    if let Err(code) = source::daemonize("ncsa", &opts) {
        return code;
    }
    let items = match parse_format(&format) {
        Ok(items) => items,
        Err(e) => {
            eprintln!("lacquer ncsa: -F: {e}");
            return ExitCode::from(2);
        }
    };
    let backend = opts.backend_only && !opts.client_only;
    // `-w file`: lines go there (`-a`: after what it holds).
    let out: Box<dyn Write> = match &write_file {
        Some(path) => {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .write(true)
                .append(append)
                .truncate(!append)
                .open(path);
            match file {
                Ok(f) => Box::new(f),
                Err(e) => {
                    eprintln!("lacquer ncsa: -w {path}: {e}");
                    return ExitCode::FAILURE;
                }
            }
        }
        None => Box::new(std::io::stdout()),
    };
    let mut sink = Lines {
        items,
        backend,
        esi,
        out: std::io::BufWriter::new(out),
        failed: false,
    };
    let result = source::read_records(&opts, &mut sink);
    let _ = sink.out.flush();
    source::exit("ncsa", result)
}

/// One piece of a format.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    Text(String),
    Field(char),
    ReqHeader(String),
    RespHeader(String),
    Extended(String),
    TimeFormat(String),
}

/// Parses a `-F` format.
pub fn parse_format(f: &str) -> Result<Vec<Item>, String> {
    let mut items = Vec::new();
    let mut text = String::new();
    let mut chars = f.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => text.push('\n'),
                Some('t') => text.push('\t'),
                Some(o) => text.push(o),
                None => text.push('\\'),
            }
            continue;
        }
        if c != '%' {
            text.push(c);
            continue;
        }
        if !text.is_empty() {
            items.push(Item::Text(std::mem::take(&mut text)));
        }
        match chars.next() {
            Some('%') => text.push('%'),
            Some('{') => {
                let arg: String = chars.by_ref().take_while(|&c| c != '}').collect();
                match chars.next() {
                    Some('i') => items.push(Item::ReqHeader(arg)),
                    Some('o') => items.push(Item::RespHeader(arg)),
                    Some('x') => items.push(Item::Extended(arg)),
                    Some('t') => items.push(Item::TimeFormat(arg)),
                    other => {
                        return Err(format!("unknown format %{{{arg}}}{}", other.unwrap_or(' ')))
                    }
                }
            }
            Some(
                f @ ('b' | 'D' | 'H' | 'h' | 'I' | 'l' | 'm' | 'O' | 'q' | 'r' | 's' | 't' | 'T'
                | 'U' | 'u'),
            ) => items.push(Item::Field(f)),
            Some(other) => return Err(format!("unknown format character %{other}")),
            None => return Err("format ends in %".into()),
        }
    }
    if !text.is_empty() {
        items.push(Item::Text(text));
    }
    Ok(items)
}

/// Whether a request is an ESI include (its Begin record says `esi`).
fn is_esi(t: &Transaction) -> bool {
    t.records
        .iter()
        .find(|r| r.tag == Tag::Begin)
        .is_some_and(|r| r.payload.ends_with(b"esi"))
}

struct Lines<W: Write> {
    items: Vec<Item>,
    backend: bool,
    /// `-E`: ESI sub-requests are lines too.
    esi: bool,
    out: W,
    failed: bool,
}

impl<W: Write> Sink for Lines<W> {
    fn group(&mut self, g: &Group) -> bool {
        let want = if self.backend {
            Kind::BeReq
        } else {
            Kind::Request
        };
        let mut text = String::new();
        for t in g.iter().filter(|t| t.kind == want) {
            // Restarts and (without -E) ESI children are not lines of
            // their own.
            if !self.backend && t.level > 1 && !(self.esi && is_esi(t)) {
                continue;
            }
            let handling = handling(t);
            text.push_str(&format_line(&self.items, t, self.backend, handling));
            text.push('\n');
        }
        if self.out.write_all(text.as_bytes()).is_err() {
            self.failed = true;
            return false;
        }
        true
    }

    fn idle(&mut self) -> bool {
        if self.out.flush().is_err() {
            self.failed = true;
        }
        !self.failed
    }
}

/// How the request was handled, as `%{Varnish:handling}x` reports it.
fn handling(t: &Transaction) -> &'static str {
    let mut verdict = "miss";
    for r in &t.records {
        match (r.tag, &r.payload[..]) {
            (Tag::Hit, _) => verdict = "hit",
            (Tag::HitPass, _) => verdict = "pass",
            (Tag::VCL_return, b"pass") => verdict = "pass",
            (Tag::VCL_return, b"pipe") => verdict = "pipe",
            (Tag::VCL_return, b"synth") => verdict = "synth",
            (Tag::VCL_call, b"SYNTH") => verdict = "synth",
            _ => {}
        }
    }
    verdict
}

fn first(t: &Transaction, tag: Tag) -> Option<&[u8]> {
    t.records
        .iter()
        .find(|r| r.tag == tag)
        .map(|r| &r.payload[..])
}

fn last(t: &Transaction, tag: Tag) -> Option<&[u8]> {
    t.records
        .iter()
        .rev()
        .find(|r| r.tag == tag)
        .map(|r| &r.payload[..])
}

/// The value of a header as the transaction ended with it.
fn header(t: &Transaction, set: Tag, unset: Tag, name: &str) -> Option<String> {
    let mut value = None;
    for r in &t.records {
        if r.tag != set && r.tag != unset {
            continue;
        }
        let p = &r.payload[..];
        if p.len() > name.len()
            && p[..name.len()].eq_ignore_ascii_case(name.as_bytes())
            && p[name.len()] == b':'
        {
            let v = String::from_utf8_lossy(&p[name.len() + 1..])
                .trim()
                .to_string();
            if r.tag == set {
                value = Some(v);
            } else if value.as_deref() == Some(v.as_str()) {
                value = None;
            }
        }
    }
    value
}

fn field(p: Option<&[u8]>, n: usize) -> Option<String> {
    let text = String::from_utf8_lossy(p?).into_owned();
    text.split_ascii_whitespace().nth(n).map(str::to_string)
}

fn timestamp(t: &Transaction, label: &str, n: usize) -> Option<f64> {
    t.records
        .iter()
        .filter(|r| r.tag == Tag::Timestamp && r.payload.starts_with(label.as_bytes()))
        .find_map(|r| field(Some(&r.payload), n)?.parse().ok())
}

/// Formats one line for a transaction.
pub fn format_line(items: &[Item], t: &Transaction, backend: bool, handling: &str) -> String {
    let (method, url, proto, status, hdr, unset, resp_hdr, resp_unset, acct) = if backend {
        (
            Tag::BereqMethod,
            Tag::BereqURL,
            Tag::BereqProtocol,
            Tag::BerespStatus,
            Tag::BereqHeader,
            Tag::BereqUnset,
            Tag::BerespHeader,
            Tag::BerespUnset,
            Tag::BereqAcct,
        )
    } else {
        (
            Tag::ReqMethod,
            Tag::ReqURL,
            Tag::ReqProtocol,
            Tag::RespStatus,
            Tag::ReqHeader,
            Tag::ReqUnset,
            Tag::RespHeader,
            Tag::RespUnset,
            Tag::ReqAcct,
        )
    };
    let text =
        |p: Option<&[u8]>| p.map_or("-".to_string(), |b| String::from_utf8_lossy(b).into_owned());
    let start = timestamp(t, "Start:", 1).unwrap_or(0.0);
    let end_label = if backend { "BerespBody:" } else { "Resp:" };
    let duration = timestamp(t, end_label, 2).unwrap_or(0.0);
    let url_full = || {
        let u = text(last(t, url));
        if u.starts_with("http://") || u.starts_with("https://") || backend {
            u
        } else {
            match header(t, hdr, unset, "Host") {
                Some(h) => format!("http://{h}{u}"),
                None => u,
            }
        }
    };
    let mut out = String::new();
    for item in items {
        match item {
            Item::Text(s) => out.push_str(s),
            Item::Field(c) => {
                out.push_str(&match c {
                    'b' => match field(last(t, acct), 4) {
                        Some(n) if n != "0" => n,
                        _ => "-".into(),
                    },
                    'D' => format!("{}", (duration * 1e6) as u64),
                    'T' => format!("{}", duration as u64),
                    'H' => text(first(t, proto)),
                    'h' => if backend {
                        field(first(t, Tag::BackendOpen), 2)
                    } else {
                        field(first(t, Tag::ReqStart), 0)
                    }
                    .unwrap_or_else(|| "-".into()),
                    'I' => field(last(t, acct), if backend { 5 } else { 2 })
                        .unwrap_or_else(|| "-".into()),
                    'O' => field(last(t, acct), if backend { 2 } else { 5 })
                        .unwrap_or_else(|| "-".into()),
                    'l' => "-".into(),
                    'm' => text(last(t, method)),
                    'q' => {
                        let u = text(last(t, url));
                        u.find('?').map_or(String::new(), |i| u[i..].to_string())
                    }
                    'r' => format!(
                        "{} {} {}",
                        text(last(t, method)),
                        url_full(),
                        text(first(t, proto))
                    ),
                    's' => text(last(t, status)),
                    't' => format!("[{}]", clf_time(start)),
                    'U' => {
                        let u = text(last(t, url));
                        u.split('?').next().unwrap_or("").to_string()
                    }
                    'u' => basic_user(header(t, hdr, unset, "Authorization")),
                    _ => "-".into(),
                })
            }
            Item::ReqHeader(name) => {
                out.push_str(&header(t, hdr, unset, name).unwrap_or_else(|| "-".into()))
            }
            Item::RespHeader(name) => {
                out.push_str(&header(t, resp_hdr, resp_unset, name).unwrap_or_else(|| "-".into()))
            }
            Item::TimeFormat(_) => out.push_str(&format!("[{}]", clf_time(start))),
            Item::Extended(x) => out.push_str(&match x.as_str() {
                "Varnish:handling" => handling.to_string(),
                "Varnish:hitmiss" => if handling == "hit" { "hit" } else { "miss" }.to_string(),
                "Varnish:side" => if backend { "b" } else { "c" }.to_string(),
                "Varnish:vxid" => t.vxid.to_string(),
                "Varnish:time_firstbyte" => {
                    let label = if backend { "Beresp:" } else { "Process:" };
                    format!("{:.6}", timestamp(t, label, 2).unwrap_or(0.0))
                }
                _ => "-".into(),
            }),
        }
    }
    out
}

/// `21/Nov/2026:20:31:34 +0000` for a Unix time.
fn clf_time(t: f64) -> String {
    // `Sat, 21 Nov 2026 20:31:34 GMT`, rearranged.
    let http = lacquer_core::time::http_date(t.max(0.0).floor());
    let parts: Vec<&str> = http.split_ascii_whitespace().collect();
    if parts.len() < 5 {
        return http;
    }
    format!("{}/{}/{}:{} +0000", parts[1], parts[2], parts[3], parts[4])
}

/// The user name of a `Basic` Authorization header, or `-`.
fn basic_user(auth: Option<String>) -> String {
    let Some(auth) = auth else {
        return "-".into();
    };
    let Some(b64) = auth
        .strip_prefix("Basic ")
        .or_else(|| auth.strip_prefix("basic "))
    else {
        return "-".into();
    };
    match base64_decode(b64.trim()) {
        Some(bytes) => {
            let s = String::from_utf8_lossy(&bytes).into_owned();
            s.split(':').next().unwrap_or("-").to_string()
        }
        None => "-".into(),
    }
}

fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut acc = 0u32;
    let mut bits = 0;
    for c in s.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => break,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lacquer_shm::group::Grouper;
    use lacquer_shm::{Record, Side};
    use std::time::Duration;

    fn request() -> Group {
        let r = |tag, p: &str| Record::new(2, tag, Side::Client, p.as_bytes());
        let recs = vec![
            r(Tag::Begin, "req 1 rxreq"),
            r(Tag::Timestamp, "Start: 1795293094.097751 0.000000 0.000000"),
            r(Tag::ReqStart, "192.0.2.7 48730 a0"),
            r(Tag::ReqMethod, "GET"),
            r(Tag::ReqURL, "/index.html?x=1"),
            r(Tag::ReqProtocol, "HTTP/1.1"),
            r(Tag::ReqHeader, "Host: example.com"),
            r(Tag::ReqHeader, "User-Agent: curl/7.88.1"),
            r(Tag::ReqHeader, "Authorization: Basic YWxpY2U6c2VjcmV0"),
            r(Tag::Hit, "3 119.99 10.0 0.0"),
            r(Tag::RespStatus, "200"),
            r(Tag::RespHeader, "Content-Type: text/html"),
            r(Tag::Timestamp, "Resp: 1795293094.102820 0.005069 0.000021"),
            r(Tag::ReqAcct, "102 0 102 262 3 265"),
            r(Tag::End, ""),
        ];
        let mut g = Grouper::new(Grouping::Request, Duration::from_secs(5), 10);
        let mut out = Vec::new();
        for rec in recs {
            g.push(rec, &mut out);
        }
        out.remove(0)
    }

    #[test]
    fn combined_format() {
        let g = request();
        let items = parse_format(DEFAULT_FORMAT).unwrap();
        let line = format_line(&items, &g[0], false, handling(&g[0]));
        assert_eq!(
            line,
            "192.0.2.7 - alice [21/Nov/2026:20:31:34 +0000] \"GET http://example.com/index.html?x=1 HTTP/1.1\" 200 3 \"-\" \"curl/7.88.1\""
        );
        let items =
            parse_format("%m %U%q %D %{Varnish:handling}x %{Content-Type}o %I/%O %%").unwrap();
        let line = format_line(&items, &g[0], false, handling(&g[0]));
        assert_eq!(line, "GET /index.html?x=1 5069 hit text/html 102/265 %");
        assert!(parse_format("%Z").is_err());
    }
}
