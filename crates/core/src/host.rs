//! Facts about the machine every command needs alike: the host name and
//! the default work directory (`-n`), where the daemon leaves what its
//! tools read.

use std::path::PathBuf;

/// The machine's host name, or `localhost` when it cannot be read.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

/// The default work directory, per host as varnishd's `-n`:
/// `$TMPDIR/lacquer/<hostname>`.
pub fn default_workdir() -> PathBuf {
    let base = std::env::var_os("TMPDIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    base.join("lacquer").join(hostname())
}
