//! The store: the books of hosts, targets, profiles and attempts in embedded SQLite.
//!
//! [`Store`] is what the CLI, the daemon and the TUI call; [`SqliteStore`] is its one
//! implementation, on a file ([`SqliteStore::open`]) or in memory for tests
//! ([`SqliteStore::open_in_memory`]), from the same code. Only this module knows SQL.

mod backup;
mod config;
mod coordinator;
pub mod daemon_facts;
mod deliveries;
mod descriptors;
mod edit;
mod error;
mod etags;
mod identity;
mod ledger;
mod live;
mod meters;
mod names;
mod reruns;
mod rows;
pub mod schema;
mod sqlite;
mod upkeep;
mod usage;

pub use backup::BackedUp;
pub use coordinator::{CoordHostRow, CoordJobRow};
pub use edit::{
    EditError, HostEdit, HostProbe, beside, check_runner_dir, edit_host, edit_profile,
    read_host_settings, usage_settings,
};
pub use error::{Result, SqliteFault, StoreError};
pub use identity::Reidentified;
pub use names::{guess, near_name, said};
pub use reruns::losses_noted;
pub use sqlite::{DB_FILE, SqliteStore};
pub use upkeep::disk_bytes;
pub use usage::UsageRow;

use crate::domain::{
    Attempt, AttemptState, Host, Limit, Reported, ScalePolicy, SessionState, Target, TargetMode,
};
use crate::meter::{LiveMeter, MeterPoint};
use crate::timefmt::Millis;
use std::collections::BTreeMap;

/// What the store needs to create an attempt; it assigns the id and the runner name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewAttempt {
    pub profile: String,
    pub target: String,
    pub host_id: String,
    pub job_id: Option<i64>,
    pub job_name: Option<String>,
    pub job_queued_at: Option<Millis>,
    pub lease_id: Option<String>,
    /// The runner's own uid and gid (per-attempt isolation), chosen with the intent
    /// so that no two open attempts ever hold one.
    pub runner_uid: Option<u32>,
    pub runner_gid: Option<u32>,
    /// Whether the attempt keeps its slot's `_work` (`domain::workspace::keeps_work`).
    /// Its slot is chosen by the store with the row: one no open attempt of the
    /// target holds (the one `runner_uid` last held if free, else the lowest).
    pub keeps_work: bool,
}

/// A made-up history of attempts, for benchmarks and tests
/// ([`SqliteStore::seed_history`]): what a long-lived host accumulates, written in one
/// transaction. The `i`-th of `n` (from 1) gets the next attempt id, its runner name
/// from it, `profiles[i % profiles.len()]`, and times `base + i * 1000` ms (created),
/// 500 ms later (updated) and 400 ms later (ended, on every one); all but the newest
/// `open` are `closed` with outcome `completed_job` and cleaned, the newest `open` are
/// `busy`. Each has two events: `pending` when created, its state when updated.
#[derive(Debug, Clone)]
pub struct HistorySeed<'a> {
    pub host_id: &'a str,
    pub target: &'a str,
    /// At least one (the seeding panics otherwise).
    pub profiles: &'a [&'a str],
    pub n: i64,
    pub open: i64,
    pub closed: AttemptState,
    pub base: Millis,
}

/// Which attempts [`Store::attempts`] lists, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AttemptFilter {
    pub profile: Option<String>,
    /// Only attempts whose runner may be alive (`pending`, `starting`, `idle`, `busy`).
    pub active_only: bool,
    /// At most this many (`None` = all).
    pub limit: Option<u32>,
}

/// What the daemon last concluded about a profile, for `status` and `top`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileStatus {
    pub profile: String,
    pub demand: u32,
    /// The allocator's limiting factor (`demand`, `max_capacity`, `host_capacity`, ...);
    /// stored as its text, read back leniently.
    pub limiting: Reported<Limit>,
    pub last_error: Option<String>,
    pub updated_at: Millis,
}

/// What the daemon last concluded about a target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetStatus {
    pub target: String,
    /// `standalone`, `coordinated` or `fallback`; stored as its word, read back
    /// leniently.
    pub mode: Reported<TargetMode>,
    pub last_error: Option<String>,
    /// What `last_error` says of the target (`None` with no error, or from a daemon
    /// older than schema 20).
    pub error_kind: Option<crate::domain::status::ErrorKind>,
    pub rate_limit_remaining: Option<i64>,
    /// The rate limit's size per window, and when the window resets (unix ms), as
    /// GitHub last said.
    pub rate_limit_limit: Option<i64>,
    pub rate_limit_reset: Option<Millis>,
    /// How often the queue is read now: `poll_interval`, stretched by the budget
    /// governor when the budget thins. `None` when the target reads no REST queue.
    pub poll_every_ms: Option<i64>,
    pub updated_at: Millis,
}

