//! The `lacquer serve` command line, read the way varnishd reads its own:
//! every option of varnishd 7 (`-a -b -C -d -E -F -f -h -I -i -j -l -M -n
//! -P -p -r -S -s -T -t -V -W -x`), and the old init scripts' `-u`, `-g`
//! (answered with their modern form) and `-w` (mapped to the thread pool
//! parameters). Every mistake is one clear line and exit status 2.

pub use crate::daemon::listen::{parse_listen, ListenAddrs, ListenSpec, TlsUse, UnixSpec};
pub use crate::daemon::store_spec::{parse_storage, StoreKind, StoreSpec, DEFAULT_STORE_SIZE};
use lacquer_core::params::Params;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;

macro_rules! serve_options {
    ($( $opt:ident = $flag:literal, $value:literal, $usage:literal; )*) => {
        /// One option of `lacquer serve`, so that reading them is an
        /// exhaustive `match`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum ServeOption {
            $( $opt, )*
        }

        /// Every `lacquer serve` option: its letter, whether it takes a
        /// value, and how the usage text writes it.
        pub const SERVE_OPTIONS: &[(char, ServeOption, bool, &str)] = &[
            $( ($flag, ServeOption::$opt, $value, $usage), )*
        ];
    };
}

serve_options! {
    Listen = 'a', true, "[-a [name=][address][:port|/path][,HTTP|,PROXY|,HTTPS][,user=U][,group=G][,mode=M]]";
    Backend = 'b', true, "[-b host[:port]]";
    VclFile = 'f', true, "[-f file.vcl]...";
    CompileOnly = 'C', false, "[-C]";
    Stopped = 'd', false, "[-d]";
    Workdir = 'n', true, "[-n workdir]";
    Storage = 's', true, "[-s [name=]malloc[,size]]";
    DefaultTtl = 't', true, "[-t default_ttl]";
    Param = 'p', true, "[-p param=value]";
    Identity = 'i', true, "[-i identity]";
    PidFile = 'P', true, "[-P pidfile]";
    Foreground = 'F', false, "[-F]";
    Version = 'V', false, "[-V]";
    Describe = 'x', true, "[-x parameter|vsl|cli|builtin|optstring|counters|vcl]";
    Management = 'T', true, "[-T address[:port] | -T none]";
    Secret = 'S', true, "[-S secretfile | -S none]";
    Jail = 'j', true, "[-j unix[,user=U][,workuser=W][,ccgroup=G] | -j none]";
    LogSpace = 'l', true, "[-l vsl_space]";
    Hash = 'h', true, "[-h critbit|simple_list|classic[,buckets]]";
    Waiter = 'W', true, "[-W epoll|poll]";
    CliFile = 'I', true, "[-I clifile]";
    ReverseCli = 'M', true, "[-M address:port]";
    ReadOnly = 'r', true, "[-r param[,param...]]";
    Extension = 'E', true, "[-E extension]";
    OldUser = 'u', true, "[-u user (now -j unix,user=)]";
    OldGroup = 'g', true, "[-g group (now -j unix,ccgroup=)]";
    OldThreads = 'w', true, "[-w min[,max[,timeout]]]";
    TlsConf = 'A', true, "[-A tls.conf]";
}

/// What `-x` describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Describe {
    Parameters,
    LogTags,
    Commands,
    BuiltinVcl,
    OptString,
    /// Lacquer's: the counters.
    Counters,
    /// Lacquer's: the VCL variables.
    VclVariables,
}

/// `-j`: who the daemon runs as once its sockets are bound.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Jail {
    /// No `-j`: as `-j unix` when started as root, else as it was started.
    #[default]
    Default,
    /// `-j unix`: the user that serves clients (`workuser=`, else
    /// `user=`); None looks for `lacquer`, then `varnish`.
    Unix { user: Option<String> },
    /// `-j none`: stay who the daemon was started as, root included.
    None,
}

/// The users a jail without `user=` becomes, in the order they are
/// looked for: the package's, then Varnish's.
pub const JAIL_USERS: [&str; 2] = ["lacquer", "varnish"];

