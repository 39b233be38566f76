//! The client listeners of `-a`: reading the option, binding them (TCP,
//! a socket for each worker, or a Unix domain socket given its owner and
//! mode), and the accept loops, one on each worker, that hand each
//! connection, with the addresses VCL will see, to a session on the
//! worker that accepted it.

use crate::daemon::balance;
use crate::daemon::config::parse_port;
use crate::daemon::workers::Workers;
use crate::session;
use crate::transport::io::{ClientStream, SessAddrs};
use crate::transport::sockopt;
use crate::Shared;
use lacquer_core::counters::{Counter, COUNTERS};
use lacquer_core::host::split_host_port;
use lacquer_core::params::Params;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::net::SocketAddr;
use std::net::ToSocketAddrs;
use std::sync::Arc;
use std::time::Duration;

/// A listening endpoint from `-a`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenSpec {
    pub name: String,
    /// The address as written (`:81`, `/run/lacquer.sock`): what VCL's
    /// `local.endpoint` says.
    pub endpoint: String,
    pub addrs: ListenAddrs,
    /// `PROXY`: every connection starts with a PROXY protocol header.
    pub proxy: bool,
    /// Connections speak TLS: `HTTPS` (the `-A` file's global
    /// certificates), or one of its frontends.
    pub tls: Option<TlsUse>,
}

/// Which certificates and settings a TLS listener takes from `-A`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsUse {
    /// `-a host:port,HTTPS`: the file's global ones.
    Global,
    /// The file's frontend of this index.
    Frontend(usize),
}

/// Where a listener binds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenAddrs {
    Tcp(Vec<SocketAddr>),
    /// A Unix domain socket (a path, or `@name` in the abstract
    /// namespace), with the owner and mode its file is given.
    Unix(UnixSpec),
}

/// A Unix domain socket listener's path and permissions.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UnixSpec {
    pub path: String,
    pub user: Option<String>,
    pub group: Option<String>,
    /// `mode=` in octal; only read and write bits mean anything.
    pub mode: Option<u32>,
}

/// Parses one `-a [name=]address[:port][,PROTO][,user=U][,group=G][,mode=M]`,
/// the address a host and port or the absolute path of a Unix socket.
pub fn parse_listen(spec: &str, index: usize) -> Result<ListenSpec, String> {
    let (name, rest) = match spec.split_once('=') {
        Some((n, r)) if !n.is_empty() && !n.contains([':', '/', ',', '@']) => (n.to_string(), r),
        _ => (format!("a{index}"), spec),
    };
    let mut parts = rest.split(',');
    let endpoint = parts.next().unwrap_or("");
    let unix = endpoint.starts_with('/') || endpoint.starts_with('@');
    let mut proxy = false;
    let mut tls = None;
    let mut unix_spec = UnixSpec {
        path: endpoint.to_string(),
        ..UnixSpec::default()
    };
    for extra in parts {
        let (key, value) = match extra.split_once('=') {
            Some((k, v)) => (k.to_ascii_lowercase(), Some(v)),
            None => (extra.to_ascii_uppercase(), None),
        };
        match (key.as_str(), value) {
            ("HTTP" | "HTTP/1", None) => {}
            ("PROXY", None) => proxy = true,
            ("HTTPS", None) if unix => {
                return Err(format!("-a {spec}: HTTPS is for TCP listeners"))
            }
            ("HTTPS", None) => tls = Some(TlsUse::Global),
            ("user" | "group" | "mode", Some(_)) if !unix => {
                return Err(format!("-a {spec}: {key}= is only for Unix domain sockets"))
            }
            ("user" | "group", Some("")) => return Err(format!("-a {spec}: {key}= needs a name")),
            ("user", Some(v)) => unix_spec.user = Some(v.to_string()),
            ("group", Some(v)) => unix_spec.group = Some(v.to_string()),
            ("mode", Some(v)) => {
                let mode = u32::from_str_radix(v, 8)
                    .ok()
                    .filter(|m| *m <= 0o777)
                    .ok_or_else(|| {
                        format!("-a {spec}: invalid mode \"{v}\" (octal, at most 777)")
                    })?;
                if endpoint.starts_with('@') {
                    return Err(format!(
                        "-a {spec}: mode= cannot apply to an abstract socket"
                    ));
                }
                unix_spec.mode = Some(mode);
            }
            _ => return Err(format!("-a {spec}: unknown protocol or option \"{extra}\"")),
        }
    }
    if unix {
        if endpoint.len() < 2 || endpoint.len() > 107 {
            return Err(format!(
                "-a {spec}: a Unix socket path must have 1 to 106 characters after its first"
            ));
        }
        return Ok(ListenSpec {
            name,
            endpoint: endpoint.to_string(),
            addrs: ListenAddrs::Unix(unix_spec),
            proxy,
            tls,
        });
    }
    let (host, port) = split_host_port(endpoint).map_err(|e| format!("-a {spec}: {e}"))?;
    let port = match port {
        Some(p) => parse_port(&p, spec).map_err(|e| format!("-a {e}"))?,
        None => 80,
    };
    let addrs: Vec<SocketAddr> = if host.is_empty() {
        vec![
            SocketAddr::from(([0, 0, 0, 0], port)),
            SocketAddr::from(([0u16; 8], port)),
        ]
    } else {
        (host.as_str(), port)
            .to_socket_addrs()
            .map_err(|_| format!("-a {spec}: cannot resolve \"{host}\""))?
            .collect()
    };
    if addrs.is_empty() {
        return Err(format!("-a {spec}: \"{host}\" has no address"));
    }
    Ok(ListenSpec {
        name,
        endpoint: endpoint.to_string(),
        addrs: ListenAddrs::Tcp(addrs),
        proxy,
        tls,
    })
}

