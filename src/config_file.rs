//! A host's description file carried out on the store (`apply`, `export`, and
//! `daemon --config` following a file): planned by `domain::describe`, checked on the
//! disk (credential files, runner directories, the host's probe), then written through
//! each book's one edit path in one transaction, all or nothing. What was applied is
//! kept (`daemon_facts::Applied`), so drift from it is seen without the file.

use crate::domain::Invalid;
use crate::domain::describe::{self, Current, Plan, Step};
use crate::domain::profile::Change;
use crate::store::daemon_facts::Applied;
use crate::store::{EditError, HostProbe, SqliteStore, Store, StoreError};
use crate::timefmt::Millis;
use std::path::{Path, PathBuf};

/// How to apply.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Plan and say what would change; write nothing.
    pub dry_run: bool,
    /// Remove the targets and profiles the file does not name (a profile with live
    /// runners is refused by the store, and so the whole file).
    pub prune: bool,
}

/// What an apply did (or, dry, would do).
#[derive(Debug)]
pub struct Outcome {
    pub plan: Plan,
    /// `Plan::lines`: one per change, then what is kept.
    pub lines: Vec<String>,
    /// Whether anything was written (never on a dry run).
    pub written: bool,
}

/// The store's side of a plan.
pub fn current(store: &dyn Store) -> Result<Current, StoreError> {
    Ok(Current {
        host: crate::store::read_host_settings(store)?,
        targets: store.targets()?,
        profiles: store.profiles()?,
    })
}

/// The store as a description's text (`export`).
pub fn export(store: &dyn Store) -> Result<String, StoreError> {
    Ok(describe::render(&current(store)?))
}

