//! `lacquer stat`: varnishstat. Reads the counters a daemon publishes in
//! its work directory: `-1` prints each once (name, value, average rate
//! since start, description), `-j` as JSON, `-l` lists names and
//! descriptions, and without those a live view refreshes every second
//! with the rate over the last interval. `-f` globs select counters
//! (`^glob` excludes), `MAIN.` implied as varnishstat does.

use crate::help;
use crate::source::getopt;
use lacquer_shm::counters::{read, Reading};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// The command's options, as `-h` prints them.
pub const USAGE: &str =
    "usage: lacquer stat [-n workdir] [-1 | -j | -l] [-f [^]glob]... [-t seconds]";

/// Each option, as `--help` shows it.
pub const OPTIONS: &[help::OptionLine] = &[
    help::WORKDIR,
    help::ONCE,
    ("-j", "Print once, as JSON, and exit"),
    ("-l", "List the counters (name, kind, description) and exit"),
    ("-f [^]glob", "Only the counters the glob matches (^: leave them out); repeatable, the last match decides"),
    ("-t seconds", "How long to wait for the daemon's counters to appear"),
    help::HELP,
];

struct Opts {
    workdir: PathBuf,
    once: bool,
    json: bool,
    list: bool,
    filters: Vec<(bool, String)>,
    wait: f64,
}

