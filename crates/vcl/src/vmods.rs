//! The vmods Lacquer carries, by name: what `import` finds. Apart from
//! the vmods' own types (`vmod`), so that a vmod imports the types and
//! only this table imports the vmods.

use crate::vmod::Vmod;

/// Every vmod, as `import` names it.
pub static VMODS: &[Vmod] = &[
    crate::vmod_std::VMOD,
    crate::vmod_directors::VMOD,
    crate::vmod_purge::VMOD,
    crate::vmod_xkey::VMOD,
    crate::vmod_tcp::VMOD,
    crate::vmod_proxy::VMOD,
    crate::vmod_unix::VMOD,
    crate::vmod_cookie::VMOD,
    crate::vmod_header::VMOD,
    crate::vmod_var::VMOD,
    crate::vmod_str::VMOD,
    crate::vmod_vsthrottle::VMOD,
    crate::vmod_bodyaccess::VMOD,
    crate::vmod_blob::VMOD,
    crate::vmod_tls::VMOD,
    crate::vmod_cluster::VMOD,
];

pub fn vmod(name: &str) -> Option<&'static Vmod> {
    VMODS.iter().find(|v| v.name == name)
}
