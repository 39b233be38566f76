//! The checker and compiler, program level: declarations (backends,
//! probes, ACLs, imports, objects), merging of method bodies with the
//! built-in VCL, the call graph, and the checks that depend on it (where
//! each variable, return action and function is used, unused symbols,
//! recursion). Statements and expressions are in `compile_sub`.

use crate::acl::Acl;
use crate::ast::{self, Decl};
use crate::parser::{parse, tokens_with_includes, Loader};
use crate::program::{BackendDef, ObjectSlot, ProbeDef, Program, Sub};
use crate::source::{CompileError, Source, Span};
use crate::types::{scope, ActionKind, BackendRef, Method};
use crate::vmod::ClassSpec;
use crate::vmods;
use std::collections::HashMap;
use std::sync::OnceLock;

pub(crate) type CResult<T> = Result<T, CompileError>;

/// What a use of something in a sub needs from the methods that reach it.
#[derive(Debug)]
pub(crate) enum UseKind {
    Read(&'static str),
    ReadHeader(String),
    Write(String),
    Return(ActionKind),
    Func(String),
    New,
}

#[derive(Debug)]
pub(crate) struct Use {
    pub kind: UseKind,
    /// The methods in which the use is legal.
    pub allowed: u16,
    pub span: Span,
}

pub(crate) struct SubInfo {
    pub name: String,
    pub span: Span,
    pub bodies: Vec<Vec<ast::Stmt>>,
    pub method: Option<Method>,
    /// Defined only by the built-in VCL.
    pub builtin_only: bool,
    pub uses: Vec<Use>,
    pub calls: Vec<(usize, Span)>,
}

pub(crate) struct Symbol<T> {
    pub def: T,
    pub span: Span,
    pub used: bool,
}

pub(crate) struct ObjInfo {
    pub name: String,
    pub class: &'static ClassSpec,
}

pub(crate) struct Compiler {
    pub sources: Vec<Source>,
    pub version: (u8, u8),
    pub imports: Vec<String>,
    /// The most a `std.cache_req_body` call asks to keep.
    pub cache_req_body: Option<u64>,
    /// A `std.rollback` call was seen.
    pub uses_rollback: bool,
    /// A `return (vcl(...))` was seen.
    pub uses_labels: bool,
    /// The labels named by `return (vcl(...))`.
    pub labels_used: Vec<String>,
    pub backends: Vec<Symbol<BackendDef>>,
    pub probes: Vec<Symbol<ProbeDef>>,
    pub acls: Vec<Symbol<Acl>>,
    pub subs: Vec<SubInfo>,
    pub objects: Vec<ObjInfo>,
    pub names: HashMap<String, (&'static str, Span)>,
    /// The sub being compiled.
    pub current: usize,
    pub warnings: Vec<String>,
    /// The stores `storage.<name>` may name.
    pub storages: Vec<String>,
    /// The VCL labels `return (vcl(...))` may name.
    pub labels: Vec<String>,
}

/// A failed compilation, with the sources needed to show where.
#[derive(Debug)]
pub struct Failure {
    pub error: CompileError,
    pub sources: Vec<Source>,
}

impl Failure {
    pub fn render(&self) -> String {
        self.error.render(&self.sources)
    }
}

/// How to compile.
pub struct Options {
    /// Unused backends, probes, ACLs and subs are errors (Varnish's
    /// `vcc_feature=+err_unref`, the default).
    pub unused_is_error: bool,
    /// The stores the daemon has (`-s`), which `storage.<name>` may
    /// name; Transient is always there.
    pub storages: Vec<String>,
    /// The VCL labels the daemon has (`vcl.label`), which
    /// `return (vcl(label))` may name.
    pub labels: Vec<String>,
    /// The built-in request subroutines a program leaves as they are run
    /// natively ([`crate::native`]); off to compare them with the
    /// interpreter.
    pub native_builtin: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            unused_is_error: true,
            storages: vec!["s0".to_string()],
            labels: Vec::new(),
            native_builtin: true,
        }
    }
}

