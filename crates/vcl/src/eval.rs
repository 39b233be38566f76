//! The interpreter: runs a method of a compiled program against a `Host`,
//! returning the action it chose. Runtime errors (a failed conversion, a
//! status out of range) fail the method, as `return (fail)` would.

use crate::ast::BinOp;
use crate::program::{CmpKind, Expr, Host, Place, Program, Stmt};
use crate::types::{format_ip, format_real, Action, ActionKind, Method, Type, Value};
use crate::vmod::Ctx;
use bytes::Bytes;

/// Why a method failed.
#[derive(Debug, Clone, PartialEq)]
pub struct VclFailure(pub String);

type E<T> = Result<T, VclFailure>;

enum Flow {
    Next,
    Return(Action),
}

/// Runs one method. A method that ends without `return` (impossible with
/// the built-in VCL appended) fails.
pub fn run(prog: &Program, method: Method, host: &mut dyn Host) -> Action {
    let mut ev = Eval { prog, host, method };
    let body = &prog.method(method).body;
    match ev.block(body, 0) {
        Ok(Flow::Return(a)) => a,
        Ok(Flow::Next) => {
            ev.host
                .error(&format!("{} ended without return", method.name()));
            Action::Fail
        }
        Err(VclFailure(msg)) => {
            ev.host.error(&msg);
            Action::Fail
        }
    }
}

/// Runs `vcl_init`: makes the vmod objects. Returns the failure message
/// when the program may not be used.
pub fn init(prog: &Program, host: &mut dyn Host) -> Result<(), String> {
    match run(prog, Method::Init, host) {
        Action::Ok => Ok(()),
        _ => Err("vcl_init failed".to_string()),
    }
}

struct Eval<'a> {
    prog: &'a Program,
    host: &'a mut dyn Host,
    method: Method,
}

const MAX_CALL_DEPTH: usize = 64;

