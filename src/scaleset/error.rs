//! Typed errors of the scale set client: what the Actions service refused, by its
//! exception name, so the listener can branch (refresh, recreate, back off).

use crate::github::{ErrorClass, GhError};
use std::fmt;

/// The exceptions the Actions service names in an error body (`typeName`/`typeKey`)
/// that a caller reacts to; anything else is `Other`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exception {
    /// 409: another session holds the scale set.
    SessionConflict,
    /// 404: the scale set was deleted.
    ScaleSetNotFound,
    /// 404: the message session is gone.
    SessionNotFound,
    /// JIT config for a name that is already registered.
    AgentExists,
    /// Any other (or no) exception name.
    Other,
}

impl Exception {
    /// Classifies an error body's exception name (or message, when no name is given).
    pub fn from_text(text: &str) -> Exception {
        if text.contains("RunnerScaleSetSessionConflictException") {
            Exception::SessionConflict
        } else if text.contains("RunnerScaleSetNotFoundException") {
            Exception::ScaleSetNotFound
        } else if text.contains("MessageSessionNotFound")
            || text.contains("TaskAgentSessionNotFoundException")
            || text.contains("RunnerScaleSetSessionNotFoundException")
        {
            Exception::SessionNotFound
        } else if text.contains("AgentExistsException") {
            Exception::AgentExists
        } else {
            Exception::Other
        }
    }
}

/// A failed scale set call. Messages say what failed and what to do; none holds a
/// token (the service's own `message` is kept, shortened, and it never echoes one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScaleSetError {
    /// The REST side (registration token) or the transport failed: see its class.
    GitHub(GhError),
    /// `runner-registration` refused the registration token or the config URL.
    Registration { status: u16, message: String },
    /// The Actions service answered an error status.
    Service {
        status: u16,
        exception: Exception,
        message: String,
    },
    /// A response that was not the JSON the protocol describes.
    Malformed { detail: String },
    /// The shutdown channel fired during a wait.
    Interrupted,
    /// The last message id could not be read or saved (the store failed).
    Checkpoint { detail: String },
}

impl ScaleSetError {
    pub fn status(&self) -> Option<u16> {
        match self {
            ScaleSetError::Registration { status, .. } | ScaleSetError::Service { status, .. } => {
                Some(*status)
            }
            _ => None,
        }
    }

    pub fn exception(&self) -> Option<&Exception> {
        match self {
            ScaleSetError::Service { exception, .. } => Some(exception),
            _ => None,
        }
    }

    pub fn is_session_conflict(&self) -> bool {
        self.exception() == Some(&Exception::SessionConflict)
    }

    pub fn is_scale_set_not_found(&self) -> bool {
        self.exception() == Some(&Exception::ScaleSetNotFound)
    }

    pub fn is_unauthorized(&self) -> bool {
        self.status() == Some(401)
    }

    pub fn is_not_found(&self) -> bool {
        self.status() == Some(404)
    }

    /// Whether the same call may succeed later without a human acting: transport
    /// failures, 5xx, conflicts and vanished sessions are; bad credentials and
    /// permissions are not.
    pub fn is_transient(&self) -> bool {
        match self {
            ScaleSetError::GitHub(e) => e.class() != ErrorClass::Deterministic,
            ScaleSetError::Registration { status, .. } => *status >= 500,
            ScaleSetError::Service { status, .. } => {
                *status >= 500 || matches!(status, 401 | 404 | 409 | 429)
            }
            ScaleSetError::Malformed { .. }
            | ScaleSetError::Interrupted
            | ScaleSetError::Checkpoint { .. } => true,
        }
    }
}

impl From<GhError> for ScaleSetError {
    fn from(e: GhError) -> ScaleSetError {
        match e {
            GhError::Interrupted => ScaleSetError::Interrupted,
            e => ScaleSetError::GitHub(e),
        }
    }
}

impl fmt::Display for ScaleSetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScaleSetError::GitHub(e) => write!(f, "{e}"),
            ScaleSetError::Registration { status, message } => write!(
                f,
                "GitHub refused the scale set registration ({status}: {message}); check that the credentials can manage self-hosted runners for this target"
            ),
            ScaleSetError::Service {
                status: 409,
                exception: Exception::SessionConflict,
                message,
            } => write!(
                f,
                "another listener holds this scale set's message session (409: {message}); only one holder per scale set is possible, it will be retried until that session ends or expires"
            ),
            ScaleSetError::Service {
                exception: Exception::ScaleSetNotFound,
                ..
            } => write!(
                f,
                "the runner scale set no longer exists (404); it will be created again"
            ),
            ScaleSetError::Service {
                status, message, ..
            } => write!(
                f,
                "the Actions service answered {status} ({message}); it will be tried again if it is transient"
            ),
            ScaleSetError::Malformed { detail } => write!(
                f,
                "the Actions service sent a response that could not be read ({detail}); it will be tried again"
            ),
            ScaleSetError::Interrupted => write!(f, "scale set call interrupted by shutdown"),
            ScaleSetError::Checkpoint { detail } => write!(
                f,
                "cannot read or save the scale set's last message id ({detail}); check the state directory"
            ),
        }
    }
}

impl std::error::Error for ScaleSetError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exceptions_by_name() {
        assert_eq!(
            Exception::from_text(
                "GitHub.Actions.Runtime.WebApi.RunnerScaleSetSessionConflictException, GitHub.Actions.Runtime.WebApi"
            ),
            Exception::SessionConflict
        );
        assert_eq!(
            Exception::from_text("RunnerScaleSetNotFoundException"),
            Exception::ScaleSetNotFound
        );
        assert_eq!(
            Exception::from_text("GitHub.DistributedTask.WebApi.AgentExistsException"),
            Exception::AgentExists
        );
        assert_eq!(Exception::from_text("whatever"), Exception::Other);
    }

    #[test]
    fn classes_and_messages() {
        let conflict = ScaleSetError::Service {
            status: 409,
            exception: Exception::SessionConflict,
            message: "held".into(),
        };
        assert!(conflict.is_session_conflict() && conflict.is_transient());
        assert!(conflict.to_string().contains("another listener"));
        // The service names the holder (its owner name): the reason shown says whose.
        assert!(conflict.to_string().contains("(409: held)"), "{conflict}");
        let denied = ScaleSetError::Registration {
            status: 403,
            message: "no".into(),
        };
        assert!(!denied.is_transient());
        for e in [conflict, denied, ScaleSetError::Interrupted] {
            assert!(!e.to_string().ends_with('.'), "{e}");
        }
    }
}
