//! vmod directors' `shard`: consistent hashing on varnishd's own ring
//! ([`lacquer_core::ring`]), so that a key picks the backend varnishd
//! picks. Changes to the members queue up and are applied together by
//! `.reconfigure()` (or, without one, before the first pick, with 67
//! replicas), each added member getting its points then; a pick walks
//! the ring from the key as varnishd's does, `alt`, `healthy` and
//! `warmup` included.

use crate::program::{Host, Program};
use crate::types::scope::*;
use crate::types::{BackendRef, Method, Type, Value};
use crate::vars::Var;
use crate::vmod::{
    backend_arg, dflt, enm, m, me, opt, random, req, ClassSpec, Ctx, Dflt, DirectorView, VmodObject,
};
use lacquer_core::ring::{self, Ring};
use std::any::Any;
use std::sync::RwLock;

type R = Result<Value, crate::failure::VclFailure>;

/// varnishd's default number of points a member of weight 1 gets.
const DEFAULT_REPLICAS: u32 = 67;

#[derive(Clone)]
struct Member {
    backend: BackendRef,
    /// The ident given to `.add_backend()`, if one (not empty) was.
    ident: Option<String>,
    /// What its points are made from: the ident, else the backend's name.
    name: String,
    weight: f64,
    /// Its number of points, fixed when it was added.
    replicas: u32,
}

/// A change to the members, waiting for `.reconfigure()`.
enum Change {
    Add(Member),
    /// By ident where one is given (the backend is then not looked at),
    /// else by backend.
    Remove {
        backend: BackendRef,
        ident: Option<String>,
    },
    Clear,
}

#[derive(Default)]
struct ShardState {
    members: Vec<Member>,
    ring: Ring,
    pending: Vec<Change>,
    /// `.set_warmup()`: how often a pick goes to the next backend instead.
    warmup: f64,
}

impl ShardState {
    /// Applies the waiting changes, a member added now getting `replicas`
    /// points for each unit of its weight. Members keep their order, a
    /// new one taking the first place a removal left, and the last ones
    /// moving into the places still empty at the end.
    fn apply(&mut self, replicas: u32) {
        let mut changes = std::mem::take(&mut self.pending);
        let mut slots: Vec<Option<Member>> = self.members.drain(..).map(Some).collect();
        if let Some(last_clear) = changes.iter().rposition(|c| matches!(c, Change::Clear)) {
            changes.drain(..=last_clear);
            slots.clear();
        }
        for change in changes {
            match change {
                Change::Clear => slots.clear(),
                Change::Remove { backend, ident } => {
                    for slot in &mut slots {
                        let hit = slot.as_ref().is_some_and(|m| match &ident {
                            Some(ident) => m.name == *ident,
                            None => m.backend == backend,
                        });
                        if hit {
                            *slot = None;
                        }
                    }
                }
                Change::Add(member) => {
                    let duplicate = slots.iter().flatten().any(|m| {
                        if m.ident.is_none() && member.ident.is_none() {
                            m.backend == member.backend
                        } else {
                            m.name == member.name
                        }
                    });
                    if duplicate {
                        continue;
                    }
                    let member = Member {
                        replicas: ring::replicas_for(replicas, member.weight),
                        ..member
                    };
                    match slots.iter().position(Option::is_none) {
                        Some(hole) => slots[hole] = Some(member),
                        None => slots.push(Some(member)),
                    }
                }
            }
        }
        loop {
            while matches!(slots.last(), Some(None)) {
                slots.pop();
            }
            let Some(hole) = slots.iter().position(Option::is_none) else {
                break;
            };
            let last = slots.pop().flatten();
            slots[hole] = last;
        }
        self.members = slots.into_iter().flatten().collect();
        let points: Vec<(&[u8], u32)> = self
            .members
            .iter()
            .map(|m| (m.name.as_bytes(), m.replicas))
            .collect();
        self.ring = Ring::build(&points);
    }
}

struct Shard {
    state: RwLock<ShardState>,
}

