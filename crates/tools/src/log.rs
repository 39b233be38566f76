//! `lacquer log`: varnishlog. Prints the daemon's log as it is written
//! (or from the oldest record with `-d`, or from a file with `-r`),
//! grouped and filtered, in varnishlog's layout; `-w` writes the records
//! to a file instead, for `-r` later.

use crate::help;
use crate::source::{self, LogOptions, Sink, DUMP_MAGIC};
use lacquer_shm::group::{Group, Grouping};
use lacquer_shm::Record;
use std::io::Write;
use std::process::ExitCode;

/// The command's options, as `-h` prints them.
pub const USAGE: &str =
    "usage: lacquer log [-n workdir] [-d] [-r file] [-w file [-A]] [-g raw|vxid|request|session]
                   [-q query] [-c] [-b] [-i taglist] [-x taglist] [-I [taglist:]regex]
                   [-X [taglist:]regex] [-k count] [-T seconds] [-L limit] [-R limit[/duration]]";

/// Each option, as `--help` shows it.
pub const OPTIONS: &[help::OptionLine] = &[
    help::WORKDIR,
    help::HEAD,
    help::READ_FILE,
    (
        "-w file",
        "Write the records to this file (binary, for -r) instead of printing them",
    ),
    ("-A", "With -w: write them as text, as printed"),
    help::GROUPING,
    help::QUERY,
    help::CLIENT,
    help::BACKEND,
    help::INCLUDE_TAGS,
    help::EXCLUDE_TAGS,
    help::INCLUDE_REGEX,
    help::EXCLUDE_REGEX,
    help::COUNT,
    help::TIMEOUT,
    help::LIMIT,
    help::RATE,
    help::HELP,
];

pub fn main(args: &[String]) -> ExitCode {
    let mut opts = LogOptions::new(Grouping::Vxid);
    let mut write_file = None;
    let mut text_to_file = false;
    let parsed = source::parse_args("log", USAGE, args, &mut opts, "w", &mut |flag, v| {
        match flag {
            'w' => write_file = Some(v()?),
            'A' => text_to_file = true,
            _ => return Ok(false),
        }
        Ok(true)
    });
    if let Err(code) = parsed {
        return code;
    }
    if let Err(code) = source::daemonize("log", &opts) {
        return code;
    }
    let out: Box<dyn Write> = match &write_file {
        Some(path) => match std::fs::File::create(path) {
            Ok(f) => Box::new(std::io::BufWriter::new(f)),
            Err(e) => {
                eprintln!("lacquer log: {path}: {e}");
                return ExitCode::FAILURE;
            }
        },
        None => Box::new(std::io::BufWriter::new(std::io::stdout())),
    };
    let binary = write_file.is_some() && !text_to_file;
    let mut printer = Printer {
        opts: &opts,
        out,
        binary,
        failed: false,
        text: Vec::with_capacity(8192),
    };
    if binary && printer.out.write_all(DUMP_MAGIC).is_err() {
        eprintln!("lacquer log: cannot write the file");
        return ExitCode::FAILURE;
    }
    let result = source::read_records(&opts, &mut printer);
    let _ = printer.out.flush();
    source::exit("log", result)
}

struct Printer<'a> {
    opts: &'a LogOptions,
    out: Box<dyn Write>,
    binary: bool,
    failed: bool,
    /// The text of a group, reused from one to the next.
    text: Vec<u8>,
}

