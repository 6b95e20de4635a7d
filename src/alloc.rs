//! Process-wide allocator tuning for the long-lived processes (daemon, coordinator).

/// Caps glibc's malloc arenas at two; call it before the process starts a thread.
/// The daemon's io workers (and the coordinator's connection threads) start and
/// retire with the load, and each new thread may get an arena of its own, whose
/// freed pages glibc keeps: issue 18's soak saw the daemon's RSS grow about 2.3 MB
/// per 1,000 jobs within a life, in a dozen 1-2 MB anonymous mappings, not the heap.
/// The workers spend their time waiting on GitHub, not in malloc, so two shared
/// arenas should cost little (the soak bench measures both). Other C libraries have
/// no such knob.
pub fn cap_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only tunes the allocator; its callers make it before they
    // start any thread of their own.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}