/// A bound client listener.
pub(crate) struct Listener {
    pub socket: Bound,
    /// `local.socket`: the `-a` name.
    pub name: Arc<str>,
    /// `local.endpoint`: the address as `-a` wrote it.
    pub endpoint: Arc<str>,
    /// Connections start with a PROXY header.
    pub proxy: bool,
    /// Connections speak TLS (set once the `-A` file is read).
    pub tls: Option<Arc<crate::transport::tls::TlsListener>>,
    /// The UDP sockets its QUIC endpoints speak on (HTTP/3), bound to the
    /// same address, where its TLS settings say `quic = on`: one for each
    /// worker where the kernel can steer datagrams by connection ID
    /// (`session::h3::steer`), else one; none without QUIC.
    pub quic: Vec<std::net::UdpSocket>,
    /// Its QUIC endpoints, once it has accepted, one a socket: made
    /// once, since their connections outlive a `stop` (another endpoint
    /// on a socket would take some of their datagrams).
    pub quic_endpoints: std::sync::Mutex<Vec<quinn::Endpoint>>,
}

/// The socket of a listener.
pub(crate) enum Bound {
    /// A socket for each worker, all bound to one address
    /// (`SO_REUSEPORT` where there are several).
    Tcp(Vec<std::net::TcpListener>, SocketAddr),
    /// One socket, which every worker accepts on.
    Unix(std::os::unix::net::UnixListener, String),
}

/// The address of the first listener that speaks plain HTTP over TCP
/// (no TLS, no PROXY header): where a cluster's peers reach this node.
pub(crate) fn first_plain_http(listeners: &[Listener]) -> Option<SocketAddr> {
    listeners
        .iter()
        .filter(|l| l.tls.is_none() && !l.proxy)
        .find_map(|l| match &l.socket {
            Bound::Tcp(_, addr) => Some(*addr),
            Bound::Unix(..) => None,
        })
}

impl Listener {
    /// How the daemon reports it at start: `name ip port`, or `name path -`
    /// for a Unix socket (the form the test runner reads).
    pub fn describe(&self) -> String {
        match &self.socket {
            Bound::Tcp(_, a) => format!("{} {} {}", self.name, a.ip(), a.port()),
            Bound::Unix(_, path) => format!("{} {path} -", self.name),
        }
    }

    /// Binds the UDP sockets of its QUIC endpoints at its TCP address, one
    /// for each worker (as its TCP sockets) where they can be steered.
    pub fn bind_quic(&mut self) -> Result<(), String> {
        let Bound::Tcp(sockets, addr) = &self.socket else {
            return Err(format!("{}: QUIC needs an IP address", self.name));
        };
        self.quic = crate::session::h3::steer::bind_group(*addr, sockets.len())
            .map_err(|e| format!("Cannot bind QUIC on {} ({addr}): {e}", self.name))?;
        Ok(())
    }

