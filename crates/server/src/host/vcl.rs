//! Loaded VCL programs: compiling the `-f` file (or the program `-b`
//! stands for, or a `vcl.load`/`vcl.inline` from the management
//! interface), making each declared backend, running `vcl_init`, the
//! registry of loaded programs by name, and the active program every new
//! request starts with. A request keeps the program it started with to its
//! end, so a switch drops nothing.

use crate::Shared;
use bytes::Bytes;
use lacquer_backend::probe::{ProbeSpec, Probes};
use lacquer_backend::{Address, Backend};
use lacquer_cache::ban::{BanSpec, Bans};
use lacquer_core::params::{Kind, Params};
use lacquer_vcl::{HttpKind, Method, Program, StorageField, Value, Var, VclFailure};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A compiled program with its backends.
pub(crate) struct Loaded {
    /// The name it was loaded under (`boot` for the start-up program).
    pub name: String,
    pub program: Arc<Program>,
    /// By the program's backend index; `None` for `backend x none;`.
    pub backends: Vec<Option<Arc<Backend>>>,
}

/// Where the program comes from.
pub enum VclSource {
    /// `-f file`.
    File(std::path::PathBuf),
    /// `-b host:port`: a program holding just that backend.
    Backend { host: String, port: u16 },
    /// `vcl.inline`: the program text itself.
    Inline(String),
}

impl VclSource {
    /// Compiles the program for a daemon with the named stores, or
    /// returns the compiler's message.
    pub fn compile(
        &self,
        params: &Params,
        storages: Vec<String>,
        labels: Vec<String>,
    ) -> Result<Program, String> {
        let opts = lacquer_vcl::Options {
            unused_is_error: params.vcc_err_unref(),
            storages,
            labels,
            native_builtin: true,
        };
        let result = match self {
            VclSource::File(path) => lacquer_vcl::compile_file(path, Vec::new(), &opts),
            VclSource::Backend { host, port } => {
                let text = format!(
                    "vcl 4.1;\nbackend default {{\n    .host = \"{host}\";\n    .port = \"{port}\";\n}}\n"
                );
                lacquer_vcl::compile_str("<-b argument>", &text, &opts)
            }
            VclSource::Inline(text) => lacquer_vcl::compile_str("<vcl.inline>", text, &opts),
        };
        result.map_err(|f| {
            // A Varnish 3 program says so, and how to get its 4.1 form.
            let hint = match self {
                VclSource::File(path) => std::fs::read_to_string(path)
                    .ok()
                    .filter(|text| lacquer_vcl::upgrade::is_vcl3(text))
                    .map(|_| {
                        format!(
                            "This is VCL 3.0 (Varnish 3). `lacquer upgrade-vcl {}` writes it as VCL 4.1.\n",
                            path.display()
                        )
                    }),
                VclSource::Inline(text) if lacquer_vcl::upgrade::is_vcl3(text) => Some(
                    "This is VCL 3.0 (Varnish 3). `lacquer upgrade-vcl FILE` writes it as VCL 4.1.\n"
                        .to_string(),
                ),
                _ => None,
            };
            format!(
                "Message from VCC-compiler:\n{}{}Running VCC-compiler failed\nVCL compilation failed",
                f.render(),
                hint.unwrap_or_default()
            )
        })
    }
}

/// A backend's probe as it runs: `.initial` defaults to one less than
/// `.threshold`, as in Varnish.
fn probe_spec(p: &lacquer_vcl::program::ProbeDef, host: &str) -> ProbeSpec {
    let request = match (&p.request, &p.url) {
        (Some(r), _) => r.clone().into_bytes(),
        (None, url) => ProbeSpec::get(url.as_deref().unwrap_or("/"), host),
    };
    ProbeSpec {
        request,
        expected: p.expected_response,
        timeout: p.timeout,
        interval: p.interval,
        window: p.window,
        threshold: p.threshold,
        initial: p.initial.unwrap_or(p.threshold.saturating_sub(1)),
    }
}

