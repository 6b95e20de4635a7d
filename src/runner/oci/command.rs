//! The Podman command lines, built purely from what the attempt and its profile say:
//! `run` (image by digest, five capabilities, limits, labels, no host mount, the JIT
//! config on stdin), and the `ps`, `rm` and `inspect` that find, remove and read what
//! an attempt left.

use super::{ATTEMPT_LABEL, HOST_LABEL, RUNNER_LABEL};

/// The capabilities a container keeps: with none, a job's `apt` (which changes owners
/// and drops to `_apt`) breaks; with these, root in the container is still no one on
/// the host (a rootless container's root is the daemon's user).
pub const KEPT_CAPS: &[&str] = &["CHOWN", "DAC_OVERRIDE", "FOWNER", "SETGID", "SETUID"];

/// Where the image holds its runner install (as `ghcr.io/actions/actions-runner` does).
pub const IMAGE_RUNNER_DIR: &str = "/home/runner";

/// What the container runs: read the JIT config from stdin into the runner's variable
/// (so it is in no argv, no file and no container config), then the runner. Exit
/// codes 43/44 say the handoff or the install was missing.
pub const BOOTSTRAP: &str = "IFS= read -r jit || exit 43; \
     export ACTIONS_RUNNER_INPUT_JITCONFIG=\"$jit\"; unset jit; \
     cd \"$RUNNER_MANAGER_RUNNER_DIR\" || exit 44; exec ./bin/Runner.Listener run";

/// The container's disk when the profile sets no `disk_max`.
pub const DEFAULT_DISK_MAX: u64 = 32 << 30;
/// Processes and threads when the profile sets no `pids_max`: a fork bomb stops here.
pub const DEFAULT_PIDS_MAX: u32 = 4096;

/// One attempt's container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSpec<'a> {
    /// The host's id (a label).
    pub host_id: &'a str,
    pub attempt: i64,
    /// The attempt's runner name (`domain::runner_name`): the container's name too,
    /// unique per host.
    pub runner_name: &'a str,
    /// `REF@sha256:...`, checked by `domain::execution::image`.
    pub image: &'a str,
    /// Thousandths of a CPU, bytes, processes; `None` = the default.
    pub cpu_max: Option<u32>,
    pub memory_max: Option<u64>,
    pub pids_max: Option<u32>,
    /// The writable layer's size in bytes ([`disk_size`]); `None` gives none, where
    /// none can hold (rootless Podman cannot set a size on most hosts).
    pub disk_size: Option<u64>,
    /// The host's and profile's variables (not secrets; checked by `runner_env`).
    pub env: &'a [(String, String)],
}

/// The size a container's writable layer gets: the profile's `disk_max`, or the
/// default, where a size holds (`quota`); none where it cannot, since Podman would
/// refuse the container (a profile that sets `disk_max` starts nowhere a size cannot
/// hold unless it says `limits=best-effort`: `reconcile::fitness`).
pub fn disk_size(disk_max: Option<u64>, quota: bool) -> Option<u64> {
    quota.then(|| disk_max.unwrap_or(DEFAULT_DISK_MAX))
}

/// `podman run ...` for one attempt, without the program name. Nothing from the host
/// is mounted; the JIT config is written to the container's stdin, never here.
pub fn run_args(s: &RunSpec) -> Vec<String> {
    let mut a: Vec<String> = vec![
        "run".into(),
        "--interactive".into(),
        format!("--name={}", s.runner_name),
        "--pull=missing".into(),
        "--cap-drop=all".into(),
    ];
    a.extend(KEPT_CAPS.iter().map(|c| format!("--cap-add={c}")));
    a.push(format!(
        "--pids-limit={}",
        s.pids_max.unwrap_or(DEFAULT_PIDS_MAX)
    ));
    if let Some(m) = s.cpu_max {
        a.push(format!("--cpus={}.{:03}", m / 1000, m % 1000));
    }
    if let Some(b) = s.memory_max {
        // Swap no further than memory: the limit is the limit.
        a.push(format!("--memory={b}"));
        a.push(format!("--memory-swap={b}"));
    }
    if let Some(size) = s.disk_size {
        a.push(format!("--storage-opt=size={size}"));
    }
    a.push(format!("--label={HOST_LABEL}={}", s.host_id));
    a.push(format!("--label={ATTEMPT_LABEL}={}", s.attempt));
    a.push(format!("--label={RUNNER_LABEL}={}", s.runner_name));
    a.push(format!(
        "--env=RUNNER_MANAGER_RUNNER_DIR={IMAGE_RUNNER_DIR}"
    ));
    for (k, v) in s.env {
        a.push(format!("--env={k}={v}"));
    }
    a.push("--entrypoint=/bin/sh".into());
    a.push(s.image.into());
    a.push("-c".into());
    a.push(BOOTSTRAP.into());
    a
}

/// `podman ps --all` of this host's containers (or one attempt's): one
/// `<name> <attempt label>` per line.
pub fn ps_args(host_id: &str, attempt: Option<i64>) -> Vec<String> {
    let mut a = vec![
        "ps".into(),
        "--all".into(),
        format!("--filter=label={HOST_LABEL}={host_id}"),
    ];
    if let Some(id) = attempt {
        a.push(format!("--filter=label={ATTEMPT_LABEL}={id}"));
    }
    a.push(format!(
        "--format={{{{.Names}}}} {{{{index .Labels \"{ATTEMPT_LABEL}\"}}}}"
    ));
    a
}

