//! The checker and compiler, inside subroutines: statements, symbol
//! resolution, the type rules of VCL expressions, function and method
//! argument binding, regular expressions.

use crate::ast::{self, AssignOp, BinOp, ExprKind, UnOp};
use crate::compile::{CResult, Compiler, Use, UseKind};
use crate::compile_call::{arith_type, constant_string, regex};
use crate::program::{CmpKind, Expr, Place, Stmt};
use crate::source::{CompileError, Span};
use crate::types::{scope, ActionKind, BackendRef, HttpKind, Method, Type, Value};
use crate::vars::{header_family, StorageField, Var, Versions, PROTECTED_HEADERS};
use std::sync::Arc;

/// What an identifier names.
enum Sym {
    Var(Var),
    Header(&'static crate::vars::HeaderFamily, String),
    Value(Value, Type),
    Param(usize, Type),
    Storage(Arc<str>, StorageField, Type),
    Acl(usize),
    Object,
}

impl Compiler {
    pub(crate) fn use_(&mut self, kind: UseKind, allowed: u16, span: Span) {
        let cur = self.current;
        self.subs[cur].uses.push(Use {
            kind,
            allowed,
            span,
        });
    }

    pub(crate) fn block(&mut self, stmts: &[ast::Stmt]) -> CResult<Vec<Stmt>> {
        stmts.iter().map(|s| self.stmt(s)).collect()
    }

    fn stmt(&mut self, s: &ast::Stmt) -> CResult<Stmt> {
        Ok(match s {
            ast::Stmt::Set { target, op, value } => self.set(target, *op, value)?,
            ast::Stmt::Unset { target } => {
                let place = self.place(target, true)?;
                if let Place::Var(v) = place {
                    if v.spec().unset == 0 {
                        return Err(CompileError::new(
                            format!("Variable '{}' cannot be unset", v.name()),
                            target.span,
                        ));
                    }
                }
                Stmt::Unset(place)
            }
            ast::Stmt::Call { name } => {
                let Some(i) = self.subs.iter().position(|s| s.name == name.name) else {
                    return Err(CompileError::new(
                        format!("Subroutine '{}' not found", name.name),
                        name.span,
                    ));
                };
                if self.subs[i].method.is_some() {
                    return Err(CompileError::new(
                        format!("'{}' is a built-in method and cannot be called", name.name),
                        name.span,
                    ));
                }
                let cur = self.current;
                self.subs[cur].calls.push((i, name.span));
                Stmt::Call(i)
            }
            ast::Stmt::Return { action, args, span } => self.ret(action, args, *span)?,
            ast::Stmt::Leave { span } => {
                if self.subs[self.current].method.is_some() {
                    return Err(CompileError::new(
                        "Expected a return action: a method must say what comes next ('return;' only leaves a subroutine)",
                        *span,
                    ));
                }
                Stmt::Leave
            }
            ast::Stmt::If {
                branches,
                otherwise,
            } => {
                let mut out = Vec::new();
                for (cond, body) in branches {
                    out.push((self.cond(cond)?, self.block(body)?));
                }
                let other = match otherwise {
                    Some(b) => self.block(b)?,
                    None => Vec::new(),
                };
                Stmt::If(out, other)
            }
            ast::Stmt::New { name, ctor } => {
                let index = self
                    .objects
                    .iter()
                    .position(|o| o.name == name.name)
                    .expect("objects collected before subs");
                let class = self.objects[index].class;
                let ExprKind::Call { args, .. } = &ctor.kind else {
                    return Err(CompileError::new("Expected a constructor call", ctor.span));
                };
                self.use_(UseKind::New, scope::INIT, name.span);
                let what = format!("{}.{}", class.vmod, class.name);
                let args = self.bind(class.params, args, ctor.span, &what)?;
                Stmt::New(index, class, args)
            }
            ast::Stmt::Expr(e) => self.call_stmt(e)?,
            ast::Stmt::Block(b) => Stmt::Block(self.block(b)?),
        })
    }