impl Loaded {
    /// Makes the backends of a compiled program and runs its `vcl_init`.
    pub fn new(
        name: &str,
        program: Program,
        params: &Params,
        bans: &Bans,
        probes: &Probes,
    ) -> Result<Loaded, String> {
        let backends = program
            .backends
            .iter()
            .map(|d| -> Result<Option<Arc<Backend>>, String> {
                let addr = match (&d.addr, &d.path) {
                    (Some(a), _) => Address::Tcp(*a),
                    (None, Some(path)) => Address::Unix(path.clone()),
                    (None, None) => return Ok(None),
                };
                Ok(Some({
                    // A Unix socket backend's default Host is the
                    // listening side's (`localhost`, as in Varnish).
                    let host = match (&d.host_header, &addr) {
                        (Some(h), _) => h.clone(),
                        (None, Address::Unix(_)) => "localhost".to_string(),
                        (None, Address::Tcp(_)) => d.host.clone(),
                    };
                    let endpoint = match &addr {
                        Address::Tcp(_) => format!("{}:{}", d.host, d.port),
                        Address::Unix(p) => p.clone(),
                    };
                    let mut backend = Backend::new(&d.name, &endpoint, addr.clone(), &host)
                        .with_limits(d.max_connections, d.wait_timeout, d.wait_limit);
                    if let Some(v) = d.proxy_header {
                        backend = backend.with_proxy_header(v);
                    }
                    if let Some(p) = &d.preamble {
                        backend = backend.with_preamble(p.clone());
                    }
                    if let Some(def) = &d.ssl {
                        let ca = params.ssl_ca_file();
                        match crate::transport::tls::backend_tls(def, &host, &ca) {
                            Ok(tls) => backend = backend.with_tls(tls),
                            Err(e) => return Err(format!("backend {}: {e}", d.name)),
                        }
                    }
                    if d.h2c {
                        backend = backend.with_h2c();
                    }
                    let tls = backend.tls().cloned();
                    let h2 = backend.h2_mode();
                    let probe = d.probe.and_then(|i| program.probes.get(i));
                    let backend = Arc::new(match probe {
                        Some(p) => {
                            backend.with_probe(probes.get(addr, probe_spec(p, &host), tls, h2))
                        }
                        None => backend,
                    });
                    backend.follow_probe();
                    backend
                }))
            })
            .collect::<Result<Vec<_>, String>>()?;
        let program = Arc::new(program);
        let loaded = Loaded {
            name: name.to_string(),
            program,
            backends,
        };
        let mut host = InitHost {
            params,
            bans,
            loaded: &loaded,
            method: Method::Init,
        };
        lacquer_vcl::init(&loaded.program, &mut host)?;
        Ok(loaded)
    }

    /// The program's directors as `backend.list` shows them, their
    /// health and their members' read as a request would read them now.
    pub(crate) fn directors(&self, params: &Params, bans: &Bans) -> Vec<DirectorRow> {
        let prog = &self.program;
        let mut host = InitHost {
            params,
            bans,
            loaded: self,
            method: Method::Init,
        };
        let mut rows = Vec::new();
        for slot in &prog.objects {
            let Some(obj) = slot.object.get() else {
                continue;
            };
            let Some(view) = obj.director() else {
                continue;
            };
            let members = view
                .members
                .iter()
                .map(|(b, weight)| DirectorMember {
                    name: prog.backend_name(*b).to_string(),
                    weight: *weight,
                    healthy: prog.healthy(*b, &mut host),
                    last_change: match b {
                        lacquer_vcl::BackendRef::Backend(i) => {
                            self.backend(*i).map(|b| b.last_change())
                        }
                        _ => None,
                    },
                })
                .collect();
            rows.push(DirectorRow {
                name: slot.name.clone(),
                kind: view.kind,
                current: view.current,
                healthy: obj.healthy(prog, &mut host),
                members,
            });
        }
        rows
    }

    pub fn backend(&self, index: usize) -> Option<&Arc<Backend>> {
        self.backends.get(index).and_then(|b| b.as_ref())
    }

    /// Healthy for VCL and directors: by probe or `set_health`, and not
    /// held down after a refused connection, so that a director's next
    /// pick (a retry) goes elsewhere at once rather than after a probe
    /// has noticed.
    pub fn healthy(&self, index: usize) -> bool {
        self.backend(index)
            .is_some_and(|b| b.healthy() && !b.held_down())
    }
}

