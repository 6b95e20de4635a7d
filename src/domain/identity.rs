//! Whether this store's host id is this machine's: the machine id the id was drawn
//! on against the machine id now, and what a starting daemon does about a difference
//! (`judge`); and the words a copy's books use for the original's runners.

use serde::Serialize;

/// What a starting daemon does about its host id, from [`judge`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The host id was drawn on this machine: nothing to do.
    Keep,
    /// No machine id is kept yet (a store from before they were, or made where none
    /// could be read): this machine's is recorded, the id kept.
    Record,
    /// This machine's id cannot be read: nothing can be told; the id is kept, and
    /// `doctor` says so.
    Unknown,
    /// Another machine id is kept, and a runner of this host id lives here: this
    /// machine's id changed under its own runners (regenerated), so the host id is
    /// this machine's. It is kept, and the new machine id recorded.
    Adopt,
    /// Another machine id is kept, and nothing of this host id lives here: the state
    /// directory came from another machine (a clone, an image, a restore). A new host
    /// id is drawn, so this copy never acts on the runners of the machine it came from.
    Reidentify,
}

impl Verdict {
    /// The word logs and `--json` use.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Keep => "keep",
            Verdict::Record => "record",
            Verdict::Unknown => "unknown",
            Verdict::Adopt => "adopt",
            Verdict::Reidentify => "reidentify",
        }
    }
}

/// Pure: what a daemon starting on the store does about its host id. `kept` is the
/// machine id the store keeps (the one the id was drawn on), `current` this machine's,
/// `live_here` how many of the host id's open attempts have their runner process alive
/// on this machine (pid and start time as recorded).
///
/// Why a new id by itself, and only then: a store copied to another machine keeps the
/// original's id, and with it the original's runner names, open attempts and
/// registrations. Run as it is, the copy takes the original's newer runners for its
/// own orphans and deregisters them, and ends the attempts it copied by deregistering
/// runners that live on the original. A new id makes all of that foreign to it.
/// That is safe when nothing of the old id lives here: the copied attempts are the
/// original's (or dead), never this machine's. When one does live here, this is the
/// machine they run on, whatever its machine id says now, and the id stays.
pub fn judge(kept: Option<&str>, current: Option<&str>, live_here: usize) -> Verdict {
    match (kept, current) {
        (_, None) => Verdict::Unknown,
        (None, Some(_)) => Verdict::Record,
        (Some(k), Some(c)) if k == c => Verdict::Keep,
        (Some(_), Some(_)) if live_here > 0 => Verdict::Adopt,
        (Some(_), Some(_)) => Verdict::Reidentify,
    }
}

/// Pure: whether `host reidentify` may give the state directory a new id.
/// `own_live` are the open attempts of its id whose runner lives on this machine with
/// its root in this state directory's own runtime directory; `held_elsewhere`, whether
/// another daemon here runs with the id. While such runners live and no other daemon
/// holds the id, this directory is the original, not a copy (or cannot be told from
/// it): its runners would be left with no daemon to end and clean them. Refused, with
/// why and the fix.
pub fn may_reidentify(own_live: &[i64], held_elsewhere: bool) -> Result<(), String> {
    if own_live.is_empty() || held_elsewhere {
        return Ok(());
    }
    let ids: Vec<String> = own_live.iter().map(i64::to_string).collect();
    Err(format!(
        "runners of this host id live in this state directory's runtime directory \
         (attempts {}) and no other daemon runs with the id: this looks like the original, \
         not a copy, and a new id would leave those runners to nobody; drain them first \
         (start the daemon, drain --wait, stop it), or, for a copy whose original is \
         stopped, start the original's daemon first",
        ids.join(", ")
    ))
}

/// The reason a copy's books give each attempt it copied open, when it takes a new
/// id: the runner is the original host's, which watches, ends and cleans it; the copy
/// neither kills nor deregisters it.
pub fn handed_back_reason(old_id: &str) -> String {
    format!(
        "handed back: copied open with the state directory; its runner is host {old_id}'s, \
         which ends and cleans it (this copy took a new host id)"
    )
}

/// A machine id as logs and `status` show it: its first 12 digits.
pub fn short_machine(id: &str) -> &str {
    &id[..id.len().min(12)]
}

/// Pure: the identity line `status` and `doctor` show, with whether it warns: the
/// host id is this machine's, not yet tied to one, or drawn on another machine.
pub fn describe(kept: Option<&str>, current: Option<&str>) -> (bool, String) {
    match (kept, current) {
        (_, None) => (
            false,
            "this machine's id cannot be read (/etc/machine-id): a copy of this state \
             directory on another machine cannot be told apart"
                .into(),
        ),
        (None, Some(_)) => (
            true,
            "not yet tied to this machine: the daemon records its machine id at its next start"
                .into(),
        ),
        (Some(k), Some(c)) if k == c => (true, "drawn on this machine".into()),
        (Some(k), Some(c)) => (
            false,
            format!(
                "drawn on another machine ({}, this one is {}): the state directory was \
                 copied; the daemon takes a new host id at its next start unless a runner \
                 of this id lives here, or run: runner-manager host reidentify",
                short_machine(k),
                short_machine(c)
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HERE: &str = "0123456789abcdef0123456789abcdef";
    const THERE: &str = "fedcba9876543210fedcba9876543210";

    #[test]
    fn the_same_machine_keeps_its_id() {
        assert_eq!(judge(Some(HERE), Some(HERE), 0), Verdict::Keep);
        assert_eq!(judge(Some(HERE), Some(HERE), 3), Verdict::Keep);
    }

    #[test]
    fn a_store_without_a_machine_id_records_this_one() {
        assert_eq!(judge(None, Some(HERE), 0), Verdict::Record);
        // Its runners live here: it was made here, before machine ids were kept.
        assert_eq!(judge(None, Some(HERE), 2), Verdict::Record);
    }

    #[test]
    fn a_copy_on_another_machine_takes_a_new_id_when_nothing_of_the_old_lives_here() {
        assert_eq!(judge(Some(THERE), Some(HERE), 0), Verdict::Reidentify);
    }

    #[test]
    fn a_machine_whose_id_changed_under_live_runners_keeps_its_host_id() {
        assert_eq!(judge(Some(THERE), Some(HERE), 1), Verdict::Adopt);
    }

    #[test]
    fn an_unreadable_machine_id_changes_nothing() {
        assert_eq!(judge(Some(THERE), None, 0), Verdict::Unknown);
        assert_eq!(judge(None, None, 0), Verdict::Unknown);
    }

    #[test]
    fn the_handed_back_reason_names_the_original() {
        let r = handed_back_reason("0123abcd0123abcd");
        assert!(r.contains("0123abcd0123abcd") && r.starts_with("handed back"));
        assert_eq!(short_machine(HERE), "0123456789ab");
    }

    #[test]
    fn the_original_with_live_runners_is_not_reidentified() {
        assert!(may_reidentify(&[], false).is_ok());
        // A copy beside its running original: the runners are the original's.
        assert!(may_reidentify(&[3], true).is_ok());
        let why = may_reidentify(&[3, 5], false).unwrap_err();
        assert!(
            why.contains("attempts 3, 5") && why.contains("drain"),
            "{why}"
        );
    }

    #[test]
    fn the_line_warns_unless_the_id_is_this_machines() {
        assert!(describe(Some(HERE), Some(HERE)).0);
        assert!(describe(None, Some(HERE)).0);
        let (ok, line) = describe(Some(THERE), Some(HERE));
        assert!(!ok && line.contains("fedcba987654") && line.contains("host reidentify"));
        assert!(!describe(Some(HERE), None).0);
    }
}
