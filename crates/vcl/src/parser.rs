//! The VCL parser: tokens to declarations, statements and expressions.
//! `include "file";` is resolved on the token stream first, as Varnish
//! does, so an include may appear wherever its contents would be legal.

use crate::ast::*;
use crate::lexer::{lex, Tok, Token};
use crate::source::{CompileError, Source, Span};

/// Reads an included file: given the name as written and the name of the
/// including source, returns the source to add.
pub type Loader<'a> = dyn FnMut(&str, &str) -> Result<Source, String> + 'a;

const MAX_INCLUDE_DEPTH: usize = 16;

/// Lexes source `file` and every file it includes, appending included
/// sources to `sources`.
pub fn tokens_with_includes(
    sources: &mut Vec<Source>,
    file: usize,
    loader: &mut Loader<'_>,
    depth: usize,
) -> Result<Vec<Token>, CompileError> {
    let toks = lex(&sources[file].text, file)?;
    let mut out = Vec::with_capacity(toks.len());
    let mut i = 0;
    while i < toks.len() {
        if matches!(&toks[i].tok, Tok::Ident(s) if s == "include") {
            let at = toks[i].span;
            let Some(Token {
                tok: Tok::Str(name),
                span: name_span,
            }) = toks.get(i + 1)
            else {
                return Err(CompileError::new(
                    "Expected a file name in quotes after 'include'",
                    toks.get(i + 1).map_or(at, |t| t.span),
                ));
            };
            if !matches!(toks.get(i + 2).map(|t| &t.tok), Some(Tok::Op(";"))) {
                return Err(CompileError::new(
                    "Expected ';' after include \"...\"",
                    toks.get(i + 2).map_or(*name_span, |t| t.span),
                ));
            }
            if depth >= MAX_INCLUDE_DEPTH {
                return Err(CompileError::new(
                    "Includes nested too deeply (an include loop?)",
                    *name_span,
                ));
            }
            let from = sources[file].name.clone();
            let src = loader(name, &from).map_err(|e| {
                CompileError::new(format!("Cannot read include \"{name}\": {e}"), *name_span)
            })?;
            sources.push(src);
            let index = sources.len() - 1;
            let mut inner = tokens_with_includes(sources, index, loader, depth + 1)?;
            inner.pop(); // its Eof
            out.extend(inner);
            i += 3;
            continue;
        }
        out.push(toks[i].clone());
        i += 1;
    }
    Ok(out)
}

/// Parses a token stream into declarations.
pub fn parse(tokens: Vec<Token>) -> Result<Vec<Decl>, CompileError> {
    let mut p = Parser {
        toks: tokens,
        pos: 0,
    };
    let mut decls = Vec::new();
    while !p.at_eof() {
        decls.push(p.decl()?);
    }
    Ok(decls)
}

struct Parser {
    toks: Vec<Token>,
    pos: usize,
}

type PResult<T> = Result<T, CompileError>;

impl Parser {
    fn peek(&self) -> &Tok {
        &self.toks[self.pos].tok
    }

    fn peek_at(&self, n: usize) -> &Tok {
        &self.toks[(self.pos + n).min(self.toks.len() - 1)].tok
    }

    fn span(&self) -> Span {
        self.toks[self.pos].span
    }

    fn prev_span(&self) -> Span {
        self.toks[self.pos.saturating_sub(1)].span
    }

    fn at_eof(&self) -> bool {
        matches!(self.peek(), Tok::Eof)
    }

    fn bump(&mut self) -> Token {
        let t = self.toks[self.pos].clone();
        if self.pos + 1 < self.toks.len() {
            self.pos += 1;
        }
        t
    }

    fn is_op(&self, op: &str) -> bool {
        matches!(self.peek(), Tok::Op(o) if *o == op)
    }

    fn is_word(&self, w: &str) -> bool {
        matches!(self.peek(), Tok::Ident(s) if s == w)
    }

    fn eat_op(&mut self, op: &str) -> bool {
        if self.is_op(op) {
            self.bump();
            true
        } else {
            false
        }
    }

    fn expected(&self, what: &str) -> CompileError {
        CompileError::new(
            format!("Expected {what} got {}", self.peek().describe()),
            self.span(),
        )
    }

