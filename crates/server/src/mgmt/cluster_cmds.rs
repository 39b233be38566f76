//! `cluster.list [-j]`: the nodes this node knows of, each one's state as
//! SWIM judges it, where it speaks SWIM and where its peers send it
//! requests, its share of the keys on the ring (the nodes that take
//! requests share them all), and where it stands with invalidations as
//! it last said (its position: how many it made; its lag: how many made
//! elsewhere it lacks); then what fetches and invalidations through the
//! cluster did.

use super::{json, text, Mgmt, Reply};
use lacquer_admin::status;
use lacquer_cluster::View;
use std::sync::atomic::Ordering;

/// The text table, laid out as varnishd lays out its own.
fn list_text(view: &View) -> String {
    let rows: Vec<[String; 7]> = view
        .nodes
        .iter()
        .map(|n| {
            let name = match n.me {
                true => format!("{} (this node)", n.node.name),
                false => n.node.name.to_string(),
            };
            [
                name,
                n.state.word().into(),
                n.node.addr.to_string(),
                n.node.http.to_string(),
                format!("{:.1}%", n.share * 100.0),
                n.standing.map_or("-".into(), |s| s.position.to_string()),
                n.standing.map_or("-".into(), |s| s.lag.to_string()),
            ]
        })
        .collect();
    let mut table = vec![vec![
        "Node", "State", "Cluster", "HTTP", "Share", "Position", "Lag",
    ]];
    table.extend(rows.iter().map(|r| r.iter().map(String::as_str).collect()));
    text::table(&table)
}

/// One object a node.
fn list_json(view: &View, args: &[String]) -> String {
    let items: Vec<String> = view
        .nodes
        .iter()
        .map(|n| {
            format!(
                "  {{\n    \"name\": {},\n    \"self\": {},\n    \"state\": \"{}\",\n    \"cluster\": {},\n    \"http\": {},\n    \"share\": {:.6},\n    \"run\": {},\n    \"position\": {},\n    \"lag\": {}\n  }}",
                json::string(&n.node.name),
                n.me,
                n.state.word(),
                json::string(&n.node.addr.to_string()),
                json::string(&n.node.http.to_string()),
                n.share,
                n.node.run,
                n.standing.map_or("null".into(), |s| s.position.to_string()),
                n.standing.map_or("null".into(), |s| s.lag.to_string()),
            )
        })
        .collect();
    json::items(1, args, &items)
}

/// What a command about the cluster answers in a daemon without one.
fn no_cluster() -> Reply {
    Reply::with(
        status::CANT,
        "No cluster: the daemon was started without --cluster-bind",
    )
}

impl Mgmt {
    /// `debug.cluster.cut on|off`.
    pub(super) fn cluster_cut(&self, arg: &str) -> Reply {
        let Some(peers) = &self.sh.cluster else {
            return no_cluster();
        };
        let cut = match arg {
            "on" => true,
            "off" => false,
            _ => return Reply::with(status::PARAM, format!("Expected on or off, got \"{arg}\"")),
        };
        peers.cluster.set_cut(cut);
        Reply::ok(match cut {
            true => "This node is cut off from its cluster",
            false => "This node is back in its cluster",
        })
    }

    pub(super) fn cluster_list(&self, json_out: bool, args: &[String]) -> Reply {
        let Some(peers) = &self.sh.cluster else {
            return no_cluster();
        };
        let view = peers.cluster.view();
        if json_out {
            return Reply::ok(list_json(&view, args));
        }
        let s = &peers.stats;
        let c = &peers.cluster.stats;
        let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        let (journal, own) = {
            let j = peers.journal.lock().unwrap_or_else(|e| e.into_inner());
            (j.len(), j.own())
        };
        let cut = match peers.cluster.is_cut() {
            true => "This node is cut off from its cluster (debug.cluster.cut)\n",
            false => "",
        };
        Reply::ok(format!(
            "{}\n{cut}Peer fetches: {} answered, {} peers unreachable; marks refused: {}\nInvalidations: {own} made here, applied by peers {} times, unanswered {} times; {} made elsewhere applied here; journal of {journal}\nCluster datagrams: {} received, {} sent, {} refused, {} malformed; membership changes: {}\n",
            list_text(&view),
            load(&s.fetched),
            load(&s.failed),
            load(&s.refused_marks),
            load(&s.spread_applied),
            load(&s.spread_failed),
            load(&s.applied_from_peers),
            load(&c.received),
            load(&c.sent),
            load(&c.refused),
            load(&c.malformed),
            load(&c.changes),
        ))
    }
}
