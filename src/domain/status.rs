//! The words a pass reports for `status` and `top`: what limits a profile's starts
//! ([`Limit`]) and how a target runs ([`TargetMode`]). The allocator and the launch
//! book decide them (`reconcile` re-exports both); they live here because the store
//! keeps them, and `store` depends on `domain` only.
//!
//! They stay typed until the store writes their text (`Display`, the words `status
//! --json` has always shown). Read back, text this build does not know (an older or
//! newer build's) is [`Reported::Unrecognized`], shown as written, never an error.

use std::fmt;

/// Why a profile is not reconciled at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotReconciling {
    /// The profile is paused (`active = false`).
    Paused,
    /// The host is draining: start nothing, let busy runners finish.
    Draining,
    /// The daemon itself is stopping (SIGTERM): the same as draining for this run,
    /// but the host is not set to drain, so the next daemon starts runners again.
    Stopping,
    /// Something the profile needs is broken (credentials, runner directory...).
    Unfit(String),
}

/// What decided a profile's `to_start`: shown by `status`, `top` and in refusals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Limit {
    /// Everything queued is covered (or there is nothing queued).
    Demand,
    /// Covered, and the `min_capacity` floor outweighs the queued jobs.
    MinCapacity,
    /// The profile's own ceiling stops it.
    MaxCapacity,
    /// The host's capacity, shared across profiles, stops it.
    HostCapacity,
    /// Mode `monitor`: reads demand, starts nothing.
    MonitorOnly,
    NotReconciling(NotReconciling),
    /// The profile belongs to another host.
    ForeignHost,
    /// GitHub's rate limit (or a `retry-after`) holds the target until this time
    /// (unix ms): nothing is read or started before it, whatever the queue holds.
    RateLimited(i64),
    /// GitHub refuses the target's credential (401) since this time (unix ms): nothing
    /// starts until the credential changes (the token file is fixed, the target
    /// edited) or a call goes through. Never shown as a rate limit: waiting fixes
    /// nothing here.
    CredentialsRefused(i64),
    /// GitHub's per-minute points for JIT configs (its secondary rate limit) are spent
    /// for now: `waiting` starts wait their turn, the next fits at `next` (unix ms).
    Paced {
        waiting: u32,
        next: i64,
    },
}

/// What `Display` writes before a refused credential's time.
const REFUSED_WORDS: &str = "credentials_refused (401 since ";

/// What `Display` writes between a paced profile's count and its time.
const PACED_WORDS: &str = " starts wait for GitHub's per-minute limit (next at ";

/// The variants without data, for lookups by word.
const PLAIN_LIMITS: [Limit; 6] = [
    Limit::Demand,
    Limit::MinCapacity,
    Limit::MaxCapacity,
    Limit::HostCapacity,
    Limit::MonitorOnly,
    Limit::ForeignHost,
];

