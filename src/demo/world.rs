//! A demo world: a simulated GitHub, a state directory and a store pointing at it, and the real daemon spawned on it; the pieces the daemon tests' worlds are built from too.

use super::DEMO_REPO;
use crate::domain::{CredentialRef, Host, ScalePolicy, Target, TargetScope};
use crate::sim::install::InstallShape;
use crate::sim::{Latency, SimConfig, SimGitHub, SimHandle};
use crate::store::{SqliteStore, Store};
use crate::timefmt::now_millis;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How a world is made: its target's poll interval, how far its GitHub is, the shape
/// of its runner install, and the room its host and `linux` profile give.
#[derive(Debug, Clone, Copy)]
pub struct WorldOptions {
    pub poll_interval_secs: u64,
    /// The simulated GitHub's distance (zero: loopback).
    pub latency: Latency,
    /// `Realistic` lays out a real release's file count (a few seconds, once).
    pub install: InstallShape,
    /// The host's capacity: 6 by default, room for both profiles at once, whatever
    /// this machine's CPU count.
    pub host_capacity: u32,
    /// The `linux` profile's `max_capacity` (4) and idle timeout (5 s) when the world
    /// creates it; `gpu` always has 2 and 5 s.
    pub linux_max: u32,
    pub linux_idle_timeout_secs: u64,
}

impl WorldOptions {
    pub fn new(poll_interval_secs: u64) -> WorldOptions {
        WorldOptions {
            poll_interval_secs,
            latency: Latency::default(),
            install: InstallShape::Small,
            host_capacity: 6,
            linux_max: 4,
            linux_idle_timeout_secs: 5,
        }
    }

    /// GitHub 120 ms away, 500 ms more per JIT config (±20%), and a realistic install.
    pub fn far(mut self) -> WorldOptions {
        self.latency = Latency::FAR;
        self.install = InstallShape::Realistic;
        self
    }

    /// A host of `capacity` whose `linux` profile holds at most `max` runners, each
    /// stopped after `idle_timeout_secs` without a job (the benchmarks' worlds).
    pub fn room(mut self, capacity: u32, max: u32, idle_timeout_secs: u64) -> WorldOptions {
        self.host_capacity = capacity;
        self.linux_max = max;
        self.linux_idle_timeout_secs = idle_timeout_secs;
        self
    }
}

/// Writes `token` to `path`, readable by its owner only, as a target's or a host's
/// token file must be (the demo world's, and the daemon and pool tests').
pub fn write_token_file(path: &Path, token: &str) -> Result<(), String> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    f.write_all(token.as_bytes()).map_err(|e| e.to_string())
}

// The pieces a world is made of, which the daemon tests' `World` is built on too: each
// does one step of `World::prepare_with`, so the two worlds cannot drift apart in how
// they set up a simulated GitHub and a store pointing at it.

/// Starts the simulated GitHub as `cfg` says.
pub fn start_sim(cfg: SimConfig) -> Result<SimHandle, String> {
    SimGitHub::start(cfg).map_err(|e| format!("cannot start the simulated GitHub: {e}"))
}

/// Opens (or creates) the store in `state_dir` and gives its host room for `capacity`
/// runners, whatever this machine's CPU count.
pub fn open_with_host(state_dir: &Path, capacity: u32) -> Result<(SqliteStore, Host), String> {
    let store = SqliteStore::open(state_dir).map_err(|e| e.to_string())?;
    let mut host = store.host_or_create().map_err(|e| e.to_string())?;
    host.capacity = capacity;
    store.update_host(&host).map_err(|e| e.to_string())?;
    Ok((store, host))
}

/// Writes the PAT `token` to the token file `path`; `known` tells `sim` of it, so it
/// authenticates (unknown, every request with it is answered 401).
pub fn sim_token_file(
    sim: &SimHandle,
    path: &Path,
    token: &str,
    known: bool,
) -> Result<(), String> {
    if known {
        sim.add_pat(token);
    }
    write_token_file(path, token)
}

