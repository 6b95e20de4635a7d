//! A target's slots on disk: the dependency caches (`RUNTIME/caches/<key>/slot-<n>/`)
//! and kept workspaces (`RUNTIME/workspaces/<key>/slot-<n>/_work`) an attempt holds
//! while its row says so (`attempts.slot`, until it is cleaned).
//!
//! What keeps one target's jobs out of another's caches is ownership: `caches/` and
//! `caches/<key>/` are the manager's, 0711 (runners pass through, never list), and a
//! slot is 0700 and belongs to the runner uid of the attempt that holds it, and to the
//! manager between leases ([`release_caches`]), so a uid that once held a slot of
//! another target cannot enter it again. Files a job left belong to its uid; when the
//! next lessee is another uid they are given to it ([`reown`]), but only files a
//! runner uid owns: a job that hard-linked someone else's file into its cache never
//! gets it chowned. Kept workspaces are the manager's alone between jobs (0700 all the
//! way): `_work` is renamed into the attempt's root for the job and back at cleanup,
//! and a `_work` that is not a real directory then (a planted link) is not kept.
//! Both kinds are listed and measured here ([`list_slots`]) for the hourly prune and
//! for what `status` and `doctor` show ([`Footprint`]).

use std::fs;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The directory under the runtime root holding every target's cache slots.
pub const CACHES_DIR: &str = "caches";
/// The directory under the runtime root holding kept workspaces.
pub const WORKSPACES_DIR: &str = "workspaces";

/// `RUNTIME/caches/<key>/slot-<n>`.
pub fn cache_slot(runtime: &Path, key: &str, slot: u32) -> PathBuf {
    runtime
        .join(CACHES_DIR)
        .join(key)
        .join(format!("slot-{slot}"))
}

/// `RUNTIME/workspaces/<key>/slot-<n>`: holds the kept `_work` between jobs.
pub fn work_slot(runtime: &Path, key: &str, slot: u32) -> PathBuf {
    runtime
        .join(WORKSPACES_DIR)
        .join(key)
        .join(format!("slot-{slot}"))
}

/// The file beside a cache slot that names its last lessee's uid; its mtime is the
/// slot's last use (the prune's clock). The manager's, so no job can touch it.
fn lease_file(slot: &Path) -> PathBuf {
    let mut n = slot.file_name().unwrap_or_default().to_os_string();
    n.push(".lease");
    slot.with_file_name(n)
}

fn mkdir_mode(p: &Path, mode: u32) -> io::Result<()> {
    match fs::create_dir(p) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let m = fs::symlink_metadata(p)?;
    if !m.is_dir() {
        return Err(io::Error::other(format!(
            "{} is not a directory (a link or a file): refused",
            p.display()
        )));
    }
    fs::set_permissions(p, fs::Permissions::from_mode(mode))
}

/// Gives `owner` every entry under `dir` (and `dir`) that a runner uid owns and
/// `owner` does not, never following a link. `is_runner` says which uids are runners'.
pub fn reown(dir: &Path, owner: (u32, u32), is_runner: &dyn Fn(u32) -> bool) -> io::Result<u64> {
    let mut changed = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        let m = fs::symlink_metadata(&p)?;
        if m.uid() != owner.0 && is_runner(m.uid()) {
            std::os::unix::fs::lchown(&p, Some(owner.0), Some(owner.1))?;
            changed += 1;
        }
        if m.is_dir() {
            for e in fs::read_dir(&p)? {
                stack.push(e?.path());
            }
        }
    }
    Ok(changed)
}

/// Readies cache slot `slot` of target `key` for an attempt running as `owner` (or as
/// the manager, with `None`): its directories made, files of an earlier lessee given
/// to it, the lease file written (now the slot's last use). Returns the slot.
pub fn lease_caches(
    runtime: &Path,
    key: &str,
    slot: u32,
    owner: Option<(u32, u32)>,
    is_runner: &dyn Fn(u32) -> bool,
    tool_dirs: &[&str],
) -> io::Result<PathBuf> {
    let dir = cache_slot(runtime, key, slot);
    mkdir_mode(&runtime.join(CACHES_DIR), 0o711)?;
    mkdir_mode(&runtime.join(CACHES_DIR).join(key), 0o711)?;
    mkdir_mode(&dir, 0o700)?;
    let lease = lease_file(&dir);
    let last: Option<u32> = fs::read_to_string(&lease)
        .ok()
        .and_then(|s| s.trim().parse().ok());
    if let Some(o) = owner
        && last != Some(o.0)
    {
        reown(&dir, o, is_runner)?;
    }
    for t in tool_dirs {
        let d = dir.join(t);
        if fs::symlink_metadata(&d).is_err() {
            fs::create_dir(&d)?;
            if let Some((u, g)) = owner {
                std::os::unix::fs::lchown(&d, Some(u), Some(g))?;
            }
        }
    }
    if let Some((u, g)) = owner {
        std::os::unix::fs::lchown(&dir, Some(u), Some(g))?;
    }
    let tmp = lease.with_extension("lease.new");
    // SAFETY: geteuid has no preconditions.
    let uid = owner.map_or(unsafe { libc::geteuid() }, |o| o.0);
    fs::write(&tmp, uid.to_string())?;
    fs::rename(&tmp, &lease)?;
    Ok(dir)
}

