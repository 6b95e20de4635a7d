//! A world whose host runs each job under its own uid from a block of test users, and
//! the way a test runs a script as a job and reads back what it printed.

use crate::support::*;
use crate::users::{self, UidBlock};
use runner_manager::sim::JobState;

pub const REPO: &str = "octo/app";

/// A world with target `octo`, profile `linux` (max `max`) and per-attempt uids from a
/// block of `uids` test users, or `None` (having said why) where that cannot be had.
pub fn contained_world(test: &str, uids: u32, max: u32) -> Option<(World, UidBlock)> {
    let block = match users::try_runner_uids(uids) {
        Ok(b) => b,
        Err(why) => {
            crate::users::skip(test, &why);
            return None;
        }
    };
    let mut w = World::new(test, max.max(2));
    w.add_target("octo", REPO, true);
    w.add_profile(ProfileSpec::new("linux", "octo", &["linux"]).max(max));
    let r = block.range();
    w.cli_ok(&[
        "host",
        "set",
        &format!("runner_uids={}-{}", r.start, r.end),
        "isolation=uids",
    ]);
    Some((w, block))
}

/// Queues a job whose steps are `script`; returns its id.
pub fn run_script(w: &World, name: &str, script: &str) -> u64 {
    w.sim
        .enqueue_script_job(REPO, name, &["self-hosted", "linux"], script)
}

/// Waits for job `id` to complete and returns it (its `output` is what it printed).
pub fn finished(w: &World, id: u64) -> JobState {
    w.finished(id)
}

/// The job's output, lines trimmed.
pub fn output(j: &JobState) -> Vec<String> {
    j.output
        .as_deref()
        .unwrap_or("")
        .lines()
        .map(|l| l.trim().to_string())
        .collect()
}

/// Asserts the job printed `DENIED what` for each attack and `REACHED` for none.
pub fn assert_denied(j: &JobState, what: &[&str]) {
    let out = output(j);
    let reached: Vec<&String> = out.iter().filter(|l| l.starts_with("REACHED")).collect();
    assert!(reached.is_empty(), "the job reached: {reached:?}\n{out:#?}");
    for w in what {
        assert!(
            out.iter().any(|l| l == &format!("DENIED {w}")),
            "no DENIED {w} in the job's output: {out:#?}"
        );
    }
}

/// A shell line that tries `cmd` and prints `REACHED what` or `DENIED what`.
pub fn attempt(what: &str, cmd: &str) -> String {
    format!("if {cmd} >/dev/null 2>&1; then echo 'REACHED {what}'; else echo 'DENIED {what}'; fi\n")
}
