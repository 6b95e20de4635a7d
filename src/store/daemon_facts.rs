//! What the daemon keeps of itself in the store's key-value rows, for `status`, `top`
//! and `doctor` (which never ask the daemon), and what it is asked through them: every
//! such key is named here and nowhere else, each with its typed writer and reader.
//!
//! - its containment, decided at start: the isolation word and line, the cgroups'
//!   summary and what they enforce;
//! - the managed runner installs' last check ([`RunnerCheck`]);
//! - GitHub's runner list per target as last read ([`RunnersSeen`]);
//! - the caches' and kept workspaces' last measure ([`Measured`]);
//! - the webhook listener's own report ([`WebhookSeen`]) and its book's snapshot;
//! - its coordinator link: up or down, since when, the last error ([`LinkSeen`]);
//! - a handover request `update` leaves for it ([`HandoverRequest`]);
//! - each target's rate-limit hold, which a restarted daemon still honours
//!   ([`rate_limit_hold`]);
//! - each target's credential as the daemon sees it: refused, expiring, its file
//!   opened to others or owned by another user ([`CredentialSeen`]).
//! - the host id's last change ([`identity_change`]), by `host reidentify` or a daemon
//!   that started on another machine.
//! - the description file last applied (`apply`, `daemon --config`): where it was, its
//!   digest and text, so drift from it is seen without the file ([`Applied`]).
//!
//! The host settings kept beside the host row (`release_source`, the webhook's) are
//! read through `store::beside`, a serving coordinator's own row through
//! `SqliteStore::coord_serving`. A scale set listener's checkpoint rows are named by
//! `scaleset::listener` and kept through its `Checkpoint` trait.
//!
//! A row another build wrote in a form this one cannot read is read as absent.

use super::{Result, Store};
use crate::domain::RegisteredRunner;
use crate::runner::cgroup::Enforced;
use crate::runner::slots::Footprint;
use crate::timefmt::Millis;
use serde::{Deserialize, Serialize};

/// The containment: the one word (`uids`, `none`, `refused`) and the whole line.
const KV_ISOLATION: &str = "daemon:isolation";
const KV_CONTAINMENT: &str = "daemon:containment";
const KV_CGROUPS: &str = "daemon:cgroups";
/// What the daemon's cgroups enforce ([`Enforced`], as JSON): `doctor` judges
/// profiles' limits by the daemon's cgroup, not by its own.
const KV_ENFORCED: &str = "daemon:cgroups_enforced";
/// The newest runner release the downloads API listed for this machine.
const KV_NEWEST: &str = "runner:newest";
/// When the last runner check ended (milliseconds).
const KV_CHECKED_AT: &str = "runner:checked_at";
/// Why the last runner check failed (absent when all went well).
const KV_PROBLEM: &str = "runner:problem";
/// The versions the profiles' installs are at (comma-separated).
const KV_IN_USE: &str = "runner:in_use";
/// A target's runner list: this prefix and the target's name.
const KV_RUNNERS: &str = "runners:";
/// The caches' last measure ([`Measured`], JSON).
const KV_FOOTPRINT: &str = "caches:footprint";
/// The webhook listener's report ([`WebhookSeen`], JSON).
const KV_WEBHOOK_SEEN: &str = "webhook:seen";
/// The webhook book's snapshot, which a restarted daemon starts from.
const KV_WEBHOOK_BOOK: &str = "webhook:book";
/// A handover request: `<millis> <version>`.
const KV_HANDOVER: &str = "daemon:handover";
/// The coordinator link's state ([`LinkSeen`], JSON).
const KV_LINK: &str = "coordinator:link";
/// The host id's last change: when, from which id, and why (one line).
const KV_IDENTITY: &str = "host:identity";
/// The description file last applied ([`Applied`], JSON).
const KV_APPLIED: &str = "apply:last";

fn json<T: serde::de::DeserializeOwned>(store: &dyn Store, key: &str) -> Result<Option<T>> {
    Ok(store
        .kv_get(key)?
        .and_then(|t| serde_json::from_str(&t).ok()))
}

fn put_json<T: Serialize>(store: &dyn Store, key: &str, value: &T) -> Result<()> {
    store.kv_put(key, &serde_json::to_string(value).unwrap_or_default())
}

