//! Reading a runner's process tree from /proc into a `Usage`.

use super::usage::{Usage, usage_from_stats};
use crate::runner::proc::{Pid, session_stats};

/// Bytes per page (`sysconf(_SC_PAGESIZE)`), 4096 if unknown.
pub fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let v = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if v > 0 { v as u64 } else { 4096 }
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`), 100 if unknown.
pub fn clock_ticks_per_sec() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let v = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if v > 0 { v as u64 } else { 100 }
}

/// Usage of every live process in session `sid` (a runner's pid is its session id,
/// since it is spawned with `setsid`). RSS is `/proc/<pid>/stat` field 24, the same
/// count as `statm`'s resident, read in the one file the CPU times come from. An
/// empty session gives zero processes.
pub fn sample_tree(sid: Pid) -> Usage {
    usage_from_stats(&session_stats(sid), page_size(), clock_ticks_per_sec())
}
