//! The interpreter: runs a method of a compiled program against a `Host`,
//! returning the action it chose. Runtime errors (a failed conversion, a
//! status out of range) fail the method, as `return (fail)` would.

use crate::ast::BinOp;
pub use crate::failure::VclFailure;
use crate::program::{CmpKind, Expr, Host, Lent, Place, Program, Stmt};
use crate::types::{format_ip, format_real, Action, ActionKind, Method, Type, Value};
use crate::vmod::Ctx;
use bytes::Bytes;
use lacquer_core::regex::Regex;
use std::cell::Cell;

type E<T> = Result<T, VclFailure>;

/// How a statement ended; a return's action waits in `Eval::returned`,
/// so that this stays a byte.
#[derive(Clone, Copy)]
enum Flow {
    Next,
    Return,
    /// `return;`: out of the subroutine, on in its caller.
    Leave,
}

/// Runs one method. A method that ends without `return` (impossible with
/// the built-in VCL appended) fails.
pub fn run(prog: &Program, method: Method, host: &mut dyn Host) -> Action {
    if let Some(Some(flat)) = prog.flat.get(method.index()) {
        return flat.run(host);
    }
    let mut ev = Eval {
        prog,
        host,
        method,
        returned: None,
    };
    let body = &prog.method(method).body;
    match ev.block(body, 0) {
        Ok(Flow::Return) => ev.returned.take().unwrap_or(Action::Fail),
        Ok(Flow::Next | Flow::Leave) => {
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
    /// The action of the `return` that ended the method.
    returned: Option<Action>,
}

const MAX_CALL_DEPTH: usize = 64;

impl<'a> Eval<'a> {
    fn block(&mut self, stmts: &'a [Stmt], depth: usize) -> E<Flow> {
        for s in stmts {
            match self.stmt(s, depth)? {
                Flow::Next => {}
                flow => return Ok(flow),
            }
        }
        Ok(Flow::Next)
    }

    fn stmt(&mut self, s: &'a Stmt, depth: usize) -> E<Flow> {
        match s {
            Stmt::Set(Place::Var(var), e) => {
                let v = self.eval(e)?;
                self.host.set(*var, v)?;
            }
            Stmt::Set(Place::Header(kind, name), e) => {
                let b = self.eval_bytes(e)?;
                self.host.set_header(*kind, name, b)?;
            }
            Stmt::Unset(place) => match place {
                Place::Var(var) => self.host.unset(*var),
                Place::Header(kind, name) => self.host.unset_header(*kind, name),
            },
            Stmt::Call(i) => {
                if depth >= MAX_CALL_DEPTH {
                    return Err(VclFailure::from("subroutine calls nested too deeply"));
                }
                return match self.block(&self.prog.subs[*i].body, depth + 1)? {
                    Flow::Leave => Ok(Flow::Next),
                    flow => Ok(flow),
                };
            }
            Stmt::Return(kind, args) => {
                self.returned = Some(self.action(*kind, args)?);
                return Ok(Flow::Return);
            }
            Stmt::Leave => return Ok(Flow::Leave),
            Stmt::If(branches, otherwise) => {
                for (cond, body) in branches {
                    if self.test(cond)? {
                        return self.block(body, depth);
                    }
                }
                return self.block(otherwise, depth);
            }
            Stmt::Synthetic(e) => {
                let v = self.eval(e)?;
                if v.is_unset() {
                    // What varnishd writes for an unset string here.
                    self.host.synthetic(b"(null)");
                } else {
                    let b = to_bytes(self.prog, v);
                    self.host.synthetic(&b);
                }
            }
            Stmt::HashData(e) => {
                let in_place = match e {
                    Expr::Header(kind, name) => self.host.hash_header(*kind, name),
                    Expr::Var(var) => self.host.hash_var(*var),
                    _ => false,
                };
                if !in_place {
                    let v = self.eval(e)?;
                    let b = to_bytes(self.prog, v);
                    self.host.hash_data(&b);
                }
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
                let obj = (class.make)(&slot.name, &values).map_err(VclFailure::from)?;
                if slot.object.set(obj).is_err() {
                    return Err(VclFailure::from(format!("object {} made twice", slot.name)));
                }
            }
            Stmt::Block(b) => return self.block(b, depth),
            Stmt::Native(native) => {
                if let Some(action) = native.call(self.host)? {
                    self.returned = Some(action);
                    return Ok(Flow::Return);
                }
            }
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
            ActionKind::Synth => {
                let (status, reason) = status_reason(self)?;
                Action::Synth { status, reason }
            }
            ActionKind::Error => {
                let (status, reason) = status_reason(self)?;
                Action::Error { status, reason }
            }
            ActionKind::Pass if !args.is_empty() => {
                Action::Pass(Some(self.eval(&args[0])?.as_f64()))
            }
            ActionKind::Vcl => match args.first() {
                Some(e) => Action::Vcl(self.eval_bytes(e)?),
                None => Action::Fail,
            },
            // The rest take no arguments.
            kind => crate::native::constant_action(kind).unwrap_or(Action::Fail),
        })
    }

    fn args(&mut self, args: &[Expr]) -> E<Vec<Value>> {
        args.iter().map(|a| self.eval(a)).collect()
    }

    /// Evaluates a condition. Strings it tests are borrowed from the host
    /// or the program where possible, never copied.
    fn test(&mut self, e: &Expr) -> E<bool> {
        Ok(match e {
            Expr::Not(x) => !self.test(x)?,
            Expr::And(a, b) => self.test(a)? && self.test(b)?,
            Expr::Or(a, b) => self.test(a)? || self.test(b)?,
            Expr::Regex(x, re, negate) => {
                // An unset string matches as the empty one, as in Varnish.
                // A backtracking match past its bound is no match (so
                // `!~` holds, as in Varnish), with a log record.
                let hit = match self.with_str(x, |s| re.try_match(s.unwrap_or(b"")))? {
                    Ok(hit) => hit,
                    Err(e) => {
                        self.host.error(&e.to_string());
                        false
                    }
                };
                hit != *negate
            }
            Expr::Header(kind, name) => match self.host.header_ref(*kind, name) {
                Lent::Absent => false,
                Lent::Value(_) | Lent::Slice(_) => true,
                Lent::Owned => self.eval(e)?.as_bool(),
            },
            Expr::Cmp(op, CmpKind::Str, a, b) => self.compare_str(*op, a, b)?,
            _ => self.eval(e)?.as_bool(),
        })
    }

    /// Runs `f` on the string an expression yields (`None` when unset),
    /// borrowing it where the host or the program holds it.
    fn with_str<R>(&mut self, e: &Expr, f: impl FnOnce(Option<&[u8]>) -> R) -> E<R> {
        match e {
            Expr::Const(Value::Str(b)) => return Ok(f(Some(b))),
            Expr::Header(kind, name) => match self.host.header_ref(*kind, name) {
                Lent::Absent => return Ok(f(None)),
                Lent::Value(v) => return Ok(f(Some(&v[..]))),
                Lent::Slice(v) => return Ok(f(Some(v))),
                Lent::Owned => {}
            },
            Expr::Var(var) => {
                if let Some(v) = self.host.str_ref(*var) {
                    return Ok(f(Some(v)));
                }
            }
            _ => {}
        }
        let v = self.eval(e)?;
        Ok(f((!v.is_unset()).then(|| v.as_bytes())))
    }

    /// The string form of an expression, without the detour through a
    /// `Value` for the forms that make bytes directly.
    fn eval_bytes(&mut self, e: &Expr) -> E<Bytes> {
        match e {
            Expr::Const(Value::Str(b)) => Ok(b.clone()),
            Expr::Regsub {
                all,
                subject,
                re,
                replacement,
            } => {
                let owned;
                let r: &[u8] = match &**replacement {
                    Expr::Const(Value::Str(b)) => b,
                    other => {
                        owned = self.eval(other)?;
                        owned.as_bytes()
                    }
                };
                self.with_str(subject, |s| regsub(re, s.unwrap_or(b""), r, *all))
            }
            _ => {
                let v = formattable(self.eval(e)?)?;
                Ok(to_bytes(self.prog, v))
            }
        }
    }

    /// A string comparison; a constant side is borrowed from the program.
    fn compare_str(&mut self, op: BinOp, a: &Expr, b: &Expr) -> E<bool> {
        match (a, b) {
            (x, Expr::Const(c)) => {
                let c = (!c.is_unset()).then(|| c.as_bytes());
                self.with_str(x, |s| compare_bytes(op, s, c))
            }
            (Expr::Const(c), x) => {
                let c = (!c.is_unset()).then(|| c.as_bytes());
                self.with_str(x, |s| compare_bytes(op, c, s))
            }
            _ => {
                let (x, y) = (self.eval(a)?, self.eval(b)?);
                Ok(compare(op, CmpKind::Str, &x, &y))
            }
        }
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
            Expr::Not(_) | Expr::And(..) | Expr::Or(..) | Expr::Regex(..) => {
                Value::Bool(self.test(e)?)
            }
            Expr::Cmp(op, CmpKind::Str, a, b) => Value::Bool(self.compare_str(*op, a, b)?),
            Expr::Neg(x) => match self.eval(x)? {
                Value::Int(i) => Value::Int(i.wrapping_neg()),
                Value::Real(f) => Value::Real(-f),
                Value::Duration(f) => Value::Duration(-f),
                v => v,
            },
            Expr::Cmp(op, kind, a, b) => {
                let (x, y) = (self.eval(a)?, self.eval(b)?);
                Value::Bool(compare(*op, *kind, &x, &y))
            }
            Expr::Acl(x, i, negate) => {
                let acl = &self.prog.acls[*i];
                let hit = match self.eval(x)? {
                    Value::Ip(addr) => {
                        if acl.log {
                            self.host.acl_log(&acl.log_line(addr));
                        }
                        acl.matches(addr)
                    }
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
                    let v = formattable(self.eval(p)?)?;
                    append(self.prog, &mut out, &v);
                }
                Value::Str(Bytes::from(out))
            }
            Expr::ToStr(x) => {
                let v = formattable(self.eval(x)?)?;
                match v {
                    Value::Str(_) | Value::Unset => v,
                    v => Value::Str(to_bytes(self.prog, v)),
                }
            }
            Expr::ToReal(x) => Value::Real(self.eval(x)?.as_f64()),
            Expr::Regsub { .. } => Value::Str(self.eval_bytes(e)?),
            Expr::Func(f, args) => {
                let values = self.args(args)?;
                let mut ctx = Ctx {
                    prog: self.prog,
                    host: &mut *self.host,
                    method: self.method,
                };
                (f.call)(&mut ctx, &values)?
            }
            Expr::Method(o, m, args) => {
                let values = self.args(args)?;
                let Some(obj) = self.prog.objects[*o].object.get() else {
                    return Err(VclFailure::from(format!(
                        "object {} was not made in vcl_init",
                        self.prog.objects[*o].name
                    )));
                };
                let mut ctx = Ctx {
                    prog: self.prog,
                    host: &mut *self.host,
                    method: self.method,
                };
                (m.call)(obj.as_ref(), *o, &mut ctx, &values)?
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
        CmpKind::Str => {
            return compare_bytes(op, str_side(x), str_side(y));
        }
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
    holds(op, ord)
}

/// Whether a comparison operator holds for an ordering (`None`: the two
/// sides are not comparable, which only `!=` accepts).
fn holds(op: BinOp, ord: Option<std::cmp::Ordering>) -> bool {
    use std::cmp::Ordering;
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

fn str_side(v: &Value) -> Option<&[u8]> {
    (!v.is_unset()).then(|| v.as_bytes())
}

/// Compares two strings (`None`: unset).
fn compare_bytes(op: BinOp, x: Option<&[u8]>, y: Option<&[u8]>) -> bool {
    // As Varnish's string comparison: an unset side equals nothing, not
    // even another unset one.
    let ord = match (x, y) {
        (Some(a), Some(b)) => Some(a.cmp(b)),
        _ => None,
    };
    holds(op, ord)
}

/// A value that can become a string: a TIME an HTTP date cannot say
/// fails the VCL, as in Varnish.
fn formattable(v: Value) -> E<Value> {
    match v {
        Value::Time(t) if !lacquer_core::time::formattable(t) => {
            Err(VclFailure::from(format!("Unformattable VCL_TIME {t}")))
        }
        v => Ok(v),
    }
}

fn arith(op: BinOp, ty: Type, x: &Value, y: &Value) -> E<Value> {
    if ty == Type::Int {
        let (a, b) = (x.as_i64(), y.as_i64());
        return Ok(Value::Int(match op {
            BinOp::Add => a.wrapping_add(b),
            BinOp::Sub => a.wrapping_sub(b),
            BinOp::Mul => a.wrapping_mul(b),
            BinOp::Div | BinOp::Mod if b == 0 => return Err(VclFailure::from("division by zero")),
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
        BinOp::Div if b == 0.0 => return Err(VclFailure::from("division by zero")),
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
        Value::Probe(i) => {
            if let Some(p) = prog.probes.get(*i) {
                out.extend_from_slice(p.name.as_bytes());
            }
        }
        Value::Blob(_) | Value::Sub(_) | Value::Regex(_) => {}
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
pub fn regsub(re: &Regex, subject: &[u8], replacement: &[u8], all: bool) -> Bytes {
    // Without `\N` references no capture groups are needed, and finding
    // match spans is much cheaper than capturing them.
    let literal = !replacement.contains(&b'\\');
    if literal {
        let mut out = Spliced::new(subject, replacement);
        if re.try_spans(subject, all, |start, end| out.put(start, end, None)) {
            return out.finish();
        }
    }
    let Some(meta) = re.meta() else {
        return regsub_backtracking(re, subject, replacement, all);
    };
    let mut out = Spliced::new(subject, replacement);
    for caps in meta.captures_iter(subject) {
        let m = caps.get(0).expect("group 0 always matches");
        out.put(
            m.start(),
            m.end(),
            (!literal).then_some(&|i: usize| caps.get(i).map(|g| &subject[g.range()])),
        );
        if !all {
            break;
        }
    }
    out.finish()
}

/// `regsub` on a pattern that needs backtracking: over the subject read as
/// text; a match past `pcre2_match_limit` ends the substitutions there.
fn regsub_backtracking(re: &Regex, subject: &[u8], replacement: &[u8], all: bool) -> Bytes {
    let Some(fancy) = re.backtracking() else {
        return Bytes::copy_from_slice(subject);
    };
    let text = lacquer_core::regex::as_text(subject);
    let mut out = Spliced::new(text.as_bytes(), replacement);
    for caps in fancy.captures_iter(&text) {
        let Ok(caps) = caps else {
            break;
        };
        let m = caps.get(0).expect("group 0 always matches");
        out.put(
            m.start(),
            m.end(),
            Some(&|i: usize| caps.get(i).map(|g| g.as_str().as_bytes())),
        );
        if !all {
            break;
        }
    }
    out.finish()
}

thread_local! {
    /// The room a thread builds `regsub` results in, kept from one call
    /// to the next: a result is then copied out at its length, where the
    /// buffer it was built in would have been one allocation and the
    /// bytes crate's share of it a second.
    static ROOM: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// Room larger than this (a header of many kilobytes rewritten) is let
/// go after its call.
const MAX_ROOM: usize = 16 * 1024;

/// A subject with replacements spliced in at match spans.
struct Spliced<'a> {
    subject: &'a [u8],
    replacement: &'a [u8],
    /// Made at the first match: no match, no copy until the end.
    out: Option<Vec<u8>>,
    /// Where the subject has been copied up to.
    last: usize,
}

impl<'a> Spliced<'a> {
    fn new(subject: &'a [u8], replacement: &'a [u8]) -> Self {
        Spliced {
            subject,
            replacement,
            out: None,
            last: 0,
        }
    }

    fn put(&mut self, start: usize, end: usize, group: Option<&dyn Fn(usize) -> Option<&'a [u8]>>) {
        let (subject, replacement) = (self.subject, self.replacement);
        let buf = self.out.get_or_insert_with(|| {
            let mut room = ROOM.try_with(Cell::take).unwrap_or_default();
            room.reserve(subject.len() + replacement.len());
            room
        });
        buf.extend_from_slice(&subject[self.last..start]);
        match group {
            None => buf.extend_from_slice(replacement),
            Some(group) => expand(buf, group, replacement),
        }
        self.last = end;
    }

    fn finish(self) -> Bytes {
        match self.out {
            None => Bytes::copy_from_slice(self.subject),
            Some(mut buf) => {
                buf.extend_from_slice(&self.subject[self.last..]);
                // One allocation of the result's length (none when
                // everything was replaced by nothing, as a cookie header
                // of analytics cookies alone is); the room is the
                // thread's again.
                let out = if buf.is_empty() {
                    Bytes::new()
                } else {
                    Bytes::copy_from_slice(&buf)
                };
                if buf.capacity() <= MAX_ROOM {
                    buf.clear();
                    let _ = ROOM.try_with(|room| room.set(buf));
                }
                out
            }
        }
    }
}

/// Appends `replacement` with `\0`…`\9` replaced by the groups and a
/// backslash before any other character dropped (`\\` is one backslash,
/// `\&` an ampersand); a backslash at the very end stays.
fn expand<'a>(out: &mut Vec<u8>, group: &dyn Fn(usize) -> Option<&'a [u8]>, replacement: &[u8]) {
    let mut i = 0;
    while i < replacement.len() {
        let c = replacement[i];
        if c == b'\\' && i + 1 < replacement.len() {
            let n = replacement[i + 1];
            if n.is_ascii_digit() {
                if let Some(g) = group(usize::from(n - b'0')) {
                    out.extend_from_slice(g);
                }
                i += 2;
                continue;
            }
            // Any other escaped character stands for itself (`\\`, `\&`).
            out.push(n);
            i += 2;
            continue;
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
        let re = lacquer_core::regex::compile("(a)(b)?").unwrap();
        assert_eq!(&regsub(&re, b"xabyab", b"<\\1\\2>", false)[..], b"x<ab>yab");
        assert_eq!(
            &regsub(&re, b"xabyab", b"<\\1\\2>", true)[..],
            b"x<ab>y<ab>"
        );
        assert_eq!(&regsub(&re, b"none", b"z", true)[..], b"none");
        assert_eq!(&regsub(&re, b"ab", b"\\&\\\\\\1\\", false)[..], b"&\\a\\");
        assert_eq!(&regsub(&re, b"xab", b"\\\\", true)[..], b"x\\");
        let empty = lacquer_core::regex::compile("x*").unwrap();
        assert_eq!(&regsub(&empty, b"ab", b"-", true)[..], b"-a-b-");
        assert_eq!(&regsub(&empty, b"ab", b"-", false)[..], b"-ab");
        let cookie = lacquer_core::regex::compile("(^|;\\s*)(_ga|__utm[a-z]+)=[^;]*").unwrap();
        assert_eq!(
            &regsub(&cookie, b"_ga=1; sess=2; __utmz=3", b"", true)[..],
            b"; sess=2"
        );
        // Everything replaced by nothing, and all but the end.
        assert_eq!(&regsub(&cookie, b"_ga=1; __utmz=3", b"", true)[..], b"");
        assert_eq!(&regsub(&cookie, b"_ga=1; __utmz=3;", b"", true)[..], b";");
        assert_eq!(&regsub(&cookie, b"_ga=1; __utmz=3", b"-", true)[..], b"--");
    }
}
