//! The runner's stdout and stderr lines, read as events: the pure parser the log
//! tailer feeds and the attempt watcher consumes.
//!
//! Formats are the ones `actions/runner` prints (see github-facts.md): an optional
//! `yyyy-MM-dd HH:mm:ssZ: ` prefix, `√ Connected to GitHub`, `Listening for Jobs`,
//! `Running job: NAME`, `Job NAME completed with result: RESULT`, and error lines on
//! stderr. Anything we do not recognise is `None`: a line we cannot read only costs
//! the cross-check with GitHub's runner list, never a wrong state.

/// The longest error line kept: the log file has the whole line, the event only needs
/// enough to explain a failure in `attempt show`.
pub const MAX_ERROR_LINE: usize = 200;

/// Longest job display name or result kept from a line (bounded like everything read
/// from outside).
pub const MAX_JOB_NAME: usize = 256;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunnerEvent {
    /// `√ Connected to GitHub` (may repeat on retries).
    Connected,
    /// `Listening for Jobs`: registered and idle.
    Listening,
    /// `Running job: NAME`: busy with the job of this display name.
    RunningJob { name: String },
    /// `Job NAME completed with result: RESULT`.
    JobCompleted { name: String, result: String },
    /// `The runner no longer exists on the server`: its registration was deleted; an
    /// idle runner exits 0 after this line (a normal recycle).
    NoLongerExists,
    /// `A session for this runner already exists.`
    SessionConflict,
    /// `Runner version vX is deprecated and cannot receive messages.`
    VersionDeprecated,
    /// Any other line that reports an error, trimmed to [`MAX_ERROR_LINE`] characters.
    Error { line: String },
}

/// Reads one line of runner output. `None` for lines that carry no event.
pub fn parse_line(line: &str) -> Option<RunnerEvent> {
    let line = strip_timestamp(line.trim_end_matches(['\r', '\n'])).trim();
    if line.is_empty() {
        return None;
    }
    // The check mark is `√` on Linux but may be another glyph (or none) depending on
    // the console encoding, so match on the words.
    if line.ends_with("Connected to GitHub") {
        return Some(RunnerEvent::Connected);
    }
    if line == "Listening for Jobs" {
        return Some(RunnerEvent::Listening);
    }
    if let Some(name) = line.strip_prefix("Running job: ") {
        return Some(RunnerEvent::RunningJob {
            name: bounded(name, MAX_JOB_NAME),
        });
    }
    if let Some(rest) = line.strip_prefix("Job ") {
        // The name may itself contain " completed with result: " only in theory; the
        // last occurrence is the runner's own words.
        if let Some(at) = rest.rfind(" completed with result: ") {
            let name = &rest[..at];
            let result = &rest[at + " completed with result: ".len()..];
            return Some(RunnerEvent::JobCompleted {
                name: bounded(name, MAX_JOB_NAME),
                result: bounded(result, MAX_JOB_NAME),
            });
        }
    }
    if line.contains("no longer exists") {
        return Some(RunnerEvent::NoLongerExists);
    }
    if line.contains("A session for this runner already exists") {
        return Some(RunnerEvent::SessionConflict);
    }
    if line.contains("is deprecated and cannot receive messages") {
        return Some(RunnerEvent::VersionDeprecated);
    }
    let lower = line.to_ascii_lowercase();
    if lower.contains("error") || lower.contains("exception") {
        return Some(RunnerEvent::Error {
            line: bounded(line, MAX_ERROR_LINE),
        });
    }
    None
}

/// Drops a `yyyy-MM-dd HH:mm:ssZ: ` prefix when the line has one.
fn strip_timestamp(line: &str) -> &str {
    let b = line.as_bytes();
    let shape = b"dddd-dd-dd dd:dd:ddZ: ";
    if b.len() < shape.len() {
        return line;
    }
    let fits = shape.iter().zip(b).all(|(s, c)| match s {
        b'd' => c.is_ascii_digit(),
        other => other == c,
    });
    if fits { &line[shape.len()..] } else { line }
}

/// At most `max` characters, cut on a character boundary.
fn bounded(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => s[..i].to_string(),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::RunnerEvent::*;
    use super::*;

    #[track_caller]
    fn check(line: &str, want: Option<RunnerEvent>) {
        assert_eq!(parse_line(line), want, "line {line:?}");
    }

    fn job(name: &str) -> Option<RunnerEvent> {
        Some(RunningJob { name: name.into() })
    }

    #[test]
    fn the_runners_own_lines() {
        check("√ Connected to GitHub", Some(Connected));
        check("Connected to GitHub", Some(Connected));
        check("", None);
        check("Current runner version: '2.336.0'", None);
        check("2026-11-30 10:00:00Z: Listening for Jobs", Some(Listening));
        check(
            "2026-11-30 10:00:00Z: Listening for Jobs\r\n",
            Some(Listening),
        );
        check("Listening for Jobs", Some(Listening));
        check(
            "2026-11-30 10:00:05Z: Running job: build (ubuntu)",
            job("build (ubuntu)"),
        );
        check("Running job: x", job("x"));
        check(
            "2026-11-30 10:01:05Z: Job build (ubuntu) completed with result: Succeeded",
            Some(JobCompleted {
                name: "build (ubuntu)".into(),
                result: "Succeeded".into(),
            }),
        );
        check(
            "Job a completed with result: b completed with result: Canceled",
            Some(JobCompleted {
                name: "a completed with result: b".into(),
                result: "Canceled".into(),
            }),
        );
        check(
            "The runner no longer exists on the server. Please reconfigure the runner.",
            Some(NoLongerExists),
        );
        check(
            "A session for this runner already exists.",
            Some(SessionConflict),
        );
        check(
            "An error occured: Runner version v2.330.0 is deprecated and cannot receive messages.",
            Some(VersionDeprecated),
        );
        check(
            "Runner connect error: The HTTP request timed out",
            Some(Error {
                line: "Runner connect error: The HTTP request timed out".into(),
            }),
        );
    }

    #[test]
    fn prefixes_that_are_not_timestamps_are_kept() {
        check("2026-11-30 10:00:00: Listening for Jobs", None);
        check("xxxx-11-30 10:00:00Z: Listening for Jobs", None);
        check("Listening for Jobs now", None);
        check("Job without the words", None);
    }

    #[test]
    fn long_lines_are_bounded_on_char_boundaries() {
        let long = format!("error {}", "é".repeat(500));
        match parse_line(&long) {
            Some(Error { line }) => assert_eq!(line.chars().count(), MAX_ERROR_LINE),
            other => panic!("{other:?}"),
        }
        match parse_line(&format!("Running job: {}", "ü".repeat(1000))) {
            Some(RunningJob { name }) => assert_eq!(name.chars().count(), MAX_JOB_NAME),
            other => panic!("{other:?}"),
        }
    }
}
