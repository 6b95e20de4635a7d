//! Which supervisor runs this host's daemon: whether systemd is the init system
//! (`/run/systemd/system`, as sd_booted(3) checks), and where to send an operator
//! whose host has another (runit, s6, OpenRC, supervisord: docs/supervisors.md), so
//! that no command sends a host without systemd to `systemctl`.

use std::path::{Path, PathBuf};

/// The directory systemd makes when it runs as this machine's init system, as
/// sd_booted(3) checks: without it there is no manager to load a unit.
pub const SYSTEMD_RUN_DIR: &str = "/run/systemd/system";

/// The variable that moves [`SYSTEMD_RUN_DIR`], so tests can run `service` and
/// `doctor` both with and without a systemd.
pub const SYSTEMD_RUN_DIR_ENV: &str = "RUNNER_MANAGER_SYSTEMD_RUN_DIR";

/// The page with a tested recipe for each other supervisor.
pub const RECIPES: &str = "docs/supervisors.md";

/// Where to look for a running systemd: `$RUNNER_MANAGER_SYSTEMD_RUN_DIR`, else
/// `/run/systemd/system`.
pub fn systemd_run_dir() -> PathBuf {
    match std::env::var_os(SYSTEMD_RUN_DIR_ENV) {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(SYSTEMD_RUN_DIR),
    }
}

/// Whether systemd runs: `dir` is a directory (not followed if a link, as
/// sd_booted(3) does not).
pub fn systemd_runs(dir: &Path) -> bool {
    std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir())
}

/// What to do instead of `systemctl` on a host where systemd does not run.
pub fn instead() -> String {
    format!(
        "run 'runner-manager daemon' under the supervisor this host has, with a recipe \
         from {RECIPES} (runit, s6, OpenRC, supervisord: each restarts it on exit 75 \
         and on a crash, and stops only its pid, never the runners)"
    )
}

/// Why there is no unit to manage on a host where systemd does not run, and what to
/// do instead.
pub fn without_systemd(dir: &Path) -> String {
    format!(
        "systemd is not running on this host (no {}), so there is no manager to run a \
         unit; {}",
        dir.display(),
        instead()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_directory_says_systemd_runs() {
        let d = std::env::temp_dir().join(format!("rm-sd-booted-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        assert!(!systemd_runs(&d));
        std::fs::create_dir_all(d.join("system")).unwrap();
        assert!(systemd_runs(&d.join("system")));
        std::os::unix::fs::symlink(d.join("system"), d.join("link")).unwrap();
        assert!(!systemd_runs(&d.join("link")), "a link is not followed");
        std::fs::write(d.join("file"), "").unwrap();
        assert!(!systemd_runs(&d.join("file")));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn without_systemd_names_the_recipes_and_not_systemctl() {
        let s = without_systemd(Path::new("/run/systemd/system"));
        assert!(
            s.contains(RECIPES) && s.contains("runner-manager daemon"),
            "{s}"
        );
        assert!(!s.contains("systemctl"), "{s}");
    }
}
