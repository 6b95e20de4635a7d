//! Why an attempt's life ended, or what our own deregistration intends: one
//! [`ReasonKind`] per cause and an optional detail (an exit code, a job's result, an
//! error message).
//!
//! Code branches on the kind, metrics label by its bounded word ([`Reason::as_str`]),
//! and people read [`Reason`]'s `Display`. That text is also what the store keeps, in
//! the form older builds wrote, so stores and scripts reading `--json` see no change;
//! [`Reason::parse`] reads it back and never fails: text this build does not know (an
//! older or a newer build's) is [`ReasonKind::Other`], shown exactly as written.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// One cause. Each is written as its word, then its detail in the kind's [`Form`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReasonKind {
    /// The runner reported its job's completion (`job Succeeded`), or exited 0 while
    /// busy without the line (`job ended (exit 0)`).
    Job,
    /// Deregistered after idling past `idle_timeout` beyond demand.
    IdleTimeout,
    /// Deregistered because the host or profile drains (or is paused).
    Drain,
    /// Deregistered by us with no intent on record (GitHub answered 204/404).
    Deregistered,
    /// The runner said its registration no longer exists.
    NoLongerExists,
    /// Listening, but GitHub's list no longer has it: it can never get a job.
    RegistrationVanished,
    /// No process (or another process under its pid).
    ProcessGone,
    /// The runner reported another session for it (exit code 5 says the same).
    SessionConflict,
    /// The runner's version may no longer take jobs (exit code 7).
    VersionDeprecated,
    /// The runner exited to update itself (exit codes 3 and 4).
    RunnerUpdating,
    /// Exited before it was listening.
    CrashedAtStart,
    /// Exited 0 while idle with no intent of ours on record.
    ExitedIdle,
    /// Exited non-zero while idle.
    ExitedWhileIdle,
    /// Exited non-zero while busy.
    ExitedDuringJob,
    /// Never reached `idle` within `bootstrap_timeout`.
    BootstrapTimeout,
    /// Busy past `job_timeout`.
    JobTimeout,
    /// Its memory limit killed something in it.
    Oom,
    /// Readying it on the host failed (identity, cgroup, root), before any JIT call.
    Host,
    /// Its profile's runner group could not be resolved, before any JIT call.
    RunnerGroup,
    /// GitHub (or the scale set) refused its JIT config.
    JitConfig,
    /// Spawning the runner process failed.
    Spawn,
    /// Its start was never tried (the daemon stopped, the profile was held, no client).
    NotStarted,
    /// Found without its runner after the daemon was down.
    Orphaned,
    /// Text this build does not know; the detail is that text, shown as it is.
    Other,
}

/// Every kind, for lookups by word.
pub const ALL_KINDS: [ReasonKind; 24] = [
    ReasonKind::Job,
    ReasonKind::IdleTimeout,
    ReasonKind::Drain,
    ReasonKind::Deregistered,
    ReasonKind::NoLongerExists,
    ReasonKind::RegistrationVanished,
    ReasonKind::ProcessGone,
    ReasonKind::SessionConflict,
    ReasonKind::VersionDeprecated,
    ReasonKind::RunnerUpdating,
    ReasonKind::CrashedAtStart,
    ReasonKind::ExitedIdle,
    ReasonKind::ExitedWhileIdle,
    ReasonKind::ExitedDuringJob,
    ReasonKind::BootstrapTimeout,
    ReasonKind::JobTimeout,
    ReasonKind::Oom,
    ReasonKind::Host,
    ReasonKind::RunnerGroup,
    ReasonKind::JitConfig,
    ReasonKind::Spawn,
    ReasonKind::NotStarted,
    ReasonKind::Orphaned,
    ReasonKind::Other,
];

/// How a kind writes its detail after its word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// `word (exit N)`: the runner's exit code, when one was seen.
    Exit,
    /// `word: message`: what went wrong, in the failing step's words.
    Message,
    /// `job RESULT`: the job's result as the runner printed it.
    Job,
    /// The detail is the whole text.
    Other,
}

