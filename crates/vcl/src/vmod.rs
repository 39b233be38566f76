//! The vmod interface: function, object class and method signatures the
//! checker binds arguments against, the objects `new` creates, and the
//! registry of vmods Lacquer carries (`std`, `directors`, `purge`, `xkey`,
//! `tcp`).

use crate::program::{Host, Program};
use crate::types::{BackendRef, Method, Type, Value};
use std::any::Any;
use std::cell::Cell;

/// A parameter's default when the caller leaves it out.
#[derive(Debug, Clone, Copy)]
pub enum Dflt {
    Required,
    /// Left out means `Value::Unset`: the function sees it was not given.
    Optional,
    Bool(bool),
    Int(i64),
    Real(f64),
    Duration(f64),
    Str(&'static str),
    Enum(&'static str),
}

#[derive(Debug)]
pub struct Param {
    pub name: &'static str,
    pub ty: Type,
    pub default: Dflt,
    /// For `Type::Enum`: the words allowed.
    pub enums: &'static [&'static str],
}

pub const fn req(name: &'static str, ty: Type) -> Param {
    Param {
        name,
        ty,
        default: Dflt::Required,
        enums: &[],
    }
}

pub const fn opt(name: &'static str, ty: Type) -> Param {
    Param {
        name,
        ty,
        default: Dflt::Optional,
        enums: &[],
    }
}

pub const fn dflt(name: &'static str, ty: Type, default: Dflt) -> Param {
    Param {
        name,
        ty,
        default,
        enums: &[],
    }
}

pub const fn enm(name: &'static str, enums: &'static [&'static str], default: Dflt) -> Param {
    Param {
        name,
        ty: Type::Enum,
        default,
        enums,
    }
}

/// Vmods' state for one task (a client request, or a backend fetch), as
/// Varnish's `PRIV_TASK`: made when a vmod first asks, dropped with the
/// task. The client and the backend side of one request have their own.
#[derive(Default)]
pub struct TaskPrivs(Vec<(&'static str, Box<dyn Any + Send + Sync>)>);

impl TaskPrivs {
    /// The state `vmod` keeps for this task, made empty on first use.
    pub fn get<T: Default + Any + Send + Sync>(&mut self, vmod: &'static str) -> &mut T {
        let at = match self
            .0
            .iter()
            .position(|(name, v)| *name == vmod && v.is::<T>())
        {
            Some(at) => at,
            None => {
                self.0.push((vmod, Box::<T>::default()));
                self.0.len() - 1
            }
        };
        self.0[at]
            .1
            .downcast_mut::<T>()
            .expect("the type was checked above")
    }
}

impl std::fmt::Debug for TaskPrivs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|(n, _)| n))
            .finish()
    }
}

/// A function's entry in its vmod's table.
pub const fn func(
    vmod: &'static str,
    name: &'static str,
    params: &'static [Param],
    ret: Type,
    scope: u16,
    call: FuncCall,
) -> FuncSpec {
    FuncSpec {
        vmod,
        name,
        ret,
        params,
        scope,
        call,
    }
}

/// What a vmod function sees of the running request.
pub struct Ctx<'a> {
    pub prog: &'a Program,
    pub host: &'a mut dyn Host,
    pub method: Method,
}

pub type FuncCall = fn(&mut Ctx<'_>, &[Value]) -> Result<Value, crate::failure::VclFailure>;
pub type MethodCall =
    fn(&dyn VmodObject, usize, &mut Ctx<'_>, &[Value]) -> Result<Value, crate::failure::VclFailure>;
pub type Constructor = fn(&str, &[Value]) -> Result<Box<dyn VmodObject>, String>;

pub struct FuncSpec {
    pub vmod: &'static str,
    pub name: &'static str,
    pub ret: Type,
    pub params: &'static [Param],
    /// Methods it may be called from.
    pub scope: u16,
    pub call: FuncCall,
}

impl std::fmt::Debug for FuncSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.vmod, self.name)
    }
}

pub struct MethodSpec {
    pub name: &'static str,
    pub ret: Type,
    pub params: &'static [Param],
    pub scope: u16,
    pub call: MethodCall,
}

impl std::fmt::Debug for MethodSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, ".{}", self.name)
    }
}

pub struct ClassSpec {
    pub vmod: &'static str,
    pub name: &'static str,
    pub params: &'static [Param],
    pub make: Constructor,
    pub methods: &'static [MethodSpec],
}

impl std::fmt::Debug for ClassSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.vmod, self.name)
    }
}

/// An object made by `new`. Directors resolve to backends.
pub trait VmodObject: Send + Sync {
    fn as_any(&self) -> &dyn Any;
    fn resolve(&self, _prog: &Program, _host: &mut dyn Host) -> Option<BackendRef> {
        None
    }
    fn healthy(&self, _prog: &Program, _host: &mut dyn Host) -> bool {
        false
    }
    /// What `backend.list` shows of a director; None for an object that
    /// is no director.
    fn director(&self) -> Option<DirectorView> {
        None
    }
}

/// A backend argument (none for anything else).
pub(crate) fn backend_arg(v: &Value) -> BackendRef {
    match v {
        Value::Backend(b) => *b,
        _ => BackendRef::None,
    }
}

/// What a director's `.backend()` answers when it resolves later: the
/// director itself, object `index`.
pub(crate) fn me(index: usize) -> Result<Value, crate::failure::VclFailure> {
    Ok(Value::Backend(BackendRef::Director(index)))
}

/// A method of a vmod class.
pub(crate) const fn m(
    name: &'static str,
    ret: Type,
    params: &'static [Param],
    scope: u16,
    call: MethodCall,
) -> MethodSpec {
    MethodSpec {
        name,
        ret,
        params,
        scope,
        call,
    }
}

/// A director as the management interface shows it.
pub struct DirectorView {
    /// Its type, as varnishd names it (`round-robin`, `fallback`, …).
    pub kind: &'static str,
    /// Its members in order, each with its weight where the type has
    /// weights.
    pub members: Vec<(BackendRef, Option<f64>)>,
    /// A fallback's place in its list, where its next pick starts.
    pub current: Option<usize>,
}

/// A vmod Lacquer carries.
pub struct Vmod {
    pub name: &'static str,
    pub functions: &'static [FuncSpec],
    pub classes: &'static [ClassSpec],
}

thread_local! {
    static RNG: Cell<u64> = Cell::new({
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let local = 0u8;
        (t ^ (&local as *const u8 as u64)) | 1
    });
}

/// A fast pseudo-random number in [0, 1), per thread.
pub fn random() -> f64 {
    RNG.with(|r| {
        let mut x = r.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        r.set(x);
        (x >> 11) as f64 / (1u64 << 53) as f64
    })
}

/// A stable 64-bit hash (FNV-1a) for directors.
pub fn hash64(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in data {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    // Finalise so that nearby inputs spread over the whole range.
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h
}

/// The table of a vmod whose functions take no arguments and run in any
/// client or backend subroutine: `name: RETURN_TYPE` for each.
macro_rules! argless_functions {
    ($vmod:literal; $( $name:ident: $ret:ident ),* $(,)?) => {
        static FUNCTIONS: &[$crate::vmod::FuncSpec] = &[ $(
            $crate::vmod::FuncSpec {
                vmod: $vmod,
                name: stringify!($name),
                ret: $crate::types::Type::$ret,
                params: &[],
                scope: $crate::types::scope::CLIENT_BACKEND,
                call: $name,
            },
        )* ];
    };
}
pub(crate) use argless_functions;
