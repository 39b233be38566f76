//! The commands about loaded programs and their backends: vcl.load,
//! vcl.inline, vcl.use, vcl.discard, vcl.list, vcl.deps, vcl.symtab,
//! vcl.show, vcl.state, backend.list and backend.set_health.

use super::{json, text, Mgmt, Reply};
use crate::host::vcl::{Loaded, VclEntry, VclSource, VclState};
use lacquer_admin::status;
use lacquer_backend::{AdminHealth, Backend};
use std::sync::Arc;

use lacquer_core::glob::matches as glob;

/// Why a name cannot name a VCL, if it cannot.
fn bad_name(name: &str) -> Option<String> {
    let mut chars = name.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() => {}
        _ => return Some("VCL name must start with alpha".to_string()),
    }
    chars
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
        .map(|c| format!("Illegal character in VCL name ('{c}')"))
}

/// A `backend.list` or `backend.set_health` pattern as the programs and
/// the names in them it matches: `vcl.name`, or a name (or nothing: every
/// name) in the active program.
pub(super) fn split_pattern(
    reg: &crate::host::vcl::Registry,
    pattern: Option<&str>,
) -> (String, String) {
    match pattern {
        None => (reg.active.clone(), "*".to_string()),
        Some(p) => match p.split_once('.') {
            Some((v, b)) => (v.to_string(), b.to_string()),
            None => (reg.active.clone(), p.to_string()),
        },
    }
}

fn no_such(name: &str) -> Reply {
    Reply::with(status::PARAM, format!("No VCL named {name} known\n"))
}

impl Mgmt {
    pub(super) fn registry(&self) -> std::sync::MutexGuard<'_, crate::host::vcl::Registry> {
        self.sh.vcls.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn vcl_load(&self, name: &str, source: VclSource, state: Option<&String>) -> Reply {
        if let Some(e) = bad_name(name) {
            return Reply::with(status::PARAM, e);
        }
        let state = match state.map(|s| VclState::parse(s)) {
            None => VclState::Auto,
            Some(Some(s)) => s,
            Some(None) => {
                return Reply::with(status::PARAM, "State must be one of auto, cold or warm.")
            }
        };
        if self.registry().find(name).is_some() {
            return Reply::with(status::PARAM, format!("Already a VCL named {name}"));
        }
        // max_vcl: past it, a warning (max_vcl_handling=1) or a refusal (2).
        let loaded_now = self.registry().entries.len() as u64;
        let mut too_many = String::new();
        let (max, handling) = (self.sh.params.max_vcl(), self.sh.params.max_vcl_handling());
        if handling != 0 && loaded_now >= max {
            if handling == 2 {
                return Reply::with(
                    status::CANT,
                    format!(
                        "Too many ({max}) VCLs already loaded\n(See max_vcl and max_vcl_handling parameters)\n"
                    ),
                );
            }
            too_many = "Remember to vcl.discard the old/unused VCLs.\n(See max_vcl and max_vcl_handling parameters)\n".to_string();
        }
        let stores = self.sh.cache.stores().iter();
        let names = stores.map(|s| s.name().to_string()).collect();
        let labels = self.registry().label_names();
        let program = match source.compile(&self.sh.params, names, labels) {
            Ok(p) => p,
            Err(e) => return Reply::with(status::PARAM, e),
        };
        let mut warnings: String = program
            .warnings
            .iter()
            .map(|w| format!("Warning: {w}\n"))
            .collect();
        warnings.push_str(&too_many);
        let sh = &self.sh;
        let loaded = match Loaded::new(name, program, &sh.params, sh.cache.bans(), &sh.probes) {
            Ok(l) => Arc::new(l),
            Err(e) => return Reply::with(status::PARAM, format!("vcl_init failed: {e}\n")),
        };
        let mut reg = self.registry();
        if reg.find(name).is_some() {
            return Reply::with(status::PARAM, format!("Already a VCL named {name}"));
        }
        if reg.active.is_empty() {
            // The first program of a daemon started without one.
            self.sh.active.set(loaded.clone());
            reg.active = name.to_string();
        }
        reg.entries.push(VclEntry {
            loaded: loaded.clone(),
            state,
        });
        // Counted first, so that a program loaded cold starts no probe.
        reg.count();
        crate::daemon::probe::start_probes(&self.sh, &loaded);
        Reply::ok(warnings)
    }