    /// Starts accepting on every worker, each on a duplicate of its
    /// socket (the originals stay bound while accepting is stopped).
    pub fn spawn_accepting(
        &self,
        sh: &Arc<Shared>,
        workers: &Workers,
    ) -> Result<Vec<tokio::task::JoinHandle<()>>, String> {
        let fail = |e: std::io::Error| format!("Cannot start: {e}");
        let max_age = sh.params.h3_alt_svc_max_age();
        let alt_svc =
            match (self.quic.first(), &self.socket) {
                (Some(_), Bound::Tcp(_, addr)) if max_age > 0.0 => Some(bytes::Bytes::from(
                    format!("h3=\":{}\"; ma={}", addr.port(), max_age.round() as u64),
                )),
                _ => None,
            };
        let info = Info {
            name: self.name.clone(),
            endpoint: self.endpoint.clone(),
            proxy: self.proxy,
            tls: self.tls.clone(),
            alt_svc,
        };
        let mut tasks = Vec::with_capacity(workers.len() + 1);
        let taken = Arc::new(balance::Taken::new(workers.len()));
        for (i, rt) in workers.handles().iter().enumerate() {
            // Registered with this worker's own reactor.
            let _guard = rt.enter();
            tasks.push(match &self.socket {
                Bound::Tcp(sockets, local) => {
                    let Some(socket) = sockets.get(i) else {
                        break;
                    };
                    let l =
                        sockopt::watch_listener(socket.try_clone().map_err(fail)?).map_err(fail)?;
                    // Deferred before the daemon says it is up, not when
                    // the task first runs: a connection that comes in
                    // between is held back as later ones are.
                    let mut deferring = None;
                    follow_accept_filter(&l, sh.params.accept_filter(), &mut deferring);
                    let taken = balance::TakenBy::new(&taken, i);
                    rt.spawn(accept_tcp(
                        sh.clone(),
                        l,
                        *local,
                        info.clone(),
                        deferring,
                        taken,
                    ))
                }
                Bound::Unix(l, _) => {
                    let l = tokio::net::UnixListener::from_std(l.try_clone().map_err(fail)?)
                        .map_err(fail)?;
                    rt.spawn(accept_unix(sh.clone(), l, info.clone()))
                }
            });
        }
        // Connections a worker leaves waiting go to the others
        // (`daemon::balance`), watched from the control runtime.
        if let Bound::Tcp(sockets, local) = &self.socket {
            if sockets.len() > 1 {
                let sockets = sockets
                    .iter()
                    .map(std::net::TcpListener::try_clone)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(fail)?;
                let (daemon, info, local) = (sh.clone(), info.clone(), *local);
                let start: balance::Start = Arc::new(move |stream, peer| {
                    serve_accepted(&daemon, stream, peer, local, &info, &mut None);
                });
                let watch = balance::Watch::new(sockets, taken, start, workers);
                tasks.push(tokio::spawn(balance::watch(sh.clone(), watch)));
            }
        }
        // QUIC: an endpoint for each socket, on the worker of the same
        // index, whose connections stay there; or one endpoint, on the
        // first worker, whose connections go to every worker in turn.
        if let (false, Some(tls)) = (
            self.quic.is_empty(),
            self.tls.as_ref().and_then(|t| t.quic.clone()),
        ) {
            let config = crate::session::h3::server_config(tls, &sh.params)?;
            let mut made = self
                .quic_endpoints
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if made.is_empty() {
                // All or none: a socket of the group with no endpoint
                // would swallow the datagrams steered to it (endpoints
                // made before a failure end as they are dropped here).
                let steered = self.quic.len() > 1;
                let mut all = Vec::with_capacity(self.quic.len());
                for (i, (socket, rt)) in self.quic.iter().zip(workers.handles()).enumerate() {
                    let _guard = rt.enter();
                    let worker = steered.then_some(i as u8);
                    let socket = socket.try_clone().map_err(fail)?;
                    all.push(crate::session::h3::endpoint(
                        socket,
                        config.clone(),
                        worker,
                    )?);
                }
                crate::session::h3::keep(&all);
                *made = all;
            } else {
                for endpoint in made.iter() {
                    endpoint.set_server_config(Some(config.clone()));
                }
            }
            let spread = match made.len() {
                1 => workers.handles().to_vec(),
                _ => Vec::new(),
            };
            for (endpoint, rt) in made.iter().zip(workers.handles()) {
                tasks.push(rt.spawn(crate::session::h3::serve_endpoint(
                    sh.clone(),
                    endpoint.clone(),
                    made.len(),
                    self.name.clone(),
                    self.endpoint.clone(),
                    spread.clone(),
                )));
            }
        }
        Ok(tasks)
    }
}

