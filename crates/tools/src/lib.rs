//! The operator's tools, each a `lacquer` subcommand: `adm` talks to the
//! daemon's management interface; `log`, `ncsa`, `top`, `hist` read its
//! shared-memory log and `stat` its counters. They find the daemon through
//! its work directory (`-n`) and never link the daemon itself. Each
//! lists its options for `--help` ([`help`]).

#![forbid(unsafe_code)]

pub mod adm;
pub mod help;
pub mod hist;
pub mod log;
pub mod ncsa;
pub mod reload;
pub mod source;
pub mod stat;
pub mod top;
