//! A scale set profile's message session as its listener last saw it
//! ([`SessionState`]): whether it holds the session and since when, the last message
//! and poll, and while it does not hold it, why (another owner's 409, an error) and
//! when it tries again. The listener fills it, the daemon writes it to the store (one
//! row per profile, overwritten), and `status`, `top`, `doctor`, `target check` and
//! the metrics read it. The session's id is not a secret (its queue token is, and is
//! never here). Pure: times are passed in.

use super::status::Reported;
use crate::timefmt::{Millis, age};
use std::fmt;

/// Where a listener stands with its scale set's session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionPhase {
    /// Started, no session yet and no failure so far (finding the scale set, opening).
    Opening,
    /// The session is ours and polled: the profile gets its demand from it.
    Held,
    /// Another owner holds the session (409 `RunnerScaleSetSessionConflictException`):
    /// waited out until it ends or expires.
    Conflict,
    /// No session, and the last try failed for another reason (credentials, the
    /// service, the network, a rate limit).
    Failing,
    /// The listener ended its session (the daemon stopped, or the profile is served
    /// elsewhere now).
    Closed,
}

const PHASES: [SessionPhase; 5] = [
    SessionPhase::Opening,
    SessionPhase::Held,
    SessionPhase::Conflict,
    SessionPhase::Failing,
    SessionPhase::Closed,
];

impl SessionPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            SessionPhase::Opening => "opening",
            SessionPhase::Held => "held",
            SessionPhase::Conflict => "conflict",
            SessionPhase::Failing => "failing",
            SessionPhase::Closed => "closed",
        }
    }

    /// Reads [`SessionPhase::as_str`]; `None` for any other word.
    pub fn parse(text: &str) -> Option<SessionPhase> {
        PHASES.into_iter().find(|p| p.as_str() == text)
    }
}

impl fmt::Display for SessionPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a listener knows of its session. Times are unix milliseconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionState {
    pub phase: Reported<SessionPhase>,
    /// The scale set, once found or created.
    pub scale_set_id: Option<i64>,
    /// The session held now (its id only: the queue token never leaves the listener).
    pub session_id: Option<String>,
    /// When the session held now was opened.
    pub held_since: Option<Millis>,
    /// The newest message handled: delivered in this run, or recorded by an earlier
    /// one (then `last_message_at` is `None`).
    pub last_message_id: Option<i64>,
    /// When the newest message arrived, in this run.
    pub last_message_at: Option<Millis>,
    /// When the last long poll came back (with a message or without).
    pub last_poll_at: Option<Millis>,
    /// Why the last try failed, while it does: for [`SessionPhase::Conflict`] the
    /// service's words, which name the session's owner.
    pub reason: Option<String>,
    /// When the listener tries again after that failure.
    pub retry_at: Option<Millis>,
}

impl Default for SessionState {
    fn default() -> Self {
        SessionState {
            phase: SessionPhase::Opening.into(),
            scale_set_id: None,
            session_id: None,
            held_since: None,
            last_message_id: None,
            last_message_at: None,
            last_poll_at: None,
            reason: None,
            retry_at: None,
        }
    }
}

impl SessionState {
    /// Whether the session is ours now.
    pub fn is_held(&self) -> bool {
        self.phase == Reported::Known(SessionPhase::Held)
    }

    /// Whether the profile is kept from its demand by something to look at: another
    /// owner, or a failure.
    pub fn is_troubled(&self) -> bool {
        matches!(
            self.phase.known(),
            Some(SessionPhase::Conflict | SessionPhase::Failing)
        ) || (self.is_held() && self.reason.is_some())
    }

    /// How long the session has been held, at `now`.
    pub fn held_for(&self, now: Millis) -> Option<String> {
        self.held_since.map(|t| age(now - t))
    }

    /// The last message for people: `#42 5s ago`, `#42` (before this run), `none`.
    pub fn last_message(&self, now: Millis) -> String {
        match (self.last_message_id, self.last_message_at) {
            (Some(id), Some(at)) => format!("#{id} {} ago", age(now - at)),
            (Some(id), None) => format!("#{id}"),
            (None, _) => "none".into(),
        }
    }

    /// The last poll for people: `3s ago`, `never`.
    pub fn last_poll(&self, now: Millis) -> String {
        self.last_poll_at
            .map_or_else(|| "never".into(), |t| format!("{} ago", age(now - t)))
    }