impl Eval<'_> {
    fn block(&mut self, stmts: &[Stmt], depth: usize) -> E<Flow> {
        for s in stmts {
            if let Flow::Return(a) = self.stmt(s, depth)? {
                return Ok(Flow::Return(a));
            }
        }
        Ok(Flow::Next)
    }

    fn stmt(&mut self, s: &Stmt, depth: usize) -> E<Flow> {
        match s {
            Stmt::Set(place, e) => {
                let v = self.eval(e)?;
                match place {
                    Place::Var(var) => self.host.set(*var, v).map_err(VclFailure)?,
                    Place::Header(kind, name) => {
                        let b = to_bytes(self.prog, v);
                        self.host.set_header(*kind, name, b);
                    }
                }
            }
            Stmt::Unset(place) => match place {
                Place::Var(var) => self.host.unset(*var),
                Place::Header(kind, name) => self.host.unset_header(*kind, name),
            },
            Stmt::Call(i) => {
                if depth >= MAX_CALL_DEPTH {
                    return Err(VclFailure("subroutine calls nested too deeply".into()));
                }
                return self.block(&self.prog.subs[*i].body, depth + 1);
            }
            Stmt::Return(kind, args) => return Ok(Flow::Return(self.action(*kind, args)?)),
            Stmt::If(branches, otherwise) => {
                for (cond, body) in branches {
                    if self.eval(cond)?.as_bool() {
                        return self.block(body, depth);
                    }
                }
                return self.block(otherwise, depth);
            }
            Stmt::Synthetic(e) => {
                let v = self.eval(e)?;
                let b = to_bytes(self.prog, v);
                self.host.synthetic(&b);
            }
            Stmt::HashData(e) => {
                let v = self.eval(e)?;
                let b = to_bytes(self.prog, v);
                self.host.hash_data(&b);
            }
            Stmt::Ban(e) => {
                let v = self.eval(e)?;
                let b = to_bytes(self.prog, v);
                if let Err(msg) = self.host.ban(&b) {
                    self.host.error(&format!("ban(): {msg}"));
                }
            }
            Stmt::Eval(e) => {
                self.eval(e)?;
            }
            Stmt::New(index, class, args) => {
                let values = self.args(args)?;
                let slot = &self.prog.objects[*index];
                let obj = (class.make)(&slot.name, &values).map_err(VclFailure)?;
                if slot.object.set(obj).is_err() {
                    return Err(VclFailure(format!("object {} made twice", slot.name)));
                }
            }
            Stmt::Block(b) => return self.block(b, depth),
        }
        Ok(Flow::Next)
    }

    fn action(&mut self, kind: ActionKind, args: &[Expr]) -> E<Action> {
        let status_reason = |ev: &mut Self| -> E<(u16, Option<Bytes>)> {
            let status = match args.first() {
                Some(e) => ev.eval(e)?.as_i64(),
                None => 503,
            };
            let status = clamp_status(status);
            let reason = match args.get(1) {
                Some(e) => {
                    let v = ev.eval(e)?;
                    Some(to_bytes(ev.prog, v))
                }
                None => None,
            };
            Ok((status, reason))
        };
        Ok(match kind {
            ActionKind::Fail => Action::Fail,
            ActionKind::Synth => {
                let (status, reason) = status_reason(self)?;
                Action::Synth { status, reason }
            }
            ActionKind::Error => {
                let (status, reason) = status_reason(self)?;
                Action::Error { status, reason }
            }
            ActionKind::Restart => Action::Restart,
            ActionKind::Pass => match args.first() {
                Some(e) => Action::Pass(Some(self.eval(e)?.as_f64())),
                None => Action::Pass(None),
            },
            ActionKind::Pipe => Action::Pipe,
            ActionKind::Hash => Action::Hash,
            ActionKind::Purge => Action::Purge,
            ActionKind::Lookup => Action::Lookup,
            ActionKind::Deliver => Action::Deliver,
            ActionKind::Fetch => Action::Fetch,
            ActionKind::Miss => Action::Miss,
            ActionKind::Abandon => Action::Abandon,
            ActionKind::Retry => Action::Retry,
            ActionKind::Ok => Action::Ok,
            ActionKind::Vcl => Action::Fail,
        })
    }

    fn args(&mut self, args: &[Expr]) -> E<Vec<Value>> {
        args.iter().map(|a| self.eval(a)).collect()
    }

    fn eval(&mut self, e: &Expr) -> E<Value> {
        Ok(match e {
            Expr::Const(v) => v.clone(),
            Expr::Var(v) => self.host.get(*v),
            Expr::Header(kind, name) => self
                .host
                .header(*kind, name)
                .map_or(Value::Unset, Value::Str),
            Expr::Param(i) => self.host.param(*i),
            Expr::Storage(name, field) => self.host.storage(name, *field),
            Expr::Not(x) => Value::Bool(!self.eval(x)?.as_bool()),
            Expr::Neg(x) => match self.eval(x)? {
                Value::Int(i) => Value::Int(i.wrapping_neg()),
                Value::Real(f) => Value::Real(-f),
                Value::Duration(f) => Value::Duration(-f),
                v => v,
            },
            Expr::And(a, b) => Value::Bool(self.eval(a)?.as_bool() && self.eval(b)?.as_bool()),
            Expr::Or(a, b) => Value::Bool(self.eval(a)?.as_bool() || self.eval(b)?.as_bool()),
            Expr::Cmp(op, kind, a, b) => {
                let (x, y) = (self.eval(a)?, self.eval(b)?);
                Value::Bool(compare(*op, *kind, &x, &y))
            }
            Expr::Regex(x, re, negate) => {
                let v = self.eval(x)?;
                let hit = !v.is_unset() && re.is_match(v.as_bytes());
                Value::Bool(hit != *negate)
            }
            Expr::Acl(x, i, negate) => {
                let hit = match self.eval(x)? {
                    Value::Ip(addr) => self.prog.acls[*i].matches(addr),
                    _ => false,
                };
                Value::Bool(hit != *negate)
            }
            Expr::Arith(op, ty, a, b) => {
                let (x, y) = (self.eval(a)?, self.eval(b)?);
                arith(*op, *ty, &x, &y)?
            }
            Expr::Concat(parts) => {
                let mut out = Vec::new();
                for p in parts {
                    let v = self.eval(p)?;
                    append(self.prog, &mut out, &v);
                }
                Value::Str(Bytes::from(out))
            }
            Expr::ToStr(x) => {
                let v = self.eval(x)?;
                match v {
                    Value::Str(_) | Value::Unset => v,
                    v => Value::Str(to_bytes(self.prog, v)),
                }
            }
            Expr::ToReal(x) => Value::Real(self.eval(x)?.as_f64()),
            Expr::Regsub {
                all,
                subject,
                re,
                replacement,
            } => {
                let s = self.eval(subject)?;
                let r = self.eval(replacement)?;
                Value::Str(regsub(re, s.as_bytes(), r.as_bytes(), *all))
            }
            Expr::Func(f, args) => {
                let values = self.args(args)?;
                let mut ctx = Ctx {
                    prog: self.prog,
                    host: &mut *self.host,
                    method: self.method,
                };
                (f.call)(&mut ctx, &values).map_err(VclFailure)?
            }
            Expr::Method(o, m, args) => {
                let values = self.args(args)?;
                let Some(obj) = self.prog.objects[*o].object.get() else {
                    return Err(VclFailure(format!(
                        "object {} was not made in vcl_init",
                        self.prog.objects[*o].name
                    )));
                };
                let mut ctx = Ctx {
                    prog: self.prog,
                    host: &mut *self.host,
                    method: self.method,
                };
                (m.call)(obj.as_ref(), *o, &mut ctx, &values).map_err(VclFailure)?
            }
        })
    }
}

