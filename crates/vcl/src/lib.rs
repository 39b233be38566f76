//! VCL, the configuration language: lexer → parser → checker → compiled
//! program → interpreter, with the built-in VCL appended to every program
//! and the vmods Lacquer carries (`std`, `directors`). Independent of
//! sockets: the daemon lends its requests through the `Host` trait.

#![forbid(unsafe_code)]

pub mod acl;
pub mod ast;
pub mod base64;
mod compile;
mod compile_call;
mod compile_decl;
mod compile_sub;
pub mod eval;
pub mod failure;
pub mod lexer;
pub mod native;
pub mod parser;
pub mod program;
pub mod socket;
pub mod source;
pub mod types;
pub mod upgrade;
pub mod vars;
pub mod vmod;
mod vmod_blob;
mod vmod_bodyaccess;
mod vmod_cluster;
mod vmod_cookie;
mod vmod_directors;
mod vmod_header;
mod vmod_proxy;
mod vmod_purge;
mod vmod_shard;
pub mod vmod_std;
mod vmod_str;
mod vmod_tcp;
mod vmod_tls;
mod vmod_unix;
mod vmod_var;
mod vmod_vsthrottle;
mod vmod_xkey;
pub mod vmods;

pub use compile::{compile, Failure, Options};
pub use eval::{init, run, VclFailure};
pub use program::{BackendDef, BackendTlsDef, Host, Lent, ProbeDef, Program};
pub use socket::{ClientSocket, PeerCredentials, TcpInfo, TlsSession};
pub use source::{CompileError, Source, Span};
pub use types::{Action, BackendRef, HttpKind, Method, Type, Value};
pub use vars::{StorageField, Var};

/// The built-in VCL text.
pub const BUILTIN_VCL: &str = include_str!("builtin.vcl");

/// The source name the built-in VCL is known by in messages.
pub const BUILTIN_NAME: &str = "<builtin>";

/// Reads includes from the file system: relative to the including file,
/// then along `vcl_path`.
pub fn file_loader(
    vcl_path: Vec<std::path::PathBuf>,
) -> impl FnMut(&str, &str) -> Result<Source, String> {
    move |name: &str, from: &str| {
        let path = std::path::Path::new(name);
        let mut candidates = Vec::new();
        if path.is_absolute() {
            candidates.push(path.to_path_buf());
        } else {
            if let Some(dir) = std::path::Path::new(from).parent() {
                candidates.push(dir.join(path));
            }
            for dir in &vcl_path {
                candidates.push(dir.join(path));
            }
        }
        for c in &candidates {
            if let Ok(text) = std::fs::read_to_string(c) {
                return Ok(Source {
                    name: c.display().to_string(),
                    text,
                });
            }
        }
        Err("not found (looked beside the including file and along vcl_path)".to_string())
    }
}

/// Compiles a file from disk.
pub fn compile_file(
    path: &std::path::Path,
    vcl_path: Vec<std::path::PathBuf>,
    opts: &Options,
) -> Result<Program, Failure> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            return Err(Failure {
                error: CompileError::general(format!("Cannot read {}: {e}", path.display())),
                sources: Vec::new(),
            })
        }
    };
    let main = Source {
        name: path.display().to_string(),
        text,
    };
    let mut loader = file_loader(vcl_path);
    compile(main, &mut loader, opts)
}

/// Compiles inline text (no includes beside it but `vcl_path`).
pub fn compile_str(name: &str, text: &str, opts: &Options) -> Result<Program, Failure> {
    let main = Source {
        name: name.to_string(),
        text: text.to_string(),
    };
    let mut loader = file_loader(Vec::new());
    compile(main, &mut loader, opts)
}

#[cfg(test)]
mod tests;
