//! The syntax tree the parser produces and the checker consumes.

use crate::source::Span;

#[derive(Debug, Clone)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

#[derive(Debug)]
pub enum Decl {
    Vcl {
        version: (u8, u8),
        span: Span,
    },
    Import {
        name: Ident,
        from: Option<String>,
    },
    Backend {
        name: Ident,
        fields: Option<Vec<Field>>,
    },
    Probe {
        name: Ident,
        fields: Vec<Field>,
    },
    Acl {
        name: Ident,
        entries: Vec<AclEntry>,
        /// `+log`: matches are logged as `VCL_acl` records.
        log: bool,
    },
    Sub {
        name: Ident,
        body: Vec<Stmt>,
    },
}

/// `.name = value;` in a backend or probe.
#[derive(Debug)]
pub struct Field {
    pub name: Ident,
    pub value: FieldValue,
}

#[derive(Debug)]
pub enum FieldValue {
    Expr(Expr),
    /// Adjacent strings, as `.request` takes them.
    Strings(Vec<(String, Span)>),
    /// An inline `{ ... }` probe.
    Probe(Vec<Field>, Span),
}

#[derive(Debug)]
pub struct AclEntry {
    pub negated: bool,
    /// In parentheses: ignored when the name does not resolve.
    pub optional: bool,
    pub addr: String,
    pub mask: Option<u8>,
    pub span: Span,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AssignOp {
    Set,
    Add,
    Sub,
    Mul,
    Div,
}

#[derive(Debug)]
pub enum Stmt {
    Set {
        target: Ident,
        op: AssignOp,
        value: Expr,
    },
    Unset {
        target: Ident,
    },
    Call {
        name: Ident,
    },
    Return {
        action: Ident,
        args: Vec<Expr>,
        span: Span,
    },
    /// `return;` without an action: leaves a subroutine for its caller.
    Leave {
        span: Span,
    },
    If {
        branches: Vec<(Expr, Vec<Stmt>)>,
        otherwise: Option<Vec<Stmt>>,
    },
    New {
        name: Ident,
        ctor: Expr,
    },
    /// A function called for its effect: `std.log(...)`, `synthetic(...)`.
    Expr(Expr),
    Block(Vec<Stmt>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    Or,
    And,
    Eq,
    Ne,
    Lt,
    Gt,
    Le,
    Ge,
    Match,
    NoMatch,
    Add,
    Sub,
    Mul,
    Div,
    Mod,
}

impl BinOp {
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Or => "||",
            BinOp::And => "&&",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Gt => ">",
            BinOp::Le => "<=",
            BinOp::Ge => ">=",
            BinOp::Match => "~",
            BinOp::NoMatch => "!~",
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Mod => "%",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnOp {
    Not,
    Neg,
}

#[derive(Debug)]
pub struct Arg {
    pub name: Option<Ident>,
    pub value: Expr,
}

#[derive(Debug)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Debug)]
pub enum ExprKind {
    Str(String),
    /// A BLOB literal (`:base64:`), decoded.
    Blob(Vec<u8>),
    Int(i64),
    Real(f64),
    Duration(f64),
    Bytes(f64),
    Ident(String),
    Call {
        name: Ident,
        args: Vec<Arg>,
    },
    Unary(UnOp, Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
}