fn clamp_status(s: i64) -> u16 {
    if (100..=65535).contains(&s) {
        s as u16
    } else {
        503
    }
}

fn compare(op: BinOp, kind: CmpKind, x: &Value, y: &Value) -> bool {
    use std::cmp::Ordering;
    let ord = match kind {
        CmpKind::Num => x.as_f64().partial_cmp(&y.as_f64()),
        CmpKind::Str => match (x, y) {
            (Value::Unset, Value::Unset) => Some(Ordering::Equal),
            (Value::Unset, _) | (_, Value::Unset) => None,
            _ => Some(x.as_bytes().cmp(y.as_bytes())),
        },
        CmpKind::Bool => Some(x.as_bool().cmp(&y.as_bool())),
        CmpKind::Ip => match (x, y) {
            (Value::Ip(a), Value::Ip(b)) => Some(if a.map(|a| a.ip()) == b.map(|b| b.ip()) {
                Ordering::Equal
            } else {
                Ordering::Less
            }),
            _ => None,
        },
        CmpKind::Backend => Some(if x == y {
            Ordering::Equal
        } else {
            Ordering::Less
        }),
    };
    match op {
        BinOp::Eq => ord == Some(Ordering::Equal),
        BinOp::Ne => ord != Some(Ordering::Equal),
        BinOp::Lt => ord == Some(Ordering::Less),
        BinOp::Gt => ord == Some(Ordering::Greater),
        BinOp::Le => matches!(ord, Some(Ordering::Less | Ordering::Equal)),
        BinOp::Ge => matches!(ord, Some(Ordering::Greater | Ordering::Equal)),
        _ => false,
    }
}

fn arith(op: BinOp, ty: Type, x: &Value, y: &Value) -> E<Value> {
    if ty == Type::Int {
        let (a, b) = (x.as_i64(), y.as_i64());
        return Ok(Value::Int(match op {
            BinOp::Add => a.wrapping_add(b),
            BinOp::Sub => a.wrapping_sub(b),
            BinOp::Mul => a.wrapping_mul(b),
            BinOp::Div | BinOp::Mod if b == 0 => return Err(VclFailure("division by zero".into())),
            BinOp::Div => a.wrapping_div(b),
            BinOp::Mod => a.wrapping_rem(b),
            _ => 0,
        }));
    }
    let (a, b) = (x.as_f64(), y.as_f64());
    let r = match op {
        BinOp::Add => a + b,
        BinOp::Sub => a - b,
        BinOp::Mul => a * b,
        BinOp::Div if b == 0.0 => return Err(VclFailure("division by zero".into())),
        BinOp::Div => a / b,
        _ => 0.0,
    };
    Ok(match ty {
        Type::Duration => Value::Duration(r),
        Type::Time => Value::Time(r),
        Type::Bytes => Value::Bytes(r),
        _ => Value::Real(r),
    })
}