fn digest(text: &str) -> String {
    ring::digest::digest(&ring::digest::SHA256, text.as_bytes())
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Applies the description `text` (read from `source`, a path or `-`) to `store`.
/// Every refusal (a key, a value, a rule, a file on the disk, an edit the store
/// refuses) names its place in the file and leaves the store as it was.
pub fn apply(
    store: &SqliteStore,
    text: &str,
    source: &str,
    opts: Options,
    probe: &dyn HostProbe,
    now: Millis,
) -> Result<Outcome, EditError> {
    store.host_or_create()?;
    let d = describe::parse(text)?;
    let cur = current(store)?;
    let plan = describe::plan(&d, &cur, opts.prune)?;
    let (os, arch) = (cur.host.host.os.clone(), cur.host.host.arch.clone());
    let lines = plan.lines(&os, &arch);
    if opts.dry_run {
        return Ok(Outcome {
            plan,
            lines,
            written: false,
        });
    }
    check_files(&plan)?;
    let record = Applied {
        path: source.to_string(),
        digest: digest(text),
        at: now,
        text: text.to_string(),
    };
    let recorded =
        Applied::read(store).is_some_and(|a| a.path == record.path && a.digest == record.digest);
    if plan.is_empty() && recorded {
        return Ok(Outcome {
            plan,
            lines,
            written: false,
        });
    }
    store.atomically(|s| -> Result<(), EditError> {
        if plan.host.is_some() {
            let pairs: Vec<(&str, &str)> = d
                .host
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            crate::store::edit_host(s, &pairs, probe).map_err(|e| placed(e, "host"))?;
        }
        let host = s.host_or_create()?;
        for step in &plan.profiles {
            if let Step::Remove(p) = step {
                s.remove_profile(&p.name)?;
            }
        }
        for step in &plan.targets {
            match step {
                Step::Add(t) => s.add_target(t)?,
                Step::Change { after, .. } => s.update_target(after)?,
                Step::Remove(_) => {}
            }
        }
        for step in &plan.profiles {
            match step {
                Step::Add(p) => {
                    let at = format!("profiles.{}.runner_dir", p.name);
                    crate::store::check_runner_dir(&at, p)?;
                    s.add_profile(p)?;
                }
                Step::Change { before, .. } => {
                    // The one edit path, with the file's settings in the plan's order.
                    let mut settings: Vec<&(String, String)> =
                        d.profiles[&before.name].iter().collect();
                    settings.sort_by_key(|(k, _)| k != "labels");
                    let changes: Vec<Change> = settings
                        .iter()
                        .map(|(k, v)| Change::Setting(format!("{k}={v}")))
                        .collect();
                    crate::store::edit_profile(
                        s,
                        &host,
                        &before.name,
                        &changes,
                        Some(before.revision),
                    )
                    .map_err(|e| placed(e, &format!("profiles.{}", before.name)))?;
                }
                Step::Remove(_) => {}
            }
        }
        for step in &plan.targets {
            if let Step::Remove(t) = step {
                s.remove_target(&t.name)?;
            }
        }
        record.write(s)?;
        Ok(())
    })?;
    Ok(Outcome {
        plan,
        lines,
        written: true,
    })
}

fn placed(e: EditError, at: &str) -> EditError {
    match e {
        EditError::Invalid(i) if !i.arg.starts_with(at) => {
            EditError::Invalid(Invalid::new(format!("{at}.{}", i.arg), i.reason))
        }
        e => e,
    }
}

/// The credential files a new or changed target names, checked as `target add` and
/// `target set` check them: the daemon must accept them when it reads them.
fn check_files(plan: &Plan) -> Result<(), Invalid> {
    use crate::domain::CredentialRef;
    use crate::facts::host_probe::{app_key_file, secret_file};
    for step in &plan.targets {
        let (t, before) = match step {
            Step::Add(t) => (t, None),
            Step::Change { before, after } => (after, Some(before)),
            Step::Remove(_) => continue,
        };
        if before.is_some_and(|b| b.credential == t.credential) {
            continue;
        }
        match &t.credential {
            CredentialRef::TokenFile { path } => {
                secret_file(&format!("targets.{}.token_file", t.name), path)?
            }
            CredentialRef::App { key_path, .. } => {
                app_key_file(&format!("targets.{}.app_key", t.name), key_path)?
            }
            CredentialRef::TokenEnv { .. } => {}
        }
    }
    Ok(())
}

/// `status`'s line when the store differs from the file last applied: how many
/// changes applying it again would make, and whether the file changed since. `None`
/// when nothing was applied, or nothing differs.
pub fn drift(store: &dyn Store) -> Option<String> {
    let applied = Applied::read(store)?;
    let cur = current(store).ok()?;
    let plan = describe::parse(&applied.text)
        .and_then(|d| describe::plan(&d, &cur, false))
        .ok()?;
    let file_changed = applied.path != "-"
        && std::fs::read_to_string(&applied.path).is_ok_and(|t| digest(&t) != applied.digest);
    let n = plan.lines(&cur.host.host.os, &cur.host.host.arch).len() - plan.kept.len();
    let mut parts = Vec::new();
    if n > 0 {
        let (file, lists) = match applied.path.as_str() {
            "-" => (
                "the file applied from stdin".to_string(),
                "'apply --dry-run FILE' lists them".to_string(),
            ),
            p => (
                p.to_string(),
                format!("'runner-manager apply --dry-run {p}' lists them"),
            ),
        };
        parts.push(format!(
            "the store differs from {file} as applied at {} ({n} {}; {lists})",
            crate::timefmt::format_rfc3339(applied.at),
            if n == 1 { "difference" } else { "differences" },
        ));
    }
    if file_changed {
        parts.push(format!("{} changed since it was applied", applied.path));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// A description file's text, read no further than a byte past the largest
/// (`describe::parse` refuses that).
pub fn read_bounded(path: &Path) -> std::io::Result<String> {
    use std::io::Read as _;
    let mut text = String::new();
    std::fs::File::open(path)?
        .take(describe::MAX_FILE_BYTES as u64 + 1)
        .read_to_string(&mut text)?;
    Ok(text)
}

/// The daemon's side: the file it follows (`daemon --config`), applied at start, on
/// SIGHUP and when its stamp changes (a `stat` each tick).
pub struct Follower {
    path: PathBuf,
    state_dir: PathBuf,
    /// The stamp of the file last applied; `None` before the first look or while it
    /// cannot be read.
    seen: Option<crate::secret::FileStamp>,
    /// A new stamp seen at the last tick, not applied yet (`settled`).
    pending: Option<crate::secret::FileStamp>,
}

/// Whether a file whose stamp is `now` is to be applied, given the stamp applied
/// (`seen`) and the one the last tick saw (`pending`): only a change that held for a
/// whole tick, so a file being written in place (truncated, then written) is never
/// read half-way. Returns the decision and the next `pending`.
fn settled(
    seen: Option<crate::secret::FileStamp>,
    pending: Option<crate::secret::FileStamp>,
    now: Option<crate::secret::FileStamp>,
) -> (bool, Option<crate::secret::FileStamp>) {
    match now {
        None => (false, None),
        n if n == seen => (false, None),
        n if n == pending => (true, None),
        n => (false, n),
    }
}

impl Follower {
    pub fn new(path: &Path, state_dir: &Path) -> Follower {
        Follower {
            path: path.to_path_buf(),
            state_dir: state_dir.to_path_buf(),
            seen: None,
            pending: None,
        }
    }

    fn stamp(&self) -> Option<crate::secret::FileStamp> {
        std::fs::metadata(&self.path)
            .ok()
            .map(|m| crate::secret::FileStamp::of(&m))
    }

    /// The 1 s tick: applies the file once a change of its stamp held for a tick.
    pub fn tick(&mut self, store: &SqliteStore, now: Millis) {
        let (due, pending) = settled(self.seen, self.pending, self.stamp());
        self.pending = pending;
        if due {
            self.apply(store, now, "changed");
        }
    }

    /// Reads and applies the file now (`reason`: `start`, `SIGHUP`, `changed`),
    /// logging each change, or why the file was refused (the store stays as it was).
    pub fn apply(&mut self, store: &SqliteStore, now: Millis, reason: &str) {
        self.seen = self.stamp();
        self.pending = None;
        let file = self.path.display().to_string();
        let text = match read_bounded(&self.path) {
            Ok(t) => t,
            Err(e) => {
                crate::log_error!("config_refused", file = file, reason = reason, error = e);
                return;
            }
        };
        let probe = crate::facts::host_probe::Probe {
            state_dir: self.state_dir.clone(),
        };
        match apply(store, &text, &file, Options::default(), &probe, now) {
            Ok(o) if o.written => {
                let n = o.lines.len() - o.plan.kept.len();
                crate::log_info!("config_applied", file = file, reason = reason, changes = n);
                for line in o.lines.iter().take(n) {
                    crate::log_info!("config_change", file = file, change = line);
                }
            }
            Ok(_) => crate::log_info!("config_unchanged", file = file, reason = reason),
            Err(e) => {
                crate::log_error!("config_refused", file = file, reason = reason, error = e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::settled;
    use crate::secret::FileStamp;

    fn stamp(len: u64) -> Option<FileStamp> {
        Some(FileStamp {
            dev: 1,
            ino: 2,
            len,
            mtime_ns: len as i128,
            ctime_ns: len as i128,
        })
    }

    #[test]
    fn a_change_is_applied_once_it_held_for_a_tick() {
        let applied = stamp(10);
        // Unchanged, or gone: nothing.
        assert_eq!(settled(applied, None, applied), (false, None));
        assert_eq!(settled(applied, None, None), (false, None));
        // Truncated (being written): noted, not applied.
        assert_eq!(settled(applied, None, stamp(0)), (false, stamp(0)));
        // Written whole by the next tick: a new stamp again, noted.
        assert_eq!(settled(applied, stamp(0), stamp(42)), (false, stamp(42)));
        // Still so a tick later: applied.
        assert_eq!(settled(applied, stamp(42), stamp(42)), (true, None));
        // Put back as it was before it settled: nothing to apply.
        assert_eq!(settled(applied, stamp(42), applied), (false, None));
    }
}
