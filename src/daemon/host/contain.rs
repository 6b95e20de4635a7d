//! The daemon's containment: which isolation is in effect and which cgroups the host
//! has (decided at start and again when the host's settings change), choosing each
//! attempt's uid with its intent, readying its identity, cgroup and root before any
//! GitHub call (so a host failure costs no API request), and killing everything an
//! attempt left by its cgroup and its uid.

use crate::domain::isolation::{self, Powers};
use crate::domain::{Attempt, Host, InEffect, ScalePolicy, UidRange};
use crate::runner::cgroup::{AttemptCgroup, Cgroups, JoinFds, Limits};
use crate::runner::claim::{self, ClaimError, UidClaim};
use crate::runner::{
    self, PreparedRoot, RootOptions, RunAsUser, SpawnSpec, caps, leftovers, shared_dirs, uid,
};
use crate::secret::Secret;
use crate::timefmt::Millis;
use crate::{log_info, log_warn};
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// What the daemon runs runners with.
#[derive(Debug, Clone)]
pub struct Containment {
    pub isolation: InEffect,
    pub cgroups: Cgroups,
    /// Where runner roots, caches and kept workspaces live: this host's own directory
    /// in the host's `runtime_root` (`runner::root::runtime_dir`), so hosts given one
    /// `runtime_root` never see each other's; `None` is the state directory.
    pub runtime_root: Option<PathBuf>,
    /// The host's `runtime_root` itself, where roots lived before they moved into a
    /// directory per host: an attempt started before the upgrade still has its root
    /// there (`attempt_root`).
    pub legacy_runtime: Option<PathBuf>,
    /// The host's short id: names our cgroup base, so a process in another daemon's
    /// base is never ours to signal (`uid::foreign_processes`).
    pub host_tag: String,
    /// Without per-attempt uids, why a profile's `run_as` user could not reach its
    /// runner root (a directory above the state directory closed to others). Said
    /// when such a runner starts, not before: a host with no `run_as` profile has
    /// nothing to fix (issue 38).
    pub run_as_blocked: Option<RunAsBlocked>,
    /// The shared directories each cleanup walks for what the attempt's uid left
    /// (`runner::shared_dirs`): found once when per-attempt uids come into effect;
    /// `None` until then, when the walk covers `shared_dirs::ALWAYS`.
    pub shared_dirs: Option<Arc<Vec<PathBuf>>>,
}

/// A closed directory on the way to the runner roots, and whether the daemon has
/// said so yet (once per containment decided).
#[derive(Debug, Clone)]
pub struct RunAsBlocked {
    pub closed: PathBuf,
    said: Arc<AtomicBool>,
}

