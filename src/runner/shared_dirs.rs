//! The shared directories a runner uid can leave files in, found once when per-attempt
//! uids come into effect: every directory on the host's local filesystems that others
//! (or a runner group) may write in and a runner can reach, so the leftover walk
//! (`super::leftovers`) covers `/run/lock`, `/var/crash` and whatever else the host
//! has, not a fixed list.
//!
//! What counts is decided in pure code over what was read: which mounts
//! ([`local_writable`]: read-write, not remote, not a kernel pseudo filesystem), which
//! directories ([`counts`]: others may write, or a runner's group may; [`passable`]:
//! a runner may pass through), and which found directories the walk of another
//! already covers ([`prune_covered`]). The walk ([`discover`]) reads each mount from its
//! root through directory descriptors with the leftover walk's own tools: `openat`
//! with `O_NOFOLLOW | O_DIRECTORY`, `fstatat` with `AT_SYMLINK_NOFOLLOW`, the directory
//! opened checked against the entry looked at, never onto another filesystem; it is
//! bounded in depth, entries and time, and says when a bound stopped it.

use super::leftovers::{fstat, fstatat, names, open_dir_at};
use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Always walked when present, whatever the discovery found (or if it stopped early):
/// the places every Linux host has for everyone's temporary files.
pub const ALWAYS: &[&str] = &[
    "/tmp",
    "/var/tmp",
    "/dev/shm",
    "/dev/mqueue",
    "/run/lock",
    "/var/crash",
];

/// One line of `/proc/self/mountinfo`, as far as the discovery needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub point: PathBuf,
    pub fstype: String,
    pub read_only: bool,
}

/// Pure: the mounts of a `/proc/self/mountinfo` text (`super::mountinfo`): the mount
/// point, whether the mount or its filesystem is `ro`, and the filesystem type.
pub fn parse_mountinfo(text: &str) -> Vec<Mount> {
    super::mountinfo::parse(text)
        .into_iter()
        .map(|m| Mount {
            read_only: m.read_only(),
            point: m.point,
            fstype: m.fstype,
        })
        .collect()
}

/// Filesystems that hold no files a job leaves for the next: the kernel's views
/// (processes, devices, cgroups, tracing, ...). `fuse` and network filesystems are
/// left out as remote (another host's files, perhaps another host's users).
const PSEUDO: &[&str] = &[
    "proc",
    "sysfs",
    "cgroup",
    "cgroup2",
    "debugfs",
    "tracefs",
    "securityfs",
    "pstore",
    "bpf",
    "configfs",
    "fusectl",
    "devpts",
    "autofs",
    "binfmt_misc",
    "rpc_pipefs",
    "nsfs",
    "efivarfs",
    "selinuxfs",
    "nfsd",
    "hugetlbfs",
];
const REMOTE: &[&str] = &[
    "nfs",
    "nfs4",
    "cifs",
    "smb3",
    "smbfs",
    "ceph",
    "glusterfs",
    "9p",
    "afs",
    "lustre",
    "gfs2",
    "ocfs2",
    "davfs",
];

/// Pure: whether a mount is one of the host's local filesystems a job could have
/// written to: read-write, not a kernel pseudo filesystem, not remote, not FUSE.
pub fn local_writable(m: &Mount) -> bool {
    let t = m.fstype.as_str();
    !m.read_only
        && !PSEUDO.contains(&t)
        && !REMOTE.contains(&t)
        && t != "fuse"
        && t != "fuseblk"
        && !t.starts_with("fuse.")
}

/// Pure: whether a directory with `mode` and group `gid` is one a runner could create
/// entries in: others may write and pass, or its group is a runner's and may.
pub fn counts(mode: u32, gid: u32, runner_gids: &BTreeSet<u32>) -> bool {
    (mode & 0o003 == 0o003) || (mode & 0o030 == 0o030 && runner_gids.contains(&gid))
}

/// Pure: whether a runner may pass through a directory (search it): others may, or
/// its group is a runner's and may. A directory closed to runners hides all below it.
pub fn passable(mode: u32, gid: u32, runner_gids: &BTreeSet<u32>) -> bool {
    mode & 0o001 != 0 || (mode & 0o010 != 0 && runner_gids.contains(&gid))
}

/// A directory found: its path and filesystem.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Found {
    pub path: PathBuf,
    pub dev: u64,
}

/// Pure: the found directories the leftover walk must start from, in path order: one
/// whose parent was found too, on the same filesystem, is left out, since the walk of
/// the parent enters it (the walk enters every directory a runner could write in, and
/// never leaves its filesystem). Duplicates go too.
pub fn prune_covered(mut found: Vec<Found>) -> Vec<PathBuf> {
    found.sort();
    found.dedup_by(|a, b| a.path == b.path);
    let all: BTreeSet<(&Path, u64)> = found.iter().map(|f| (f.path.as_path(), f.dev)).collect();
    found
        .iter()
        .filter(|f| !f.path.parent().is_some_and(|p| all.contains(&(p, f.dev))))
        .map(|f| f.path.clone())
        .collect()
}

