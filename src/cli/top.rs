//! `top`: hands the open store and the state directory to the terminal UI.

use super::{CliError, CliResult};
use crate::store::Store;
use crate::tui::{self, Ending, TuiError};
use std::path::Path;

/// `q` is exit 0; Ctrl-C, a signal or a terminal that went away is the exit-code
/// table's `interrupted`, as the demo's `top` is.
pub fn top(store: &dyn Store, dir: &Path) -> CliResult {
    match tui::run(store, dir) {
        Ok(Ending::Quit) => Ok(()),
        Ok(ending) => Err(CliError::Interrupted(format!("top: {}", ending.describe()))),
        Err(TuiError::Store(e)) => Err(CliError::Store(e)),
        Err(e @ TuiError::NotATerminal) => Err(CliError::Usage(e.to_string())),
        Err(e) => Err(CliError::Failed(e.to_string())),
    }
}
