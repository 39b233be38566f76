//! vmod directors: round_robin, fallback, random, hash and shard
//! (consistent hashing), each skipping sick backends, and `lookup`.

use crate::program::{Host, Program};
use crate::types::scope::*;
use crate::types::{BackendRef, Method, Type, Value};
use crate::vars::Var;
use crate::vmod::{
    dflt, enm, hash64, opt, random, req, ClassSpec, Ctx, Dflt, FuncSpec, MethodSpec, Param, Vmod,
    VmodObject,
};
use std::any::Any;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::RwLock;

type R = Result<Value, String>;

/// The backends of a director with their weights.
#[derive(Default)]
struct Members {
    list: RwLock<Vec<(BackendRef, f64)>>,
}

impl Members {
    fn add(&self, b: BackendRef, weight: f64) {
        let mut l = self.list.write().unwrap_or_else(|p| p.into_inner());
        l.push((b, weight));
    }

    fn remove(&self, b: BackendRef) {
        let mut l = self.list.write().unwrap_or_else(|p| p.into_inner());
        l.retain(|(x, _)| *x != b);
    }

    fn snapshot(&self) -> Vec<(BackendRef, f64)> {
        self.list.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn any_healthy(&self, prog: &Program, host: &mut dyn Host) -> bool {
        self.snapshot().iter().any(|(b, _)| prog.healthy(*b, host))
    }

    /// Picks among healthy members by weight, with `point` in [0, 1).
    fn weighted(&self, prog: &Program, host: &mut dyn Host, point: f64) -> Option<BackendRef> {
        let healthy: Vec<(BackendRef, f64)> = self
            .snapshot()
            .into_iter()
            .filter(|(b, w)| *w > 0.0 && prog.healthy(*b, host))
            .collect();
        let total: f64 = healthy.iter().map(|(_, w)| w).sum();
        if total <= 0.0 {
            return None;
        }
        let mut at = point * total;
        for (b, w) in &healthy {
            if at < *w {
                return Some(*b);
            }
            at -= w;
        }
        healthy.last().map(|(b, _)| *b)
    }
}

fn backend_arg(v: &Value) -> BackendRef {
    match v {
        Value::Backend(b) => *b,
        _ => BackendRef::None,
    }
}

fn me(index: usize) -> R {
    Ok(Value::Backend(BackendRef::Director(index)))
}

macro_rules! object {
    ($t:ty) => {
        impl $t {
            fn of(o: &dyn VmodObject) -> &$t {
                o.as_any()
                    .downcast_ref::<$t>()
                    .expect("method called on its own class")
            }
        }
    };
}

// round_robin

#[derive(Default)]
struct RoundRobin {
    members: Members,
    next: AtomicUsize,
}
object!(RoundRobin);

impl VmodObject for RoundRobin {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn resolve(&self, prog: &Program, host: &mut dyn Host) -> Option<BackendRef> {
        let list = self.members.snapshot();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        (0..list.len())
            .map(|i| list[(start + i) % list.len()].0)
            .find(|b| prog.healthy(*b, host))
    }
    fn healthy(&self, prog: &Program, host: &mut dyn Host) -> bool {
        self.members.any_healthy(prog, host)
    }
}

fn rr_new(_: &str, _: &[Value]) -> Result<Box<dyn VmodObject>, String> {
    Ok(Box::<RoundRobin>::default())
}

fn rr_add(o: &dyn VmodObject, _: usize, _: &mut Ctx<'_>, a: &[Value]) -> R {
    RoundRobin::of(o).members.add(backend_arg(&a[0]), 1.0);
    Ok(Value::Unset)
}

fn rr_remove(o: &dyn VmodObject, _: usize, _: &mut Ctx<'_>, a: &[Value]) -> R {
    RoundRobin::of(o).members.remove(backend_arg(&a[0]));
    Ok(Value::Unset)
}

// fallback

struct Fallback {
    members: Members,
    sticky: bool,
    current: AtomicUsize,
}
object!(Fallback);

impl VmodObject for Fallback {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn resolve(&self, prog: &Program, host: &mut dyn Host) -> Option<BackendRef> {
        let list = self.members.snapshot();
        let start = if self.sticky {
            self.current.load(Ordering::Relaxed).min(list.len())
        } else {
            0
        };
        // Sticky: stay on the current one while healthy, else the first
        // healthy in order from the top.
        if self.sticky && start < list.len() && prog.healthy(list[start].0, host) {
            return Some(list[start].0);
        }
        let (i, b) = list
            .iter()
            .enumerate()
            .find(|(_, (b, _))| prog.healthy(*b, host))?;
        self.current.store(i, Ordering::Relaxed);
        Some(b.0)
    }
    fn healthy(&self, prog: &Program, host: &mut dyn Host) -> bool {
        self.members.any_healthy(prog, host)
    }
}

fn fb_new(_: &str, a: &[Value]) -> Result<Box<dyn VmodObject>, String> {
    Ok(Box::new(Fallback {
        members: Members::default(),
        sticky: a[0].as_bool(),
        current: AtomicUsize::new(0),
    }))
}

fn fb_add(o: &dyn VmodObject, _: usize, _: &mut Ctx<'_>, a: &[Value]) -> R {
    Fallback::of(o).members.add(backend_arg(&a[0]), 1.0);
    Ok(Value::Unset)
}

fn fb_remove(o: &dyn VmodObject, _: usize, _: &mut Ctx<'_>, a: &[Value]) -> R {
    Fallback::of(o).members.remove(backend_arg(&a[0]));
    Ok(Value::Unset)
}

// random

#[derive(Default)]
struct Random {
    members: Members,
}
object!(Random);

impl VmodObject for Random {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn resolve(&self, prog: &Program, host: &mut dyn Host) -> Option<BackendRef> {
        self.members.weighted(prog, host, random())
    }
    fn healthy(&self, prog: &Program, host: &mut dyn Host) -> bool {
        self.members.any_healthy(prog, host)
    }
}

fn random_new(_: &str, _: &[Value]) -> Result<Box<dyn VmodObject>, String> {
    Ok(Box::<Random>::default())
}

fn random_add(o: &dyn VmodObject, _: usize, _: &mut Ctx<'_>, a: &[Value]) -> R {
    Random::of(o).members.add(backend_arg(&a[0]), a[1].as_f64());
    Ok(Value::Unset)
}

fn random_remove(o: &dyn VmodObject, _: usize, _: &mut Ctx<'_>, a: &[Value]) -> R {
    Random::of(o).members.remove(backend_arg(&a[0]));
    Ok(Value::Unset)
}

// hash

#[derive(Default)]
struct Hash {
    members: Members,
}
object!(Hash);

impl VmodObject for Hash {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn healthy(&self, prog: &Program, host: &mut dyn Host) -> bool {
        self.members.any_healthy(prog, host)
    }
}

fn hash_new(_: &str, _: &[Value]) -> Result<Box<dyn VmodObject>, String> {
    Ok(Box::<Hash>::default())
}

fn hash_add(o: &dyn VmodObject, _: usize, _: &mut Ctx<'_>, a: &[Value]) -> R {
    Hash::of(o).members.add(backend_arg(&a[0]), a[1].as_f64());
    Ok(Value::Unset)
}

fn hash_remove(o: &dyn VmodObject, _: usize, _: &mut Ctx<'_>, a: &[Value]) -> R {
    Hash::of(o).members.remove(backend_arg(&a[0]));
    Ok(Value::Unset)
}

fn hash_backend(o: &dyn VmodObject, _: usize, c: &mut Ctx<'_>, a: &[Value]) -> R {
    let point = (hash64(a[0].as_bytes()) >> 11) as f64 / (1u64 << 53) as f64;
    let b = Hash::of(o).members.weighted(c.prog, c.host, point);
    Ok(Value::Backend(b.unwrap_or(BackendRef::None)))
}

// shard

struct ShardMember {
    backend: BackendRef,
    ident: String,
    weight: f64,
}

#[derive(Default)]
struct ShardState {
    members: Vec<ShardMember>,
    replicas: usize,
    /// (point, member index), sorted by point.
    ring: Vec<(u32, usize)>,
    dirty: bool,
    warmup: f64,
}

impl ShardState {
    fn rebuild(&mut self) {
        self.ring.clear();
        for (i, m) in self.members.iter().enumerate() {
            let n = ((self.replicas as f64) * m.weight.max(0.0))
                .round()
                .max(1.0) as usize;
            for r in 0..n {
                let point = hash64(format!("{}{}", m.ident, r).as_bytes()) >> 32;
                self.ring.push((point as u32, i));
            }
        }
        self.ring.sort_unstable();
        self.dirty = false;
    }
}

struct Shard {
    state: RwLock<ShardState>,
}
object!(Shard);

impl Shard {
    fn write(&self) -> std::sync::RwLockWriteGuard<'_, ShardState> {
        self.state.write().unwrap_or_else(|p| p.into_inner())
    }