/// Reads `ps_args`' output: (name, attempt) per well-formed line.
pub fn parse_ps(out: &str) -> Vec<(String, i64)> {
    out.lines()
        .filter_map(|l| {
            let (name, id) = l.trim().split_once(' ')?;
            Some((name.to_string(), id.trim().parse().ok()?))
        })
        .collect()
}

/// `podman rm --force --time=0 NAMES...`.
pub fn rm_args(names: &[String]) -> Vec<String> {
    let mut a = vec!["rm".into(), "--force".into(), "--time=0".into()];
    a.extend(names.iter().cloned());
    a
}

/// `podman inspect` of whether the kernel's OOM killer ended the container.
pub fn oom_args(name: &str) -> Vec<String> {
    vec![
        "inspect".into(),
        "--type=container".into(),
        "--format={{.State.OOMKilled}}".into(),
        name.into(),
    ]
}

/// `podman inspect` of the container's cgroup (relative to the cgroup v2 mount; empty
/// until it runs).
pub fn cgroup_args(name: &str) -> Vec<String> {
    vec![
        "inspect".into(),
        "--type=container".into(),
        "--format={{.State.CgroupPath}}".into(),
        name.into(),
    ]
}

/// `podman --storage-opt=size=1G info`: whether Podman takes a container size here.
pub fn quota_probe_args() -> Vec<String> {
    vec![
        format!("--storage-opt=size={}", 1u64 << 30),
        "info".into(),
        "--format=json".into(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    const IMAGE: &str = "ghcr.io/actions/actions-runner:2.330.0@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn spec(env: &[(String, String)]) -> RunSpec<'_> {
        RunSpec {
            host_id: "0123abcd89ef4567",
            attempt: 42,
            runner_name: "rm-0123abcd-42",
            image: IMAGE,
            cpu_max: Some(1500),
            memory_max: Some(2 << 30),
            pids_max: None,
            disk_size: disk_size(None, true),
            env,
        }
    }

    #[test]
    fn the_run_line_is_pinned_capped_limited_labelled_and_mounts_nothing() {
        let env = [("JAVA_HOME".to_string(), "/opt/jdk".to_string())];
        let a = run_args(&spec(&env));
        let want = [
            "run",
            "--interactive",
            "--name=rm-0123abcd-42",
            "--pull=missing",
            "--cap-drop=all",
            "--cap-add=CHOWN",
            "--cap-add=DAC_OVERRIDE",
            "--cap-add=FOWNER",
            "--cap-add=SETGID",
            "--cap-add=SETUID",
            "--pids-limit=4096",
            "--cpus=1.500",
            "--memory=2147483648",
            "--memory-swap=2147483648",
            "--storage-opt=size=34359738368",
            "--label=runner-manager.host=0123abcd89ef4567",
            "--label=runner-manager.attempt=42",
            "--label=runner-manager.runner=rm-0123abcd-42",
            "--env=RUNNER_MANAGER_RUNNER_DIR=/home/runner",
            "--env=JAVA_HOME=/opt/jdk",
            "--entrypoint=/bin/sh",
            IMAGE,
            "-c",
            BOOTSTRAP,
        ];
        assert_eq!(a, want);
        // Exactly five capabilities, after dropping all; no mount of any kind.
        assert_eq!(a.iter().filter(|x| x.starts_with("--cap-add=")).count(), 5);
        for never in [
            "-v",
            "--volume",
            "--mount",
            "--privileged",
            "--rm",
            "--tmpfs",
        ] {
            assert!(
                !a.iter()
                    .any(|x| x == never || x.starts_with(&format!("{never}="))),
                "{never}"
            );
        }
        // The JIT config is read from stdin by the container, never passed here.
        assert!(
            !a.iter()
                .any(|x| x.contains("ACTIONS_RUNNER_INPUT_JITCONFIG=") && !x.contains("$jit"))
        );
    }

    #[test]
    fn the_profile_limits_replace_the_defaults() {
        let mut s = spec(&[]);
        (s.cpu_max, s.memory_max, s.pids_max) = (None, None, Some(512));
        s.disk_size = disk_size(Some(8 << 30), true);
        let a = run_args(&s);
        assert!(a.contains(&"--pids-limit=512".to_string()));
        assert!(a.contains(&"--storage-opt=size=8589934592".to_string()));
        // Where no size can hold, the container gets none (Podman would refuse it).
        s.disk_size = disk_size(Some(8 << 30), false);
        assert!(!run_args(&s).iter().any(|x| x.starts_with("--storage-opt")));
        assert!(
            !a.iter()
                .any(|x| x.starts_with("--cpus") || x.starts_with("--memory"))
        );
        s.cpu_max = Some(250);
        assert!(run_args(&s).contains(&"--cpus=0.250".to_string()));
    }

    #[test]
    fn leftovers_are_listed_by_label_and_read_back() {
        assert_eq!(
            ps_args("h1", Some(7)),
            [
                "ps",
                "--all",
                "--filter=label=runner-manager.host=h1",
                "--filter=label=runner-manager.attempt=7",
                "--format={{.Names}} {{index .Labels \"runner-manager.attempt\"}}"
            ]
        );
        assert_eq!(
            parse_ps("rm-h-7 7\nrm-h-8 8\ngarbage\nrm-h-x notanumber\n"),
            [("rm-h-7".to_string(), 7), ("rm-h-8".to_string(), 8)]
        );
        assert_eq!(
            rm_args(&["rm-h-7".into()]),
            ["rm", "--force", "--time=0", "rm-h-7"]
        );
        assert_eq!(oom_args("rm-h-7")[2], "--format={{.State.OOMKilled}}");
    }
}
