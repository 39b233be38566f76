//! The counters as the metrics endpoint and the dashboard read them: every
//! counter now, from the same tables and values the counters segment is
//! published from, so no exporter is needed. The endpoint itself
//! (`--metrics host:port`, `GET /metrics`) is served by the dashboard's
//! small HTTP server, without the dashboard's routes.

use crate::Shared;
use lacquer_shm::counters::Snapshot;

/// Every counter now: `MAIN`, then the daemon's sections.
pub(crate) fn snapshot(sh: &Shared) -> Snapshot {
    let mut snap = Snapshot::main();
    crate::daemon::add_sections(sh, &mut snap);
    snap
}
