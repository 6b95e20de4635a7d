//! `runner-manager doctor`: prints `doctor::run_checks` one line each, exit 1 on any
//! failure.

use super::parse::Invocation;
use super::{CliError, CliResult};
use crate::doctor::{self, Status};
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
        .filter(|l| l.status == Status::Fail && l.class == doctor::Class::Required)
        .count();
    if failed > 0 {
        let unfit = if required > 0 {
            format!(" ({required} required: the daemon starts no runner until they pass)")
        } else {
            String::new()
        };
        return Err(CliError::Failed(format!(
            "{failed} check{} failed{unfit}; see the hints above",
            if failed == 1 { "" } else { "s" }
        )));
    }
    Ok(())
}