    /// `vcl.label LABEL PROGRAM`: makes or moves a label.
    pub(super) fn vcl_label(&self, label: &str, target: &str) -> Reply {
        if let Some(e) = bad_name(label) {
            return Reply::with(status::PARAM, e);
        }
        let mut reg = self.registry();
        if reg.find(label).is_some() {
            return Reply::with(
                status::PARAM,
                format!("{label} is a VCL program, not a label"),
            );
        }
        if reg.labels.iter().any(|(l, _)| l == target) {
            return Reply::with(status::PARAM, "VCL labels cannot point to labels");
        }
        if reg.find(target).is_none() {
            return no_such(target);
        }
        match reg.labels.iter_mut().find(|(l, _)| l == label) {
            Some(slot) => slot.1 = target.to_string(),
            None => reg.labels.push((label.to_string(), target.to_string())),
        }
        reg.count();
        Reply::ok("")
    }

    pub(super) fn vcl_use(&self, name: &str) -> Reply {
        let mut reg = self.registry();
        // A label stands for its program.
        let name = match reg.labels.iter().find(|(l, _)| l == name) {
            Some((_, target)) => target.clone(),
            None => name.to_string(),
        };
        let name = name.as_str();
        let Some(entry) = reg.entries.iter_mut().find(|e| e.loaded.name == name) else {
            return no_such(name);
        };
        if entry.state == VclState::Cold {
            entry.state = VclState::Auto;
        }
        let loaded = entry.loaded.clone();
        self.sh.active.set(loaded);
        reg.active = name.to_string();
        reg.count();
        Reply::ok(format!("VCL '{name}' now active"))
    }

    pub(super) fn vcl_discard(&self, patterns: &[String]) -> Reply {
        let mut reg = self.registry();
        let mut doomed = Vec::new();
        for pat in patterns {
            let labels: Vec<String> = reg
                .labels
                .iter()
                .map(|(l, _)| l.clone())
                .filter(|l| glob(pat, l))
                .collect();
            let matched: Vec<String> = reg
                .entries
                .iter()
                .map(|e| e.loaded.name.clone())
                .filter(|n| glob(pat, n))
                .collect();
            if matched.is_empty() && labels.is_empty() {
                return Reply::with(status::PARAM, format!("No VCL name matches {pat}\n"));
            }
            if let Some((l, t)) = reg
                .labels
                .iter()
                .find(|(l, t)| matched.contains(t) && !labels.contains(l))
            {
                return Reply::with(
                    status::CANT,
                    format!("Cannot discard labeled VCL program {t} (label {l})\n"),
                );
            }
            for l in &labels {
                let users: Vec<&str> = reg
                    .entries
                    .iter()
                    .filter(|e| e.loaded.program.labels_used.contains(l))
                    .map(|e| e.loaded.name.as_str())
                    .collect();
                if !users.is_empty() {
                    return Reply::with(
                        status::CANT,
                        format!(
                            "Cannot discard VCL label {l}, other VCLs depend on it:\n\t{}\n",
                            users.join("\n\t")
                        ),
                    );
                }
            }
            reg.labels.retain(|(l, _)| !labels.contains(l));
            if let Some(active) = matched.iter().find(|n| **n == reg.active) {
                return Reply::with(
                    status::CANT,
                    format!("Cannot discard active VCL program {active}\n"),
                );
            }
            doomed.extend(matched);
        }
        // Requests still running the program keep it alive until they end.
        reg.entries.retain(|e| !doomed.contains(&e.loaded.name));
        reg.count();
        Reply::ok("")
    }

