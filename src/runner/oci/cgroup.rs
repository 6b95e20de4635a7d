//! An `oci` attempt's meters come from its container's own cgroup, not from the
//! `podman run` client the daemon watches as the attempt's process: Podman names it
//! (`inspect --format={{.State.CgroupPath}}`, a path under the cgroup v2 mount, once
//! the container runs), and its `memory.current`, `memory.peak`, `cpu.stat` and
//! `pids.current` are read as a native attempt's cgroup is.

use crate::runner::CgroupUsage;
use std::path::{Component, Path, PathBuf};

/// The variable naming where the cgroup v2 hierarchy is mounted, in place of
/// [`DEFAULT_ROOT`] (a host that mounts it elsewhere; the tests' fake cgroup files).
pub const ROOT_ENV: &str = "RUNNER_MANAGER_CGROUP_ROOT";

/// Where the cgroup v2 hierarchy is mounted, and what Podman's `CgroupPath` is
/// relative to.
pub const DEFAULT_ROOT: &str = "/sys/fs/cgroup";

/// [`ROOT_ENV`] when it is an absolute path, else [`DEFAULT_ROOT`].
pub fn root() -> PathBuf {
    std::env::var_os(ROOT_ENV)
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .unwrap_or_else(|| PathBuf::from(DEFAULT_ROOT))
}

/// The container's cgroup directory from Podman's answer: the path under `root`, or
/// `None` while it has none (not yet running: empty, `<no value>`) or when the answer
/// would leave `root` (a `..`), which is never read.
pub fn dir_of(root: &Path, answer: &str) -> Option<PathBuf> {
    let path = Path::new(answer.trim());
    let mut dir = root.to_path_buf();
    let mut parts = 0;
    for c in path.components() {
        match c {
            Component::RootDir | Component::CurDir => {}
            Component::Normal(p) if p != "<no value>" => {
                dir.push(p);
                parts += 1;
            }
            _ => return None,
        }
    }
    (parts > 0).then_some(dir)
}

fn read_u64(p: &Path) -> Option<u64> {
    std::fs::read_to_string(p).ok()?.trim().parse().ok()
}

/// The container cgroup's counters (cgroup v2 files); `None` once it is gone or
/// gives no memory figure.
pub fn usage(dir: &Path) -> Option<CgroupUsage> {
    let memory_current = read_u64(&dir.join("memory.current"))?;
    let cpu_usec = std::fs::read_to_string(dir.join("cpu.stat"))
        .ok()
        .and_then(|s| {
            s.lines()
                .filter_map(|l| l.split_once(' '))
                .find(|(k, _)| *k == "usage_usec")
                .and_then(|(_, v)| v.trim().parse().ok())
        });
    Some(CgroupUsage {
        memory_current: Some(memory_current),
        memory_peak: read_u64(&dir.join("memory.peak")),
        cpu_usec,
        pids_current: read_u64(&dir.join("pids.current")),
    })
}

/// How many processes the container's memory limit has killed (`oom_kill` in its
/// cgroup's `memory.events`); `None` once the cgroup is gone.
pub fn oom_kills(dir: &Path) -> Option<u64> {
    std::fs::read_to_string(dir.join("memory.events"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("oom_kill "))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oom_kills_are_read_from_memory_events_and_none_once_gone() {
        let dir = std::env::temp_dir().join(format!("rm-oci-events-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(oom_kills(&dir), None);
        std::fs::write(
            dir.join("memory.events"),
            "low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n",
        )
        .unwrap();
        assert_eq!(oom_kills(&dir), Some(2));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn podmans_answer_is_a_path_under_the_root_never_outside_it() {
        let root = Path::new("/sys/fs/cgroup");
        let scope = "/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-4f2a.scope";
        assert_eq!(
            dir_of(root, &format!("{scope}\n")).unwrap(),
            Path::new("/sys/fs/cgroup").join(scope.trim_start_matches('/'))
        );
        assert_eq!(
            dir_of(root, "machine.slice/libpod-1.scope").unwrap(),
            Path::new("/sys/fs/cgroup/machine.slice/libpod-1.scope")
        );
        for none in ["", "\n", "/", "<no value>", "/a/../../etc", "../x"] {
            assert_eq!(dir_of(root, none), None, "{none:?}");
        }
    }

    #[test]
    fn the_counters_are_read_from_the_cgroup_files() {
        let d = std::env::temp_dir().join(format!("rm-oci-cgroup-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        assert_eq!(usage(&d), None, "no memory figure, no usage");
        std::fs::write(d.join("memory.current"), "1048576\n").unwrap();
        std::fs::write(d.join("memory.peak"), "2097152\n").unwrap();
        std::fs::write(
            d.join("cpu.stat"),
            "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n",
        )
        .unwrap();
        std::fs::write(d.join("pids.current"), "4\n").unwrap();
        assert_eq!(
            usage(&d),
            Some(CgroupUsage {
                memory_current: Some(1 << 20),
                memory_peak: Some(2 << 20),
                cpu_usec: Some(2_500_000),
                pids_current: Some(4),
            })
        );
        let _ = std::fs::remove_dir_all(&d);
    }
}