    fn call_stmt(&mut self, e: &ast::Expr) -> CResult<Stmt> {
        if let ExprKind::Call { name, args } = &e.kind {
            let one = |c: &mut Compiler, allowed: u16| -> CResult<Expr> {
                if args.len() != 1 || args[0].name.is_some() {
                    return Err(CompileError::new(
                        format!("{}() takes one argument", name.name),
                        e.span,
                    ));
                }
                c.use_(UseKind::Func(name.name.clone()), allowed, name.span);
                c.expect(&args[0].value, Type::String)
            };
            match name.name.as_str() {
                "hash_data" => return Ok(Stmt::HashData(one(self, scope::HASH)?)),
                "synthetic" => {
                    return Ok(Stmt::Synthetic(one(self, scope::SYNTH | scope::BE_ERROR)?))
                }
                "ban" => return Ok(Stmt::Ban(one(self, scope::ALL)?)),
                _ => {}
            }
        }
        let (expr, _) = self.expr(e)?;
        Ok(Stmt::Eval(expr))
    }

    fn ret(&mut self, action: &ast::Ident, args: &[ast::Expr], span: Span) -> CResult<Stmt> {
        let Some(kind) = ActionKind::by_name(&action.name) else {
            return Err(CompileError::new(
                format!("Unknown return action '{}'", action.name),
                action.span,
            ));
        };
        if kind == ActionKind::Vcl {
            // `return (vcl(label))`: a label the daemon has now.
            let label = match args {
                [ast::Expr {
                    kind: ExprKind::Ident(name),
                    span,
                }] => {
                    if !self.labels.iter().any(|l| l == name) {
                        return Err(CompileError::new(
                            format!(
                                "Symbol not found: '{name}' (not a VCL label; vcl.label makes one)"
                            ),
                            *span,
                        ));
                    }
                    name.clone()
                }
                _ => {
                    return Err(CompileError::new(
                        "return (vcl(...)) takes the name of a VCL label",
                        span,
                    ))
                }
            };
            self.use_(UseKind::Return(kind), scope::RECV, action.span);
            self.uses_labels = true;
            if !self.labels_used.contains(&label) {
                self.labels_used.push(label.clone());
            }
            return Ok(Stmt::Return(kind, vec![Expr::Const(Value::str(&label))]));
        }
        let mut allowed: u16 = Method::ALL
            .iter()
            .filter(|m| m.returns().contains(&kind))
            .map(|m| m.bit())
            .fold(0, |a, b| a | b);
        let arg_types: &[Type] = match kind {
            ActionKind::Synth | ActionKind::Error => &[Type::Int, Type::String],
            ActionKind::Pass if !args.is_empty() => {
                allowed &= scope::BE_RESPONSE;
                &[Type::Duration]
            }
            // In vcl_backend_response, a bare `pass` is hit-for-pass for
            // beresp.ttl, as in varnishd.
            ActionKind::Pass => &[],
            _ => &[],
        };
        if args.len() > arg_types.len() || (kind == ActionKind::Synth && args.is_empty()) {
            return Err(CompileError::new(
                format!(
                    "return ({}) takes {}",
                    kind.name(),
                    match kind {
                        ActionKind::Synth => "(status[, \"reason\"])",
                        ActionKind::Error => "at most (status[, \"reason\"])",
                        ActionKind::Pass => "at most one duration",
                        _ => "no arguments",
                    }
                ),
                span,
            ));
        }
        let mut compiled = Vec::new();
        for (a, ty) in args.iter().zip(arg_types) {
            compiled.push(self.expect(a, *ty)?);
        }
        self.use_(UseKind::Return(kind), allowed, action.span);
        Ok(Stmt::Return(kind, compiled))
    }

