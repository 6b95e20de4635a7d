//! Whether this host can run `oci` runners: the pure judgement of the facts `podman
//! info` (and a disk quota probe) give, which the edge reads (`runner::oci::info`,
//! `runner::oci::podman::Podman::facts`). Unlike the rest of the fitness checks, not
//! knowing fails here: a container backend we cannot see working is not one to hand
//! a job to.
//!
//! Ready means: Podman answers, runs rootless, the user's subordinate uid and gid
//! ranges hold at least [`MIN_ID_MAP`] ids each, and the cgroups are v2 with the `cpu`,
//! `memory` and `pids` controllers delegated (or no limit could apply).
//!
//! Whether a container's writable layer can be given a size (`--storage-opt size=`)
//! that holds is judged too ([`quota_holds`]) but is not part of being ready: rootless
//! Podman cannot set an xfs project quota at all (it must make a device node, which a
//! user namespace may not: podman #16424, seen on Debian 12 and 13 guests with
//! `prjquota`). So the size is a limit like `memory_max`: a profile that sets
//! `disk_max` needs it to hold (or `limits=best-effort`), and a profile that sets none
//! gets the default size where it holds and none where it cannot.

/// The subordinate ids a rootless container needs: a whole 16-bit id space, so that
/// an image's users (`nobody` is 65534) all map.
pub const MIN_ID_MAP: u64 = 65_536;

/// The cgroup controllers a container's limits need.
pub const CONTROLLERS: &[&str] = &["cpu", "memory", "pids"];

/// What was read about the host's Podman. `None`: not read (or not readable).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Facts {
    /// `Err`: why Podman could not be asked (not installed, `podman info` failed).
    pub podman: Option<Result<String, String>>,
    pub rootless: Option<bool>,
    /// The subordinate ids mapped (all but the user's own id), uids and gids.
    pub uid_map: Option<u64>,
    pub gid_map: Option<u64>,
    /// `v1` or `v2`.
    pub cgroup_version: Option<String>,
    pub controllers: Option<Vec<String>>,
    /// The storage driver and the filesystem under it (`overlay`, `xfs`).
    pub storage: Option<(String, String)>,
    /// Whether Podman accepted a container size (`--storage-opt size=`): `Err` with
    /// its words when not.
    pub quota_probe: Option<Result<(), String>>,
}

/// One judged check, for `doctor` and the daemon's reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub name: &'static str,
    pub ok: bool,
    pub detail: String,
    /// What to do; set when not ok.
    pub hint: Option<&'static str>,
}

fn check(name: &'static str, ok: bool, detail: String, hint: &'static str) -> Check {
    Check {
        name,
        ok,
        detail,
        hint: (!ok).then_some(hint),
    }
}

