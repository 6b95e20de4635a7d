//! The one edit path of a stored profile, typed, shared by `profile set` and `top`:
//! read, apply each [`Change`], validate the whole, check what needs the disk or the
//! books, and write only if the revision is still the one expected. Likewise the one
//! edit of the host's settings, shared by `host set` and `top` (`edit_host`).

use super::{Store, StoreError};
use crate::domain::host_settings::{Beside, HostSettings};
use crate::domain::profile::Change;
use crate::domain::{Host, Invalid, ScalePolicy, UidRange};
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
        && let Err(e @ StoreError::NotFound { .. }) = store.target(&p.target)
    {
        // One it most likely meant: the store's refusal, which the CLI answers with it.
        if super::near_name(store, "target", &p.target).is_some() {
            return Err(e.into());
        }
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

/// What `store::edit_host` cannot check itself from the store's floor: a setting's
/// value on this machine, as the part that reads it will (a token or CA file, a
/// runtime root, runner users, a release source, the webhook's secret), and whether
/// another daemon here holds a uid range. `facts::host_probe` is the machine's.
pub trait HostProbe {
    /// Checks the setting `key` as `after` holds it (called for each key an edit
    /// names, after every key is applied; a key it has nothing to check passes).
    fn setting(&self, key: &str, after: &HostSettings) -> Result<(), Invalid>;
    /// Refuses `range` when another daemon on this host holds it.
    fn uids_free(&self, range: UidRange) -> Result<(), Invalid>;
}

/// One host edit as written: the settings before and after, for saying what changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostEdit {
    pub before: HostSettings,
    pub after: HostSettings,
}

/// The host's settings as stored: its row and the key-value rows beside it.
/// One host setting kept beside the host row (`release_source`, the webhook's), as
/// last set; `None` when unset.
pub fn beside(store: &dyn Store, b: Beside) -> Result<Option<String>, StoreError> {
    store.kv_get(b.kv_key())
}

pub fn read_host_settings(store: &dyn Store) -> Result<HostSettings, StoreError> {
    let host = store.host()?.ok_or_else(|| StoreError::NotFound {
        what: "host",
        name: "this host".into(),
    })?;
    let mut kept = std::collections::BTreeMap::new();
    for b in Beside::ALL {
        if let Some(v) = beside(store, b)? {
            kept.insert(b, v);
        }
    }
    Ok(HostSettings { host, beside: kept })
}

/// The usage roll-up's settings (retention, prices, metrics' top N) as this store
/// keeps them; their defaults on a store with no host row yet (a coordinator's).
pub fn usage_settings(
    store: &dyn Store,
) -> Result<crate::domain::host_settings::UsageSettings, StoreError> {
    use crate::domain::host_settings::{HostSettings, UsageSettings};
    Ok(match store.host()? {
        Some(_) => UsageSettings::of(&read_host_settings(store)?),
        None => UsageSettings::of(&HostSettings {
            host: crate::domain::Host::new(String::new(), String::new(), "", "", 1),
            beside: Default::default(),
        }),
    })
}

