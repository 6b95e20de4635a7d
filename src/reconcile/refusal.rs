//! A refused GitHub call as the pass judges it: GitHub's answer ([`Answer`], what
//! `github::GhError` says, with no words of ours) mapped to the target's hold
//! ([`hold`]), what it says of the target ([`cause`]), and the target's error
//! ([`target_error`]); a re-run's reading of the same answer is
//! `reconcile::rerun::refusal`. The one mapping: the loop, the re-runs and the CLI's
//! exit classes all read an answer through here.

use crate::reconcile::hold::Refusal;
use crate::reconcile::target_error::{Cause, TargetError};
use crate::timefmt::Millis;

/// How GitHub (or the way to it) answered a call that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer<'a> {
    /// 401: the credential itself.
    Unauthorized,
    /// 403 that is not a rate limit, with GitHub's message.
    Forbidden(&'a str),
    /// A rate limit or `retry-after`: nothing before this time.
    RateLimited(Millis),
    NotFound,
    /// 409.
    Conflict,
    /// 422.
    Unprocessable,
    /// 410: the API version is no longer served.
    Gone,
    /// A 5xx after the retries.
    Server,
    /// Any other status.
    Unexpected,
    /// The connection failed, reset or timed out after the retries.
    Transport,
    /// An answer that is not the JSON expected.
    Malformed,
    /// An answer over the client's size cap.
    TooLarge,
    /// A shutdown cut the call short.
    Interrupted,
}

/// How the target is held for the answer: a rate limit until its time; a 401 is the
/// credential's own refusal (a fix of its file lifts it); what will fail the same way
/// until someone acts (403, 404, 410, an unexpected status or size) backs off; the
/// rest (a 5xx, a reset, a 409 or 422, which are about one request) holds nothing.
pub fn hold(a: Answer) -> Refusal {
    match a {
        Answer::RateLimited(until) => Refusal::RateLimitedUntil(until),
        Answer::Unauthorized => Refusal::CredentialsRefused,
        Answer::Forbidden(_)
        | Answer::NotFound
        | Answer::Gone
        | Answer::Unexpected
        | Answer::TooLarge => Refusal::Deterministic,
        Answer::Server
        | Answer::Transport
        | Answer::Malformed
        | Answer::Interrupted
        | Answer::Conflict
        | Answer::Unprocessable => Refusal::Transient,
    }
}

/// What the answer says of the target (the exit class of `daemon --once` and the
/// CLI's).
pub fn cause(a: Answer) -> Cause {
    match a {
        Answer::Unauthorized | Answer::Forbidden(_) => Cause::Credentials,
        Answer::NotFound => Cause::NotFound,
        Answer::RateLimited(_) => Cause::RateLimited,
        Answer::Transport
        | Answer::Server
        | Answer::Unexpected
        | Answer::Malformed
        | Answer::TooLarge => Cause::Unreachable,
        Answer::Interrupted => Cause::Interrupted,
        Answer::Gone | Answer::Conflict | Answer::Unprocessable => Cause::Other,
    }
}

/// The target's error for the answer, with `text`, the error as it reads.
pub fn target_error(a: Answer, text: String) -> TargetError {
    TargetError::GitHub {
        refusal: hold(a),
        cause: cause(a),
        text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_limit_holds_to_its_time_a_401_is_the_credentials_and_one_request_holds_nothing() {
        assert_eq!(hold(Answer::RateLimited(9)), Refusal::RateLimitedUntil(9));
        assert_eq!(hold(Answer::Unauthorized), Refusal::CredentialsRefused);
        for a in [Answer::Forbidden("no"), Answer::NotFound, Answer::Gone] {
            assert_eq!(hold(a), Refusal::Deterministic, "{a:?}");
        }
        for a in [
            Answer::Server,
            Answer::Transport,
            Answer::Conflict,
            Answer::Unprocessable,
        ] {
            assert_eq!(
                hold(a),
                Refusal::Transient,
                "{a:?}: a retry's, not the target's"
            );
        }
        assert_eq!(cause(Answer::Forbidden("no")), Cause::Credentials);
        assert_eq!(cause(Answer::Server), Cause::Unreachable);
        assert_eq!(
            target_error(Answer::NotFound, "404".into()),
            TargetError::GitHub {
                refusal: Refusal::Deterministic,
                cause: Cause::NotFound,
                text: "404".into(),
            }
        );
    }
}