impl RunAsBlocked {
    pub fn new(closed: PathBuf) -> RunAsBlocked {
        RunAsBlocked {
            closed,
            said: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The warning for `policy` when it runs as another user, the first time only.
    pub fn warning(&self, policy: &ScalePolicy) -> Option<String> {
        let user = policy.run_as.as_deref()?;
        if self.said.swap(true, Ordering::Relaxed) {
            return None;
        }
        Some(format!(
            "profile {} runs as {user}, who cannot reach its runner root: {}",
            policy.name,
            closed_advice(&self.closed)
        ))
    }
}

/// What a directory closed to other users stops, and the two ways out.
fn closed_advice(closed: &Path) -> String {
    format!(
        "{} is closed to other users; open it with chmod o+x {} (others may pass \
         through, not list it), or move the state directory",
        closed.display(),
        closed.display()
    )
}

impl Containment {
    /// Nothing contained: for a daemon that has not looked yet.
    pub fn none() -> Containment {
        Containment {
            isolation: InEffect::None {
                why: "not yet decided".into(),
            },
            cgroups: Cgroups::none("not yet detected"),
            runtime_root: None,
            legacy_runtime: None,
            host_tag: String::new(),
            run_as_blocked: None,
            shared_dirs: None,
        }
    }

    /// The directory runner roots (`attempts/`), caches and kept workspaces live in.
    pub fn runtime_dir<'a>(&'a self, state_dir: &'a Path) -> &'a Path {
        self.runtime_root.as_deref().unwrap_or(state_dir)
    }

    /// Where attempt `a`'s root is: under this host's runtime directory, or, for an
    /// attempt started before roots moved into a directory per host, at
    /// `RUNTIME/attempts/<id>` when that is a real directory owned by the attempt's uid
    /// (without one: whose `.runner` names the attempt's runner, which carries this
    /// host's short id). Another host's root in the old shared layout has
    /// another owner once runner uids are claimed host-wide, so it is never taken for
    /// this attempt's. The slots of such an attempt are in the old layout too: its
    /// runtime directory is its root's grandparent.
    pub fn attempt_root(&self, state_dir: &Path, a: &Attempt) -> PathBuf {
        let root = runner::attempt_root(self.runtime_dir(state_dir), a.id);
        if let Some(old) = &self.legacy_runtime
            && std::fs::symlink_metadata(&root).is_err()
        {
            let legacy = runner::attempt_root(old, a.id);
            let ours = match a.runner_uid {
                Some(u) => {
                    std::fs::symlink_metadata(&legacy).is_ok_and(|m| m.is_dir() && m.uid() == u)
                }
                // Without a uid of its own, every host's roots have one owner: only the
                // runner's registration, which carries this host's runner name, tells.
                None => {
                    std::fs::symlink_metadata(&legacy).is_ok_and(|m| m.is_dir())
                        && registered_as(&legacy, &a.runner_name)
                }
            };
            if ours {
                return legacy;
            }
        }
        root
    }
}

/// Whether the root's registration file (`.runner`, read without following a link and
/// no more than 64 KiB of it) names `runner_name`.
fn registered_as(root: &Path, runner_name: &str) -> bool {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let Ok(f) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(root.join(".runner"))
    else {
        return false;
    };
    let mut text = String::new();
    let _ = f.take(64 * 1024).read_to_string(&mut text);
    text.contains(&format!("\"{runner_name}\""))
}

/// Decides the containment for `host` and gets the host ready for it: the cgroup
/// base made (and, under systemd delegation, the daemon moved into its leaf), the
/// state directory opened just enough for runners to reach their own roots, and with
/// per-attempt uids in effect, every capability but the needed ones dropped.
pub fn establish(host: &Host, state_dir: &Path, cgroups: Option<Cgroups>) -> Containment {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    let powers = Powers {
        can_switch_users: caps::can_switch_users(),
        uid: euid,
    };
    let mut in_effect = isolation::effective(host.isolation, host.runner_uids, powers);
    let cgroups = cgroups.unwrap_or_else(|| {
        let cg = Cgroups::detect(host.short_id());
        match cg.prepare() {
            Ok(()) => cg,
            Err(e) => Cgroups::none(&e.to_string()),
        }
    });
    let host_runtime = runner::root::host_runtime(host);
    let runtime = host_runtime.as_deref();

    let open = |d: &Path| -> Result<(), Unopened> {
        open_for_runners(d)?;
        // The runtime root itself lets runners through to this host's directory in
        // it, as it did when roots lived in it (0711: traversable, not listable).
        if let Some(r) = &host.runtime_root {
            std::fs::set_permissions(r, std::fs::Permissions::from_mode(0o711)).map_err(|e| {
                Unopened::Io(format!("cannot set the mode of {}: {e}", r.display()))
            })?;
        }
        match runtime {
            Some(r) if r != d => open_for_runners(r),
            _ => Ok(()),
        }
    };
    let mut run_as_blocked = None;
    match in_effect {
        InEffect::Uids(_) => {
            if let Err(e) = open(state_dir) {
                in_effect = InEffect::Refused { why: e.to_string() };
            } else if euid == 0
                && let Err(e) = caps::keep_only_needed()
            {
                log_warn!("capabilities_kept", error = e);
            }
        }
        // A profile's `run_as` user must reach its root too, with or without
        // per-attempt uids; a daemon that cannot switch users runs none. Whether a
        // profile has one is known at its start (`ready`), which says it then.
        InEffect::None { .. } if powers.can_switch_users => match open(state_dir) {
            Ok(()) => {}
            Err(Unopened::Closed(dir)) => run_as_blocked = Some(RunAsBlocked::new(dir)),
            Err(e @ Unopened::Io(_)) => log_warn!("state_dir_not_opened", error = e),
        },
        _ => {}
    }
    Containment {
        isolation: in_effect,
        cgroups,
        runtime_root: runner::root::host_runtime(host),
        legacy_runtime: host.runtime_root.clone(),
        host_tag: host.short_id().to_string(),
        run_as_blocked,
        shared_dirs: None,
    }
}

/// The shared directories the containment's cleanups walk: with per-attempt uids,
/// `prev`'s when it found them, else found now (`runner::shared_dirs::discover`, over
/// the groups of the range's users, the state directory and runtime root not
/// searched) and said once in the log; without, none found.
pub fn find_shared_dirs(c: &mut Containment, prev: &Containment, state_dir: &Path) {
    let InEffect::Uids(range) = c.isolation else {
        return;
    };
    if let Some(found) = &prev.shared_dirs {
        c.shared_dirs = Some(found.clone());
        return;
    }
    // The runner users' groups: a directory one of them may write in counts. A range
    // is read up to 4096 users (passwd is read once per uid).
    let gids: BTreeSet<u32> = range
        .iter()
        .take(4096)
        .filter_map(|u| uid::lookup_uid(u).ok().flatten().map(|u| u.gid))
        .collect();
    let mut skip = vec![state_dir.to_path_buf()];
    skip.extend(c.runtime_root.clone());
    skip.extend(c.legacy_runtime.clone());
    let d = shared_dirs::discover(&gids, &skip, &shared_dirs::Bounds::default());
    log_info!(
        "shared_dirs_found",
        count = d.dirs.len(),
        mounts = d.mounts,
        looked = d.looked,
        millis = d.millis,
        truncated = d.truncated,
        dirs = shared_dirs::summary(&d.dirs, 24)
    );
    if d.truncated {
        log_warn!(
            "shared_dirs_bounded",
            looked = d.looked,
            detail = "the search for shared directories stopped at its bound; the ones \
                      found and the usual ones (/tmp, /var/tmp, /dev/shm, /run/lock) are \
                      swept"
        );
    }
    c.shared_dirs = Some(Arc::new(d.dirs));
}

/// Claims the containment's runner uids host-wide (`runner::claim`, in the directory
/// `claim::lock_dir` names), so no other daemon on the host hands them out, kills
/// their processes or removes their files. A refusal makes the isolation `refused`
/// (no runner starts) and is returned: at start the daemon exits on it. Without
/// per-attempt uids nothing is claimed, and what was held is kept until the daemon
/// ends (attempts of those uids may still be cleaning up).
pub fn claim_uids(
    slot: &std::sync::Mutex<Option<UidClaim>>,
    state_dir: &Path,
    c: &mut Containment,
) -> Option<ClaimError> {
    let InEffect::Uids(range) = c.isolation else {
        return None;
    };
    let mut held = slot.lock().unwrap_or_else(|p| p.into_inner());
    let result = match held.as_mut() {
        Some(claim) => claim.claim(range),
        None => UidClaim::open(&claim::lock_dir(), state_dir).and_then(|mut claim| {
            claim.claim(range)?;
            *held = Some(claim);
            Ok(())
        }),
    };
    match result {
        Ok(()) => None,
        Err(e) => {
            log_warn!("runner_uids_not_claimed", uids = range, error = e);
            c.isolation = InEffect::Refused { why: e.to_string() };
            Some(e)
        }
    }
}

/// The state directory's modes for runners under other uids: the directory and
/// `attempts/` (and `homes/`) traversable but not listable (0711), so a runner reaches
/// its own root by name and nothing else; the store, the logs and the lock stay 0600
/// and 0700. Every directory above the state directory must let others through too,
/// or no runner can reach its root: that is refused, naming the directory.
pub fn open_for_runners(state_dir: &Path) -> Result<(), Unopened> {
    let io = |what: &str, p: &Path, e: std::io::Error| {
        Unopened::Io(format!("cannot {what} {}: {e}", p.display()))
    };
    for d in ["attempts", "homes"] {
        let p = state_dir.join(d);
        std::fs::create_dir_all(&p).map_err(|e| io("create", &p, e))?;
    }
    for p in [
        state_dir.to_path_buf(),
        state_dir.join("attempts"),
        state_dir.join("homes"),
    ] {
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o711))
            .map_err(|e| io("set the mode of", &p, e))?;
    }
    let abs = std::fs::canonicalize(state_dir).map_err(|e| io("resolve", state_dir, e))?;
    match first_closed_ancestor(&abs) {
        Some(closed) => Err(Unopened::Closed(closed)),
        None => Ok(()),
    }
}

