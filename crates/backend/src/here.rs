//! Which thread a connection belongs to: the worker whose event loop a
//! pooled HTTP/1 connection is registered with, or whose task drives an
//! HTTP/2 connection.

/// This thread, as a number: the address of a thread-local, distinct for
/// every live thread (each client worker runs one runtime on one thread).
pub(crate) fn this_thread() -> usize {
    thread_local! {
        static HERE: u8 = const { 0 };
    }
    HERE.with(|h| h as *const u8 as usize)
}