impl ReasonKind {
    /// The bounded word: the first word of the text, and the `reason` label of
    /// `runner_manager_runner_failures_total`.
    pub fn as_str(self) -> &'static str {
        match self {
            ReasonKind::Job => "job",
            ReasonKind::IdleTimeout => "idle_timeout",
            ReasonKind::Drain => "drain",
            ReasonKind::Deregistered => "deregistered",
            ReasonKind::NoLongerExists => "no_longer_exists",
            ReasonKind::RegistrationVanished => "registration_vanished",
            ReasonKind::ProcessGone => "process_gone",
            ReasonKind::SessionConflict => "session_conflict",
            ReasonKind::VersionDeprecated => "version_deprecated",
            ReasonKind::RunnerUpdating => "runner_updating",
            ReasonKind::CrashedAtStart => "crashed_at_start",
            ReasonKind::ExitedIdle => "exited_idle",
            ReasonKind::ExitedWhileIdle => "exited_while_idle",
            ReasonKind::ExitedDuringJob => "exited_during_job",
            ReasonKind::BootstrapTimeout => "bootstrap_timeout",
            ReasonKind::JobTimeout => "job_timeout",
            ReasonKind::Oom => "oom",
            ReasonKind::Host => "host",
            ReasonKind::RunnerGroup => "runner_group",
            ReasonKind::JitConfig => "jit_config",
            ReasonKind::Spawn => "spawn",
            ReasonKind::NotStarted => "not_started",
            ReasonKind::Orphaned => "orphaned",
            ReasonKind::Other => "other",
        }
    }

    /// How its detail is written. A kind that never carries an exit code is `Exit` all
    /// the same, so that one grammar covers every plain word.
    pub fn form(self) -> Form {
        match self {
            ReasonKind::Job => Form::Job,
            ReasonKind::Host
            | ReasonKind::RunnerGroup
            | ReasonKind::JitConfig
            | ReasonKind::Spawn
            | ReasonKind::NotStarted
            | ReasonKind::Orphaned => Form::Message,
            ReasonKind::Other => Form::Other,
            _ => Form::Exit,
        }
    }

    /// The kind written as `word`, if this build knows it (never `Other`).
    fn from_word(word: &str) -> Option<ReasonKind> {
        ALL_KINDS
            .into_iter()
            .find(|k| *k != ReasonKind::Other && k.as_str() == word)
    }
}

impl fmt::Display for ReasonKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A kind and its detail. Built only through the constructors below, each of which
/// gives the detail its kind's [`Form`], so that `Reason::parse(&r.to_string()) == r`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Reason {
    kind: ReasonKind,
    detail: Option<String>,
}

impl Reason {
    /// The kind alone: written as its word.
    pub fn new(kind: ReasonKind) -> Reason {
        Reason { kind, detail: None }
    }

    /// A kind of [`Form::Exit`] with the runner's exit code: `exited_during_job (exit 3)`.
    pub fn exit(kind: ReasonKind, code: i32) -> Reason {
        debug_assert_eq!(kind.form(), Form::Exit, "{kind} takes no exit code");
        Reason {
            kind,
            detail: Some(code.to_string()),
        }
    }

    /// A kind of [`Form::Message`] with what went wrong: `jit_config: 422 ...`.
    pub fn message(kind: ReasonKind, message: impl Into<String>) -> Reason {
        debug_assert_eq!(kind.form(), Form::Message, "{kind} takes no message");
        Reason {
            kind,
            detail: Some(message.into()),
        }
    }

    /// A job's end, with its result as the runner printed it: `job Succeeded`.
    pub fn job(result: impl Into<String>) -> Reason {
        Reason {
            kind: ReasonKind::Job,
            detail: Some(result.into()),
        }
    }

    pub fn kind(&self) -> ReasonKind {
        self.kind
    }

