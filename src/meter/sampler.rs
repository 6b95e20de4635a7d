//! The meter sampler thread: every interval, samples each live attempt's tree and publishes the meters.
//!
//! It owns its inbox (the list of live attempts, replaced whole by each message) and
//! waits only in a `select!` over that inbox, a shutdown channel and a tick, so
//! shutdown is never delayed by more than one sample.

use std::collections::HashMap;
use std::io;
use std::path::PathBuf;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, TrySendError, select, tick};

use super::sample::sample_tree;
use super::usage::{Meter, Usage, usage_from_cgroup};
use crate::runner::proc::{Pid, read_stat};

pub const SAMPLER_THREAD: &str = "meter-sampler";

/// A runner to sample: the attempt and its process identity, and its cgroup where
/// the host has one (then the cgroup's counters are the meter); for an `oci` attempt,
/// its container's name: the container's own cgroup is its meter, never the `podman
/// run` client that is its process.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveAttempt {
    pub attempt: i64,
    pub pid: Pid,
    pub start_time: u64,
    pub cgroup: Option<crate::runner::AttemptCgroup>,
    pub container: Option<String>,
}

/// One attempt's latest sample and its meter so far (peaks are cumulative, so a lost
/// report is made good by the next one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MeterReport {
    pub attempt: i64,
    pub usage: Usage,
    pub meter: Meter,
    /// A container's memory limit killed something in it (its cgroup's `oom_kill`
    /// count, read while the container lives: Podman's `OOMKilled` speaks only of
    /// the container's init, and the cgroup is gone once the container ends).
    pub oom_killed: bool,
}

/// The sampler's body. Runs until `shutdown` yields a message or disconnects, or
/// `attempts` or `reports` disconnects. Each message on `attempts` replaces the list
/// of attempts to sample; meters of attempts no longer listed are dropped. After each
/// tick one batch goes on `reports`; if a bounded `reports` is full the batch is
/// dropped rather than blocking the sampler.
pub fn run_sampler(
    interval: Duration,
    attempts: Receiver<Vec<LiveAttempt>>,
    shutdown: Receiver<()>,
    reports: Sender<Vec<MeterReport>>,
) {
    let ticker = tick(interval);
    let mut live: Vec<LiveAttempt> = Vec::new();
    let mut meters: HashMap<i64, Meter> = HashMap::new();
    let mut containers: HashMap<i64, ContainerCgroup> = HashMap::new();
    loop {
        select! {
            recv(shutdown) -> _ => return,
            recv(attempts) -> msg => match msg {
                Ok(list) => {
                    meters.retain(|id, _| list.iter().any(|a| a.attempt == *id));
                    containers.retain(|id, _| list.iter().any(|a| a.attempt == *id));
                    live = list;
                }
                Err(_) => return,
            },
            recv(ticker) -> _ => {
                let batch: Vec<MeterReport> = live
                    .iter()
                    .filter_map(|a| {
                        let (usage, oom_killed) = match &a.container {
                            Some(name) => sample_container(a.attempt, name, &mut containers)?,
                            None => (sample_attempt(a)?, false),
                        };
                        let meter = meters.entry(a.attempt).or_default();
                        meter.observe(usage);
                        Some(MeterReport { attempt: a.attempt, usage, meter: *meter, oom_killed })
                    })
                    .collect();
                if batch.is_empty() {
                    continue;
                }
                if let Err(TrySendError::Disconnected(_)) = reports.try_send(batch) {
                    return;
                }
            }
        }
    }
}

/// The attempt's session usage, or `None` when nothing of it is left or its pid now
/// leads someone else's session.
fn sample_attempt(a: &LiveAttempt) -> Option<Usage> {
    if let Some(u) = a
        .cgroup
        .as_ref()
        .and_then(|c| c.usage())
        .and_then(|c| usage_from_cgroup(&c))
    {
        return Some(u);
    }
    if let Some(s) = read_stat(a.pid)
        && s.starttime != a.start_time
        && s.session == a.pid
    {
        return None;
    }
    let usage = sample_tree(a.pid);
    (usage.processes > 0).then_some(usage)
}

/// How long after a Podman that could not name a container's cgroup (not running yet:
/// an image still pulling) the sampler asks again: each ask is a Podman process.
pub const ASK_AGAIN: Duration = Duration::from_secs(3);

/// Where a container's cgroup is, as far as the sampler knows.
#[derive(Debug)]
enum ContainerCgroup {
    Found(PathBuf),
    /// Podman could not say when last asked, at this time.
    AskedAt(std::time::Instant),
}

/// A container's usage from its own cgroup, found by asking Podman (once it runs; asked
/// again every [`ASK_AGAIN`] until it answers) and kept for the attempt's life, with
/// whether its memory limit has killed anything in it. `None` until then and once the
/// cgroup is gone: a container's meter is its cgroup's or none.
fn sample_container(
    attempt: i64,
    name: &str,
    known: &mut HashMap<i64, ContainerCgroup>,
) -> Option<(Usage, bool)> {
    use crate::runner::oci::{Podman, cgroup};
    let dir = match known.get(&attempt) {
        Some(ContainerCgroup::Found(dir)) => dir.clone(),
        Some(ContainerCgroup::AskedAt(at)) if at.elapsed() < ASK_AGAIN => return None,
        _ => {
            let found = Podman::locate()
                .ok()
                .and_then(|p| p.quick().cgroup_dir(name, &cgroup::root()));
            let Some(dir) = found else {
                known.insert(attempt, ContainerCgroup::AskedAt(std::time::Instant::now()));
                return None;
            };
            known.insert(attempt, ContainerCgroup::Found(dir.clone()));
            dir
        }
    };
    let usage = usage_from_cgroup(&cgroup::usage(&dir)?)?;
    Some((usage, cgroup::oom_kills(&dir).is_some_and(|n| n > 0)))
}

/// Starts [`run_sampler`] on a thread named `meter-sampler`; join it after sending
/// on (or dropping) the shutdown channel.
pub fn spawn_sampler(
    interval: Duration,
    attempts: Receiver<Vec<LiveAttempt>>,
    shutdown: Receiver<()>,
    reports: Sender<Vec<MeterReport>>,
) -> io::Result<JoinHandle<()>> {
    thread::Builder::new()
        .name(SAMPLER_THREAD.to_string())
        .spawn(move || run_sampler(interval, attempts, shutdown, reports))
}