impl Shard {
    fn of(o: &dyn VmodObject) -> &Shard {
        o.as_any().downcast_ref().expect("a shard director")
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, ShardState> {
        self.state.write().unwrap_or_else(|p| p.into_inner())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, ShardState> {
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }

    /// The backend for a key, as varnishd's shard director picks it.
    fn pick(&self, prog: &Program, host: &mut dyn Host, how: &Pick) -> Option<BackendRef> {
        if !self.read().pending.is_empty() {
            // Changes no `.reconfigure()` applied take effect now, as
            // varnishd applies them when the task that made them ends.
            self.write().apply(DEFAULT_REPLICAS);
        }
        let s = self.read();
        let n = s.members.len();
        if s.ring.is_empty() {
            return None;
        }
        let healthy_at = |m: usize, host: &mut dyn Host| prog.healthy(s.members[m].backend, host);
        let mut walk = Candidates {
            order: s.ring.walk(how.key),
            previous: None,
            last: None,
        };
        let alt = how.alt.min(n - 1);
        if alt > 0 && walk.next(alt - 1, how.healthy == "ALL", host, &healthy_at) {
            return walk.previous.map(|m| s.members[m].backend);
        }
        if walk.next(0, how.healthy != "IGNORE", host, &healthy_at) {
            return walk.previous.map(|m| s.members[m].backend);
        }
        let chosen = walk.last?;
        let warmup = if how.warmup < 0.0 {
            s.warmup
        } else {
            how.warmup
        };
        if alt > 0
            || how.healthy == "IGNORE"
            || (!how.rampup && warmup == 0.0)
            || walk.next(0, true, host, &healthy_at)
        {
            return Some(s.members[chosen].backend);
        }
        // The next healthy backend takes the key `warmup` of the time
        // (a backend's own ramp-up after it turns healthy is not kept).
        if warmup == 0.0 || random() > warmup {
            return Some(s.members[chosen].backend);
        }
        walk.last.map(|m| s.members[m].backend)
    }
}

/// The members met on a walk round the ring, as varnishd's shard
/// director keeps them: the last one taken and the one before.
struct Candidates<'r> {
    order: ring::Walk<'r>,
    previous: Option<usize>,
    last: Option<usize>,
}

impl Candidates<'_> {
    /// Skips `skip` members (only healthy ones count when
    /// `healthy_only`), then takes the next; true when the ring ran out
    /// first.
    fn next(
        &mut self,
        mut skip: usize,
        healthy_only: bool,
        host: &mut dyn Host,
        healthy_at: &dyn Fn(usize, &mut dyn Host) -> bool,
    ) -> bool {
        for member in self.order.by_ref() {
            let healthy = healthy_at(member, host);
            if !healthy && healthy_only {
                continue;
            }
            if skip > 0 {
                skip -= 1;
                if healthy {
                    self.previous = Some(member);
                }
                continue;
            }
            if let Some(last) = self.last {
                self.previous = Some(last);
            }
            self.last = Some(member);
            return false;
        }
        true
    }
}

impl VmodObject for Shard {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn director(&self) -> Option<DirectorView> {
        let members = self
            .read()
            .members
            .iter()
            .map(|m| (m.backend, Some(m.weight)))
            .collect();
        Some(DirectorView {
            kind: "shard",
            members,
            current: None,
        })
    }
    fn resolve(&self, prog: &Program, host: &mut dyn Host) -> Option<BackendRef> {
        let key = hash_key(host);
        let how = Pick {
            key,
            alt: 0,
            warmup: -1.0,
            rampup: true,
            healthy: "CHOSEN",
        };
        self.pick(prog, host, &how)
    }
    fn healthy(&self, prog: &Program, host: &mut dyn Host) -> bool {
        let members: Vec<BackendRef> = self.read().members.iter().map(|m| m.backend).collect();
        members.iter().any(|b| prog.healthy(*b, host))
    }
}

/// What a pick is asked for.
struct Pick {
    key: u32,
    alt: usize,
    /// -1: the director's `.set_warmup()`.
    warmup: f64,
    rampup: bool,
    healthy: &'static str,
}

/// Whether a method runs on the backend side, where varnishd has the
/// request's digest (`vcl_pipe` included).
fn backend_side(host: &dyn Host) -> bool {
    host.method().bit() & BACKEND != 0 || matches!(host.method(), Method::Pipe)
}

/// `by=HASH`: on the backend side, the first four bytes of the request's
/// digest; on the client side, varnishd hashes the URL instead.
fn hash_key(host: &mut dyn Host) -> u32 {
    if backend_side(host) {
        let input = host.get(Var::BereqHash);
        if !input.as_bytes().is_empty() {
            return ring::digest_key(input.as_bytes());
        }
    }
    url_key(host)
}

/// `by=URL`: the hash of `req.url`, or `bereq.url` on the backend side.
fn url_key(host: &mut dyn Host) -> u32 {
    let var = if backend_side(host) {
        Var::BereqUrl
    } else {
        Var::ReqUrl
    };
    ring::hash32([host.get(var).as_bytes()])
}

fn shard_new(_: &str, _: &[Value]) -> Result<Box<dyn VmodObject>, String> {
    Ok(Box::new(Shard {
        state: RwLock::new(ShardState::default()),
    }))
}