impl Limit {
    /// The design's word for it.
    pub fn as_str(&self) -> &'static str {
        match self {
            Limit::Demand => "demand",
            Limit::MinCapacity => "min_capacity",
            Limit::MaxCapacity => "max_capacity",
            Limit::HostCapacity => "host_capacity",
            Limit::MonitorOnly => "monitor_only",
            Limit::NotReconciling(_) => "not_reconciling",
            Limit::ForeignHost => "foreign_host",
            Limit::RateLimited(_) => "rate_limited",
            Limit::CredentialsRefused(_) => "credentials_refused",
            Limit::Paced { .. } => "paced",
        }
    }

    /// Whether the allocator may start runners for this profile at all.
    pub fn reconciles(&self) -> bool {
        matches!(
            self,
            Limit::Demand | Limit::MinCapacity | Limit::MaxCapacity | Limit::HostCapacity
        )
    }

    /// Reads what `Display` wrote; `None` for text in no form this build writes.
    pub fn parse(text: &str) -> Option<Limit> {
        if let Some(plain) = PLAIN_LIMITS.into_iter().find(|l| l.as_str() == text) {
            return Some(plain);
        }
        if let Some(until) = text.strip_prefix("rate_limited (until ") {
            let until = crate::timefmt::parse_rfc3339(until.strip_suffix(')')?)?;
            return Some(Limit::RateLimited(until));
        }
        if let Some(since) = text.strip_prefix(REFUSED_WORDS) {
            let since = crate::timefmt::parse_rfc3339(since.strip_suffix(')')?)?;
            return Some(Limit::CredentialsRefused(since));
        }
        if let Some(rest) = text.strip_prefix("paced: ") {
            let (waiting, next) = rest.split_once(PACED_WORDS)?;
            let next = crate::timefmt::parse_rfc3339(next.strip_suffix(')')?)?;
            return Some(Limit::Paced {
                waiting: waiting.parse().ok()?,
                next,
            });
        }
        let inner = text.strip_prefix("not_reconciling (")?.strip_suffix(')')?;
        Some(Limit::NotReconciling(match inner {
            "paused" => NotReconciling::Paused,
            "draining" => NotReconciling::Draining,
            "daemon stopping" => NotReconciling::Stopping,
            _ => NotReconciling::Unfit(inner.strip_prefix("unfit: ")?.to_string()),
        }))
    }
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Limit::NotReconciling(NotReconciling::Paused) => {
                f.write_str("not_reconciling (paused)")
            }
            Limit::NotReconciling(NotReconciling::Draining) => {
                f.write_str("not_reconciling (draining)")
            }
            Limit::NotReconciling(NotReconciling::Stopping) => {
                f.write_str("not_reconciling (daemon stopping)")
            }
            Limit::NotReconciling(NotReconciling::Unfit(why)) => {
                write!(f, "not_reconciling (unfit: {why})")
            }
            Limit::RateLimited(until) => write!(
                f,
                "rate_limited (until {})",
                crate::timefmt::format_rfc3339(*until)
            ),
            Limit::CredentialsRefused(since) => write!(
                f,
                "{REFUSED_WORDS}{})",
                crate::timefmt::format_rfc3339(*since)
            ),
            Limit::Paced { waiting, next } => write!(
                f,
                "paced: {waiting}{PACED_WORDS}{})",
                crate::timefmt::format_rfc3339(*next)
            ),
            other => f.write_str(other.as_str()),
        }
    }
}

/// How a target runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetMode {
    /// No coordinator configured: the host reads its own demand.
    Standalone,
    /// Link up (or down less than the grace), target covered: directed profiles'
    /// demand is the open launches.
    Coordinated,
    /// Configured, but the link has been down longer than the grace period: the host
    /// reads its own demand again.
    Fallback,
}

impl TargetMode {
    pub fn as_str(self) -> &'static str {
        match self {
            TargetMode::Standalone => "standalone",
            TargetMode::Coordinated => "coordinated",
            TargetMode::Fallback => "fallback",
        }
    }

    /// Reads [`TargetMode::as_str`]; `None` for any other word.
    pub fn parse(text: &str) -> Option<TargetMode> {
        [
            TargetMode::Standalone,
            TargetMode::Coordinated,
            TargetMode::Fallback,
        ]
        .into_iter()
        .find(|m| m.as_str() == text)
    }
}

impl fmt::Display for TargetMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a target's last error says of it, kept beside its words so that `service
/// status` and `--once` judge it without reading the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The daemon could not load the credential (a missing file, a bad key).
    CredentialsUnreadable,
    /// GitHub refused the credential, or what it may do (401, 403).
    CredentialsRefused,
    /// 404: the repository or organization, or the credential cannot see it.
    NotFound,
    RateLimited,
    /// A 5xx, a timeout, an answer that is not GitHub's.
    Unreachable,
    /// Cut short by a shutdown.
    Interrupted,
    Other,
}

impl ErrorKind {
    const ALL: [ErrorKind; 7] = [
        ErrorKind::CredentialsUnreadable,
        ErrorKind::CredentialsRefused,
        ErrorKind::NotFound,
        ErrorKind::RateLimited,
        ErrorKind::Unreachable,
        ErrorKind::Interrupted,
        ErrorKind::Other,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::CredentialsUnreadable => "credentials_unreadable",
            ErrorKind::CredentialsRefused => "credentials_refused",
            ErrorKind::NotFound => "not_found",
            ErrorKind::RateLimited => "rate_limited",
            ErrorKind::Unreachable => "unreachable",
            ErrorKind::Interrupted => "interrupted",
            ErrorKind::Other => "other",
        }
    }

    /// A stored word; one another build wrote that this one does not know is `Other`.
    pub fn parse(word: &str) -> ErrorKind {
        ErrorKind::ALL
            .into_iter()
            .find(|k| k.as_str() == word)
            .unwrap_or(ErrorKind::Other)
    }
}

