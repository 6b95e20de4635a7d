//! What a start does when GitHub refuses its runner's JIT config: a 409 says the
//! runner's name is registered already, which only an earlier try of this very
//! attempt can have done (names are `rm-<host>-<attempt>`): that registration is
//! removed and the config asked for again, once. Anything else, or a second 409,
//! fails the start with GitHub's error.

/// The next step after a JIT config request failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterRefusal {
    /// Delete the registration holding the name, then ask again.
    ReplaceTaken,
    /// The start fails with the error.
    Fail,
}

/// `conflict`: GitHub answered 409; `replaced`: this start already replaced a taken
/// name once.
pub fn after_refusal(conflict: bool, replaced: bool) -> AfterRefusal {
    if conflict && !replaced {
        AfterRefusal::ReplaceTaken
    } else {
        AfterRefusal::Fail
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_taken_name_is_replaced_once_and_any_other_refusal_fails_the_start() {
        assert_eq!(after_refusal(true, false), AfterRefusal::ReplaceTaken);
        assert_eq!(after_refusal(true, true), AfterRefusal::Fail);
        assert_eq!(after_refusal(false, false), AfterRefusal::Fail);
    }
}
