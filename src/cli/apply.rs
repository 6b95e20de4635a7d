//! `apply FILE` and `export`: the host described in one file (`config_file`).

use super::output::Out;
use super::parse::Invocation;
use super::spec::opts;
use super::{CliError, CliResult, setting_risks, warn};
use crate::config_file::{self, Options};
use crate::domain::Invalid;
use crate::store::{SqliteStore, Store};
use serde_json::json;
use std::io::Read as _;
use std::path::Path;

/// The file's text: FILE, or stdin for `-`.
fn read(file: &str) -> Result<String, CliError> {
    let mut text = String::new();
    let limit = crate::domain::describe::MAX_FILE_BYTES as u64 + 1;
    let read = if file == "-" {
        std::io::stdin()
            .take(limit)
            .read_to_string(&mut text)
            .map(drop)
    } else {
        config_file::read_bounded(Path::new(file)).map(|t| text = t)
    };
    read.map_err(|e| CliError::Invalid(Invalid::new("FILE", format!("cannot read {file}: {e}"))))?;
    Ok(text)
}

pub fn apply(inv: &Invocation, store: &SqliteStore, dir: &Path, out: &mut Out) -> CliResult {
    let file = &inv.positionals[0];
    let text = read(file)?;
    // The risks `host set` and `profile set` refuse or warn of, for the same keys.
    let d = crate::domain::describe::parse(&text)?;
    let kvs: Vec<String> = d
        .host
        .iter()
        .chain(d.profiles.values().flatten())
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let warnings = setting_risks(&kvs)?;
    let options = Options {
        dry_run: inv.flag(&opts::apply::DRY_RUN),
        prune: inv.flag(&opts::apply::PRUNE),
    };
    let probe = crate::facts::host_probe::Probe {
        state_dir: dir.to_path_buf(),
    };
    let source = if file == "-" {
        "-".to_string()
    } else {
        std::fs::canonicalize(file)
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| file.clone())
    };
    let o = config_file::apply(
        store,
        &text,
        &source,
        options,
        &probe,
        crate::timefmt::now_millis(),
    )?;
    let n = o.lines.len() - o.plan.kept.len();
    out.emit(
        || {
            let mut s: String = o.lines.iter().map(|l| format!("{l}\n")).collect();
            s.push_str(&match (options.dry_run, n) {
                (_, 0) => format!("no change: the store is as {file} says\n"),
                (true, n) => format!("dry run: {n} to change, nothing written\n"),
                (false, n) => format!("applied {file}: {n} changed\n"),
            });
            s
        },
        || {
            json!({
                "dry_run": options.dry_run,
                "written": o.written,
                "changes": o.lines[..n],
                "kept": o.plan.kept.iter().map(|(what, name)| json!({"kind": what, "name": name})).collect::<Vec<_>>(),
            })
        },
    );
    if !options.dry_run {
        warn(&warnings);
    }
    Ok(())
}

pub fn export(store: &dyn Store, out: &mut Out) -> CliResult {
    let text = config_file::export(store)?;
    out.emit(
        || text.clone(),
        || {
            text.parse::<toml::Table>()
                .ok()
                .and_then(|t| serde_json::to_value(t).ok())
                .unwrap_or_default()
        },
    );
    Ok(())
}