    fn set(&mut self, target: &ast::Ident, op: AssignOp, value: &ast::Expr) -> CResult<Stmt> {
        let place = self.place(target, false)?;
        let ty = match &place {
            Place::Var(v) => v.spec().ty,
            Place::Header(..) => Type::String,
        };
        if ty == Type::Body {
            let v = self.expect(value, Type::String)?;
            return Ok(match op {
                AssignOp::Set => Stmt::Set(place, v),
                AssignOp::Add => Stmt::Synthetic(v),
                _ => {
                    return Err(CompileError::new(
                        "Only '=' and '+=' apply to a body",
                        target.span,
                    ))
                }
            });
        }
        if op == AssignOp::Set {
            let v = self.expect(value, ty)?;
            return Ok(Stmt::Set(place, v));
        }
        let current = match &place {
            Place::Var(v) => Expr::Var(*v),
            Place::Header(k, n) => Expr::Header(*k, n.clone()),
        };
        let bin = match op {
            AssignOp::Add => BinOp::Add,
            AssignOp::Sub => BinOp::Sub,
            AssignOp::Mul => BinOp::Mul,
            AssignOp::Div => BinOp::Div,
            AssignOp::Set => unreachable!("handled above"),
        };
        if ty == Type::String && bin == BinOp::Add {
            let rhs = self.expect(value, Type::String)?;
            return Ok(Stmt::Set(place, Expr::Concat(vec![current, rhs])));
        }
        let (rhs, rty) = self.expr(value)?;
        let Some(result) = arith_type(bin, ty, rty) else {
            return Err(CompileError::new(
                format!("Operator {}= not possible on {ty} with {rty}", bin.symbol()),
                value.span,
            ));
        };
        if result != ty {
            return Err(CompileError::new(
                format!("Expected {ty} got {result}"),
                value.span,
            ));
        }
        Ok(Stmt::Set(
            place,
            Expr::Arith(bin, ty, Box::new(current), Box::new(rhs)),
        ))
    }

    /// The target of `set`/`unset`.
    fn place(&mut self, target: &ast::Ident, unset: bool) -> CResult<Place> {
        match self.symbol(target)? {
            Sym::Var(v) => {
                let spec = v.spec();
                let writable = spec.write != 0
                    && !(spec.versions == Versions::WritableIn40 && self.version == (4, 1));
                let mask = if unset { spec.unset } else { spec.write };
                if (unset && spec.unset == 0) || (!unset && !writable) {
                    return Err(CompileError::new(
                        format!(
                            "Variable '{}' is read only{}",
                            spec.name,
                            if unset { " (cannot be unset)" } else { "" }
                        ),
                        target.span,
                    ));
                }
                if let Some(why) = crate::vars::not_settable_in_lacquer(v) {
                    return Err(CompileError::new(
                        format!("'{}' cannot be set in Lacquer: {why}", spec.name),
                        target.span,
                    ));
                }
                self.use_(UseKind::Write(spec.name.to_string()), mask, target.span);
                Ok(Place::Var(v))
            }
            Sym::Header(fam, name) => {
                if fam.write == 0 {
                    return Err(CompileError::new(
                        format!("Variable '{}' is read only", target.name),
                        target.span,
                    ));
                }
                if PROTECTED_HEADERS
                    .iter()
                    .any(|p| p.eq_ignore_ascii_case(&name))
                {
                    return Err(CompileError::new(
                        format!(
                            "Variable '{}' is read only: it frames the message",
                            target.name
                        ),
                        target.span,
                    ));
                }
                self.use_(UseKind::Write(target.name.clone()), fam.write, target.span);
                Ok(Place::Header(fam.kind, name.into()))
            }
            _ => Err(CompileError::new(
                format!("'{}' is not a variable that can be set", target.name),
                target.span,
            )),
        }
    }