/// Takes a cache slot back from its lessee: the slot is the manager's again (0700), so
/// its last lessee's uid, given to another target's job next, cannot enter it.
pub fn release_caches(runtime: &Path, key: &str, slot: u32) -> io::Result<()> {
    let dir = cache_slot(runtime, key, slot);
    let m = match fs::symlink_metadata(&dir) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if !m.is_dir() {
        return fs::remove_file(&dir);
    }
    // SAFETY: geteuid and getegid have no preconditions.
    let (u, g) = unsafe { (libc::geteuid(), libc::getegid()) };
    if m.uid() != u {
        std::os::unix::fs::lchown(&dir, Some(u), Some(g))?;
    }
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o700))
}

/// What happened to a kept `_work` at the start or end of a job.
#[derive(Debug, PartialEq, Eq)]
pub enum Kept {
    /// Moved (into the root at the start, back to the slot at the end).
    Moved,
    /// There was none (a slot's first job; a job that removed its `_work`).
    Nothing,
    /// It was not a real directory (a link planted in its place): not kept.
    Refused,
}

/// Moves slot `slot`'s kept `_work` into the attempt's fresh root (`work`, the empty
/// `_work` `prepare_root` made), giving it to `owner`.
pub fn take_work(
    runtime: &Path,
    key: &str,
    slot: u32,
    work: &Path,
    owner: Option<(u32, u32)>,
    is_runner: &dyn Fn(u32) -> bool,
) -> io::Result<Kept> {
    let dir = work_slot(runtime, key, slot);
    let kept = dir.join(super::root::WORK_DIR);
    let m = match fs::symlink_metadata(&kept) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Kept::Nothing),
        Err(e) => return Err(e),
    };
    if !m.is_dir() {
        fs::remove_file(&kept)?;
        return Ok(Kept::Refused);
    }
    if let Some(o) = owner
        && m.uid() != o.0
    {
        reown(&kept, o, is_runner)?;
    }
    // The root's `_work` is the empty one `prepare_root` made (a retried start finds
    // the kept one already there, and the slot empty, above).
    fs::remove_dir(work)?;
    fs::rename(&kept, work)?;
    Ok(Kept::Moved)
}

/// Moves an ended attempt's `_work` back to its slot, if it is a real directory.
pub fn return_work(runtime: &Path, key: &str, slot: u32, work: &Path) -> io::Result<Kept> {
    let m = match fs::symlink_metadata(work) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Kept::Nothing),
        Err(e) => return Err(e),
    };
    if !m.is_dir() {
        // Left for the root's removal, which unlinks and never follows it.
        return Ok(Kept::Refused);
    }
    mkdir_mode(&runtime.join(WORKSPACES_DIR), 0o700)?;
    mkdir_mode(&runtime.join(WORKSPACES_DIR).join(key), 0o700)?;
    let dir = work_slot(runtime, key, slot);
    mkdir_mode(&dir, 0o700)?;
    let kept = dir.join(super::root::WORK_DIR);
    if fs::symlink_metadata(&kept).is_ok() {
        super::root::remove_root(&kept).map_err(|e| io::Error::other(e.to_string()))?;
    }
    fs::rename(work, &kept)?;
    Ok(Kept::Moved)
}

/// Which kind of slot: a dependency cache or a kept workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SlotKind {
    Cache,
    Workspace,
}

impl SlotKind {
    /// Its directory under the runtime root (`caches`, `workspaces`).
    pub fn dir(self) -> &'static str {
        match self {
            SlotKind::Cache => CACHES_DIR,
            SlotKind::Workspace => WORKSPACES_DIR,
        }
    }

    fn slot(self, runtime: &Path, key: &str, slot: u32) -> PathBuf {
        match self {
            SlotKind::Cache => cache_slot(runtime, key, slot),
            SlotKind::Workspace => work_slot(runtime, key, slot),
        }
    }
}

