//! How long an idle I/O worker waits for its next task before it ends. A worker among
//! several waits [`super::io::IDLE_RETIRE`]; the last worker of a target waits only
//! [`LAST_WORKER_QUIET`], so a quiet target holds no worker thread and no worker store
//! connection between its polls (each connection's page cache, schema and statements,
//! and each thread's touched stack, were most of an idle target's memory:
//! BENCHMARKS.md, "Idle memory"). The next task starts a worker again; a worker that
//! ends gives its freed memory back at once ([`TrimOnExit`]).

use std::time::Duration;

/// How long the last worker waits for a task before it ends too: no longer than the
/// shortest poll interval (1 s), longer than the gap between one pass's tasks.
pub const LAST_WORKER_QUIET: Duration = Duration::from_secs(1);

/// How long a worker waits for a task before it asks to retire, while `live` workers
/// run: `idle_retire` among several, [`LAST_WORKER_QUIET`] (or less) for the last.
pub fn worker_wait(live: usize, idle_retire: Duration) -> Duration {
    if live <= 1 {
        idle_retire.min(LAST_WORKER_QUIET)
    } else {
        idle_retire
    }
}

/// Held by a worker from before it opens its store connection: when the worker ends,
/// after the connection has closed, malloc's free pages go back to the kernel
/// ([`crate::alloc::trim`]), or the connection's page cache and statements would stay
/// in the daemon's RSS until the next minute's trim.
pub struct TrimOnExit;

impl Drop for TrimOnExit {
    fn drop(&mut self) {
        crate::alloc::trim();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_worker_waits_less_than_a_poll_and_the_others_the_retire_time() {
        let retire = Duration::from_secs(30);
        assert_eq!(worker_wait(1, retire), LAST_WORKER_QUIET);
        assert_eq!(worker_wait(0, retire), LAST_WORKER_QUIET);
        assert_eq!(worker_wait(2, retire), retire);
        // A shorter retire time (the tests') holds for the last one too.
        let short = Duration::from_millis(20);
        assert_eq!(worker_wait(1, short), short);
        let poll = crate::domain::target::DEFAULT_POLL_INTERVAL_SECS;
        assert!(LAST_WORKER_QUIET < Duration::from_secs(poll));
    }
}
