//! Facts about the machine every command needs alike: the host name, the
//! default work directory (`-n`), where the daemon leaves what its tools
//! read, and how an address with a port is written.

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
    use super::split_host_port;

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
