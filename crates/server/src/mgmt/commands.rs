//! Dispatch over the command table, and the commands that are not about
//! VCL: ping, status, banner, help, pid, start/stop, quit, param.*,
//! panic.*, ban, ban.list, storage.list and xkey.purge/xkey.softpurge.

use super::{json, Mgmt, Reply};
use crate::host::invalidation::Invalidation;
use crate::host::spread::{self, Reach};
use crate::host::vcl::VclSource;
use lacquer_admin::commands::{find, Cmd, CmdSpec, COMMANDS};
use lacquer_admin::status;
use lacquer_core::params::{Kind, Params, PARAMS};

pub(crate) fn unknown() -> Reply {
    Reply::with(
        status::UNKNOWN,
        "Unknown request.\nType 'help' for more info.\n",
    )
}

pub(crate) fn banner() -> String {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!(
        "-----------------------------\nLacquer CLI 1.0\n-----------------------------\n\
         {},{},{},-smalloc\nlacquer-{}\n\n\
         Type 'help' for command list.\nType 'quit' to close CLI session.\n",
        std::env::consts::OS,
        release.trim(),
        std::env::consts::ARCH,
        lacquer_core::VERSION
    )
}

impl Mgmt {
    /// Runs one authenticated command.
    pub(crate) fn execute(&self, args: &[String]) -> Reply {
        let Some(spec) = find(&args[0]) else {
            return unknown();
        };
        let n = args.len() - 1;
        if n < spec.min {
            return Reply::with(status::TOOFEW, "Too few parameters\n");
        }
        if spec.max.is_some_and(|max| n > max) {
            return Reply::with(status::TOOMANY, "Too many parameters\n");
        }
        let json = args.get(1).is_some_and(|a| a == "-j");
        match spec.cmd {
            Cmd::Auth => Reply::ok(banner()),
            Cmd::Banner => Reply::ok(banner()),
            Cmd::Help => help(args),
            Cmd::DebugClusterCut => self.cluster_cut(&args[1]),
            Cmd::DebugWorkerStall => self.stall_worker(&args[1], &args[2]),
            Cmd::DebugXid => match args.get(1) {
                None => Reply::ok(format!("XID is {}", lacquer_core::ids::peek())),
                Some(v) => match v.parse::<u64>() {
                    Ok(n) => {
                        lacquer_core::ids::set_next(n);
                        Reply::ok(format!("XID is {n}"))
                    }
                    Err(_) => Reply::with(status::PARAM, format!("Bad xid \"{v}\"\n")),
                },
            },
            Cmd::Ping | Cmd::Pid | Cmd::Status => self.about(spec.cmd, json, args),
            Cmd::Quit => Reply {
                status: status::CLOSE,
                body: "Closing CLI connection".to_string(),
                close: true,
            },
            Cmd::Start if self.registry_is_empty() => Reply::with(status::CANT, "No VCL available"),
            Cmd::Start => match self.start_accepting() {
                Ok(true) => Reply::ok(""),
                Ok(false) => Reply::with(status::CANT, "Child in state running"),
                Err(e) => Reply::with(status::CANT, e),
            },
            Cmd::Stop => {
                if self.stop() {
                    Reply::ok("")
                } else {
                    Reply::with(status::CANT, "Child in state stopped")
                }
            }
            Cmd::ParamShow => self.param_show(args),
            Cmd::ParamSet => {
                let rest = if json { &args[2..] } else { &args[1..] };
                if rest.len() != 2 {
                    return Reply::with(status::TOOFEW, "Too few parameters\n");
                }
                self.param_set(&rest[0], &rest[1])
            }
            Cmd::ParamReset => {
                let spec = Params::lookup(&args[1]).map(|(_, s)| s);
                match spec {
                    None => {
                        Reply::with(status::PARAM, format!("Unknown parameter \"{}\".", args[1]))
                    }
                    Some(spec) => self.param_set(&args[1], spec.default),
                }
            }
            Cmd::PanicShow | Cmd::PanicClear => panic_command(spec.cmd, json, args),
            Cmd::StorageList => self.storage_list(json, args),
            Cmd::TlsCertCommit
            | Cmd::TlsCertDiscard
            | Cmd::TlsCertList
            | Cmd::TlsCertLoad
            | Cmd::TlsCertReload
            | Cmd::TlsCertRollback => self.tls_cert(spec.cmd, json, args),
            Cmd::ClusterList => self.cluster_list(json, args),
            Cmd::Ban => self.ban(args),
            Cmd::BanList => self.ban_list(json, args),
            Cmd::XkeyPurge | Cmd::XkeySoftpurge => {
                let soft = spec.cmd == Cmd::XkeySoftpurge;
                let tags = args[1..].join(" ");
                let n = crate::host::purge::by_tags(&self.sh, tags.as_bytes(), soft);
                let verb = if soft { "Soft-purged" } else { "Purged" };
                let reach = self.spread(Invalidation::Tags { tags, soft });
                Reply::ok(format!("{verb} {n} objects{}\n", on_nodes(reach)))
            }
            Cmd::VclLoad => self.vcl_load(
                &args[1],
                VclSource::File(args[2].clone().into()),
                args.get(3),
            ),
            Cmd::VclInline => {
                self.vcl_load(&args[1], VclSource::Inline(args[2].clone()), args.get(3))
            }
            Cmd::VclUse => self.vcl_use(&args[1]),
            Cmd::VclLabel => self.vcl_label(&args[1], &args[2]),
            Cmd::VclDiscard => self.vcl_discard(&args[1..]),
            Cmd::VclList => self.vcl_list(json, args),
            Cmd::VclDeps => self.vcl_deps(json, args),
            Cmd::VclSymtab => self.vcl_symtab(),
            Cmd::VclShow => self.vcl_show(args),
            Cmd::VclState => self.vcl_state(&args[1], &args[2]),
            Cmd::BackendList => self.backend_list(args),
            Cmd::BackendSetHealth => self.backend_set_health(&args[1], &args[2]),
        }
    }

