//! `lacquer log`: varnishlog. Prints the daemon's log as it is written
//! (or from the oldest record with `-d`, or from a file with `-r`),
//! grouped and filtered, in varnishlog's layout; `-w` writes the records
//! to a file instead, for `-r` later.

use crate::source::{self, LogOptions, Sink, DUMP_MAGIC};
use lacquer_shm::group::{Group, Grouping};
use lacquer_shm::Record;
use std::io::Write;
use std::process::ExitCode;

const USAGE: &str =
    "usage: lacquer log [-n workdir] [-d] [-r file] [-w file [-A]] [-g raw|vxid|request|session]
                   [-q query] [-c] [-b] [-i taglist] [-x taglist] [-I [taglist:]regex]
                   [-X [taglist:]regex] [-k count] [-T seconds] [-L limit]";

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
    };
    if binary && printer.out.write_all(DUMP_MAGIC).is_err() {
        eprintln!("lacquer log: cannot write the file");
        return ExitCode::FAILURE;
    }
    let result = source::run(&opts, &mut printer);
    let _ = printer.out.flush();
    source::exit("log", result)
}

struct Printer<'a> {
    opts: &'a LogOptions,
    out: Box<dyn Write>,
    binary: bool,
    failed: bool,
}

impl Sink for Printer<'_> {
    fn group(&mut self, g: &Group) -> bool {
        let mut text = Vec::with_capacity(1024);
        if self.binary {
            for t in g {
                for r in t.records.iter().filter(|r| self.opts.shows(r)) {
                    r.encode(&mut text);
                }
            }
        } else {
            format_group(self.opts, g, &mut text);
        }
        if self.out.write_all(&text).is_err() {
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
        let shown: Vec<&Record> = t.records.iter().filter(|r| opts.shows(r)).collect();
        if shown.is_empty() && (opts.client_only || opts.backend_only) {
            continue;
        }
        any = true;
        let level = t.level.max(1) as usize;
        let stars = "*".repeat(level);
        let _ = writeln!(out, "{stars:<4}<< {:<8} >> {:<10}", t.kind.label(), t.vxid);
        let dashes = "-".repeat(level);
        for r in shown {
            let _ = write!(out, "{dashes:<4}{:<14} ", r.tag.name());
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
    let _ = write!(
        out,
        "{:>10} {:<14} {} ",
        r.vxid,
        r.tag.name(),
        r.side.marker()
    );
    out.extend_from_slice(&r.payload);
    out.push(b'\n');
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
