//! Start-up and the run loop: the work directory, the listening sockets
//! (reported as they are bound, so port 0 can be used), the management
//! interface, the client workers (one per core, each accepting and serving
//! its own connections) and a small runtime for the rest, the ban lurker's
//! thread and the once-a-second housekeeping (expiry, idle
//! backend connections, uptime).

pub(crate) mod balance;
pub mod cluster;
pub mod config;
pub(crate) mod dashboard;
mod describe;
pub(crate) mod listen;
pub(crate) mod metrics;
pub(crate) mod panics;
pub(crate) mod probe;
mod storage;
mod store_spec;
mod workdir;
pub(crate) mod workers;

use crate::daemon::config::ServeConfig;
use crate::host::vcl::{Loaded, Registry};
use crate::mgmt::{self, Mgmt};
use crate::Shared;
use lacquer_cache::ban::LurkConfig;
use lacquer_cache::store::Store;
use lacquer_cache::Cache;
use lacquer_core::counters::{Counter, COUNTERS};
use lacquer_core::params::Params;
use lacquer_shm::counters::Snapshot;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;

/// Binds the `-T` or `--metrics` addresses. A name like `localhost` may
/// stand for addresses of families the machine lacks; those are skipped if
/// another one binds.
fn bind_some(addrs: &[SocketAddr], option: &str) -> Result<Vec<std::net::TcpListener>, String> {
    let mut out = Vec::new();
    let mut last_error = None;
    for addr in addrs {
        match listen::bind_tcp(*addr, 16) {
            Ok(l) => out.push(l),
            Err(e) => last_error = Some(format!("Could not bind to {addr} ({option}): {e}")),
        }
    }
    match (out.is_empty(), last_error) {
        (true, Some(e)) => Err(e),
        _ => Ok(out),
    }
}

/// Runs the daemon until the process is stopped.
/// The `-a` listeners and one `tls<N>` listener per frontend of the `-A`
/// file.
fn with_frontends(
    listens: &[config::ListenSpec],
    tls: Option<&crate::transport::tls::TlsState>,
) -> Result<Vec<config::ListenSpec>, String> {
    let mut out = listens.to_vec();
    for (i, f) in tls
        .map(|t| &t.file().frontends[..])
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let endpoint = match f.host.as_str() {
            "" => format!(":{}", f.port),
            h if h.contains(':') => format!("[{h}]:{}", f.port),
            h => format!("{h}:{}", f.port),
        };
        let mut spec = config::parse_listen(&format!("tls{i}={endpoint}"), 0)
            .map_err(|e| format!("-A frontend {endpoint}: {e}"))?;
        if out.iter().any(|l| l.name == spec.name) {
            return Err(format!(
                "-a: the name {} is the -A file's frontend {i}",
                spec.name
            ));
        }
        spec.tls = Some(config::TlsUse::Frontend(i));
        out.push(spec);
    }
    Ok(out)
}

/// Gives each TLS listener its certificates and settings.
fn attach_tls(
    tls: &crate::transport::tls::TlsState,
    specs: &[config::ListenSpec],
    listeners: &mut [listen::Listener],
    http2: bool,
    early_data: bool,
) -> Result<(), String> {
    let mut made = std::collections::HashMap::new();
    for spec in specs {
        let frontend = match spec.tls {
            None => continue,
            Some(config::TlsUse::Global) => None,
            Some(config::TlsUse::Frontend(i)) => Some(i),
        };
        made.insert(
            spec.name.clone(),
            Arc::new(tls.listener(&spec.name, frontend, http2, early_data)?),
        );
    }
    for l in listeners {
        l.tls = made.get(&*l.name).cloned();
        if l.tls.as_ref().is_some_and(|t| t.quic.is_some()) {
            l.bind_quic()?;
        }
    }
    Ok(())
}

