//! The host-wide orphan sweep: attempt roots on disk and runner processes inside them
//! that no open attempt explains (left by a crash) are removed and killed.

use crate::domain::Host;
use crate::runner;
use crate::store::Store;
use crate::{log_info, log_warn};
use std::collections::HashSet;
use std::path::Path;

pub fn sweep(store: &dyn Store, host: &Host, state_dir: &Path) {
    // Roots first, attempts second: an attempt row is always written before its root,
    // so any root listed here whose attempt is not open is truly an orphan.
    let roots = match runner::list_attempt_roots(state_dir) {
        Ok(r) => r,
        Err(e) => {
            log_warn!("sweep_failed", error = e);
            return;
        }
    };
    let open: HashSet<i64> = match store.open_attempts(&host.id) {
        Ok(a) => a.into_iter().map(|a| a.id).collect(),
        Err(e) => {
            log_warn!("sweep_failed", error = e);
            return;
        }
    };
    for r in roots {
        if open.contains(&r.attempt) {
            continue;
        }
        for pid in runner::processes_with_cwd_or_exe_under(&r.path) {
            log_info!("orphan_process_killed", attempt = r.attempt, pid = pid);
            runner::kill_session(pid, libc::SIGKILL);
            // SAFETY: kill(2) with a pid we just read; a vanished pid is harmless.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        match runner::remove_root(&r.path) {
            Ok(()) => log_info!("orphan_root_removed", attempt = r.attempt),
            Err(e) => log_warn!("orphan_root_kept", attempt = r.attempt, error = e),
        }
    }
}
