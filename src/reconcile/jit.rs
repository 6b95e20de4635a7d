//! What a start does when GitHub refuses its runner's JIT config: a 409 says the
//! runner's name is registered already, which only an earlier try of this very
//! attempt can have done (names are `rm-<host>-<attempt>`): that registration is
//! removed and the config asked for again, once. A rate limit (a `retry-after`, the
//! credential's points or hourly budget spent, met here or by another client of the
//! credential) is waited out and the config asked for again, as long as the wait ends
//! within [`MAX_START_WAIT`] of the start's beginning: a job is never failed for a
//! limit that passes. Anything else, or a second 409, fails the start with GitHub's
//! error.

use crate::timefmt::Millis;

/// The longest a start waits for rate limits to pass, from its beginning: longer than
/// a secondary limit's `retry-after` (60 s), shorter than a lease a coordinator would
/// place elsewhere meanwhile is worth holding (its default time to live is 120 s).
pub const MAX_START_WAIT: Millis = 100_000;

/// The next step after a JIT config request failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterRefusal {
    /// Delete the registration holding the name, then ask again.
    ReplaceTaken,
    /// Send nothing before then, then ask again.
    WaitUntil(Millis),
    /// The start fails with the error.
    Fail,
}

/// How GitHub refused the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// 409: the name is taken.
    Conflict,
    /// A rate limit: nothing may be sent to the credential before then.
    Limited(Millis),
    Other,
}

/// `replaced`: this start already replaced a taken name once; `began`: when the start
/// began.
pub fn after_refusal(refused: Refused, replaced: bool, began: Millis) -> AfterRefusal {
    match refused {
        Refused::Conflict if !replaced => AfterRefusal::ReplaceTaken,
        Refused::Limited(until) if until <= began + MAX_START_WAIT => {
            AfterRefusal::WaitUntil(until)
        }
        _ => AfterRefusal::Fail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: Millis = 1_800_000_000_000;

    #[test]
    fn a_taken_name_is_replaced_once_and_any_other_refusal_fails_the_start() {
        assert_eq!(
            after_refusal(Refused::Conflict, false, T0),
            AfterRefusal::ReplaceTaken
        );
        assert_eq!(
            after_refusal(Refused::Conflict, true, T0),
            AfterRefusal::Fail
        );
        assert_eq!(after_refusal(Refused::Other, false, T0), AfterRefusal::Fail);
    }

    #[test]
    fn a_rate_limit_that_passes_within_the_wait_is_waited_out_and_a_longer_one_fails() {
        let retry_after = T0 + 60_000;
        assert_eq!(
            after_refusal(Refused::Limited(retry_after), false, T0),
            AfterRefusal::WaitUntil(retry_after)
        );
        // Met again after a first wait: still within the start's wait.
        assert_eq!(
            after_refusal(Refused::Limited(T0 + MAX_START_WAIT), true, T0),
            AfterRefusal::WaitUntil(T0 + MAX_START_WAIT)
        );
        // An hourly budget spent until its reset, far off: the start does not hold its
        // slot (and a coordinator's lease) that long.
        assert_eq!(
            after_refusal(Refused::Limited(T0 + MAX_START_WAIT + 1), false, T0),
            AfterRefusal::Fail
        );
    }
}