/// Why the state directory could not be opened to runners of other uids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unopened {
    /// A directory above it lets no other user through.
    Closed(PathBuf),
    /// Creating, resolving or setting the mode of a directory failed.
    Io(String),
}

impl std::fmt::Display for Unopened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unopened::Closed(dir) => write!(
                f,
                "runners under their own uids cannot reach their roots: {}",
                closed_advice(dir)
            ),
            Unopened::Io(why) => f.write_str(why),
        }
    }
}

/// The first directory above `path` (the path itself excluded) that others cannot
/// pass through.
fn first_closed_ancestor(path: &Path) -> Option<PathBuf> {
    path.ancestors().skip(1).find_map(|a| {
        let m = std::fs::metadata(a).ok()?;
        (m.mode() & 0o001 == 0).then(|| a.to_path_buf())
    })
}

/// Which uids of the host's range are users (and their primary gids), from passwd,
/// asked again a minute later: the plan hands out the usable uids no open attempt
/// holds, lowest first, and passwd is not read for every uid every pass.
#[derive(Debug, Default)]
pub struct UidBook {
    known: BTreeMap<u32, (Option<u32>, Millis)>,
}

/// How long a uid's passwd entry (or its absence) is trusted.
const PASSWD_FOR: Millis = 60_000;

impl UidBook {
    /// Up to `want` uids of `range` that have a passwd entry and that no attempt of
    /// `open` holds, lowest first, with their gids.
    pub fn free(
        &mut self,
        range: UidRange,
        open: &[Attempt],
        want: usize,
        now: Millis,
    ) -> Vec<(u32, u32)> {
        let held: BTreeSet<u32> = open.iter().filter_map(Attempt::holds_uid).collect();
        let mut out = Vec::new();
        for u in range.iter() {
            if out.len() >= want {
                break;
            }
            if held.contains(&u) {
                continue;
            }
            if let Some(gid) = self.gid_of(u, now) {
                out.push((u, gid));
            }
        }
        out
    }