/// One slot found on disk: `<kind>/<key>/slot-<n>`, its size and its last use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundSlot {
    pub kind: SlotKind,
    pub key: String,
    pub slot: u32,
    pub bytes: u64,
    /// Unix ms of its last use, 0 when unknown: a cache's lease file's mtime (written
    /// at each lease), a kept workspace's slot directory's (its `_work` renamed out at
    /// each start and back at each cleanup).
    pub last_used: i64,
}

impl FoundSlot {
    /// `caches/<key>/slot-<n>` or `workspaces/<key>/slot-<n>`: its name in the prune's
    /// plan and logs.
    pub fn name(&self) -> String {
        format!("{}/{}/slot-{}", self.kind.dir(), self.key, self.slot)
    }
}

fn mtime_ms(p: &Path) -> i64 {
    fs::symlink_metadata(p)
        .map(|m| m.mtime() * 1000 + m.mtime_nsec() / 1_000_000)
        .unwrap_or(0)
}

/// The last time anything changed a slot's measure that a later job could not hide
/// (unix ms; 0 with no slots): a slot or a cache's lease file made, leased, given back (`release_caches` changes the slot's mode, so its ctime)
/// or a kept `_work` moved in or out. Shallow: one `stat` per slot, no walk. Writes of
/// a job still holding a slot leased before then show once it is given back.
pub fn last_touched(runtime: &Path) -> i64 {
    let touched = |p: &Path| {
        fs::symlink_metadata(p).map_or(0, |m| {
            (m.mtime() * 1000 + m.mtime_nsec() / 1_000_000)
                .max(m.ctime() * 1000 + m.ctime_nsec() / 1_000_000)
        })
    };
    let mut last = 0;
    for kind in [SlotKind::Cache, SlotKind::Workspace] {
        let Ok(keys) = fs::read_dir(runtime.join(kind.dir())) else {
            continue;
        };
        // Not the directories above the slots: a prune's removal changes them, and
        // what it removed its measure already left out.
        for k in keys.flatten() {
            if k.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let Ok(slots) = fs::read_dir(k.path()) else {
                continue;
            };
            for e in slots.flatten() {
                last = last.max(touched(&e.path()));
            }
        }
    }
    last
}

/// Every cache slot under `runtime`, measured (file sizes, links not followed).
pub fn list_caches(runtime: &Path) -> io::Result<Vec<FoundSlot>> {
    list_kind(runtime, SlotKind::Cache)
}

/// Every cache slot and kept workspace under `runtime`, measured.
pub fn list_slots(runtime: &Path) -> io::Result<Vec<FoundSlot>> {
    let mut out = list_kind(runtime, SlotKind::Cache)?;
    out.extend(list_kind(runtime, SlotKind::Workspace)?);
    Ok(out)
}

fn list_kind(runtime: &Path, kind: SlotKind) -> io::Result<Vec<FoundSlot>> {
    let base = runtime.join(kind.dir());
    let keys = match fs::read_dir(&base) {
        Ok(k) => k,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    for k in keys {
        let k = k?;
        let key = k.file_name().to_string_lossy().into_owned();
        if !k.file_type()?.is_dir() || key.starts_with('.') {
            continue;
        }
        for s in fs::read_dir(k.path())? {
            let s = s?;
            let name = s.file_name().to_string_lossy().into_owned();
            let Some(slot) = name
                .strip_prefix("slot-")
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            if !s.file_type()?.is_dir() {
                continue;
            }
            let last_used = match kind {
                SlotKind::Cache => mtime_ms(&lease_file(&s.path())),
                SlotKind::Workspace => mtime_ms(&s.path()),
            };
            out.push(FoundSlot {
                kind,
                key: key.clone(),
                slot,
                bytes: tree_bytes(&s.path()),
                last_used,
            });
        }
    }
    Ok(out)
}

fn tree_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        let Ok(m) = fs::symlink_metadata(&p) else {
            continue;
        };
        total += m.blocks() * 512;
        if m.is_dir()
            && let Ok(rd) = fs::read_dir(&p)
        {
            stack.extend(rd.flatten().map(|e| e.path()));
        }
    }
    total
}

/// What the caches and kept workspaces hold on disk against the host's `cache_cap`,
/// for `status` and `doctor`: one walk of the runtime root's slots when asked.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Footprint {
    pub caches_bytes: u64,
    /// Targets with a cache on this host.
    pub cache_targets: usize,
    pub workspaces_bytes: u64,
    /// Kept workspaces (slots).
    pub workspaces: usize,
    pub cap_bytes: u64,
}

