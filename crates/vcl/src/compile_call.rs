//! The checker and compiler, calls: `regsub`/`regsuball`, vmod functions
//! and object methods with their arguments bound to parameters, the type
//! rules of arithmetic, and regular expressions.

use crate::ast::{self, BinOp, ExprKind};
use crate::compile::{CResult, Compiler, UseKind};
use crate::program::Expr;
use crate::source::{CompileError, Span};
use crate::types::{Type, Value};
use crate::vmod::{Dflt, Param};
use crate::vmods;
use std::sync::Arc;

impl Compiler {
    pub(crate) fn call(
        &mut self,
        name: &ast::Ident,
        args: &[ast::Arg],
        span: Span,
    ) -> CResult<(Expr, Type)> {
        let n = name.name.as_str();
        if n == "regsub" || n == "regsuball" {
            if args.len() != 3 || args.iter().any(|a| a.name.is_some()) {
                return Err(CompileError::new(
                    format!("{n}() takes (string, \"regex\", replacement)"),
                    span,
                ));
            }
            let subject = self.expect(&args[0].value, Type::String)?;
            let Some(pattern) = constant_string(&args[1].value) else {
                return Err(CompileError::new(
                    "Expected a regular expression in quotes",
                    args[1].value.span,
                ));
            };
            let re = regex(&pattern, args[1].value.span)?;
            // Its DFAs are made with the program, not by its first request.
            re.prepare_spans();
            let replacement = self.expect(&args[2].value, Type::String)?;
            return Ok((
                Expr::Regsub {
                    all: n == "regsuball",
                    subject: Box::new(subject),
                    re,
                    replacement: Box::new(replacement),
                },
                Type::String,
            ));
        }
        if matches!(n, "hash_data" | "synthetic" | "ban") {
            return Err(CompileError::new(
                format!("{n}() returns nothing: use it as a statement"),
                span,
            ));
        }
        let Some((prefix, func)) = n.rsplit_once('.') else {
            return Err(CompileError::new(
                format!("Function '{n}' not found"),
                name.span,
            ));
        };
        if let (Some(f), true) = (string_method(func), args.is_empty()) {
            // VCL 4.1's methods of a STRING value (`req.http.host.lower()`).
            let receiver = ast::Ident {
                name: prefix.to_string(),
                span: name.span,
            };
            if let Ok((value, Type::String)) = self.ident_expr(&receiver) {
                return Ok((Expr::Func(f, vec![value]), Type::String));
            }
        }
        if let Some(v) = vmods::vmod(prefix) {
            if !self.imports.iter().any(|i| i == prefix) {
                return Err(CompileError::new(
                    format!("Symbol not found: '{n}' (add 'import {prefix};')"),
                    name.span,
                ));
            }
            let Some(f) = v.functions.iter().find(|f| f.name == func) else {
                return Err(CompileError::new(
                    format!("Function '{n}' not found in vmod {prefix}"),
                    name.span,
                ));
            };
            self.use_(UseKind::Func(n.to_string()), f.scope, name.span);
            let bound = self.bind(f.params, args, span, n)?;
            if n == "std.rollback" {
                self.uses_rollback = true;
            }
            if n == "std.cache_req_body" {
                let size = match bound.first() {
                    Some(Expr::Const(Value::Bytes(b))) => *b as u64,
                    _ => 1 << 20,
                };
                self.cache_req_body = Some(self.cache_req_body.unwrap_or(0).max(size));
            }
            return Ok((Expr::Func(f, bound), f.ret));
        }
        if let Some(o) = self.objects.iter().position(|o| o.name == prefix) {
            let class = self.objects[o].class;
            let Some(m) = class.methods.iter().find(|m| m.name == func) else {
                return Err(CompileError::new(
                    format!(
                        "Object '{prefix}' ({}.{}) has no method '{func}'",
                        class.vmod, class.name
                    ),
                    name.span,
                ));
            };
            self.use_(UseKind::Func(n.to_string()), m.scope, name.span);
            let bound = self.bind(m.params, args, span, n)?;
            return Ok((Expr::Method(o, m, bound), m.ret));
        }
        Err(CompileError::new(
            format!("Symbol not found: '{n}'"),
            name.span,
        ))
    }

