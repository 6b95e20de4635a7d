//! What an attempt's uid leaves on the host outside its root, removed at its cleanup:
//! its files in the shared directories (every directory a runner can write in on the
//! host's local filesystems, found at start by `super::shared_dirs`: `/tmp`,
//! `/var/tmp`, `/dev/shm`, `/run/lock`, POSIX message queues in `/dev/mqueue` when
//! mounted, and whatever else the host has) and its SysV IPC objects.
//!
//! The walk ([`remove_files_of`]) runs as the daemon, after every process of the uid
//! is dead and while the uid is still held (no new process of it can start), so only
//! root and other live uids can change what it walks. It never follows a link: every
//! step is relative to a directory descriptor (`openat` with `O_NOFOLLOW |
//! O_DIRECTORY`, `fstatat` with `AT_SYMLINK_NOFOLLOW`, `unlinkat`), a directory is
//! entered only if the descriptor opened is the entry just looked at (device and
//! inode), and never onto another filesystem. What it enters and removes is one pure
//! decision ([`decide`]): it removes entries the uid owns, and enters only directories
//! the uid could have created entries in (its own, world-writable ones, and
//! group-writable ones of its own group), so its files in a shared directory such as
//! `/tmp/.ICE-unix` are found; others' entries are left alone, and so is a directory of
//! the uid's that still holds them. It is bounded in entries and depth; a walk that hit
//! a bound says so, and the caller defers the cleanup (each walk removes as it goes, so
//! the next one gets further). Between `fstatat` and `unlinkat` an entry can be
//! replaced only by those who may write its directory: in a sticky one (`/tmp`) no
//! other uid can replace the uid's entry, and in a non-sticky world-writable one any
//! uid may remove any entry itself, so the walk unlinks nothing a live job could not.
//!
//! SysV IPC objects ([`remove_ipc_of`]) are found in `/proc/sysvipc/{shm,sem,msg}` by
//! owner or creator uid and removed by a helper that has become the uid
//! ([`super::uid::as_uid`]): `IPC_RMID` needs the owner, the creator or
//! `CAP_SYS_ADMIN`, which the daemon does not keep, and as the uid the kernel itself
//! refuses an id that has meanwhile gone to someone else.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// How far one walk goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Entries looked at (each one `fstatat`), over all directories of one walk.
    pub entries: usize,
    /// Directories entered below a shared directory.
    pub depth: usize,
}

impl Default for Bounds {
    fn default() -> Bounds {
        Bounds {
            entries: 200_000,
            depth: 32,
        }
    }
}

/// What one entry is, as `fstatat` (no link followed) saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    pub dir: bool,
    pub uid: u32,
    pub gid: u32,
    pub mode: u32,
    pub dev: u64,
}

/// What the walk does with an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// The uid's own file, link, socket or pipe: unlinked (never followed).
    Remove,
    /// A directory the uid could have written in: entered; `then_remove` when it is
    /// the uid's own (removed once empty, else left with what others put in it).
    Enter { then_remove: bool },
    /// Someone else's, on another filesystem, or deeper than the bound: left alone.
    Leave,
}

/// Pure: what to do with `e`, seen at `depth` below a shared directory on `top_dev`,
/// walking for `uid` (whose primary group is `gid`).
pub fn decide(e: &Seen, uid: u32, gid: u32, top_dev: u64, depth: usize, b: &Bounds) -> Action {
    if !e.dir {
        return if e.uid == uid {
            Action::Remove
        } else {
            Action::Leave
        };
    }
    if e.dev != top_dev || depth >= b.depth {
        return Action::Leave;
    }
    let own = e.uid == uid;
    let writable = own || e.mode & 0o002 != 0 || (e.mode & 0o020 != 0 && e.gid == gid);
    if writable {
        Action::Enter { then_remove: own }
    } else {
        Action::Leave
    }
}

/// What a walk did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Entries removed: files (and links, sockets, pipes, queues), then directories.
    pub files: u64,
    pub dirs: u64,
    /// Entries of the uid's left: its directories others' entries are still in (by
    /// design), and those an error kept (the first error is `first_error`).
    pub kept: u64,
    pub first_error: Option<String>,
    /// Entries looked at.
    pub looked: usize,
    /// A bound was reached: there may be more of the uid's.
    pub truncated: bool,
}