impl Footprint {
    /// Measures the slots under the runtime root `host` names (`runtime_root`, else
    /// `state_dir`). A root that cannot be read counts as holding nothing.
    pub fn read(state_dir: &Path, host: &crate::domain::Host) -> Footprint {
        let runtime = super::root::host_runtime(host).unwrap_or_else(|| state_dir.into());
        Footprint::of(
            &list_slots(&runtime).unwrap_or_default(),
            host.cache_cap_bytes,
        )
    }

    pub fn of(found: &[FoundSlot], cap_bytes: u64) -> Footprint {
        let of = |k: SlotKind| found.iter().filter(move |f| f.kind == k);
        Footprint {
            caches_bytes: of(SlotKind::Cache).map(|f| f.bytes).sum(),
            cache_targets: of(SlotKind::Cache)
                .map(|f| f.key.as_str())
                .collect::<std::collections::BTreeSet<_>>()
                .len(),
            workspaces_bytes: of(SlotKind::Workspace).map(|f| f.bytes).sum(),
            workspaces: of(SlotKind::Workspace).count(),
            cap_bytes,
        }
    }

    /// Whether they hold more than the cap (the hourly prune has not caught up, or
    /// leased slots alone exceed it).
    pub fn over(&self) -> bool {
        self.caches_bytes + self.workspaces_bytes > self.cap_bytes
    }
}

/// Removes what an interrupted [`remove_slot`] left aside (`caches/.pruned-*`,
/// `workspaces/.pruned-*`).
pub fn remove_leftovers(runtime: &Path) {
    for kind in [SlotKind::Cache, SlotKind::Workspace] {
        let Ok(rd) = fs::read_dir(runtime.join(kind.dir())) else {
            continue;
        };
        for e in rd.flatten() {
            if e.file_name().to_string_lossy().starts_with(".pruned-") {
                let _ = super::root::remove_root(&e.path());
            }
        }
    }
}

/// Removes one cache slot (see [`remove_slot`]).
pub fn remove_cache(runtime: &Path, key: &str, slot: u32) -> io::Result<()> {
    remove_slot(runtime, SlotKind::Cache, key, slot)
}

