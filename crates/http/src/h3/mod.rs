//! HTTP/3's wire format, sans I/O: frames (`frames`), QPACK with no
//! dynamic table (`qpack`: requests read into HTTP/1.1's shape and
//! checked, responses and trailers encoded) and HPACK's Huffman code
//! (`huffman`, which QPACK's literals use). The server's sessions run
//! them over QUIC streams.

pub mod frames;
pub mod huffman;
pub mod qpack;
