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

/// How often the long-lived processes give their allocator's free pages back.
pub const TRIM_EVERY_MS: i64 = 60_000;

/// Gives the pages malloc holds free back to the kernel (glibc's `malloc_trim(0)`,
/// which also releases whole free pages inside its arenas, not only the top). Without
/// it, pages freed between long-lived allocations stay in RSS: a coordinator life of
/// 20,000 jobs rose about 50 kB per 1,000 with its heap bounded. A few milliseconds on
/// these heaps; thread-safe; a no-op on other C libraries.
pub fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory to the kernel; glibc locks each
    // arena while it walks it, so any thread may call it at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}
