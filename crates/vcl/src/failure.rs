//! Why a VCL method failed at run time: the error of the host interface,
//! of vmod calls and of the interpreter alike. A module of its own, below
//! them all, so that none of them imports another for it.

/// Why a method failed: what the `VCL_Error` record says, and the
/// method then fails (`MAIN.vcl_fail`). The error of the host interface
/// (a variable or header set out of bounds, a ban that does not parse),
/// of vmod calls and of the interpreter alike. Boxed: every statement
/// and expression returns a `Result` with it, which a word-sized error
/// keeps in registers.
#[derive(Debug, Clone, PartialEq)]
pub struct VclFailure(pub Box<String>);

impl VclFailure {
    /// What the `VCL_Error` record says.
    pub fn message(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for VclFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<String> for VclFailure {
    fn from(msg: String) -> VclFailure {
        VclFailure(Box::new(msg))
    }
}

impl From<&str> for VclFailure {
    fn from(msg: &str) -> VclFailure {
        VclFailure(Box::new(msg.to_string()))
    }
}