/// How far the discovery goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Directory levels below a mount's root.
    pub depth: usize,
    /// Entries looked at, over all mounts.
    pub entries: usize,
    /// Directories found (before pruning).
    pub found: usize,
    pub time: Duration,
}

impl Default for Bounds {
    fn default() -> Bounds {
        Bounds {
            depth: 6,
            entries: 200_000,
            found: 512,
            time: Duration::from_secs(5),
        }
    }
}

/// What the discovery found and what it cost.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Discovery {
    /// The directories the leftover walk starts from: what was found, pruned, and
    /// [`ALWAYS`]'s that exist.
    pub dirs: Vec<PathBuf>,
    /// Mounts walked (local, read-write, reachable by a runner).
    pub mounts: usize,
    /// Entries looked at.
    pub looked: usize,
    /// A bound stopped it: there may be more.
    pub truncated: bool,
    pub millis: u64,
}

/// Finds the shared directories of the host: reads `/proc/self/mountinfo` and walks
/// each local, read-write mount a runner can reach (see the module). `runner_gids` are
/// the runner users' groups; `skip` are directories not searched (the daemon's state
/// directory and runtime root: its own, each attempt's root removed whole, its caches
/// large).
pub fn discover(runner_gids: &BTreeSet<u32>, skip: &[PathBuf], b: &Bounds) -> Discovery {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    discover_in(&parse_mountinfo(&text), runner_gids, skip, b)
}

/// [`discover`] over the mounts given.
pub fn discover_in(
    mounts: &[Mount],
    runner_gids: &BTreeSet<u32>,
    skip: &[PathBuf],
    b: &Bounds,
) -> Discovery {
    let start = Instant::now();
    let skip: Vec<PathBuf> = skip
        .iter()
        .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()))
        .collect();
    let mut w = Walk {
        gids: runner_gids,
        skip: &skip,
        b,
        start,
        looked: 0,
        truncated: false,
        found: Vec::new(),
    };
    let mut seen_points = BTreeSet::new();
    let mut mounts_walked = 0;
    for m in mounts.iter().filter(|m| local_writable(m)) {
        if !seen_points.insert(m.point.clone())
            || skip.iter().any(|s| m.point.starts_with(s))
            || !reachable(&m.point, runner_gids)
        {
            continue;
        }
        mounts_walked += 1;
        // Past a bound, each mount's root is still looked at (`/run/lock`, `/dev/shm`
        // are mounts of their own): only the walks below them stop.
        w.mount(&m.point);
    }
    let mut dirs = prune_covered(std::mem::take(&mut w.found));
    for a in ALWAYS {
        let p = Path::new(a);
        if !dirs.iter().any(|d| d == p) && std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()) {
            dirs.push(p.to_path_buf());
        }
    }
    dirs.sort();
    Discovery {
        dirs,
        mounts: mounts_walked,
        looked: w.looked,
        truncated: w.truncated,
        millis: start.elapsed().as_millis() as u64,
    }
}

/// Whether a runner can pass through every directory above `point` (not following
/// links: a mount point's path from mountinfo has none).
fn reachable(point: &Path, gids: &BTreeSet<u32>) -> bool {
    use std::os::unix::fs::MetadataExt;
    point.ancestors().skip(1).all(|a| {
        std::fs::symlink_metadata(a).is_ok_and(|m| m.is_dir() && passable(m.mode(), m.gid(), gids))
    })
}

struct Walk<'a> {
    gids: &'a BTreeSet<u32>,
    skip: &'a [PathBuf],
    b: &'a Bounds,
    start: Instant,
    looked: usize,
    truncated: bool,
    found: Vec<Found>,
}

