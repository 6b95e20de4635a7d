//! `backup FILE`: a whole, consistent copy of the store, taken while the daemon runs
//! (`store::backup`), for the operator who would otherwise `cp` a live `state.db`.

use super::output::Out;
use super::parse::Invocation;
use super::{CliError, CliResult};
use crate::store::SqliteStore;
use crate::units;
use serde_json::json;
use std::path::Path;

pub fn run(inv: &Invocation, store: &SqliteStore, out: &mut Out) -> CliResult {
    let file = inv.positionals[0].as_str();
    let dest = Path::new(file);
    // Bad input changes nothing: refused before anything is written.
    if file.is_empty() {
        return Err(CliError::usage("FILE", "is empty: name the file to write"));
    }
    if std::fs::symlink_metadata(dest).is_ok() {
        return Err(CliError::usage(
            "FILE",
            &format!("{file} already exists: a backup never overwrites; name a new file"),
        ));
    }
    let parent = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !parent.is_dir() {
        return Err(CliError::usage(
            "FILE",
            &format!("{} is not a directory", parent.display()),
        ));
    }
    let done = store.backup_to(dest)?;
    out.emit(
        || {
            format!(
                "backed up the store to {file}: {}, {} attempts\n",
                units::bytes(done.bytes),
                done.attempts
            )
        },
        || json!({ "file": file, "bytes": done.bytes, "attempts": done.attempts }),
    );
    Ok(())
}