    /// When the next try is, for people: `in 12s`, `now` (due already).
    pub fn next_try(&self, now: Millis) -> Option<String> {
        self.retry_at.map(|t| {
            if t <= now {
                "now".into()
            } else {
                format!("in {}", age(t - now))
            }
        })
    }

    /// One line for people, the form `doctor`, `target check` and `top` show:
    /// `held for 3m12s, last message #42 5s ago, last poll 1s ago`, or
    /// `conflict: <the service's words>; next try in 12s`.
    pub fn describe(&self, now: Millis) -> String {
        let failure = |s: &mut String| {
            if let Some(r) = &self.reason {
                s.push_str(&format!(": {r}"));
            }
            if let Some(n) = self.next_try(now) {
                s.push_str(&format!("; next try {n}"));
            }
        };
        match self.phase.known() {
            Some(SessionPhase::Held) => {
                let mut s = format!(
                    "held for {}, last message {}, last poll {}",
                    self.held_for(now).unwrap_or_else(|| "-".into()),
                    self.last_message(now),
                    self.last_poll(now)
                );
                if self.reason.is_some() {
                    s.push_str("; last poll failed");
                    failure(&mut s);
                }
                s
            }
            Some(SessionPhase::Opening) => "opening (no session yet)".into(),
            Some(SessionPhase::Closed) => {
                format!("closed, last message {}", self.last_message(now))
            }
            Some(SessionPhase::Conflict) | Some(SessionPhase::Failing) | None => {
                let mut s = self.phase.to_string();
                failure(&mut s);
                s
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: Millis = 1_796_032_800_000;

    fn held() -> SessionState {
        SessionState {
            phase: SessionPhase::Held.into(),
            scale_set_id: Some(3),
            session_id: Some("a1b2c3d4-0000".into()),
            held_since: Some(NOW - 192_000),
            last_message_id: Some(42),
            last_message_at: Some(NOW - 5_000),
            last_poll_at: Some(NOW - 1_000),
            reason: None,
            retry_at: None,
        }
    }

    #[test]
    fn every_phase_writes_its_word_and_reads_back() {
        for p in PHASES {
            assert_eq!(SessionPhase::parse(&p.to_string()), Some(p));
        }
        assert_eq!(SessionPhase::parse("Held"), None);
    }

    #[test]
    fn a_held_session_says_for_how_long_and_what_came_last() {
        let s = held();
        assert!(s.is_held() && !s.is_troubled());
        assert_eq!(
            s.describe(NOW),
            "held for 3m12s, last message #42 5s ago, last poll 1s ago"
        );
        let failing = SessionState {
            reason: Some("the Actions service answered 503".into()),
            retry_at: Some(NOW + 4_000),
            ..held()
        };
        assert!(failing.is_troubled());
        assert_eq!(
            failing.describe(NOW),
            "held for 3m12s, last message #42 5s ago, last poll 1s ago; last poll failed: \
             the Actions service answered 503; next try in 4s"
        );
    }

    #[test]
    fn a_conflict_names_its_reason_and_next_try() {
        let s = SessionState {
            phase: SessionPhase::Conflict.into(),
            reason: Some("another listener holds it (owner x)".into()),
            retry_at: Some(NOW + 12_000),
            ..SessionState::default()
        };
        assert!(s.is_troubled() && !s.is_held());
        assert_eq!(
            s.describe(NOW),
            "conflict: another listener holds it (owner x); next try in 12s"
        );
        let due = SessionState {
            retry_at: Some(NOW - 1),
            ..s
        };
        assert_eq!(due.next_try(NOW).as_deref(), Some("now"));
    }

    #[test]
    fn before_any_message_and_after_the_end() {
        let fresh = SessionState::default();
        assert_eq!(fresh.describe(NOW), "opening (no session yet)");
        assert_eq!(fresh.last_message(NOW), "none");
        assert_eq!(fresh.last_poll(NOW), "never");
        let restored = SessionState {
            last_message_at: None,
            ..held()
        };
        assert_eq!(restored.last_message(NOW), "#42");
        let closed = SessionState {
            phase: SessionPhase::Closed.into(),
            ..held()
        };
        assert_eq!(closed.describe(NOW), "closed, last message #42 5s ago");
        let other = SessionState {
            phase: Reported::Unrecognized("parked".into()),
            ..SessionState::default()
        };
        assert_eq!(other.describe(NOW), "parked");
    }
}