    fn symbol(&mut self, id: &ast::Ident) -> CResult<Sym> {
        let name = id.name.as_str();
        // Varnish reads the boolean literals without regard to case.
        if name.eq_ignore_ascii_case("true") {
            return Ok(Sym::Value(Value::Bool(true), Type::Bool));
        }
        if name.eq_ignore_ascii_case("false") {
            return Ok(Sym::Value(Value::Bool(false), Type::Bool));
        }
        if let Some(v) = Var::by_name(name) {
            let spec = v.spec();
            let absent = match spec.versions {
                Versions::V40 => self.version != (4, 0),
                Versions::V41 => self.version != (4, 1),
                _ => false,
            };
            if absent {
                return Err(CompileError::new(
                    format!(
                        "Variable '{}' does not exist in VCL {}.{}",
                        spec.name, self.version.0, self.version.1
                    ),
                    id.span,
                ));
            }
            return Ok(Sym::Var(v));
        }
        if let Some((fam, header)) = header_family(name) {
            if header.is_empty() || header.contains('.') {
                return Err(CompileError::new(
                    format!("Invalid header name in '{name}'"),
                    id.span,
                ));
            }
            return Ok(Sym::Header(fam, header.to_string()));
        }
        if let Some(rest) = name.strip_prefix("storage.") {
            let known =
                |store: &str| store == "Transient" || self.storages.iter().any(|s| s == store);
            match rest.split_once('.') {
                None if known(rest) => {
                    return Ok(Sym::Value(Value::Stevedore(name.into()), Type::Stevedore));
                }
                Some((store, field)) if known(store) => {
                    if let Some((f, ty)) = StorageField::by_name(field) {
                        return Ok(Sym::Storage(store.into(), f, ty));
                    }
                }
                _ => {}
            }
        }
        if let Some(p) = name.strip_prefix("param.") {
            if let Some((index, spec)) = lacquer_core::params::Params::lookup(p) {
                use lacquer_core::params::Kind;
                let ty = match spec.kind {
                    Kind::Seconds => Some(Type::Duration),
                    Kind::Fraction => Some(Type::Real),
                    Kind::Bytes => Some(Type::Bytes),
                    Kind::Count => Some(Type::Int),
                    Kind::Bool => Some(Type::Bool),
                    Kind::Text => Some(Type::String),
                    // A flag set has no VCL type.
                    Kind::Features => None,
                };
                if let Some(ty) = ty {
                    return Ok(Sym::Param(index, ty));
                }
            }
        }
        if let Some(i) = self.backends.iter().position(|b| b.def.name == name) {
            self.backends[i].used = true;
            return Ok(Sym::Value(
                Value::Backend(BackendRef::Backend(i)),
                Type::Backend,
            ));
        }
        if let Some(i) = self.acls.iter().position(|a| a.def.name == name) {
            self.acls[i].used = true;
            return Ok(Sym::Acl(i));
        }
        if let Some(i) = self.probes.iter().position(|p| p.def.name == name) {
            self.probes[i].used = true;
            return Ok(Sym::Value(Value::Probe(i), Type::Probe));
        }
        if self.objects.iter().any(|o| o.name == name) {
            return Ok(Sym::Object);
        }
        if let Some(i) = self.subs.iter().position(|s| s.name == name) {
            return Ok(Sym::Value(Value::Sub(i), Type::Sub));
        }
        Err(CompileError::new(
            format!("Symbol not found: '{name}'"),
            id.span,
        ))
    }

    /// An identifier used as a value.
    pub(crate) fn ident_expr(&mut self, id: &ast::Ident) -> CResult<(Expr, Type)> {
        match self.symbol(id)? {
            Sym::Var(v) => {
                let spec = v.spec();
                if spec.read == 0 {
                    return Err(CompileError::new(
                        format!("Variable '{}' cannot be read", spec.name),
                        id.span,
                    ));
                }
                self.use_(UseKind::Read(spec.name), spec.read, id.span);
                if spec.ty == Type::Http {
                    let kind = match v {
                        Var::Req => HttpKind::Req,
                        Var::Bereq => HttpKind::Bereq,
                        Var::Beresp => HttpKind::Beresp,
                        _ => HttpKind::Resp,
                    };
                    return Ok((Expr::Const(Value::Http(kind)), Type::Http));
                }
                Ok((Expr::Var(v), spec.ty))
            }
            Sym::Header(fam, name) => {
                self.use_(UseKind::ReadHeader(id.name.clone()), fam.read, id.span);
                Ok((Expr::Header(fam.kind, name.into()), Type::String))
            }
            Sym::Value(v, t) => Ok((Expr::Const(v), t)),
            Sym::Param(i, t) => Ok((Expr::Param(i), t)),
            Sym::Storage(s, f, t) => {
                self.use_(UseKind::Read("storage.*"), scope::CLIENT_BACKEND, id.span);
                Ok((Expr::Storage(s, f), t))
            }
            Sym::Acl(_) => Err(CompileError::new(
                format!("ACL '{}' can only be used after '~' or '!~'", id.name),
                id.span,
            )),
            Sym::Object => Err(CompileError::new(
                format!(
                    "Object '{}' is not a value: call one of its methods, like {}.backend()",
                    id.name, id.name
                ),
                id.span,
            )),
        }
    }