pub fn main(args: &[String]) -> ExitCode {
    let mut o = Opts {
        workdir: lacquer_core::host::tool_workdir(),
        once: false,
        json: false,
        list: false,
        filters: Vec::new(),
        wait: 5.0,
    };
    let mut help = false;
    let parsed = getopt(args, "nft", &mut |flag, value| {
        let v = || value.clone().unwrap_or_default();
        match flag {
            'n' => o.workdir = PathBuf::from(v()),
            '1' => o.once = true,
            'j' => o.json = true,
            'l' => o.list = true,
            'f' => {
                let f = v();
                match f.strip_prefix('^') {
                    Some(rest) => o.filters.push((false, rest.to_string())),
                    None => o.filters.push((true, f)),
                }
            }
            't' => o.wait = v().parse().map_err(|_| "-t: not a number".to_string())?,
            'h' => help = true,
            _ => return Err(format!("unknown option -{flag}")),
        }
        Ok(())
    });
    if let Err(e) = parsed {
        eprintln!("lacquer stat: {e}\n{USAGE}");
        return ExitCode::from(2);
    }
    if help {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let readings = match read_waiting(&o) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("lacquer stat: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut out = std::io::stdout().lock();
    let text = if o.list {
        list(&o, &readings)
    } else if o.json {
        json(&o, &readings)
    } else if o.once {
        once(&o, &readings)
    } else {
        drop(out);
        return live(&o);
    };
    let _ = out.write_all(text.as_bytes());
    ExitCode::SUCCESS
}

/// Reads the counters, waiting up to `-t` seconds for a daemon to
/// publish them.
fn read_waiting(o: &Opts) -> Result<Vec<Reading>, String> {
    let end = Instant::now() + Duration::from_secs_f64(o.wait.max(0.0));
    loop {
        match read(&o.workdir) {
            Ok(r) => return Ok(r),
            Err(e) if Instant::now() >= end => return Err(e.to_string()),
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// Whether `-f` selects a counter: the last matching filter decides; with
/// only exclusions, everything else is selected.
fn selected(o: &Opts, name: &str) -> bool {
    if o.filters.is_empty() {
        return true;
    }
    let mut verdict = o.filters.iter().all(|(include, _)| !include);
    for (include, glob) in &o.filters {
        if glob_matches(glob, name) {
            verdict = *include;
        }
    }
    verdict
}

fn glob_matches(glob: &str, name: &str) -> bool {
    lacquer_core::glob::matches(glob, name)
        || (!glob.contains('.') && lacquer_core::glob::matches(&format!("MAIN.{glob}"), name))
}

fn chosen<'a>(o: &Opts, r: &'a [Reading]) -> Vec<&'a Reading> {
    r.iter().filter(|c| selected(o, &c.name)).collect()
}

fn uptime(r: &[Reading]) -> u64 {
    r.iter()
        .find(|c| c.name == "MAIN.uptime")
        .map_or(0, |c| c.value)
}

fn rate_column(c: &Reading, rate: f64) -> String {
    if c.kind != "counter" {
        format!("{:>12}", ".  ")
    } else {
        format!("{rate:>12.2}")
    }
}

fn once(o: &Opts, r: &[Reading]) -> String {
    let rows = chosen(o, r);
    let width = rows.iter().map(|c| c.name.len()).max().unwrap_or(0).max(17);
    let up = uptime(r).max(1) as f64;
    let mut out = String::new();
    for c in rows {
        out.push_str(&format!(
            "{:<width$} {:>12} {} {}\n",
            c.name,
            c.value,
            rate_column(c, c.value as f64 / up),
            c.doc
        ));
    }
    out
}

fn list(o: &Opts, r: &[Reading]) -> String {
    let rows = chosen(o, r);
    let width = rows.iter().map(|c| c.name.len()).max().unwrap_or(0);
    let mut out = format!("{:<width$} Description\n", "Field name");
    for c in rows {
        out.push_str(&format!("{:<width$} {}\n", c.name, c.doc));
    }
    out
}

fn json(o: &Opts, r: &[Reading]) -> String {
    let now = std::time::SystemTime::now();
    let stamp = httpdate_iso(now);
    let mut out =
        format!("{{\n  \"version\": 1,\n  \"timestamp\": \"{stamp}\",\n  \"counters\": {{\n");
    let rows = chosen(o, r);
    for (i, c) in rows.iter().enumerate() {
        // varnishstat's one-letter kinds and formats.
        let flag = match c.kind.as_str() {
            "gauge" => "g",
            "bitmap" => "b",
            _ => "c",
        };
        let format = match c.unit.as_str() {
            "bytes" => "B",
            "bits" => "b",
            "seconds" => "d",
            _ => "i",
        };
        out.push_str(&format!(
            "    \"{}\": {{\n      \"description\": \"{}\",\n      \"flag\": \"{flag}\",\n      \"format\": \"{format}\",\n      \"value\": {}\n    }}{}\n",
            json_escape(&c.name),
            json_escape(&c.doc),
            c.value,
            if i + 1 < rows.len() { "," } else { "" }
        ));
    }
    out.push_str("  }\n}\n");
    out
}

fn json_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// `YYYY-MM-DDTHH:MM:SS` in UTC.
fn httpdate_iso(t: std::time::SystemTime) -> String {
    let secs = t
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let days = secs / 86400;
    let rem = secs % 86400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The live view: every second, the counters that are not zero, with
/// their rate over the last second and their average since start.
fn live(o: &Opts) -> ExitCode {
    let mut prev: Option<(Instant, Vec<Reading>)> = None;
    let mut out = std::io::stdout();
    loop {
        let now = Instant::now();
        let r = match read(&o.workdir) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("lacquer stat: {e}");
                return ExitCode::FAILURE;
            }
        };
        let up = uptime(&r);
        let mut screen = String::from("\x1b[H\x1b[2J");
        screen.push_str(&format!(
            "Uptime: {}d {:02}:{:02}:{:02}   (Ctrl-C to quit)\n\n",
            up / 86400,
            up % 86400 / 3600,
            up % 3600 / 60,
            up % 60
        ));
        screen.push_str(&format!(
            "{:<32} {:>14} {:>12} {:>12}\n",
            "NAME", "CURRENT", "CHANGE", "AVERAGE"
        ));
        for c in chosen(o, &r) {
            if c.value == 0 {
                continue;
            }
            let change = match &prev {
                Some((t, old)) => {
                    let before = old.iter().find(|p| p.name == c.name).map_or(0, |p| p.value);
                    let dt = now.duration_since(*t).as_secs_f64().max(0.001);
                    (c.value as f64 - before as f64) / dt
                }
                None => 0.0,
            };
            let avg = if c.kind != "counter" {
                ".".to_string()
            } else {
                format!("{:.2}", c.value as f64 / up.max(1) as f64)
            };
            screen.push_str(&format!(
                "{:<32} {:>14} {:>12.2} {:>12}\n",
                c.name, c.value, change, avg
            ));
        }
        if out.write_all(screen.as_bytes()).is_err() || out.flush().is_err() {
            return ExitCode::SUCCESS;
        }
        prev = Some((now, r));
        std::thread::sleep(Duration::from_secs(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(name: &str, kind: &str, value: u64) -> Reading {
        Reading {
            name: name.into(),
            kind: kind.into(),
            unit: "count".into(),
            doc: "Doc".into(),
            value,
        }
    }

    fn opts(filters: &[&str]) -> Opts {
        Opts {
            workdir: PathBuf::new(),
            once: true,
            json: false,
            list: false,
            filters: filters
                .iter()
                .map(|f| match f.strip_prefix('^') {
                    Some(r) => (false, r.to_string()),
                    None => (true, f.to_string()),
                })
                .collect(),
            wait: 0.0,
        }
    }

    #[test]
    fn filters_and_layout() {
        let r = vec![
            reading("MAIN.uptime", "counter", 10),
            reading("MAIN.cache_hit", "counter", 5),
            reading("MAIN.cache_hitpass", "counter", 1),
            reading("MAIN.n_object", "gauge", 3),
        ];
        let text = once(&opts(&["MAIN.cache_*", "^MAIN.cache_hitpass"]), &r);
        assert_eq!(text, "MAIN.cache_hit               5         0.50 Doc\n");
        let text = once(&opts(&["n_object"]), &r);
        assert_eq!(text, "MAIN.n_object                3          .   Doc\n");
        assert_eq!(once(&opts(&["^MAIN.*"]), &r), "");
        assert_eq!(once(&opts(&[]), &r).lines().count(), 4);
        let j = json(&opts(&["cache_hit"]), &r);
        assert!(j.contains("\"MAIN.cache_hit\": {"), "{j}");
        assert!(j.contains("\"value\": 5"));
    }

    #[test]
    fn iso_time() {
        let t = std::time::UNIX_EPOCH + Duration::from_secs(1_795_293_094);
        assert_eq!(httpdate_iso(t), "2026-11-21T20:31:34");
    }
}