/// Compiles a program from its main source, reading includes through
/// `loader`, with the built-in VCL appended.
pub fn compile(main: Source, loader: &mut Loader<'_>, opts: &Options) -> Result<Program, Failure> {
    let mut sources = vec![main];
    let user = tokens_with_includes(&mut sources, 0, loader, 0);
    let mut c = Compiler {
        sources,
        version: (4, 1),
        imports: Vec::new(),
        cache_req_body: None,
        uses_rollback: false,
        uses_labels: false,
        labels_used: Vec::new(),
        backends: Vec::new(),
        probes: Vec::new(),
        acls: Vec::new(),
        subs: Vec::new(),
        objects: Vec::new(),
        names: HashMap::new(),
        current: 0,
        warnings: Vec::new(),
        storages: opts.storages.clone(),
        labels: opts.labels.clone(),
    };
    let result = user.and_then(|tokens| c.compile_program(tokens, opts));
    match result {
        Ok(p) => Ok(p),
        Err(error) => Err(Failure {
            error,
            sources: c.sources,
        }),
    }
}

impl Compiler {
    fn compile_program(
        &mut self,
        user_tokens: Vec<crate::lexer::Token>,
        opts: &Options,
    ) -> CResult<Program> {
        let user = parse(user_tokens)?;
        match user.first() {
            Some(Decl::Vcl { version, .. }) => self.version = *version,
            _ => return Err(CompileError::new(
                "VCL version declaration missing: start the file with 'vcl 4.1;' (or 'vcl 4.0;')",
                Span::new(0, 0, 0),
            )),
        }
        self.sources.push(Source {
            name: crate::BUILTIN_NAME.to_string(),
            text: crate::BUILTIN_VCL.to_string(),
        });
        let builtin_file = self.sources.len() - 1;
        let builtin = parse(crate::lexer::lex(crate::BUILTIN_VCL, builtin_file)?)?;
        for m in Method::ALL {
            self.sub_index(m.name(), Span::default(), true);
        }
        let mut decls = Vec::new();
        for (i, d) in user.into_iter().enumerate() {
            // A later version line (an included file's, or one after the
            // line varnishtest puts first) is accepted as Varnish accepts
            // it; the first one sets the syntax.
            if i > 0 && matches!(d, Decl::Vcl { .. }) {
                continue;
            }
            decls.push((d, false));
        }
        decls.extend(
            builtin
                .into_iter()
                .filter(|d| !matches!(d, Decl::Vcl { .. }))
                .map(|d| (d, true)),
        );
        let mut backend_decls = Vec::new();
        let mut probe_decls = Vec::new();
        let mut acl_decls = Vec::new();
        for (d, is_builtin) in decls {
            match d {
                Decl::Vcl { .. } => {}
                Decl::Import { name, from: _ } => self.import(name)?,
                Decl::Backend { name, fields } => {
                    self.define(&name, "backend")?;
                    backend_decls.push((name, fields));
                }
                Decl::Probe { name, fields } => {
                    self.define(&name, "probe")?;
                    probe_decls.push((name, fields));
                }
                Decl::Acl { name, entries, log } => {
                    self.define(&name, "acl")?;
                    acl_decls.push((name, entries, log));
                }
                Decl::Sub { name, body } => self.declare_sub(name, body, is_builtin)?,
            }
        }
        for (name, fields) in probe_decls {
            let def = self.probe(&name.name, &fields)?;
            self.probes.push(Symbol {
                def,
                span: name.span,
                used: false,
            });
        }
        for (name, fields) in backend_decls {
            let def = self.backend(&name, fields.as_deref())?;
            self.backends.push(Symbol {
                def,
                span: name.span,
                used: false,
            });
        }
        for (name, entries, log) in acl_decls {
            let mut acl = self.acl(&name.name, &entries)?;
            acl.log = log;
            self.acls.push(Symbol {
                def: acl,
                span: name.span,
                used: false,
            });
        }
        self.collect_objects()?;
        let default_backend = self.default_backend()?;
        let compiled = self.compile_subs(opts)?;
        let reach = self.reach()?;
        self.check_uses(&reach)?;
        if opts.unused_is_error {
            self.check_unused(&reach)?;
        }
        let methods: Vec<usize> = Method::ALL
            .iter()
            .map(|m| {
                self.subs
                    .iter()
                    .position(|s| s.name == m.name())
                    .unwrap_or(0)
            })
            .collect();
        // Methods the built-in VCL alone makes of native subroutines run
        // as a list (with natives only: otherwise every body is walked).
        let flat = methods
            .iter()
            .map(|&i| {
                let body = &compiled.get(i)?.body;
                opts.native_builtin
                    .then(|| crate::native::Flat::of(&compiled, body))
                    .flatten()
            })
            .collect();
        Ok(Program {
            version: self.version,
            sources: std::mem::take(&mut self.sources),
            subs: compiled,
            methods,
            backends: self.backends.iter().map(|b| b.def.clone()).collect(),
            probes: self.probes.iter().map(|p| p.def.clone()).collect(),
            acls: self.acls.iter().map(|a| a.def.clone()).collect(),
            objects: self
                .objects
                .iter()
                .map(|o| ObjectSlot {
                    name: o.name.clone(),
                    object: OnceLock::new(),
                })
                .collect(),
            default_backend,
            imports: self.imports.clone(),
            warnings: std::mem::take(&mut self.warnings),
            uses_client_socket: self.imports.iter().any(|i| i == "tcp" || i == "std"),
            cache_req_body: self.cache_req_body,
            uses_rollback: self.uses_rollback,
            uses_labels: self.uses_labels,
            labels_used: std::mem::take(&mut self.labels_used),
            flat,
        })
    }

