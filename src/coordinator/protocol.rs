//! The coordinator protocol, version 3: the JSON text frames hosts and the coordinator
//! exchange (`{"type": ..., ...}`), their bounds, and the version rules. Only this file
//! knows the wire format; both sides convert to and from these types at the edge. Every
//! string a host sends has its control characters escaped here, before the bounds are
//! checked, so nothing a host names reaches the store, a log or a terminal raw.

use crate::reconcile::launch_book::{self, Refusal};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

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
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchAck {
    pub lease_id: String,
    pub accepted: bool,
    /// A refusal's reason (`Refusal::as_str`); unknown words are kept as `other`.
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

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
}

/// A `status` frame's per-profile meters: `meter::ProfileMeters`, which lives below
/// both this module and the coordinator's store that keeps it.
pub use crate::meter::ProfileMeters;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HelloAck {
    pub version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconcile_interval_secs: Option<u64>,
    /// The host's target names the coordinator covers (empty for a version-2 host).
    #[serde(default)]
    pub covered: Vec<String>,
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
    CancelLaunch { lease_id: String },
}

const HOST_TYPES: &[&str] = &[
    "hello",
    "launch_ack",
    "attempt_started",
    "attempt_finished",
    "status",
];
const COORD_TYPES: &[&str] = &["hello_ack", "launch", "cancel_launch"];

/// Why a frame was not understood. `UnknownType` is logged and skipped (a newer peer
/// may send frames we do not know); the others mean the peer is broken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    /// Valid JSON with a `type` this side does not know.
    UnknownType(String),
    /// Larger than [`MAX_MESSAGE`].
    TooLarge(usize),
    /// Not JSON, no `type`, missing or mistyped fields, or a binary frame.
    Malformed(String),
    /// Well formed, but a count or a string is past its bound.
    OutOfBounds(String),
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::UnknownType(t) => {
                // The type came from the network: cut it so a log line stays short.
                let t: String = t.chars().take(40).collect();
                write!(f, "unknown frame type {t:?}, skipped")
            }
            FrameError::TooLarge(n) => {
                write!(f, "frame of {n} bytes is larger than {MAX_MESSAGE}")
            }
            FrameError::Malformed(m) => write!(f, "malformed frame: {m}"),
            FrameError::OutOfBounds(m) => write!(f, "frame out of bounds: {m}"),
        }
    }
}

impl std::error::Error for FrameError {}

impl FrameError {
    /// Whether the connection may go on after this error.
    pub fn is_skippable(&self) -> bool {
        matches!(self, FrameError::UnknownType(_))
    }
}

fn decode<T: serde::de::DeserializeOwned>(text: &str, known: &[&str]) -> Result<T, FrameError> {
    if text.len() > MAX_MESSAGE {
        return Err(FrameError::TooLarge(text.len()));
    }
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| FrameError::Malformed(e.to_string()))?;
    let ty = value
        .get("type")
        .and_then(|t| t.as_str())
        .ok_or_else(|| FrameError::Malformed("no \"type\" string".into()))?;
    if !known.contains(&ty) {
        return Err(FrameError::UnknownType(ty.to_string()));
    }
    serde_json::from_value(value).map_err(|e| FrameError::Malformed(e.to_string()))
}

fn encode<T: Serialize>(msg: &T) -> String {
    serde_json::to_string(msg).expect("protocol frames serialize")
}

impl HostMsg {
    /// Parses and checks a frame a host sent; its strings come back with their
    /// control characters escaped ([`escape_controls`]) and then bounded.
    pub fn decode(text: &str) -> Result<HostMsg, FrameError> {
        let mut m: HostMsg = decode(text, HOST_TYPES)?;
        m.escape_controls();
        m.check()?;
        Ok(m)
    }