impl Report {
    fn error(&mut self, what: String) {
        self.kept += 1;
        if self.first_error.is_none() {
            self.first_error = Some(what);
        }
    }
}

/// Removes what `uid` owns under each of `dirs` (see the module's description). A
/// directory of `dirs` that does not exist is skipped; one that cannot be opened is an
/// error in the report. Never removes a directory of `dirs` itself.
pub fn remove_files_of(uid: u32, gid: u32, dirs: &[&Path], b: &Bounds) -> Report {
    let mut r = Report::default();
    if uid == 0 {
        r.error("refusing to remove the files of uid 0 (root)".into());
        return r;
    }
    for d in dirs {
        let Ok(c) = CString::new(d.as_os_str().as_bytes()) else {
            continue;
        };
        // SAFETY: a valid C string; the descriptor is owned below.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::NotFound {
                r.error(format!("{}: {e}", d.display()));
            }
            continue;
        }
        // SAFETY: fd was just opened and is ours.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let Ok(top) = fstat(fd.as_raw_fd()) else {
            continue;
        };
        walk(&fd, uid, gid, top.st_dev, 0, b, &mut r, d);
    }
    r
}

/// The directory `name` in `dir`, opened without following a link, only if it is the
/// very entry `seen` looked at (device and inode): an entry swapped for another
/// directory between the look and the open is not entered.
pub(super) fn open_dir_at(dir: &OwnedFd, name: &CStr, seen: &libc::stat) -> Option<OwnedFd> {
    // SAFETY: dir is open, name a valid C string; O_NOFOLLOW refuses a link swapped in
    // meanwhile.
    let sub = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if sub < 0 {
        return None;
    }
    // SAFETY: sub was just opened and is ours.
    let sub = unsafe { OwnedFd::from_raw_fd(sub) };
    match fstat(sub.as_raw_fd()) {
        Ok(now) if now.st_dev == seen.st_dev && now.st_ino == seen.st_ino => Some(sub),
        _ => None,
    }
}

