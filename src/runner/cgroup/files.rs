//! File operations on cgroup file systems: never following a link, one write per value.

use super::{CGROUP_SUPER_MAGIC, CGROUP2_SUPER_MAGIC, CgroupError};
use std::ffi::CString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

pub(super) fn io_err(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> CgroupError {
    let path = path.to_path_buf();
    move |source| CgroupError::Io {
        action,
        path,
        source,
    }
}

pub(super) fn is_real_dir(p: &Path) -> bool {
    fs::symlink_metadata(p).is_ok_and(|m| m.is_dir())
}

/// mkdir, accepting an existing directory (never a link).
pub(super) fn ensure_dir(p: &Path) -> Result<(), CgroupError> {
    match fs::create_dir(p) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            if is_real_dir(p) {
                Ok(())
            } else {
                Err(CgroupError::NotACgroup {
                    path: p.to_path_buf(),
                })
            }
        }
        Err(e) => Err(io_err("creating", p)(e)),
    }
}

pub(super) fn check_cgroupfs(dir: &Path) -> Result<(), CgroupError> {
    let not = || CgroupError::NotACgroup {
        path: dir.to_path_buf(),
    };
    if !is_real_dir(dir) {
        return Err(not());
    }
    let c = CString::new(dir.as_os_str().as_bytes()).map_err(|_| not())?;
    // SAFETY: statfs fills the zeroed struct; the path is NUL-terminated.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return Err(io_err("checking", dir)(io::Error::last_os_error()));
    }
    #[allow(clippy::unnecessary_cast)] // f_type's width differs between targets
    let magic = st.f_type as i64;
    if magic == CGROUP_SUPER_MAGIC || magic == CGROUP2_SUPER_MAGIC {
        Ok(())
    } else {
        Err(not())
    }
}

pub(super) fn open_nofollow(path: &Path, write: bool) -> io::Result<File> {
    let mut o = OpenOptions::new();
    if write {
        o.write(true);
    } else {
        o.read(true);
    }
    o.custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// One write(2) of the whole value, as cgroup files want.
pub(super) fn write_value(path: &Path, value: &str) -> io::Result<()> {
    let mut f = open_nofollow(path, true)?;
    f.write_all(value.as_bytes())
}

pub(super) fn read_value(path: &Path) -> Option<String> {
    let mut s = String::new();
    open_nofollow(path, false)
        .ok()?
        .read_to_string(&mut s)
        .ok()?;
    Some(s)
}

pub(super) fn read_u64(path: &Path) -> Option<u64> {
    read_value(path)?.trim().parse().ok()
}

/// `key N` from a flat-keyed file (cpu.stat, memory.events, memory.oom_control).
pub(super) fn read_keyed(path: &Path, key: &str) -> Option<u64> {
    read_value(path)?.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

pub(super) fn read_pids(procs: &Path) -> Vec<i32> {
    read_value(procs)
        .map(|t| t.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

pub(super) fn write_file(dir: &Path, name: &str, value: &str) -> Result<(), CgroupError> {
    let p = dir.join(name);
    write_value(&p, value).map_err(io_err("writing", &p))
}
