//! What the daemon publishes in its work directory (`-n`) for tools to
//! read without talking to it, as Varnish's shared memory is read: the
//! counters now, the log later.

pub mod counters;