/// Appends the string form of a value, as VCL converts it.
pub fn append(prog: &Program, out: &mut Vec<u8>, v: &Value) {
    use std::io::Write;
    match v {
        Value::Unset => {}
        Value::Str(b) => out.extend_from_slice(b),
        Value::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Int(i) => {
            let _ = write!(out, "{i}");
        }
        Value::Real(f) | Value::Duration(f) => format_real(out, *f),
        Value::Bytes(f) => {
            let _ = write!(out, "{}", *f as u64);
        }
        Value::Time(t) => out.extend_from_slice(lacquer_core::time::http_date(*t).as_bytes()),
        Value::Ip(a) => format_ip(out, *a),
        Value::Backend(b) => out.extend_from_slice(prog.backend_name(*b).as_bytes()),
        Value::Stevedore(s) => out.extend_from_slice(s.as_bytes()),
        Value::Enum(e) => out.extend_from_slice(e.as_bytes()),
        Value::Header(k, n) => {
            let _ = write!(out, "{}.http.{n}", k.prefix());
        }
        Value::Http(k) => out.extend_from_slice(k.prefix().as_bytes()),
        Value::Blob(_) | Value::Sub(_) | Value::Probe(_) => {}
    }
}

/// The string form of a value.
pub fn to_bytes(prog: &Program, v: Value) -> Bytes {
    match v {
        Value::Str(b) => b,
        Value::Unset => Bytes::new(),
        v => {
            let mut out = Vec::new();
            append(prog, &mut out, &v);
            Bytes::from(out)
        }
    }
}

/// `regsub`/`regsuball`: `\0`–`\9` in the replacement are the groups.
pub fn regsub(re: &regex::bytes::Regex, subject: &[u8], replacement: &[u8], all: bool) -> Bytes {
    // Without `\N` references no capture groups are needed, and finding
    // matches is much cheaper than capturing them.
    let literal = !replacement.contains(&b'\\');
    let mut out: Option<Vec<u8>> = None;
    let mut last = 0;
    let mut emit = |out: &mut Option<Vec<u8>>,
                    start: usize,
                    end: usize,
                    caps: Option<&regex::bytes::Captures>| {
        let buf = out.get_or_insert_with(|| Vec::with_capacity(subject.len() + replacement.len()));
        buf.extend_from_slice(&subject[last..start]);
        match caps {
            None => buf.extend_from_slice(replacement),
            Some(caps) => expand(buf, caps, replacement),
        }
        last = end;
    };
    if literal {
        for m in re.find_iter(subject) {
            emit(&mut out, m.start(), m.end(), None);
            if !all {
                break;
            }
        }
    } else {
        for caps in re.captures_iter(subject) {
            let m = caps.get(0).expect("group 0 always matches");
            emit(&mut out, m.start(), m.end(), Some(&caps));
            if !all {
                break;
            }
        }
    }
    match out {
        None => Bytes::copy_from_slice(subject),
        Some(mut buf) => {
            buf.extend_from_slice(&subject[last..]);
            Bytes::from(buf)
        }
    }
}

/// Appends `replacement` with `\0`…`\9` replaced by the groups and `\\`
/// by one backslash.
fn expand(out: &mut Vec<u8>, caps: &regex::bytes::Captures, replacement: &[u8]) {
    let mut i = 0;
    while i < replacement.len() {
        let c = replacement[i];
        if c == b'\\' && i + 1 < replacement.len() {
            let n = replacement[i + 1];
            if n.is_ascii_digit() {
                if let Some(g) = caps.get(usize::from(n - b'0')) {
                    out.extend_from_slice(g.as_bytes());
                }
                i += 2;
                continue;
            }
            if n == b'\\' {
                out.push(b'\\');
                i += 2;
                continue;
            }
        }
        out.push(c);
        i += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regsub_replaces_first_or_all() {
        let re = regex::bytes::Regex::new("(a)(b)?").unwrap();
        assert_eq!(&regsub(&re, b"xabyab", b"<\\1\\2>", false)[..], b"x<ab>yab");
        assert_eq!(
            &regsub(&re, b"xabyab", b"<\\1\\2>", true)[..],
            b"x<ab>y<ab>"
        );
        assert_eq!(&regsub(&re, b"none", b"z", true)[..], b"none");
        assert_eq!(&regsub(&re, b"xab", b"\\\\", true)[..], b"x\\");
        let empty = regex::bytes::Regex::new("x*").unwrap();
        assert_eq!(&regsub(&empty, b"ab", b"-", true)[..], b"-a-b-");
        assert_eq!(&regsub(&empty, b"ab", b"-", false)[..], b"-ab");
        let cookie = regex::bytes::Regex::new("(^|;\\s*)(_ga|__utm[a-z]+)=[^;]*").unwrap();
        assert_eq!(
            &regsub(&cookie, b"_ga=1; sess=2; __utmz=3", b"", true)[..],
            b"; sess=2"
        );
    }
}
