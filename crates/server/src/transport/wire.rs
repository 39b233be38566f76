//! What every kind of client wire shares with the steps above it: how a
//! response body is delimited, why a read or a write stopped, and what an
//! ESI include hands its page. `io` (a connection, or an include's
//! channel) and `h2` (a stream of an HTTP/2 connection) both speak in
//! these terms, and neither needs the other's module for them.

use bytes::Bytes;

/// What an ESI sub-request hands its parent.
#[derive(Debug)]
pub(crate) enum Piece {
    Data(Bytes),
    /// Deflate data that ends on a byte and is not final, for a page
    /// delivered gzip'd, with the CRC-32 and length of its text.
    Deflated {
        data: Vec<Bytes>,
        crc: u32,
        len: u64,
    },
    /// The body could not be delivered whole (its fetch failed).
    Failed,
}

/// How a response body is delimited on the wire. The steps say which
/// the response needs; the transport frames the body accordingly
/// (HTTP/1 chunks, or nothing; an include's parent takes bare pieces).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WireBody {
    /// No body and no length (204, 304, 1xx).
    Bodyless,
    Length(u64),
    Chunked,
    /// Delimited by closing the connection (HTTP/1.0, unknown length).
    Close,
    /// A HEAD response whose length is not known.
    HeadUnknown,
}

/// Why a read from the client stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadError {
    Timeout,
    Io,
}

/// Why a write to the client stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SendError {
    /// The client went away or reset.
    Io,
    /// `send_timeout` or `idle_send_timeout` passed.
    Timeout,
}
