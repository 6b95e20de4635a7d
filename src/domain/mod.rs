//! The domain: hosts, targets, profiles, attempts and the rules that hold for them.
//! Pure data and pure functions; no I/O, no clock (callers pass `now`).

pub mod attempt;
pub mod caches;
pub mod describe;
pub mod execution;
pub mod host;
pub mod host_settings;
pub mod identity;
pub mod isolation;
pub mod job;
pub mod job_owner;
pub mod job_phase;
pub mod labels;
pub mod loss;
pub mod oci_readiness;
pub mod profile;
pub mod reason;
pub mod rerun;
pub mod risks;
pub mod rollup;
pub mod runner_env;
pub mod runner_group;
pub mod session;
pub mod status;
pub mod target;
pub mod validate;
pub mod workspace;

pub use attempt::{Attempt, AttemptState, IllegalTransition, Outcome};
pub use execution::Execution;
pub use host::{Host, parse_runner_name, runner_name};
pub use isolation::{InEffect, Isolation, UidRange};
pub use job::{QueuedJob, RegisteredRunner};
pub use profile::{DEFAULT_RUNNER_GROUP_ID, DemandSource, Mode, RunnerGroup, ScalePolicy};
pub use reason::{Reason, ReasonKind};
pub use session::{SessionPhase, SessionState};
pub use status::{Limit, NotReconciling, Reported, TargetMode};
pub use target::{CredentialRef, Target, TargetScope};
pub use validate::Invalid;