/// Every check, in order: podman, rootless, id maps, cgroups, disk quota. Once Podman
/// cannot be asked the rest are not judged (they would all say "unknown").
pub fn checks(f: &Facts) -> Vec<Check> {
    let podman = match &f.podman {
        Some(Ok(v)) => check("podman", true, format!("podman {v}"), ""),
        Some(Err(why)) => check(
            "podman",
            false,
            why.clone(),
            "install Podman from the distribution's packages (apt install podman, dnf \
             install podman), or point RUNNER_MANAGER_PODMAN at it",
        ),
        None => check(
            "podman",
            false,
            "not checked yet".into(),
            "wait for the daemon's next look, or run doctor",
        ),
    };
    if !podman.ok {
        return vec![podman];
    }
    let mut out = vec![podman];
    out.push(check(
        "rootless",
        f.rootless == Some(true),
        match f.rootless {
            Some(true) => "rootless".into(),
            Some(false) => "podman runs as root here: containers would hold real root".into(),
            None => "podman did not say whether it is rootless".into(),
        },
        "run the daemon as an unprivileged user (rootless Podman)",
    ));
    let maps = match (f.uid_map, f.gid_map) {
        (Some(u), Some(g)) => (
            u >= MIN_ID_MAP && g >= MIN_ID_MAP,
            format!("subordinate ids: {u} uids, {g} gids (at least {MIN_ID_MAP} each)"),
        ),
        _ => (
            false,
            "no user namespace id maps: /etc/subuid and /etc/subgid give this user none".into(),
        ),
    };
    out.push(check(
        "user-namespaces",
        maps.0,
        maps.1,
        "give the daemon's user 65536 subordinate ids: usermod --add-subuids \
         100000-165535 --add-subgids 100000-165535 USER, then podman system migrate",
    ));
    let version = f.cgroup_version.as_deref().unwrap_or("unknown");
    let missing: Vec<&str> = match &f.controllers {
        Some(have) => CONTROLLERS
            .iter()
            .filter(|c| !have.iter().any(|h| h == *c))
            .copied()
            .collect(),
        None => CONTROLLERS.to_vec(),
    };
    out.push(check(
        "cgroup-v2",
        version == "v2" && missing.is_empty(),
        if version != "v2" {
            format!("cgroup {version}: container limits need cgroup v2")
        } else if missing.is_empty() {
            format!("cgroup v2 with {}", CONTROLLERS.join(", "))
        } else {
            format!(
                "cgroup v2 without {} delegated to this user",
                missing.join(", ")
            )
        },
        "boot with the unified hierarchy (systemd.unified_cgroup_hierarchy=1) and \
         delegate cpu, memory and pids to the user (systemd's user@.service Delegate=)",
    ));
    let (driver, fs) = f
        .storage
        .clone()
        .unwrap_or_else(|| ("unknown".into(), String::new()));
    let on = if fs.is_empty() {
        driver.clone()
    } else {
        format!("{driver} on {fs}")
    };
    let quota = match &f.quota_probe {
        Some(Ok(())) if driver == "overlay" && fs == "xfs" => (true, format!("{on}, sizes hold")),
        Some(Ok(())) => (
            false,
            format!("{on}: podman takes a size but only overlay on xfs enforces it"),
        ),
        Some(Err(why)) => (false, format!("{on}: a container size is refused: {why}")),
        None => (false, format!("{on}: the quota was not probed")),
    };
    out.push(check(
        QUOTA,
        quota.0,
        quota.1,
        "put podman's storage (graphroot) on xfs mounted with prjquota, so a job \
         cannot fill the host's disk",
    ));
    out
}

/// The check that judges the container size: a limit, not readiness.
pub const QUOTA: &str = "disk-quota";

/// Whether a container's size (`--storage-opt size=`) is taken and enforced here.
pub fn quota_holds(f: &Facts) -> bool {
    checks(f).iter().any(|c| c.name == QUOTA && c.ok)
}

/// The verdict: `Ok` with a one-line summary, or `Err` with every failing check
/// (`name: detail`) joined. A size that cannot hold is said in the summary, never a
/// reason for not being ready (see the module's notes).
pub fn verdict(f: &Facts) -> Result<String, String> {
    let all = checks(f);
    let failed: Vec<String> = all
        .iter()
        .filter(|c| !c.ok && c.name != QUOTA)
        .map(|c| format!("{}: {}", c.name, c.detail))
        .collect();
    if failed.is_empty() {
        Ok(all
            .iter()
            .map(|c| c.detail.as_str())
            .collect::<Vec<_>>()
            .join("; "))
    } else {
        Err(failed.join("; "))
    }
}