/// The one edit of the host's settings, shared by `host set` and `top`: applies each
/// `KEY=VALUE` in order with `HostSettings::apply_setting`, checks the rules across
/// keys (`HostSettings::check`), each named key on the disk (`probe`), a new uid range
/// against other daemons and a new runtime root against attempts not yet cleaned, and
/// only then writes the host row and the rows beside it in one transaction. Any
/// refusal names its key, and nothing is written.
pub fn edit_host(
    store: &dyn Store,
    settings: &[(&str, &str)],
    probe: &dyn HostProbe,
) -> Result<HostEdit, EditError> {
    let before = read_host_settings(store)?;
    let mut after = before.clone();
    for (key, value) in settings {
        after.apply_setting(key, value)?;
    }
    after.check()?;
    for (key, _) in settings {
        probe.setting(key, &after)?;
    }
    let (old, new) = (&before.host, &after.host);
    if let Some(range) = new.runner_uids
        && new.runner_uids != old.runner_uids
    {
        probe.uids_free(range)?;
    }
    if new.runtime_root != old.runtime_root && !store.open_attempts(&new.id)?.is_empty() {
        return Err(Invalid::new(
            "runtime_root",
            "attempts not yet cleaned have their roots under the current one; drain the \
             host and wait for them to be cleaned (nothing is moved or removed)",
        )
        .into());
    }
    let beside: Vec<(&str, Option<&str>)> = Beside::ALL
        .into_iter()
        .filter(|b| before.beside(*b) != after.beside(*b))
        .map(|b| (b.kv_key(), after.beside(b)))
        .collect();
    store.update_host_settings(new, &beside)?;
    Ok(HostEdit { before, after })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SqliteStore;
    use std::cell::RefCell;

    /// A probe that passes every key and remembers which it was asked about, or
    /// refuses the one it is told to.
    #[derive(Default)]
    struct Probe {
        asked: RefCell<Vec<String>>,
        refuse: Option<&'static str>,
    }

    impl HostProbe for Probe {
        fn setting(&self, key: &str, _: &HostSettings) -> Result<(), Invalid> {
            self.asked.borrow_mut().push(key.into());
            match self.refuse {
                Some(k) if k == key => Err(Invalid::new(key, "refused by the disk")),
                _ => Ok(()),
            }
        }
        fn uids_free(&self, _: UidRange) -> Result<(), Invalid> {
            Ok(())
        }
    }

    fn store() -> SqliteStore {
        let s = SqliteStore::open_in_memory().unwrap();
        s.host_or_create().unwrap();
        s
    }

    /// Every key `host set` lists, each with a value it takes.
    const EVERY_KEY: &[(&str, &str)] = &[
        ("capacity", "3"),
        ("coordinator", "wss://pool.example:443"),
        ("coordinator_token_file", "/etc/rm/host-token"),
        ("coordinator_ca_file", "/etc/rm/ca.pem"),
        ("coordinator_insecure", "true"),
        ("isolation", "uids"),
        ("runner_uids", "61000-61099"),
        ("retention", "2d"),
        ("logs_max", "32MiB"),
        ("disk_reserve", "1GiB"),
        ("env.FOO", "bar"),
        ("runner_version", "2.330.0"),
        ("runtime_root", "/srv/rm"),
        ("cache_cap", "2GiB"),
        ("release_source", "https://releases.example/rm/"),
        ("webhook_listen", "127.0.0.1:8090"),
        ("webhook_secret_file", "/etc/rm/hook"),
        ("usage_retention", "400d"),
        ("cost_per_cpu_hour", "0.04"),
        ("cost_per_gib_hour", "0.005"),
        ("usage_metrics_top", "5"),
    ];

    #[test]
    fn every_key_is_written_with_the_rows_beside_the_host() {
        let s = store();
        let probe = Probe::default();
        let edit = edit_host(&s, EVERY_KEY, &probe).unwrap();
        let typed: Vec<&str> = EVERY_KEY.iter().map(|(k, _)| *k).collect();
        assert_eq!(*probe.asked.borrow(), typed, "each key is probed once");
        let listed: Vec<String> = crate::domain::host::SETTABLE_KEYS
            .iter()
            .map(|k| k.replace("NAME", "FOO"))
            .collect();
        assert_eq!(typed, listed, "every settable key is in this test");
        let stored = read_host_settings(&s).unwrap();
        assert_eq!(stored, edit.after);
        let h = &stored.host;
        assert_eq!(h.capacity, 3);
        assert_eq!(h.coordinator.as_deref(), Some("wss://pool.example:443"));
        assert!(h.coordinator_insecure);
        assert_eq!(
            h.runner_uids.map(|r| r.to_string()).as_deref(),
            Some("61000-61099")
        );
        assert_eq!(h.runner_version.as_deref(), Some("2.330.0"));
        assert_eq!(
            h.runtime_root.as_deref(),
            Some(std::path::Path::new("/srv/rm"))
        );
        assert_eq!(
            s.kv_get(crate::domain::host_settings::KV_RELEASE_SOURCE)
                .unwrap()
                .as_deref(),
            Some("https://releases.example/rm")
        );
        assert_eq!(
            s.kv_get("webhook_listen").unwrap().as_deref(),
            Some("127.0.0.1:8090")
        );
        // Unset again: the rows beside the host are deleted.
        assert_eq!(
            s.kv_get("cost_per_cpu_hour").unwrap().as_deref(),
            Some("0.04")
        );
        let unset = [
            ("webhook_listen", ""),
            ("webhook_secret_file", ""),
            ("usage_retention", ""),
            ("cost_per_cpu_hour", ""),
            ("cost_per_gib_hour", ""),
            ("usage_metrics_top", ""),
        ];
        let edit = edit_host(&s, &unset, &probe).unwrap();
        assert!(
            edit.after
                .beside
                .keys()
                .all(|b| *b == Beside::ReleaseSource)
        );
        assert_eq!(s.kv_get("webhook_secret_file").unwrap(), None);
    }

    #[test]
    fn a_refused_edit_writes_nothing() {
        let s = store();
        let before = read_host_settings(&s).unwrap();
        // (the edit, the key the disk refuses, the key the refusal names)
        type Refusal<'a> = (&'a [(&'a str, &'a str)], Option<&'static str>, &'a str);
        let refusals: &[Refusal] = &[
            // A rule across keys: a coordinator needs the host's token.
            (
                &[("capacity", "3"), ("coordinator", "wss://pool.example:443")],
                None,
                "coordinator_token_file",
            ),
            // The webhook listener needs both of its rows.
            (
                &[
                    ("release_source", "https://r.example"),
                    ("webhook_listen", "127.0.0.1:1"),
                ],
                None,
                "webhook_secret_file",
            ),
            // A value, after others were applied.
            (
                &[("capacity", "3"), ("retention", "soon")],
                None,
                "retention",
            ),
            // The disk, after every rule passed.
            (
                &[("capacity", "3"), ("coordinator_ca_file", "/etc/rm/ca.pem")],
                Some("coordinator_ca_file"),
                "coordinator_ca_file",
            ),
        ];
        for (settings, refuse, key) in refusals {
            let probe = Probe {
                refuse: *refuse,
                ..Probe::default()
            };
            match edit_host(&s, settings, &probe) {
                Err(EditError::Invalid(i)) => assert_eq!(i.arg, *key, "{settings:?}"),
                other => panic!("{settings:?}: {other:?}"),
            }
            assert_eq!(read_host_settings(&s).unwrap(), before, "{settings:?}");
        }
    }

    #[test]
    fn a_new_runtime_root_waits_for_open_attempts() {
        let (s, h, _) = crate::store::tests::seeded();
        s.create_attempt(&crate::store::tests::new_attempt(&h, "linux"), 1)
            .unwrap();
        let e = edit_host(&s, &[("runtime_root", "/srv/rm")], &Probe::default()).unwrap_err();
        assert!(
            matches!(e, EditError::Invalid(ref i) if i.arg == "runtime_root"),
            "{e}"
        );
        assert_eq!(s.host().unwrap().unwrap().runtime_root, None);
    }
}