/// The scope of the repository `owner/repo`.
pub fn repo_scope(repo: &str) -> TargetScope {
    let (owner, repo) = repo.split_once('/').unwrap_or((repo, ""));
    TargetScope::Repo {
        owner: owner.into(),
        repo: repo.into(),
    }
}

/// A target `name` for `scope` on `sim`, authenticated by the token file `token_file`
/// and polled every `poll_interval_secs`, with the default bound on requests in flight.
pub fn sim_target(
    sim: &SimHandle,
    name: &str,
    scope: TargetScope,
    token_file: PathBuf,
    poll_interval_secs: u64,
) -> Target {
    Target {
        name: name.into(),
        scope,
        api_url: sim.url().to_string(),
        credential: CredentialRef::TokenFile { path: token_file },
        poll_interval_secs,
        repos: vec![],
        max_in_flight: crate::domain::target::DEFAULT_MAX_IN_FLIGHT,
        secondary_limit: Some(crate::domain::target::DEFAULT_SECONDARY_LIMIT),
    }
}

/// A profile `name` of `target` on `host` whose runners carry `labels` (besides
/// self-hosted, the host's OS and arch) and run the install at `runner_dir`; its
/// capacities and timeouts are the defaults until the caller sets them.
pub fn sim_profile(
    name: &str,
    target: &str,
    host: &Host,
    labels: &[String],
    runner_dir: &Path,
) -> Result<ScalePolicy, String> {
    let mut p = ScalePolicy::new(name, target, &host.id);
    p.set_labels("--labels", labels, &host.os, &host.arch)
        .map_err(|e| e.to_string())?;
    p.runner_dir = Some(runner_dir.to_path_buf());
    Ok(p)
}

/// A prepared demo world: the simulated GitHub, a state directory with a target and two
/// profiles pointing at it, and a simulated runner install. Tests and benchmarks use
/// this too.
pub struct World {
    pub sim: SimHandle,
    pub state_dir: PathBuf,
    pub binary: PathBuf,
    /// The shape of the runner install at `state_dir/runner` (what a benchmark's
    /// baselines lay out too).
    pub install: InstallShape,
    pub(super) owned_dir: bool,
}

impl World {
    /// `binary` is the runner-manager executable (the simulated runner is the same
    /// program under the runner's names).
    pub fn prepare(
        state_dir: Option<PathBuf>,
        binary: &Path,
        poll_interval_secs: u64,
    ) -> Result<World, String> {
        World::prepare_with(state_dir, binary, WorldOptions::new(poll_interval_secs))
    }

    /// [`World::prepare`] with the distance and install shape of `opts`.
    pub fn prepare_with(
        state_dir: Option<PathBuf>,
        binary: &Path,
        opts: WorldOptions,
    ) -> Result<World, String> {
        let sim = start_sim(SimConfig {
            latency: opts.latency,
            ..SimConfig::default()
        })?;
        let owned_dir = state_dir.is_none();
        let state_dir = match state_dir {
            Some(d) => d,
            None => std::env::temp_dir().join(format!(
                "runner-manager-demo-{}-{}",
                std::process::id(),
                now_millis()
            )),
        };
        std::fs::create_dir_all(&state_dir).map_err(|e| format!("{}: {e}", state_dir.display()))?;
        close_to_others(&state_dir)?;
        let token = format!(
            "ghp_demo{:016x}",
            now_millis() as u64 ^ 0x9e37_79b9_7f4a_7c15
        );
        sim.add_repo(DEMO_REPO, true);
        let token_file = state_dir.join("demo-token");
        sim_token_file(&sim, &token_file, &token, true)?;
        let runner_dir = state_dir.join("runner");
        // A realistic install over a small one adds its files; laying out again is cheap
        // next to checking which shape is there.
        if !runner_dir.join("bin/Runner.Listener").exists() || opts.install != InstallShape::Small {
            crate::sim::install::lay_out_shaped(&runner_dir, binary, opts.install)
                .map_err(|e| format!("cannot lay out the simulated runner: {e}"))?;
        }
        let (store, host) = open_with_host(&state_dir, opts.host_capacity)?;
        let target = sim_target(
            &sim,
            "demo",
            repo_scope(DEMO_REPO),
            token_file,
            opts.poll_interval_secs,
        );
        if store.target("demo").is_err() {
            store.add_target(&target).map_err(|e| e.to_string())?;
        } else {
            store.update_target(&target).map_err(|e| e.to_string())?;
        }
        let profiles = [
            (
                "linux",
                vec!["linux"],
                opts.linux_max,
                opts.linux_idle_timeout_secs,
            ),
            ("gpu", vec!["gpu"], 2, 5),
        ];
        for (name, labels, max, idle_timeout_secs) in profiles {
            if store.profile(name).is_ok() {
                continue;
            }
            let labels: Vec<String> = labels.into_iter().map(String::from).collect();
            let mut p = sim_profile(name, "demo", &host, &labels, &runner_dir)?;
            p.max_capacity = max;
            p.idle_timeout_secs = idle_timeout_secs;
            store.add_profile(&p).map_err(|e| e.to_string())?;
        }
        Ok(World {
            sim,
            state_dir,
            binary: binary.to_path_buf(),
            install: opts.install,
            owned_dir,
        })
    }