/// One conditional GET's validator as a target's client keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEtag {
    pub url: String,
    pub etag: String,
    pub body: Vec<u8>,
    pub link: Option<String>,
}

/// A change to a target's validators since they were last written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EtagChange {
    Put(StoredEtag),
    /// Dropped by the client (evicted, or the answer carried no ETag).
    Gone(String),
}

/// A scale set profile's session as the daemon last recorded it, for `status`, `top`,
/// `doctor`, `target check` and the metrics: one row per profile, overwritten.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionStatus {
    pub profile: String,
    pub target: String,
    pub session: SessionState,
    pub updated_at: Millis,
}

/// The running daemon's sign of life, rewritten every pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heartbeat {
    pub pid: u32,
    pub started_at: Millis,
    pub heartbeat_at: Millis,
    pub version: String,
}

/// A heartbeat older than this means the daemon is gone (it beats every few seconds).
pub const HEARTBEAT_STALE_MS: Millis = 60_000;

impl Heartbeat {
    /// The daemon beat less than [`HEARTBEAT_STALE_MS`] before `now`.
    pub fn alive_at(&self, now: Millis) -> bool {
        now - self.heartbeat_at < HEARTBEAT_STALE_MS
    }
}

/// One point of a profile's queue graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueSample {
    pub profile: String,
    pub at: Millis,
    pub queued: u32,
    pub live: u32,
}

/// How long one job waited from queued to its runner starting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LatencySample {
    pub profile: String,
    pub at: Millis,
    pub latency_ms: i64,
}

/// The books. Every method is one transaction: a multi-row change is all or nothing.
/// Names that do not exist give [`StoreError::NotFound`].
pub trait Store {
    /// This host, if it was created.
    fn host(&self) -> Result<Option<Host>>;
    /// This host, created on first use: a random 16-hex-digit id, the machine's
    /// hostname, OS and arch, and as much capacity as the machine has CPUs.
    fn host_or_create(&self) -> Result<Host>;
    /// Writes the host's editable fields: capacity, draining, coordinator and its token
    /// file. The id, name, OS and arch stay as created.
    fn update_host(&self, host: &Host) -> Result<()>;
    /// Writes the host as `update_host` does and the key-value rows kept beside it
    /// (`None` deletes one), in one transaction.
    fn update_host_settings(&self, host: &Host, beside: &[(&str, Option<&str>)]) -> Result<()>;
    /// Sets only the draining flag (so `drain` never races with `host set`).
    fn set_draining(&self, draining: bool) -> Result<()>;
    /// The machine id the host id was drawn on (or last recorded on); `None` while
    /// none is kept (`domain::identity`).
    fn kept_machine_id(&self) -> Result<Option<String>>;

    /// Refused with `Exists` when the name is taken.
    fn add_target(&self, target: &Target) -> Result<()>;
    fn target(&self, name: &str) -> Result<Target>;
    /// All targets, by name.
    fn targets(&self) -> Result<Vec<Target>>;
    fn update_target(&self, target: &Target) -> Result<()>;
    /// Refused with `InUse` while a profile uses the target. What the daemon kept of
    /// it (its ETags, runner list and times) goes with it.
    fn remove_target(&self, name: &str) -> Result<()>;

    /// Stores a new profile at revision 1 and returns it as stored. Refused with
    /// `Exists`, or `NotFound` (what = "target") when its target does not exist.
    fn add_profile(&self, profile: &ScalePolicy) -> Result<ScalePolicy>;
    fn profile(&self, name: &str) -> Result<ScalePolicy>;
    /// All profiles, by name.
    fn profiles(&self) -> Result<Vec<ScalePolicy>>;
    /// Writes every field of `profile` if the stored revision is still
    /// `expected_revision`, and returns the new revision (`expected_revision + 1`).
    /// Refused with `StaleRevision`, nothing written, when another edit came first.
    fn update_profile(&self, profile: &ScalePolicy, expected_revision: u64) -> Result<u64>;
    /// Refused with `InUse` while the profile has live attempts.
    fn remove_profile(&self, name: &str) -> Result<()>;