pub fn serve(cfg: ServeConfig) -> Result<(), String> {
    crate::daemon::panics::install_hook();
    // -p vsl_mask=… applies to the default mask, as param.set does.
    crate::host::vsl::set_mask(&cfg.params, &cfg.params.vsl_mask())
        .map_err(|e| format!("-p vsl_mask: {e}"))?;
    lacquer_core::regex::set_match_limit(cfg.params.pcre2_match_limit() as usize);
    // The lock is held until the process ends: a second daemon is
    // refused the directory meanwhile.
    let (_workdir_lock, jail_user) = workdir::take(&cfg)?;
    let backlog = cfg.params.listen_depth().min(i32::MAX as u64) as i32;
    let tls = match &cfg.tls_file {
        Some(path) => Some(Arc::new(crate::transport::tls::TlsState::read(
            path,
            cfg.workdir.join("acme"),
        )?)),
        None => None,
    };
    let workers = workers::Workers::count(&cfg.params);
    let listens = with_frontends(&cfg.listens, tls.as_deref())?;
    let mut listeners = listen::bind_all(&listens, backlog, workers)?;
    if let Some(tls) = &tls {
        let http2 = cfg.params.has(lacquer_core::params::Feature::http2);
        let early_data = cfg.params.h3_early_data();
        attach_tls(tls, &listens, &mut listeners, http2, early_data)?;
    }
    let control = ControlListeners {
        mgmt: match &cfg.mgmt_listen {
            Some(addrs) => bind_some(addrs, "-T")?,
            None => Vec::new(),
        },
        metrics: bind_some(&cfg.metrics_listen, "--metrics")?,
        dashboard: bind_some(&cfg.dashboard_listen, "--dashboard")?,
    };
    let (secret, secret_path) = mgmt::load_secret(&cfg.secret, &cfg.workdir)?;
    let secret_path = secret_path.map(|p| std::fs::canonicalize(&p).unwrap_or(p));
    // The management interface, the dashboard, probes and housekeeping;
    // clients are served by the workers (daemon::workers).
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    let runtime = workers::count_threads(&mut builder)
        .worker_threads(1)
        .thread_name("lacquer-control")
        .enable_all()
        .build()
        .map_err(|e| format!("Cannot start the runtime: {e}"))?;
    let client_workers = workers::Workers::start(workers)?;
    COUNTERS.set(Counter::pools, 1);
    let (stores, recoveries) = storage::open_stores(&cfg.stores)?;
    let cache = Cache::new(stores, Store::transient(cfg.transient_budget));
    storage::restore(&cache, recoveries);
    let probes = lacquer_backend::probe::Probes::default();
    let (loaded, registry) = load_programs(&cfg, &cache, &probes)?;
    let cluster = join_cluster(&cfg, &listeners)?;
    let log = lacquer_shm::Log::create(&cfg.workdir, cfg.params.vsl_space())
        .map_err(|e| format!("Cannot create the log in {}: {e}", cfg.workdir.display()))?;
    let shared = Arc::new(Shared {
        // Kept for the process's life: transactions borrow it.
        log: Some(log.leak()),
        params: cfg.params,
        cache,
        active: crate::host::vcl::ActiveVcl::new(loaded),
        vcls: std::sync::Mutex::new(registry),
        via: format!("1.1 {} ({})", cfg.identity, lacquer_core::product_token()),
        identity: cfg.identity,
        probes,
        admission: Default::default(),
        answer_first: tls
            .as_ref()
            .map(|_| crate::transport::acme::http01_answer as _),
        tls,
        includes: crate::client::request::include_request,
        cluster,
    });
    let lurker_shared = shared.clone();
    std::thread::Builder::new()
        .name("ban-lurker".into())
        .spawn(move || ban_lurker(lurker_shared))
        .map_err(|e| format!("Cannot start the ban lurker: {e}"))?;
    crate::transport::acme::spawn_renewals(shared.clone())?;
    let workdir = cfg.workdir.clone();
    let handle = runtime.handle().clone();
    {
        let _in_runtime = handle.enter();
        start_all_probes(&shared);
        if shared.cluster.is_some() {
            handle.spawn(crate::host::spread::send_later(shared.clone()));
            handle.spawn(crate::host::spread::catch_up(shared.clone()));
            handle.spawn(crate::host::peers::log_membership(shared.clone()));
        }
    }
    runtime.block_on(async move {
        let mut out = std::io::stdout().lock();
        for l in &listeners {
            let _ = writeln!(out, "Listen {}", l.describe());
        }
        let (mgmt_tokio, boards) =
            announce_control(&mut out, control, &shared, &workdir, secret_path.as_deref())?;
        lacquer_shm::counters::spawn_publisher(lacquer_shm::counters::Publisher::create(
            &workdir,
            {
                let sh = shared.clone();
                Box::new(move |snap: &mut Snapshot| add_sections(&sh, snap))
            },
        )?)?;
        let mgmt = Mgmt::new(shared.clone(), secret, listeners, client_workers)
            .with_read_only(cfg.read_only.clone());
        if !boards.is_empty() {
            let actions = dashboard_actions(cfg.dashboard_secret.as_deref(), &mgmt)?;
            dashboard::spawn_boards(shared.clone(), workdir.clone(), boards, actions)?;
        }
        if let Some(user) = &jail_user {
            workdir::enter_jail(user, &workdir)?;
        }
        if let Some(file) = &cfg.cli_file {
            mgmt.run_cli_file(file).await?;
        }
        // A node back in its cluster applies what it missed first.
        let joins = cfg.cluster.as_ref().is_some_and(|c| !c.join.is_empty());
        crate::host::spread::before_serving(&shared, joins).await;
        if !cfg.start_stopped || (cfg.wait_for_program && !mgmt.registry_is_empty()) {
            mgmt.start_accepting()?;
        }
        for l in mgmt_tokio {
            tokio::spawn(mgmt.clone().serve_cli(l));
        }
        if let Some(addr) = cfg.reverse_cli.clone() {
            tokio::spawn(mgmt.clone().serve_reverse(addr));
        }
        // The signals are caught from before the daemon says it runs: one
        // sent right after that line must not find the default action
        // (which ends the process without `exit`, with no status).
        let signals = catch_signals();
        if !shared.params.varnish_compat_ttl() {
            // Standard error may be closed: said where it can be.
            let _ = writeln!(std::io::stderr(), "{BEYOND_VARNISHD}");
        }
        let _ = writeln!(out, "Child launched OK");
        let _ = out.flush();
        drop(out);
        if let Some(signals) = signals {
            tokio::spawn(end_on_signal(signals, shared.log));
        }
        housekeeping(shared).await;
        Ok(())
    })
}