/// A director as `backend.list` shows it.
pub(crate) struct DirectorRow {
    pub name: String,
    /// Its type as varnishd names it (`round-robin`, …).
    pub kind: &'static str,
    /// A fallback's place in its list (`backend.list -p` marks it).
    pub current: Option<usize>,
    pub healthy: bool,
    pub members: Vec<DirectorMember>,
}

/// One member of a director, for `backend.list -p`.
pub(crate) struct DirectorMember {
    pub name: String,
    /// Its weight, where the director's type has weights.
    pub weight: Option<f64>,
    pub healthy: bool,
    /// When a backend member's health last changed.
    pub last_change: Option<f64>,
}

impl DirectorRow {
    /// How many members are healthy.
    pub fn healthy_members(&self) -> usize {
        self.members.iter().filter(|m| m.healthy).count()
    }

    /// When its health may last have changed: its newest member's change.
    pub fn last_change(&self) -> f64 {
        self.members
            .iter()
            .filter_map(|m| m.last_change)
            .fold(None, |newest: Option<f64>, t| {
                Some(newest.map_or(t, |n| n.max(t)))
            })
            .unwrap_or_else(lacquer_core::time::now)
    }
}

/// What `vcl.state` asked for: `auto` lets the daemon decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum VclState {
    Auto,
    Cold,
    Warm,
}

impl VclState {
    pub fn parse(word: &str) -> Option<VclState> {
        match word {
            "auto" => Some(VclState::Auto),
            "cold" => Some(VclState::Cold),
            "warm" => Some(VclState::Warm),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            VclState::Auto => "auto",
            VclState::Cold => "cold",
            VclState::Warm => "warm",
        }
    }
}

/// One loaded program, by name.
pub(crate) struct VclEntry {
    pub loaded: Arc<Loaded>,
    pub state: VclState,
}

/// Every loaded program, in load order, and which one is active.
pub(crate) struct Registry {
    pub entries: Vec<VclEntry>,
    pub active: String,
    /// `vcl.label`: a label and the program it names.
    pub labels: Vec<(String, String)>,
}

impl Registry {
    pub fn new(first: Arc<Loaded>) -> Registry {
        let active = first.name.clone();
        Registry {
            entries: vec![VclEntry {
                loaded: first,
                state: VclState::Auto,
            }],
            active,
            labels: Vec::new(),
        }
    }

    /// No program yet (`-d` without `-b`/`-f`): the first one loaded
    /// becomes active.
    pub fn empty() -> Registry {
        Registry {
            entries: Vec::new(),
            active: String::new(),
            labels: Vec::new(),
        }
    }

    /// The program a label names.
    pub fn labelled(&self, label: &str) -> Option<Arc<Loaded>> {
        let (_, target) = self.labels.iter().find(|(l, _)| l == label)?;
        self.find(target).map(|e| e.loaded.clone())
    }

    /// The labels, as `return (vcl(...))` may name them.
    pub fn label_names(&self) -> Vec<String> {
        self.labels.iter().map(|(l, _)| l.clone()).collect()
    }

    pub fn find(&self, name: &str) -> Option<&VclEntry> {
        self.entries.iter().find(|e| e.loaded.name == name)
    }

    /// Whether a program is available for use: not set cold, active, or
    /// labelled (a label keeps its program warm, as in Varnish).
    pub fn is_warm(&self, e: &VclEntry) -> bool {
        e.state != VclState::Cold
            || e.loaded.name == self.active
            || self.labels.iter().any(|(_, t)| *t == e.loaded.name)
    }

    /// Sets the VCL counters from the registry, and tells each program's
    /// backends whether it is warm (their probes pause when it is not).
    pub fn count(&self) {
        use lacquer_core::counters::{Counter, COUNTERS};
        for e in &self.entries {
            let warm = self.is_warm(e);
            for b in e.loaded.backends.iter().flatten() {
                b.set_warm(warm);
            }
        }
        COUNTERS.set(Counter::n_vcl, self.entries.len() as u64);
        let warm = self.entries.iter().filter(|e| self.is_warm(e)).count();
        COUNTERS.set(Counter::n_vcl_avail, warm as u64);
        let backends: usize = self
            .entries
            .iter()
            .map(|e| e.loaded.backends.iter().flatten().count())
            .sum();
        COUNTERS.set(Counter::n_backend, backends as u64);
        let mut vmods: Vec<&str> = Vec::new();
        for e in &self.entries {
            for m in &e.loaded.program.imports {
                if !vmods.contains(&m.as_str()) {
                    vmods.push(m);
                }
            }
        }
        COUNTERS.set(Counter::vmods, vmods.len() as u64);
    }
}

