//! The edits `top` can make: pause or resume a profile, change its max by one, drain
//! the host. Profile edits go through the CLI's own path (`cli::edit_profile`: the
//! same `apply_setting`, `validate` and revision check as `profile set`), naming the
//! revision the screen showed, so an edit made meanwhile is refused, not overwritten.

use crate::cli::{CliError, edit_profile};
use crate::store::{Store, StoreError};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// `active` to this value, from the revision shown.
    SetActive {
        profile: String,
        revision: u64,
        active: bool,
    },
    /// `max` from the value shown to one step away, from the revision shown.
    SetMax {
        profile: String,
        revision: u64,
        from: u32,
        to: i64,
    },
    SetDraining(bool),
}

impl Action {
    /// Disruptive actions stop or hold back runners and ask first.
    pub fn disruptive(&self) -> bool {
        match self {
            Action::SetActive { active, .. } => !active,
            // Fewer runners allowed may stop idle ones; more only starts.
            Action::SetMax { from, to, .. } => *to < i64::from(*from),
            Action::SetDraining(d) => *d,
        }
    }

    /// The question the confirmation asks.
    pub fn question(&self) -> String {
        match self {
            Action::SetActive {
                profile,
                active: false,
                ..
            } => format!("Pause profile {profile}? It starts nothing new; running jobs finish."),
            Action::SetActive { profile, .. } => format!("Resume profile {profile}?"),
            Action::SetMax {
                profile, from, to, ..
            } => format!("Lower max of {profile} from {from} to {to}? Idle runners may stop."),
            Action::SetDraining(true) => {
                "Drain this host? It starts no new runners; busy ones finish.".into()
            }
            Action::SetDraining(false) => "Stop draining this host?".into(),
        }
    }
}

/// What an action did, as the status line says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Done {
    Ok(String),
    /// Refused (invalid value, stale revision, store failure): the message to show.
    Refused(String),
}

/// Carries out one action. A refusal is a message for the operator, never a panic or
/// an exit: `top` keeps running and reloads.
pub fn apply(store: &dyn Store, action: &Action) -> Done {
    let result = match action {
        Action::SetDraining(d) => store
            .set_draining(*d)
            .map(|()| {
                if *d {
                    "host draining: no new runners".to_string()
                } else {
                    "host no longer draining".to_string()
                }
            })
            .map_err(CliError::from),
        Action::SetActive {
            profile,
            revision,
            active,
        } => edit(store, profile, &format!("active={active}"), *revision).map(|rev| {
            let word = if *active { "resumed" } else { "paused" };
            format!("profile {profile} {word} (revision {rev})")
        }),
        Action::SetMax {
            profile,
            revision,
            to,
            ..
        } => edit(store, profile, &format!("max={to}"), *revision)
            .map(|rev| format!("profile {profile} max {to} (revision {rev})")),
    };
    match result {
        Ok(m) => Done::Ok(m),
        Err(CliError::Store(e @ StoreError::StaleRevision { .. })) => {
            Done::Refused(format!("{e} (reloaded)"))
        }
        Err(e) => Done::Refused(e.to_string()),
    }
}

fn edit(store: &dyn Store, profile: &str, setting: &str, revision: u64) -> Result<u64, CliError> {
    let host = store
        .host()?
        .ok_or_else(|| CliError::Failed("no host in the store yet: run 'host show' once".into()))?;
    edit_profile(
        store,
        &host,
        profile,
        &[setting.to_string()],
        Some(revision),
    )
    .map(|p| p.revision)
}