impl Jail {
    /// The user to become, for a daemon whose effective user id is
    /// `euid`, where `exists` says whether a user name is known to the
    /// system. None: stay as started. Root with no user to become is an
    /// error: nobody should serve the network as root by accident.
    pub fn user_to_become(
        &self,
        euid: u32,
        exists: impl Fn(&str) -> bool,
    ) -> Result<Option<String>, String> {
        let named = match self {
            Jail::None => return Ok(None),
            Jail::Unix { user: Some(u) } => return Ok(Some(u.clone())),
            Jail::Unix { user: None } | Jail::Default if euid != 0 => return Ok(None),
            Jail::Unix { user: None } | Jail::Default => JAIL_USERS.iter().find(|u| exists(u)),
        };
        match named {
            Some(u) => Ok(Some(u.to_string())),
            None => Err(format!(
                "Running as root, and neither user \"{}\" nor \"{}\" exists to serve as: \
                 make one (the package makes \"{}\"), name one with -j unix,user=NAME, \
                 or keep root with -j none",
                JAIL_USERS[0], JAIL_USERS[1], JAIL_USERS[0]
            )),
        }
    }
}

/// Parses `-j unix[,user=U][,workuser=W][,ccgroup=G]` or `-j none`.
pub fn parse_jail(spec: &str) -> Result<Jail, String> {
    let mut parts = spec.split(',');
    match parts.next() {
        Some("none") if spec == "none" => return Ok(Jail::None),
        Some("unix") => {}
        _ => return Err(format!("-j {spec}: unknown jail (use unix or none)")),
    }
    let (mut user, mut workuser) = (None, None);
    for part in parts {
        match part.split_once('=') {
            Some(("user", u)) if !u.is_empty() => user = Some(u.to_string()),
            Some(("workuser", u)) if !u.is_empty() => workuser = Some(u.to_string()),
            // No compiler runs here: the group that would reach one has
            // nothing to do.
            Some(("ccgroup", g)) if !g.is_empty() => {}
            _ => return Err(format!("-j {spec}: unknown jail option \"{part}\"")),
        }
    }
    Ok(Jail::Unix {
        user: workuser.or(user),
    })
}

/// The getopt string of `lacquer serve`, as `-x optstring` prints it.
pub fn optstring() -> String {
    SERVE_OPTIONS
        .iter()
        .map(|(flag, _, value, _)| {
            if *value {
                format!("{flag}:")
            } else {
                flag.to_string()
            }
        })
        .collect()
}

/// The usage lines of `lacquer serve`, from [`SERVE_OPTIONS`].
pub fn serve_usage() -> String {
    let mut out = String::from("usage: lacquer serve");
    let mut width = out.len();
    let items = SERVE_OPTIONS.iter().map(|o| o.3).chain([
        "[--metrics address:port]",
        "[--dashboard address:port]",
        "[--dashboard-secret file]",
        "[--cluster-bind address:port]",
        "[--cluster-join address:port[,...] | dns:name[:port] | srv:name]",
        "[--cluster-secret file]",
        "[--cluster-dns address:port]",
    ]);
    for item in items {
        if width + 1 + item.len() > 78 {
            out.push_str("\n                    ");
            width = 20;
        }
        out.push(' ');
        out.push_str(item);
        width += 1 + item.len();
    }
    out
}

/// The backend from `-b`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendSpec {
    /// As written, for display and the default `Host`.
    pub endpoint: String,
    pub host: String,
    pub addr: SocketAddr,
}

/// Everything `serve` was told.
pub struct ServeConfig {
    pub listens: Vec<ListenSpec>,
    /// The VCL program: `-f file`, or the one `-b` stands for; `None`
    /// only with `-d`, where the first program comes through the CLI.
    pub vcl: Option<crate::VclSource>,
    /// `-d`: start stopped, accepting clients only after the CLI's `start`
    /// (how varnishtest drives varnishd). The management CLI is on `-T`.
    pub start_stopped: bool,
    pub workdir: PathBuf,
    pub stores: Vec<StoreSpec>,
    pub transient_budget: Option<u64>,
    pub params: Params,
    pub identity: String,
    pub pid_file: Option<PathBuf>,
    /// `-T`: where the management interface listens; `None` for `-T none`.
    pub mgmt_listen: Option<Vec<SocketAddr>>,
    pub secret: SecretSpec,
    /// `--metrics host:port`: where `/metrics` is served (Lacquer only).
    pub metrics_listen: Vec<SocketAddr>,
    /// `--dashboard host:port`: where the live dashboard is served
    /// (Lacquer only).
    pub dashboard_listen: Vec<SocketAddr>,
    /// `--dashboard-secret file`: the dashboard may act (ban, purge a
    /// tag, set a backend's health, switch programs) for a page that
    /// proves it knows this file (Lacquer only).
    pub dashboard_secret: Option<PathBuf>,
    /// `-j unix`: who to become once the sockets are bound.
    pub jail: Jail,
    /// `-I`: management commands run before the first client is served.
    pub cli_file: Option<PathBuf>,
    /// `-M`: where to offer the management interface by connecting out.
    pub reverse_cli: Option<String>,
    /// `-r`: parameters `param.set` may not change.
    pub read_only: Vec<String>,
    /// The `-f` files before the last, loaded as `boot0`, `boot1`, ….
    pub earlier_vcls: Vec<PathBuf>,
    /// `-f ""`: clients are served once a program is active (after `-I`).
    pub wait_for_program: bool,
    /// `-A`: TLS frontends and certificates, in Hitch's syntax.
    pub tls_file: Option<PathBuf>,
    /// `--cluster-*`: the cluster the daemon joins (Lacquer only).
    pub cluster: Option<super::cluster::ClusterSpec>,
}