    fn expect_op(&mut self, op: &str) -> PResult<Span> {
        if self.is_op(op) {
            Ok(self.bump().span)
        } else {
            Err(self.expected(&format!("'{op}'")))
        }
    }

    fn ident(&mut self, what: &str) -> PResult<Ident> {
        match self.peek().clone() {
            Tok::Ident(name) => {
                let span = self.bump().span;
                Ok(Ident { name, span })
            }
            _ => Err(self.expected(what)),
        }
    }

    fn decl(&mut self) -> PResult<Decl> {
        let kw = self.ident("'vcl', 'import', 'backend', 'probe', 'acl' or 'sub'")?;
        match kw.name.as_str() {
            "vcl" => {
                let (value, span) = match self.peek().clone() {
                    Tok::Num { value, int: false } => (value, self.bump().span),
                    _ => return Err(self.expected("a VCL version (4.0 or 4.1)")),
                };
                let version = if value == 4.0 {
                    (4, 0)
                } else if value == 4.1 {
                    (4, 1)
                } else {
                    return Err(CompileError::new(
                        "VCL version not supported: use 'vcl 4.0;' or 'vcl 4.1;'",
                        span,
                    ));
                };
                self.expect_op(";")?;
                Ok(Decl::Vcl {
                    version,
                    span: kw.span.to(span),
                })
            }
            "import" => {
                let name = self.ident("a vmod name")?;
                let from = if self.is_word("from") {
                    self.bump();
                    match self.bump().tok {
                        Tok::Str(s) => Some(s),
                        _ => return Err(CompileError::new("Expected a path string after 'from'", self.prev_span())),
                    }
                } else {
                    None
                };
                self.expect_op(";")?;
                Ok(Decl::Import { name, from })
            }
            "backend" => {
                let name = self.ident("a backend name")?;
                if matches!(self.peek(), Tok::Ident(s) if s.eq_ignore_ascii_case("none")) {
                    self.bump();
                    self.expect_op(";")?;
                    return Ok(Decl::Backend { name, fields: None });
                }
                let fields = self.fields()?;
                Ok(Decl::Backend {
                    name,
                    fields: Some(fields),
                })
            }
            "probe" => {
                let name = self.ident("a probe name")?;
                let fields = self.fields()?;
                Ok(Decl::Probe { name, fields })
            }
            "acl" => {
                let name = self.ident("an acl name")?;
                // Flags: `+log` logs matches; the others (`pedantic`,
                // `table`, `fold`) change nothing here.
                let mut log = false;
                while self.is_op("+") || self.is_op("-") {
                    let on = self.eat_op("+");
                    if !on {
                        self.bump();
                    }
                    let flag = self.ident("an acl flag")?;
                    if flag.name == "log" {
                        log = on;
                    }
                }
                self.expect_op("{")?;
                let mut entries = Vec::new();
                while !self.eat_op("}") {
                    entries.push(self.acl_entry()?);
                }
                Ok(Decl::Acl { name, entries, log })
            }
            "sub" => {
                let name = self.ident("a subroutine name")?;
                let body = self.block()?;
                Ok(Decl::Sub { name, body })
            }
            other => Err(CompileError::new(
                format!("Expected 'vcl', 'import', 'include', 'backend', 'probe', 'acl' or 'sub' got '{other}'"),
                kw.span,
            )),
        }
    }

    fn fields(&mut self) -> PResult<Vec<Field>> {
        self.expect_op("{")?;
        let mut fields = Vec::new();
        while !self.eat_op("}") {
            self.expect_op(".")?;
            let name = self.ident("a field name")?;
            self.expect_op("=")?;
            let value = if self.is_op("{") {
                let start = self.span();
                let inner = self.fields()?;
                FieldValue::Probe(inner, start.to(self.prev_span()))
            } else if matches!(self.peek(), Tok::Str(_)) && matches!(self.peek_at(1), Tok::Str(_)) {
                let mut parts = Vec::new();
                while let Tok::Str(s) = self.peek().clone() {
                    parts.push((s, self.bump().span));
                }
                FieldValue::Strings(parts)
            } else {
                FieldValue::Expr(self.expr()?)
            };
            if !matches!(value, FieldValue::Probe(..)) || self.is_op(";") {
                self.expect_op(";")?;
            }
            fields.push(Field { name, value });
        }
        Ok(fields)
    }