/// The daemon's cluster (`--cluster-bind`), started once its listeners
/// are bound: its peers are told the first plain HTTP one.
fn join_cluster(
    cfg: &ServeConfig,
    listeners: &[listen::Listener],
) -> Result<Option<crate::host::peers::Peers>, String> {
    let Some(spec) = &cfg.cluster else {
        return Ok(None);
    };
    let replicas = cfg.params.cluster_replicas().min(u64::from(u32::MAX)) as u32;
    let http = listen::first_plain_http(listeners);
    let cluster = cluster::start(spec, &cfg.identity, http, replicas)?;
    Ok(Some(crate::host::peers::Peers::new(cluster)))
}

/// The control side's listening sockets (`-T`, `--metrics`,
/// `--dashboard`), bound before any jail.
struct ControlListeners {
    mgmt: Vec<std::net::TcpListener>,
    metrics: Vec<std::net::TcpListener>,
    dashboard: Vec<std::net::TcpListener>,
}

/// Says where the control side listens (on standard output, and the
/// management address in the work directory for the tools), starts
/// serving metrics, and hands back the management and dashboard
/// listeners, now the runtime's.
fn announce_control(
    out: &mut impl Write,
    control: ControlListeners,
    shared: &Arc<Shared>,
    workdir: &std::path::Path,
    secret_path: Option<&std::path::Path>,
) -> Result<(Vec<TcpListener>, Vec<TcpListener>), String> {
    let mut mgmt_addrs = Vec::new();
    let mut mgmt_tokio = Vec::new();
    for l in control.mgmt {
        let local = l.local_addr().map_err(|e| e.to_string())?;
        let _ = writeln!(out, "Management {} {}", local.ip(), local.port());
        mgmt_addrs.push(local);
        mgmt_tokio.push(TcpListener::from_std(l).map_err(|e| e.to_string())?);
    }
    mgmt::write_address_file(workdir, &mgmt_addrs, secret_path)?;
    for l in control.metrics {
        let local = l.local_addr().map_err(|e| e.to_string())?;
        let _ = writeln!(out, "Metrics {} {}", local.ip(), local.port());
        let l = TcpListener::from_std(l).map_err(|e| e.to_string())?;
        tokio::spawn(dashboard::accept_connections(shared.clone(), l, None));
    }
    let mut boards = Vec::new();
    for l in control.dashboard {
        let local = l.local_addr().map_err(|e| e.to_string())?;
        let _ = writeln!(out, "Dashboard {} {}", local.ip(), local.port());
        boards.push(TcpListener::from_std(l).map_err(|e| e.to_string())?);
    }
    Ok((mgmt_tokio, boards))
}