    pub(super) fn vcl_list(&self, json_out: bool, args: &[String]) -> Reply {
        let reg = self.registry();
        let rows: Vec<(&str, &str, &str, usize, &str)> = reg
            .entries
            .iter()
            .map(|e| {
                let active = e.loaded.name == reg.active;
                // Held by the registry and, when active, by the switch;
                // every other holder is a request or fetch still running it.
                let busy = Arc::strong_count(&e.loaded) - 1 - usize::from(active);
                let temp = if e.state == VclState::Cold && !active {
                    "cold"
                } else {
                    "warm"
                };
                let status = if active { "active" } else { "available" };
                (status, e.state.name(), temp, busy, e.loaded.name.as_str())
            })
            .collect();
        let label_rows: Vec<String> = reg
            .labels
            .iter()
            .map(|(l, t)| format!("{l} -> {t}"))
            .collect();
        let rows: Vec<(&str, &str, &str, usize, &str)> = rows
            .into_iter()
            .chain(
                label_rows
                    .iter()
                    .map(|r| ("available", "label", "warm", 0, r.as_str())),
            )
            .collect();
        if json_out {
            let items: Vec<String> = rows
                .iter()
                .map(|(st, state, temp, busy, name)| {
                    format!(
                        "  {{\n    \"status\": \"{st}\",\n    \"state\": \"{state}\",\n    \"temperature\": \"{temp}\",\n    \"busy\": {busy},\n    \"name\": {}\n}}",
                        json::string(name)
                    )
                })
                .collect();
            return Reply::ok(json::items(2, args, &items));
        }
        let w = rows.iter().map(|r| r.0.len()).max().unwrap_or(0) + 3;
        let mut out = String::new();
        for (st, state, temp, busy, name) in rows {
            out.push_str(&format!(
                "{st:<w$}{state:<8}{temp:<4}{busy:>10}    {name}\n"
            ));
        }
        Reply::ok(out)
    }

    /// Every program and label with what it depends on: the labels a
    /// program's `return (vcl(…))` names, the program a label names.
    fn dependencies(&self) -> Vec<(String, Vec<String>)> {
        let reg = self.registry();
        let programs = reg
            .entries
            .iter()
            .map(|e| (e.loaded.name.clone(), e.loaded.program.labels_used.clone()));
        let labels = reg.labels.iter().map(|(l, t)| (l.clone(), vec![t.clone()]));
        programs.chain(labels).collect()
    }

    pub(super) fn vcl_deps(&self, json_out: bool, args: &[String]) -> Reply {
        let deps = self.dependencies();
        if json_out {
            let items: Vec<String> = deps
                .iter()
                .map(|(name, on)| {
                    let on: Vec<String> = on.iter().map(|d| json::string(d)).collect();
                    let on = match on.is_empty() {
                        true => "[]".to_string(),
                        false => format!("[\n      {}\n    ]", on.join(",\n      ")),
                    };
                    format!(
                        "  {{\n    \"name\": {},\n    \"deps\": {on}\n  }}",
                        json::string(name)
                    )
                })
                .collect();
            return Reply::ok(json::items(1, args, &items));
        }
        let mut rows = Vec::new();
        for (name, on) in &deps {
            if on.is_empty() {
                rows.push(vec![name.as_str()]);
            }
            for d in on {
                rows.push(vec![name.as_str(), d.as_str()]);
            }
        }
        Reply::ok(text::table(&rows))
    }