/// The containment as the daemon decided it at start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Containment {
    /// `uids`, `none` or `refused`.
    pub isolation: String,
    /// `InEffect::describe`'s line: the word, then why.
    pub line: String,
    /// `Cgroups::summary`'s line.
    pub cgroups: String,
    pub enforced: Enforced,
}

pub fn put_containment(store: &dyn Store, c: &Containment) -> Result<()> {
    store.kv_put(KV_ISOLATION, &c.isolation)?;
    store.kv_put(KV_CONTAINMENT, &c.line)?;
    store.kv_put(KV_CGROUPS, &c.cgroups)?;
    put_json(store, KV_ENFORCED, &c.enforced)
}

/// The isolation word the daemon last recorded; `None` before any daemon ran.
pub fn isolation(store: &dyn Store) -> Result<Option<String>> {
    store.kv_get(KV_ISOLATION)
}

/// The containment line the daemon last recorded.
pub fn containment_line(store: &dyn Store) -> Result<Option<String>> {
    store.kv_get(KV_CONTAINMENT)
}

/// The daemon's cgroup summary line, as `status` shows it.
pub fn cgroups_summary(store: &dyn Store) -> Result<Option<String>> {
    store.kv_get(KV_CGROUPS)
}

/// The daemon's cgroup summary and what its cgroups enforce, when both read.
pub fn cgroups(store: &dyn Store) -> Result<Option<(String, Enforced)>> {
    let Some(summary) = cgroups_summary(store)? else {
        return Ok(None);
    };
    Ok(json(store, KV_ENFORCED)?.map(|e| (summary, e)))
}

/// The runner installs as the daemon's last check saw them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunnerCheck {
    /// The distinct versions the profiles' installs are at, oldest first.
    pub in_use: Vec<String>,
    pub newest: Option<String>,
    pub checked_at: Option<Millis>,
    /// Why the last check failed, or what it could not do.
    pub problem: Option<String>,
}

pub fn runner_check(store: &dyn Store) -> Result<RunnerCheck> {
    Ok(RunnerCheck {
        in_use: store
            .kv_get(KV_IN_USE)?
            .map(|v| {
                v.split(',')
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default(),
        newest: store.kv_get(KV_NEWEST)?,
        checked_at: store.kv_get(KV_CHECKED_AT)?.and_then(|v| v.parse().ok()),
        problem: store.kv_get(KV_PROBLEM)?,
    })
}

pub fn put_runner_in_use(store: &dyn Store, versions: &[String]) -> Result<()> {
    store.kv_put(KV_IN_USE, &versions.join(","))
}

pub fn put_runner_newest(store: &dyn Store, version: &str) -> Result<()> {
    store.kv_put(KV_NEWEST, version)
}

/// A check ended at `at`, with its problem or none.
pub fn put_runner_checked(store: &dyn Store, at: Millis, problem: Option<&str>) -> Result<()> {
    store.kv_put(KV_CHECKED_AT, &at.to_string())?;
    match problem {
        Some(p) => store.kv_put(KV_PROBLEM, p),
        None => store.kv_delete(KV_PROBLEM),
    }
}

/// One target's runner list and when it was read: runner names and labels only, no
/// secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunnersSeen {
    pub at: Millis,
    pub runners: Vec<RegisteredRunner>,
}

/// Writes what a list read of `target` found at `at`, over the last.
pub fn publish_runners(
    store: &dyn Store,
    target: &str,
    runners: &[RegisteredRunner],
    at: Millis,
) -> Result<()> {
    let seen = RunnersSeen {
        at,
        runners: runners.to_vec(),
    };
    put_json(store, &format!("{KV_RUNNERS}{target}"), &seen)
}

/// What the daemon last published for `target`; `None` before its first list.
pub fn runners_seen(store: &dyn Store, target: &str) -> Result<Option<RunnersSeen>> {
    json(store, &format!("{KV_RUNNERS}{target}"))
}

/// What the hourly cache prune measured (after its removals), and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Measured {
    pub at: Millis,
    pub footprint: Footprint,
}

pub fn put_measured(store: &dyn Store, m: &Measured) -> Result<()> {
    put_json(store, KV_FOOTPRINT, m)
}

pub fn measured(store: &dyn Store) -> Result<Option<Measured>> {
    json(store, KV_FOOTPRINT)
}