pub(super) fn fstat(fd: i32) -> io::Result<libc::stat> {
    // SAFETY: stat is plain data; fstat fills it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fd is open; st is a valid out-pointer.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

pub(super) fn fstatat(dir: i32, name: &CStr) -> io::Result<libc::stat> {
    // SAFETY: as above.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: dir is open, name a valid C string, st a valid out-pointer.
    if unsafe { libc::fstatat(dir, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

/// The names in the directory `fd` (not `.` or `..`) with their `d_type`, at most
/// `max`; a second descriptor is read so `fd` stays usable for the `*at` calls.
pub(super) fn names(fd: &OwnedFd, max: usize) -> io::Result<(Vec<(CString, u8)>, bool)> {
    let dot = c".";
    // SAFETY: fd is open; "." is a valid C string.
    let dup = unsafe {
        libc::openat(
            fd.as_raw_fd(),
            dot.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if dup < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: dup is ours; fdopendir takes it over (closedir closes it).
    let dir = unsafe { libc::fdopendir(dup) };
    if dir.is_null() {
        let e = io::Error::last_os_error();
        // SAFETY: fdopendir failed, so dup is still ours to close.
        unsafe { libc::close(dup) };
        return Err(e);
    }
    let mut out = Vec::new();
    let mut more = false;
    loop {
        // SAFETY: dir is a valid DIR*, read by this thread only.
        let ent = unsafe { libc::readdir(dir) };
        if ent.is_null() {
            break;
        }
        // SAFETY: readdir returned a valid dirent whose d_name is NUL-terminated.
        let name = unsafe { CStr::from_ptr((*ent).d_name.as_ptr()) };
        let b = name.to_bytes();
        if b == b"." || b == b".." {
            continue;
        }
        if out.len() >= max {
            more = true;
            break;
        }
        // SAFETY: as above.
        out.push((name.to_owned(), unsafe { (*ent).d_type }));
    }
    // SAFETY: dir is valid and closed once.
    unsafe { libc::closedir(dir) };
    Ok((out, more))
}

#[allow(clippy::too_many_arguments)]
fn walk(
    fd: &OwnedFd,
    uid: u32,
    gid: u32,
    top_dev: u64,
    depth: usize,
    b: &Bounds,
    r: &mut Report,
    shown: &Path,
) {
    let room = b.entries.saturating_sub(r.looked);
    let (list, more) = match names(fd, room) {
        Ok(n) => n,
        Err(e) => {
            r.error(format!("{}: {e}", shown.display()));
            return;
        }
    };
    r.truncated |= more;
    for (name, _) in list {
        if r.looked >= b.entries {
            r.truncated = true;
            return;
        }
        r.looked += 1;
        let Ok(st) = fstatat(fd.as_raw_fd(), &name) else {
            continue; // gone meanwhile
        };
        let seen = Seen {
            dir: st.st_mode & libc::S_IFMT == libc::S_IFDIR,
            uid: st.st_uid,
            gid: st.st_gid,
            mode: st.st_mode & 0o7777,
            dev: st.st_dev,
        };
        let path = shown.join(std::ffi::OsStr::from_bytes(name.to_bytes()));
        match decide(&seen, uid, gid, top_dev, depth + 1, b) {
            Action::Leave => {
                if seen.dir && seen.uid == uid && depth + 1 >= b.depth {
                    r.truncated = true;
                }
            }
            Action::Remove => {
                // SAFETY: fd is open, name a valid C string; unlinkat never follows
                // the last component.
                if unsafe { libc::unlinkat(fd.as_raw_fd(), name.as_ptr(), 0) } == 0 {
                    r.files += 1;
                } else {
                    let e = io::Error::last_os_error();
                    if e.kind() != io::ErrorKind::NotFound {
                        r.error(format!("{}: {e}", path.display()));
                    }
                }
            }
            Action::Enter { then_remove } => {
                let Some(sub) = open_dir_at(fd, &name, &st) else {
                    continue;
                };
                walk(&sub, uid, gid, top_dev, depth + 1, b, r, &path);
                drop(sub);
                if then_remove {
                    // SAFETY: as above; AT_REMOVEDIR removes only an empty directory.
                    let rc = unsafe {
                        libc::unlinkat(fd.as_raw_fd(), name.as_ptr(), libc::AT_REMOVEDIR)
                    };
                    if rc == 0 {
                        r.dirs += 1;
                    } else {
                        let e = io::Error::last_os_error();
                        match e.raw_os_error() {
                            Some(libc::ENOENT) => {}
                            // Others' entries are still in it: kept with them, as
                            // decided (nothing of the uid's is left in it).
                            Some(libc::ENOTEMPTY | libc::EEXIST) => r.kept += 1,
                            _ => r.error(format!("{}: {e}", path.display())),
                        }
                    }
                }
            }
        }
    }
}

/// The SysV IPC objects of one kind (`/proc/sysvipc/<kind>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpcKind {
    Shm,
    Sem,
    Msg,
}

impl IpcKind {
    pub const ALL: [IpcKind; 3] = [IpcKind::Shm, IpcKind::Sem, IpcKind::Msg];

    fn file(self) -> &'static str {
        match self {
            IpcKind::Shm => "/proc/sysvipc/shm",
            IpcKind::Sem => "/proc/sysvipc/sem",
            IpcKind::Msg => "/proc/sysvipc/msg",
        }
    }

    /// The id column's name in the file's header.
    fn id_column(self) -> &'static str {
        match self {
            IpcKind::Shm => "shmid",
            IpcKind::Sem => "semid",
            IpcKind::Msg => "msqid",
        }
    }
}

/// Pure: the ids in a `/proc/sysvipc/*` text whose owner (`uid`) or creator (`cuid`)
/// is `uid`. Columns are found by the header's names, so a kernel that adds columns
/// is read alike; a text without them gives nothing.
pub fn parse_sysvipc(kind: IpcKind, text: &str, uid: u32) -> Vec<i32> {
    let mut lines = text.lines();
    let Some(header) = lines.next() else {
        return Vec::new();
    };
    let cols: Vec<&str> = header.split_whitespace().collect();
    let at = |name: &str| cols.iter().position(|c| *c == name);
    let (Some(id), Some(owner), Some(creator)) = (at(kind.id_column()), at("uid"), at("cuid"))
    else {
        return Vec::new();
    };
    lines
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let num = |i: usize| f.get(i).and_then(|v| v.parse::<u32>().ok());
            let ours = num(owner) == Some(uid) || num(creator) == Some(uid);
            if !ours {
                return None;
            }
            f.get(id).and_then(|v| v.parse::<i32>().ok())
        })
        .collect()
}

/// The uid's SysV IPC objects now, by kind.
pub fn ipc_of(uid: u32) -> Vec<(IpcKind, i32)> {
    let mut out = Vec::new();
    for k in IpcKind::ALL {
        if let Ok(t) = std::fs::read_to_string(k.file()) {
            out.extend(parse_sysvipc(k, &t, uid).into_iter().map(|id| (k, id)));
        }
    }
    out
}

/// Removes the uid's SysV IPC objects: a helper that has become the uid calls
/// `IPC_RMID` on each (an id already gone, or meanwhile another's, is refused by the
/// kernel and skipped). Returns how many there were; an error when the helper failed
/// or some are left.
pub fn remove_ipc_of(uid: u32, gid: u32) -> io::Result<usize> {
    let found = ipc_of(uid);
    if found.is_empty() {
        return Ok(0);
    }
    let calls: Vec<(libc::c_long, i32)> = found
        .iter()
        .map(|(k, id)| {
            let nr = match k {
                IpcKind::Shm => libc::SYS_shmctl,
                IpcKind::Sem => libc::SYS_semctl,
                IpcKind::Msg => libc::SYS_msgctl,
            };
            (nr, *id)
        })
        .collect();
    super::uid::as_uid(uid, gid, "removing the IPC objects", || {
        for (nr, id) in &calls {
            // SAFETY: raw syscalls over prepared data. shmctl/msgctl(id, IPC_RMID,
            // NULL) and semctl(id, 0, IPC_RMID, 0); failures (gone, not ours) are
            // checked by the caller's second look.
            unsafe {
                if *nr == libc::SYS_semctl {
                    libc::syscall(*nr, *id, 0, libc::IPC_RMID, 0usize);
                } else {
                    libc::syscall(*nr, *id, libc::IPC_RMID, 0usize);
                }
            }
        }
        0
    })?;
    let left = ipc_of(uid);
    if !left.is_empty() {
        return Err(io::Error::other(format!(
            "{} SysV IPC objects of uid {uid} survive IPC_RMID",
            left.len()
        )));
    }
    Ok(found.len())
}

/// Both: the uid's files under the shared directories and its SysV IPC objects.
#[derive(Debug, Clone, Default)]
pub struct Cleared {
    pub files: Report,
    pub ipc: usize,
    pub micros: u64,
}

/// Removes everything `uid` left in the shared places: its files under `shared` (the
/// directories `super::shared_dirs` found) and its SysV IPC objects (see the module).
/// `Err` names what is left when the cleanup must be tried again: a bound reached, an
/// entry that could not be removed, IPC objects that survive.
pub fn clear(
    uid: u32,
    gid: u32,
    shared: &[std::path::PathBuf],
) -> Result<Cleared, (Cleared, String)> {
    let t = std::time::Instant::now();
    let dirs: Vec<&Path> = shared.iter().map(|d| d.as_path()).collect();
    let files = remove_files_of(uid, gid, &dirs, &Bounds::default());
    let ipc = remove_ipc_of(uid, gid);
    let mut c = Cleared {
        files,
        ipc: 0,
        micros: t.elapsed().as_micros() as u64,
    };
    let ipc_err = match ipc {
        Ok(n) => {
            c.ipc = n;
            None
        }
        Err(e) => Some(e.to_string()),
    };
    let why = if let Some(e) = ipc_err {
        Some(e)
    } else if c.files.truncated {
        Some(format!(
            "the walk stopped at its bound after {} entries",
            c.files.looked
        ))
    } else {
        c.files.first_error.clone()
    };
    match why {
        None => Ok(c),
        Some(w) => Err((c, w)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const U: u32 = 61_234;
    const G: u32 = 61_234;

    fn seen(dir: bool, uid: u32, gid: u32, mode: u32) -> Seen {
        Seen {
            dir,
            uid,
            gid,
            mode,
            dev: 7,
        }
    }

    #[test]
    fn removes_only_the_uids_entries_and_enters_only_where_it_could_write() {
        let b = Bounds::default();
        let d = |s: Seen| decide(&s, U, G, 7, 1, &b);
        // Files, links, sockets: the uid's go, others' stay.
        assert_eq!(d(seen(false, U, 0, 0o600)), Action::Remove);
        assert_eq!(d(seen(false, 0, G, 0o666)), Action::Leave);
        assert_eq!(d(seen(false, 1000, 1000, 0o777)), Action::Leave);
        // Its own directory: entered and removed once empty, whatever its mode.
        assert_eq!(
            d(seen(true, U, G, 0o000)),
            Action::Enter { then_remove: true }
        );
        // Others' directories it could write in: entered, kept.
        assert_eq!(
            d(seen(true, 0, 0, 0o1777)),
            Action::Enter { then_remove: false }
        );
        assert_eq!(
            d(seen(true, 1000, G, 0o770)),
            Action::Enter { then_remove: false }
        );
        // ... and those it could not: left, even group-writable for another group.
        assert_eq!(d(seen(true, 0, 0, 0o755)), Action::Leave);
        assert_eq!(d(seen(true, 1000, 1000, 0o770)), Action::Leave);
        assert_eq!(d(seen(true, 1000, 1000, 0o700)), Action::Leave);
    }

    #[test]
    fn never_leaves_the_filesystem_or_goes_past_the_depth() {
        let b = Bounds {
            entries: 10,
            depth: 3,
        };
        let own = seen(true, U, G, 0o700);
        assert_eq!(
            decide(&own, U, G, 7, 2, &b),
            Action::Enter { then_remove: true }
        );
        assert_eq!(decide(&own, U, G, 7, 3, &b), Action::Leave);
        let other_fs = Seen { dev: 8, ..own };
        assert_eq!(decide(&other_fs, U, G, 7, 1, &b), Action::Leave);
        // A file of the uid on another filesystem is still a name in this directory.
        let file = Seen {
            dir: false,
            dev: 8,
            ..own
        };
        assert_eq!(decide(&file, U, G, 7, 1, &b), Action::Remove);
    }

    #[test]
    fn reads_sysvipc_by_owner_or_creator() {
        let shm = "       key      shmid perms                  size  cpid  lpid nattch   uid   gid  cuid  cgid      atime      dtime      ctime                   rss                  swap
         0         12  600                  4096  100   100      0  61234 61234  61234 61234          0          0 1700000000                     0                     0
     12345         13  600                  4096  100   100      0  1000  1000  61234 61234          0          0 1700000000                     0                     0
     12346         14  666                  4096  100   100      0  1000  1000  1000  1000          0          0 1700000000                     0                     0
";
        assert_eq!(parse_sysvipc(IpcKind::Shm, shm, U), vec![12, 13]);
        assert_eq!(parse_sysvipc(IpcKind::Shm, shm, 1000), vec![13, 14]);
        let sem =
            "       key      semid perms      nsems   uid   gid  cuid  cgid      otime      ctime
         0          3   600          1  1000  1000 61234 61234          0 1700000000
";
        assert_eq!(parse_sysvipc(IpcKind::Sem, sem, U), vec![3]);
        let msg = "       key      msqid perms      cbytes       qnum lspid lrpid   uid   gid  cuid  cgid      stime      rtime      ctime
         0          5   600           0          0     0     0 61234 61234 61234 61234          0          0 1700000000
";
        assert_eq!(parse_sysvipc(IpcKind::Msg, msg, U), vec![5]);
        // The wrong kind's header, or none, gives nothing.
        assert!(parse_sysvipc(IpcKind::Shm, sem, U).is_empty());
        assert!(parse_sysvipc(IpcKind::Shm, "", U).is_empty());
        assert!(parse_sysvipc(IpcKind::Msg, "garbage\n1 2 3\n", U).is_empty());
    }

    #[test]
    fn refuses_root() {
        let r = remove_files_of(0, 0, &[Path::new("/nonexistent-dir")], &Bounds::default());
        assert!(r.first_error.unwrap().contains("uid 0"));
    }
}