    /// Inserts a `pending` attempt; the store assigns the id and the runner name.
    fn create_attempt(&self, new: &NewAttempt, now: Millis) -> Result<Attempt>;
    /// Writes the attempt's state and fields (all but its lease: `set_lease`), and
    /// appends the entries of `attempt.history` not yet stored. Attempts read from the
    /// store carry their whole history, so read, change, save is right for the one
    /// actor that holds the attempt (the loop, or the worker it handed it to).
    fn save_attempt(&self, attempt: &Attempt) -> Result<()>;
    /// Records that the attempt serves the launch `lease`, touching nothing else: a
    /// launch may bind to an attempt while a worker holds it.
    fn set_lease(&self, attempt: i64, lease: &str) -> Result<()>;
    fn attempt(&self, id: i64) -> Result<Attempt>;
    fn attempts(&self, filter: &AttemptFilter) -> Result<Vec<Attempt>>;
    /// The host's attempts not yet cleaned (live, ended, or being cleaned up), oldest
    /// first: what the daemon reads every pass.
    fn open_attempts(&self, host_id: &str) -> Result<Vec<Attempt>>;
    /// A profile's attempts not yet cleaned, oldest first.
    fn open_attempts_of_profile(&self, profile: &str) -> Result<Vec<Attempt>>;
    /// Live attempts (`pending`, `starting`, `idle`, `busy`) per profile; profiles
    /// with none are absent.
    fn live_counts(&self) -> Result<BTreeMap<String, u32>>;
    /// Deletes cleaned attempts last updated before `before`, with their events.
    /// Returns how many attempts went.
    fn prune_attempts(&self, before: Millis) -> Result<usize>;
    /// The daily usage roll-up's rows of days `from..=until` (days since the epoch,
    /// UTC), written as attempts end and kept past their retention.
    fn usage_rows(
        &self,
        from: crate::domain::rollup::Day,
        until: crate::domain::rollup::Day,
    ) -> Result<Vec<UsageRow>>;
    /// Deletes the roll-up's rows of days before `before`; returns how many went.
    fn prune_usage(&self, before: crate::domain::rollup::Day) -> Result<usize>;
    /// The row of the job an attempt lost to the host, if it lost one (`reruns`).
    fn rerun_of(&self, attempt: i64) -> Result<Option<crate::domain::rerun::Rerun>>;
    /// Per profile: its jobs lost since `since`, and how many were re-run.
    fn rerun_counts(&self, since: Millis) -> Result<Vec<(String, u64, u64)>>;
    /// The newest lost jobs and their re-runs, at most `limit`.
    fn recent_reruns(&self, limit: usize) -> Result<Vec<crate::domain::rerun::Rerun>>;

    fn put_profile_status(&self, status: &ProfileStatus) -> Result<()>;
    fn profile_statuses(&self) -> Result<Vec<ProfileStatus>>;
    fn put_target_status(&self, status: &TargetStatus) -> Result<()>;
    fn target_statuses(&self) -> Result<Vec<TargetStatus>>;
    /// Writes a scale set profile's session row, replacing the one before.
    fn put_session_status(&self, status: &SessionStatus) -> Result<()>;
    /// Every scale set session row, by profile.
    fn session_statuses(&self) -> Result<Vec<SessionStatus>>;
    /// Removes a profile's session row (its listener runs no more).
    fn delete_session_status(&self, profile: &str) -> Result<()>;
    fn put_heartbeat(&self, heartbeat: &Heartbeat) -> Result<()>;
    fn heartbeat(&self) -> Result<Option<Heartbeat>>;
    /// Called by a daemon that stops cleanly, so nobody takes it for alive.
    fn clear_heartbeat(&self) -> Result<()>;

    fn add_queue_samples(&self, samples: &[QueueSample]) -> Result<()>;
    /// Samples at or after `since`, oldest first; all profiles when `profile` is None.
    fn queue_samples(&self, profile: Option<&str>, since: Millis) -> Result<Vec<QueueSample>>;
    fn add_latency_sample(&self, sample: &LatencySample) -> Result<()>;
    fn latency_samples(&self, profile: Option<&str>, since: Millis) -> Result<Vec<LatencySample>>;
    /// Deletes queue and latency samples taken before `before`; returns how many.
    fn prune_samples(&self, before: Millis) -> Result<usize>;

    /// Writes live meter rows (and one sparkline point each) in one transaction;
    /// rows of attempts already cleaned are skipped.
    fn put_live_meters(&self, meters: &[LiveMeter]) -> Result<()>;
    /// The live meter of every attempt not yet cleaned that has one, by attempt id.
    fn live_meters(&self) -> Result<BTreeMap<i64, LiveMeter>>;
    /// An attempt's recent meter points, oldest first (empty once it is cleaned).
    fn meter_points(&self, attempt: i64) -> Result<Vec<MeterPoint>>;

    /// A small key/value table for modules' own state (e.g. a scale set's lastMessageId).
    fn kv_get(&self, key: &str) -> Result<Option<String>>;
    fn kv_put(&self, key: &str, value: &str) -> Result<()>;
    fn kv_delete(&self, key: &str) -> Result<()>;

    /// A target's conditional-request validators, kept across restarts.
    fn etags(&self, target: &str) -> Result<Vec<StoredEtag>>;
    /// Writes changes to them in one transaction.
    fn save_etags(&self, target: &str, changes: &[EtagChange]) -> Result<()>;

    /// `PRAGMA data_version`: changes whenever another connection committed, so a
    /// daemon notices CLI edits without reading everything again.
    fn data_version(&self) -> Result<i64>;
}

#[cfg(test)]
pub(crate) mod tests;
#[cfg(test)]
mod usage_tests;
