//! What GitHub tells us, in our own words: queued jobs and registered runners. Only
//! `github/` knows GitHub's JSON; everything else sees these types.

use crate::timefmt::Millis;
use serde::{Deserialize, Serialize};

/// A job waiting for a runner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueuedJob {
    /// GitHub's job id.
    pub id: i64,
    pub run_id: i64,
    /// `owner/repo` the job belongs to.
    pub repo: String,
    pub name: String,
    /// The job's `runs-on` labels.
    pub labels: Vec<String>,
    pub created_at: Millis,
}

/// A runner registration as GitHub lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegisteredRunner {
    pub id: i64,
    pub name: String,
    pub online: bool,
    pub busy: bool,
    pub labels: Vec<String>,
}
