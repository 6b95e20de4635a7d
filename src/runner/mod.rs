//! Running a runner: per-attempt roots, spawning in its own session, reading its log lines, /proc facts.
//!
//! These are the mechanisms the daemon loop calls; what to do when (parsing log lines
//! into events, timeouts, transitions) is decided in `reconcile`. Linux only.

pub mod caps;
pub mod cgroup;
pub mod claim;
pub mod leftovers;
pub mod log;
pub mod machine;
pub mod mountinfo;
pub mod oci;
pub mod peer;
pub mod proc;
pub mod root;
pub mod shared_dirs;
pub mod slots;
pub mod spawn;
pub mod tools;
pub mod uid;
pub mod user;

use std::path::{Path, PathBuf};

pub use cgroup::{
    AttemptCgroup, CgroupError, CgroupMode, CgroupUsage, Cgroups, Enforced, JoinFds, Limits,
};
pub use log::{BoundOutcome, LogTail, bound_log, tail_lines};
pub use proc::{
    Pid, ProcessStatus, SignalOutcome, StopOutcome, is_alive, kill_session, process_start_time,
    processes_with_cwd_or_exe_under, session_members, signal_session, stop_and_wait,
};
pub use root::{
    PreparedRoot, RemoveError, RootEntry, RootError, RootKind, RootOptions, check_install,
    list_attempt_roots, prepare_root, remove_root,
};
pub use spawn::{
    ExitInfo, Reap, SpawnError, SpawnSpec, Spawned, reap_child, reap_children, spawn_runner,
};
pub use uid::{UidRange, busy_uids, kill_uid, lookup_uid, pick_uid, processes_of_uid};
pub use user::{RunAsUser, UserError, lookup_user};

/// `RUNTIME/attempts/<id>`: the attempt's root (removed at cleanup), under the host's
/// `runtime_root` (the state directory unless set).
pub fn attempt_root(runtime: &Path, attempt: i64) -> PathBuf {
    runtime.join("attempts").join(attempt.to_string())
}

/// `STATE_DIR/logs/<id>.log`: the runner's output, kept after cleanup (outside the root).
pub fn attempt_log(state_dir: &Path, attempt: i64) -> PathBuf {
    state_dir.join("logs").join(format!("{attempt}.log"))
}

/// `STATE_DIR/logs/<id>.pid`: the runner's pid, written by the runner's own process
/// between fork and exec (see `SpawnSpec::pid_file`), so a daemon killed between a
/// spawn and recording it leaves the next one a way to find the runner.
pub fn attempt_pid_file(state_dir: &Path, attempt: i64) -> PathBuf {
    state_dir.join("logs").join(format!("{attempt}.pid"))
}