/// What the webhook listener last wrote of itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookSeen {
    pub listen: String,
    pub since: Millis,
    pub last_delivery: Option<Millis>,
    /// When a delivery was last found lost while it listened (`HookBook::loss_seen`):
    /// for 10 minutes after, the run lists are read at every poll.
    #[serde(default)]
    pub last_loss: Option<Millis>,
    pub accepted: u64,
    pub rejected: u64,
    pub spared: u64,
    /// Set when the listener could not start (the reason).
    #[serde(default)]
    pub error: Option<String>,
}

impl WebhookSeen {
    /// The listener's last report; `None` without one (or one that does not read).
    pub fn read(store: &dyn Store) -> Option<WebhookSeen> {
        json(store, KV_WEBHOOK_SEEN).ok().flatten()
    }

    pub fn write(&self, store: &dyn Store) -> Result<()> {
        put_json(store, KV_WEBHOOK_SEEN, self)
    }

    /// One line for people: where it listens and the last delivery.
    pub fn describe(&self, now: Millis) -> String {
        if let Some(e) = &self.error {
            return format!("not listening: {e}");
        }
        let last = match self.last_delivery {
            Some(t) => format!("last delivery {} ago", crate::timefmt::age(now - t)),
            None => "no delivery yet".into(),
        };
        let loss = match self.last_loss {
            Some(t) => format!(
                "; a delivery found lost {} ago",
                crate::timefmt::age(now - t)
            ),
            None => String::new(),
        };
        format!(
            "listening on {} ({last}; {} accepted, {} rejected, {} jobs lists spared{loss})",
            self.listen, self.accepted, self.rejected, self.spared
        )
    }
}

/// The webhook book's snapshot (`HookBook::snapshot`'s text).
pub fn webhook_book(store: &dyn Store) -> Result<Option<String>> {
    store.kv_get(KV_WEBHOOK_BOOK)
}

pub fn put_webhook_book(store: &dyn Store, snapshot: &str) -> Result<()> {
    store.kv_put(KV_WEBHOOK_BOOK, snapshot)
}

/// No listener: neither its report nor its book is kept.
pub fn clear_webhook(store: &dyn Store) -> Result<()> {
    store.kv_delete(KV_WEBHOOK_SEEN)?;
    store.kv_delete(KV_WEBHOOK_BOOK)
}

/// The coordinator link as the daemon last wrote it: whether it is up, since when
/// it is up or down, and the last reason it was not (kept while it is up again, so
/// a flapping link shows why it went down).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkSeen {
    pub url: String,
    pub up: bool,
    pub since: Millis,
    pub last_error: Option<String>,
    pub last_error_at: Option<Millis>,
}

impl LinkSeen {
    /// The link's last report; `None` without one (a standalone host, or a daemon
    /// that has not started its link yet).
    pub fn read(store: &dyn Store) -> Option<LinkSeen> {
        json(store, KV_LINK).ok().flatten()
    }

    pub fn write(&self, store: &dyn Store) -> Result<()> {
        put_json(store, KV_LINK, self)
    }

    /// No link (the host is standalone): nothing of an old one is kept.
    pub fn clear(store: &dyn Store) -> Result<()> {
        store.kv_delete(KV_LINK)
    }
}

/// `update` replaced the binary with `version` at `at`: the daemon is to hand over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandoverRequest {
    pub at: Millis,
    pub version: String,
}

pub fn put_handover_request(store: &dyn Store, r: &HandoverRequest) -> Result<()> {
    store.kv_put(KV_HANDOVER, &format!("{} {}", r.at, r.version))
}

/// The request left in the store; an unreadable one is none.
pub fn handover_request(store: &dyn Store) -> Result<Option<HandoverRequest>> {
    Ok(store.kv_get(KV_HANDOVER)?.and_then(|v| {
        let (at, version) = v.split_once(' ')?;
        Some(HandoverRequest {
            at: at.parse().ok()?,
            version: version.to_string(),
        })
    }))
}

/// What the store keeps of `target` in its kv, to go with the target: the key of its
/// runner list, and the prefix of its times' keys (names hold no `:`).
pub(super) fn target_keys(target: &str) -> (String, String) {
    (format!("{KV_RUNNERS}{target}"), format!("target:{target}:"))
}

