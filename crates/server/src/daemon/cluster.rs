//! A daemon in a cluster: the `--cluster-bind`, `--cluster-join`,
//! `--cluster-secret` and `--cluster-dns` options, and the start of its membership once its
//! listeners are bound (it tells its peers where they send it requests:
//! its first plain HTTP listener).

use lacquer_cluster::{Cluster, Config, Seed};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

/// The `--cluster-*` options as they are read.
#[derive(Debug, Clone, Default)]
pub struct ClusterOptions {
    bind: Option<SocketAddr>,
    join: Vec<Seed>,
    secret: Option<PathBuf>,
    dns: Option<SocketAddr>,
}

/// How the daemon joins its cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterSpec {
    /// Where it speaks SWIM (UDP).
    pub bind: SocketAddr,
    /// Where it looks for the others (none: it starts the cluster).
    pub join: Vec<Seed>,
    /// The file of the secret every node shares.
    pub secret: PathBuf,
    /// The DNS server its `dns:` and `srv:` seeds are asked.
    pub dns: Option<SocketAddr>,
}

impl ClusterOptions {
    /// Takes `--NAME VALUE` if it is one of the cluster's; false if not.
    pub fn take(&mut self, name: &str, value: &str) -> Result<bool, String> {
        match name {
            "cluster-bind" => {
                let addr = value
                    .parse()
                    .map_err(|_| format!("--cluster-bind {value}: not ADDR:PORT"))?;
                self.bind = Some(addr);
            }
            "cluster-join" => self.join.extend(Seed::parse_list(value)?),
            "cluster-secret" => self.secret = Some(PathBuf::from(value)),
            "cluster-dns" => {
                let addr = value
                    .parse()
                    .map_err(|_| format!("--cluster-dns {value}: not ADDR:PORT"))?;
                self.dns = Some(addr);
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// What they ask for together: none without `--cluster-bind`, which
    /// needs a secret (every cluster message is authenticated).
    pub fn finish(self) -> Result<Option<ClusterSpec>, String> {
        let Some(bind) = self.bind else {
            if !self.join.is_empty() || self.secret.is_some() || self.dns.is_some() {
                return Err(
                    "--cluster-join, --cluster-secret and --cluster-dns need --cluster-bind".into(),
                );
            }
            return Ok(None);
        };
        let Some(secret) = self.secret else {
            return Err("--cluster-bind needs --cluster-secret FILE: cluster messages are authenticated with it".into());
        };
        Ok(Some(ClusterSpec {
            bind,
            join: self.join,
            secret,
            dns: self.dns,
        }))
    }
}

/// Starts the daemon's membership: `identity` its name on the ring,
/// `http` its first plain HTTP listener's address (where its peers send
/// requests).
pub(crate) fn start(
    spec: &ClusterSpec,
    identity: &str,
    http: Option<SocketAddr>,
    replicas: u32,
) -> Result<Arc<Cluster>, String> {
    let secret = std::fs::read(&spec.secret)
        .map_err(|e| format!("--cluster-secret {}: {e}", spec.secret.display()))?;
    if secret.is_empty() {
        return Err(format!(
            "--cluster-secret {}: the file is empty",
            spec.secret.display()
        ));
    }
    let http = advertised(http, spec.bind)?;
    Cluster::start(Config {
        name: identity.to_string(),
        bind: spec.bind,
        http,
        join: spec.join.clone(),
        secret,
        replicas,
        dns: spec.dns,
    })
    .map_err(|e| format!("--cluster-bind {}: {e}", spec.bind))
}

/// Where peers send requests: the first plain HTTP listener, at the
/// cluster address's host when it listens on every address.
fn advertised(http: Option<SocketAddr>, bind: SocketAddr) -> Result<SocketAddr, String> {
    let http = http.ok_or("a cluster needs a plain HTTP listener (-a host:port) for its peers")?;
    if !http.ip().is_unspecified() {
        return Ok(http);
    }
    if bind.ip().is_unspecified() {
        return Err(format!(
            "-a {http} and --cluster-bind {bind} name no address the peers can reach: give one of them the node's own"
        ));
    }
    Ok(SocketAddr::new(bind.ip(), http.port()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_options_go_together() {
        assert_eq!(ClusterOptions::default().finish(), Ok(None));
        let mut o = ClusterOptions::default();
        assert_eq!(o.take("metrics", "x"), Ok(false));
        assert_eq!(o.take("cluster-join", "127.0.0.1:7000"), Ok(true));
        assert!(o.clone().finish().is_err());
        o.take("cluster-bind", "127.0.0.1:7001").unwrap();
        assert!(o.clone().finish().unwrap_err().contains("--cluster-secret"));
        o.take("cluster-secret", "/etc/lacquer/cluster").unwrap();
        let spec = o.finish().unwrap().unwrap();
        assert_eq!(spec.bind, "127.0.0.1:7001".parse().unwrap());
        assert_eq!(spec.join.len(), 1);
        assert!(ClusterOptions::default()
            .take("cluster-bind", "nowhere")
            .is_err());
    }
}
