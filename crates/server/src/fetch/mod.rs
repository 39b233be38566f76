//! The backend side: `backend_steps` is the one backend state machine
//! (its steps in `step`)
//! (vcl_backend_fetch → send → vcl_backend_response / vcl_backend_error →
//! retry) for cache fetches (`cache`) and passes alike; `fill` reads a
//! response body into an object through the `fetch_filters`;
//! `revalidate` merges a 304 into the stale object.

pub(crate) mod backend_steps;
pub(crate) mod cache;
pub(crate) mod fetch_filters;
pub(crate) mod fill;
pub(crate) mod mode;
pub(crate) mod revalidate;
pub(crate) mod step;
pub(crate) mod through_cluster;