    /// The member for a key: the `alt`-th distinct member clockwise from
    /// the key, skipping sick ones as `healthy` says.
    fn pick(
        &self,
        prog: &Program,
        host: &mut dyn Host,
        key: u32,
        alt: usize,
        healthy: &str,
        warmup: f64,
    ) -> Option<BackendRef> {
        if self.state.read().map_or(true, |s| s.dirty) {
            self.write().rebuild();
        }
        let s = self.state.read().unwrap_or_else(|p| p.into_inner());
        if s.ring.is_empty() {
            return None;
        }
        let start = s.ring.partition_point(|(p, _)| *p < key);
        let mut seen = Vec::new();
        let mut order = Vec::new();
        for i in 0..s.ring.len() {
            let m = s.ring[(start + i) % s.ring.len()].1;
            if !seen.contains(&m) {
                seen.push(m);
                order.push(m);
            }
        }
        let is_healthy = |m: usize, host: &mut dyn Host| prog.healthy(s.members[m].backend, host);
        let chosen = match healthy {
            "IGNORE" => order.get(alt.min(order.len() - 1)).copied(),
            "ALL" => {
                let healthy: Vec<usize> = order
                    .iter()
                    .copied()
                    .filter(|&m| is_healthy(m, host))
                    .collect();
                healthy
                    .get(alt.min(healthy.len().saturating_sub(1)))
                    .copied()
            }
            _ => {
                let first = alt.min(order.len() - 1);
                order[first..]
                    .iter()
                    .copied()
                    .find(|&m| is_healthy(m, host))
            }
        }?;
        let warmup = if warmup < 0.0 { s.warmup } else { warmup };
        if warmup > 0.0 && random() < warmup {
            let pos = order.iter().position(|&m| m == chosen).unwrap_or(0);
            if let Some(&next) = order[pos + 1..].iter().find(|&&m| is_healthy(m, host)) {
                return Some(s.members[next].backend);
            }
        }
        Some(s.members[chosen].backend)
    }
}