/// What a listener tells each of its sessions.
#[derive(Clone)]
struct Info {
    name: Arc<str>,
    endpoint: Arc<str>,
    proxy: bool,
    tls: Option<Arc<crate::transport::tls::TlsListener>>,
    /// The `Alt-Svc` field of its responses (where it speaks HTTP/3 too).
    alt_svc: Option<bytes::Bytes>,
}

/// Binds a TCP address with Lacquer's socket options.
pub(crate) fn bind_tcp(addr: SocketAddr, backlog: i32) -> std::io::Result<std::net::TcpListener> {
    bind_tcp_shared(addr, backlog, false)
}

/// Binds `count` sockets to one TCP address, one for each worker: the
/// first as asked (port 0 gets its port there), the others to the same
/// address, with `SO_REUSEPORT` so that the kernel spreads connections
/// over them.
pub(crate) fn bind_tcp_group(
    addr: SocketAddr,
    backlog: i32,
    count: usize,
) -> std::io::Result<Vec<std::net::TcpListener>> {
    let shared = count > 1;
    if shared && addr.port() != 0 {
        // Sockets with SO_REUSEPORT of one user share a port: another
        // daemon already there (a second `lacquer serve` on the same
        // `-a`) would be joined, and the traffic split between the two,
        // where a plain bind fails. Asked plainly first, it fails here
        // too; the probe is closed before the group binds.
        drop(bind_tcp_shared(addr, backlog, false)?);
    }
    let first = bind_tcp_shared(addr, backlog, shared)?;
    let local = first.local_addr()?;
    let mut sockets = vec![first];
    for _ in 1..count {
        sockets.push(bind_tcp_shared(local, backlog, shared)?);
    }
    Ok(sockets)
}