/// One of a target's times, kept under `target:NAME:WHAT`; unreadable is none.
fn target_time(store: &dyn Store, target: &str, what: &str) -> Result<Option<Millis>> {
    Ok(store
        .kv_get(&format!("target:{target}:{what}"))?
        .and_then(|v| v.parse().ok()))
}

fn put_target_time(store: &dyn Store, target: &str, what: &str, at: Millis) -> Result<()> {
    store.kv_put(&format!("target:{target}:{what}"), &at.to_string())
}

/// Until when GitHub holds `target`'s reads, as recorded.
pub fn rate_limit_hold(store: &dyn Store, target: &str) -> Result<Option<Millis>> {
    target_time(store, target, "rate_limit_hold_until")
}

pub fn put_rate_limit_hold(store: &dyn Store, target: &str, until: Millis) -> Result<()> {
    put_target_time(store, target, "rate_limit_hold_until", until)
}

/// When `target`'s in-progress run lists were last read (whichever daemon read them).
pub fn in_progress_read(store: &dyn Store, target: &str) -> Result<Option<Millis>> {
    target_time(store, target, "in_progress_read_at")
}

pub fn put_in_progress_read(store: &dyn Store, target: &str, at: Millis) -> Result<()> {
    put_target_time(store, target, "in_progress_read_at", at)
}

/// How long before its expiry a token is shown as expiring.
pub const EXPIRY_WARNING: Millis = 7 * 24 * 3_600_000;

/// A target's credential as the daemon sees it, for `status` and `top`: what is wrong
/// with it while it still serves (or no longer does). Empty when all is well.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CredentialSeen {
    /// GitHub refuses it (401) since then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused_since: Option<Millis>,
    /// Its file as a read would refuse it now (opened to group or others, owned by
    /// another user, gone), with the fix; the credential read before serves meanwhile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    /// When GitHub says the token expires (`github-authentication-token-expiration`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Millis>,
}

impl CredentialSeen {
    pub fn is_empty(&self) -> bool {
        *self == CredentialSeen::default()
    }

    /// What `status` shows at `now`; `None` when all is well (an expiry more than
    /// [`EXPIRY_WARNING`] away is well).
    pub fn describe(&self, now: Millis) -> Option<String> {
        let time = crate::timefmt::format_rfc3339;
        let mut parts = Vec::new();
        if let Some(since) = self.refused_since {
            parts.push(format!("refused (401) since {}", time(since)));
        }
        if let Some(p) = &self.problem {
            parts.push(p.clone());
        }
        match self.expires_at {
            Some(at) if at <= now => parts.push(format!(
                "expired at {}; put a new token in its file",
                time(at)
            )),
            Some(at) if at - now <= EXPIRY_WARNING => parts.push(format!(
                "expires at {}; put a new token in its file before then",
                time(at)
            )),
            _ => {}
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }

    fn key(target: &str) -> String {
        format!("target:{target}:credential")
    }

    pub fn read(store: &dyn Store, target: &str) -> Option<CredentialSeen> {
        json(store, &CredentialSeen::key(target)).ok().flatten()
    }

    pub fn write(&self, store: &dyn Store, target: &str) -> Result<()> {
        put_json(store, &CredentialSeen::key(target), self)
    }
}

/// Keeps the host id's last change, as one line `status` shows.
pub fn put_identity_change(store: &dyn Store, line: &str) -> Result<()> {
    store.kv_put(KV_IDENTITY, line)
}

/// The host id's last change, if it ever changed.
pub fn identity_change(store: &dyn Store) -> Result<Option<String>> {
    store.kv_get(KV_IDENTITY)
}

/// The description file last applied: its path as given (`-` for stdin), the SHA-256
/// of its text, when, and the text itself (references to secrets only, never one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    pub path: String,
    pub digest: String,
    pub at: Millis,
    pub text: String,
}

impl Applied {
    pub fn read(store: &dyn Store) -> Option<Applied> {
        json(store, KV_APPLIED).ok().flatten()
    }

    pub fn write(&self, store: &dyn Store) -> Result<()> {
        put_json(store, KV_APPLIED, self)
    }
}

#[cfg(test)]
#[path = "daemon_facts_tests.rs"]
mod tests;