impl VmodObject for Shard {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn resolve(&self, prog: &Program, host: &mut dyn Host) -> Option<BackendRef> {
        let key = shard_key(host, "HASH", &Value::Unset, &Value::Unset);
        self.pick(prog, host, key, 0, "CHOSEN", -1.0)
    }
    fn healthy(&self, prog: &Program, host: &mut dyn Host) -> bool {
        let members: Vec<BackendRef> = self
            .state
            .read()
            .map(|s| s.members.iter().map(|m| m.backend).collect())
            .unwrap_or_default();
        members.iter().any(|b| prog.healthy(*b, host))
    }
}

fn shard_key(host: &mut dyn Host, by: &str, key: &Value, blob: &Value) -> u32 {
    let backend_side = host.method().bit() & BACKEND != 0;
    match by {
        "KEY" => key.as_i64() as u32,
        "BLOB" => (hash64(blob.as_bytes()) >> 32) as u32,
        "URL" => {
            let url = host.get(if backend_side {
                Var::BereqUrl
            } else {
                Var::ReqUrl
            });
            (hash64(url.as_bytes()) >> 32) as u32
        }
        _ => {
            let h = host.get(if backend_side {
                Var::BereqHash
            } else {
                Var::ReqHash
            });
            let h = if h.as_bytes().is_empty() {
                host.get(if backend_side {
                    Var::BereqUrl
                } else {
                    Var::ReqUrl
                })
            } else {
                h
            };
            (hash64(h.as_bytes()) >> 32) as u32
        }
    }
}

fn shard_new(_: &str, _: &[Value]) -> Result<Box<dyn VmodObject>, String> {
    Ok(Box::new(Shard {
        state: RwLock::new(ShardState {
            replicas: 67,
            dirty: true,
            ..Default::default()
        }),
    }))
}

