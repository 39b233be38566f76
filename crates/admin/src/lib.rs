//! The management protocol Varnish's CLI speaks, shared by the daemon's
//! `-T` interface and by its clients (`lacquer adm`, the test runner):
//! the command table, command lines split into tokens the way varnishd
//! splits them (quotes, backslash escapes, one here document), responses
//! framed as a 13-byte status line and a counted body, the status codes,
//! and the SHA-256 challenge-response that proves knowledge of the `-S`
//! secret.

#![forbid(unsafe_code)]

mod auth;
mod client;
pub mod commands;
mod protocol;

pub use auth::{auth_response, new_challenge, random_bytes};
pub use client::{Client, ClientError};
pub use protocol::{frame, parse_status_line, tokenize, CommandReader, Input, STATUS_LINE_LEN};

/// The status codes of a response (`vcli.h` in Varnish).
pub mod status {
    /// The command line could not be split into tokens.
    pub const SYNTAX: u16 = 100;
    /// No such command.
    pub const UNKNOWN: u16 = 101;
    /// Known but not implemented.
    pub const UNIMPL: u16 = 102;
    /// Too few arguments.
    pub const TOOFEW: u16 = 104;
    /// Too many arguments.
    pub const TOOMANY: u16 = 105;
    /// An argument is wrong.
    pub const PARAM: u16 = 106;
    /// Authentication is required first.
    pub const AUTH: u16 = 107;
    pub const OK: u16 = 200;
    /// The body was cut at the size limit.
    pub const TRUNCATED: u16 = 201;
    /// The command is right but cannot be done now.
    pub const CANT: u16 = 300;
    /// A transport problem.
    pub const COMMS: u16 = 400;
    /// The server closes the connection after this response.
    pub const CLOSE: u16 = 500;
}