    /// Escapes the control characters of every string field (see [`escape_controls`]).
    fn escape_controls(&mut self) {
        let each = |v: &mut Vec<String>| v.iter_mut().for_each(escape_controls);
        match self {
            HostMsg::Hello(h) => {
                let hh = &mut h.host;
                for s in [&mut hh.id, &mut hh.name, &mut hh.os, &mut hh.arch] {
                    escape_controls(s);
                }
                for t in &mut h.targets {
                    for s in [&mut t.name, &mut t.scope, &mut t.api_url] {
                        escape_controls(s);
                    }
                }
                for p in &mut h.profiles {
                    escape_controls(&mut p.name);
                    escape_controls(&mut p.target);
                    each(&mut p.labels);
                }
            }
            HostMsg::LaunchAck(a) => {
                escape_controls(&mut a.lease_id);
                a.reason.iter_mut().for_each(escape_controls);
            }
            HostMsg::AttemptStarted(s) => {
                s.lease_id.iter_mut().for_each(escape_controls);
                for f in [&mut s.runner_name, &mut s.target, &mut s.profile] {
                    escape_controls(f);
                }
            }
            HostMsg::AttemptFinished(f) => {
                f.lease_id.iter_mut().for_each(escape_controls);
                escape_controls(&mut f.runner_name);
                escape_controls(&mut f.outcome);
            }
            HostMsg::Status(s) => {
                each(&mut s.unfit);
                s.meters = std::mem::take(&mut s.meters)
                    .into_iter()
                    .map(|(mut k, v)| {
                        escape_controls(&mut k);
                        (k, v)
                    })
                    .collect();
            }
        }
    }

    pub fn encode(&self) -> String {
        encode(self)
    }

    /// The bounds: counts and string lengths.
    pub fn check(&self) -> Result<(), FrameError> {
        match self {
            HostMsg::Hello(h) => {
                let hh = &h.host;
                strs(&[&hh.id, &hh.name, &hh.os, &hh.arch])?;
                count("targets", h.targets.len(), MAX_TARGETS)?;
                count("profiles", h.profiles.len(), MAX_PROFILES)?;
                for t in &h.targets {
                    strs(&[&t.name, &t.scope, &t.api_url])?;
                }
                for p in &h.profiles {
                    strs(&[&p.name, &p.target])?;
                    labels(&p.labels)?;
                }
                Ok(())
            }
            HostMsg::LaunchAck(a) => {
                strs(&[&a.lease_id])?;
                opt(&a.reason)
            }
            HostMsg::AttemptStarted(s) => {
                opt(&s.lease_id)?;
                strs(&[&s.runner_name, &s.target, &s.profile])
            }
            HostMsg::AttemptFinished(f) => {
                opt(&f.lease_id)?;
                strs(&[&f.runner_name, &f.outcome])
            }
            HostMsg::Status(s) => {
                labels(&s.unfit)?;
                count("meters", s.meters.len(), MAX_PROFILES)?;
                let names: Vec<&String> = s.meters.keys().collect();
                strs(&names)
            }
        }
    }
}

impl CoordMsg {
    /// Parses and checks a frame the coordinator sent.
    pub fn decode(text: &str) -> Result<CoordMsg, FrameError> {
        let m: CoordMsg = decode(text, COORD_TYPES)?;
        m.check()?;
        Ok(m)
    }

    pub fn encode(&self) -> String {
        encode(self)
    }

    pub fn check(&self) -> Result<(), FrameError> {
        match self {
            CoordMsg::HelloAck(a) => {
                count("covered", a.covered.len(), MAX_TARGETS)?;
                let c: Vec<&String> = a.covered.iter().collect();
                strs(&c)
            }
            CoordMsg::Launch(l) => {
                strs(&[
                    &l.target,
                    &l.profile,
                    &l.job_key,
                    &l.lease_id,
                    &l.expires_at,
                ])?;
                if l.lease_id.is_empty() {
                    return Err(FrameError::OutOfBounds("empty lease_id".into()));
                }
                Ok(())
            }
            CoordMsg::CancelLaunch { lease_id } => strs(&[lease_id]),
        }
    }
}

/// Rewrites each control character (C0, DEL, C1: what moves a terminal's cursor,
/// clears its screen or sets its title) and each bidirectional control (U+202E and
/// the like, which make a line read otherwise than it is: issue 33) as `\u{HEX}`, as
/// the log writes them (`printable`). Real names, labels and reasons have none, so
/// they pass unchanged; an escaped string may then be past [`MAX_STR`], which refuses
/// the frame.
pub fn escape_controls(s: &mut String) {
    crate::printable::escape_in_place(s);
}

