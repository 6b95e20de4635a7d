//! What a pass sees of each live attempt: its new log lines, its process, its
//! registration in GitHub's last runner list, and whether its memory limit killed
//! something in it. Local reads only (the log files, /proc, the cgroup), quick enough
//! to do for every attempt every pass; a container's OOM (`podman inspect`) is asked
//! only once its life may be ending.

use super::contain::{self, Containment};
use crate::domain::{Attempt, AttemptState, RegisteredRunner};
use crate::reconcile::lines::{RunnerEvent, parse_line};
use crate::reconcile::plan::Seen;
use crate::reconcile::watch::{ProcessStatus, Registration};
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

/// Whether GitHub's list shows the attempt's runner. A read that began before the
/// runner was started (its JIT config comes just before `starting`) may have missed
/// its registration: its absence there says nothing (issue 34's chaos caught a
/// runner judged a ghost 38 ms after it started, its first job lost with it).
fn registration(a: &Attempt, runners: Option<(&[RegisteredRunner], Millis)>) -> Registration {
    let Some((list, read_at)) = runners else {
        return Registration::Unknown;
    };
    if let Some(r) = list.iter().find(|r| r.name == a.runner_name) {
        return Registration::Present { busy: r.busy };
    }
    let started = a
        .history
        .iter()
        .find(|c| c.state == AttemptState::Starting)
        .map(|c| c.at);
    match started {
        Some(t) if t < read_at => Registration::Absent,
        _ => Registration::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runner(name: &str, busy: bool) -> RegisteredRunner {
        RegisteredRunner {
            id: 1,
            name: name.into(),
            online: true,
            busy,
            labels: vec![],
        }
    }

    #[test]
    fn only_a_list_read_after_the_runner_started_can_say_it_is_gone() {
        let mut a = Attempt::new(7, "linux", "t", "h", 1_000);
        a.step(AttemptState::Starting, 2_000).unwrap();
        a.step(AttemptState::Idle, 2_100).unwrap();
        let name = a.runner_name.clone();
        assert_eq!(registration(&a, None), Registration::Unknown);
        let listed = [runner(&name, true)];
        assert_eq!(
            registration(&a, Some((&listed, 1_500))),
            Registration::Present { busy: true },
            "listed is listed, whenever read"
        );
        let others = [runner("someone-else", false)];
        assert_eq!(
            registration(&a, Some((&others, 1_500))),
            Registration::Unknown,
            "a read begun before the runner started cannot show it"
        );
        assert_eq!(
            registration(&a, Some((&others, 2_000))),
            Registration::Unknown
        );
        assert_eq!(
            registration(&a, Some((&others, 2_001))),
            Registration::Absent
        );
    }
}