fn shard_add(o: &dyn VmodObject, _: usize, c: &mut Ctx<'_>, a: &[Value]) -> R {
    let backend = backend_arg(&a[0]);
    let ident = if a[1].is_unset() {
        c.prog.backend_name(backend).to_string()
    } else {
        String::from_utf8_lossy(a[1].as_bytes()).into_owned()
    };
    let weight = if a[3].is_unset() { 1.0 } else { a[3].as_f64() };
    let mut s = Shard::of(o).write();
    if s.members
        .iter()
        .any(|m| m.ident == ident && m.backend == backend)
    {
        return Ok(Value::Bool(false));
    }
    s.members.push(ShardMember {
        backend,
        ident,
        weight,
    });
    s.dirty = true;
    Ok(Value::Bool(true))
}

fn shard_remove(o: &dyn VmodObject, _: usize, _: &mut Ctx<'_>, a: &[Value]) -> R {
    let backend = backend_arg(&a[0]);
    let ident = String::from_utf8_lossy(a[1].as_bytes()).into_owned();
    let mut s = Shard::of(o).write();
    let before = s.members.len();
    s.members.retain(|m| {
        !((a[0].is_unset() || m.backend == backend) && (a[1].is_unset() || m.ident == ident))
    });
    s.dirty = true;
    Ok(Value::Bool(s.members.len() != before))
}

fn shard_clear(o: &dyn VmodObject, _: usize, _: &mut Ctx<'_>, _: &[Value]) -> R {
    let mut s = Shard::of(o).write();
    s.members.clear();
    s.dirty = true;
    Ok(Value::Bool(true))
}

fn shard_reconfigure(o: &dyn VmodObject, _: usize, _: &mut Ctx<'_>, a: &[Value]) -> R {
    let mut s = Shard::of(o).write();
    s.replicas = a[0].as_i64().clamp(1, 10_000) as usize;
    s.rebuild();
    Ok(Value::Bool(true))
}

fn shard_set_warmup(o: &dyn VmodObject, _: usize, _: &mut Ctx<'_>, a: &[Value]) -> R {
    let p = a[0].as_f64();
    if !(0.0..=1.0).contains(&p) {
        return Err("shard.set_warmup: probability must be between 0 and 1".into());
    }
    Shard::of(o).write().warmup = p;
    Ok(Value::Unset)
}

fn shard_set_rampup(_: &dyn VmodObject, _: usize, _: &mut Ctx<'_>, _: &[Value]) -> R {
    Ok(Value::Unset)
}

fn shard_key_fn(_: &dyn VmodObject, _: usize, _: &mut Ctx<'_>, a: &[Value]) -> R {
    Ok(Value::Int(i64::from(
        (hash64(a[0].as_bytes()) >> 32) as u32,
    )))
}

fn shard_backend(o: &dyn VmodObject, idx: usize, c: &mut Ctx<'_>, a: &[Value]) -> R {
    let by = match a[0] {
        Value::Enum(e) => e,
        _ => "HASH",
    };
    if by == "KEY" && a[1].is_unset() {
        return Err("shard.backend: by=KEY needs a key".into());
    }
    let resolve = match a[8] {
        Value::Enum(e) => e,
        _ => {
            if matches!(c.method, Method::Init) {
                "LAZY"
            } else {
                "NOW"
            }
        }
    };
    if resolve == "LAZY" {
        return me(idx);
    }
    let key = shard_key(c.host, by, &a[1], &a[2]);
    let healthy = match a[6] {
        Value::Enum(e) => e,
        _ => "CHOSEN",
    };
    let b = Shard::of(o).pick(
        c.prog,
        c.host,
        key,
        a[3].as_i64().max(0) as usize,
        healthy,
        a[4].as_f64(),
    );
    Ok(Value::Backend(b.unwrap_or(BackendRef::None)))
}

fn director_backend(_: &dyn VmodObject, idx: usize, _: &mut Ctx<'_>, _: &[Value]) -> R {
    me(idx)
}

fn lookup(c: &mut Ctx<'_>, a: &[Value]) -> R {
    let name = a[0].as_bytes();
    let found = c
        .prog
        .backends
        .iter()
        .position(|b| b.name.as_bytes() == name);
    Ok(Value::Backend(
        found.map_or(BackendRef::None, BackendRef::Backend),
    ))
}

use Type as T;

const fn m(
    name: &'static str,
    ret: Type,
    params: &'static [Param],
    scope: u16,
    call: crate::vmod::MethodCall,
) -> MethodSpec {
    MethodSpec {
        name,
        ret,
        params,
        scope,
        call,
    }
}

