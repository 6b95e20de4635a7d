//! The GitHub REST client: auth (PAT, App JWT), typed errors, rate limits, ETags, pagination.
//!
//! Only this module (and `sim`) knows GitHub's JSON: operations return domain types.

pub mod auth;
pub mod check;
pub mod check_line;
pub mod client;
pub mod endpoint;
pub mod error;
pub mod etag;
pub mod fanout;
pub mod headers;
pub mod hooks;
pub mod inflight;
pub mod jwt;
pub mod ops;
pub mod pagination;
pub mod permission;
pub mod ratelimit;
pub mod retry;
pub mod secondary;
mod types;
pub mod visibility;

pub use auth::{Credential, InstallationToken, load_credential, load_credential_with};
pub use check::{CheckOptions, check_target};
pub use check_line::CheckLine;
pub use client::{ClientConfig, ClientStats, GitHubClient, Observer};
pub use error::{AuthError, ErrorClass, GhError};
pub use inflight::{InFlight, InFlightUsage};
pub use ops::{Deleted, QueueRead, ReadCaps, RepoInfo, RunnerDownload};
pub use ratelimit::{RateLimitSnapshot, SharedHold};
pub use retry::{Clock, RetryPolicy, SystemClock};
pub use secondary::SharedPoints;
