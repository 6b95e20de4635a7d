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

/// The glibc tunable that turns off malloc's per-thread caches (tcache).
const NO_THREAD_CACHES: &str = "glibc.malloc.tcache_count=0";

/// Starts this process again (`execve`, the same pid, arguments and environment) with
/// glibc's per-thread malloc caches off, unless they are off already or the operator set
/// `glibc.malloc.tcache_count` themselves; returns only then, or when it cannot.
///
/// Each thread's tcache keeps up to seven freed chunks of each small size for its next
/// malloc, and the pages they sit on can never be given back: at ten idle targets (a
/// loop thread each, polling every 2 s) they held 2.1 MB of the daemon's 7.4 MB of
/// anonymous memory, which no `malloc_trim` returns (issue 49; BENCHMARKS.md, "Idle
/// memory"). glibc reads its tunables only from the environment at start, and has no
/// `mallopt` for this one, hence the new image. The daemon's mallocs are few (it waits
/// on GitHub and its children), so a cache miss each costs nothing measurable. Call it
/// before any thread starts and before anything is opened that must stay open.
pub fn without_thread_caches() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use std::os::unix::process::CommandExt;
        let current = std::env::var("GLIBC_TUNABLES").unwrap_or_default();
        let Some(value) = tunables_with_no_thread_caches(&current) else {
            return;
        };
        // The binary's own path (not /proc/self/exe, which would name the process
        // "exe"); one replaced or deleted since it started is not run again.
        let Ok(exe) = std::env::current_exe() else {
            return;
        };
        if !exe.exists() {
            return;
        }
        let mut args = std::env::args_os();
        let argv0 = args.next().unwrap_or_default();
        // Only returns when the exec failed: the process goes on as it is, with the
        // caches (logging is not yet set up this early).
        let _ = std::process::Command::new(exe)
            .arg0(argv0)
            .args(args)
            .env("GLIBC_TUNABLES", value)
            .exec();
    }
}

/// `GLIBC_TUNABLES` with the thread caches off, or `None` when `current` sets their
/// count already (this process's own start again, or the operator's choice).
pub fn tunables_with_no_thread_caches(current: &str) -> Option<String> {
    if current
        .split(':')
        .any(|t| t.starts_with("glibc.malloc.tcache_count="))
    {
        return None;
    }
    Some(if current.is_empty() {
        NO_THREAD_CACHES.to_string()
    } else {
        format!("{current}:{NO_THREAD_CACHES}")
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_thread_caches_are_turned_off_once_beside_the_operators_tunables() {
        assert_eq!(
            tunables_with_no_thread_caches("").as_deref(),
            Some("glibc.malloc.tcache_count=0")
        );
        assert_eq!(
            tunables_with_no_thread_caches("glibc.malloc.arena_max=1").as_deref(),
            Some("glibc.malloc.arena_max=1:glibc.malloc.tcache_count=0")
        );
        // Started again with them off: not again.
        assert_eq!(
            tunables_with_no_thread_caches("glibc.malloc.tcache_count=0"),
            None
        );
        // The operator's own count is theirs.
        assert_eq!(
            tunables_with_no_thread_caches("glibc.malloc.mxfast=0:glibc.malloc.tcache_count=7"),
            None
        );
    }
}
