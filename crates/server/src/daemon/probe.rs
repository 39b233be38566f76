//! Runs the health probes of a loaded program's backends, a task per
//! probe: a probe shared with a program loaded earlier (same address,
//! same definition) is already running and carries its health over.
//! Logs the starting state and every result as `Backend_health` records
//! (vxid 0, as Varnish's), once per backend name. A task ends once every
//! backend following its probe is gone (their programs discarded).

use crate::host::vcl::Loaded;
use crate::Shared;
use lacquer_shm::{Side, Tag};
use std::sync::Arc;

/// Starts the probes of `loaded`'s backends that are not running yet.
/// Needs a tokio runtime.
pub(crate) fn start_probes(sh: &Arc<Shared>, loaded: &Loaded) {
    for backend in loaded.backends.iter().flatten() {
        let Some(probe) = backend.probe() else {
            continue;
        };
        if !probe.claim_start() {
            continue;
        }
        log(sh, &backend.name, &probe.initial_line());
        let interval = probe.spec.interval.max(std::time::Duration::from_millis(1));
        let weak = Arc::downgrade(probe);
        let sh = sh.clone();
        tokio::spawn(async move {
            loop {
                let Some(probe) = weak.upgrade() else {
                    return;
                };
                if !probe.wanted() {
                    // Only cold programs follow it: paused until one warms.
                    drop(probe);
                    tokio::time::sleep(interval).await;
                    continue;
                }
                let recorded = probe.run_once().await;
                let mut names: Vec<String> = probe
                    .followers()
                    .iter()
                    .filter(|b| b.is_warm())
                    .map(|b| b.name.clone())
                    .collect();
                names.sort_unstable();
                names.dedup();
                for name in &names {
                    log(&sh, name, &recorded.line);
                }
                drop(probe);
                tokio::time::sleep(interval).await;
            }
        });
    }
}

fn log(sh: &Shared, name: &str, line: &str) {
    let mut txn = sh.txn(0, Side::None);
    txn.fmt(Tag::Backend_health, format_args!("{name} {line}"));
}