const BE: &[Param] = &[req("backend", T::Backend)];
const BE_W: &[Param] = &[req("backend", T::Backend), req("weight", T::Real)];

static CLASSES: &[ClassSpec] = &[
    ClassSpec {
        vmod: "directors",
        name: "round_robin",
        params: &[],
        make: rr_new,
        methods: &[
            m("add_backend", T::Void, BE, ALL, rr_add),
            m("remove_backend", T::Void, BE, ALL, rr_remove),
            m("backend", T::Backend, &[], ALL, director_backend),
        ],
    },
    ClassSpec {
        vmod: "directors",
        name: "fallback",
        params: &[dflt("sticky", T::Bool, Dflt::Bool(false))],
        make: fb_new,
        methods: &[
            m("add_backend", T::Void, BE, ALL, fb_add),
            m("remove_backend", T::Void, BE, ALL, fb_remove),
            m("backend", T::Backend, &[], ALL, director_backend),
        ],
    },
    ClassSpec {
        vmod: "directors",
        name: "random",
        params: &[],
        make: random_new,
        methods: &[
            m("add_backend", T::Void, BE_W, ALL, random_add),
            m("remove_backend", T::Void, BE, ALL, random_remove),
            m("backend", T::Backend, &[], ALL, director_backend),
        ],
    },
    ClassSpec {
        vmod: "directors",
        name: "hash",
        params: &[],
        make: hash_new,
        methods: &[
            m(
                "add_backend",
                T::Void,
                &[
                    req("backend", T::Backend),
                    dflt("weight", T::Real, Dflt::Real(1.0)),
                ],
                ALL,
                hash_add,
            ),
            m("remove_backend", T::Void, BE, ALL, hash_remove),
            m(
                "backend",
                T::Backend,
                &[req("string", T::String)],
                CLIENT_BACKEND,
                hash_backend,
            ),
        ],
    },
    ClassSpec {
        vmod: "directors",
        name: "shard",
        params: &[],
        make: shard_new,
        methods: &[
            m(
                "add_backend",
                T::Bool,
                &[
                    req("backend", T::Backend),
                    opt("ident", T::String),
                    opt("rampup", T::Duration),
                    opt("weight", T::Real),
                ],
                ALL,
                shard_add,
            ),
            m(
                "remove_backend",
                T::Bool,
                &[opt("backend", T::Backend), opt("ident", T::String)],
                ALL,
                shard_remove,
            ),
            m("clear", T::Bool, &[], ALL, shard_clear),
            m(
                "reconfigure",
                T::Bool,
                &[dflt("replicas", T::Int, Dflt::Int(67))],
                ALL,
                shard_reconfigure,
            ),
            m(
                "set_warmup",
                T::Void,
                &[dflt("probability", T::Real, Dflt::Real(0.0))],
                INIT,
                shard_set_warmup,
            ),
            m(
                "set_rampup",
                T::Void,
                &[dflt("duration", T::Duration, Dflt::Duration(0.0))],
                INIT,
                shard_set_rampup,
            ),
            m(
                "key",
                T::Int,
                &[req("string", T::String)],
                ALL,
                shard_key_fn,
            ),
            m(
                "backend",
                T::Backend,
                &[
                    enm("by", &["HASH", "URL", "KEY", "BLOB"], Dflt::Enum("HASH")),
                    opt("key", T::Int),
                    opt("key_blob", T::Blob),
                    dflt("alt", T::Int, Dflt::Int(0)),
                    dflt("warmup", T::Real, Dflt::Real(-1.0)),
                    dflt("rampup", T::Bool, Dflt::Bool(true)),
                    enm(
                        "healthy",
                        &["CHOSEN", "IGNORE", "ALL"],
                        Dflt::Enum("CHOSEN"),
                    ),
                    opt("param", T::Blob),
                    enm("resolve", &["NOW", "LAZY"], Dflt::Optional),
                ],
                ALL,
                shard_backend,
            ),
        ],
    },
];

static FUNCTIONS: &[FuncSpec] = &[FuncSpec {
    vmod: "directors",
    name: "lookup",
    ret: T::Backend,
    params: &[req("name", T::String)],
    scope: INIT,
    call: lookup,
}];

pub const VMOD: Vmod = Vmod {
    name: "directors",
    functions: FUNCTIONS,
    classes: CLASSES,
};
