//! `top`: hands the open store and the state directory to the terminal UI.

use super::{CliError, CliResult};
use crate::store::Store;
use crate::tui::{self, TuiError};
use std::path::Path;

pub fn top(store: &dyn Store, dir: &Path) -> CliResult {
    tui::run(store, dir).map(drop).map_err(|e| match e {
        TuiError::Store(e) => CliError::Store(e),
        TuiError::NotATerminal => CliError::Usage(e.to_string()),
        e => CliError::Failed(e.to_string()),
    })
}
