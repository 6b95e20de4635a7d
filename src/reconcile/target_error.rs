//! Why a target cannot use GitHub now ([`TargetError`]), what a refusal says of it
//! ([`Cause`], the exit class of `daemon --once` and the CLI's), and the words
//! `status` shows for a refused credential ([`refused_text`]). The pass keeps the
//! target's error (`reconcile::pass`); `github::GhError` maps onto these words.

use crate::domain::status::ErrorKind;
use crate::reconcile::hold::Refusal;
use crate::timefmt::Millis;

/// Why the target cannot use GitHub now, as `status` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetError {
    /// The credential could not be loaded (a missing file, a bad key).
    Credentials(String),
    /// A profile cannot start for a required check of the host (`Unfit::is_host_unfit`):
    /// what `daemon --once` fails with when GitHub answered every call.
    HostUnfit(String),
    /// GitHub refused a call: how it refused, what that says of the target, and its
    /// words.
    GitHub {
        refusal: Refusal,
        cause: Cause,
        text: String,
    },
}

/// What a refusal says of the target, for the exit class of `daemon --once`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// 401 or 403: the credential, or what it may do.
    Credentials,
    /// A required check of the host fails (`doctor`'s unfit).
    HostUnfit,
    /// 404: the repository or organization (or the credential cannot see it).
    NotFound,
    RateLimited,
    /// A 5xx, a timeout, an answer that is not GitHub's.
    Unreachable,
    /// The call was cut short by a shutdown.
    Interrupted,
    Other,
}

impl TargetError {
    /// What the error says of the target.
    pub fn cause(&self) -> Cause {
        match self {
            TargetError::Credentials(_) => Cause::Credentials,
            TargetError::HostUnfit(_) => Cause::HostUnfit,
            TargetError::GitHub { cause, .. } => *cause,
        }
    }
}

impl TargetError {
    /// What the error says of the target, as the store keeps it.
    pub fn kind(&self) -> ErrorKind {
        match self {
            TargetError::Credentials(_) => ErrorKind::CredentialsUnreadable,
            TargetError::HostUnfit(_) => ErrorKind::Other,
            TargetError::GitHub { cause, .. } => match cause {
                Cause::Credentials => ErrorKind::CredentialsRefused,
                Cause::HostUnfit => ErrorKind::Other,
                Cause::NotFound => ErrorKind::NotFound,
                Cause::RateLimited => ErrorKind::RateLimited,
                Cause::Unreachable => ErrorKind::Unreachable,
                Cause::Interrupted => ErrorKind::Interrupted,
                Cause::Other => ErrorKind::Other,
            },
        }
    }
}

impl std::fmt::Display for TargetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TargetError::Credentials(e) => write!(f, "credentials: {e}"),
            TargetError::HostUnfit(e) => f.write_str(e),
            TargetError::GitHub { text, .. } => f.write_str(text),
        }
    }
}

/// What `status` and the log say of a refused credential: the words a person looks
/// for (never `rate_limited`), since when, and GitHub's.
pub fn refused_text(since: Millis, github: &str) -> String {
    if github.starts_with(REFUSED_PREFIX) {
        return github.to_string();
    }
    format!(
        "{REFUSED_PREFIX}{}: {github}",
        crate::timefmt::format_rfc3339(since)
    )
}

/// How [`refused_text`] begins.
pub const REFUSED_PREFIX: &str = "credentials refused (401) since ";
