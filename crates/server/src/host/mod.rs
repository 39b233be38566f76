//! The VCL host glue, the bottom of the daemon: what `req.*` and
//! `resp.*` are (`req`, `resp`) and mean at run time (`client_host`),
//! `bereq.*` and `beresp.*` (`backend_host`), the actions VCL can take on
//! the cache and on responses (`purge`, `synth`), the loaded programs
//! (`vcl`), the log records VCL's steps write (`vsl`), the delivery
//! filters (`filters`), the content coding a client gets (`coding`),
//! edits to a written response head (`head_edits`), the head an
//! object keeps (`stored_head`), and the other nodes of a cluster
//! (`peers`: fetches through the owner, invalidations everywhere).

pub(crate) mod backend_host;
pub(crate) mod bereq;
pub(crate) mod client_host;
pub(crate) mod coding;
pub(crate) mod filters;
pub(crate) mod head_edits;
pub(crate) mod invalidation;
pub(crate) mod obj_vars;
pub(crate) mod peers;
pub(crate) mod purge;
pub(crate) mod req;
pub(crate) mod resp;
pub(crate) mod spread;
pub(crate) mod stored_head;
pub(crate) mod synth;
pub(crate) mod vcl;
pub(crate) mod vsl;