    /// A condition: any value with a truth (BOOL, a string that may be
    /// unset, numbers, backends).
    fn cond(&mut self, e: &ast::Expr) -> CResult<Expr> {
        let (x, t) = self.expr(e)?;
        match t {
            Type::Bool
            | Type::String
            | Type::Int
            | Type::Real
            | Type::Duration
            | Type::Bytes
            | Type::Backend
            | Type::Ip => Ok(x),
            _ => Err(CompileError::new(format!("Expected BOOL got {t}"), e.span)),
        }
    }

    /// An expression of a required type, with VCL's implicit conversions.
    pub(crate) fn expect(&mut self, e: &ast::Expr, want: Type) -> CResult<Expr> {
        if let ExprKind::Ident(name) = &e.kind {
            let id = ast::Ident {
                name: name.clone(),
                span: e.span,
            };
            match want {
                Type::Header => {
                    return match self.symbol(&id)? {
                        Sym::Header(fam, h) => {
                            self.use_(UseKind::ReadHeader(name.clone()), fam.read, e.span);
                            Ok(Expr::Const(Value::Header(fam.kind, h.into())))
                        }
                        _ => Err(CompileError::new(
                            format!("Expected a header (like req.http.X) got '{name}'"),
                            e.span,
                        )),
                    }
                }
                Type::Acl => {
                    return match self.symbol(&id)? {
                        Sym::Acl(i) => Ok(Expr::Const(Value::Int(i as i64))),
                        _ => Err(CompileError::new(
                            format!("Expected an ACL got '{name}'"),
                            e.span,
                        )),
                    }
                }
                _ => {}
            }
        }
        let (x, got) = self.expr(e)?;
        self.coerce(x, got, want, e.span)
    }

    fn coerce(&mut self, x: Expr, got: Type, want: Type, span: Span) -> CResult<Expr> {
        if got == want {
            return Ok(x);
        }
        match (got, want) {
            (g, Type::String | Type::Body) if g.stringifies() && g != Type::Blob => {
                Ok(Expr::ToStr(Box::new(x)))
            }
            (Type::Int, Type::Real) => Ok(Expr::ToReal(Box::new(x))),
            (Type::Stevedore, Type::String) => Ok(Expr::ToStr(Box::new(x))),
            _ => Err(CompileError::new(
                format!("Expected {want} got {got}"),
                span,
            )),
        }
    }

    pub(crate) fn expr(&mut self, e: &ast::Expr) -> CResult<(Expr, Type)> {
        match &e.kind {
            ExprKind::Str(s) => Ok((Expr::Const(Value::str(s)), Type::String)),
            ExprKind::Blob(b) => Ok((
                Expr::Const(Value::Blob(bytes::Bytes::copy_from_slice(b))),
                Type::Blob,
            )),
            ExprKind::Int(i) => Ok((Expr::Const(Value::Int(*i)), Type::Int)),
            ExprKind::Real(f) => Ok((Expr::Const(Value::Real(*f)), Type::Real)),
            ExprKind::Duration(d) => Ok((Expr::Const(Value::Duration(*d)), Type::Duration)),
            ExprKind::Bytes(b) => Ok((Expr::Const(Value::Bytes(*b)), Type::Bytes)),
            ExprKind::Ident(name) => self.ident_expr(&ast::Ident {
                name: name.clone(),
                span: e.span,
            }),
            ExprKind::Unary(UnOp::Not, inner) => {
                let x = self.cond(inner)?;
                Ok((Expr::Not(Box::new(x)), Type::Bool))
            }
            ExprKind::Unary(UnOp::Neg, inner) => {
                let (x, t) = self.expr(inner)?;
                if !matches!(t, Type::Int | Type::Real | Type::Duration) {
                    return Err(CompileError::new(format!("Cannot negate {t}"), e.span));
                }
                Ok((Expr::Neg(Box::new(x)), t))
            }
            ExprKind::Binary(op, l, r) => self.binary(*op, l, r, e.span),
            ExprKind::Call { name, args } => self.call(name, args, e.span),
        }
    }