    fn gid_of(&mut self, uid: u32, now: Millis) -> Option<u32> {
        if let Some((gid, at)) = self.known.get(&uid)
            && now - at < PASSWD_FOR
        {
            return *gid;
        }
        let gid = uid::lookup_uid(uid).ok().flatten().map(|u| u.gid);
        self.known.insert(uid, (gid, now));
        gid
    }
}

/// An attempt ready to be spawned: who it runs as, its cgroup and root.
pub struct Ready {
    pub user: Option<RunAsUser>,
    pub cgroup: Option<AttemptCgroup>,
    pub join: Option<std::sync::Arc<JoinFds>>,
    pub root: PreparedRoot,
    /// Per-attempt isolation: no new privileges, no ambient capabilities.
    pub contain: bool,
    /// The variables the host and profile set (`runner_env::merged`), the starter's
    /// to fill.
    pub env: Vec<(String, String)>,
}

impl Ready {
    /// How the readied attempt's runner is spawned: as its user, with its own `HOME`
    /// and `TMPDIR` when it has one, joined to its cgroup, contained. The one place a
    /// `Ready` becomes a [`SpawnSpec`] (the daemon's starts and the contain bench).
    pub fn spawn_spec<'a>(
        &'a self,
        log_path: &'a Path,
        jit_config: &'a Secret,
        pid_file: Option<&'a Path>,
    ) -> SpawnSpec<'a> {
        SpawnSpec {
            root: &self.root.root,
            log_path,
            jit_config,
            run_as: self.user.as_ref(),
            extra_env: &self.env,
            home: self.user.as_ref().map(|_| self.root.home_dir.as_path()),
            tmp: self.user.as_ref().map(|_| self.root.tmp_dir.as_path()),
            cgroup: self.join.clone(),
            contain: self.contain,
            pid_file,
        }
    }
}