    /// `ping`, `pid` and `status`: what the process says of itself.
    fn about(&self, cmd: Cmd, json: bool, args: &[String]) -> Reply {
        match cmd {
            Cmd::Ping => {
                let pong = format!("PONG {} 1.0", lacquer_core::time::now() as u64);
                if json {
                    Reply::ok(format!(
                        "{} {}\n]\n",
                        json::head(2, args),
                        json::string(&pong)
                    ))
                } else {
                    Reply::ok(pong)
                }
            }
            Cmd::Pid => {
                let pid = std::process::id();
                if json {
                    Reply::ok(format!(
                        "{} {{\"master\": {pid}, \"worker\": {pid}}}\n]\n",
                        json::head(2, args)
                    ))
                } else {
                    Reply::ok(format!("Master: {pid:>10}\nWorker: {pid:>10}\n"))
                }
            }
            Cmd::Status => {
                let state = if self.running() { "running" } else { "stopped" };
                if json {
                    Reply::ok(format!(
                        "{} {}\n]\n",
                        json::head(2, args),
                        json::string(state)
                    ))
                } else {
                    Reply::ok(format!("Child in state {state}"))
                }
            }
            _ => unknown(),
        }
    }

    /// Sends an invalidation made here to every other node of the
    /// cluster and waits for their answers (a command runs where it may
    /// block); None outside a cluster.
    fn spread(&self, inv: Invalidation) -> Option<Reach> {
        self.sh.cluster.as_ref()?;
        let rt = tokio::runtime::Handle::try_current().ok()?;
        tokio::task::block_in_place(|| rt.block_on(spread::everywhere(&self.sh, inv)))
    }

    /// `ban`: a ban added from the CLI's words.
    fn ban(&self, args: &[String]) -> Reply {
        let words: Vec<&str> = args[1..].iter().map(String::as_str).collect();
        match lacquer_cache::ban::BanSpec::parse(&words) {
            Ok(spec) => {
                let now = lacquer_core::time::now();
                let expr = spec.text().to_string();
                self.sh
                    .cache
                    .bans()
                    .add(spec, now, self.sh.params.ban_dups());
                match self.spread(Invalidation::Ban { expr }) {
                    Some(reach) => Reply::ok(format!("Ban applied on {reach} nodes\n")),
                    None => Reply::ok(""),
                }
            }
            Err(e) => Reply::with(status::PARAM, e),
        }
    }

    /// `debug.worker.stall <worker> <seconds>`: blocks the worker's
    /// thread, from a task of its own.
    fn stall_worker(&self, worker: &str, seconds: &str) -> Reply {
        let handles = self.workers.handles();
        let Some(handle) = worker.parse::<usize>().ok().and_then(|i| handles.get(i)) else {
            let last = handles.len() - 1;
            return Reply::with(
                status::PARAM,
                format!("Expected a worker from 0 to {last}\n"),
            );
        };
        let Some(hold) = seconds
            .parse::<f64>()
            .ok()
            .filter(|s| (0.0..=60.0).contains(s))
        else {
            return Reply::with(status::PARAM, "Expected seconds from 0 to 60\n");
        };
        // Answered once the worker holds: what the caller does next
        // meets a stalled worker.
        let (held, holding) = std::sync::mpsc::channel();
        handle.spawn(async move {
            let _ = held.send(());
            std::thread::sleep(Params::duration(hold));
        });
        match holding.recv_timeout(std::time::Duration::from_secs(5)) {
            Ok(()) => Reply::ok(""),
            Err(_) => Reply::with(status::CANT, "The worker did not take the task\n"),
        }
    }