    /// The bounded word (see [`ReasonKind::as_str`]).
    pub fn as_str(&self) -> &'static str {
        self.kind.as_str()
    }

    /// The detail as written: an exit code's digits, a result, a message, or (for
    /// `Other`) the whole text.
    pub fn detail(&self) -> Option<&str> {
        self.detail.as_deref()
    }

    /// The runner's exit code, for the kinds that carry one.
    pub fn exit_code(&self) -> Option<i32> {
        match self.kind.form() {
            Form::Exit => self.detail.as_deref().and_then(|d| d.parse().ok()),
            _ => None,
        }
    }

    /// Reads the text the store keeps (see the module documentation). Never fails:
    /// text in no known form is `Other`, with the text as its detail, so a reason an
    /// older or newer build wrote is shown as it was and matches no decision.
    /// A reason from its kind's word and its detail as the store keeps them; `None`
    /// for a word this build does not know, or a detail its kind's form refuses (the
    /// caller falls back to the text).
    pub fn from_parts(word: &str, detail: Option<String>) -> Option<Reason> {
        let kind = ReasonKind::from_word(word)?;
        let ok = match (kind.form(), detail.as_deref()) {
            (_, None) => true,
            (Form::Exit, Some(d)) => d.parse::<i32>().is_ok_and(|c| c.to_string() == d),
            (Form::Message | Form::Job, Some(_)) => true,
            (Form::Other, Some(_)) => false,
        };
        ok.then_some(Reason { kind, detail })
    }

    pub fn parse(text: &str) -> Reason {
        Reason::known(text).unwrap_or_else(|| Reason {
            kind: ReasonKind::Other,
            detail: Some(text.to_string()),
        })
    }

    fn known(text: &str) -> Option<Reason> {
        // The word ends at the first space or colon: no word has either.
        let end = text.find([' ', ':']).unwrap_or(text.len());
        let (word, rest) = text.split_at(end);
        let kind = ReasonKind::from_word(word)?;
        if rest.is_empty() {
            return Some(Reason::new(kind));
        }
        let detail = match kind.form() {
            Form::Exit => {
                let code = rest.strip_prefix(" (exit ")?.strip_suffix(')')?;
                // Only the digits `exit` itself writes, so the text survives unchanged.
                code.parse::<i32>().ok().filter(|c| c.to_string() == code)?;
                code
            }
            Form::Message => rest.strip_prefix(": ")?,
            Form::Job => rest.strip_prefix(' ')?,
            Form::Other => return None,
        };
        Some(Reason {
            kind,
            detail: Some(detail.to_string()),
        })
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let word = self.kind.as_str();
        match (self.kind.form(), &self.detail) {
            (Form::Other, Some(text)) => f.write_str(text),
            (_, None) => f.write_str(word),
            (Form::Exit, Some(code)) => write!(f, "{word} (exit {code})"),
            (Form::Message, Some(message)) => write!(f, "{word}: {message}"),
            (Form::Job, Some(result)) => write!(f, "{word} {result}"),
        }
    }
}

// As text, the same as the store's, wherever an `Attempt` is serialized.
impl Serialize for Reason {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Reason {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Reason, D::Error> {
        Ok(Reason::parse(&String::deserialize(d)?))
    }
}

#[cfg(test)]
mod tests {
    use super::ReasonKind::*;
    use super::*;

    /// One reason of every kind, with the text the daemon writes for it.
    fn samples() -> Vec<(Reason, &'static str)> {
        vec![
            (Reason::job("Succeeded"), "job Succeeded"),
            (Reason::job("ended (exit 0)"), "job ended (exit 0)"),
            (Reason::new(IdleTimeout), "idle_timeout"),
            (Reason::new(Drain), "drain"),
            (Reason::new(Deregistered), "deregistered"),
            (Reason::new(NoLongerExists), "no_longer_exists"),
            (Reason::new(RegistrationVanished), "registration_vanished"),
            (Reason::new(ProcessGone), "process_gone"),
            (Reason::new(SessionConflict), "session_conflict"),
            (
                Reason::exit(SessionConflict, 5),
                "session_conflict (exit 5)",
            ),
            (Reason::new(VersionDeprecated), "version_deprecated"),
            (
                Reason::exit(VersionDeprecated, 7),
                "version_deprecated (exit 7)",
            ),
            (Reason::exit(RunnerUpdating, 3), "runner_updating (exit 3)"),
            (Reason::exit(CrashedAtStart, 1), "crashed_at_start (exit 1)"),
            (Reason::exit(ExitedIdle, 0), "exited_idle (exit 0)"),
            (
                Reason::exit(ExitedWhileIdle, 137),
                "exited_while_idle (exit 137)",
            ),
            (
                Reason::exit(ExitedDuringJob, -1),
                "exited_during_job (exit -1)",
            ),
            (Reason::new(BootstrapTimeout), "bootstrap_timeout"),
            (Reason::new(JobTimeout), "job_timeout"),
            (Reason::new(Oom), "oom"),
            (
                Reason::message(Host, "run_as: no such user"),
                "host: run_as: no such user",
            ),
            (
                Reason::message(RunnerGroup, "404 Not Found"),
                "runner_group: 404 Not Found",
            ),
            (
                Reason::message(JitConfig, "422 Validation failed"),
                "jit_config: 422 Validation failed",
            ),
            (
                Reason::message(Spawn, "No such file or directory (os error 2)"),
                "spawn: No such file or directory (os error 2)",
            ),
            (
                Reason::message(NotStarted, "no GitHub client"),
                "not_started: no GitHub client",
            ),
            (
                Reason::message(Orphaned, "no runner process after restart"),
                "orphaned: no runner process after restart",
            ),
        ]
    }

