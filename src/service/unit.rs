//! The systemd unit `service install` writes, rendered as pure text from the packaged
//! `packaging/systemd/runner-manager.service` (included at build time), so the
//! packaged unit and the installed one cannot drift: rendering for the packaged
//! binary path and state directory gives the packaged file with only our marker
//! lines on top (a test holds that). A user unit is the same text with each
//! directive a user manager cannot honour left out, and a comment saying why.

use std::path::Path;

/// The packaged unit: the one source of both the package's unit and the rendered one.
pub const TEMPLATE: &str = include_str!("../../packaging/systemd/runner-manager.service");

/// The start of the line that marks a unit as written by `service install`: a unit
/// without it is never overwritten or removed.
pub const MARKER: &str = "# runner-manager-service-install:";

/// The unit's file name.
pub const UNIT_NAME: &str = "runner-manager.service";

/// Where the packaged unit runs the binary from, and the state directory it gives it.
pub const PACKAGED_BIN: &str = "/usr/bin/runner-manager";
pub const PACKAGED_STATE_DIR: &str = "/var/lib/runner-manager";

/// A system unit (the system manager, root) or a user unit (`systemctl --user`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    System,
    User,
}

/// The directives of the packaged unit a user unit leaves out, each with the reason
/// written into the rendered unit. Every other directive is kept as it is.
pub const USER_LEFT_OUT: &[(&str, &str)] = &[
    (
        "After",
        "network-online.target is a system unit; a user manager has none to order after",
    ),
    (
        "Wants",
        "network-online.target is a system unit; a user manager cannot pull it in",
    ),
    (
        "StateDirectory",
        "the state directory is named in full above (its place under a user manager varies by systemd version)",
    ),
    (
        "StateDirectoryMode",
        "goes with StateDirectory; runners run as this user, so no other uid traverses it",
    ),
    (
        "CapabilityBoundingSet",
        "a user manager grants no capabilities: every runner runs as this user",
    ),
    (
        "AmbientCapabilities",
        "a user manager grants no capabilities",
    ),
    (
        "LimitNOFILE",
        "a user unit cannot raise its hard limit above the user's; the start would fail",
    ),
    (
        "ProtectSystem",
        "needs a mount namespace, which a user manager gets only through unprivileged user namespaces (the start fails where they are off)",
    ),
    (
        "ProtectHome",
        "would hide the home directory that holds this user's state directory",
    ),
    (
        "ProtectKernelTunables",
        "needs a mount namespace, which a user manager gets only through unprivileged user namespaces",
    ),
    (
        "ProtectKernelModules",
        "a user cannot load modules anyway; in a user unit it needs unprivileged user namespaces",
    ),
    (
        "ProtectKernelLogs",
        "needs a mount namespace, which a user manager gets only through unprivileged user namespaces",
    ),
];

/// Why a path cannot go into a unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadPath(pub String);

/// A path the unit can hold as it is: absolute, with none of the characters systemd
/// reads as quoting, specifiers or variables, and no whitespace (which splits
/// `ExecStart=`'s words). Refused rather than escaped, so what the unit says is what
/// `status` reads back.
pub fn check_path(p: &Path) -> Result<(), BadPath> {
    let Some(s) = p.to_str() else {
        return Err(BadPath("is not valid UTF-8".into()));
    };
    if !p.is_absolute() {
        return Err(BadPath("must be an absolute path".into()));
    }
    if let Some(c) = s
        .chars()
        .find(|c| c.is_whitespace() || c.is_control() || "\"'\\$%;".contains(*c))
    {
        return Err(BadPath(format!(
            "holds {c:?}, which a systemd unit would read as quoting, a specifier, a variable or a separator; use a path without it"
        )));
    }
    Ok(())
}

/// Where a system unit's daemon may keep its state: the packaged unit's hardening
/// hides `/home`, `/root` and `/run/user` (`ProtectHome=yes`) and makes `/usr`,
/// `/boot` and `/etc` read-only (`ProtectSystem=full`).
pub fn check_system_state_dir(dir: &Path) -> Result<(), BadPath> {
    for (top, why) in [
        ("/home", "ProtectHome=yes hides it from the daemon"),
        ("/root", "ProtectHome=yes hides it from the daemon"),
        ("/run/user", "ProtectHome=yes hides it from the daemon"),
        ("/usr", "ProtectSystem=full makes it read-only"),
        ("/boot", "ProtectSystem=full makes it read-only"),
        ("/etc", "ProtectSystem=full makes it read-only"),
    ] {
        if dir.starts_with(top) {
            return Err(BadPath(format!(
                "is under {top}, and the system unit's {why}; choose a state directory under /var/lib (or use --user)"
            )));
        }
    }
    Ok(())
}

