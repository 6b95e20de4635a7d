//! The coordinator protocol, version 3: the JSON text frames hosts and the coordinator
//! exchange (`{"type": ..., ...}`), their bounds, and the version rules. Only this module
//! knows the wire format; both sides convert to and from these types at the edge. Every
//! string a host sends has its control characters escaped here, before the bounds are
//! checked, so nothing a host names reaches the store, a log or a terminal raw.
//!
//! Here: the limits, the frames as types and the version rules. Turning them into text
//! and back, with the bounds and the escaping, is `codec`.

mod codec;
mod owners;
mod usage;

pub use codec::{FrameError, escape_controls};

/// A text a frame carries: control characters escaped, then cut to [`MAX_STR`] bytes
/// on a character boundary (the usage and owners rows).
pub(crate) fn bound_text(s: &mut String) {
    escape_controls(s);
    if s.len() > MAX_STR {
        let mut cut = MAX_STR;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
}
pub use owners::{MAX_FEATURES, MAX_OWNERS, OWNER_BYTES, OwnerReport, Owners};
pub use usage::{MAX_FIGURE, MAX_USAGE_ROWS, USAGE_BYTES, USAGE_DAYS, UsageReport};

use crate::reconcile::launch_book;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The protocol this build speaks.
pub const VERSION: u32 = 3;
/// The oldest version a host may speak and stay connected (it is never directed).
pub const MIN_VERSION: u32 = 2;
/// Largest WebSocket message and frame accepted, either way.
pub const MAX_MESSAGE: usize = 64 * 1024;
/// Longest string field (names, lease ids, job keys, labels, URLs).
pub const MAX_STR: usize = launch_book::MAX_FIELD;
pub const MAX_TARGETS: usize = 64;
pub const MAX_PROFILES: usize = 256;
pub const MAX_LABELS: usize = 64;
/// Longest time to live a coordinator may give (the host cuts longer ones anyway).
pub const MAX_TTL_SECS: u64 = launch_book::MAX_TTL_SECS;

/// This host, as `hello` describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostInfo {
    pub id: String,
    pub name: String,
    pub os: String,
    pub arch: String,
    pub capacity: u32,
    /// The binary's own version (`runner-manager --version`), beside the protocol's,
    /// so `coordinator hosts` shows which hosts an upgrade has reached. Absent from
    /// older hosts; an older coordinator ignores it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binary_version: Option<String>,
}

/// One of the host's targets: its local name and where it points, so that the
/// coordinator can match it with one of its own targets (names are local to each side).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetInfo {
    pub name: String,
    /// `owner/repo` or the organization (`TargetScope::display`).
    pub scope: String,
    pub api_url: String,
}

/// One of the host's pool profiles (those carrying `rm-pool-<os>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfileInfo {
    pub name: String,
    /// The host's target name.
    pub target: String,
    /// Every label its runners carry (defaults included).
    pub labels: Vec<String>,
    /// Its `max_capacity`.
    pub max: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    pub version: u32,
    pub host: HostInfo,
    #[serde(default)]
    pub targets: Vec<TargetInfo>,
    #[serde(default)]
    pub profiles: Vec<ProfileInfo>,
    /// The optional frames this host understands ([`FEATURE_OWNERS`]), so that a
    /// coordinator sends them only to a host that asked. Absent from older hosts;
    /// an older coordinator ignores it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub features: Vec<String>,
}

/// A host's `hello` feature: it takes `owners` frames (whose job each of its runners
/// took, from the coordinator's queue read).
pub const FEATURE_OWNERS: &str = "owners";

impl Hello {
    /// Whether the host said it understands `feature`.
    pub fn understands(&self, feature: &str) -> bool {
        self.features.iter().any(|f| f == feature)
    }
}

