//! Typed errors of the GitHub client, and how a caller should react to each.

pub use crate::reconcile::pass::Cause;
use crate::reconcile::refusal::{self, Answer};
use crate::timefmt::{Millis, format_rfc3339};
use std::fmt;

/// A failed GitHub call. Messages say what failed and what to do; none holds a secret
/// (GitHub's own `message` is kept, and GitHub never echoes credentials).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GhError {
    /// Status 401; `clock_hint` is set when the rejected credential was the App JWT,
    /// which most often fails because the host clock runs ahead.
    Unauthorized { clock_hint: bool },
    /// 403 that is not a rate limit: missing permission.
    Forbidden { message: String },
    /// 403/429 rate limits (primary or secondary). No request is sent before `until`.
    RateLimited { until: Millis },
    /// 404: the target, runner or endpoint does not exist (or is hidden from us).
    NotFound,
    /// 409, e.g. a JIT runner name that already exists.
    Conflict { message: String },
    /// 422, e.g. a validation failure.
    Unprocessable { message: String },
    /// 410: the API version we send is no longer served.
    Gone,
    /// 5xx after the retries.
    Server { status: u16 },
    /// Any other unexpected status.
    Unexpected { status: u16 },
    /// The connection failed, reset, or timed out (after the retries).
    Transport { detail: String },
    /// The response was not the JSON we expected (bad, truncated, or a bad header).
    Malformed { detail: String },
    /// The response body exceeded the client's size cap.
    TooLarge { limit: u64 },
    /// The shutdown channel fired while the client was waiting to retry.
    Interrupted,
}

/// How a caller should react to an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorClass {
    /// Try again on the next pass; nothing is wrong with the configuration.
    Transient,
    /// Will fail the same way until a human acts: stop launching for this target and
    /// show the error as the reason.
    Deterministic,
    /// Send nothing to this credential before this time.
    RateLimitedUntil(Millis),
}

impl GhError {
    /// GitHub's answer, as the pass judges it (`reconcile::refusal`).
    pub fn answer(&self) -> Answer<'_> {
        match self {
            GhError::Unauthorized { .. } => Answer::Unauthorized,
            GhError::Forbidden { message } => Answer::Forbidden(message),
            GhError::RateLimited { until } => Answer::RateLimited(*until),
            GhError::NotFound => Answer::NotFound,
            GhError::Conflict { .. } => Answer::Conflict,
            GhError::Unprocessable { .. } => Answer::Unprocessable,
            GhError::Gone => Answer::Gone,
            GhError::Server { .. } => Answer::Server,
            GhError::Unexpected { .. } => Answer::Unexpected,
            GhError::Transport { .. } => Answer::Transport,
            GhError::Malformed { .. } => Answer::Malformed,
            GhError::TooLarge { .. } => Answer::TooLarge,
            GhError::Interrupted => Answer::Interrupted,
        }
    }

    /// What the error says of the target (`reconcile::refusal::cause`).
    pub fn cause(&self) -> Cause {
        refusal::cause(self.answer())
    }

    pub fn class(&self) -> ErrorClass {
        match self {
            GhError::RateLimited { until } => ErrorClass::RateLimitedUntil(*until),
            GhError::Server { .. }
            | GhError::Transport { .. }
            | GhError::Malformed { .. }
            | GhError::Interrupted => ErrorClass::Transient,
            // A 409 or 422 is about one request (a name taken, a runner busy), not the
            // target: the caller decides what it means for its action.
            GhError::Conflict { .. } | GhError::Unprocessable { .. } => ErrorClass::Transient,
            GhError::Unauthorized { .. }
            | GhError::Forbidden { .. }
            | GhError::NotFound
            | GhError::Gone
            | GhError::Unexpected { .. }
            | GhError::TooLarge { .. } => ErrorClass::Deterministic,
        }
    }

    pub fn is_transient(&self) -> bool {
        self.class() == ErrorClass::Transient
    }

    /// Whether GitHub refused the credentials themselves: a 401, or a 403 other than a
    /// rate limit (missing permission).
    pub fn refuses_credentials(&self) -> bool {
        matches!(
            self,
            GhError::Unauthorized { .. } | GhError::Forbidden { .. }
        )
    }
}

/// What every 401 message carries.
const MARK_401: &str = "(401)";
/// What every refusing 403 message carries.
const MARK_403: &str = "(403: ";

impl fmt::Display for GhError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GhError::Unauthorized { clock_hint: true } => write!(
                f,
                "GitHub rejected the App's JWT {MARK_401}; check the host clock (it may run ahead), the app id and the private key"
            ),
            GhError::Unauthorized { clock_hint: false } => write!(
                f,
                "GitHub rejected the credentials {MARK_401}; check that the token is valid and not expired, or that the App is still installed"
            ),
            GhError::Forbidden { message } => write!(
                f,
                "GitHub refused the request {MARK_403}{message}); give the token or App permission to manage self-hosted runners"
            ),
            GhError::RateLimited { until } => write!(
                f,
                "GitHub rate limit reached; waiting until {} before the next request",
                format_rfc3339(*until)
            ),
            GhError::NotFound => write!(
                f,
                "GitHub answered 404; check the owner, repository or organization name and that the credentials can see it"
            ),
            GhError::Conflict { message } => {
                write!(f, "GitHub reported a conflict (409: {message})")
            }
            GhError::Unprocessable { message } => {
                write!(f, "GitHub could not process the request (422: {message})")
            }
            GhError::Gone => write!(
                f,
                "GitHub no longer serves API version 2022-11-28 (410); upgrade runner-manager"
            ),
            GhError::Server { status } => write!(
                f,
                "GitHub had a server error ({status}) after retries; it will be tried again"
            ),
            GhError::Unexpected { status } => write!(
                f,
                "GitHub answered an unexpected status {status}; check api_url points at a GitHub API"
            ),
            GhError::Transport { detail } => write!(
                f,
                "could not reach GitHub ({detail}); check the network and api_url"
            ),
            GhError::Malformed { detail } => write!(
                f,
                "GitHub sent a response that could not be read ({detail}); it will be tried again"
            ),
            GhError::TooLarge { limit } => write!(
                f,
                "GitHub sent a response larger than {limit} bytes; refused it, check api_url"
            ),
            GhError::Interrupted => write!(f, "GitHub request interrupted by shutdown"),
        }
    }
}