/// `-S`: how management clients prove who they are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretSpec {
    /// No `-S`: a random secret is written to `_.secret` in the work
    /// directory, as varnishd does.
    Generate,
    /// `-S none`: no authentication.
    Disabled,
    /// `-S file`.
    File(PathBuf),
}

/// What the command line asks for.
pub enum ServeAction {
    Run(Box<ServeConfig>),
    /// `-C`: compile the VCL, report, exit.
    Compile(Box<ServeConfig>),
    /// `-x parameter|vsl|cli|builtin|optstring`: print a table.
    Describe(Describe),
    /// `-V`.
    Version,
}

/// The management address when `-T` is not given, as varnishd's.
pub const DEFAULT_MGMT: &str = "localhost:0";

/// Parses `-T address[:port]`; a missing port is 0 (any free port).
pub fn parse_mgmt(spec: &str) -> Result<Option<Vec<SocketAddr>>, String> {
    if spec == "none" {
        return Ok(None);
    }
    resolve("-T", spec, "localhost", Some(0)).map(Some)
}

/// Parses `--metrics host:port` (`:port` for every address).
pub fn parse_metrics(spec: &str) -> Result<Vec<SocketAddr>, String> {
    resolve("--metrics", spec, "0.0.0.0", None)
}

/// Resolves `host[:port]` for an option, with the host and port it
/// stands for when left out (`None`: the port is required).
fn resolve(
    option: &str,
    spec: &str,
    default_host: &str,
    default_port: Option<u16>,
) -> Result<Vec<SocketAddr>, String> {
    let (host, port) = split_host_port(spec).map_err(|e| format!("{option} {spec}: {e}"))?;
    let port = match (port, default_port) {
        (Some(p), _) => parse_port(&p, spec).map_err(|e| format!("{option} {e}"))?,
        (None, Some(p)) => p,
        (None, None) => return Err(format!("{option} {spec}: a port is needed")),
    };
    let host = if host.is_empty() { default_host } else { &host };
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|_| format!("{option} {spec}: cannot resolve \"{host}\""))?
        .collect();
    if addrs.is_empty() {
        return Err(format!("{option} {spec}: \"{host}\" has no address"));
    }
    Ok(addrs)
}

/// The default size of a malloc store.
impl ServeConfig {
    /// The names of the `-s` stores (Transient aside).
    pub fn store_names(&self) -> Vec<String> {
        self.stores.iter().map(|s| s.name.clone()).collect()
    }
}

pub use lacquer_core::host::default_workdir;
use lacquer_core::host::{hostname, split_host_port};

pub(crate) fn parse_port(p: &str, whole: &str) -> Result<u16, String> {
    match p {
        "http" => Ok(80),
        "https" => Ok(443),
        _ => p
            .parse::<u16>()
            .map_err(|_| format!("invalid port \"{p}\" in \"{whole}\"")),
    }
}

/// Parses `-b host[:port]`.
pub fn parse_backend(spec: &str) -> Result<BackendSpec, String> {
    let (host, port) = split_host_port(spec).map_err(|e| format!("-b {spec}: {e}"))?;
    if host.is_empty() {
        return Err(format!("-b {spec}: no host given"));
    }
    let port = match port {
        Some(p) => parse_port(&p, spec).map_err(|e| format!("-b {e}"))?,
        None => 80,
    };
    let addr = (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|_| format!("-b {spec}: cannot resolve \"{host}\""))?
        .next()
        .ok_or_else(|| format!("-b {spec}: \"{host}\" has no address"))?;
    Ok(BackendSpec {
        endpoint: spec.to_string(),
        host,
        addr,
    })
}