/// The fix for the first failing check of readiness.
pub fn first_hint(f: &Facts) -> Option<&'static str> {
    checks(f)
        .into_iter()
        .filter(|c| c.name != QUOTA)
        .find_map(|c| c.hint)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rootless Podman 5 on xfs, as `runner::oci::info` reads its `podman info`.
    fn ready() -> Facts {
        Facts {
            podman: Some(Ok("5.0.3".into())),
            rootless: Some(true),
            uid_map: Some(65_536),
            gid_map: Some(65_536),
            cgroup_version: Some("v2".into()),
            controllers: Some(["cpu", "io", "memory", "pids"].map(String::from).to_vec()),
            storage: Some(("overlay".into(), "xfs".into())),
            quota_probe: Some(Ok(())),
        }
    }

    #[test]
    fn a_rootless_podman_on_xfs_with_maps_and_controllers_is_ready() {
        let f = ready();
        let v = verdict(&f).unwrap();
        assert!(
            v.starts_with("podman 5.0.3; rootless; subordinate ids: 65536"),
            "{v}"
        );
        assert_eq!(first_hint(&f), None);
    }

    #[test]
    fn each_missing_piece_fails_and_names_itself() {
        type Edit = Box<dyn Fn(&mut Facts)>;
        let cases: Vec<(&str, Edit)> = vec![
            (
                "rootless: podman runs as root",
                Box::new(|f| f.rootless = Some(false)),
            ),
            (
                "user-namespaces: subordinate ids: 65535 uids",
                Box::new(|f| f.uid_map = Some(65_535)),
            ),
            (
                "user-namespaces: no user namespace",
                Box::new(|f| f.gid_map = None),
            ),
            (
                "cgroup-v2: cgroup v1",
                Box::new(|f| f.cgroup_version = Some("v1".into())),
            ),
            (
                "cgroup-v2: cgroup v2 without memory, pids",
                Box::new(|f| f.controllers = Some(vec!["cpu".into()])),
            ),
        ];
        for (want, edit) in cases {
            let mut f = ready();
            edit(&mut f);
            let why = verdict(&f).unwrap_err();
            assert!(why.starts_with(want), "{want}: {why}");
            assert!(first_hint(&f).is_some());
        }
    }

    /// A size that cannot hold is a limit not in effect, not a host unready: rootless
    /// Podman refuses it on any xfs (podman #16424), and said so on a Debian 12 guest.
    #[test]
    fn a_size_that_cannot_hold_is_said_but_does_not_make_the_host_unready() {
        assert!(quota_holds(&ready()));
        type Edit = Box<dyn Fn(&mut Facts)>;
        let cases: Vec<(&str, Edit)> = vec![
            (
                "overlay on extfs: podman takes a size but only overlay on xfs enforces it",
                Box::new(|f| f.storage = Some(("overlay".into(), "extfs".into()))),
            ),
            (
                "overlay on xfs: a container size is refused: Filesystem does not support \
                 Project Quota: failed to mknod backingFsBlockDev.tmp: operation not permitted",
                Box::new(|f| {
                    f.quota_probe = Some(Err("Filesystem does not support Project Quota: \
                         failed to mknod backingFsBlockDev.tmp: operation not permitted"
                        .into()))
                }),
            ),
            (
                "overlay on xfs: the quota was not probed",
                Box::new(|f| f.quota_probe = None),
            ),
        ];
        for (want, edit) in cases {
            let mut f = ready();
            edit(&mut f);
            assert!(!quota_holds(&f), "{want}");
            let summary = verdict(&f).unwrap();
            assert!(summary.ends_with(want), "{want}: {summary}");
            assert!(first_hint(&f).is_none(), "{want}");
        }
    }

    #[test]
    fn no_podman_or_nothing_known_is_not_ready() {
        let gone = Facts {
            podman: Some(Err("podman not found on PATH".into())),
            ..Facts::default()
        };
        assert_eq!(
            verdict(&gone).unwrap_err(),
            "podman: podman not found on PATH"
        );
        assert!(first_hint(&gone).unwrap().contains("install Podman"));
        assert!(verdict(&Facts::default()).is_err());
        // Podman answers but says nothing: every check fails, closed.
        let empty = Facts {
            podman: Some(Ok("?".into())),
            ..Facts::default()
        };
        assert_eq!(checks(&empty).iter().filter(|c| !c.ok).count(), 4);
    }
}
