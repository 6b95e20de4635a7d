//! The hostile-job suite: jobs that attack from inside their runner, run by the real
//! daemon with per-attempt uids, and each attack must fail. A job is a shell script the
//! simulated runner's worker runs as the job's steps (what a workflow's `run:` is); it
//! prints what it reached, and the test reads that back from the simulated GitHub.
//!
//! These need root (to make the test runner users and switch to them). Where they
//! cannot run, each says so once on stderr (`SKIPPED name: why`) and returns: it
//! never passes silently.

#[path = "common/users.rs"]
mod users;

#[path = "daemon/support.rs"]
mod support;

mod hostile {
    pub mod setup;

    mod attacks;
    mod containment;
    mod leftovers;
    mod lost_uids;
    mod metrics;
    mod two_daemons;
}