/// Parses the arguments that follow `lacquer serve`.
pub fn parse_args(args: &[String]) -> Result<ServeAction, String> {
    let mut seen = Args::default();
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        if let Some(long) = arg.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((n, v)) => (n, v.to_string()),
                None if i < args.len() => {
                    i += 1;
                    (long, args[i - 1].clone())
                }
                None => return Err(format!("option --{long} needs a value")),
            };
            seen.long(name, value)?;
            continue;
        }
        let Some(flag) = arg.strip_prefix('-').and_then(|f| f.chars().next()) else {
            return Err(format!("unexpected argument \"{arg}\""));
        };
        let Some(&(_, option, takes_value, _)) = SERVE_OPTIONS.iter().find(|o| o.0 == flag) else {
            return Err(format!("unknown option \"-{flag}\""));
        };
        let value = if takes_value {
            if arg.len() > 2 {
                arg[2..].to_string()
            } else if i < args.len() {
                i += 1;
                args[i - 1].clone()
            } else {
                return Err(format!("option -{flag} needs a value"));
            }
        } else {
            if arg.len() > 2 {
                return Err(format!("unknown option \"{arg}\""));
            }
            String::new()
        };
        if let Some(action) = seen.option(option, value)? {
            return Ok(action);
        }
    }
    seen.finish()
}

/// What `lacquer serve`'s options said, as they are read.
struct Args {
    params: Params,
    listen_specs: Vec<String>,
    backend: Option<BackendSpec>,
    vcl_files: Vec<PathBuf>,
    compile_only: bool,
    start_stopped: bool,
    workdir: Option<PathBuf>,
    stores: Vec<StoreSpec>,
    transient_budget: Option<u64>,
    identity: Option<String>,
    pid_file: Option<PathBuf>,
    mgmt: String,
    secret: SecretSpec,
    metrics_listen: Vec<SocketAddr>,
    dashboard_listen: Vec<SocketAddr>,
    dashboard_secret: Option<PathBuf>,
    jail: Jail,
    cli_file: Option<PathBuf>,
    reverse_cli: Option<String>,
    tls_file: Option<PathBuf>,
    read_only: Vec<String>,
    cluster: super::cluster::ClusterOptions,
}

impl Default for Args {
    fn default() -> Args {
        Args {
            params: Params::default(),
            listen_specs: Vec::new(),
            backend: None,
            vcl_files: Vec::new(),
            compile_only: false,
            start_stopped: false,
            workdir: None,
            stores: Vec::new(),
            transient_budget: None,
            identity: None,
            pid_file: None,
            mgmt: DEFAULT_MGMT.to_string(),
            secret: SecretSpec::Generate,
            metrics_listen: Vec::new(),
            dashboard_listen: Vec::new(),
            dashboard_secret: None,
            jail: Jail::Default,
            cli_file: None,
            reverse_cli: None,
            tls_file: None,
            read_only: Vec::new(),
            cluster: Default::default(),
        }
    }
}

impl Args {
    /// A `--name value` option (Lacquer's own).
    fn long(&mut self, name: &str, value: String) -> Result<(), String> {
        if self.cluster.take(name, &value)? {
            return Ok(());
        }
        match name {
            "metrics" => self.metrics_listen.extend(parse_metrics(&value)?),
            "dashboard-secret" => self.dashboard_secret = Some(PathBuf::from(value)),
            "dashboard" => {
                self.dashboard_listen
                    .extend(resolve("--dashboard", &value, "127.0.0.1", None)?)
            }
            _ => return Err(format!("unknown option \"--{name}\"")),
        }
        Ok(())
    }