    /// Binds call arguments (positional, then named) to parameters.
    pub(crate) fn bind(
        &mut self,
        params: &[Param],
        args: &[ast::Arg],
        span: Span,
        what: &str,
    ) -> CResult<Vec<Expr>> {
        let mut slots: Vec<Option<&ast::Expr>> = vec![None; params.len()];
        let mut positional = 0;
        for a in args {
            let i = match &a.name {
                None => {
                    if positional >= params.len() {
                        return Err(CompileError::new(
                            format!("Too many arguments to {what}() (it takes {})", params.len()),
                            a.value.span,
                        ));
                    }
                    positional += 1;
                    positional - 1
                }
                Some(n) => params
                    .iter()
                    .position(|p| p.name == n.name)
                    .ok_or_else(|| {
                        CompileError::new(
                            format!("{what}() has no argument named '{}'", n.name),
                            n.span,
                        )
                    })?,
            };
            if slots[i].is_some() {
                return Err(CompileError::new(
                    format!("Argument '{}' of {what}() given twice", params[i].name),
                    a.value.span,
                ));
            }
            slots[i] = Some(&a.value);
        }
        let mut out = Vec::with_capacity(params.len());
        for (p, slot) in params.iter().zip(slots) {
            out.push(match slot {
                Some(e) if p.ty == Type::Enum => {
                    let ExprKind::Ident(word) = &e.kind else {
                        return Err(CompileError::new(
                            format!("Expected one of {} for '{}'", p.enums.join(", "), p.name),
                            e.span,
                        ));
                    };
                    let Some(w) = p.enums.iter().find(|w| **w == word) else {
                        return Err(CompileError::new(
                            format!(
                                "Expected one of {} for '{}' got '{word}'",
                                p.enums.join(", "),
                                p.name
                            ),
                            e.span,
                        ));
                    };
                    Expr::Const(Value::Enum(w))
                }
                Some(e) if p.ty == Type::Regex => {
                    let Some(pattern) = constant_string(e) else {
                        return Err(CompileError::new(
                            "Expected a regular expression in quotes",
                            e.span,
                        ));
                    };
                    let re = regex(&pattern, e.span)?;
                    Expr::Const(Value::Regex(crate::types::RegexArg(re)))
                }
                Some(e) => self.expect(e, p.ty)?,
                None => Expr::Const(match p.default {
                    Dflt::Required => {
                        return Err(CompileError::new(
                            format!("Argument '{}' missing in {what}()", p.name),
                            span,
                        ))
                    }
                    Dflt::Optional => Value::Unset,
                    Dflt::Bool(b) => Value::Bool(b),
                    Dflt::Int(i) => Value::Int(i),
                    Dflt::Real(f) => Value::Real(f),
                    Dflt::Duration(d) => Value::Duration(d),
                    Dflt::Str(s) => Value::str(s),
                    Dflt::Enum(w) => Value::Enum(w),
                }),
            });
        }
        Ok(out)
    }
}

/// The result type of arithmetic, if the operand types allow it.
pub(crate) fn arith_type(op: BinOp, l: Type, r: Type) -> Option<Type> {
    use Type::*;
    match (op, l, r) {
        (BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Mod, Int, Int) => Some(Int),
        (BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div, Int | Real, Int | Real) => Some(Real),
        (BinOp::Add | BinOp::Sub, Duration, Duration) => Some(Duration),
        (BinOp::Add | BinOp::Sub, Bytes, Bytes) => Some(Bytes),
        (BinOp::Add | BinOp::Sub, Time, Duration) => Some(Time),
        (BinOp::Sub, Time, Time) => Some(Duration),
        (BinOp::Mul | BinOp::Div, Duration, Int | Real) => Some(Duration),
        (BinOp::Mul, Int | Real, Duration) => Some(Duration),
        (BinOp::Div, Duration, Duration) => Some(Real),
        (BinOp::Mul | BinOp::Div, Bytes, Int | Real) => Some(Bytes),
        _ => None,
    }
}

/// Compiles a regular expression.
pub(crate) fn regex(pattern: &str, span: Span) -> CResult<Arc<lacquer_core::regex::Regex>> {
    match lacquer_core::regex::compile(pattern) {
        Ok(re) => Ok(Arc::new(re)),
        Err(e) => Err(CompileError::new(
            format!("Regular expression error: {e}"),
            span,
        )),
    }
}

/// The function behind a STRING method: `lower()` and `upper()`, which
/// are std's `tolower` and `toupper` bound to the value.
fn string_method(name: &str) -> Option<&'static crate::vmod::FuncSpec> {
    let std_name = match name {
        "lower" => "tolower",
        "upper" => "toupper",
        _ => return None,
    };
    vmods::vmod("std")?
        .functions
        .iter()
        .find(|f| f.name == std_name)
}

/// A string known when the program compiles: a literal, or literals
/// joined with `+` (a regex may be written in pieces).
pub(crate) fn constant_string(e: &ast::Expr) -> Option<String> {
    match &e.kind {
        ExprKind::Str(s) => Some(s.clone()),
        ExprKind::Binary(BinOp::Add, a, b) => {
            let mut s = constant_string(a)?;
            s.push_str(&constant_string(b)?);
            Some(s)
        }
        _ => None,
    }
}
