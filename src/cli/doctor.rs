//! `runner-manager doctor`: prints `doctor::run_checks` one line each; exits
//! `host-unfit` while a required check fails, else with the class of the first GitHub
//! error a target's line met, else `coordinator-unreachable` when the coordinator's
//! check failed, else 1 on any other failure (`doctor_failure`): each decided from the
//! lines' types (`Class`, `Cause`), never from their names or text.

use super::exit::Failure;
use super::parse::Invocation;
use super::{CliError, CliResult};
use crate::doctor::{self, Cause, CheckLine, Class, Status};
use std::path::Path;

pub fn run(inv: &Invocation, state_dir: &Path) -> CliResult {
    let lines = doctor::run_checks(&doctor::Options::for_state_dir(state_dir));
    if inv.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&doctor::to_json(&lines)).expect("JSON values print")
        );
    } else {
        print!("{}", doctor::render(&lines));
    }
    let failed = lines.iter().filter(|l| l.status == Status::Fail).count();
    let required = lines
        .iter()
        .filter(|l| l.status == Status::Fail && l.class == Class::Required)
        .count();
    let Some(class) = doctor_failure(&lines) else {
        return Ok(());
    };
    let message = failure_message(failed, required);
    // A GitHub error decides the class only where it is the class chosen: its remedy
    // then names the target.
    let github = lines
        .iter()
        .find_map(CheckLine::github_error)
        .filter(|(_, e)| Failure::of_github(e) == class);
    Err(match github {
        Some((target, e)) => CliError::github(target, e, message),
        None => CliError::classed(class, message),
    })
}

/// The closing line: how many checks failed and how many of them stop runners, in
/// words that agree with the counts (`1 check failed`, never `1 check(s)`).
fn failure_message(failed: usize, required: usize) -> String {
    let unfit = match required {
        0 => String::new(),
        1 if failed == 1 => " (required: the daemon starts no runner until it passes)".into(),
        1 => " (1 required: the daemon starts no runner until it passes)".into(),
        n => format!(" ({n} required: the daemon starts no runner until they pass)"),
    };
    format!(
        "{} failed{unfit}; see the hints above",
        crate::units::count(failed as u64, "check")
    )
}

/// The class of a doctor run: none when nothing failed; an unfit host while a
/// required check fails (that is what stops runners); else the class of the first
/// GitHub error a target's line met (`Failure::of_github`); else an unreachable
/// coordinator when its check failed; `other` for any other failure.
pub(crate) fn doctor_failure(lines: &[CheckLine]) -> Option<Failure> {
    let failed: Vec<&CheckLine> = lines.iter().filter(|l| l.status == Status::Fail).collect();
    if failed.is_empty() {
        None
    } else if failed.iter().any(|l| l.class == Class::Required) {
        Some(Failure::HostUnfit)
    } else if let Some((_, e)) = failed.iter().find_map(|l| l.github_error()) {
        Some(Failure::of_github(e))
    } else if failed
        .iter()
        .any(|l| l.cause == Some(Cause::CoordinatorUnreachable))
    {
        Some(Failure::CoordinatorUnreachable)
    } else {
        Some(Failure::Other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::github::GhError;

    /// A line as its check makes it: `tools:` and `disk` are required, a target's
    /// line carries its GitHub error, the coordinator's says it did not answer.
    fn line(name: &str, status: Status) -> CheckLine {
        let mut l = CheckLine::fail(name, "d", "h");
        l.status = status;
        if name == "disk" || name.starts_with("tools:") {
            l.class = Class::Required;
        }
        if name.starts_with("target ") {
            l.cause = Some(Cause::GitHub {
                target: "t".into(),
                error: GhError::Unauthorized { clock_hint: false },
            });
        }
        if name == "coordinator" {
            l.cause = Some(Cause::CoordinatorUnreachable);
        }
        l
    }

    #[test]
    fn a_required_failure_is_an_unfit_host_whatever_else_fails() {
        use Status::*;
        type Lines<'a> = &'a [(&'a str, Status)];
        let cases: [(Lines, Option<Failure>); 6] = [
            (&[("disk", Ok), ("systemd", Warn)], None),
            (&[("systemd", Fail), ("disk", Ok)], Some(Failure::Other)),
            (
                &[("coordinator", Fail), ("systemd", Fail)],
                Some(Failure::CoordinatorUnreachable),
            ),
            (
                &[("coordinator", Fail), ("tools:linux", Fail)],
                Some(Failure::HostUnfit),
            ),
            (&[("disk", Fail)], Some(Failure::HostUnfit)),
            (
                &[("coordinator", Fail), ("target t credentials", Fail)],
                Some(Failure::Credentials),
            ),
        ];
        for (lines, want) in cases {
            let lines: Vec<CheckLine> = lines.iter().map(|(n, s)| line(n, *s)).collect();
            assert_eq!(doctor_failure(&lines), want, "{lines:?}");
        }
    }

    /// Issue 38: `1 check(s) failed`. The words follow the counts.
    #[test]
    fn regression_38_failure_message_in_proper_plurals() {
        assert_eq!(failure_message(1, 0), "1 check failed; see the hints above");
        assert_eq!(
            failure_message(1, 1),
            "1 check failed (required: the daemon starts no runner until it passes); \
             see the hints above"
        );
        assert_eq!(
            failure_message(3, 1),
            "3 checks failed (1 required: the daemon starts no runner until it passes); \
             see the hints above"
        );
        assert_eq!(
            failure_message(3, 2),
            "3 checks failed (2 required: the daemon starts no runner until they pass); \
             see the hints above"
        );
    }
}
