//! `lacquer top`: varnishtop. Ranks the most frequent log record payloads
//! (`-i ReqURL` for the most requested URLs), decaying the counts over
//! `-p` seconds in the live view; `-1` reads what the log holds and prints
//! the ranking once.

use crate::help;
use crate::source::{self, LogOptions, Sink};
use lacquer_shm::group::{Group, Grouping};
use lacquer_shm::Tag;
use std::collections::HashMap;
use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// The command's options, as `-h` prints them.
pub const USAGE: &str =
    "usage: lacquer top [-n workdir] [-1] [-d] [-f] [-p period] [-i taglist] [-x taglist]
                   [-I [taglist:]regex] [-X [taglist:]regex] [-c] [-b] [-q query]";

/// Each option, as `--help` shows it.
pub const OPTIONS: &[help::OptionLine] = &[
    help::WORKDIR,
    help::ONCE,
    help::HEAD,
    (
        "-f",
        "Count only each record's first field (its first word)",
    ),
    (
        "-p period",
        "How fast counts decay, in seconds (default 60)",
    ),
    help::INCLUDE_TAGS,
    help::EXCLUDE_TAGS,
    help::INCLUDE_REGEX,
    help::EXCLUDE_REGEX,
    help::CLIENT,
    help::BACKEND,
    help::QUERY,
    help::HELP,
];

pub fn main(args: &[String]) -> ExitCode {
    let mut opts = LogOptions::new(Grouping::Vxid);
    let mut once = false;
    let mut first_field = false;
    let mut period = 60.0f64;
    let parsed = source::parse_args("top", USAGE, args, &mut opts, "p", &mut |flag, v| {
        match flag {
            '1' => once = true,
            'f' => first_field = true,
            'p' => period = v()?.parse().map_err(|_| "-p: not a number".to_string())?,
            _ => return Ok(false),
        }
        Ok(true)
    });
    if let Err(code) = parsed {
        return code;
    }
    if once {
        opts.from_oldest = true;
    }
    let mut ranking = Ranking {
        opts: &opts,
        first_field,
        counts: HashMap::new(),
        once,
        decay: 1.0 - 1.0 / period.max(1.0),
        last_draw: Instant::now(),
    };
    let result = source::read_records(&opts, &mut ranking);
    if once {
        let text = ranking.render(usize::MAX);
        let _ = std::io::stdout().write_all(text.as_bytes());
    }
    source::exit("top", result)
}

struct Ranking<'a> {
    opts: &'a LogOptions,
    first_field: bool,
    counts: HashMap<(Tag, Vec<u8>), f64>,
    once: bool,
    decay: f64,
    last_draw: Instant,
}

impl Ranking<'_> {
    fn add(&mut self, tag: Tag, payload: &[u8]) {
        let key = if self.first_field {
            let f = payload
                .split(|b| b.is_ascii_whitespace())
                .find(|f| !f.is_empty())
                .unwrap_or_default();
            f.strip_suffix(b":").unwrap_or(f).to_vec()
        } else {
            payload.to_vec()
        };
        *self.counts.entry((tag, key)).or_insert(0.0) += 1.0;
    }

    /// The ranking, most frequent first, at most `rows` lines.
    fn render(&self, rows: usize) -> String {
        let mut entries: Vec<(&(Tag, Vec<u8>), &f64)> = self.counts.iter().collect();
        entries.sort_by(|a, b| {
            b.1.partial_cmp(a.1)
                .unwrap_or(std::cmp::Ordering::Equal)
                .then_with(|| a.0.cmp(b.0))
        });
        let mut out = String::new();
        for ((tag, payload), count) in entries.into_iter().take(rows) {
            out.push_str(&format!(
                "{count:9.2} {:<14} {}\n",
                tag.name(),
                String::from_utf8_lossy(payload)
            ));
        }
        out
    }
}

impl Sink for Ranking<'_> {
    fn group(&mut self, g: &Group) -> bool {
        for t in g {
            for r in &t.records {
                if self.opts.shows(r) {
                    self.add(r.tag, &r.payload);
                }
            }
        }
        true
    }

    fn idle(&mut self) -> bool {
        if self.once || self.last_draw.elapsed() < Duration::from_secs(1) {
            return true;
        }
        self.last_draw = Instant::now();
        let rows = std::env::var("LINES")
            .ok()
            .and_then(|l| l.parse::<usize>().ok())
            .unwrap_or(24)
            .saturating_sub(2);
        let mut screen = String::from("\x1b[H\x1b[2J");
        screen.push_str(&self.render(rows));
        let ok = std::io::stdout()
            .write_all(screen.as_bytes())
            .and_then(|_| std::io::stdout().flush())
            .is_ok();
        for v in self.counts.values_mut() {
            *v *= self.decay;
        }
        self.counts.retain(|_, v| *v >= 0.01);
        ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_by_count_then_name() {
        let opts = LogOptions::new(Grouping::Vxid);
        let mut r = Ranking {
            opts: &opts,
            first_field: false,
            counts: HashMap::new(),
            once: true,
            decay: 1.0,
            last_draw: Instant::now(),
        };
        for url in ["/b", "/a", "/b", "/c", "/b", "/a"] {
            r.add(Tag::ReqURL, url.as_bytes());
        }
        assert_eq!(
            r.render(2),
            "     3.00 ReqURL         /b\n     2.00 ReqURL         /a\n"
        );
        r.first_field = true;
        r.counts.clear();
        r.add(Tag::ReqStart, b"192.0.2.1 5000 a0");
        r.add(Tag::ReqStart, b"192.0.2.1 5001 a0");
        r.add(Tag::Timestamp, b"Resp: 1 2 3");
        assert_eq!(
            r.render(9),
            "     2.00 ReqStart       192.0.2.1\n     1.00 Timestamp      Resp\n"
        );
    }
}