    #[test]
    fn every_kind_writes_its_text_and_reads_back() {
        for (r, text) in samples() {
            assert_eq!(r.to_string(), text);
            assert_eq!(Reason::parse(text), r, "{text}");
        }
        let covered: Vec<ReasonKind> = samples().iter().map(|(r, _)| r.kind()).collect();
        for k in ALL_KINDS.into_iter().filter(|k| *k != Other) {
            assert!(covered.contains(&k), "no sample of {k}");
            assert_eq!(Reason::new(k).to_string(), k.as_str());
            assert_eq!(Reason::parse(k.as_str()), Reason::new(k));
        }
    }

    #[test]
    fn a_reason_comes_back_from_its_parts_as_the_store_keeps_them() {
        for r in [
            Reason::exit(ReasonKind::ExitedDuringJob, 137),
            Reason::message(ReasonKind::JitConfig, "422: no"),
            Reason::job("Succeeded"),
            Reason::new(ReasonKind::Drain),
        ] {
            let back = Reason::from_parts(r.kind().as_str(), r.detail().map(str::to_string));
            assert_eq!(back, Some(r));
        }
        assert_eq!(Reason::from_parts("evicted", None), None, "an unknown word");
        assert_eq!(Reason::from_parts("other", Some("x".into())), None);
        let bad_code = Reason::from_parts("exited_during_job", Some("nine".into()));
        assert_eq!(bad_code, None);
    }

    #[test]
    fn the_bounded_word_is_the_kind_and_never_the_detail() {
        assert_eq!(Reason::job("Failed").as_str(), "job");
        assert_eq!(
            Reason::parse("jit_config: 422 Validation failed").as_str(),
            "jit_config"
        );
        assert_eq!(
            Reason::parse("exited_during_job (exit 3)").as_str(),
            "exited_during_job"
        );
        assert_eq!(Reason::parse("a newer build's words").as_str(), "other");
        assert_eq!(
            Reason::parse("exited_during_job (exit 3)").exit_code(),
            Some(3)
        );
        assert_eq!(Reason::parse("host: exit 3").exit_code(), None);
    }

    #[test]
    fn unknown_text_is_other_and_shown_unchanged() {
        for text in [
            "",
            "  ",
            "surplus",
            "a newer build's words: with a colon",
            "idle_timeout (after 300 s)",
            "drain:no space",
            "session_conflict (exit 05)",
            "session_conflict (exit x)",
            "crashed_at_start (exit 1",
            "oom killed",
            "other",
            "Drain",
            "\"quoted\" text",
        ] {
            let r = Reason::parse(text);
            assert_eq!(r.kind(), Other, "{text:?}");
            assert_eq!(r.detail(), Some(text));
            assert_eq!(r.to_string(), text, "shown as written");
            assert_eq!(Reason::parse(&r.to_string()), r);
        }
    }

    #[test]
    fn any_text_survives_a_read_and_a_write() {
        for text in [
            "job",
            "job ",
            "host: ",
            "not_started",
            "orphaned: the runner exited (exit 3) while the daemon was down",
            "job ended (exit 0)",
            "spawn: a: b: c",
        ] {
            assert_eq!(Reason::parse(text).to_string(), text);
            assert_ne!(Reason::parse(text).kind(), Other, "{text:?}");
        }
    }

    #[test]
    fn serializes_as_its_text() {
        let r = Reason::exit(ExitedDuringJob, 2);
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(json, "\"exited_during_job (exit 2)\"");
        assert_eq!(serde_json::from_str::<Reason>(&json).unwrap(), r);
        let odd: Reason = serde_json::from_str("\"from the future\"").unwrap();
        assert_eq!(odd.kind(), Other);
    }
}
