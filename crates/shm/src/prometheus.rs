//! The counters in Prometheus's text exposition format (version 0.0.4),
//! for the daemon's `/metrics` endpoint: the same tables and values that
//! `lacquer stat` reads, so no exporter is needed.
//!
//! Names: `MAIN.cache_hit` becomes `lacquer_main_cache_hit_total`;
//! sections become labels, `SMA.s0.c_bytes` the sample
//! `lacquer_sma_c_bytes_total{store="s0"}` and `VBE.boot.web.req`
//! `lacquer_vbe_req_total{vcl="boot",backend="web"}`. Counters end in
//! `_total`, seconds in `_seconds`; gauges and bitmaps are gauges.

use crate::counters::Snapshot;
use lacquer_core::counters::{CounterKind, CounterSpec, Unit, MAIN};
use std::fmt::Write;

/// The content type of what [`render`] produces.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The label names of a section family, by the prefix's first word.
fn label_names(family: &str) -> &'static [&'static str] {
    match family {
        "SMA" | "SMF" | "SMP" => &["store"],
        "VBE" => &["vcl", "backend"],
        "MEMPOOL" => &["pool"],
        "PEER" => &["node"],
        "MGT" | "CLUSTER" => &[],
        _ => &["name"],
    }
}

fn metric_name(out: &mut String, family: &str, c: &CounterSpec) {
    out.push_str("lacquer_");
    out.extend(family.chars().map(|ch| ch.to_ascii_lowercase()));
    out.push('_');
    out.extend(
        c.name
            .chars()
            .map(|ch| if ch.is_ascii_alphanumeric() { ch } else { '_' }),
    );
    if c.unit == Unit::Seconds && !c.name.ends_with("_seconds") {
        out.push_str("_seconds");
    }
    if c.kind == CounterKind::Counter {
        out.push_str("_total");
    }
}

fn family_head(out: &mut String, name: &str, c: &CounterSpec) {
    let kind = match c.kind {
        CounterKind::Counter => "counter",
        CounterKind::Gauge | CounterKind::Bitmap => "gauge",
    };
    let _ = writeln!(out, "# HELP {name} {}", c.doc.replace('\\', "\\\\"));
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn label_value(out: &mut String, v: &str) {
    for ch in v.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// Renders every counter of the snapshot.
pub fn render(snap: &Snapshot) -> String {
    let mut out = String::with_capacity(64 * 1024);
    let mut name = String::new();
    for (c, v) in MAIN.iter().zip(snap.main_values()) {
        name.clear();
        metric_name(&mut name, "MAIN", c);
        family_head(&mut out, &name, c);
        let _ = writeln!(out, "{name} {v}");
    }
    // One family per field of a table, with a sample per section.
    let sections: Vec<_> = snap.sections().collect();
    let mut done: Vec<*const CounterSpec> = Vec::new();
    for (prefix, table, _) in &sections {
        if done.contains(&table.as_ptr()) {
            continue;
        }
        done.push(table.as_ptr());
        let family = prefix.split('.').next().unwrap_or("");
        let labels = label_names(family);
        for (i, c) in table.iter().enumerate() {
            name.clear();
            metric_name(&mut name, family, c);
            family_head(&mut out, &name, c);
            for (prefix, t, values) in &sections {
                if t.as_ptr() != table.as_ptr() {
                    continue;
                }
                out.push_str(&name);
                // A section without labels (MGT) is a plain sample.
                if !labels.is_empty() {
                    out.push('{');
                    let rest = prefix.split_once('.').map_or("", |(_, r)| r);
                    let parts = rest.splitn(labels.len(), '.');
                    for (j, (label, value)) in labels.iter().zip(parts).enumerate() {
                        if j > 0 {
                            out.push(',');
                        }
                        out.push_str(label);
                        out.push_str("=\"");
                        label_value(&mut out, value);
                        out.push('"');
                    }
                    out.push('}');
                }
                let _ = writeln!(out, " {}", values[i]);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use lacquer_core::counters::{MGT, SMA, VBE};

    #[test]
    fn sections_become_labelled_families() {
        let mut snap = Snapshot::main();
        snap.section("SMA.s0".into(), SMA, |v| v.extend(1..=7));
        snap.section("VBE.boot.web".into(), VBE, |v| {
            v.extend(0..VBE.len() as u64)
        });
        snap.section("VBE.vcl2.a\"b".into(), VBE, |v| v.extend(100..200));
        snap.section("MGT".into(), MGT, |v| v.extend([5, 1, 0, 0, 0, 0, 2]));
        let text = render(&snap);
        // The per-backend up gauge, and the management counters plain.
        assert!(text.contains("# TYPE lacquer_vbe_healthy gauge\n"));
        assert!(text.contains("\nlacquer_mgt_child_start_total 1\n"));
        assert!(text.contains("\nlacquer_mgt_child_panic_total 2\n"));
        assert!(text.contains("# TYPE lacquer_main_cache_hit_total counter\n"));
        assert!(text.contains("# HELP lacquer_main_cache_hit_total Requests answered"));
        assert!(text.contains("# TYPE lacquer_main_n_object gauge\n"));
        assert!(text.contains("lacquer_main_uptime_seconds_total "));
        assert!(text.contains("\nlacquer_sma_c_bytes_total{store=\"s0\"} 3\n"));
        assert!(text.contains("\nlacquer_vbe_req_total{vcl=\"boot\",backend=\"web\"} 9\n"));
        assert!(text.contains("\nlacquer_vbe_req_total{vcl=\"vcl2\",backend=\"a\\\"b\"} 109\n"));
        assert!(text.contains("# TYPE lacquer_vbe_happy gauge\n"));
        // Each family is declared once, before all of its samples.
        assert_eq!(text.matches("# TYPE lacquer_vbe_req_total ").count(), 1);
        let head = text.find("# TYPE lacquer_vbe_req_total").unwrap();
        let first = text.find("lacquer_vbe_req_total{").unwrap();
        assert!(head < first);
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (name, value) = line.rsplit_once(' ').unwrap();
            assert!(value.parse::<u64>().is_ok(), "{line}");
            assert!(name.starts_with("lacquer_"), "{line}");
        }
    }
}