    fn binary(
        &mut self,
        op: BinOp,
        l: &ast::Expr,
        r: &ast::Expr,
        span: Span,
    ) -> CResult<(Expr, Type)> {
        match op {
            BinOp::And | BinOp::Or => {
                let a = Box::new(self.cond(l)?);
                let b = Box::new(self.cond(r)?);
                Ok((
                    if op == BinOp::And {
                        Expr::And(a, b)
                    } else {
                        Expr::Or(a, b)
                    },
                    Type::Bool,
                ))
            }
            BinOp::Match | BinOp::NoMatch => {
                let negate = op == BinOp::NoMatch;
                let (lx, lt) = self.expr(l)?;
                if let ExprKind::Ident(name) = &r.kind {
                    if let Some(i) = self.acls.iter().position(|a| &a.def.name == name) {
                        if lt != Type::Ip {
                            return Err(CompileError::new(
                                format!("An ACL matches an IP, not {lt}"),
                                l.span,
                            ));
                        }
                        self.acls[i].used = true;
                        return Ok((Expr::Acl(Box::new(lx), i, negate), Type::Bool));
                    }
                }
                let Some(pattern) = constant_string(r) else {
                    return Err(CompileError::new(
                        "Expected a regular expression in quotes (or an ACL name) after '~'",
                        r.span,
                    ));
                };
                let lx = self.coerce(lx, lt, Type::String, l.span)?;
                let re = regex(&pattern, r.span)?;
                Ok((Expr::Regex(Box::new(lx), re, negate), Type::Bool))
            }
            BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Gt | BinOp::Le | BinOp::Ge => {
                // Two ACLs compare by identity, as names (`a1 == a1`).
                if let (ExprKind::Ident(a), ExprKind::Ident(b), BinOp::Eq | BinOp::Ne) =
                    (&l.kind, &r.kind, op)
                {
                    let acl = |c: &mut Self, name: &str, span| match c.symbol(&ast::Ident {
                        name: name.to_string(),
                        span,
                    }) {
                        Ok(Sym::Acl(i)) => Some(i),
                        _ => None,
                    };
                    if let (Some(x), Some(y)) = (acl(self, a, l.span), acl(self, b, r.span)) {
                        return Ok((
                            Expr::Const(Value::Bool((x == y) == (op == BinOp::Eq))),
                            Type::Bool,
                        ));
                    }
                }
                let (lx, lt) = self.expr(l)?;
                let (rx, rt) = self.expr(r)?;
                let ordered = !matches!(op, BinOp::Eq | BinOp::Ne);
                let kind = match (lt, rt) {
                    (a, b)
                        if a.is_numeric()
                            && b.is_numeric()
                            && (a == b || (num_like(a) && num_like(b))) =>
                    {
                        CmpKind::Num
                    }
                    // Strings order byte by byte, as strcmp does.
                    (Type::String, Type::String) => CmpKind::Str,
                    (Type::Bool, Type::Bool) if !ordered => CmpKind::Bool,
                    (Type::Backend, Type::Backend) | (Type::Probe, Type::Probe) if !ordered => {
                        CmpKind::Backend
                    }
                    (Type::Ip, Type::Ip) if !ordered => CmpKind::Ip,
                    (Type::Stevedore, Type::Stevedore) if !ordered => CmpKind::Str,
                    _ => {
                        return Err(CompileError::new(
                            format!("Comparison {lt} {} {rt} is not possible", op.symbol()),
                            span,
                        ))
                    }
                };
                Ok((Expr::Cmp(op, kind, Box::new(lx), Box::new(rx)), Type::Bool))
            }
            BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Mod => {
                let (lx, lt) = self.expr(l)?;
                let (rx, rt) = self.expr(r)?;
                if let Some(t) = arith_type(op, lt, rt) {
                    return Ok((Expr::Arith(op, t, Box::new(lx), Box::new(rx)), t));
                }
                if op == BinOp::Add
                    && lt.stringifies()
                    && rt.stringifies()
                    && lt != Type::Blob
                    && rt != Type::Blob
                {
                    let mut parts = Vec::new();
                    for (x, t, s) in [(lx, lt, l.span), (rx, rt, r.span)] {
                        match x {
                            Expr::Concat(inner) => parts.extend(inner),
                            x => parts.push(self.coerce(x, t, Type::String, s)?),
                        }
                    }
                    return Ok((Expr::Concat(parts), Type::String));
                }
                Err(CompileError::new(
                    format!("Operator {} not possible on {lt} and {rt}", op.symbol()),
                    span,
                ))
            }
        }
    }
}

fn num_like(t: Type) -> bool {
    matches!(t, Type::Int | Type::Real)
}