fn bind_tcp_shared(
    addr: SocketAddr,
    backlog: i32,
    reuse_port: bool,
) -> std::io::Result<std::net::TcpListener> {
    let domain = if addr.is_ipv6() {
        Domain::IPV6
    } else {
        Domain::IPV4
    };
    let socket = Socket::new(domain, Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    if reuse_port {
        socket.set_reuse_port(true)?;
    }
    // Accepted connections inherit it where the kernel lets them (the
    // accept loop checks once), saving a system call per connection.
    socket.set_nodelay(true)?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.bind(&addr.into())?;
    socket.listen(backlog)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// Binds a Unix socket: a stale socket file at the path is replaced,
/// any other file is left alone (and binding fails); then the file gets
/// the owner and mode asked for.
fn bind_unix(spec: &UnixSpec, backlog: i32) -> Result<std::os::unix::net::UnixListener, String> {
    let err = |e: std::io::Error| format!("{e}");
    let addr = match spec.path.strip_prefix('@') {
        // The abstract namespace: a name, no file.
        Some(name) => SockAddr::unix(format!("\0{name}")).map_err(err)?,
        None => {
            use std::os::unix::fs::FileTypeExt;
            if let Ok(meta) = std::fs::symlink_metadata(&spec.path) {
                if !meta.file_type().is_socket() {
                    return Err("a file that is not a socket is in the way".into());
                }
                std::fs::remove_file(&spec.path).map_err(err)?;
            }
            SockAddr::unix(&spec.path).map_err(err)?
        }
    };
    let socket = Socket::new(Domain::UNIX, Type::STREAM, None).map_err(err)?;
    socket.bind(&addr).map_err(err)?;
    socket.listen(backlog).map_err(err)?;
    socket.set_nonblocking(true).map_err(err)?;
    if !spec.path.starts_with('@') {
        set_owner(spec)?;
    }
    Ok(socket.into())
}

/// Gives a Unix socket's file the `user=`, `group=` and `mode=` of `-a`.
fn set_owner(spec: &UnixSpec) -> Result<(), String> {
    let uid = match &spec.user {
        Some(u) => Some(
            sockopt::user_by_name(u)
                .map_err(|e| format!("user={u}: {e}"))?
                .uid,
        ),
        None => None,
    };
    let gid = match &spec.group {
        Some(g) => Some(sockopt::group_by_name(g).map_err(|e| format!("group={g}: {e}"))?),
        None => None,
    };
    if uid.is_some() || gid.is_some() {
        std::os::unix::fs::chown(&spec.path, uid, gid)
            .map_err(|e| format!("cannot change the owner of {}: {e}", spec.path))?;
    }
    if let Some(mode) = spec.mode {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&spec.path, std::fs::Permissions::from_mode(mode))
            .map_err(|e| format!("cannot set the mode of {}: {e}", spec.path))?;
    }
    Ok(())
}

/// Binds every `-a` endpoint, a TCP one with a socket for each of
/// `workers`. The wildcard IPv6 address of a `:port` endpoint is skipped
/// quietly where the machine has no IPv6.
pub(crate) fn bind_all(
    specs: &[ListenSpec],
    backlog: i32,
    workers: usize,
) -> Result<Vec<Listener>, String> {
    let mut out = Vec::new();
    for spec in specs {
        let listener = |socket| Listener {
            socket,
            name: Arc::from(spec.name.as_str()),
            endpoint: Arc::from(spec.endpoint.as_str()),
            proxy: spec.proxy,
            tls: None,
            quic: Vec::new(),
            quic_endpoints: std::sync::Mutex::new(Vec::new()),
        };
        match &spec.addrs {
            ListenAddrs::Unix(u) => {
                let l = bind_unix(u, backlog)
                    .map_err(|e| format!("Could not bind to {} (-a {}): {e}", u.path, spec.name))?;
                out.push(listener(Bound::Unix(l, u.path.clone())));
            }
            ListenAddrs::Tcp(addrs) => {
                let mut bound_any = false;
                for (i, addr) in addrs.iter().enumerate() {
                    match bind_tcp_group(*addr, backlog, workers) {
                        Ok(sockets) => {
                            let local = sockets[0].local_addr().map_err(|e| e.to_string())?;
                            out.push(listener(Bound::Tcp(sockets, local)));
                            bound_any = true;
                        }
                        Err(_)
                            if i > 0
                                && bound_any
                                && addr.is_ipv6()
                                && addr.ip().is_unspecified() => {}
                        Err(e) => {
                            return Err(format!("Could not bind to {addr} (-a {}): {e}", spec.name))
                        }
                    }
                }
            }
        }
    }
    Ok(out)
}

/// Counts a failed accept and pauses briefly rather than spin (out of
/// descriptors, or a connection reset before it was accepted).
async fn accept_failed(e: std::io::Error) {
    COUNTERS.inc(Counter::sess_fail);
    COUNTERS.inc(match e.raw_os_error() {
        Some(libc::ECONNABORTED) => Counter::sess_fail_econnaborted,
        Some(libc::EINTR) => Counter::sess_fail_eintr,
        Some(libc::EMFILE | libc::ENFILE) => Counter::sess_fail_emfile,
        Some(libc::EBADF) => Counter::sess_fail_ebadf,
        Some(libc::ENOMEM | libc::ENOBUFS) => Counter::sess_fail_enomem,
        _ => Counter::sess_fail_other,
    });
    tokio::time::sleep(Duration::from_millis(10)).await;
}

fn start_session(sh: &Arc<Shared>, stream: Box<dyn ClientStream>, addrs: SessAddrs, proxy: bool) {
    // The addresses go in shared already: held by value, the session's
    // state kept room for them all its life.
    let addrs = Arc::new(addrs);
    session::tasks::spawn_session(
        sh,
        session::tasks::Conn {
            stream,
            addrs,
            proxy,
        },
    );
}

/// Takes the next connection off a listener: non-blocking and not yet
/// registered with the reactor (`transport::tcp`).
async fn accept_one(
    listener: &tokio::io::unix::AsyncFd<std::net::TcpListener>,
) -> std::io::Result<(std::net::TcpStream, SocketAddr)> {
    loop {
        let mut ready = listener.readable().await?;
        if let Ok(accepted) = ready.try_io(|l| balance::accept_now(l.get_ref())) {
            return accepted;
        }
    }
}

/// Sets the listener's deferred accept as `accept_filter` says, when it
/// changed since `applied`. A connection held back until its request
/// comes is read and answered at once (`transport::tcp`) and never
/// waits on the reactor. Where the system refuses, connections are
/// taken as they come.
fn follow_accept_filter(
    listener: &tokio::io::unix::AsyncFd<std::net::TcpListener>,
    wanted: bool,
    applied: &mut Option<bool>,
) {
    if *applied != Some(wanted) {
        // Held back for at most a second (varnishd's value), after which
        // a silent connection is taken and `timeout_idle` runs.
        let secs = u32::from(wanted);
        let _ = sockopt::set_defer_accept(std::os::fd::AsFd::as_fd(listener.get_ref()), secs);
        *applied = Some(wanted);
    }
}

/// Accepts TCP clients until the task is aborted (`stop`); `deferring`
/// is the deferred accept already set on the listener, `taken` where it
/// counts the connections it takes.
async fn accept_tcp(
    sh: Arc<Shared>,
    listener: tokio::io::unix::AsyncFd<std::net::TcpListener>,
    local: SocketAddr,
    info: Info,
    mut deferring: Option<bool>,
    taken: balance::TakenBy,
) {
    let mut nodelay_inherited = None;
    loop {
        follow_accept_filter(&listener, sh.params.accept_filter(), &mut deferring);
        match accept_one(&listener).await {
            Ok((stream, peer)) => {
                taken.count();
                serve_accepted(&sh, stream, peer, local, &info, &mut nodelay_inherited);
            }
            Err(e) => accept_failed(e).await,
        }
    }
}

/// Starts serving a connection accepted on a TCP listener bound to
/// `local`, on the worker this runs on: its session, after its TLS
/// handshake (and PROXY header) where the listener has them.
/// `nodelay_inherited` is whether accepted connections come with
/// `TCP_NODELAY` already, once known.
fn serve_accepted(
    sh: &Arc<Shared>,
    stream: std::net::TcpStream,
    peer: SocketAddr,
    local: SocketAddr,
    info: &Info,
    nodelay_inherited: &mut Option<bool>,
) {
    // Only a wildcard listener needs to ask which address a connection
    // came to.
    let local = match local.ip().is_unspecified() {
        true => stream.local_addr().unwrap_or(local),
        false => local,
    };
    let inherited = *nodelay_inherited.get_or_insert_with(|| stream.nodelay().unwrap_or(false));
    if !inherited {
        let _ = stream.set_nodelay(true);
    }
    let mut addrs = SessAddrs::new(peer, local, info.name.clone(), info.endpoint.clone());
    addrs.alt_svc.clone_from(&info.alt_svc);
    match &info.tls {
        // The handshake runs on the connection's own task, so a slow one
        // holds up no other.
        Some(tls) => {
            let (sh, tls, proxy) = (sh.clone(), tls.clone(), info.proxy);
            tokio::spawn(async move {
                // The handshake waits on the client: the socket joins the
                // reactor at once.
                let mut stream = match tokio::net::TcpStream::from_std(stream) {
                    Ok(stream) => stream,
                    Err(e) => return accept_failed(e).await,
                };
                if proxy {
                    // A PROXY header comes before the TLS handshake (a
                    // load balancer passing TLS through).
                    let p = &sh.params;
                    let max = (p.http_req_size() as usize).max(lacquer_http::proxy::V1_MAX);
                    let limit = Params::duration(p.timeout_idle());
                    let read = crate::transport::tls::read_proxy_header(&mut stream, max, limit);
                    let Some(header) = read.await else {
                        COUNTERS.inc(Counter::sess_closed_err);
                        COUNTERS.inc(Counter::sc_rx_junk);
                        return;
                    };
                    addrs.proxied(header);
                }
                match tls.handshake(stream).await {
                    Ok(stream) => {
                        addrs.tls = Some(crate::transport::tls::session_of(&stream));
                        start_session(&sh, Box::new(stream), addrs, false);
                    }
                    Err(e) => crate::session::handshake_failed(&sh, &addrs, &e),
                }
            });
        }
        None => start_session(
            sh,
            Box::new(crate::transport::tcp::ClientTcp::new(stream)),
            addrs,
            info.proxy,
        ),
    }
}

/// Accepts Unix socket clients until the task is aborted. Such a client
/// has no IP address: VCL sees 0.0.0.0 port 0, unless a PROXY header
/// says otherwise.
async fn accept_unix(sh: Arc<Shared>, listener: tokio::net::UnixListener, info: Info) {
    let none = SocketAddr::from(([0, 0, 0, 0], 0));
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let mut addrs =
                    SessAddrs::new(none, none, info.name.clone(), info.endpoint.clone());
                addrs.peer_cred = stream.peer_cred().ok().map(|c| (c.uid(), c.gid()));
                start_session(&sh, Box::new(stream), addrs, info.proxy);
            }
            Err(e) => accept_failed(e).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp(l: &ListenSpec) -> &[SocketAddr] {
        match &l.addrs {
            ListenAddrs::Tcp(a) => a,
            ListenAddrs::Unix(_) => panic!("not TCP"),
        }
    }

    #[test]
    fn listen_forms() {
        let l = parse_listen("admin=127.0.0.1:0", 0).unwrap();
        assert_eq!(
            (l.name.as_str(), l.endpoint.as_str()),
            ("admin", "127.0.0.1:0")
        );
        assert_eq!(tcp(&l)[0].port(), 0);
        let l = parse_listen(":6081", 1).unwrap();
        assert_eq!(l.name, "a1");
        assert_eq!(tcp(&l).len(), 2);
        let l = parse_listen("[::1]:8080,HTTP", 0).unwrap();
        assert_eq!(tcp(&l)[0], "[::1]:8080".parse().unwrap());
        assert!(!l.proxy);
        let l = parse_listen("lb=:80,PROXY", 0).unwrap();
        assert!(l.proxy);
        assert_eq!(l.endpoint, ":80");
        assert!(parse_listen("nonsense", 0).is_err());
        assert!(parse_listen("127.0.0.1:99999", 0).is_err());
        assert!(parse_listen(":80,FTP", 0).is_err());
        assert!(parse_listen(":80,user=www", 0).is_err());
    }

    #[test]
    fn unix_socket_listeners() {
        let l = parse_listen("hitch=/run/l.sock,PROXY,user=www,group=www,mode=660", 0).unwrap();
        assert_eq!(l.name, "hitch");
        assert!(l.proxy);
        assert_eq!(
            l.addrs,
            ListenAddrs::Unix(UnixSpec {
                path: "/run/l.sock".into(),
                user: Some("www".into()),
                group: Some("www".into()),
                mode: Some(0o660),
            })
        );
        assert!(matches!(
            parse_listen("@lacquer", 0).unwrap().addrs,
            ListenAddrs::Unix(_)
        ));
        assert!(parse_listen("/run/l.sock,mode=999", 0).is_err());
        assert!(parse_listen("@abstract,mode=600", 0).is_err());
        assert!(parse_listen("/", 0).is_err());
        assert!(parse_listen(&format!("/{}", "x".repeat(120)), 0).is_err());
    }

    /// With `accept_filter` on, a connection is not taken until it sends
    /// (then it comes with its bytes); turned off, at once.
    #[test]
    fn accept_filter_holds_connections_until_they_send() {
        use std::io::{Read, Write};
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let bound = bind_tcp("127.0.0.1:0".parse().unwrap(), 16).unwrap();
            let addr = bound.local_addr().unwrap();
            let listener = sockopt::watch_listener(bound).unwrap();
            let accept = || tokio::time::timeout(Duration::from_secs(10), accept_one(&listener));
            let mut applied = None;

            follow_accept_filter(&listener, true, &mut applied);
            let mut silent = std::net::TcpStream::connect(addr).unwrap();
            // The handshake is over on loopback once connect returns: an
            // undeferred connection could be taken now.
            let taken = listener.get_ref().accept();
            assert!(
                taken
                    .as_ref()
                    .is_err_and(|e| e.kind() == std::io::ErrorKind::WouldBlock),
                "a connection that sent nothing is held back: {taken:?}"
            );
            silent.write_all(b"GET").unwrap();
            let (mut conn, _) = accept().await.expect("taken once it sends").unwrap();
            conn.set_nonblocking(false).unwrap();
            let mut got = [0u8; 3];
            conn.read_exact(&mut got).unwrap();
            assert_eq!(&got, b"GET");

            follow_accept_filter(&listener, false, &mut applied);
            let _quiet = std::net::TcpStream::connect(addr).unwrap();
            accept().await.expect("taken at once").unwrap();
        });
    }
}