impl Walk<'_> {
    fn out_of_budget(&self) -> bool {
        self.looked >= self.b.entries
            || self.found.len() >= self.b.found
            || self.start.elapsed() >= self.b.time
    }

    fn mount(&mut self, point: &Path) {
        let Ok(c) = std::ffi::CString::new(point.as_os_str().as_bytes()) else {
            return;
        };
        // SAFETY: a valid C string; the descriptor is owned below.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return;
        }
        // SAFETY: fd was just opened and is ours.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let Ok(top) = fstat(fd.as_raw_fd()) else {
            return;
        };
        let (mode, gid) = (top.st_mode & 0o7777, top.st_gid);
        if counts(mode, gid, self.gids) {
            self.found.push(Found {
                path: point.to_path_buf(),
                dev: top.st_dev,
            });
        }
        if passable(mode, gid, self.gids) {
            if self.out_of_budget() {
                self.truncated = true;
            } else {
                self.dir(&fd, top.st_dev, 0, point);
            }
        }
    }

    fn dir(&mut self, fd: &OwnedFd, dev: u64, depth: usize, shown: &Path) {
        if depth >= self.b.depth {
            return;
        }
        let room = self.b.entries.saturating_sub(self.looked);
        let Ok((list, more)) = names(fd, room) else {
            return;
        };
        self.truncated |= more;
        for (name, dtype) in list {
            if self.out_of_budget() {
                self.truncated = true;
                return;
            }
            self.looked += 1;
            // Only directories matter: the type readdir gave spares a stat of every
            // file (a filesystem that gives none is asked).
            if dtype != libc::DT_DIR && dtype != libc::DT_UNKNOWN {
                continue;
            }
            let Ok(st) = fstatat(fd.as_raw_fd(), &name) else {
                continue;
            };
            if st.st_mode & libc::S_IFMT != libc::S_IFDIR || st.st_dev != dev {
                continue; // not a directory, or another mount (walked as its own)
            }
            let (mode, gid) = (st.st_mode & 0o7777, st.st_gid);
            let path = shown.join(OsStr::from_bytes(name.to_bytes()));
            if self.skip.contains(&path) {
                continue;
            }
            if counts(mode, gid, self.gids) {
                self.found.push(Found {
                    path: path.clone(),
                    dev,
                });
            }
            if !passable(mode, gid, self.gids) {
                continue;
            }
            let Some(sub) = open_dir_at(fd, &name, &st) else {
                continue;
            };
            self.dir(&sub, dev, depth + 1, &path);
        }
    }
}