/// The dashboard's actions, only with their own secret (read before any
/// jail).
fn dashboard_actions(
    secret: Option<&std::path::Path>,
    mgmt: &Arc<Mgmt>,
) -> Result<Option<dashboard::actions::Actions>, String> {
    let Some(path) = secret else {
        return Ok(None);
    };
    let secret = std::fs::read(path).map_err(|e| {
        format!(
            "Cannot open --dashboard-secret file ({}): {e}",
            path.display()
        )
    })?;
    Ok(Some(dashboard::actions::Actions::new(mgmt.clone(), secret)))
}

/// The programs `-f` (or `-b`) gives: the last is the active `boot`, and
/// the files before it are loaded too, as `boot0`, `boot1`, …. With `-d`
/// and no program, requests cannot come before `start`, and `start`
/// needs a program loaded through the CLI: the built-in one only fills
/// the slot until then and is never listed.
fn load_programs(
    cfg: &ServeConfig,
    cache: &Cache,
    probes: &lacquer_backend::probe::Probes,
) -> Result<(Arc<Loaded>, Registry), String> {
    let (program, listed) = match &cfg.vcl {
        Some(source) => (
            source.compile(&cfg.params, cfg.store_names(), Vec::new())?,
            true,
        ),
        None => (
            crate::VclSource::Inline("vcl 4.1; backend default none;".into()).compile(
                &cfg.params,
                cfg.store_names(),
                Vec::new(),
            )?,
            false,
        ),
    };
    let loaded = Arc::new(Loaded::new(
        "boot",
        program,
        &cfg.params,
        cache.bans(),
        probes,
    )?);
    let mut registry = if listed {
        Registry::new(loaded.clone())
    } else {
        Registry::empty()
    };
    for (i, path) in cfg.earlier_vcls.iter().enumerate() {
        let source = crate::VclSource::File(path.clone());
        let program = source.compile(&cfg.params, cfg.store_names(), Vec::new())?;
        let name = format!("boot{i}");
        let earlier = Loaded::new(&name, program, &cfg.params, cache.bans(), probes)?;
        registry.entries.push(crate::host::vcl::VclEntry {
            loaded: Arc::new(earlier),
            state: crate::host::vcl::VclState::Auto,
        });
    }
    registry.count();
    Ok((loaded, registry))
}

/// Starts the probes of the active program's backends, and of the
/// programs of earlier `-f` files (inside the control runtime).
fn start_all_probes(shared: &Arc<Shared>) {
    let active = shared.active.get();
    crate::daemon::probe::start_probes(shared, &active);
    let earlier: Vec<Arc<Loaded>> = {
        let reg = shared.vcls.lock().unwrap_or_else(|p| p.into_inner());
        reg.entries
            .iter()
            .filter(|e| !Arc::ptr_eq(&e.loaded, &active))
            .map(|e| e.loaded.clone())
            .collect()
    };
    for loaded in &earlier {
        crate::daemon::probe::start_probes(shared, loaded);
    }
}

/// What the daemon says at start-up about the caching rules that go
/// beyond varnishd's, where `varnish_compat_ttl` is off (README,
/// "Caching rules").
const BEYOND_VARNISHD: &str = "Info: caching follows varnishd's rules, and beyond them honours \
     what origins ask in fields varnishd ignores: Lacquer-Cache-Control and CDN-Cache-Control \
     (RFC 9213, read strictly: their own statuses, no-store, private, no-cache), \
     private=\"field\" and no-cache=\"field\" kept from other clients, must-revalidate, \
     proxy-revalidate and s-maxage meaning no grace, Last-Modified heuristic freshness \
     (never longer than default_ttl), stale-if-error (stale_if_error=off turns it off), \
     and a request's only-if-cached, max-stale and min-fresh; \
     -p varnish_compat_ttl=on keeps to varnishd's rules alone";

