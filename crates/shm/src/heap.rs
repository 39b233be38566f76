//! The heap's free memory, given back to the system after a burst of
//! short-lived allocations (a persistent store's recovery decodes every
//! record before the objects are built): the allocator keeps what was
//! freed between live objects resident otherwise.

/// Returns the allocator's free pages to the system (glibc's
/// `malloc_trim`; nothing elsewhere).
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` takes no pointer and touches only the
    // allocator's own free lists, under its own locks.
    unsafe {
        libc::malloc_trim(0);
    }
}