/// The program new requests run, with a generation number that moves
/// whenever it changes: a session keeps the program its last request ran
/// and looks again only when the number moved, so that a request writes
/// nothing shared to find its program (the lock's word and the program's
/// reference count were two shared writes a request).
pub(crate) struct ActiveVcl {
    program: std::sync::RwLock<Arc<Loaded>>,
    /// Moved under the write lock, after the program changed.
    generation: AtomicU64,
}

impl ActiveVcl {
    pub fn new(loaded: Arc<Loaded>) -> ActiveVcl {
        ActiveVcl {
            program: std::sync::RwLock::new(loaded),
            generation: AtomicU64::new(0),
        }
    }

    /// The program now active.
    pub fn get(&self) -> Arc<Loaded> {
        self.program
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Makes `loaded` the program new requests run.
    pub fn set(&self, loaded: Arc<Loaded>) {
        let mut program = self.program.write().unwrap_or_else(|p| p.into_inner());
        *program = loaded;
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// The program now active, in `held` (a session's): read again only
    /// when the active program changed since `held` was filled.
    pub fn current<'a>(&self, held: &'a mut Option<HeldVcl>) -> &'a Arc<Loaded> {
        let generation = self.generation.load(Ordering::Acquire);
        if held.as_ref().is_some_and(|h| h.generation != generation) {
            *held = None;
        }
        &held
            .get_or_insert_with(|| {
                let program = self.program.read().unwrap_or_else(|p| p.into_inner());
                HeldVcl {
                    loaded: program.clone(),
                    // Read under the lock, which every change holds.
                    generation: self.generation.load(Ordering::Relaxed),
                }
            })
            .loaded
    }
}

/// The program a session's requests run while it is busy: it counts as
/// a reference (`busy` in `vcl.list`) until the session is idle past
/// `timeout_linger`, as a program a Varnish worker thread keeps does.
pub(crate) struct HeldVcl {
    loaded: Arc<Loaded>,
    generation: u64,
}

/// A protocol version as VCL's `*.proto` reads it (`HTTP/1.1`).
pub(crate) fn proto_text(v: lacquer_http::Version) -> Value {
    Value::Str(Bytes::from_static(v.as_str().as_bytes()))
}

/// A parameter as VCL's `param.<name>` reads it.
pub(crate) fn param_value(params: &Params, index: usize) -> Value {
    let (kind, raw) = params.raw(index);
    match kind {
        Kind::Seconds => Value::Duration(f64::from_bits(raw)),
        Kind::Fraction => Value::Real(f64::from_bits(raw)),
        Kind::Bytes => Value::Bytes(raw as f64),
        Kind::Count | Kind::Features => Value::Int(raw.min(i64::MAX as u64) as i64),
        Kind::Bool => Value::Bool(raw != 0),
        Kind::Text => Value::Str(bytes::Bytes::copy_from_slice(params.text(index).as_bytes())),
    }
}

/// `storage.<name>.*` over the cache's stores.
pub(crate) fn storage_value(sh: &Shared, name: &str, field: StorageField) -> Value {
    let store = sh.cache.store_named(name);
    let Some(store) = store else {
        return match field {
            StorageField::Happy => Value::Bool(false),
            _ => Value::Bytes(0.0),
        };
    };
    let (used, free) = store.account();
    match field {
        StorageField::Happy => Value::Bool(true),
        StorageField::UsedSpace => Value::Bytes(used as f64),
        StorageField::FreeSpace => Value::Bytes(free as f64),
    }
}

static ERR_SECOND: AtomicU64 = AtomicU64::new(0);
static ERR_COUNT: AtomicU64 = AtomicU64::new(0);

/// Reports a VCL runtime error on standard error, at most ten a second.
pub(crate) fn report_error(xid: u64, msg: &str) {
    let second = lacquer_core::time::now() as u64;
    if ERR_SECOND.swap(second, Ordering::Relaxed) != second {
        ERR_COUNT.store(0, Ordering::Relaxed);
    }
    if ERR_COUNT.fetch_add(1, Ordering::Relaxed) < 10 {
        say!("VCL_Error {xid}: {msg}");
    }
}