    fn param_set(&self, name: &str, value: &str) -> Reply {
        if self.read_only.iter().any(|n| n == name) {
            return Reply::with(
                status::AUTH,
                format!("parameter \"{name}\" is protected.\n"),
            );
        }
        if name == "vsl_mask" {
            // Checked, then applied to the mask in force.
            if let Err(e) = self.sh.params.set(name, value) {
                return param_reply(name, value, Err(e));
            }
            return match crate::host::vsl::set_mask(&self.sh.params, value) {
                Ok(()) => Reply::ok(""),
                Err(e) => Reply::with(status::PARAM, e),
            };
        }
        let set = self.sh.params.set(name, value);
        if set.is_ok() && name == "pcre2_match_limit" {
            lacquer_core::regex::set_match_limit(self.sh.params.pcre2_match_limit() as usize);
        }
        param_reply(name, value, set)
    }

    fn param_show(&self, args: &[String]) -> Reply {
        let mut long = false;
        let mut json_out = false;
        let mut what = None;
        for a in &args[1..] {
            match a.as_str() {
                "-l" => long = true,
                "-j" => json_out = true,
                _ if what.is_none() => what = Some(a.as_str()),
                _ => return Reply::with(status::TOOMANY, "Too many parameters\n"),
            }
        }
        if long && json_out {
            return Reply::with(status::PARAM, "-l and -j cannot both be given\n");
        }
        let p = &self.sh.params;
        let selected: Vec<usize> = match what {
            None => (0..PARAMS.len()).collect(),
            Some("changed") => (0..PARAMS.len()).filter(|&i| !p.is_default(i)).collect(),
            Some(name) => match Params::lookup(name) {
                Some((i, _)) => {
                    long = true;
                    vec![i]
                }
                None => {
                    return Reply::with(status::PARAM, format!("Unknown parameter \"{name}\"."))
                }
            },
        };
        if json_out {
            let items: Vec<String> = selected.iter().map(|&i| param_json(p, i)).collect();
            let body = if items.is_empty() {
                "\n]\n".to_string()
            } else {
                format!("\n{}\n]\n", items.join(",\n"))
            };
            return Reply::ok(format!("{}{body}", json::head(2, args)));
        }
        let mut out = String::new();
        for i in selected {
            if long {
                param_long(&mut out, p, i);
            } else {
                out.push_str(&format!("{:<29} {}\n", PARAMS[i].name, value_shown(p, i)));
            }
        }
        Reply::ok(out)
    }

    fn ban_list(&self, json_out: bool, args: &[String]) -> Reply {
        if args.len() == 2 && !json_out {
            return Reply::with(status::PARAM, format!("Unknown option {}\n", args[1]));
        }
        let bans = self.sh.cache.bans();
        if !json_out {
            return Reply::ok(bans.list_text());
        }
        let items: Vec<String> = bans
            .list()
            .iter()
            .map(|b| {
                format!(
                    "  {{\n    \"time\": {:.6},\n    \"refs\": {},\n    \"completed\": {},\n    \"spec\": {}\n  }}",
                    b.time,
                    b.refs,
                    b.completed,
                    json::string(&b.spec)
                )
            })
            .collect();
        Reply::ok(json::items(2, args, &items))
    }

    fn storage_list(&self, json_out: bool, args: &[String]) -> Reply {
        if args.len() > 1 && !json_out {
            return Reply::with(status::TOOMANY, "Too many parameters\n");
        }
        let cache = &self.sh.cache;
        let stores: Vec<(&str, &str)> = cache
            .stores()
            .iter()
            .chain([cache.transient()])
            .map(|s| (s.name(), s.engine().kind()))
            .collect();
        if json_out {
            // Named as varnishd names them here: without `storage.`.
            let items: Vec<String> = stores
                .iter()
                .map(|(name, kind)| {
                    format!(
                        "  {{\"name\": {}, \"storage\": {}}}",
                        json::string(name),
                        json::string(kind)
                    )
                })
                .collect();
            return Reply::ok(json::items(2, args, &items));
        }
        let mut out = "Storage devices:\n".to_string();
        for (name, kind) in stores {
            out.push_str(&format!("\tstorage.{name} = {kind}\n"));
        }
        Reply::ok(out)
    }
}

/// The answer to setting `name` to `value`.
fn param_reply(
    name: &str,
    value: &str,
    result: Result<(), lacquer_core::params::ParamError>,
) -> Reply {
    use lacquer_core::params::ParamError;
    match result {
        Ok(()) => Reply::ok(""),
        Err(ParamError::Unknown(_)) => {
            Reply::with(status::PARAM, format!("Unknown parameter \"{name}\"."))
        }
        Err(ParamError::Invalid { reason, .. }) => Reply::with(
            status::PARAM,
            format!("{reason}\n\n(attempting to set param '{name}' to '{value}')"),
        ),
    }
}