impl std::error::Error for GhError {}

/// Loading a credential failed. Names where the secret should be, never what it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthError {
    /// The token file could not be read, or was refused (not a regular file, or
    /// readable by group or others).
    TokenFile(crate::secret::SecretFileError),
    /// The environment variable is unset or empty.
    TokenEnv { var: String },
    /// The token file or variable is empty.
    EmptyToken { source: String },
    /// The App key file could not be read, or was refused.
    KeyFile(crate::secret::SecretFileError),
    /// The App key could not be parsed.
    AppKey { path: String, detail: String },
}

impl fmt::Display for AuthError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AuthError::TokenFile(e) => write!(f, "token file: {e}"),
            AuthError::KeyFile(e) => write!(f, "GitHub App key: {e}"),
            AuthError::TokenEnv { var } => {
                write!(
                    f,
                    "environment variable ${var} is not set; export it to the daemon"
                )
            }
            AuthError::EmptyToken { source } => {
                write!(f, "{source} holds no token; put a GitHub token there")
            }
            AuthError::AppKey { path, detail } => write!(
                f,
                "cannot use GitHub App key {path} ({detail}); give the PEM private key (RSA PRIVATE KEY) downloaded from the App's settings"
            ),
        }
    }
}

impl std::error::Error for AuthError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        assert_eq!(
            GhError::Server { status: 502 }.class(),
            ErrorClass::Transient
        );
        assert_eq!(GhError::NotFound.class(), ErrorClass::Deterministic);
        assert_eq!(
            GhError::RateLimited { until: 5 }.class(),
            ErrorClass::RateLimitedUntil(5)
        );
        assert!(
            GhError::Transport {
                detail: "reset".into()
            }
            .is_transient()
        );
        assert!(!GhError::Unauthorized { clock_hint: false }.is_transient());
    }

    #[test]
    fn a_401_holds_as_a_refused_credential_and_the_rest_as_their_class() {
        use crate::reconcile::hold::Refusal;
        use crate::reconcile::refusal::hold;
        let all = [
            GhError::Unauthorized { clock_hint: true },
            GhError::Forbidden {
                message: "no".into(),
            },
            GhError::RateLimited { until: 7 },
            GhError::NotFound,
            GhError::Conflict {
                message: "taken".into(),
            },
            GhError::Unprocessable {
                message: "bad".into(),
            },
            GhError::Gone,
            GhError::Server { status: 502 },
            GhError::Unexpected { status: 418 },
            GhError::Transport {
                detail: "reset".into(),
            },
            GhError::Malformed {
                detail: "json".into(),
            },
            GhError::TooLarge { limit: 1 },
            GhError::Interrupted,
        ];
        for e in all {
            let want = match e.class() {
                _ if matches!(e, GhError::Unauthorized { .. }) => Refusal::CredentialsRefused,
                ErrorClass::RateLimitedUntil(t) => Refusal::RateLimitedUntil(t),
                ErrorClass::Deterministic => Refusal::Deterministic,
                ErrorClass::Transient => Refusal::Transient,
            };
            assert_eq!(hold(e.answer()), want, "{e:?}");
        }
    }

    #[test]
    fn a_recorded_message_refuses_credentials_exactly_when_its_error_does() {
        let all = [
            GhError::Unauthorized { clock_hint: true },
            GhError::Unauthorized { clock_hint: false },
            GhError::Forbidden {
                message: "Resource not accessible".into(),
            },
            GhError::RateLimited { until: 0 },
            GhError::NotFound,
            GhError::Conflict {
                message: "taken".into(),
            },
            GhError::Unprocessable {
                message: "x".into(),
            },
            GhError::Gone,
            GhError::Server { status: 502 },
            GhError::Unexpected { status: 401 },
            GhError::Transport {
                detail: "reset".into(),
            },
            GhError::Malformed { detail: "x".into() },
            GhError::TooLarge { limit: 1 },
            GhError::Interrupted,
        ];
        for e in all {
            let refuses = matches!(e, GhError::Unauthorized { .. } | GhError::Forbidden { .. });
            assert_eq!(e.refuses_credentials(), refuses, "{e:?}");
            assert_eq!(
                e.cause() == crate::reconcile::pass::Cause::Credentials,
                refuses,
                "{e}"
            );
        }
    }

    #[test]
    fn messages_have_no_trailing_period() {
        for e in [
            GhError::Unauthorized { clock_hint: true },
            GhError::Gone,
            GhError::TooLarge { limit: 1 },
            GhError::RateLimited { until: 0 },
        ] {
            assert!(!e.to_string().ends_with('.'), "{e}");
        }
        assert!(
            GhError::Unauthorized { clock_hint: true }
                .to_string()
                .contains("clock")
        );
    }
}