    /// Starts `runner-manager daemon` on the world's state directory, in a process
    /// group of its own: the terminal's Ctrl-C reaches the demo, which drains the
    /// daemon first, and not the daemon, which would stop with runners still busy.
    /// Out of the terminal's reach, it is sent SIGTERM when the demo dies (a second
    /// Ctrl-C, a kill), whose simulated GitHub goes with it.
    pub fn spawn_daemon(&self, log: &Path) -> Result<Child, String> {
        use std::os::unix::process::CommandExt;
        let log = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
        // SAFETY: getpid has no preconditions.
        let demo = unsafe { libc::getpid() };
        let mut cmd = Command::new(&self.binary);
        // SAFETY: between fork and exec the closure calls only prctl, getppid and
        // raise, which are async-signal-safe, and allocates nothing.
        unsafe {
            cmd.pre_exec(move || {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                // The demo may have died before the call: then no signal would come.
                if libc::getppid() != demo {
                    libc::raise(libc::SIGTERM);
                }
                Ok(())
            });
        }
        cmd.process_group(0)
            .arg("--state-dir")
            .arg(&self.state_dir)
            .arg("daemon")
            .arg("--drain-timeout")
            .arg("10")
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot start the daemon: {e}"))
    }
}

/// Takes read and write away from group and others on the state directory (a
/// directory given with `--state-dir` may have been made 0755 by mkdir): the demo's
/// books are as private as a real host's, and its own `doctor` passes. Search (x) is
/// left as it is, since runners under their own uids pass through to their roots.
fn close_to_others(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .permissions()
        .mode()
        & 0o7777;
    if mode & 0o066 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode & !0o066))
            .map_err(|e| format!("cannot make {} private: {e}", dir.display()))?;
    }
    Ok(())
}

impl Drop for World {
    fn drop(&mut self) {
        self.sim.shutdown();
    }
}

/// Sends SIGTERM and waits (bounded) for the child to exit.
pub fn stop_child(child: &mut Child, within: Duration) -> Option<std::process::ExitStatus> {
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let deadline = Instant::now() + within;
    loop {
        if let Ok(Some(st)) = child.try_wait() {
            return Some(st);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            return child.wait().ok();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_file_is_its_owners_alone_and_overwritten_whole() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("rm-demo-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("token");
        write_token_file(&path, "ghp_longer_first").unwrap();
        write_token_file(&path, "ghp_short").unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        let back = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!((mode, back.as_str()), (0o600, "ghp_short"));
    }

    #[test]
    fn world_room_sets_the_host_and_linux_profile_and_nothing_else() {
        let d = WorldOptions::new(3);
        assert_eq!(
            (d.host_capacity, d.linux_max, d.linux_idle_timeout_secs),
            (6, 4, 5)
        );
        let r = WorldOptions::new(3).far().room(8, 2, 30);
        assert_eq!(
            (r.host_capacity, r.linux_max, r.linux_idle_timeout_secs),
            (8, 2, 30)
        );
        assert_eq!(
            (r.poll_interval_secs, r.install),
            (3, InstallShape::Realistic)
        );
    }
}