/// A reported word as a reader gets it back from the store: one this build knows, or
/// the text another build wrote, kept so it can be shown as it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reported<T> {
    Known(T),
    Unrecognized(String),
}

impl<T> Reported<T> {
    /// `parse` the stored `text`, keeping text it does not know.
    pub fn read(text: String, parse: impl FnOnce(&str) -> Option<T>) -> Reported<T> {
        match parse(&text) {
            Some(v) => Reported::Known(v),
            None => Reported::Unrecognized(text),
        }
    }

    /// The value, when this build knows it.
    pub fn known(&self) -> Option<&T> {
        match self {
            Reported::Known(v) => Some(v),
            Reported::Unrecognized(_) => None,
        }
    }
}

/// A known default: what a row built in code, not read, starts from.
impl<T: Default> Default for Reported<T> {
    fn default() -> Reported<T> {
        Reported::Known(T::default())
    }
}

impl<T> From<T> for Reported<T> {
    fn from(v: T) -> Reported<T> {
        Reported::Known(v)
    }
}

impl<T: fmt::Display> fmt::Display for Reported<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reported::Known(v) => v.fmt(f),
            Reported::Unrecognized(text) => f.write_str(text),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_limit_writes_its_words_and_reads_back() {
        let all = [
            (Limit::Demand, "demand"),
            (Limit::MinCapacity, "min_capacity"),
            (Limit::MaxCapacity, "max_capacity"),
            (Limit::HostCapacity, "host_capacity"),
            (Limit::MonitorOnly, "monitor_only"),
            (Limit::ForeignHost, "foreign_host"),
            (
                Limit::NotReconciling(NotReconciling::Paused),
                "not_reconciling (paused)",
            ),
            (
                Limit::NotReconciling(NotReconciling::Draining),
                "not_reconciling (draining)",
            ),
            (
                Limit::NotReconciling(NotReconciling::Stopping),
                "not_reconciling (daemon stopping)",
            ),
            (
                Limit::NotReconciling(NotReconciling::Unfit(
                    "starts held: host: run_as (retry at 10:00)".into(),
                )),
                "not_reconciling (unfit: starts held: host: run_as (retry at 10:00))",
            ),
            (
                Limit::RateLimited(1_796_130_303_000),
                "rate_limited (until 2026-12-01T13:05:03Z)",
            ),
            (
                Limit::CredentialsRefused(1_796_130_303_000),
                "credentials_refused (401 since 2026-12-01T13:05:03Z)",
            ),
            (
                Limit::Paced {
                    waiting: 37,
                    next: 1_796_130_303_000,
                },
                "paced: 37 starts wait for GitHub's per-minute limit (next at 2026-12-01T13:05:03Z)",
            ),
        ];
        for (limit, text) in all {
            assert_eq!(limit.to_string(), text);
            assert_eq!(Limit::parse(text), Some(limit.clone()), "{text}");
            assert_eq!(
                Reported::read(text.to_string(), Limit::parse),
                Reported::Known(limit)
            );
        }
    }

    #[test]
    fn every_mode_writes_its_word_and_reads_back() {
        for m in [
            TargetMode::Standalone,
            TargetMode::Coordinated,
            TargetMode::Fallback,
        ] {
            assert_eq!(TargetMode::parse(&m.to_string()), Some(m));
        }
    }

    #[test]
    fn unknown_words_are_kept_and_shown_as_written() {
        for text in [
            "",
            "queue_depth",
            "not_reconciling",
            "not_reconciling (asleep)",
            "not_reconciling (unfit: x",
            "Demand",
        ] {
            let r = Reported::read(text.to_string(), Limit::parse);
            assert_eq!(r, Reported::Unrecognized(text.to_string()));
            assert_eq!(r.to_string(), text);
            assert_eq!(r.known(), None);
        }
        let m = Reported::read("federated".to_string(), TargetMode::parse);
        assert_eq!(m.to_string(), "federated");
        assert_eq!(m.known(), None);
        let known: Reported<TargetMode> = TargetMode::Fallback.into();
        assert_eq!(known.known(), Some(&TargetMode::Fallback));
    }
}
