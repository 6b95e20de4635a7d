//! The one edit path of a stored profile, typed, shared by `profile set` and `top`:
//! read, apply each [`Change`], validate the whole, check what needs the disk or the
//! books, and write only if the revision is still the one expected. Also `top`'s edit
//! of a host setting, through the same `Host::apply_setting` and `Host::check` as
//! `host set`.

use super::{Store, StoreError};
use crate::domain::profile::Change;
use crate::domain::{Host, Invalid, ScalePolicy};
use std::fmt;

/// Why an edit was refused: a value (`Invalid`, named by its setting) or the store
/// (no such profile, a stale revision, a failure).
#[derive(Debug)]
pub enum EditError {
    Invalid(Invalid),
    Store(StoreError),
}

impl fmt::Display for EditError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EditError::Invalid(i) => write!(f, "{i}"),
            EditError::Store(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for EditError {}

impl From<Invalid> for EditError {
    fn from(i: Invalid) -> EditError {
        EditError::Invalid(i)
    }
}

impl From<StoreError> for EditError {
    fn from(e: StoreError) -> EditError {
        EditError::Store(e)
    }
}

/// Reads the profile `name`, applies `changes` in order with
/// `ScalePolicy::apply_change` (`host` gives the default labels), validates the whole,
/// checks a runner directory named (an unpacked release now, not found broken at the
/// first job) and a new target (it must exist), and writes it only if the stored
/// revision is still `expected` (default: the revision just read). Returns the profile
/// as written, with its new revision.
pub fn edit_profile(
    store: &dyn Store,
    host: &Host,
    name: &str,
    changes: &[Change],
    expected: Option<u64>,
) -> Result<ScalePolicy, EditError> {
    let mut p = store.profile(name)?;
    let expected = expected.unwrap_or(p.revision);
    let old_target = p.target.clone();
    for c in changes {
        p.apply_change(c, &host.os, &host.arch)?;
    }
    p.validate()?;
    if changes.iter().any(Change::names_runner_dir) {
        check_runner_dir("runner_dir", &p)?;
    }
    if p.target != old_target
        && let Err(StoreError::NotFound { .. }) = store.target(&p.target)
    {
        return Err(Invalid::new("target", format!("no target named {:?}", p.target)).into());
    }
    // A kept workspace needs a repository target (checked again at each start).
    if p.workspace == crate::domain::workspace::Workspace::Persistent
        && let Ok(t) = store.target(&p.target)
    {
        crate::domain::workspace::check(&p, Some(&t.scope))?;
    }
    p.revision = store.update_profile(&p, expected)?;
    Ok(p)
}

/// A runner directory named must be an unpacked actions-runner release now
/// (`bin/Runner.Listener`, executable), not found broken at the first job: the error
/// names `arg` (the setting or option that named it), the path and what is missing.
pub fn check_runner_dir(arg: &str, p: &ScalePolicy) -> Result<(), Invalid> {
    match &p.runner_dir {
        Some(d) => crate::runner::check_install(d)
            .map(drop)
            .map_err(|e| Invalid::new(arg, e.to_string())),
        None => Ok(()),
    }
}

/// Sets one of the host's plain settings (`domain::host::PLAIN_KEYS`, or an
/// `env.NAME`) as `host set KEY=VALUE` does, and writes the host only when the value
/// and the host as a whole are valid. Returns the host as written.
pub fn edit_host(store: &dyn Store, key: &str, value: &str) -> Result<Host, EditError> {
    let mut h = store.host()?.ok_or_else(|| StoreError::NotFound {
        what: "host",
        name: "this host".into(),
    })?;
    if !h.apply_setting(key, value)? {
        return Err(Invalid::new(
            key,
            format!("not editable here; use 'runner-manager host set {key}=...'"),
        )
        .into());
    }
    h.check()?;
    store.update_host(&h)?;
    Ok(h)
}