/// Adds the counters published beside `MAIN`: `MGT.*`, `SMA.<store>.*` (`SMF`
/// for a file store, `SMP` for a persistent one) for each store and `VBE.<vcl>.<backend>.*` for the backends of every warm
/// program (a cold program's backends are hidden, as in Varnish).
pub(crate) fn add_sections(sh: &Shared, snap: &mut Snapshot) {
    use lacquer_core::counters::{BackendCounter, MGT, SMA, SMF, SMP, VBE};
    // varnishd's management process's counters, for the one process
    // Lacquer is: started once, panics contained and counted.
    let uptime = snap.main_values()[Counter::uptime as usize];
    let panics = crate::daemon::panics::count();
    snap.section("MGT".into(), MGT, |v| {
        v.extend([uptime, 1, 0, 0, 0, 0, panics]);
    });
    add_pools(snap);
    let cache = &sh.cache;
    for store in cache.stores().iter().chain([cache.transient()]) {
        let section = store.engine().section();
        let table = match section {
            "SMF" => SMF,
            "SMP" => SMP,
            _ => SMA,
        };
        snap.section(format!("{section}.{}", store.name()), table, |v| {
            store.counters(v)
        });
    }
    if let Some(peers) = &sh.cluster {
        snap.section("CLUSTER".into(), lacquer_core::counters::CLUSTER, |v| {
            peers.counters(v)
        });
        for (name, values) in peers.each_peer() {
            snap.section(format!("PEER.{name}"), lacquer_core::counters::PEER, |v| {
                v.extend(values)
            });
        }
        for (name, b) in peers.peer_backends() {
            b.stats
                .set(BackendCounter::healthy, u64::from(!b.held_down()));
            snap.section(format!("VBE.cluster.{name}"), VBE, |v| b.stats.snapshot(v));
        }
    }
    let reg = sh.vcls.lock().unwrap_or_else(|e| e.into_inner());
    for e in reg.entries.iter().filter(|e| reg.is_warm(e)) {
        for b in e.loaded.backends.iter().flatten() {
            let prefix = format!("VBE.{}.{}", e.loaded.name, b.name);
            let healthy = b.healthy() && !b.held_down();
            b.stats.set(BackendCounter::healthy, u64::from(healthy));
            snap.section(prefix, VBE, |v| b.stats.snapshot(v));
        }
    }
}

/// `MEMPOOL.sess0`, `MEMPOOL.req0` and `MEMPOOL.busyobj`, from the
/// counts of session tasks, requests and backend requests: the session
/// tasks kept idle are a pool; requests and backend requests are made
/// anew each time (an empty pool, always dry).
fn add_pools(snap: &mut Snapshot) {
    use lacquer_core::counters::MEMPOOL;
    let m = snap.main_values();
    let g = |c: Counter| m[c as usize];
    // live, pool, size, allocs, recycle, surplus, randry
    let sess_live = g(Counter::sess_tasks).saturating_sub(g(Counter::sess_task_idle));
    let sess_allocs = g(Counter::sess_task_created) + g(Counter::sess_task_reused);
    let sess_ended = g(Counter::sess_task_created).saturating_sub(g(Counter::sess_tasks));
    let sess = [
        sess_live,
        g(Counter::sess_task_idle),
        crate::session::state_size() as u64,
        sess_allocs,
        g(Counter::sess_task_reused),
        sess_ended,
        g(Counter::sess_task_created),
    ];
    let req_allocs = g(Counter::client_req) + g(Counter::esi_req);
    let bereq_allocs = g(Counter::s_fetch) + g(Counter::s_pipe);
    let made = |live: u64, size: usize, allocs: u64| {
        let frees = allocs.saturating_sub(live);
        [live, 0, size as u64, allocs, 0, frees, allocs]
    };
    let pools = [
        (
            "MEMPOOL.busyobj",
            made(
                g(Counter::n_bereq),
                std::mem::size_of::<crate::host::backend_host::Bereq>(),
                bereq_allocs,
            ),
        ),
        (
            "MEMPOOL.req0",
            made(
                g(Counter::n_req),
                std::mem::size_of::<crate::host::req::Req>(),
                req_allocs,
            ),
        ),
        ("MEMPOOL.sess0", sess),
    ];
    for (name, [live, pool, size, allocs, recycle, surplus, randry]) in pools {
        let frees = allocs.saturating_sub(live);
        snap.section(name.into(), MEMPOOL, |v| {
            v.extend([
                live, pool, size, size, allocs, frees, recycle, 0, 0, surplus, randry,
            ]);
        });
    }
}

/// The ban lurker's thread: passes over the cache whenever there are
/// `obj.*` bans old enough, otherwise waits for a ban. With
/// `ban_lurker_sleep` 0 it only deletes bans no object holds.
fn ban_lurker(sh: Arc<Shared>) {
    loop {
        let p = &sh.params;
        let cfg = LurkConfig {
            age: p.ban_lurker_age(),
            batch: p.ban_lurker_batch(),
            sleep: p.ban_lurker_sleep(),
            holdoff: p.ban_lurker_holdoff(),
            cutoff: p.ban_cutoff(),
        };
        let examined = if cfg.sleep > 0.0 {
            sh.cache.lurk_bans(&cfg, lacquer_core::time::now())
        } else {
            sh.cache.bans().clean_tail();
            0
        };
        if examined == 0 {
            sh.cache.bans().wait_for_ban(Duration::from_secs(1));
        } else {
            std::thread::sleep(Duration::from_secs_f64(cfg.sleep));
        }
    }
}

