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
    if failed > 0 {
        return Err(CliError::Failed(format!(
            "{failed} check{} failed; see the hints above",
            if failed == 1 { "" } else { "s" }
        )));
    }
    Ok(())
}