/// Adds a ban given as one string (`ban()`, `std.ban()`).
pub(crate) fn add_ban(bans: &Bans, params: &Params, expr: &[u8]) -> Result<(), VclFailure> {
    let text =
        std::str::from_utf8(expr).map_err(|_| VclFailure::from("ban expression is not UTF-8"))?;
    let spec = BanSpec::parse_str(text)?;
    bans.add(spec, lacquer_core::time::now(), params.ban_dups());
    Ok(())
}

/// The host `vcl_init` runs against: no request, only the program.
struct InitHost<'a> {
    params: &'a Params,
    bans: &'a Bans,
    loaded: &'a Loaded,
    method: Method,
}

impl lacquer_vcl::Host for InitHost<'_> {
    fn method(&self) -> Method {
        self.method
    }
    fn get(&mut self, var: Var) -> Value {
        match var {
            Var::Now => Value::Time(lacquer_core::time::now()),
            Var::ServerHostname | Var::ServerIdentity => Value::str(&crate::hostname()),
            _ => Value::Unset,
        }
    }
    fn set(&mut self, _var: Var, _value: Value) -> Result<(), VclFailure> {
        Ok(())
    }
    fn unset(&mut self, _var: Var) {}
    fn header(&mut self, _kind: HttpKind, _name: &str) -> Option<Bytes> {
        None
    }
    fn set_header(
        &mut self,
        _kind: HttpKind,
        _name: &str,
        _value: Bytes,
    ) -> Result<(), VclFailure> {
        Ok(())
    }
    fn unset_header(&mut self, _kind: HttpKind, _name: &str) {}
    fn header_all(&mut self, _kind: HttpKind, _name: &str) -> Vec<Bytes> {
        Vec::new()
    }
    fn hash_data(&mut self, _data: &[u8]) {}
    fn synthetic(&mut self, _data: &[u8]) {}
    fn ban(&mut self, expr: &[u8]) -> Result<(), VclFailure> {
        add_ban(self.bans, self.params, expr)
    }
    fn param(&self, index: usize) -> Value {
        param_value(self.params, index)
    }
    fn storage(&self, _name: &str, _field: StorageField) -> Value {
        Value::Unset
    }
    fn healthy(&self, backend: usize) -> bool {
        self.loaded.healthy(backend)
    }
    fn log(&mut self, _msg: &[u8]) {}
    fn error(&mut self, msg: &str) {
        say!("vcl_init: {msg}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loaded(name: &str) -> Arc<Loaded> {
        let opts = lacquer_vcl::Options {
            unused_is_error: false,
            storages: Vec::new(),
            labels: Vec::new(),
            native_builtin: true,
        };
        let program = lacquer_vcl::compile_str(name, "vcl 4.1;\nbackend default none;\n", &opts)
            .unwrap_or_else(|f| panic!("{}", f.render()));
        Arc::new(Loaded {
            name: name.to_string(),
            program: Arc::new(program),
            backends: Vec::new(),
        })
    }

    #[test]
    fn a_session_keeps_its_program_until_another_becomes_active() {
        let first = loaded("first");
        let active = ActiveVcl::new(first.clone());
        let mut held = None;
        assert!(Arc::ptr_eq(active.current(&mut held), &first));
        // Ours, the active one's and the session's.
        assert_eq!(Arc::strong_count(&first), 3);
        for _ in 0..3 {
            assert!(Arc::ptr_eq(active.current(&mut held), &first));
        }
        assert_eq!(Arc::strong_count(&first), 3, "kept, not counted again");
        let second = loaded("second");
        active.set(second.clone());
        assert_eq!(Arc::strong_count(&first), 2, "the session still holds it");
        assert!(Arc::ptr_eq(active.current(&mut held), &second));
        assert_eq!(Arc::strong_count(&first), 1, "let go at the next request");
        assert!(Arc::ptr_eq(&active.get(), &second));
        // Back to the first: a session that held the second moves too.
        active.set(first.clone());
        assert!(Arc::ptr_eq(active.current(&mut held), &first));
        assert_eq!(Arc::strong_count(&second), 1);
    }
}
