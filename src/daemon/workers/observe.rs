//! What a pass sees of each live attempt: its new log lines, its process, its
//! registration in GitHub's last runner list, and whether its memory limit killed
//! something in it. Local reads only (the log files, /proc, the cgroup), quick enough
//! to do for every attempt every pass; a container's OOM (`podman inspect`) is asked
//! only once its life may be ending.

use crate::daemon::host::contain::{self, Containment};
use crate::domain::{Attempt, RegisteredRunner};
use crate::reconcile::lines::{RunnerEvent, parse_line};
use crate::reconcile::plan::Seen;
use crate::reconcile::watch::{ProcessStatus, registration};
use crate::runner::{self, ExitInfo, LogTail, Reap};
use crate::timefmt::Millis;
use std::collections::HashMap;
use std::path::Path;

/// The log tails of a target's attempts, kept between passes.
#[derive(Default)]
pub struct Observer {
    tails: HashMap<i64, LogTail>,
}

impl Observer {
    /// What `a` shows now. `runners` is GitHub's runner list when it was read since
    /// the last pass (a registration is only judged on a fresh list).
    pub fn see(
        &mut self,
        state_dir: &Path,
        a: &Attempt,
        runners: Option<(&[RegisteredRunner], Millis)>,
        contain: &Containment,
    ) -> Seen {
        // The process first, then its log: a runner seen gone has written every line it
        // ever will, so its last lines (the job it ran) are read in this very pass.
        // The other way round, a runner that printed its job and exited between the
        // two reads was ended with its job unread, and an ended attempt's log is not
        // read again.
        let process = process_status(a);
        let events: Vec<RunnerEvent> = if a.state.is_live() {
            let path = runner::attempt_log(state_dir, a.id);
            let tail = self.tails.entry(a.id).or_insert_with(|| LogTail::new(path));
            tail.read_new_lines()
                .unwrap_or_default()
                .iter()
                .filter_map(|l| parse_line(l))
                .collect()
        } else {
            Vec::new()
        };
        let registration = registration(a, runners);
        // The memory limit's kills matter only once the life ends (an exit, or the job
        // reported done): the cgroup's counter is read then, not every pass.
        let ending = process != ProcessStatus::Alive
            || events
                .iter()
                .any(|e| matches!(e, RunnerEvent::JobCompleted { .. }));
        let oom_killed = ending
            && a.state.is_live()
            && (contain::oom_killed(contain, a.id) || super::oci::oom_killed(state_dir, a));
        Seen {
            events,
            process,
            registration,
            oom_killed,
        }
    }

    /// Forgets a cleaned attempt's tail.
    pub fn forget(&mut self, attempt: i64) {
        self.tails.remove(&attempt);
    }
}

/// The runner process of an attempt as this pass finds it. An attempt without a pid
/// never got (or lost) its process: its start is not in flight, or the pass would not
/// look at it.
fn process_status(a: &Attempt) -> ProcessStatus {
    let (Some(pid), Some(start)) = (a.pid, a.pid_start) else {
        return ProcessStatus::Gone;
    };
    match runner::reap_child(pid) {
        Reap::Exited(ExitInfo::Code(c)) => ProcessStatus::Exited { code: c },
        Reap::Exited(ExitInfo::Signal(s)) => ProcessStatus::Exited { code: 128 + s },
        Reap::Exited(ExitInfo::Unknown) => ProcessStatus::Gone,
        Reap::Running | Reap::NotOurChild => match runner::is_alive(pid, start) {
            runner::ProcessStatus::Alive => ProcessStatus::Alive,
            runner::ProcessStatus::Gone => ProcessStatus::Gone,
        },
    }
}