/// Removes one slot: renamed aside first (so a lease made later finds none and starts
/// empty), then removed, with a cache's lease file.
pub fn remove_slot(runtime: &Path, kind: SlotKind, key: &str, slot: u32) -> io::Result<()> {
    let dir = kind.slot(runtime, key, slot);
    let aside = runtime
        .join(kind.dir())
        .join(format!(".pruned-{key}-{slot}-{}", std::process::id()));
    fs::rename(&dir, &aside)?;
    if kind == SlotKind::Cache {
        let _ = fs::remove_file(lease_file(&dir));
    }
    super::root::remove_root(&aside).map_err(|e| io::Error::other(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("rm-slots-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_cache_slot_is_made_listed_and_pruned() {
        let rt = tmp("cache");
        let d = lease_caches(&rt, "t-1", 0, None, &|_| false, &["npm", "xdg"]).unwrap();
        assert!(d.join("npm").is_dir() && d.join("xdg").is_dir());
        fs::write(d.join("npm/blob"), vec![7u8; 8192]).unwrap();
        let mode = fs::metadata(&d).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o700);
        let mode = fs::metadata(rt.join("caches/t-1")).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o711);
        let found = list_caches(&rt).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!((found[0].key.as_str(), found[0].slot), ("t-1", 0));
        assert!(
            found[0].bytes >= 8192 && found[0].last_used > 0,
            "{found:?}"
        );
        remove_cache(&rt, "t-1", 0).unwrap();
        assert!(list_caches(&rt).unwrap().is_empty());
        fs::create_dir_all(rt.join("caches/.pruned-t-1-0-1/npm")).unwrap();
        remove_leftovers(&rt);
        assert!(!rt.join("caches/.pruned-t-1-0-1").exists());
        assert!(rt.join("caches/t-1").is_dir());
        let _ = fs::remove_dir_all(&rt);
    }

    #[test]
    fn the_footprint_line_adds_caches_and_workspaces_against_the_cap() {
        let slot = |kind, key: &str, mib: u64| FoundSlot {
            kind,
            key: key.into(),
            slot: 0,
            bytes: mib << 20,
            last_used: 0,
        };
        let f = Footprint::of(
            &[
                slot(SlotKind::Cache, "a", 600),
                slot(SlotKind::Cache, "a", 200),
                slot(SlotKind::Cache, "b", 424),
                slot(SlotKind::Workspace, "a", 300),
                slot(SlotKind::Workspace, "b", 100),
            ],
            10 << 30,
        );
        assert_eq!(
            (
                f.caches_bytes,
                f.cache_targets,
                f.workspaces_bytes,
                f.workspaces
            ),
            (1224 << 20, 2, 400 << 20, 2)
        );
        assert!(!f.over());
        assert_eq!(Footprint::of(&[], 0), Footprint::default());
    }

    #[test]
    fn a_cache_slot_or_a_kept_work_touches_the_slots_and_a_prunes_leftover_does_not() {
        let rt = tmp("touched");
        assert_eq!(last_touched(&rt), 0);
        // Directories above the slots (a key's, a prune's leftover) are not slots.
        fs::create_dir_all(rt.join("caches/t-1")).unwrap();
        fs::create_dir_all(rt.join("workspaces/.pruned-t-1-0-1/_work")).unwrap();
        assert_eq!(last_touched(&rt), 0);
        let before = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        let root = rt.join("attempts/1");
        fs::create_dir_all(root.join("_work")).unwrap();
        return_work(&rt, "t-1", 1, &root.join("_work")).unwrap();
        // File times are as coarse as the kernel's clock tick.
        assert!(last_touched(&rt) >= before - 1000);
        let other = tmp("touched-cache");
        lease_caches(&other, "t-1", 0, None, &|_| false, &["npm"]).unwrap();
        assert!(last_touched(&other) >= before - 1000);
        let _ = fs::remove_dir_all(&rt);
        let _ = fs::remove_dir_all(&other);
    }

    #[test]
    fn a_kept_workspace_is_listed_beside_the_caches_and_pruned() {
        let rt = tmp("list-work");
        lease_caches(&rt, "t-1", 0, None, &|_| false, &["npm"]).unwrap();
        let root = rt.join("attempts/1");
        fs::create_dir_all(root.join("_work")).unwrap();
        fs::write(root.join("_work/big"), vec![1u8; 16384]).unwrap();
        return_work(&rt, "t-1", 3, &root.join("_work")).unwrap();
        let mut found = list_slots(&rt).unwrap();
        found.sort_by_key(|f| f.kind);
        let names: Vec<String> = found.iter().map(FoundSlot::name).collect();
        assert_eq!(names, ["caches/t-1/slot-0", "workspaces/t-1/slot-3"]);
        assert!(
            found[1].bytes >= 16384 && found[1].last_used > 0,
            "{found:?}"
        );
        assert_eq!(list_caches(&rt).unwrap().len(), 1);
        remove_slot(&rt, SlotKind::Workspace, "t-1", 3).unwrap();
        assert_eq!(list_slots(&rt).unwrap().len(), 1);
        fs::create_dir_all(rt.join("workspaces/.pruned-t-1-3-1/_work")).unwrap();
        remove_leftovers(&rt);
        assert!(!rt.join("workspaces/.pruned-t-1-3-1").exists());
        let _ = fs::remove_dir_all(&rt);
    }

    #[test]
    fn a_kept_work_goes_back_and_forth_and_a_link_is_never_kept() {
        let rt = tmp("work");
        let root = rt.join("attempts/1");
        fs::create_dir_all(root.join("_work")).unwrap();
        fs::write(root.join("_work/left"), "x").unwrap();
        assert_eq!(
            return_work(&rt, "t-1", 0, &root.join("_work")).unwrap(),
            Kept::Moved
        );
        let next = rt.join("attempts/2");
        fs::create_dir_all(next.join("_work")).unwrap();
        assert_eq!(
            take_work(&rt, "t-1", 0, &next.join("_work"), None, &|_| false).unwrap(),
            Kept::Moved
        );
        assert_eq!(fs::read_to_string(next.join("_work/left")).unwrap(), "x");
        // A job that puts a link in place of its `_work` keeps nothing.
        fs::remove_dir_all(next.join("_work")).unwrap();
        std::os::unix::fs::symlink("/etc", next.join("_work")).unwrap();
        assert_eq!(
            return_work(&rt, "t-1", 0, &next.join("_work")).unwrap(),
            Kept::Refused
        );
        let third = rt.join("attempts/3");
        fs::create_dir_all(third.join("_work")).unwrap();
        assert_eq!(
            take_work(&rt, "t-1", 0, &third.join("_work"), None, &|_| false).unwrap(),
            Kept::Nothing
        );
        let _ = fs::remove_dir_all(&rt);
    }
}
