//! `backend.list [-j] [-p] [pattern]`: every backend of the matching
//! programs and then their directors, as varnishd lists them: the admin
//! override, the probe's good results of its window (a director's healthy
//! members of all), the health and when it last changed; with `-p` each
//! probe's history and each director's members.

use super::{json, Mgmt, Reply};
use crate::host::vcl::DirectorRow;
use lacquer_admin::status;
use lacquer_backend::{AdminHealth, Backend};
use lacquer_core::glob::matches as glob;

/// One line of the list, whatever it stands for.
struct Row {
    name: String,
    /// The director's type, or `backend`.
    kind: &'static str,
    admin: &'static str,
    good: usize,
    of: usize,
    healthy: bool,
    last_change: f64,
}

impl Row {
    fn of_backend(name: &str, b: &Backend) -> Row {
        let (good, of) = match b.probe() {
            Some(p) => (p.good() as usize, p.spec.window as usize),
            None => (0, 0),
        };
        Row {
            name: name.to_string(),
            kind: "backend",
            // "probe" when the probe decides, "healthy" for a backend
            // without one, else the override.
            admin: match b.admin_health() {
                AdminHealth::Auto if b.probe().is_none() => "healthy",
                h => h.name(),
            },
            good,
            of,
            healthy: b.probe_healthy(),
            last_change: b.last_change(),
        }
    }

    fn of_director(name: String, d: &DirectorRow) -> Row {
        Row {
            name,
            kind: d.kind,
            admin: "probe",
            good: d.healthy_members(),
            of: d.members.len(),
            healthy: d.healthy,
            last_change: d.last_change(),
        }
    }

    fn health(&self) -> &'static str {
        if self.healthy {
            "healthy"
        } else {
            "sick"
        }
    }
}

impl Mgmt {
    pub(super) fn backend_list(&self, args: &[String]) -> Reply {
        let mut json_out = false;
        let mut details = false;
        let mut pattern = None;
        for a in &args[1..] {
            match a.strip_prefix('-') {
                // Flags, alone or together (`-jp`), as varnishd reads them.
                Some(flags) => {
                    for flag in flags.chars() {
                        match flag {
                            'j' => json_out = true,
                            'p' => details = true,
                            other => {
                                return Reply::with(status::PARAM, format!("Invalid flag {other}"))
                            }
                        }
                    }
                }
                None => pattern = Some(a.as_str()),
            }
        }
        let backends = self.matching_backends(pattern);
        let directors = self.matching_directors(pattern);
        if pattern.is_some() && backends.is_empty() && directors.is_empty() {
            return Reply::with(status::PARAM, "No Backends matches\n");
        }
        let rows: Vec<Row> = backends
            .iter()
            .map(|(name, b)| Row::of_backend(name, b))
            .chain(
                directors
                    .iter()
                    .map(|(name, d)| Row::of_director(name.clone(), d)),
            )
            .collect();
        if json_out {
            let items: Vec<String> = rows
                .iter()
                .map(|r| {
                    format!(
                        "    {}: {{\n      \"type\": \"{}\",\n      \"admin_health\": \"{}\",\n      \"probe_message\": [{}, {}, \"{}\"],\n      \"last_change\": {:.3}\n    }}",
                        json::string(&r.name),
                        r.kind,
                        r.admin,
                        r.good,
                        r.of,
                        r.health(),
                        r.last_change
                    )
                })
                .collect();
            return Reply::ok(format!(
                "{}\n  {{\n{}\n  }}\n]\n",
                json::head(3, args),
                items.join(",\n")
            ));
        }
        let cells: Vec<[String; 5]> = rows
            .iter()
            .map(|r| {
                [
                    r.name.clone(),
                    r.admin.to_string(),
                    format!("{}/{}", r.good, r.of),
                    r.health().to_string(),
                    super::commands::http_date(r.last_change),
                ]
            })
            .collect();
        let heads = ["Backend name", "Admin", "Probe", "Health", "Last change"];
        let width = |i: usize, pad: usize| {
            cells
                .iter()
                .map(|r| r[i].len())
                .chain([heads[i].len()])
                .max()
                .unwrap_or(0)
                + pad
        };
        // varnishd widens the probe column when it shows details.
        let probe_width = if details { 11 } else { 0 };
        let w = [
            width(0, 3),
            width(1, 4),
            width(2, 4).max(probe_width),
            width(3, 4),
        ];
        let line = |r: [&str; 5]| {
            format!(
                "{:<w0$}{:<w1$}{:<w2$}{:<w3$}{}\n",
                r[0],
                r[1],
                r[2],
                r[3],
                r[4],
                w0 = w[0],
                w1 = w[1],
                w2 = w[2],
                w3 = w[3]
            )
        };
        let mut out = line(heads);
        for (i, row) in cells.iter().enumerate() {
            out.push_str(&line([&row[0], &row[1], &row[2], &row[3], &row[4]]));
            if !details {
                continue;
            }
            if let Some((_, b)) = backends.get(i) {
                if let Some(p) = b.probe() {
                    out.push_str(&p.details());
                }
            } else if let Some((_, d)) = directors.get(i - backends.len()) {
                out.push_str(&members_table(d));
            }
        }
        Reply::ok(out)
    }

    /// The directors of the programs a `backend.list` pattern names
    /// (`vcl.name`, or a name in the active program), by full name.
    fn matching_directors(&self, pattern: Option<&str>) -> Vec<(String, DirectorRow)> {
        let reg = self.registry();
        let (vcl_pat, name_pat) = super::vcl_cmds::split_pattern(&reg, pattern);
        let mut out = Vec::new();
        for e in &reg.entries {
            if !glob(&vcl_pat, &e.loaded.name) {
                continue;
            }
            for d in e.loaded.directors(&self.sh.params, self.sh.cache.bans()) {
                if glob(&name_pat, &d.name) {
                    out.push((format!("{}.{}", e.loaded.name, d.name), d));
                }
            }
        }
        out
    }
}

/// A director's members under its line, as `backend.list -p` shows
/// them: a fallback marks where its next pick starts, the others give
/// weights.
fn members_table(d: &DirectorRow) -> String {
    let fallback = d.kind == "fallback";
    let current = d.current;
    let row = |a: &str, b: &str, c: &str| format!("{:15}{a:<11}{b:<11}{c}\n", "");
    let mut out = String::from("\n");
    out.push_str(&row(
        "Backend",
        if fallback { "Current" } else { "Weight" },
        "Health",
    ));
    for (i, m) in d.members.iter().enumerate() {
        let second = match (fallback, m.weight) {
            (true, _) if current == Some(i) => "*".to_string(),
            (true, _) => String::new(),
            (false, Some(w)) => format!("{w:.2}"),
            (false, None) => "-".to_string(),
        };
        let health = if m.healthy { "healthy" } else { "sick" };
        out.push_str(&row(&m.name, &second, health));
    }
    out.push('\n');
    out
}