    fn acl_entry(&mut self) -> PResult<AclEntry> {
        let start = self.span();
        let negated = self.eat_op("!");
        let optional = self.eat_op("(");
        let addr = match self.peek().clone() {
            Tok::Str(s) => {
                self.bump();
                s
            }
            _ => return Err(self.expected("an address in quotes")),
        };
        let mut mask = None;
        if self.eat_op("/") {
            match self.peek().clone() {
                Tok::Num { value, int: true } if value <= 128.0 => {
                    self.bump();
                    mask = Some(value as u8);
                }
                _ => return Err(self.expected("a mask length")),
            }
        }
        if optional {
            self.expect_op(")")?;
        }
        let span = start.to(self.prev_span());
        self.expect_op(";")?;
        Ok(AclEntry {
            negated,
            optional,
            addr,
            mask,
            span,
        })
    }

    fn block(&mut self) -> PResult<Vec<Stmt>> {
        self.expect_op("{")?;
        let mut stmts = Vec::new();
        while !self.eat_op("}") {
            if self.at_eof() {
                return Err(self.expected("'}'"));
            }
            if self.eat_op(";") {
                continue;
            }
            stmts.push(self.stmt()?);
        }
        Ok(stmts)
    }

    fn stmt(&mut self) -> PResult<Stmt> {
        if self.is_op("{") {
            return Ok(Stmt::Block(self.block()?));
        }
        let word = self.ident("a statement")?;
        let stmt = match word.name.as_str() {
            "set" => {
                let target = self.ident("a variable")?;
                let op = match self.peek() {
                    Tok::Op("=") => AssignOp::Set,
                    Tok::Op("+=") => AssignOp::Add,
                    Tok::Op("-=") => AssignOp::Sub,
                    Tok::Op("*=") => AssignOp::Mul,
                    Tok::Op("/=") => AssignOp::Div,
                    _ => return Err(self.expected("'=', '+=', '-=', '*=' or '/='")),
                };
                self.bump();
                let value = self.expr()?;
                Stmt::Set { target, op, value }
            }
            "unset" => Stmt::Unset {
                target: self.ident("a variable")?,
            },
            "remove" => {
                return Err(CompileError::new(
                    "'remove' is gone from VCL 4: use 'unset'",
                    word.span,
                ))
            }
            "call" => Stmt::Call {
                name: self.ident("a subroutine name")?,
            },
            "return" if self.is_op(";") => Stmt::Leave { span: word.span },
            "return" => {
                let parens = self.eat_op("(");
                let action = self.ident("a return action")?;
                let mut args = Vec::new();
                if self.eat_op("(") {
                    if !self.is_op(")") {
                        loop {
                            args.push(self.expr()?);
                            if !self.eat_op(",") {
                                break;
                            }
                        }
                    }
                    self.expect_op(")")?;
                }
                if parens {
                    self.expect_op(")")?;
                }
                Stmt::Return {
                    span: word.span.to(self.prev_span()),
                    action,
                    args,
                }
            }
            "if" => return self.if_stmt(),
            "new" => {
                let name = self.ident("an object name")?;
                self.expect_op("=")?;
                let ctor = self.expr()?;
                Stmt::New { name, ctor }
            }
            "error" => {
                return Err(CompileError::new(
                    "'error' is gone from VCL 4: use 'return (synth(status, \"reason\"))'",
                    word.span,
                ))
            }
            "esi" | "purge" => {
                return Err(CompileError::new(
                    format!(
                        "'{}' is gone from VCL 4: see beresp.do_esi and return (purge)",
                        word.name
                    ),
                    word.span,
                ))
            }
            _ if self.is_op("(") => {
                self.pos -= 1;
                Stmt::Expr(self.primary()?)
            }
            other => {
                return Err(CompileError::new(
                    format!("Expected an action, 'if', '{{' or '}}' got '{other}'"),
                    word.span,
                ))
            }
        };
        self.expect_op(";")?;
        Ok(stmt)
    }

    fn if_stmt(&mut self) -> PResult<Stmt> {
        let mut branches = Vec::new();
        let mut otherwise = None;
        loop {
            self.expect_op("(")?;
            let cond = self.expr()?;
            self.expect_op(")")?;
            let body = self.block()?;
            branches.push((cond, body));
            if self.is_word("elseif") || self.is_word("elsif") || self.is_word("elif") {
                self.bump();
                continue;
            }
            if self.is_word("else") {
                self.bump();
                if self.is_word("if") {
                    self.bump();
                    continue;
                }
                otherwise = Some(self.block()?);
            }
            break;
        }
        Ok(Stmt::If {
            branches,
            otherwise,
        })
    }