    /// One of varnishd's options; `Some` where it asks for something
    /// else than serving (`-V`, `-x`).
    fn option(
        &mut self,
        option: ServeOption,
        value: String,
    ) -> Result<Option<ServeAction>, String> {
        let params = &self.params;
        match option {
            ServeOption::Listen => self.listen_specs.push(value),
            ServeOption::TlsConf => self.tls_file = Some(PathBuf::from(value)),
            ServeOption::Backend => self.backend = Some(parse_backend(&value)?),
            ServeOption::VclFile => self.vcl_files.push(PathBuf::from(value)),
            ServeOption::CompileOnly => self.compile_only = true,
            ServeOption::Stopped => self.start_stopped = true,
            ServeOption::Workdir => self.workdir = Some(PathBuf::from(value)),
            ServeOption::Storage => self.add_store(&value)?,
            ServeOption::DefaultTtl => params
                .set("default_ttl", &value)
                .map_err(|e| format!("-t {value}: {e}"))?,
            ServeOption::Param => params
                .set_pair(&value)
                .map_err(|e| format!("-p {value}: {e}"))?,
            ServeOption::Identity => self.identity = Some(value),
            ServeOption::PidFile => self.pid_file = Some(PathBuf::from(value)),
            ServeOption::Foreground => {}
            ServeOption::Version => return Ok(Some(ServeAction::Version)),
            ServeOption::Describe => return Ok(Some(ServeAction::Describe(describe(&value)?))),
            ServeOption::Jail => self.jail = parse_jail(&value)?,
            ServeOption::LogSpace => {
                // `-l vsl[,vsm[,…]]`: older versions sized more spaces.
                let vsl = value.split(',').next().unwrap_or("");
                params
                    .set("vsl_space", vsl)
                    .map_err(|e| format!("-l {value}: {e}"))?
            }
            ServeOption::Hash => {
                // The cache has one index: any of varnishd's hashes asks
                // for what it gives.
                let kind = value.split(',').next().unwrap_or("");
                if !matches!(kind, "critbit" | "simple_list" | "classic") {
                    return Err(format!(
                        "-h {value}: unknown hash (critbit, simple_list or classic)"
                    ));
                }
            }
            ServeOption::Waiter => {
                if !matches!(value.as_str(), "epoll" | "poll") {
                    return Err(format!(
                        "-W {value}: unknown waiter on this system (epoll or poll)"
                    ));
                }
            }
            ServeOption::CliFile => self.cli_file = Some(PathBuf::from(value)),
            ServeOption::ReverseCli => {
                let (host, port) =
                    split_host_port(&value).map_err(|e| format!("-M {value}: {e}"))?;
                if host.is_empty() || port.is_none() {
                    return Err(format!("-M {value}: give address:port"));
                }
                self.reverse_cli = Some(value)
            }
            ServeOption::ReadOnly => {
                for name in value.split(',').filter(|n| !n.is_empty()) {
                    if params.show(name).is_none() {
                        return Err(format!("-r {value}: unknown parameter \"{name}\""));
                    }
                    self.read_only.push(name.to_string());
                }
            }
            ServeOption::Extension => {
                return Err(format!(
                    "-E {value}: Varnish extensions are shared objects built for varnishd; \
                     Lacquer's vmods are built in and need no -E"
                ))
            }
            ServeOption::OldUser => {
                return Err(format!(
                    "-u {value}: gone since Varnish 4.1: use -j unix,user={value}"
                ))
            }
            ServeOption::OldGroup => {
                return Err(format!(
                    "-g {value}: gone since Varnish 4.1: use -j unix,ccgroup={value}"
                ))
            }
            ServeOption::OldThreads => old_threads(params, &value)?,
            ServeOption::Management => self.mgmt = value,
            ServeOption::Secret => {
                self.secret = match value.as_str() {
                    "none" => SecretSpec::Disabled,
                    path => SecretSpec::File(PathBuf::from(path)),
                }
            }
        }
        Ok(None)
    }

    /// `-s`: a store, or the Transient one's size.
    fn add_store(&mut self, value: &str) -> Result<(), String> {
        let spec = parse_storage(value, self.stores.len())?;
        if spec.name == "Transient" {
            if spec.kind != StoreKind::Malloc {
                return Err(format!("-s {value}: Transient must be malloc"));
            }
            self.transient_budget = Some(spec.budget);
            return Ok(());
        }
        if self.stores.iter().any(|s| s.name == spec.name) {
            return Err(format!(
                "-s {value}: storage \"{}\" defined twice",
                spec.name
            ));
        }
        self.stores.push(spec);
        Ok(())
    }

