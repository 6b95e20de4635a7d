//! The handover from a daemon to the binary that replaced it. `update` writes a
//! request to the store (`store::daemon_facts::HandoverRequest`, a kv row, so it needs
//! no signal permission and reaches a daemon run by another user); the daemon reads it every tick, drains, and exits
//! with `EXIT_HANDOVER`. When a drain is over is `drain_end`'s pure decision, for a
//! SIGTERM drain and a handover alike.

use crate::store::daemon_facts::HandoverRequest;
use crate::timefmt::Millis;

/// The version to hand over to, when the stored request was made at or after the
/// daemon started (`started_at`): an older one was for a daemon before it, which this
/// one, started from the new binary, has already replaced.
pub fn requested(request: Option<&HandoverRequest>, started_at: Millis) -> Option<String> {
    request
        .filter(|r| r.at >= started_at)
        .map(|r| r.version.clone())
}

/// Why the daemon drains.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drain {
    /// SIGTERM: idle and starting runners go; busy ones run on (the next daemon
    /// adopts them).
    Terminate,
    /// A new binary: as SIGTERM, and busy runners are given until the drain timeout
    /// to finish their jobs, so the new daemon starts with as few to adopt as it can.
    Handover,
}

/// How a drain ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DrainEnd {
    /// Everything the drain waits for is gone.
    Drained,
    /// The timeout passed first; what is left runs on for the next daemon.
    TimedOut,
}

/// Whether a drain is over, given the live runners that took no job yet (`unassigned`:
/// starting or idle), those running one (`busy`) and whether the timeout has passed.
pub fn drain_end(kind: Drain, unassigned: usize, busy: usize, timed_out: bool) -> Option<DrainEnd> {
    let done = match kind {
        Drain::Terminate => unassigned == 0,
        Drain::Handover => unassigned == 0 && busy == 0,
    };
    if done {
        Some(DrainEnd::Drained)
    } else if timed_out {
        Some(DrainEnd::TimedOut)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_counts_for_daemons_started_before_it_only() {
        let r = HandoverRequest {
            at: 1_000,
            version: "0.2.0".into(),
        };
        assert_eq!(requested(Some(&r), 900).as_deref(), Some("0.2.0"));
        assert_eq!(requested(Some(&r), 1_000).as_deref(), Some("0.2.0"));
        assert_eq!(requested(Some(&r), 1_001), None);
        assert_eq!(requested(None, 0), None);
    }

    #[test]
    fn a_handover_waits_for_busy_runners_a_sigterm_does_not() {
        use DrainEnd::*;
        assert_eq!(drain_end(Drain::Terminate, 0, 3, false), Some(Drained));
        assert_eq!(drain_end(Drain::Terminate, 1, 0, false), None);
        assert_eq!(drain_end(Drain::Terminate, 1, 0, true), Some(TimedOut));
        assert_eq!(drain_end(Drain::Handover, 0, 3, false), None);
        assert_eq!(drain_end(Drain::Handover, 0, 3, true), Some(TimedOut));
        assert_eq!(drain_end(Drain::Handover, 0, 0, false), Some(Drained));
        assert_eq!(drain_end(Drain::Handover, 2, 0, false), None);
    }
}