    /// What each program and label imports from (depends on) and exports
    /// to (is depended on by). varnishd adds its compiler's symbol table,
    /// which has no counterpart here.
    pub(super) fn vcl_symtab(&self) -> Reply {
        let deps = self.dependencies();
        let labels: Vec<String> = self
            .registry()
            .labels
            .iter()
            .map(|(l, _)| l.clone())
            .collect();
        let mut out = String::new();
        for (name, on) in &deps {
            let kind = if labels.contains(name) {
                "Label"
            } else {
                "Vcl"
            };
            out.push_str(&format!("{kind}: {name}\n"));
            if !on.is_empty() {
                out.push_str("  imports from:\n");
                for d in on {
                    out.push_str(&format!("    {d}\n"));
                }
            }
            let users: Vec<&str> = deps
                .iter()
                .filter(|(_, on)| on.contains(name))
                .map(|(n, _)| n.as_str())
                .collect();
            if !users.is_empty() {
                out.push_str("  exports to:\n");
                for u in users {
                    out.push_str(&format!("    {u}\n"));
                }
            }
        }
        Reply::ok(out)
    }

    pub(super) fn vcl_show(&self, args: &[String]) -> Reply {
        let verbose = args.get(1).is_some_and(|a| a == "-v");
        let rest = &args[1 + usize::from(verbose)..];
        if rest.len() > 1 {
            return Reply::with(status::TOOMANY, "Too many parameters\n");
        }
        let reg = self.registry();
        let name = rest.first().cloned().unwrap_or_else(|| reg.active.clone());
        let Some(entry) = reg.find(&name) else {
            return Reply::with(status::PARAM, format!("No VCL named '{name}'"));
        };
        let sources = &entry.loaded.program.sources;
        if !verbose {
            return Reply::ok(sources.first().map_or(String::new(), |s| s.text.clone()));
        }
        let mut out = String::new();
        for (i, s) in sources.iter().enumerate() {
            out.push_str(&format!(
                "// VCL.SHOW {i} {} {}\n{}\n",
                s.text.len(),
                s.name,
                s.text
            ));
        }
        Reply::ok(out)
    }

    pub(super) fn vcl_state(&self, name: &str, state: &str) -> Reply {
        let Some(state) = VclState::parse(state) else {
            return Reply::with(status::PARAM, "State must be one of auto, cold or warm.");
        };
        let mut reg = self.registry();
        let active = reg.active.clone();
        let Some(entry) = reg.entries.iter_mut().find(|e| e.loaded.name == name) else {
            return no_such(name);
        };
        if state == VclState::Cold && entry.loaded.name == active {
            return Reply::with(status::CANT, "Cannot set the active VCL cold.\n");
        }
        entry.state = state;
        reg.count();
        Reply::ok("")
    }

    /// Backends matching `vcl.backend` or `backend` (in the active VCL).
    pub(super) fn matching_backends(&self, pattern: Option<&str>) -> Vec<(String, Arc<Backend>)> {
        let reg = self.registry();
        let (vcl_pat, be_pat) = split_pattern(&reg, pattern);
        let mut out = Vec::new();
        for e in &reg.entries {
            if !glob(&vcl_pat, &e.loaded.name) {
                continue;
            }
            for b in e.loaded.backends.iter().flatten() {
                if glob(&be_pat, &b.name) {
                    out.push((format!("{}.{}", e.loaded.name, b.name), b.clone()));
                }
            }
        }
        out
    }

    pub(super) fn backend_set_health(&self, pattern: &str, state: &str) -> Reply {
        let Some(health) = AdminHealth::parse(state) else {
            return Reply::with(status::PARAM, format!("Invalid state {state}\n"));
        };
        let backends = self.matching_backends(Some(pattern));
        if backends.is_empty() {
            return Reply::with(status::PARAM, "No Backends matches\n");
        }
        for (_, b) in backends {
            b.set_admin_health(health);
        }
        Reply::ok("")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vcl_names() {
        assert!(bad_name("v2").is_none());
        assert!(bad_name("boot_1-x").is_none());
        assert_eq!(
            bad_name("bad-name!").unwrap(),
            "Illegal character in VCL name ('!')"
        );
        assert!(bad_name("2x").is_some());
        assert!(bad_name("").is_some());
    }
}