fn help(args: &[String]) -> Reply {
    let json_out = args.get(1).is_some_and(|a| a == "-j");
    let topic = args[1..].iter().find(|a| *a != "-j");
    let selected: Vec<&CmdSpec> = match topic {
        Some(name) => match find(name) {
            Some(c) => vec![c],
            None => return unknown(),
        },
        None => COMMANDS.iter().collect(),
    };
    if json_out {
        let items: Vec<String> = selected
            .iter()
            .map(|c| {
                format!(
                    "  {{\"request\": {}, \"syntax\": {}, \"help\": {}, \"minarg\": {}, \"maxarg\": {}}}",
                    json::string(c.name),
                    json::string(c.syntax),
                    json::string(c.help),
                    c.min,
                    c.max.map_or(-1, |m| m as i64)
                )
            })
            .collect();
        return Reply::ok(json::items(2, args, &items));
    }
    let mut out = String::new();
    if let (Some(_), [c]) = (topic, selected.as_slice()) {
        out.push_str(&format!("{}\n{}\n", c.syntax, c.help));
    } else {
        for c in selected {
            out.push_str(c.syntax);
            out.push('\n');
        }
    }
    Reply::ok(out)
}

fn units_shown(i: usize) -> &'static str {
    match PARAMS[i].kind {
        Kind::Bool => "bool",
        _ => PARAMS[i].units,
    }
}

fn value_shown(p: &Params, i: usize) -> String {
    let mut v = p.show_index(i);
    let units = units_shown(i);
    if !units.is_empty() {
        v.push_str(&format!(" [{units}]"));
    }
    if p.is_default(i) {
        v.push_str(" (default)");
    }
    v
}

fn param_long(out: &mut String, p: &Params, i: usize) {
    let spec = &PARAMS[i];
    out.push_str(spec.name);
    out.push('\n');
    out.push_str(&format!("        Value is: {}\n", value_shown(p, i)));
    if !p.is_default(i) {
        out.push_str(&format!("        Default is: {}\n", spec.default_shown()));
    }
    if let Some(min) = spec.min {
        out.push_str(&format!("        Minimum is: {}\n", spec.bound_shown(min)));
    }
    if let Some(max) = spec.max {
        out.push_str(&format!("        Maximum is: {}\n", spec.bound_shown(max)));
    }
    out.push('\n');
    let mut line = String::new();
    for word in spec.doc.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > 64 {
            out.push_str(&format!("        {line}\n"));
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        out.push_str(&format!("        {line}\n"));
    }
    out.push('\n');
}

fn param_json(p: &Params, i: usize) -> String {
    let spec = &PARAMS[i];
    // As varnishd: the value typed, a bound only where there is one.
    let bound = |name: &str, b: Option<&str>| {
        b.map_or(String::new(), |b| {
            format!("    \"{name}\": {},\n", json::string(&spec.bound_shown(b)))
        })
    };
    format!(
        "  {{\n    \"name\": {},\n    \"implemented\": true,\n    \"value\": {},\n    \"units\": {},\n    \"default\": {},\n{}{}    \"description\": {}\n  }}",
        json::string(spec.name),
        p.json_value(i),
        json::string(units_shown(i)),
        json::string(&spec.default_shown()),
        bound("minimum", spec.min),
        bound("maximum", spec.max),
        json::string(spec.doc)
    )
}

pub(crate) fn http_date(t: f64) -> String {
    lacquer_core::time::http_date(t)
}

/// `panic.show` and `panic.clear`: the last panic a worker had.
fn panic_command(cmd: Cmd, json: bool, args: &[String]) -> Reply {
    match cmd {
        Cmd::PanicShow => match crate::daemon::panics::last() {
            None => Reply::with(
                status::CANT,
                "Child has not panicked or panic has been cleared",
            ),
            Some((when, text)) if json => Reply::ok(format!(
                "{} {}\n]\n",
                json::head(2, args),
                json::string(&format!("Panic at: {}\n{text}", http_date(when)))
            )),
            Some((when, text)) => Reply::ok(format!("Panic at: {}\n{text}", http_date(when))),
        },
        Cmd::PanicClear => {
            if args.len() == 2 && args[1] != "-z" {
                return Reply::with(status::PARAM, format!("Unknown option {}\n", args[1]));
            }
            if crate::daemon::panics::clear() {
                Reply::ok("")
            } else {
                Reply::with(status::CANT, "No panic to clear")
            }
        }
        _ => unknown(),
    }
}

/// How far a cluster invalidation went, as a reply says it.
fn on_nodes(reach: Option<Reach>) -> String {
    reach.map_or(String::new(), |r| format!(" on {r} nodes"))
}
