//! Runs the health probes of a loaded program's backends, a task each,
//! logging the starting state and every result as `Backend_health`
//! records (vxid 0, as Varnish's). A task ends once its program has been
//! discarded and its backends are gone.

use crate::vcl::Loaded;
use crate::Shared;
use lacquer_shm::{Side, Tag};
use std::sync::Arc;

/// Starts the probes of `loaded`'s backends. Needs a tokio runtime.
pub(crate) fn start(sh: &Arc<Shared>, loaded: &Loaded) {
    for backend in loaded.backends.iter().flatten() {
        let Some(probe) = backend.probe() else {
            continue;
        };
        log(sh, &backend.name, &probe.initial_line());
        let interval = probe.spec.interval.max(std::time::Duration::from_millis(1));
        let weak = Arc::downgrade(backend);
        let sh = sh.clone();
        tokio::spawn(async move {
            loop {
                let Some(backend) = weak.upgrade() else {
                    return;
                };
                if let Some(r) = backend.run_probe().await {
                    log(&sh, &backend.name, &r.line);
                }
                drop(backend);
                tokio::time::sleep(interval).await;
            }
        });
    }
}

fn log(sh: &Shared, name: &str, line: &str) {
    let mut txn = sh.txn(0, Side::None);
    txn.fmt(Tag::Backend_health, format_args!("{name} {line}"));
}