    /// The configuration the options make, once all are read.
    fn finish(mut self) -> Result<ServeAction, String> {
        // `-f ""` alone: no program yet; one may come from `-I`, and
        // clients are served once one is active.
        let wait_for_program =
            self.vcl_files.len() == 1 && self.vcl_files[0].as_os_str().is_empty();
        if wait_for_program {
            self.vcl_files.clear();
            self.start_stopped = true;
        }
        if self.vcl_files.iter().any(|f| f.as_os_str().is_empty()) {
            return Err("-f \"\" must be the only -f".to_string());
        }
        // Several -f: each is loaded, as boot0, boot1, …; the last is
        // "boot".
        let earlier_vcls = self
            .vcl_files
            .len()
            .checked_sub(1)
            .map(|n| self.vcl_files[..n].to_vec())
            .unwrap_or_default();
        let vcl = match (self.backend, self.vcl_files.pop()) {
            (Some(_), Some(_)) => return Err("only one of -b and -f can be given".to_string()),
            (Some(b), None) => Some(crate::VclSource::Backend {
                host: b.addr.ip().to_string(),
                port: b.addr.port(),
            }),
            (None, Some(f)) => Some(crate::VclSource::File(f)),
            (None, None) if self.start_stopped && !self.compile_only => None,
            (None, None) => {
                return Err("no backend given: use -b host[:port] or -f file.vcl".to_string())
            }
        };
        let listens = listens(&self.listen_specs, self.tls_file.is_some())?;
        if self.stores.is_empty() {
            self.stores.push(StoreSpec {
                name: "s0".to_string(),
                budget: DEFAULT_STORE_SIZE,
                kind: StoreKind::Malloc,
            });
        }
        if self.dashboard_secret.is_some() && self.dashboard_listen.is_empty() {
            return Err("--dashboard-secret needs --dashboard address:port".into());
        }
        let cfg = Box::new(ServeConfig {
            listens,
            vcl,
            start_stopped: self.start_stopped,
            workdir: self.workdir.unwrap_or_else(default_workdir),
            stores: self.stores,
            transient_budget: self.transient_budget,
            params: self.params,
            identity: self.identity.unwrap_or_else(hostname),
            pid_file: self.pid_file,
            mgmt_listen: parse_mgmt(&self.mgmt)?,
            secret: self.secret,
            metrics_listen: self.metrics_listen,
            dashboard_listen: self.dashboard_listen,
            dashboard_secret: self.dashboard_secret,
            jail: self.jail,
            cli_file: self.cli_file,
            reverse_cli: self.reverse_cli,
            read_only: self.read_only,
            earlier_vcls,
            wait_for_program,
            tls_file: self.tls_file,
            cluster: self.cluster.finish()?,
        });
        Ok(if self.compile_only {
            ServeAction::Compile(cfg)
        } else {
            ServeAction::Run(cfg)
        })
    }
}

/// The listeners `-a` asks for (`:6081` without one): their names each
/// once, and HTTPS only with certificates (`-A`).
fn listens(specs: &[String], have_tls: bool) -> Result<Vec<ListenSpec>, String> {
    let default = [":6081".to_string()];
    let specs = if specs.is_empty() {
        &default[..]
    } else {
        specs
    };
    let listens = specs
        .iter()
        .enumerate()
        .map(|(n, s)| parse_listen(s, n))
        .collect::<Result<Vec<_>, _>>()?;
    let mut names = std::collections::HashSet::new();
    for l in &listens {
        if !names.insert(l.name.clone()) {
            return Err(format!("-a: listen name \"{}\" used twice", l.name));
        }
        if l.tls.is_some() && !have_tls {
            return Err(format!(
                "-a {}: HTTPS needs certificates: give them with -A tls.conf",
                l.name
            ));
        }
    }
    Ok(listens)
}

/// `-x WHAT`: which table to print.
fn describe(what: &str) -> Result<Describe, String> {
    Ok(match what {
        "parameter" => Describe::Parameters,
        "vsl" => Describe::LogTags,
        "cli" => Describe::Commands,
        "builtin" => Describe::BuiltinVcl,
        "optstring" => Describe::OptString,
        "counters" => Describe::Counters,
        "vcl" => Describe::VclVariables,
        other => {
            return Err(format!(
                "-x {other}: one of parameter, vsl, cli, builtin, optstring, counters, vcl"
            ))
        }
    })
}

/// Varnish 2's `-w min[,max[,timeout]]`: the thread pool parameters.
fn old_threads(params: &Params, value: &str) -> Result<(), String> {
    let names = ["thread_pool_min", "thread_pool_max", "thread_pool_timeout"];
    let parts: Vec<&str> = value.split(',').collect();
    if parts.len() > 3 {
        return Err(format!("-w {value}: give min[,max[,timeout]]"));
    }
    for (name, v) in names.iter().zip(parts) {
        params
            .set(name, v)
            .map_err(|e| format!("-w {value}: {name}: {e}"))?;
    }
    Ok(())
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