    pub fn expr(&mut self) -> PResult<Expr> {
        self.binary(0)
    }

    fn binary(&mut self, level: usize) -> PResult<Expr> {
        const LEVELS: &[&[(&str, BinOp)]] = &[&[("||", BinOp::Or)], &[("&&", BinOp::And)]];
        if level < LEVELS.len() {
            let mut lhs = self.binary(level + 1)?;
            loop {
                let Some(&(_, op)) = LEVELS[level].iter().find(|(s, _)| self.is_op(s)) else {
                    return Ok(lhs);
                };
                self.bump();
                let rhs = self.binary(level + 1)?;
                let span = lhs.span.to(rhs.span);
                lhs = Expr {
                    kind: ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)),
                    span,
                };
            }
        }
        self.not()
    }

    fn not(&mut self) -> PResult<Expr> {
        if self.is_op("!") {
            let start = self.bump().span;
            let inner = self.not()?;
            let span = start.to(inner.span);
            return Ok(Expr {
                kind: ExprKind::Unary(UnOp::Not, Box::new(inner)),
                span,
            });
        }
        self.comparison()
    }

    fn comparison(&mut self) -> PResult<Expr> {
        const CMP: &[(&str, BinOp)] = &[
            ("==", BinOp::Eq),
            ("!=", BinOp::Ne),
            ("<=", BinOp::Le),
            (">=", BinOp::Ge),
            ("<", BinOp::Lt),
            (">", BinOp::Gt),
            ("!~", BinOp::NoMatch),
            ("~", BinOp::Match),
        ];
        let lhs = self.additive()?;
        let Some(&(_, op)) = CMP.iter().find(|(s, _)| self.is_op(s)) else {
            return Ok(lhs);
        };
        self.bump();
        let rhs = self.additive()?;
        let span = lhs.span.to(rhs.span);
        Ok(Expr {
            kind: ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)),
            span,
        })
    }

    fn additive(&mut self) -> PResult<Expr> {
        let mut lhs = self.multiplicative()?;
        loop {
            let op = match self.peek() {
                Tok::Op("+") => BinOp::Add,
                Tok::Op("-") => BinOp::Sub,
                _ => return Ok(lhs),
            };
            self.bump();
            let rhs = self.multiplicative()?;
            let span = lhs.span.to(rhs.span);
            lhs = Expr {
                kind: ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)),
                span,
            };
        }
    }

    fn multiplicative(&mut self) -> PResult<Expr> {
        let mut lhs = self.unary()?;
        loop {
            let op = match self.peek() {
                Tok::Op("*") => BinOp::Mul,
                Tok::Op("/") => BinOp::Div,
                Tok::Op("%") => BinOp::Mod,
                _ => return Ok(lhs),
            };
            self.bump();
            let rhs = self.unary()?;
            let span = lhs.span.to(rhs.span);
            lhs = Expr {
                kind: ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)),
                span,
            };
        }
    }

    fn unary(&mut self) -> PResult<Expr> {
        if self.is_op("-") {
            let start = self.bump().span;
            let inner = self.unary()?;
            let span = start.to(inner.span);
            return Ok(Expr {
                kind: ExprKind::Unary(UnOp::Neg, Box::new(inner)),
                span,
            });
        }
        if self.eat_op("+") {
            return self.unary();
        }
        self.primary()
    }

    fn primary(&mut self) -> PResult<Expr> {
        let start = self.span();
        match self.peek().clone() {
            Tok::Blob(b) => {
                self.bump();
                Ok(Expr {
                    kind: ExprKind::Blob(b),
                    span: start,
                })
            }
            Tok::Str(s) => {
                self.bump();
                Ok(Expr {
                    kind: ExprKind::Str(s),
                    span: start,
                })
            }
            Tok::Num { value, int } => {
                self.bump();
                if let Tok::Ident(unit) = self.peek().clone() {
                    let scale = match unit.as_str() {
                        "ms" => Some((0.001, true)),
                        "s" => Some((1.0, true)),
                        "m" => Some((60.0, true)),
                        "h" => Some((3600.0, true)),
                        "d" => Some((86400.0, true)),
                        "w" => Some((7.0 * 86400.0, true)),
                        "y" => Some((365.0 * 86400.0, true)),
                        // Byte units as varnishd reads them, any case;
                        // a lone `m` stays minutes.
                        u => match u.to_ascii_lowercase().as_str() {
                            "b" => Some((1.0, false)),
                            "k" | "kb" => Some((1024.0, false)),
                            "mb" => Some((1024.0 * 1024.0, false)),
                            "g" | "gb" => Some((1024.0 * 1024.0 * 1024.0, false)),
                            "t" | "tb" => Some((1024.0f64.powi(4), false)),
                            _ => None,
                        },
                    };
                    if let Some((scale, duration)) = scale {
                        let span = start.to(self.bump().span);
                        let v = value * scale;
                        return Ok(Expr {
                            kind: if duration {
                                ExprKind::Duration(v)
                            } else {
                                ExprKind::Bytes(v)
                            },
                            span,
                        });
                    }
                }
                let kind = if int && value <= i64::MAX as f64 {
                    ExprKind::Int(value as i64)
                } else {
                    ExprKind::Real(value)
                };
                Ok(Expr { kind, span: start })
            }
            Tok::Ident(name) => {
                self.bump();
                if !self.is_op("(") {
                    return Ok(Expr {
                        kind: ExprKind::Ident(name),
                        span: start,
                    });
                }
                self.bump();
                let mut args = Vec::new();
                while !self.is_op(")") {
                    let named = matches!(self.peek(), Tok::Ident(_))
                        && matches!(self.peek_at(1), Tok::Op("="));
                    let name = if named {
                        let n = self.ident("an argument name")?;
                        self.bump();
                        Some(n)
                    } else {
                        None
                    };
                    args.push(Arg {
                        name,
                        value: self.expr()?,
                    });
                    if !self.eat_op(",") {
                        break;
                    }
                }
                self.expect_op(")")?;
                Ok(Expr {
                    kind: ExprKind::Call {
                        name: Ident { name, span: start },
                        args,
                    },
                    span: start.to(self.prev_span()),
                })
            }
            Tok::Op("(") => {
                self.bump();
                let inner = self.expr()?;
                self.expect_op(")")?;
                Ok(Expr {
                    kind: inner.kind,
                    span: start.to(self.prev_span()),
                })
            }
            _ => Err(self.expected("an expression")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decls(s: &str) -> Result<Vec<Decl>, CompileError> {
        parse(lex(s, 0)?)
    }

    #[test]
    fn parses_a_typical_program() {
        let d = decls(
            r#"vcl 4.1;
            import std;
            backend b1 { .host = "127.0.0.1"; .port = "8080";
                .probe = { .url = "/"; .interval = 5s; } }
            probe p { .request = "GET / HTTP/1.1" "Host: x"; }
            acl local { "localhost"; "10.0.0.0"/8; ! "10.1.2.3"; }
            sub vcl_recv {
                if (req.method == "PURGE" && client.ip ~ local) { return (purge); }
                elseif (req.url ~ "^/admin") { return (pass); }
                else if (req.http.x) { set req.http.y = "a" + req.http.x; }
                else { unset req.http.cookie; }
                set req.ttl = 1.5m;
                std.log("x" + 1 * 2 - 3);
                return (synth(404, "Nope"));
            }"#,
        )
        .unwrap();
        assert_eq!(d.len(), 6);
        let Decl::Sub { body, .. } = &d[5] else {
            panic!()
        };
        assert_eq!(body.len(), 4);
        let Stmt::Set { value, .. } = &body[1] else {
            panic!()
        };
        assert!(matches!(value.kind, ExprKind::Duration(v) if v == 90.0));
    }

    #[test]
    fn reports_what_was_expected() {
        let e = decls("vcl 4.1;\nsub vcl_recv {\n  set req.url = \"/\"\n}\n").unwrap_err();
        assert_eq!(e.message, "Expected ';' got '}'");
        let e = decls("vcl 5.0;").unwrap_err();
        assert!(e.message.contains("version"));
        let e = decls("sub x { error 404; }").unwrap_err();
        assert!(e.message.contains("synth"));
    }
}