impl Hello {
    /// The one `hello` fixture of tests and benchmarks: host `name` (id `id`, linux on
    /// x86_64) with `capacity` runners, speaking `version`, with one target `ht` on
    /// `octo/app` at `https://api.github.com` and one profile `p` on it carrying
    /// `labels`, at most 10 runners. Callers change the fields they care about.
    #[doc(hidden)]
    pub fn fixture(id: &str, name: &str, version: u32, capacity: u32, labels: &[&str]) -> Hello {
        Hello {
            version,
            host: HostInfo {
                id: id.into(),
                name: name.into(),
                os: "linux".into(),
                arch: "x86_64".into(),
                capacity,
                binary_version: None,
            },
            targets: vec![TargetInfo {
                name: "ht".into(),
                scope: "octo/app".into(),
                api_url: "https://api.github.com".into(),
            }],
            profiles: vec![ProfileInfo {
                name: "p".into(),
                target: "ht".into(),
                labels: labels.iter().map(|l| l.to_string()).collect(),
                max: 10,
            }],
            features: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchAck {
    pub lease_id: String,
    pub accepted: bool,
    /// A refusal's reason (`Refusal::as_str`), kept as the word the host sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptStarted {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_id: Option<String>,
    pub runner_name: String,
    pub target: String,
    pub profile: String,
}

/// What the meter measured over an attempt's life.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageInfo {
    pub peak_rss_bytes: u64,
    pub cpu_secs: f64,
    pub samples: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptFinished {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_id: Option<String>,
    pub runner_name: String,
    /// `completed_job`, `exited_idle_without_work`, `failed`, `orphaned`.
    pub outcome: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_secs: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<UsageInfo>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// Runners the host could still start now (capacity less live runners).
    pub free: u32,
    pub draining: bool,
    /// Profiles the host found unfit (e.g. a broken runner install).
    #[serde(default)]
    pub unfit: Vec<String>,
    /// Each pool profile's live runners added up, as the host's meters read them
    /// (absent from hosts before meters were reported; a coordinator that does not
    /// know the field ignores it).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub meters: BTreeMap<String, ProfileMeters>,
    /// Daily usage roll-up rows changed since the coordinator's `usage_after`, at most
    /// [`MAX_USAGE_ROWS`] and [`USAGE_BYTES`] (`usage`), sent only to a coordinator
    /// that asked; absent from older hosts, ignored by older coordinators.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub usage: Vec<UsageReport>,
    /// The host's roll-up sequence number of the last row in `usage`: the
    /// coordinator keeps it and answers it as `usage_after` when the host says hello
    /// again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_upto: Option<i64>,
    /// What each of the host's targets last learned of its credential's limits
    /// (at most [`MAX_TARGETS`]), so that the coordinator spends the credential as
    /// one budget (`placement::credit`). Absent from older hosts; ignored by older
    /// coordinators.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub limits: Vec<LimitReport>,
}

/// One host target's credential as GitHub last described it to that host. GitHub's
/// limits belong to the credential, so every host's report speaks for the whole pool.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitReport {
    /// The host's target name.
    pub target: String,
    /// Unix milliseconds: GitHub asked the credential to send nothing before then (a
    /// `retry-after`, or the hourly budget spent until its reset); 0 when not held.
    #[serde(default)]
    pub held_until: i64,
    /// `x-ratelimit-remaining` and `x-ratelimit-reset` (unix milliseconds) of the
    /// last answer: the credential's hourly budget, every host's spending included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remaining: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reset: Option<i64>,
    /// Secondary limits GitHub answered this host's clients of the credential.
    #[serde(default)]
    pub secondary_hits: u64,
    /// The target's `secondary_limit`, points a minute per endpoint (0: off, none
    /// on that GitHub); absent: GitHub's 900.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub points_limit: Option<u32>,
}

/// A `status` frame's per-profile meters: `meter::ProfileMeters`, which lives below
/// both this module and the coordinator's store that keeps it.
pub use crate::meter::ProfileMeters;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HelloAck {
    pub version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconcile_interval_secs: Option<u64>,
    /// The host's target names the coordinator covers (empty for a version-2 host).
    #[serde(default)]
    pub covered: Vec<String>,
    /// The coordinator takes the host's usage rows: those of its roll-up sequence
    /// numbers after this one (0: none kept yet, so the last [`USAGE_DAYS`] days).
    /// Absent from an older coordinator: the host sends none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_after: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchFrame {
    /// The host's target name.
    pub target: String,
    pub profile: String,
    pub job_key: String,
    pub lease_id: String,
    /// RFC 3339, on the coordinator's clock: informative only, the host measures
    /// `ttl_secs` on its own clock.
    pub expires_at: String,
    pub ttl_secs: u64,
}

impl LaunchFrame {
    /// The launch book's view of this frame.
    pub fn to_launch(&self) -> launch_book::Launch {
        launch_book::Launch {
            target: self.target.clone(),
            profile: self.profile.clone(),
            job_key: self.job_key.clone(),
            lease_id: self.lease_id.clone(),
            ttl_secs: self.ttl_secs,
        }
    }
}

/// Frames a host sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum HostMsg {
    Hello(Hello),
    LaunchAck(LaunchAck),
    AttemptStarted(AttemptStarted),
    AttemptFinished(AttemptFinished),
    Status(Status),
}

/// Frames the coordinator sends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum CoordMsg {
    HelloAck(HelloAck),
    Launch(LaunchFrame),
    CancelLaunch {
        lease_id: String,
    },
    /// Whose job some of the host's runners took, as the coordinator's queue read
    /// saw it; only to a host whose `hello` names [`FEATURE_OWNERS`].
    Owners(Owners),
}

/// Whether a host speaking `version` may be sent launches.
pub fn is_directable(version: u32) -> bool {
    version >= VERSION
}

/// The version the coordinator answers a host's `hello` with: ours, or the host's
/// when it is older (then the host is never directed). `None`: too old to stay.
pub fn negotiate(host_version: u32) -> Option<u32> {
    (host_version >= MIN_VERSION).then(|| host_version.min(VERSION))
}

/// The host's side of the same rule: whether it stays with a coordinator whose
/// `hello_ack` says `answered`. A coordinator answers our version or an older one it
/// shares with us; one below [`MIN_VERSION`] (or above ours, which no coordinator
/// answers) is a coordinator this build cannot speak with, and the error says so,
/// naming both sides' versions, so an upgrade that left a mix is plain in the log and
/// in `status`.
pub fn host_accepts(answered: u32) -> Result<(), String> {
    if (MIN_VERSION..=VERSION).contains(&answered) {
        return Ok(());
    }
    Err(format!(
        "the coordinator speaks protocol version {answered}; this host speaks {MIN_VERSION}-{VERSION}: \
         upgrade the older side (docs/pools.md, \"Upgrading a pool host by host\")"
    ))
}

#[cfg(test)]
mod tests;