/// SIGTERM and SIGINT end the process, as they end varnishd: at once
/// (what is cached is lost, as with any stop of a memory store), but
/// through `exit`, so that the process ends with status 0 and what runs
/// at exit runs (a profile-guided build's training counts are written
/// then). The log's records go first: every batch a worker gathered is
/// written (`flush_all`), and each worker writes its next records at once
/// (a busy worker finishes a transaction every few microseconds), for at
/// most `END_GRACE` before the process ends. QUIC
/// clients are told the connection is closed first.
async fn end_on_signal(signals: Signals, log: Option<&'static lacquer_shm::Log>) {
    let (mut term, mut int) = signals;
    let which = std::future::poll_fn(|cx| {
        if term.poll_recv(cx).is_ready() {
            return std::task::Poll::Ready("SIGTERM");
        }
        int.poll_recv(cx).map(|_| "SIGINT")
    })
    .await;
    say!("Manager got {which}, stopping");
    crate::session::h3::close_all(QUIC_CLOSE_GRACE).await;
    if let Some(log) = log {
        log.write_through();
        lacquer_shm::batch::flush_all();
        tokio::time::sleep(END_GRACE).await;
    }
    std::process::exit(0);
}

/// How long the end waits for QUIC's CONNECTION_CLOSE frames to go.
const QUIC_CLOSE_GRACE: Duration = Duration::from_millis(100);

/// SIGTERM's and SIGINT's handlers, installed as they are made.
type Signals = (tokio::signal::unix::Signal, tokio::signal::unix::Signal);

/// Installs the handlers of SIGTERM and SIGINT (None where the system
/// refuses: the signals then end the process as they would have).
fn catch_signals() -> Option<Signals> {
    use tokio::signal::unix::{signal, SignalKind};
    Some((
        signal(SignalKind::terminate()).ok()?,
        signal(SignalKind::interrupt()).ok()?,
    ))
}

/// How long the workers have, once a signal asked the daemon to end, to
/// write the log records they gathered.
const END_GRACE: Duration = Duration::from_millis(50);

async fn housekeeping(sh: Arc<Shared>) {
    let started = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        let now = lacquer_core::time::now();
        sh.cache.expire(now);
        storage::sync(
            &sh.cache,
            sh.params.persistent_unsynced_max(),
            started
                .elapsed()
                .as_secs()
                .is_multiple_of(storage::SYNC_EVERY),
        );
        let idle = Params::duration(sh.params.backend_idle_timeout());
        let loaded: Vec<Arc<Loaded>> = {
            let reg = sh.vcls.lock().unwrap_or_else(|p| p.into_inner());
            reg.entries.iter().map(|e| e.loaded.clone()).collect()
        };
        for l in loaded {
            for b in l.backends.iter().flatten() {
                b.reap(idle);
            }
        }
        COUNTERS.set(Counter::uptime, started.elapsed().as_secs());
    }
}

/// What `-x` prints: the parameters, the log tags, the management
/// commands, the built-in VCL or the option string.
pub fn describe(what: config::Describe) -> String {
    use config::Describe;
    match what {
        Describe::Parameters => lacquer_core::params::describe_all(),
        Describe::LogTags => {
            let mut out = String::new();
            for tag in lacquer_shm::tags::TAGS {
                out.push_str(&format!(
                    "{}\n{}\n\t{}\n\n",
                    tag.name(),
                    "~".repeat(tag.name().len()),
                    tag.doc()
                ));
            }
            out
        }
        Describe::Commands => {
            let mut out = String::new();
            for c in lacquer_admin::commands::COMMANDS {
                out.push_str(&format!(
                    "{}\n\t{}\n\n",
                    c.syntax,
                    c.help.replace('\n', "\n\t")
                ));
            }
            out
        }
        Describe::BuiltinVcl => lacquer_vcl::BUILTIN_VCL.to_string(),
        Describe::OptString => format!("{}\n", config::optstring()),
        Describe::Counters => describe::counters(),
        Describe::VclVariables => describe::vcl_variables(),
    }
}
