//! `lacquer hist`: varnishhist. A terminal histogram of a per-request
//! value on a log scale — by default the time from the start of a request
//! until it was ready to deliver (`Timestamp:Process` since start) — with
//! hits drawn as `|` and everything else as `#`. `-P` picks a predefined
//! or custom profile; `-1` reads what the log holds and draws once.

use crate::help;
use crate::source::{self, LogOptions, Sink};
use lacquer_shm::group::{Group, Grouping, Kind, Transaction};
use lacquer_shm::Tag;
use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// The command's options, as `-h` prints them.
pub const USAGE: &str =
    "usage: lacquer hist [-n workdir] [-1] [-d] [-P profile] [-q query] [-k count]
       profiles: responsetime (default), reqbodytime, size, Bereqtime, Beresptime,
                 BerespBodytime, Besize, or [c|b:]tag:[prefix]:field[:min:max]";

/// Each option, as `--help` shows it.
pub const OPTIONS: &[help::OptionLine] = &[
    help::WORKDIR,
    help::ONCE,
    help::HEAD,
    (
        "-P profile",
        "What to graph: one of the profiles named above, or a record's field",
    ),
    help::QUERY,
    help::COUNT,
    help::HELP,
];

/// What is graphed: the side, the record, the field (counted from 1,
/// the prefix included) and the decades shown.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    pub backend: bool,
    pub tag: Tag,
    pub prefix: String,
    pub field: usize,
    pub low: i32,
    pub high: i32,
}

impl Profile {
    pub fn parse(s: &str) -> Result<Profile, String> {
        let p = |backend, tag, prefix: &str, field, low, high| Profile {
            backend,
            tag,
            prefix: prefix.to_string(),
            field,
            low,
            high,
        };
        Ok(match s {
            "responsetime" => p(false, Tag::Timestamp, "Process", 3, -6, 3),
            "reqbodytime" => p(false, Tag::Timestamp, "ReqBody", 3, -6, 3),
            "size" => p(false, Tag::ReqAcct, "", 5, 1, 8),
            "Bereqtime" => p(true, Tag::Timestamp, "Bereq", 3, -6, 3),
            "Beresptime" => p(true, Tag::Timestamp, "Beresp", 3, -6, 3),
            "BerespBodytime" => p(true, Tag::Timestamp, "BerespBody", 3, -6, 3),
            "Besize" => p(true, Tag::BereqAcct, "", 5, 1, 8),
            custom => {
                let mut parts: Vec<&str> = custom.split(':').collect();
                let backend = match parts.first() {
                    Some(&"b") => {
                        parts.remove(0);
                        true
                    }
                    Some(&"c") => {
                        parts.remove(0);
                        false
                    }
                    _ => false,
                };
                if parts.len() != 3 && parts.len() != 5 {
                    return Err(format!("unknown profile \"{custom}\""));
                }
                let tag = Tag::by_name(parts[0])
                    .ok_or_else(|| format!("unknown tag \"{}\"", parts[0]))?;
                let field = parts[2]
                    .parse()
                    .ok()
                    .filter(|&f| f > 0)
                    .ok_or("bad field number")?;
                let (low, high) = if parts.len() == 5 {
                    let low = parts[3].parse().map_err(|_| "bad min")?;
                    let high = parts[4].parse().map_err(|_| "bad max")?;
                    (low, high)
                } else {
                    (-6, 3)
                };
                if low >= high {
                    return Err("min must be below max".into());
                }
                p(backend, tag, parts[1], field, low, high)
            }
        })
    }

    /// The profile's value in a transaction, if it has one.
    fn value(&self, t: &Transaction) -> Option<f64> {
        t.records
            .iter()
            .filter(|r| r.tag == self.tag)
            .filter(|r| {
                self.prefix.is_empty()
                    || r.payload.starts_with(self.prefix.as_bytes())
                        && r.payload.get(self.prefix.len()) == Some(&b':')
            })
            .find_map(|r| {
                let text = String::from_utf8_lossy(&r.payload).into_owned();
                text.split_ascii_whitespace()
                    .nth(self.field - 1)?
                    .parse::<f64>()
                    .ok()
            })
    }
}

/// Buckets per decade.
const PER_DECADE: i32 = 10;

