//! Frames to and from text: the `type` tags each side knows, decoding and its `FrameError`, and the bounds and control-character escaping every host frame passes.

use super::{
    CoordMsg, HostMsg, MAX_FEATURES, MAX_LABELS, MAX_MESSAGE, MAX_PROFILES, MAX_STR, MAX_TARGETS,
};
use serde::Serialize;
use std::fmt;

const HOST_TYPES: &[&str] = &[
    "hello",
    "launch_ack",
    "attempt_started",
    "attempt_finished",
    "status",
];
const COORD_TYPES: &[&str] = &["hello_ack", "launch", "cancel_launch", "owners"];

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
                hh.binary_version.iter_mut().for_each(escape_controls);
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
                each(&mut h.features);
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
                s.escape_usage();
                s.meters = std::mem::take(&mut s.meters)
                    .into_iter()
                    .map(|(mut k, v)| {
                        escape_controls(&mut k);
                        (k, v)
                    })
                    .collect();
                for l in &mut s.limits {
                    escape_controls(&mut l.target);
                }
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
                opt(&hh.binary_version)?;
                count("targets", h.targets.len(), MAX_TARGETS)?;
                count("profiles", h.profiles.len(), MAX_PROFILES)?;
                for t in &h.targets {
                    strs(&[&t.name, &t.scope, &t.api_url])?;
                }
                for p in &h.profiles {
                    strs(&[&p.name, &p.target])?;
                    labels(&p.labels)?;
                }
                count("features", h.features.len(), MAX_FEATURES)?;
                let f: Vec<&String> = h.features.iter().collect();
                strs(&f)
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
                strs(&names)?;
                count("limits", s.limits.len(), MAX_TARGETS)?;
                let targets: Vec<&String> = s.limits.iter().map(|l| &l.target).collect();
                strs(&targets)?;
                s.check_usage()
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
            CoordMsg::Owners(o) => o.check(),
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