/// The discovery as one log value: the count and at most `max` paths, then `+N`.
pub fn summary(dirs: &[PathBuf], max: usize) -> String {
    let mut s: Vec<String> = dirs
        .iter()
        .take(max)
        .map(|d| d.display().to_string())
        .collect();
    if dirs.len() > max {
        s.push(format!("+{}", dirs.len() - max));
    }
    s.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const INFO: &str = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,errors=remount-ro
23 22 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
24 22 0:22 / /sys rw,nosuid shared:7 - sysfs sysfs rw
25 22 0:5 / /dev rw,nosuid shared:2 - devtmpfs udev rw,size=4000k
26 25 0:23 / /dev/shm rw,nosuid,nodev shared:4 - tmpfs tmpfs rw
27 22 0:24 / /run rw,nosuid,nodev shared:5 - tmpfs tmpfs rw,mode=755
28 27 0:25 / /run/lock rw,nosuid,nodev,noexec,relatime shared:6 - tmpfs tmpfs rw,size=5120k
29 24 0:26 / /sys/fs/cgroup rw shared:9 - cgroup2 cgroup2 rw
30 22 0:40 / /srv/nfs rw,relatime shared:30 - nfs4 server:/export rw,vers=4.2
31 22 0:41 / /mnt/my\\040disk rw,relatime - fuse.sshfs me@host: rw
32 22 7:0 / /snap/core/1 ro,nodev,relatime shared:40 - squashfs /dev/loop0 ro
33 22 0:42 / /data rw,relatime master:3 shared:41 - xfs /dev/sdb1 rw
34 22 0:43 / /media/cd rw - iso9660 /dev/sr0 ro
35 25 0:20 / /dev/mqueue rw - mqueue mqueue rw
garbage line
";

    #[test]
    fn reads_mountinfo_with_optional_fields_and_escapes() {
        let m = parse_mountinfo(INFO);
        assert_eq!(m.len(), 14);
        assert_eq!(m[0].point, Path::new("/"));
        assert_eq!(m[0].fstype, "ext4");
        assert_eq!(m[9].point, Path::new("/mnt/my disk"));
        assert_eq!(m[9].fstype, "fuse.sshfs");
        assert!(m[10].read_only, "ro mount");
        assert!(m[12].read_only, "ro filesystem on a rw mount");
        assert_eq!(m[11].fstype, "xfs", "two optional fields");
    }

    #[test]
    fn only_local_read_write_filesystems_count() {
        let kept: Vec<String> = parse_mountinfo(INFO)
            .iter()
            .filter(|m| local_writable(m))
            .map(|m| m.point.display().to_string())
            .collect();
        assert_eq!(
            kept,
            [
                "/",
                "/dev",
                "/dev/shm",
                "/run",
                "/run/lock",
                "/data",
                "/dev/mqueue"
            ]
        );
    }

    #[test]
    fn a_directory_counts_when_a_runner_could_write_in_it() {
        let gids: BTreeSet<u32> = [61_000].into();
        assert!(counts(0o1777, 0, &gids), "/tmp");
        assert!(counts(0o777, 0, &gids), "world-writable without sticky bit");
        assert!(
            counts(0o1733, 0, &gids),
            "write-only drop box (php sessions)"
        );
        assert!(
            !counts(0o1776, 0, &gids),
            "writable but not searchable: no entry can be made"
        );
        assert!(!counts(0o755, 0, &gids));
        assert!(counts(0o2770, 61_000, &gids), "a runner group's");
        assert!(!counts(0o2770, 1_000, &gids), "another group's");
        assert!(
            !counts(0o750, 61_000, &gids),
            "read-only to the runner group"
        );
        // Passing through.
        assert!(passable(0o755, 0, &gids));
        assert!(passable(0o710, 61_000, &gids));
        assert!(!passable(0o710, 0, &gids));
        assert!(!passable(0o700, 0, &gids));
    }

    #[test]
    fn a_directory_the_walk_of_its_parent_enters_is_left_out() {
        let f = |p: &str, dev: u64| Found {
            path: PathBuf::from(p),
            dev,
        };
        let dirs = prune_covered(vec![
            f("/tmp", 1),
            f("/tmp/.X11-unix", 1),
            f("/tmp/.X11-unix/deeper", 1),
            f("/var/tmp", 1),
            // Under /tmp, but another filesystem: the walk of /tmp never goes there.
            f("/tmp/mnt", 2),
            // Under a found directory, not directly: the walk of /var/tmp need not enter
            // /var/tmp/closed (root's, 755) on the way.
            f("/var/tmp/closed/open", 1),
            f("/tmp", 1),
        ]);
        assert_eq!(
            dirs,
            ["/tmp", "/tmp/mnt", "/var/tmp", "/var/tmp/closed/open"]
                .map(PathBuf::from)
                .to_vec()
        );
    }

    #[test]
    fn the_walk_finds_what_a_runner_can_reach_and_stops_at_its_bounds() {
        use std::os::unix::fs::PermissionsExt;
        let base = std::env::temp_dir().join(format!("rm-shared-dirs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let mk = |p: &str, mode: u32| {
            let d = base.join(p);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        mk("", 0o755);
        mk("open", 0o1777);
        mk("open/inner", 0o777);
        mk("shut", 0o700);
        mk("shut/hidden", 0o1777);
        mk("a/b/c/deep", 0o1777);
        std::os::unix::fs::symlink(base.join("open"), base.join("link")).unwrap();
        let mounts = [Mount {
            point: base.clone(),
            fstype: "ext4".into(),
            read_only: false,
        }];
        let d = discover_in(&mounts, &BTreeSet::new(), &[], &Bounds::default());
        let ours: Vec<_> = d.dirs.iter().filter(|p| p.starts_with(&base)).collect();
        assert_eq!(
            ours,
            [base.join("a/b/c/deep"), base.join("open")]
                .iter()
                .collect::<Vec<_>>(),
            "inner is covered by open; hidden is behind a closed directory; no link"
        );
        assert!(!d.truncated);
        assert_eq!(d.mounts, 1);
        // Too shallow to see `deep`, and it says so only when a bound (not depth) stopped it.
        let shallow = Bounds {
            depth: 2,
            ..Bounds::default()
        };
        let d = discover_in(&mounts, &BTreeSet::new(), &[], &shallow);
        assert!(!d.dirs.contains(&base.join("a/b/c/deep")));
        let few = Bounds {
            entries: 2,
            ..Bounds::default()
        };
        let d = discover_in(&mounts, &BTreeSet::new(), &[], &few);
        assert!(d.truncated);
        // Past the bound, a mount's root is still looked at.
        let more = [
            mounts[0].clone(),
            Mount {
                point: base.join("open"),
                ..mounts[0].clone()
            },
        ];
        let none = Bounds {
            entries: 0,
            ..Bounds::default()
        };
        let d = discover_in(&more, &BTreeSet::new(), &[], &none);
        assert!(d.truncated);
        assert!(d.dirs.contains(&base.join("open")), "{:?}", d.dirs);
        // The daemon's own directories are not searched.
        let d = discover_in(
            &mounts,
            &BTreeSet::new(),
            &[base.join("a")],
            &Bounds::default(),
        );
        assert!(!d.dirs.contains(&base.join("a/b/c/deep")), "{:?}", d.dirs);
        assert!(d.dirs.contains(&base.join("open")));
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn the_summary_is_bounded() {
        let dirs: Vec<PathBuf> = (0..5).map(|i| PathBuf::from(format!("/d{i}"))).collect();
        assert_eq!(summary(&dirs, 3), "/d0 /d1 /d2 +2");
        assert_eq!(summary(&dirs[..2], 3), "/d0 /d1");
    }
}
