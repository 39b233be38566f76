//! vmod directors: round_robin, fallback, random and hash, each skipping
//! sick backends, and `lookup`; shard is in `vmod_shard`. The hash
//! director picks as varnishd 7.1's does, from the shard director's hash.

use crate::program::{Host, Program};
use crate::types::scope::*;
use crate::types::{BackendRef, Type, Value};
use crate::vmod::{
    backend_arg, dflt, m, me, random, req, ClassSpec, Ctx, Dflt, DirectorView, FuncSpec, Param,
    Vmod, VmodObject,
};
use std::any::Any;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::RwLock;

type R = Result<Value, crate::failure::VclFailure>;

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

    /// The members for `backend.list`, weighted or not.
    fn view(&self, kind: &'static str, weighted: bool) -> Option<DirectorView> {
        let members = self
            .snapshot()
            .into_iter()
            .map(|(b, w)| (b, weighted.then_some(w)))
            .collect();
        Some(DirectorView {
            kind,
            members,
            current: None,
        })
    }

    fn snapshot(&self) -> Vec<(BackendRef, f64)> {
        self.list.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn any_healthy(&self, prog: &Program, host: &mut dyn Host) -> bool {
        self.snapshot().iter().any(|(b, _)| prog.healthy(*b, host))
    }

    /// Picks among healthy members by weight, with `point` in [0, 1), as
    /// varnishd does: the first whose running sum of weights, in the
    /// order they were added, passes `point` times the total.
    fn weighted(&self, prog: &Program, host: &mut dyn Host, point: f64) -> Option<BackendRef> {
        let healthy: Vec<(BackendRef, f64)> = self
            .snapshot()
            .into_iter()
            .filter(|(b, _)| prog.healthy(*b, host))
            .collect();
        let total: f64 = healthy.iter().map(|(_, w)| w).sum();
        // A NaN total (a NaN weight) picks nothing, as in varnishd.
        if total.is_nan() || total <= 0.0 {
            return None;
        }
        let target = point * total;
        let mut sum = 0.0;
        for (b, w) in &healthy {
            sum += w;
            if target < sum {
                return Some(*b);
            }
        }
        None
    }
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
    fn director(&self) -> Option<DirectorView> {
        self.members.view("round-robin", false)
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
    fn director(&self) -> Option<DirectorView> {
        let mut view = self.members.view("fallback", false)?;
        view.current = Some(self.current.load(Ordering::Relaxed));
        Some(view)
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
    fn director(&self) -> Option<DirectorView> {
        self.members.view("random", true)
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
    fn director(&self) -> Option<DirectorView> {
        self.members.view("hash", true)
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
    // varnishd's: the shard hash of the string, as a fraction of 2^32.
    let point = f64::from(lacquer_core::ring::hash32([a[0].as_bytes()])) / 4_294_967_296.0;
    let b = Hash::of(o).members.weighted(c.prog, c.host, point);
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
    crate::vmod_shard::SHARD,
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
