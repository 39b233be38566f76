//! One second of the daemon as the dashboard page draws it, as a JSON
//! object: the `MAIN` counters the page charts (running totals: the page
//! takes differences for rates), each store's use, each backend of a warm
//! program with its health and probe history, the programs loaded and
//! which is active, and what the log said (response time percentiles,
//! the most requested URLs, responses by status class, each backend's
//! response times), and the cluster as this node sees it. Names are the counters' own, so a number on
//! the page is the one `lacquer stat` shows.

use super::logwatch::LogSample;
use crate::mgmt::json_string as string;
use crate::Shared;
use lacquer_backend::AdminHealth;
use lacquer_core::counters::{CounterSpec, MAIN, PEER, SMA, SMF, SMP, VBE};
use lacquer_shm::counters::Snapshot;
use std::fmt::Write;

/// The `MAIN` counters a snapshot carries.
pub(crate) const CHARTED: &[&str] = &[
    "uptime",
    "sess_conn",
    "sess_h2",
    "sess_h3",
    "h3_streams",
    "client_req",
    "cache_hit",
    "cache_hit_grace",
    "cache_miss",
    "cache_hitpass",
    "cache_hitmiss",
    "s_pass",
    "s_pipe",
    "s_synth",
    "backend_req",
    "backend_fail",
    "backend_unhealthy",
    "fetch_failed",
    "s_req_hdrbytes",
    "s_req_bodybytes",
    "s_resp_hdrbytes",
    "s_resp_bodybytes",
    "n_object",
    "n_expired",
    "n_lru_nuked",
    "n_purges",
    "n_obj_purged",
    "bans",
    "bans_added",
    "esi_errors",
    "sess_dropped",
    "req_dropped",
    "threads_limited",
];

fn value_of(table: &[CounterSpec], values: &[u64], name: &str) -> u64 {
    table
        .iter()
        .position(|c| c.name == name)
        .and_then(|i| values.get(i).copied())
        .unwrap_or(0)
}

fn number(out: &mut String, v: Option<f64>) {
    match v {
        Some(v) if v.is_finite() => {
            let _ = write!(out, "{v:.6}");
        }
        _ => out.push_str("null"),
    }
}

/// The cluster as this node sees it: null outside one; else every node
/// with its state, share and standing (as it last said), and for the
/// others what they did with this node (`PEER.<node>`) and the traffic
/// of its connections to them (`VBE.cluster.<node>`).
fn cluster(sh: &Shared, snap: &Snapshot, out: &mut String) {
    let Some(peers) = &sh.cluster else {
        out.push_str("null");
        return;
    };
    let view = peers.cluster.view();
    let section = |prefix: &str| {
        snap.sections()
            .find(|(p, _, _)| *p == prefix)
            .map(|(_, _, v)| v.to_vec())
    };
    let _ = write!(
        out,
        "{{\"self\":{},\"cut\":{},\"nodes\":[",
        string(&peers.cluster.me.name),
        peers.cluster.is_cut()
    );
    for (i, n) in view.nodes.iter().enumerate() {
        let sep = if i == 0 { "" } else { "," };
        let standing = match n.me {
            true => Some(peers.cluster.standings.own()),
            false => n.standing,
        };
        let _ = write!(
            out,
            "{sep}{{\"name\":{},\"self\":{},\"state\":\"{}\",\"share\":{:.6},\"http\":{},\"position\":{},\"lag\":{}",
            string(&n.node.name),
            n.me,
            n.state.word(),
            n.share,
            string(&n.node.http.to_string()),
            standing.map_or("null".into(), |s| s.position.to_string()),
            standing.map_or("null".into(), |s| s.lag.to_string()),
        );
        if !n.me {
            let peer = section(&format!("PEER.{}", n.node.name)).unwrap_or_default();
            let vbe = section(&format!("VBE.cluster.{}", n.node.name)).unwrap_or_default();
            for name in [
                "fetch",
                "fetch_unreachable",
                "inval_sent",
                "inval_unanswered",
                "inval_applied",
            ] {
                let _ = write!(out, ",\"{name}\":{}", value_of(PEER, &peer, name));
            }
            let _ = write!(
                out,
                ",\"lag_here\":{},\"sent\":{},\"received\":{}",
                value_of(PEER, &peer, "lag"),
                value_of(VBE, &vbe, "bereq_hdrbytes") + value_of(VBE, &vbe, "bereq_bodybytes"),
                value_of(VBE, &vbe, "beresp_hdrbytes") + value_of(VBE, &vbe, "beresp_bodybytes"),
            );
        }
        out.push('}');
    }
    out.push_str("]}");
}