pub fn main(args: &[String]) -> ExitCode {
    let mut opts = LogOptions::new(Grouping::Vxid);
    let mut once = false;
    let mut profile = Profile::parse("responsetime").expect("built-in profile");
    let parsed = source::parse_args("hist", USAGE, args, &mut opts, "P", &mut |flag, v| {
        match flag {
            '1' => once = true,
            'P' => profile = Profile::parse(&v()?)?,
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
    let buckets = ((profile.high - profile.low) * PER_DECADE) as usize;
    let mut hist = Histogram {
        profile,
        hits: vec![0; buckets],
        misses: vec![0; buckets],
        once,
        last_draw: Instant::now(),
    };
    let result = source::read_records(&opts, &mut hist);
    if once {
        let _ = std::io::stdout().write_all(hist.render(20).as_bytes());
    }
    source::exit("hist", result)
}

struct Histogram {
    profile: Profile,
    hits: Vec<u64>,
    misses: Vec<u64>,
    once: bool,
    last_draw: Instant,
}

impl Histogram {
    fn add(&mut self, value: f64, hit: bool) {
        let n = self.hits.len() as i64;
        let pos = if value <= 0.0 {
            0
        } else {
            ((value.log10() - f64::from(self.profile.low)) * f64::from(PER_DECADE)).floor() as i64
        };
        let i = pos.clamp(0, n - 1) as usize;
        if hit {
            self.hits[i] += 1;
        } else {
            self.misses[i] += 1;
        }
    }

    /// Draws `height` rows of bars over an axis labelled in decades.
    fn render(&self, height: usize) -> String {
        let total: Vec<u64> = self
            .hits
            .iter()
            .zip(&self.misses)
            .map(|(h, m)| h + m)
            .collect();
        let max = total.iter().copied().max().unwrap_or(0).max(1);
        let scale = |v: u64| (v as f64 * height as f64 / max as f64).ceil() as usize;
        let mut out = format!(
            "{} hits, {} misses; each row is {:.2} requests\n",
            self.hits.iter().sum::<u64>(),
            self.misses.iter().sum::<u64>(),
            max as f64 / height as f64
        );
        for row in (1..=height).rev() {
            let mut line = String::with_capacity(self.hits.len());
            for (h, m) in self.hits.iter().zip(&self.misses) {
                let hit_rows = scale(*h);
                let all_rows = scale(h + m);
                line.push(if row <= hit_rows {
                    '|'
                } else if row <= all_rows {
                    '#'
                } else {
                    ' '
                });
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        let mut axis = String::new();
        for d in self.profile.low..self.profile.high {
            let label = format!("|1e{d}");
            axis.push_str(&format!("{label:<width$}", width = PER_DECADE as usize));
        }
        out.push_str(&axis);
        out.push('\n');
        out
    }
}

impl Sink for Histogram {
    fn group(&mut self, g: &Group) -> bool {
        let want = if self.profile.backend {
            Kind::BeReq
        } else {
            Kind::Request
        };
        for t in g.iter().filter(|t| t.kind == want) {
            if let Some(v) = self.profile.value(t) {
                let hit = t.records.iter().any(|r| r.tag == Tag::Hit);
                self.add(v, hit);
            }
        }
        true
    }

    fn idle(&mut self) -> bool {
        if self.once || self.last_draw.elapsed() < Duration::from_secs(1) {
            return true;
        }
        self.last_draw = Instant::now();
        let screen = format!("\x1b[H\x1b[2J{}", self.render(20));
        let mut out = std::io::stdout();
        out.write_all(screen.as_bytes())
            .and_then(|_| out.flush())
            .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles() {
        let p = Profile::parse("responsetime").unwrap();
        assert_eq!((p.tag, p.field, p.backend), (Tag::Timestamp, 3, false));
        let c = Profile::parse("b:Timestamp:Beresp:3:-4:1").unwrap();
        assert!(c.backend);
        assert_eq!((c.low, c.high, c.prefix.as_str()), (-4, 1, "Beresp"));
        assert!(Profile::parse("nonsense").is_err());
        assert!(Profile::parse("Timestamp:Resp:0").is_err());
    }

    #[test]
    fn buckets_and_drawing() {
        let mut h = Histogram {
            profile: Profile::parse("Timestamp:Resp:3:-3:0").unwrap(),
            hits: vec![0; 30],
            misses: vec![0; 30],
            once: true,
            last_draw: Instant::now(),
        };
        h.add(0.0001, true); // below the range: first bucket
        h.add(0.0015, true);
        h.add(0.5, false);
        h.add(50.0, false); // above: last bucket
        assert_eq!(h.hits[0], 1);
        assert_eq!(h.hits[1], 1);
        assert_eq!(h.misses[26], 1);
        assert_eq!(h.misses[29], 1);
        let text = h.render(2);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "2 hits, 2 misses; each row is 0.50 requests");
        assert_eq!(lines[1], format!("||{}#  #", " ".repeat(24)));
        assert!(lines[3].starts_with("|1e-3     |1e-2     |1e-1"), "{text}");
    }
}
