//! `runner-manager doctor`: prints `doctor::run_checks` one line each; exits
//! `host-unfit` while a required check fails, else with the class of the first GitHub
//! error a target's line met, else `coordinator-unreachable` when the coordinator's
//! check failed, else 1 on any other failure (`doctor_failure`).

use super::exit::Failure;
use super::parse::Invocation;
use super::{CliError, CliResult};
use crate::doctor::{self, CheckLine, Class, Status};
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
    let unfit = if required > 0 {
        format!(" ({required} required: the daemon starts no runner until they pass)")
    } else {
        String::new()
    };
    let message = format!(
        "{failed} check{} failed{unfit}; see the hints above",
        if failed == 1 { "" } else { "s" }
    );
    // A GitHub error decides the class only where it is the class chosen: its remedy
    // then names the target.
    let github = lines
        .iter()
        .filter(|l| l.status == Status::Fail)
        .find_map(|l| l.github.as_ref())
        .filter(|(_, e)| Failure::of_github(e) == class);
    Err(match github {
        Some((target, e)) => CliError::github(target, e, message),
        None => CliError::classed(class, message),
    })
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
    } else if let Some((_, e)) = failed.iter().find_map(|l| l.github.as_ref()) {
        Some(Failure::of_github(e))
    } else if failed.iter().any(|l| l.name == doctor::COORDINATOR_CHECK) {
        Some(Failure::CoordinatorUnreachable)
    } else {
        Some(Failure::Other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::github::GhError;

    fn line(name: &str, status: Status) -> CheckLine {
        let mut l = CheckLine::fail(name, "d", "h");
        l.status = status;
        l.class = doctor::class_of(name);
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
            let lines: Vec<CheckLine> = lines
                .iter()
                .map(|(n, s)| CheckLine {
                    github: n
                        .starts_with("target ")
                        .then(|| ("t".to_string(), GhError::Unauthorized { clock_hint: false })),
                    ..line(n, *s)
                })
                .collect();
            assert_eq!(doctor_failure(&lines), want, "{lines:?}");
        }
    }
}