fn strs(fields: &[&String]) -> Result<(), FrameError> {
    match fields.iter().find(|s| s.len() > MAX_STR) {
        Some(s) => Err(FrameError::OutOfBounds(format!(
            "a string of {} bytes (at most {MAX_STR})",
            s.len()
        ))),
        None => Ok(()),
    }
}

fn opt(field: &Option<String>) -> Result<(), FrameError> {
    match field {
        Some(s) => strs(&[s]),
        None => Ok(()),
    }
}

fn count(what: &str, n: usize, max: usize) -> Result<(), FrameError> {
    if n > max {
        return Err(FrameError::OutOfBounds(format!(
            "{n} {what} (at most {max})"
        )));
    }
    Ok(())
}

fn labels(l: &[String]) -> Result<(), FrameError> {
    count("labels", l.len(), MAX_LABELS)?;
    let r: Vec<&String> = l.iter().collect();
    strs(&r)
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

/// A refusal's protocol word back to the launch book's reason; unknown words (a newer
/// host) count as `other`.
pub fn refusal_from_str(s: &str) -> Refusal {
    match s {
        "stale" => Refusal::Stale,
        "draining" => Refusal::Draining,
        "unfit" => Refusal::Unfit,
        "unknown_profile" => Refusal::UnknownProfile,
        "disabled" => Refusal::Disabled,
        "not_coordinated" => Refusal::NotCoordinated,
        "max_capacity" => Refusal::MaxCapacity,
        "host_capacity" => Refusal::HostCapacity,
        _ => Refusal::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello(version: u32) -> HostMsg {
        HostMsg::Hello(Hello::fixture(
            "0123456789abcdef",
            "h1",
            version,
            4,
            &["self-hosted", "rm-pool-linux"],
        ))
    }

    #[test]
    fn frames_round_trip_with_their_type_tag() {
        let msgs = vec![
            hello(3),
            HostMsg::LaunchAck(LaunchAck {
                lease_id: "l1".into(),
                accepted: false,
                reason: Some("draining".into()),
            }),
            HostMsg::AttemptStarted(AttemptStarted {
                lease_id: None,
                runner_name: "rm-01234567-1".into(),
                target: "t".into(),
                profile: "p".into(),
            }),
            HostMsg::AttemptFinished(AttemptFinished {
                lease_id: Some("l1".into()),
                runner_name: "rm-01234567-1".into(),
                outcome: "completed_job".into(),
                duration_secs: Some(3),
                usage: Some(UsageInfo {
                    peak_rss_bytes: 1 << 20,
                    cpu_secs: 1.5,
                    samples: 4,
                }),
            }),
            HostMsg::Status(Status {
                free: 2,
                draining: false,
                unfit: vec![],
                meters: Default::default(),
            }),
        ];
        for m in msgs {
            let text = m.encode();
            assert_eq!(HostMsg::decode(&text).unwrap(), m, "{text}");
        }
        let ack = HostMsg::LaunchAck(LaunchAck {
            lease_id: "l".into(),
            accepted: true,
            reason: None,
        })
        .encode();
        assert_eq!(
            ack,
            r#"{"type":"launch_ack","lease_id":"l","accepted":true}"#
        );
        let coord = vec![
            CoordMsg::HelloAck(HelloAck {
                version: 3,
                reconcile_interval_secs: Some(5),
                covered: vec!["t".into()],
            }),
            CoordMsg::Launch(LaunchFrame {
                target: "t".into(),
                profile: "p".into(),
                job_key: "42".into(),
                lease_id: "c-1".into(),
                expires_at: "2026-01-01T00:00:00Z".into(),
                ttl_secs: 60,
            }),
            CoordMsg::CancelLaunch {
                lease_id: "c-1".into(),
            },
        ];
        for m in coord {
            let text = m.encode();
            assert_eq!(CoordMsg::decode(&text).unwrap(), m, "{text}");
        }
        assert_eq!(
            CoordMsg::CancelLaunch {
                lease_id: "x".into()
            }
            .encode(),
            r#"{"type":"cancel_launch","lease_id":"x"}"#
        );
    }

    #[test]
    fn unknown_types_are_skippable_and_malformed_frames_are_not() {
        let e = HostMsg::decode(r#"{"type":"gossip","x":1}"#).unwrap_err();
        assert_eq!(e, FrameError::UnknownType("gossip".into()));
        assert!(e.is_skippable());
        // A coordinator frame type is unknown to the coordinator's own reader.
        assert!(matches!(
            HostMsg::decode(r#"{"type":"launch"}"#),
            Err(FrameError::UnknownType(_))
        ));
        for bad in [
            "",
            "not json",
            "[]",
            r#"{"lease_id":"x"}"#,
            r#"{"type":7}"#,
            r#"{"type":"launch_ack","lease_id":"x"}"#,
            r#"{"type":"status","free":-1,"draining":false}"#,
            r#"{"type":"hello","version":3}"#,
        ] {
            let e = HostMsg::decode(bad).unwrap_err();
            assert!(matches!(e, FrameError::Malformed(_)), "{bad}: {e:?}");
            assert!(!e.is_skippable());
        }
        assert!(matches!(
            CoordMsg::decode(r#"{"type":"launch","lease_id":"x"}"#),
            Err(FrameError::Malformed(_))
        ));
    }

    #[test]
    fn bounds_refuse_oversized_frames_counts_and_strings() {
        let big = format!(
            r#"{{"type":"status","free":1,"draining":false,"pad":"{}"}}"#,
            "x".repeat(MAX_MESSAGE)
        );
        assert!(matches!(
            HostMsg::decode(&big),
            Err(FrameError::TooLarge(_))
        ));
        let HostMsg::Hello(mut h) = hello(3) else {
            unreachable!()
        };
        h.profiles[0].labels = (0..=MAX_LABELS).map(|i| format!("l{i}")).collect();
        let text = HostMsg::Hello(h.clone()).encode();
        assert!(matches!(
            HostMsg::decode(&text),
            Err(FrameError::OutOfBounds(_))
        ));
        h.profiles[0].labels = vec!["x".repeat(MAX_STR + 1)];
        let text = HostMsg::Hello(h.clone()).encode();
        assert!(matches!(
            HostMsg::decode(&text),
            Err(FrameError::OutOfBounds(_))
        ));
        h.profiles = (0..=MAX_PROFILES)
            .map(|i| ProfileInfo {
                name: format!("p{i}"),
                target: "t".into(),
                labels: vec![],
                max: 1,
            })
            .collect();
        let text = HostMsg::Hello(h).encode();
        assert!(matches!(
            HostMsg::decode(&text),
            Err(FrameError::OutOfBounds(_))
        ));
        let launch = CoordMsg::Launch(LaunchFrame {
            target: "t".into(),
            profile: "p".into(),
            job_key: "1".into(),
            lease_id: "".into(),
            expires_at: "".into(),
            ttl_secs: 1,
        });
        assert!(matches!(
            CoordMsg::decode(&launch.encode()),
            Err(FrameError::OutOfBounds(_))
        ));
    }

    /// Issue 17, item 5: what a host names reaches no store or terminal raw.
    #[test]
    fn control_characters_a_host_sends_are_escaped_then_bounded() {
        let frame = r#"{"type":"hello","version":3,"host":{"id":"i","name":"h\u001b[2J",
            "os":"linux\u0007","arch":"x86_64\u009b31m","capacity":1},
            "targets":[{"name":"t\r","scope":"o/r","api_url":"https://x"}],
            "profiles":[{"name":"p\u001b]0;pwned\u0007","target":"t","labels":["a\n"],"max":1}]}"#;
        let Ok(HostMsg::Hello(h)) = HostMsg::decode(frame) else {
            panic!("decodes")
        };
        assert_eq!(h.host.name, "h\\u{1b}[2J");
        assert_eq!(h.host.os, "linux\\u{7}");
        assert_eq!(h.host.arch, "x86_64\\u{9b}31m");
        assert_eq!(h.targets[0].name, "t\\u{d}");
        assert_eq!(h.profiles[0].name, "p\\u{1b}]0;pwned\\u{7}");
        assert_eq!(h.profiles[0].labels, vec!["a\\u{a}".to_string()]);
        // Issue 33: bidirectional controls are escaped as well.
        let frame = r#"{"type":"hello","version":3,"host":{"id":"i","name":"gpu\u202e1-tsoh",
            "os":"linux","arch":"x86_64","capacity":1},"targets":[],"profiles":[]}"#;
        let Ok(HostMsg::Hello(h)) = HostMsg::decode(frame) else {
            panic!("decodes")
        };
        assert_eq!(h.host.name, "gpu\\u{202e}1-tsoh");
        let text = format!("{h:?}");
        assert!(!text.chars().any(char::is_control), "{text}");
        // Escaping may take a string past its bound: the frame is refused, not cut.
        let many = "\\u001b".repeat(MAX_STR / 2);
        let frame = format!(r#"{{"type":"status","free":1,"draining":false,"unfit":["{many}"]}}"#);
        assert!(matches!(
            HostMsg::decode(&frame),
            Err(FrameError::OutOfBounds(_))
        ));
        let r = r#"{"type":"launch_ack","lease_id":"l\u001b","accepted":false,"reason":"x\u0000"}"#;
        let Ok(HostMsg::LaunchAck(a)) = HostMsg::decode(r) else {
            panic!()
        };
        assert_eq!(
            (a.lease_id.as_str(), a.reason.as_deref()),
            ("l\\u{1b}", Some("x\\u{0}"))
        );
    }

    #[test]
    fn a_status_carries_bounded_per_profile_meters_and_old_frames_still_decode() {
        let mut meters = BTreeMap::new();
        meters.insert(
            "linux".to_string(),
            ProfileMeters {
                runners: 2,
                rss_bytes: 612 << 20,
                cpu_millis: 1200,
                cpu_percent: 35,
                processes: 9,
            },
        );
        let s = HostMsg::Status(Status {
            free: 1,
            draining: false,
            unfit: vec![],
            meters,
        });
        assert_eq!(HostMsg::decode(&s.encode()), Ok(s));
        // A host from before meters sends none: the frame is the same as ever.
        let old = r#"{"type":"status","free":1,"draining":false,"unfit":[]}"#;
        let Ok(HostMsg::Status(st)) = HostMsg::decode(old) else {
            panic!("decodes")
        };
        assert!(st.meters.is_empty());
        assert!(!HostMsg::Status(st).encode().contains("meters"));
        // A profile name with control characters is escaped; too many profiles refuse
        // the frame.
        let esc = r#"{"type":"status","free":1,"draining":false,"meters":{"p\u001b[2J":{"runners":1,"rss_bytes":1,"cpu_millis":1,"cpu_percent":1,"processes":1}}}"#;
        let Ok(HostMsg::Status(st)) = HostMsg::decode(esc) else {
            panic!("decodes")
        };
        assert!(st.meters.contains_key("p\\u{1b}[2J"));
        let many: Vec<String> = (0..=MAX_PROFILES)
            .map(|i| format!(r#""p{i}":{{"runners":0,"rss_bytes":0,"cpu_millis":0,"cpu_percent":0,"processes":0}}"#))
            .collect();
        let frame = format!(
            r#"{{"type":"status","free":1,"draining":false,"meters":{{{}}}}}"#,
            many.join(",")
        );
        assert!(matches!(
            HostMsg::decode(&frame),
            Err(FrameError::OutOfBounds(_))
        ));
    }

    #[test]
    fn versions() {
        assert_eq!(negotiate(3), Some(3));
        assert_eq!(negotiate(4), Some(3));
        assert_eq!(negotiate(2), Some(2));
        assert_eq!(negotiate(1), None);
        assert!(is_directable(3) && !is_directable(2));
        for r in [
            Refusal::Stale,
            Refusal::Draining,
            Refusal::Unfit,
            Refusal::UnknownProfile,
            Refusal::Disabled,
            Refusal::NotCoordinated,
            Refusal::MaxCapacity,
            Refusal::HostCapacity,
            Refusal::Other,
        ] {
            assert_eq!(refusal_from_str(r.as_str()), r);
        }
        assert_eq!(refusal_from_str("brand_new"), Refusal::Other);
    }
}
