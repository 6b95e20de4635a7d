//! The edits `top` can make: pause or resume a profile, change its max by one, drain
//! the host, set any profile setting or plain host setting from the Settings pane. Profile edits are typed `Change`s through the one edit path
//! (`store::edit_profile`: the same `apply_setting`, `validate` and revision check as
//! `profile set`), naming the revision the screen showed, so an edit made meanwhile is
//! refused, not overwritten.
//! A max step applies at once and can be undone with `u` (its undo names the revision
//! the step wrote, so it too is refused if someone edited since).

use crate::domain::profile::Change;
use crate::store::{EditError, Store, StoreError, edit_profile};

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
    /// One `KEY=VALUE` of `profile set`, from the revision shown (Settings pane).
    SetProfile {
        profile: String,
        revision: u64,
        setting: String,
    },
    /// One plain `host set` key (Settings pane).
    SetHost {
        key: String,
        value: String,
    },
}

impl Action {
    /// Disruptive actions stop or hold back runners and ask first. A max step does
    /// not ask, either way: an operator steps max several times to find a size (as
    /// with k9s' scale), a question per step would be in the way, and a step is small
    /// and undone at once with `u`. Lowering max never stops a busy runner; at most
    /// an idle one the next pass no longer needs. Pausing and draining stop a whole
    /// profile or host, so they ask.
    pub fn disruptive(&self) -> bool {
        match self {
            Action::SetActive { active, .. } => !active,
            Action::SetMax { .. } => false,
            Action::SetDraining(d) => *d,
            // Typed and sent with Enter on purpose: asking again would be in the way.
            Action::SetProfile { .. } | Action::SetHost { .. } => false,
        }
    }

    /// The action that puts back what this one did, once it was written at
    /// `revision`: a max step back the other way. Pause and drain have their own key
    /// to turn them back, and asked first.
    pub fn undo(&self, revision: u64) -> Option<Action> {
        match self {
            Action::SetMax {
                profile, from, to, ..
            } => Some(Action::SetMax {
                profile: profile.clone(),
                revision,
                from: u32::try_from(*to).ok()?,
                to: i64::from(*from),
            }),
            _ => None,
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
            } => format!("Set max of {profile} from {from} to {to}?"),
            Action::SetDraining(true) => {
                "Drain this host? It starts no new runners; busy ones finish.".into()
            }
            Action::SetDraining(false) => "Stop draining this host?".into(),
            Action::SetProfile {
                profile, setting, ..
            } => format!("Set {setting} on profile {profile}?"),
            Action::SetHost { key, value } => format!("Set {key}={value} on this host?"),
        }
    }
}

/// What an action did, as the status line says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Done {
    Ok(String),
    /// Done, and this action undoes it (`u`).
    Undoable(String, Action),
    /// Refused (invalid value, stale revision, store failure): the message to show.
    Refused(String),
}

/// Carries out one action. A refusal is a message for the operator, never a panic or
/// an exit: `top` keeps running and reloads.
pub fn apply(store: &dyn Store, action: &Action, probe: &dyn crate::store::HostProbe) -> Done {
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
            .map_err(|e| Refusal::Edit(e.into())),
        Action::SetProfile {
            profile,
            revision,
            setting,
        } => edit(store, profile, Change::Setting(setting.clone()), *revision)
            .map(|rev| format!("profile {profile} {setting} (revision {rev})")),
        Action::SetHost { key, value } => crate::store::edit_host(store, &[(key, value)], probe)
            .map(|e| format!("host {} {key}={value}", e.after.host.name))
            .map_err(Refusal::Edit),
        Action::SetActive {
            profile,
            revision,
            active,
        } => edit(store, profile, Change::Active(*active), *revision).map(|rev| {
            let word = if *active { "resumed" } else { "paused" };
            format!("profile {profile} {word} (revision {rev})")
        }),
        Action::SetMax {
            profile,
            revision,
            from,
            to,
        } => {
            return match edit(store, profile, Change::Max(*to), *revision) {
                Ok(rev) => {
                    let text = format!("profile {profile} max {from} → {to} (revision {rev})");
                    match action.undo(rev) {
                        Some(undo) => Done::Undoable(format!("{text} · u undoes"), undo),
                        None => Done::Ok(text),
                    }
                }
                Err(e) => refused(e),
            };
        }
    };
    match result {
        Ok(m) => Done::Ok(m),
        Err(e) => refused(e),
    }
}

fn refused(e: Refusal) -> Done {
    match e {
        Refusal::Edit(EditError::Store(e @ StoreError::StaleRevision { .. })) => {
            Done::Refused(format!("{e} (reloaded)"))
        }
        Refusal::Edit(e) => Done::Refused(e.to_string()),
        Refusal::NoHost => Done::Refused("no host in the store yet: run 'host show' once".into()),
    }
}

/// Why an action was not carried out.
enum Refusal {
    Edit(EditError),
    /// The store has no host row yet (`top` never creates one).
    NoHost,
}

impl From<EditError> for Refusal {
    fn from(e: EditError) -> Refusal {
        Refusal::Edit(e)
    }
}

fn edit(store: &dyn Store, profile: &str, change: Change, revision: u64) -> Result<u64, Refusal> {
    let host = store
        .host()
        .map_err(EditError::from)?
        .ok_or(Refusal::NoHost)?;
    Ok(edit_profile(store, &host, profile, &[change], Some(revision))?.revision)
}