fn shard_add(o: &dyn VmodObject, _: usize, c: &mut Ctx<'_>, a: &[Value]) -> R {
    let backend = backend_arg(&a[0]);
    let ident = Some(String::from_utf8_lossy(a[1].as_bytes()).into_owned())
        .filter(|i| !a[1].is_unset() && !i.is_empty());
    let name = ident
        .clone()
        .unwrap_or_else(|| c.prog.backend_name(backend).to_string());
    let weight = if a[3].is_unset() { 1.0 } else { a[3].as_f64() };
    Shard::of(o).write().pending.push(Change::Add(Member {
        backend,
        ident,
        name,
        weight,
        replicas: 0,
    }));
    Ok(Value::Bool(true))
}

fn shard_remove(o: &dyn VmodObject, _: usize, _: &mut Ctx<'_>, a: &[Value]) -> R {
    if a[0].is_unset() && a[1].is_unset() {
        return Err("shard.remove_backend: a backend or an ident is needed".into());
    }
    let ident = Some(String::from_utf8_lossy(a[1].as_bytes()).into_owned())
        .filter(|i| !a[1].is_unset() && !i.is_empty());
    Shard::of(o).write().pending.push(Change::Remove {
        backend: backend_arg(&a[0]),
        ident,
    });
    Ok(Value::Bool(true))
}

fn shard_clear(o: &dyn VmodObject, _: usize, _: &mut Ctx<'_>, _: &[Value]) -> R {
    Shard::of(o).write().pending.push(Change::Clear);
    Ok(Value::Bool(true))
}

fn shard_reconfigure(o: &dyn VmodObject, _: usize, c: &mut Ctx<'_>, a: &[Value]) -> R {
    let replicas = a[0].as_i64();
    let Ok(replicas @ 1..) = u32::try_from(replicas) else {
        c.host
            .error(&format!("shard.reconfigure: invalid replicas {replicas}"));
        return Ok(Value::Bool(false));
    };
    let mut s = Shard::of(o).write();
    if s.pending.is_empty() {
        return Ok(Value::Bool(true));
    }
    s.apply(replicas);
    if s.members.is_empty() {
        c.host.error("shard.reconfigure: no backends");
        return Ok(Value::Bool(false));
    }
    Ok(Value::Bool(true))
}

fn shard_set_warmup(o: &dyn VmodObject, _: usize, _: &mut Ctx<'_>, a: &[Value]) -> R {
    // As varnishd: a probability outside [0, 1) is ignored.
    let p = a[0].as_f64();
    if (0.0..1.0).contains(&p) {
        Shard::of(o).write().warmup = p;
    }
    Ok(Value::Unset)
}

fn shard_set_rampup(_: &dyn VmodObject, _: usize, _: &mut Ctx<'_>, _: &[Value]) -> R {
    Ok(Value::Unset)
}

fn shard_key_fn(_: &dyn VmodObject, _: usize, _: &mut Ctx<'_>, a: &[Value]) -> R {
    Ok(Value::Int(i64::from(ring::hash32([a[0].as_bytes()]))))
}

fn shard_backend(o: &dyn VmodObject, idx: usize, c: &mut Ctx<'_>, a: &[Value]) -> R {
    let by = match a[0] {
        Value::Enum(e) => e,
        _ => "HASH",
    };
    let resolve = match a[8] {
        Value::Enum(e) => e,
        _ if matches!(c.method, Method::Init | Method::Fini) => "LAZY",
        _ => "NOW",
    };
    if resolve == "LAZY" {
        return me(idx);
    }
    let (key, blob) = (&a[1], &a[2]);
    if matches!(by, "HASH" | "URL") && !(key.is_unset() && blob.is_unset()) {
        return Err(format!("shard.backend: by={by} takes no key").into());
    }
    let alt = a[3].as_i64();
    let Ok(alt) = usize::try_from(alt) else {
        return Err(format!("shard.backend: invalid alt {alt}").into());
    };
    let warmup = a[4].as_f64();
    if warmup != -1.0 && !(0.0..=1.0).contains(&warmup) {
        return Err(format!("shard.backend: invalid warmup {warmup}").into());
    }
    let key = match by {
        "KEY" if key.is_unset() => return Err("shard.backend: by=KEY needs a key".into()),
        "KEY" => {
            let k = key.as_i64();
            u32::try_from(k).map_err(|_| format!("shard.backend: invalid key argument {k}"))?
        }
        "BLOB" => ring::blob_key(blob.as_bytes()),
        "URL" => url_key(c.host),
        _ => hash_key(c.host),
    };
    let healthy = match a[6] {
        Value::Enum(e) => e,
        _ => "CHOSEN",
    };
    let how = Pick {
        key,
        alt,
        warmup,
        rampup: !matches!(a[5], Value::Bool(false)),
        healthy,
    };
    let b = Shard::of(o).pick(c.prog, c.host, &how);
    Ok(Value::Backend(b.unwrap_or(BackendRef::None)))
}

use Type as T;

/// The `directors.shard` class.
pub(crate) const SHARD: ClassSpec = ClassSpec {
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
};