/// The top directory that `ProtectHome=yes` hides from a system unit's daemon, if
/// `p` is under one. A binary there cannot be executed by the system unit (the start
/// fails with 203/EXEC).
pub fn hidden_by_protect_home(p: &Path) -> Option<&'static str> {
    ["/home", "/root", "/run/user"]
        .into_iter()
        .find(|top| p.starts_with(top))
}

/// The key of a directive line (`Key=value`), or `None` for comments, blank lines and
/// section headers.
pub fn key_of(line: &str) -> Option<&str> {
    let t = line.trim_start();
    if t.starts_with('#') || t.starts_with(';') || t.starts_with('[') {
        return None;
    }
    t.split_once('=').map(|(k, _)| k.trim())
}

/// The unit text for this binary and state directory. The paths must have passed
/// [`check_path`] (and, for a system unit, [`check_system_state_dir`]).
pub fn render(kind: Kind, bin: &Path, state_dir: &Path, version: &str) -> String {
    let bin = bin.display().to_string();
    let state = state_dir.display().to_string();
    let mut out = String::new();
    out.push_str(&format!(
        "{MARKER} written by 'runner-manager service install' (runner-manager {version});\n\
         # 'runner-manager service uninstall' removes it. Rendered from the packaged unit,\n\
         # packaging/systemd/runner-manager.service: change that, not this file.\n"
    ));
    // The packaged unit's state directory comes from StateDirectory= only when it is
    // /var/lib/NAME; anywhere else it must exist, and the unit names it in full.
    let state_directory = state
        .strip_prefix("/var/lib/")
        .filter(|rest| !rest.is_empty());
    for line in TEMPLATE.lines() {
        let key = key_of(line);
        if kind == Kind::User
            && let Some((k, why)) = USER_LEFT_OUT.iter().find(|(k, _)| Some(*k) == key)
        {
            out.push_str(&format!("# {k}= left out of a user unit: {why}.\n"));
            continue;
        }
        match key {
            Some("ExecStart") => {
                let rest = line
                    .split_once('=')
                    .map(|(_, v)| v)
                    .unwrap_or("")
                    .strip_prefix(PACKAGED_BIN)
                    .unwrap_or(" daemon");
                out.push_str(&format!("ExecStart={bin}{rest}\n"));
            }
            Some("ExecStopPost") => {
                let (prefix, rest) = line
                    .split_once('=')
                    .map(|(_, v)| v)
                    .and_then(|v| v.split_once(PACKAGED_BIN))
                    .unwrap_or(("-+", " daemon --release-cgroups"));
                out.push_str(&format!("ExecStopPost={prefix}{bin}{rest}\n"));
            }
            Some("Environment") if line.contains("RUNNER_MANAGER_STATE_DIR=") => {
                out.push_str(&format!("Environment=RUNNER_MANAGER_STATE_DIR={state}\n"));
            }
            Some("StateDirectory") => match state_directory {
                Some(name) => out.push_str(&format!("StateDirectory={name}\n")),
                None => out.push_str(&format!(
                    "# StateDirectory= left out: {state} is not under /var/lib, so it is not made here.\n"
                )),
            },
            Some("StateDirectoryMode") if state_directory.is_none() => {
                out.push_str("# StateDirectoryMode= left out with StateDirectory=.\n");
            }
            Some("WantedBy") if kind == Kind::User => {
                out.push_str("WantedBy=default.target\n");
            }
            _ => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

/// Whether a unit's text carries our marker.
pub fn is_ours(text: &str) -> bool {
    text.lines().any(|l| l.starts_with(MARKER))
}

/// Whether a unit's text is the packaged unit (`packaging/systemd`, as a package or
/// `install.sh` installs it, its paths perhaps moved): it opens with the packaged
/// unit's first line. `service install` never writes over it, but `status` reads it.
pub fn is_packaged(text: &str) -> bool {
    text.lines().next() == TEMPLATE.lines().next()
}

/// The binary a unit's `ExecStart=` runs (its first word), if it has one.
pub fn exec_binary(text: &str) -> Option<&str> {
    text.lines()
        .filter(|l| key_of(l) == Some("ExecStart"))
        .find_map(|l| l.split_once('=')?.1.split_whitespace().next())
}

/// The state directory a unit gives its daemon, if it names one.
pub fn state_dir_of(text: &str) -> Option<&str> {
    text.lines()
        .filter(|l| key_of(l) == Some("Environment"))
        .find_map(|l| {
            l.split_once('=')?
                .1
                .trim()
                .strip_prefix("RUNNER_MANAGER_STATE_DIR=")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(text: &str) -> Vec<&str> {
        text.lines().filter_map(key_of).collect()
    }

    #[test]
    fn the_packaged_binary_and_state_dir_render_the_packaged_unit_under_our_marker() {
        let text = render(
            Kind::System,
            Path::new(PACKAGED_BIN),
            Path::new(PACKAGED_STATE_DIR),
            "9.9.9",
        );
        let (head, body) = text.split_at(text.find("# runner-manager daemon:").unwrap());
        assert_eq!(body, TEMPLATE, "the rendering is the packaged unit");
        assert_eq!(head.lines().count(), 3);
        assert!(head.starts_with(MARKER) && head.contains("9.9.9"), "{head}");
        assert!(is_ours(&text) && !is_ours(TEMPLATE));
    }

    #[test]
    fn a_system_unit_runs_this_binary_on_this_state_dir_with_every_packaged_directive() {
        let text = render(
            Kind::System,
            Path::new("/opt/rm/bin/runner-manager"),
            Path::new("/var/lib/rm-ci"),
            "1.0.0",
        );
        assert_eq!(keys(&text), keys(TEMPLATE));
        assert!(text.contains("\nExecStart=/opt/rm/bin/runner-manager daemon\n"));
        assert!(
            text.contains("\nExecStopPost=-+/opt/rm/bin/runner-manager daemon --release-cgroups\n")
        );
        assert!(text.contains("\nEnvironment=RUNNER_MANAGER_STATE_DIR=/var/lib/rm-ci\n"));
        assert!(text.contains("\nStateDirectory=rm-ci\n"));
        assert_eq!(exec_binary(&text), Some("/opt/rm/bin/runner-manager"));
        assert_eq!(state_dir_of(&text), Some("/var/lib/rm-ci"));
        for hardening in [
            "CapabilityBoundingSet=CAP_CHOWN CAP_DAC_OVERRIDE CAP_FOWNER CAP_KILL CAP_SETGID CAP_SETUID",
            "ProtectSystem=full",
            "ProtectHome=yes",
            "Delegate=yes",
            "KillMode=process",
            "LimitCORE=0",
            "UMask=0077",
            "WantedBy=multi-user.target",
        ] {
            assert!(text.lines().any(|l| l == hardening), "{hardening}");
        }
    }

    #[test]
    fn a_system_state_dir_outside_var_lib_is_named_in_full_and_not_made() {
        let text = render(
            Kind::System,
            Path::new("/usr/bin/runner-manager"),
            Path::new("/srv/rm"),
            "1",
        );
        assert!(!keys(&text).contains(&"StateDirectory"));
        assert!(!keys(&text).contains(&"StateDirectoryMode"));
        assert_eq!(state_dir_of(&text), Some("/srv/rm"));
        assert!(check_system_state_dir(Path::new("/srv/rm")).is_ok());
        assert_eq!(
            hidden_by_protect_home(Path::new("/root/runner-manager")),
            Some("/root")
        );
        assert_eq!(hidden_by_protect_home(Path::new("/homework/rm")), None);
        assert_eq!(hidden_by_protect_home(Path::new("/usr/local/bin/rm")), None);
        for hidden in ["/home/ci/state", "/root/rm", "/etc/rm", "/usr/local/rm"] {
            let e = check_system_state_dir(Path::new(hidden)).unwrap_err();
            assert!(e.0.contains("Protect"), "{hidden}: {}", e.0);
        }
    }

    #[test]
    fn a_user_unit_leaves_out_exactly_what_a_user_manager_cannot_honour() {
        let text = render(
            Kind::User,
            Path::new("/home/ci/.local/bin/runner-manager"),
            Path::new("/home/ci/.local/state/runner-manager"),
            "1",
        );
        let left_out: Vec<&str> = USER_LEFT_OUT.iter().map(|(k, _)| *k).collect();
        let want: Vec<&str> = keys(TEMPLATE)
            .into_iter()
            .filter(|k| !left_out.contains(k))
            .collect();
        assert_eq!(keys(&text), want, "every other packaged directive is kept");
        for k in &left_out {
            assert!(keys(TEMPLATE).contains(k), "{k} is in the packaged unit");
            assert!(
                text.contains(&format!("# {k}= left out of a user unit: ")),
                "{k}"
            );
        }
        assert!(text.lines().any(|l| l == "WantedBy=default.target"));
        assert!(text.lines().any(|l| l == "KillMode=process"));
        assert!(text.lines().any(|l| l == "LockPersonality=yes"));
        assert_eq!(
            state_dir_of(&text),
            Some("/home/ci/.local/state/runner-manager")
        );
    }

    #[test]
    fn paths_systemd_would_reinterpret_are_refused() {
        assert!(check_path(Path::new("/usr/bin/runner-manager")).is_ok());
        for bad in [
            "relative/bin",
            "/opt/my dir/rm",
            "/opt/100%/rm",
            "/opt/$HOME/rm",
            "/opt/a\"b",
            "/opt/a\\b",
            "/opt/a;b",
        ] {
            assert!(check_path(Path::new(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_unit_without_the_marker_is_not_ours() {
        assert!(!is_ours("[Service]\nExecStart=/usr/bin/x\n"));
        assert!(!is_ours(&format!(" {MARKER}\n")));
        assert!(is_ours(&format!("# note\n{MARKER} x\n")));
    }
}