/// The snapshot at `now` (seconds since the epoch).
pub(crate) fn build(sh: &Shared, now: f64, log: &LogSample) -> String {
    let snap: Snapshot = crate::daemon::metrics::snapshot(sh);
    let mut out = String::with_capacity(2048);
    let _ = write!(out, "{{\"t\":{now:.3},\"c\":{{");
    let main = snap.main_values();
    for (i, name) in CHARTED.iter().enumerate() {
        let sep = if i == 0 { "" } else { "," };
        let _ = write!(out, "{sep}\"{name}\":{}", value_of(MAIN, main, name));
    }
    out.push_str("},\"stores\":[");
    let mut first = true;
    for (prefix, table, values) in snap.sections() {
        // Every store's section starts with the same seven counters.
        let Some(name) = ["SMA.", "SMF.", "SMP."]
            .iter()
            .find_map(|p| prefix.strip_prefix(p))
        else {
            continue;
        };
        if ![SMA, SMF, SMP].iter().any(|t| std::ptr::eq(table, *t)) {
            continue;
        }
        let sep = if first { "" } else { "," };
        first = false;
        let _ = write!(
            out,
            "{sep}{{\"name\":{},\"g_bytes\":{},\"g_space\":{},\"c_fail\":{}}}",
            string(name),
            value_of(SMA, values, "g_bytes"),
            value_of(SMA, values, "g_space"),
            value_of(SMA, values, "c_fail"),
        );
    }
    out.push_str("],\"backends\":[");
    let mut vcls = String::new();
    {
        let reg = sh.vcls.lock().unwrap_or_else(|p| p.into_inner());
        let mut first = true;
        let mut stats = Vec::new();
        for e in reg.entries.iter().filter(|e| reg.is_warm(e)) {
            for b in e.loaded.backends.iter().flatten() {
                stats.clear();
                b.stats.snapshot(&mut stats);
                let (good, window, bits) = match b.probe() {
                    Some(p) => (p.good(), p.spec.window, p.happy_bits()),
                    None => (0, 0, 0),
                };
                let admin = match b.admin_health() {
                    AdminHealth::Auto if b.probe().is_none() => "healthy",
                    h => h.name(),
                };
                let sep = if first { "" } else { "," };
                first = false;
                let _ = write!(
                    out,
                    "{sep}{{\"vcl\":{},\"name\":{},\"endpoint\":{},\"admin\":\"{admin}\",\"healthy\":{},\"since\":{:.0},\"good\":{good},\"window\":{window},\"happy\":{bits},\"conn\":{},\"waiting\":{},\"req\":{},\"fail\":{},\"busy\":{},\"unhealthy\":{},\"sent\":{},\"received\":{}}}",
                    string(&e.loaded.name),
                    string(&b.name),
                    string(&b.endpoint),
                    b.healthy(),
                    (now - b.last_change()).max(0.0),
                    value_of(VBE, &stats, "conn"),
                    value_of(VBE, &stats, "waiting"),
                    value_of(VBE, &stats, "req"),
                    value_of(VBE, &stats, "fail"),
                    value_of(VBE, &stats, "busy"),
                    value_of(VBE, &stats, "unhealthy"),
                    value_of(VBE, &stats, "bereq_hdrbytes") + value_of(VBE, &stats, "bereq_bodybytes"),
                    value_of(VBE, &stats, "beresp_hdrbytes") + value_of(VBE, &stats, "beresp_bodybytes"),
                );
            }
        }
        for (i, e) in reg.entries.iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            let _ = write!(
                vcls,
                "{sep}{{\"name\":{},\"state\":\"{}\",\"warm\":{},\"active\":{}}}",
                string(&e.loaded.name),
                e.state.name(),
                reg.is_warm(e),
                e.loaded.name == reg.active
            );
        }
        for (l, t) in &reg.labels {
            let _ = write!(
                vcls,
                "{}{{\"name\":{},\"label\":{}}}",
                if vcls.is_empty() { "" } else { "," },
                string(l),
                string(t)
            );
        }
    }
    let _ = write!(out, "],\"vcls\":[{vcls}],\"cluster\":");
    cluster(sh, &snap, &mut out);
    let _ = write!(out, ",\"log\":{{\"requests\":{},\"p50\":", log.requests);
    number(&mut out, log.p50);
    out.push_str(",\"p99\":");
    number(&mut out, log.p99);
    out.push_str(",\"top\":[");
    for (i, (url, n)) in log.top.iter().enumerate() {
        let sep = if i == 0 { "" } else { "," };
        let _ = write!(out, "{sep}[{},{n:.2}]", string(url));
    }
    let [s1, s2, s3, s4, s5] = log.status;
    let _ = write!(out, "],\"status\":[{s1},{s2},{s3},{s4},{s5}],\"be\":{{");
    for (i, (name, p50, p99)) in log.backends.iter().enumerate() {
        let sep = if i == 0 { "" } else { "," };
        let _ = write!(out, "{sep}{}:[{p50:.6},{p99:.6}]", string(name));
    }
    out.push_str("}}}");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_charted_counter_exists() {
        for name in CHARTED {
            assert!(MAIN.iter().any(|c| c.name == *name), "MAIN.{name}");
        }
        for name in ["g_bytes", "g_space", "c_fail"] {
            assert!(SMA.iter().any(|c| c.name == name), "SMA.{name}");
        }
        for name in [
            "conn",
            "waiting",
            "req",
            "fail",
            "busy",
            "unhealthy",
            "bereq_hdrbytes",
            "bereq_bodybytes",
            "beresp_hdrbytes",
            "beresp_bodybytes",
        ] {
            assert!(VBE.iter().any(|c| c.name == name), "VBE.{name}");
        }
    }
}