    /// `import NAME;`: one of the vmods Lacquer carries.
    fn import(&mut self, name: ast::Ident) -> CResult<()> {
        if vmods::vmod(&name.name).is_none() {
            return Err(CompileError::new(
                format!(
                    "Could not find VMOD {}: Lacquer carries the vmods {}",
                    name.name,
                    vmods::VMODS
                        .iter()
                        .map(|v| v.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                name.span,
            ));
        }
        if !self.imports.contains(&name.name) {
            self.imports.push(name.name);
        }
        Ok(())
    }

    /// A `sub` declaration: a method's or a built-in subroutine's body is
    /// added to those before it, another subroutine is defined once.
    fn declare_sub(
        &mut self,
        name: ast::Ident,
        body: Vec<ast::Stmt>,
        is_builtin: bool,
    ) -> CResult<()> {
        let is_method = Method::by_name(&name.name).is_some();
        let exists = self.subs.iter().any(|s| s.name == name.name);
        // The built-in VCL's own subroutines (`vcl_req_cookie`
        // …) are concatenated to the program's, as methods are.
        let merged = is_builtin && exists;
        if !is_method && !merged {
            if exists {
                return Err(CompileError::new(
                    format!("Subroutine '{}' redefined", name.name),
                    name.span,
                )
                .note(
                    "First defined here:",
                    self.subs
                        .iter()
                        .find(|s| s.name == name.name)
                        .map(|s| s.span),
                ));
            }
            self.define(&name, "sub")?;
        }
        let i = self.sub_index(&name.name, name.span, is_builtin);
        if !is_builtin {
            self.subs[i].builtin_only = false;
            if self.subs[i].span == Span::default() {
                self.subs[i].span = name.span;
            }
        }
        self.subs[i].bodies.push(body);
        Ok(())
    }

    /// The program's default backend: one called `default` wherever it
    /// is declared (as in Varnish), otherwise the first.
    fn default_backend(&mut self) -> CResult<BackendRef> {
        if self.backends.is_empty() {
            return Err(CompileError::general(
                "No backends or directors found in VCL program, at least one is necessary.",
            ));
        }
        let i = self
            .backends
            .iter()
            .position(|b| b.def.name == "default")
            .unwrap_or(0);
        self.backends[i].used = true;
        Ok(BackendRef::Backend(i))
    }

    /// Each subroutine's bodies compiled into one; a built-in one no
    /// program added to runs natively.
    fn compile_subs(&mut self, opts: &Options) -> CResult<Vec<Sub>> {
        let mut compiled = Vec::with_capacity(self.subs.len());
        for i in 0..self.subs.len() {
            self.current = i;
            let bodies = std::mem::take(&mut self.subs[i].bodies);
            let mut body = Vec::new();
            for b in &bodies {
                body.extend(self.block(b)?);
            }
            // A built-in subroutine no program added to runs natively.
            if self.subs[i].builtin_only && opts.native_builtin {
                if let Some(native) = crate::native::Native::for_builtin(&self.subs[i].name) {
                    body = vec![crate::program::Stmt::Native(native)];
                }
            }
            compiled.push(Sub {
                name: self.subs[i].name.clone(),
                body,
            });
        }
        Ok(compiled)
    }

    fn define(&mut self, name: &ast::Ident, kind: &'static str) -> CResult<()> {
        if let Some((other, at)) = self.names.get(&name.name) {
            return Err(CompileError::new(
                format!("{kind} '{}' redefined (already a {other})", name.name),
                name.span,
            )
            .note("First defined here:", Some(*at)));
        }
        // A vmod's name is taken only once it is imported (`acl purge`
        // is common VCL, and vmod purge is rarely imported).
        if self.imports.contains(&name.name) {
            return Err(CompileError::new(
                format!("Name '{}' already defined.", name.name),
                name.span,
            ));
        }
        if crate::vars::Var::by_name(&name.name).is_some() {
            return Err(CompileError::new(
                format!("Name '{}' is reserved", name.name),
                name.span,
            ));
        }
        self.names.insert(name.name.clone(), (kind, name.span));
        Ok(())
    }

    fn sub_index(&mut self, name: &str, span: Span, builtin: bool) -> usize {
        if let Some(i) = self.subs.iter().position(|s| s.name == name) {
            return i;
        }
        self.subs.push(SubInfo {
            name: name.to_string(),
            span,
            bodies: Vec::new(),
            method: Method::by_name(name),
            builtin_only: builtin,
            uses: Vec::new(),
            calls: Vec::new(),
        });
        self.subs.len() - 1
    }

    /// Registers the objects `new` makes in `vcl_init`.
    fn collect_objects(&mut self) -> CResult<()> {
        fn walk(stmts: &[ast::Stmt], out: &mut Vec<(ast::Ident, String, Span)>) {
            for s in stmts {
                match s {
                    ast::Stmt::New { name, ctor } => {
                        if let ast::ExprKind::Call { name: cname, .. } = &ctor.kind {
                            out.push((name.clone(), cname.name.clone(), cname.span));
                        } else {
                            out.push((name.clone(), String::new(), ctor.span));
                        }
                    }
                    ast::Stmt::If {
                        branches,
                        otherwise,
                    } => {
                        for (_, b) in branches {
                            walk(b, out);
                        }
                        if let Some(b) = otherwise {
                            walk(b, out);
                        }
                    }
                    ast::Stmt::Block(b) => walk(b, out),
                    _ => {}
                }
            }
        }
        let mut found = Vec::new();
        for s in &self.subs {
            for b in &s.bodies {
                walk(b, &mut found);
            }
        }
        for (name, ctor, span) in found {
            let class = ctor.split_once('.').and_then(|(v, c)| {
                if !self.imports.iter().any(|i| i == v) {
                    return None;
                }
                vmods::vmod(v)?.classes.iter().find(|k| k.name == c)
            });
            let Some(class) = class else {
                let hint = match ctor.split_once('.') {
                    Some((v, _))
                        if vmods::vmod(v).is_some() && !self.imports.iter().any(|i| i == v) =>
                    {
                        format!(" (add 'import {v};')")
                    }
                    _ => String::new(),
                };
                return Err(CompileError::new(
                    format!("Unknown object constructor '{ctor}'{hint}"),
                    span,
                ));
            };
            self.define(&name, "object")?;
            self.objects.push(ObjInfo {
                name: name.name,
                class,
            });
        }
        Ok(())
    }

    /// The methods each sub can run in, following calls from the methods.
    fn reach(&self) -> CResult<Vec<u16>> {
        let n = self.subs.len();
        let mut mask = vec![0u16; n];
        for (i, s) in self.subs.iter().enumerate() {
            if let Some(m) = s.method {
                mask[i] = m.bit();
            }
        }
        // Recursion check: depth-first over the call graph.
        fn visit(c: &Compiler, i: usize, stack: &mut Vec<usize>, done: &mut [bool]) -> CResult<()> {
            if done[i] {
                return Ok(());
            }
            stack.push(i);
            for &(t, span) in &c.subs[i].calls {
                if stack.contains(&t) {
                    return Err(CompileError::new(
                        format!(
                            "Recursive call from sub '{}' to '{}'",
                            c.subs[i].name, c.subs[t].name
                        ),
                        span,
                    ));
                }
                visit(c, t, stack, done)?;
            }
            stack.pop();
            done[i] = true;
            Ok(())
        }
        let mut done = vec![false; n];
        for i in 0..n {
            visit(self, i, &mut Vec::new(), &mut done)?;
        }
        loop {
            let mut changed = false;
            for i in 0..n {
                for &(t, _) in &self.subs[i].calls {
                    let new = mask[t] | mask[i];
                    if new != mask[t] {
                        mask[t] = new;
                        changed = true;
                    }
                }
            }
            if !changed {
                return Ok(mask);
            }
        }
    }

    fn check_uses(&self, reach: &[u16]) -> CResult<()> {
        for (i, s) in self.subs.iter().enumerate() {
            for u in &s.uses {
                let bad = reach[i] & !u.allowed;
                if bad == 0 {
                    continue;
                }
                let method = Method::ALL
                    .iter()
                    .find(|m| bad & m.bit() != 0)
                    .map_or("?", |m| m.name());
                let msg = match &u.kind {
                    UseKind::Read(name) => format!("'{name}': not readable in {method}"),
                    UseKind::ReadHeader(name) => format!("'{name}': not readable in {method}"),
                    UseKind::Write(name) => format!("'{name}': cannot be set or unset in {method}"),
                    UseKind::Return(a) => format!("Invalid return \"{}\" in {method}", a.name()),
                    UseKind::Func(name) => format!("'{name}': cannot be called in {method}"),
                    UseKind::New => format!("'new' is only possible in vcl_init, not in {method}"),
                };
                let allowed = scope::names(u.allowed & scope::ALL);
                let mut e = CompileError::new(msg, u.span);
                if let UseKind::Return(_) = u.kind {
                    if let Some(m) = Method::ALL.iter().find(|m| bad & m.bit() != 0) {
                        let legal: Vec<&str> = m.returns().iter().map(|a| a.name()).collect();
                        e = e.note(
                            format!("{} may return: {}", m.name(), legal.join(", ")),
                            None,
                        );
                    }
                } else if !allowed.is_empty() {
                    e = e.note(format!("(possible in: {allowed})"), None);
                }
                if s.method.is_none() {
                    e = e.note(
                        format!("...in subroutine '{}', called from {method}", s.name),
                        None,
                    );
                }
                return Err(e);
            }
        }
        Ok(())
    }

    /// Unused subroutines, backends, probes and ACLs: the first of them
    /// by name is reported, whatever its kind, as varnishd reports it.
    fn check_unused(&self, reach: &[u16]) -> CResult<()> {
        let subs = self
            .subs
            .iter()
            .enumerate()
            .filter(|(i, s)| s.method.is_none() && !s.builtin_only && reach[*i] == 0)
            .map(|(_, s)| ("sub", &s.name, s.span));
        let declared = self
            .backends
            .iter()
            .map(|b| ("backend", &b.def.name, b.used, b.span))
            .chain(
                self.probes
                    .iter()
                    .map(|p| ("probe", &p.def.name, p.used, p.span)),
            )
            .chain(
                self.acls
                    .iter()
                    .map(|a| ("acl", &a.def.name, a.used, a.span)),
            )
            .filter(|(_, name, used, _)| !used && !name.is_empty())
            .map(|(kind, name, _, span)| (kind, name, span));
        let first = subs
            .chain(declared)
            .min_by(|a, b| a.1.to_ascii_lowercase().cmp(&b.1.to_ascii_lowercase()));
        if let Some((kind, name, span)) = first {
            return Err(
                CompileError::new(format!("Unused {kind} {name}, defined:"), span)
                    .note("(set -p vcc_err_unref=off to allow unused symbols)", None),
            );
        }
        Ok(())
    }
}
