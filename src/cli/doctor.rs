//! `runner-manager doctor`: prints `doctor::run_checks` one line each; exits
//! `host-unfit` while a required check fails, `coordinator-unreachable` when only the
//! coordinator's check and recommended ones fail and it is among them, 1 on any other
//! failure (`doctor_failure`).

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
    match doctor_failure(&lines) {
        None => Ok(()),
        Some(class) => {
            let unfit = if required > 0 {
                format!(" ({required} required: the daemon starts no runner until they pass)")
            } else {
                String::new()
            };
            Err(CliError::classed(
                class,
                format!(
                    "{failed} check{} failed{unfit}; see the hints above",
                    if failed == 1 { "" } else { "s" }
                ),
            ))
        }
    }
}

/// The class of a doctor run: none when nothing failed; an unfit host while a
/// required check fails (that is what stops runners); an unreachable coordinator when
/// its check failed; `other` for any other failure.
pub(crate) fn doctor_failure(lines: &[CheckLine]) -> Option<Failure> {
    let failed = |l: &&CheckLine| l.status == Status::Fail;
    if !lines.iter().any(|l| failed(&l)) {
        None
    } else if lines
        .iter()
        .filter(failed)
        .any(|l| l.class == Class::Required)
    {
        Some(Failure::HostUnfit)
    } else if lines
        .iter()
        .filter(failed)
        .any(|l| l.name == doctor::COORDINATOR_CHECK)
    {
        Some(Failure::CoordinatorUnreachable)
    } else {
        Some(Failure::Other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let cases: [(Lines, Option<Failure>); 5] = [
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
        ];
        for (lines, want) in cases {
            let lines: Vec<CheckLine> = lines.iter().map(|(n, s)| line(n, *s)).collect();
            assert_eq!(doctor_failure(&lines), want, "{lines:?}");
        }
    }
}