/// Why an attempt could not be readied: a host reason, deterministic for the profile
/// (it holds the profile's starts; see `reconcile::hold`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostFailure(pub String);

impl std::fmt::Display for HostFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Readies a `pending` attempt: its identity (a uid with a passwd entry and nothing
/// left running under it), its cgroup with the profile's limits, and its root owned by
/// its uid. Touches nothing on GitHub.
pub fn ready(
    c: &Containment,
    state_dir: &Path,
    install: &Path,
    policy: &ScalePolicy,
    a: &Attempt,
) -> Result<Ready, HostFailure> {
    if let InEffect::Refused { why } = &c.isolation {
        return Err(HostFailure(format!("isolation: {why}")));
    }
    let per_attempt = matches!(c.isolation, InEffect::Uids(_));
    let user = if per_attempt {
        let Some(u) = a.runner_uid else {
            return Err(HostFailure(
                "identity: no runner uid was chosen for the attempt".into(),
            ));
        };
        let user = match uid::lookup_uid(u) {
            Ok(Some(user)) => user,
            Ok(None) => {
                return Err(HostFailure(format!(
                    "identity: runner uid {u} has no passwd entry; create the runner users"
                )));
            }
            Err(e) => return Err(HostFailure(format!("identity: looking up uid {u}: {e}"))),
        };
        clear_leftovers(c, &user)?;
        Some(user)
    } else {
        let user = match policy.run_as.as_deref().map(runner::lookup_user) {
            None => None,
            Some(Ok(u)) => Some(u),
            Some(Err(e)) => return Err(HostFailure(format!("run_as: {e}"))),
        };
        if let Some(why) = c.run_as_blocked.as_ref().and_then(|b| b.warning(policy)) {
            log_warn!(
                "run_as_root_unreachable",
                profile = policy.name,
                detail = why
            );
        }
        user
    };
    let (cgroup, join) = if c.cgroups.is_none() {
        (None, None)
    } else {
        let cg = c
            .cgroups
            .create(a.id, &limits_of(policy))
            .map_err(|e| HostFailure(format!("cgroup: {e}")))?;
        let join = cg
            .join_fds()
            .map_err(|e| HostFailure(format!("cgroup: {e}")))?;
        (Some(cg), Some(std::sync::Arc::new(join)))
    };
    let owner = user.as_ref().map(|u| (u.uid, u.gid));
    let root = runner::prepare_root(
        install,
        &runner::attempt_root(c.runtime_dir(state_dir), a.id),
        RootOptions {
            owner,
            always_copy: false,
        },
    )
    .map_err(|e| HostFailure(format!("root: {e}")))?;
    if let Some(u) = &user {
        link_home(state_dir, u, &root.home_dir);
    }
    Ok(Ready {
        user,
        cgroup,
        join,
        root,
        contain: per_attempt,
        env: Vec::new(),
    })
}

/// Kills what still runs under a uid the books say is free: a crash between a
/// runner's spawn and its record, or a process that escaped a previous attempt. The
/// range is claimed host-wide (`claim_uids`), so whatever runs under it is ours to
/// stop, unless it lives in another daemon's cgroup (a claim bypassed, e.g. two lock
/// directories): then nothing is signalled and the start fails.
fn clear_leftovers(c: &Containment, user: &RunAsUser) -> Result<(), HostFailure> {
    if uid::processes_of_uid(user.uid).is_empty() {
        return Ok(());
    }
    kill_uid_if_ours(c, user.uid, user.gid).map_err(|e| {
        HostFailure(format!(
            "identity: stopping what uid {} left: {e}",
            user.uid
        ))
    })?;
    log_warn!("runner_uid_leftovers_killed", uid = user.uid);
    if !uid::processes_of_uid(user.uid).is_empty() {
        return Err(HostFailure(format!(
            "identity: processes of uid {} survive SIGKILL",
            user.uid
        )));
    }
    Ok(())
}

/// Kills every process of `uid` (`uid::kill_uid`), unless one of them lives in another
/// daemon's cgroup base: that one is not ours, and a uid-wide kill cannot spare it, so
/// nothing is signalled and the refusal says whose it is.
pub fn kill_uid_if_ours(c: &Containment, u: u32, g: u32) -> Result<(), String> {
    if let Some((pid, base)) = uid::foreign_processes(u, &c.host_tag).first() {
        return Err(format!(
            "uid {u} runs pid {pid} in another daemon's cgroup {base}: not ours to signal \
             (give each daemon its own runner_uids)"
        ));
    }
    uid::kill_uid(u, g).map_err(|e| e.to_string())
}

/// Points `STATE_DIR/homes/<user>` at the attempt's home, when the user's passwd home
/// is that path (the users the package makes are): ssh and other tools read the home
/// from passwd, not `$HOME`, and each attempt must start from an empty one. Replaced
/// atomically (a new link renamed over the old); anything else is left alone.
fn link_home(state_dir: &Path, user: &RunAsUser, home: &Path) {
    let managed = state_dir.join("homes").join(&user.name);
    if user.home != managed {
        return;
    }
    let tmp = state_dir.join("homes").join(format!(".{}.new", user.name));
    let _ = std::fs::remove_file(&tmp);
    let res = std::os::unix::fs::symlink(home, &tmp).and_then(|()| std::fs::rename(&tmp, &managed));
    if let Err(e) = res {
        log_warn!("home_link_failed", user = user.name, error = e);
    }
}

/// Kills everything the attempt left: its cgroup (all of it at once, however it
/// forked or whichever session it made), then every process of its own uid, unless
/// the host's side of its cleanup is done (its uid may be another runner's now). True
/// when nothing of it runs any more.
pub fn kill_all(c: &Containment, a: &Attempt) -> bool {
    let mut gone = true;
    if !c.cgroups.is_none() {
        let cg = c.cgroups.attempt(a.id);
        if cg.exists() {
            if let Err(e) = cg.kill() {
                log_warn!("cgroup_kill_failed", attempt = a.id, error = e);
            }
            gone &= cg.is_empty();
        }
    }
    if let (Some(u), Some(g)) = (a.holds_uid(), a.runner_gid) {
        if !uid::processes_of_uid(u).is_empty() {
            if let Err(e) = kill_uid_if_ours(c, u, g) {
                log_warn!("uid_kill_failed", attempt = a.id, uid = u, error = e);
            }
            log_info!("runner_uid_killed", attempt = a.id, uid = u);
        }
        gone &= uid::processes_of_uid(u).is_empty();
    }
    gone
}

/// Removes what the attempt's uid left outside its root, once nothing of it runs: its
/// files in the shared temporary directories and its SysV IPC objects
/// (`runner::leftovers`). True when none is left; false defers the cleanup, so the
/// uid stays held until they are gone. An attempt without a uid of its own has none.
/// The directories walked are the containment's (`find_shared_dirs`).
pub fn remove_leftovers(c: &Containment, a: &Attempt) -> bool {
    let (Some(u), Some(g)) = (a.holds_uid(), a.runner_gid) else {
        return true;
    };
    // SAFETY: geteuid has no preconditions.
    if u == 0 || u == unsafe { libc::geteuid() } {
        log_warn!("attempt_leftovers_refused", attempt = a.id, uid = u);
        return true;
    }
    let always = || {
        shared_dirs::ALWAYS
            .iter()
            .map(PathBuf::from)
            .collect::<Vec<_>>()
    };
    let dirs = c.shared_dirs.as_deref().cloned().unwrap_or_else(always);
    match leftovers::clear(u, g, &dirs) {
        Ok(c) => {
            let removed = c.files.files + c.files.dirs + c.ipc as u64;
            if removed > 0 {
                log_info!(
                    "attempt_leftovers_removed",
                    attempt = a.id,
                    uid = u,
                    files = c.files.files,
                    dirs = c.files.dirs,
                    ipc = c.ipc,
                    looked = c.files.looked,
                    micros = c.micros
                );
            }
            true
        }
        Err((c, why)) => {
            log_warn!(
                "attempt_leftovers_kept",
                attempt = a.id,
                uid = u,
                files = c.files.files,
                dirs = c.files.dirs,
                ipc = c.ipc,
                kept = c.files.kept,
                error = why
            );
            false
        }
    }
}

/// Removes the attempt's cgroup once it is empty. True when it is gone.
pub fn remove_cgroup(c: &Containment, attempt: i64) -> bool {
    if c.cgroups.is_none() {
        return true;
    }
    match c.cgroups.attempt(attempt).remove() {
        Ok(()) => true,
        Err(e) => {
            log_warn!("cgroup_remove_failed", attempt = attempt, error = e);
            false
        }
    }
}

/// Whether the attempt's memory limit killed something in it.
pub fn oom_killed(c: &Containment, attempt: i64) -> bool {
    !c.cgroups.is_none() && c.cgroups.attempt(attempt).oom_kills() > 0
}

/// A profile's cgroup limits as the runner floor takes them.
pub fn limits_of(policy: &ScalePolicy) -> Limits {
    Limits {
        memory_max: policy.memory_max,
        cpu_max_millis: policy.cpu_max,
        pids_max: policy.pids_max,
    }
}

/// At start: writes each live attempt's limits again (its profile's, as they are now)
/// into its cgroup. Under systemd before 254 the previous daemon's unit turned the
/// controllers off when it stopped (`runner::cgroup::handover`), which took the
/// limits with them; this daemon's `prepare` turned them on again. Attempts whose
/// cgroup is gone, or whose profile is, are left to the recovery pass.
pub fn restore_limits(c: &Containment, open: &[Attempt], profiles: &[ScalePolicy]) {
    if c.cgroups.is_none() {
        return;
    }
    let mut restored = 0;
    for a in open {
        let Some(p) = profiles.iter().find(|p| p.name == a.profile) else {
            continue;
        };
        if !c.cgroups.attempt(a.id).exists() {
            continue;
        }
        match c.cgroups.create(a.id, &limits_of(p)) {
            Ok(_) => restored += 1,
            Err(e) => log_warn!("limits_not_restored", attempt = a.id, error = e),
        }
    }
    if restored > 0 {
        log_info!("limits_restored", attempts = restored);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("rm-contain-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// Issue 38: a host without `runner_uids` warned `run_as_roots_unreachable` at
    /// start whether or not any profile runs as another user. The closed directory is
    /// kept, and said once, plainly, when a `run_as` profile's runner starts.
    #[test]
    fn regression_38_run_as_warning_only_when_a_profile_runs_as_another_user() {
        let base = scratch("closed");
        let closed = base.join("closed");
        let state = closed.join("state");
        std::fs::create_dir_all(&state).unwrap();
        std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o700)).unwrap();
        let Err(Unopened::Closed(dir)) = open_for_runners(&state) else {
            panic!("{} is closed to others", closed.display());
        };
        assert_eq!(dir, std::fs::canonicalize(&closed).unwrap());

        let blocked = RunAsBlocked::new(dir.clone());
        let plain = ScalePolicy::new("plain", "t", "h");
        assert_eq!(blocked.warning(&plain), None, "no run_as: nothing to say");
        let mut as_runner = ScalePolicy::new("build", "t", "h");
        as_runner.run_as = Some("runner".into());
        let said = blocked
            .warning(&as_runner)
            .expect("said at the first start");
        assert!(
            said.starts_with("profile build runs as runner, who cannot reach its runner root:"),
            "{said}"
        );
        assert_eq!(said.matches("chmod o+x").count(), 1, "{said}");
        assert!(
            said.contains(&format!("chmod o+x {}", dir.display())),
            "{said}"
        );
        assert_eq!(blocked.warning(&as_runner), None, "said once");

        std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o711)).unwrap();
        assert_eq!(open_for_runners(&state), Ok(()));
        std::fs::remove_dir_all(&base).unwrap();
    }
}
