//! Facts about the machine every command needs alike: the host name, the
//! default work directory (`-n`), where the daemon leaves what its tools
//! read, and how an address with a port is written.

use std::path::{Path, PathBuf};

/// The machine's host name, or `localhost` when it cannot be read.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

/// The environment variables that name the default work directory, as
/// `VARNISH_DEFAULT_N` does for Varnish (Lacquer's first, then Varnish's,
/// so that an operator's environment carries over).
pub const DEFAULT_N_VARIABLES: [&str; 2] = ["LACQUER_DEFAULT_N", "VARNISH_DEFAULT_N"];

/// The packaged daemon's work directory (the package's `-n`).
pub const PACKAGED_WORKDIR: &str = "/var/lib/lacquer";

/// The default work directory of `lacquer serve`, as varnishd's `-n`:
/// the one `LACQUER_DEFAULT_N` (else `VARNISH_DEFAULT_N`) names, else
/// `$TMPDIR/lacquer/<hostname>`.
pub fn default_workdir() -> PathBuf {
    default_workdir_from(|name| std::env::var_os(name))
}

/// The work directory a tool (log, stat, adm, …) reads without `-n`:
/// the one the environment names, else the packaged daemon's when a
/// live daemon holds it, else `lacquer serve`'s default.
pub fn tool_workdir() -> PathBuf {
    let named = DEFAULT_N_VARIABLES
        .iter()
        .find_map(|v| std::env::var_os(v).filter(|d| !d.is_empty()));
    match named {
        Some(dir) => PathBuf::from(dir),
        None if holds_live_daemon(Path::new(PACKAGED_WORKDIR)) => PathBuf::from(PACKAGED_WORKDIR),
        None => default_workdir(),
    }
}

fn default_workdir_from(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> PathBuf {
    if let Some(dir) = DEFAULT_N_VARIABLES
        .iter()
        .find_map(|v| var(v).filter(|d| !d.is_empty()))
    {
        return PathBuf::from(dir);
    }
    let base = var("TMPDIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    base.join("lacquer").join(hostname())
}

/// Whether a work directory's `_.pid` names a process that is running.
pub fn holds_live_daemon(workdir: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(workdir.join("_.pid")) else {
        return false;
    };
    match text.trim().parse::<u32>() {
        Ok(pid) if pid > 0 => Path::new(&format!("/proc/{pid}")).exists(),
        _ => false,
    }
}

/// Splits an address as varnishd's options and VCL's `.host` write it:
/// `host:port`, `[v6]:port`, `:port`, `host port` or `host` (a bare IPv6
/// address, with its several colons, names no port).
pub fn split_host_port(s: &str) -> Result<(String, Option<String>), String> {
    if let Some(rest) = s.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or_else(|| format!("missing ']' in \"{s}\""))?;
        let port = match after {
            "" => None,
            p => Some(
                p.strip_prefix(':')
                    .ok_or_else(|| format!("invalid address \"{s}\""))?
                    .to_string(),
            ),
        };
        return Ok((host.to_string(), port));
    }
    if let Some((host, port)) = s.split_once(' ') {
        return Ok((host.to_string(), Some(port.trim().to_string())));
    }
    match s.rsplit_once(':') {
        Some((host, _)) if host.contains(':') => Ok((s.to_string(), None)),
        Some((host, port)) => Ok((host.to_string(), Some(port.to_string()))),
        None => Ok((s.to_string(), None)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_names_the_default_work_directory() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| std::ffi::OsString::from(v))
            }
        };
        assert_eq!(
            default_workdir_from(env(&[("TMPDIR", "/t")])),
            Path::new("/t/lacquer").join(hostname())
        );
        assert_eq!(
            default_workdir_from(env(&[("VARNISH_DEFAULT_N", "/v"), ("TMPDIR", "/t")])),
            Path::new("/v")
        );
        assert_eq!(
            default_workdir_from(env(&[
                ("VARNISH_DEFAULT_N", "/v"),
                ("LACQUER_DEFAULT_N", "/l")
            ])),
            Path::new("/l")
        );
        // Empty is unset.
        assert_eq!(
            default_workdir_from(env(&[("LACQUER_DEFAULT_N", ""), ("TMPDIR", "/t")])),
            Path::new("/t/lacquer").join(hostname())
        );
    }

    #[test]
    fn a_live_daemon_is_told_from_a_dead_one_by_its_pid() {
        let dir = std::env::temp_dir().join(format!("lacquer-live-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert!(!holds_live_daemon(&dir));
        std::fs::write(dir.join("_.pid"), format!("{}\n", std::process::id())).unwrap();
        assert!(holds_live_daemon(&dir));
        std::fs::write(dir.join("_.pid"), "4294967\n").unwrap();
        assert!(!holds_live_daemon(&dir));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn addresses_split_into_host_and_port() {
        let split = |s| {
            let (h, p) = split_host_port(s).unwrap();
            format!("{h}|{}", p.unwrap_or_default())
        };
        assert_eq!(split("127.0.0.1:8080"), "127.0.0.1|8080");
        assert_eq!(split("example.com 81"), "example.com|81");
        assert_eq!(split("[::1]:8080"), "::1|8080");
        assert_eq!(split("[::1]"), "::1|");
        assert_eq!(split("::1"), "::1|");
        assert_eq!(split(":6081"), "|6081");
        assert_eq!(split("localhost"), "localhost|");
        assert!(split_host_port("[::1").is_err());
    }
}