impl Sink for Printer<'_> {
    fn group(&mut self, g: &Group) -> bool {
        let mut text = std::mem::take(&mut self.text);
        text.clear();
        if self.binary {
            for t in g {
                for r in t.records.iter().filter(|r| self.opts.shows(r)) {
                    r.encode(&mut text);
                }
            }
        } else {
            format_group(self.opts, g, &mut text);
        }
        let written = self.out.write_all(&text);
        self.text = text;
        if written.is_err() {
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

/// Formats a group as varnishlog does.
pub fn format_group(opts: &LogOptions, g: &Group, out: &mut Vec<u8>) {
    if opts.grouping == Grouping::Raw {
        for t in g {
            for r in t.records.iter().filter(|r| opts.shows(r)) {
                raw_line(r, out);
            }
        }
        return;
    }
    let mut any = false;
    for t in g {
        let mut shown = t.records.iter().filter(|r| opts.shows(r)).peekable();
        if shown.peek().is_none() && (opts.client_only || opts.backend_only) {
            continue;
        }
        any = true;
        let level = t.level.max(1) as usize;
        pad(out, &STARS[..level.min(STARS.len())], 4);
        out.extend_from_slice(b"<< ");
        pad(out, t.kind.label().as_bytes(), 8);
        out.extend_from_slice(b" >> ");
        let mut n = itoa(t.vxid);
        pad(out, n.text(), 10);
        out.push(b'\n');
        for r in shown {
            pad(out, &DASHES[..level.min(DASHES.len())], 4);
            pad(out, r.tag.name().as_bytes(), 14);
            out.push(b' ');
            out.extend_from_slice(&r.payload);
            out.push(b'\n');
        }
    }
    if any {
        out.push(b'\n');
    }
}

/// One record in raw mode: vxid, tag, side, payload.
pub fn raw_line(r: &Record, out: &mut Vec<u8>) {
    let mut n = itoa(r.vxid);
    let text = n.text();
    out.extend(std::iter::repeat_n(
        b' ',
        10usize.saturating_sub(text.len()),
    ));
    out.extend_from_slice(text);
    out.push(b' ');
    pad(out, r.tag.name().as_bytes(), 14);
    out.push(b' ');
    out.push(r.side.marker() as u8);
    out.push(b' ');
    out.extend_from_slice(&r.payload);
    out.push(b'\n');
}

const STARS: &[u8] = b"**********************";
const DASHES: &[u8] = b"----------------------";

/// Writes `s` left-aligned in `width` columns (longer text is kept whole).
fn pad(out: &mut Vec<u8>, s: &[u8], width: usize) {
    out.extend_from_slice(s);
    out.extend(std::iter::repeat_n(b' ', width.saturating_sub(s.len())));
}

/// A number's decimal digits, without going through `fmt`.
struct Digits {
    buf: [u8; 20],
    start: usize,
}

impl Digits {
    fn text(&mut self) -> &[u8] {
        &self.buf[self.start..]
    }
}

fn itoa(mut n: u64) -> Digits {
    let mut d = Digits {
        buf: [0; 20],
        start: 20,
    };
    loop {
        d.start -= 1;
        d.buf[d.start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return d;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lacquer_shm::group::Grouper;
    use lacquer_shm::{Side, Tag};
    use std::time::Duration;

    fn miss() -> Vec<Record> {
        let r = |vxid, tag, side, p: &str| Record::new(vxid, tag, side, p.as_bytes());
        vec![
            r(3, Tag::Begin, Side::Backend, "bereq 2 fetch"),
            r(3, Tag::BerespStatus, Side::Backend, "200"),
            r(3, Tag::End, Side::Backend, ""),
            r(2, Tag::Begin, Side::Client, "req 1 rxreq"),
            r(2, Tag::ReqURL, Side::Client, "/"),
            r(2, Tag::Link, Side::Client, "bereq 3 fetch"),
            r(2, Tag::End, Side::Client, ""),
        ]
    }

    fn render(mode: Grouping) -> String {
        let opts = LogOptions::new(mode);
        let mut g = Grouper::new(mode, Duration::from_secs(10), 100);
        let mut groups = Vec::new();
        for rec in miss() {
            g.push(rec, &mut groups);
        }
        let mut out = Vec::new();
        for grp in &groups {
            format_group(&opts, grp, &mut out);
        }
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn request_layout_is_varnishlog_s() {
        let text = render(Grouping::Request);
        let expected = "\
*   << Request  >> 2         
-   Begin          req 1 rxreq
-   ReqURL         /
-   Link           bereq 3 fetch
-   End            
**  << BeReq    >> 3         
--  Begin          bereq 2 fetch
--  BerespStatus   200
--  End            

";
        assert_eq!(text, expected);
    }

    #[test]
    fn raw_layout_is_varnishlog_s() {
        let text = render(Grouping::Raw);
        assert!(text.starts_with("         3 Begin          b bereq 2 fetch\n"));
        assert!(text.contains("         2 ReqURL         c /\n"));
    }
}
