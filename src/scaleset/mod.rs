//! GitHub's runner scale set API (what actions-runner-controller speaks): an admin
//! connection to the Actions service, scale sets, message sessions and the long poll
//! that tells us within moments that jobs were assigned, with statistics that give
//! demand as `min(max, min_capacity + totalAssignedJobs)`.
//!
//! The API is undocumented public preview (`api-version=6.0-preview`), so all of it
//! stays behind this module. [`ScaleSetClient`] has the operations;
//! [`ScaleSetListener`] holds a session and is driven by the daemon (or the
//! coordinator) one [`ScaleSetListener::poll_once`] at a time. Only this module (and
//! `sim`, which plays it) knows the service's JSON.

pub mod admin;
pub mod check;
pub mod client;
pub mod error;
pub mod listener;
pub mod message;
mod types;

pub use admin::AdminConnection;
pub use check::check_profiles;
pub use client::{
    Removed, RunnerGroup, ScaleSet, ScaleSetClient, ScaleSetRunner, ScaleSetSpec, Session,
};
pub use error::{Exception, ScaleSetError};
pub use listener::{
    Checkpoint, ListenerConfig, MemoryCheckpoint, PollResult, ScaleSetListener, SessionCloser,
    SessionWatch, StoreCheckpoint, checkpoint_key, session_key,
};
pub use message::{JobInfo, JobMessage, ScaleSetMessage, Statistics, desired_runners};
