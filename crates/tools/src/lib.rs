//! The operator's tools, each a `lacquer` subcommand: `adm` talks to the
//! daemon's management interface. They find the daemon through its work
//! directory and never link the daemon itself.

pub mod adm;
