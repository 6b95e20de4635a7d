//! The state directory's free space, read by the main thread at start and every
//! [`SAMPLE_EVERY`] on its tick, judged by the pure `reconcile::disk::held`, and kept
//! in `HostFacts::disk`, where each target loop's pass reads it as an unfitness fact
//! (every profile unfit with the reason `reconcile::disk::describe` gives). A change
//! is logged once, wakes the loops (so starts resume at once when space returns) and
//! sets the `runner_manager_state_dir_free_bytes` and
//! `runner_manager_disk_starts_held` gauges. Only starts wait: watching, recording
//! and cleaning go on, and cleanups give the space back.

use super::facts::{HostFacts, lock};
use crate::metrics::Metrics;
use crate::reconcile::disk;
use crate::timefmt::Millis;
use crate::{log_info, log_warn};
use std::path::Path;

/// How often the main thread reads the free space: a `statvfs` is cheap, and a
/// runner filling the disk takes longer than this to matter.
pub const SAMPLE_EVERY: Millis = 2_000;

/// Where free space is read from: `statvfs` in the daemon ([`free_bytes`], which
/// `doctor` reads too); a test gives its own.
pub type FreeSpace = fn(&Path) -> std::io::Result<u64>;

/// Free bytes for an unprivileged writer on the filesystem holding `path`.
pub fn free_bytes(path: &Path) -> std::io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::other("path has a NUL byte"))?;
    // SAFETY: `c` is a valid NUL-terminated string; `st` is plain old data that
    // statvfs fills in before we read it.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(st.f_bavail as u64 * st.f_frsize as u64)
}

/// What the last sample found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DiskState {
    /// Free bytes for an unprivileged writer; `None` when the last read failed.
    pub free: Option<u64>,
    /// The host's `disk_reserve` it was judged against.
    pub reserve: u64,
    /// Starts are held for want of space.
    pub held: bool,
}

impl DiskState {
    /// The unfit reason every profile shows while starts are held.
    pub fn reason(&self) -> Option<String> {
        self.held.then(|| disk::describe(self.free, self.reserve))
    }
}

/// Reads the free space of `state_dir` through `HostFacts::free_space`, decides
/// against `reserve` and what was held before, and keeps the result in
/// `HostFacts::disk`; a change is logged. Returns the new state, and whether it
/// changed what a pass decides (the caller then wakes the target loops).
pub fn sample(
    facts: &HostFacts,
    state_dir: &Path,
    metrics: &Metrics,
    reserve: u64,
) -> (DiskState, bool) {
    let read = (facts.free_space)(state_dir);
    let before = lock(&facts.disk).clone();
    if let Err(e) = &read
        && before.free.is_some()
    {
        log_warn!(
            "disk_unreadable",
            state_dir = state_dir.display(),
            error = e
        );
    }
    let free = read.ok();
    let now = DiskState {
        free,
        reserve,
        held: disk::held(free, before.held, reserve),
    };
    metrics.set_disk(now.free, now.held);
    if now.held != before.held {
        if now.held {
            log_warn!(
                "starts_held_disk",
                state_dir = state_dir.display(),
                free_bytes = free.map_or("unknown".to_string(), |f| f.to_string()),
                reserve_bytes = reserve,
                resume_above_bytes = disk::resume_above(reserve)
            );
        } else {
            log_info!(
                "starts_resumed_disk",
                state_dir = state_dir.display(),
                free_bytes = free.map_or("unknown".to_string(), |f| f.to_string()),
                reserve_bytes = reserve
            );
        }
    }
    let changed = now.held != before.held || now.reserve != before.reserve;
    *lock(&facts.disk) = now.clone();
    (now, changed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::names;
    use std::sync::atomic::{AtomicU64, Ordering};

    const MIB: u64 = 1 << 20;
    /// The fake filesystem's free bytes; `u64::MAX` makes the read fail.
    static FREE: AtomicU64 = AtomicU64::new(0);

    fn fake(_: &Path) -> std::io::Result<u64> {
        match FREE.load(Ordering::SeqCst) {
            u64::MAX => Err(std::io::Error::other("statvfs failed")),
            f => Ok(f),
        }
    }

    #[test]
    fn a_sample_holds_starts_says_why_and_resumes_above_twice_the_reserve() {
        let facts = HostFacts {
            free_space: fake,
            ..HostFacts::default()
        };
        let metrics = Metrics::new();
        let step = |free: u64| {
            FREE.store(free, Ordering::SeqCst);
            sample(&facts, &std::env::temp_dir(), &metrics, 4 * MIB).0
        };
        assert!(!step(100 * MIB).held);
        assert_eq!(lock(&facts.disk).reason(), None);
        let s = step(3 * MIB);
        assert!(s.held);
        assert!(
            facts
                .disk_reason()
                .is_some_and(|r| r.starts_with("disk: 3.0 MiB free")),
            "{:?}",
            facts.disk_reason()
        );
        let gauge = |n: &str| metrics.value(n, &[]);
        assert_eq!(gauge(names::DISK_STARTS_HELD), Some(1.0));
        assert_eq!(gauge(names::STATE_DIR_FREE), Some((3 * MIB) as f64));
        // Between the marks it stays held; a failed read changes nothing.
        assert!(step(6 * MIB).held);
        assert!(step(u64::MAX).held);
        assert_eq!(gauge(names::STATE_DIR_FREE), None);
        let s = step(9 * MIB);
        assert!(!s.held);
        assert_eq!(facts.disk_reason(), None);
        assert_eq!(gauge(names::DISK_STARTS_HELD), Some(0.0));
    }
}
