//! Looking up a runner's user (by name for `run_as`, by uid for a per-attempt uid): uid, gid, home and supplementary groups.
//!
//! Done in the daemon before forking, because `getpwnam_r` and `getgrouplist` may
//! allocate and read files, which is not allowed between fork and exec.

use std::ffi::{CStr, CString};
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// A local user the runner can run as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunAsUser {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    pub home: PathBuf,
    /// Supplementary groups, primary group included (what `initgroups` would set).
    pub groups: Vec<u32>,
}

#[derive(Debug)]
pub enum UserError {
    /// No such user in the password database.
    Unknown(String),
    /// The name cannot be a user name (empty, or contains NUL).
    BadName(String),
    /// The lookup itself failed (NSS error).
    Lookup {
        name: String,
        source: std::io::Error,
    },
}

impl fmt::Display for UserError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UserError::Unknown(n) => write!(
                f,
                "user {n:?} does not exist on this host: create it or change the profile's run_as"
            ),
            UserError::BadName(n) => write!(f, "{n:?} is not a valid user name"),
            UserError::Lookup { name, source } => {
                write!(f, "looking up user {name:?} failed: {source}")
            }
        }
    }
}

impl std::error::Error for UserError {}

/// Looks `name` up with `getpwnam_r` and its groups with `getgrouplist`.
pub fn lookup_user(name: &str) -> Result<RunAsUser, UserError> {
    let cname = CString::new(name).map_err(|_| UserError::BadName(name.to_string()))?;
    if name.is_empty() {
        return Err(UserError::BadName(name.to_string()));
    }
    match lookup_passwd(PwKey::Name(&cname)) {
        Ok(Some(mut u)) => {
            // The name asked for, as before (NSS may spell it differently).
            u.name = name.to_string();
            Ok(u)
        }
        Ok(None) => Err(UserError::Unknown(name.to_string())),
        Err(source) => Err(UserError::Lookup {
            name: name.to_string(),
            source,
        }),
    }
}

/// What to look a passwd entry up by.
pub(crate) enum PwKey<'a> {
    Name(&'a CStr),
    Uid(u32),
}

/// One passwd lookup (`getpwnam_r` or `getpwuid_r`) plus the user's groups: shared by
/// `lookup_user` and `uid::lookup_uid`. `Ok(None)` when there is no such entry.
pub(crate) fn lookup_passwd(key: PwKey<'_>) -> Result<Option<RunAsUser>, std::io::Error> {
    // SAFETY: sysconf has no preconditions.
    let hint = unsafe { libc::sysconf(libc::_SC_GETPW_R_SIZE_MAX) };
    let mut buf: Vec<libc::c_char> = vec![0; if hint > 0 { hint as usize } else { 4096 }];
    loop {
        // SAFETY: an all-zero passwd is a valid value to be overwritten.
        let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: every pointer is valid for the lengths given.
        let rc = unsafe {
            match key {
                PwKey::Name(cname) => libc::getpwnam_r(
                    cname.as_ptr(),
                    &mut pwd,
                    buf.as_mut_ptr(),
                    buf.len(),
                    &mut result,
                ),
                PwKey::Uid(uid) => {
                    libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut result)
                }
            }
        };
        if rc == libc::ERANGE && buf.len() < 1 << 20 {
            buf.resize(buf.len() * 2, 0);
            continue;
        }
        if rc != 0 {
            return Err(std::io::Error::from_raw_os_error(rc));
        }
        if result.is_null() {
            return Ok(None);
        }
        // SAFETY: on success pw_name and pw_dir point into `buf`, NUL-terminated.
        let (pw_name, home) = unsafe { (CStr::from_ptr(pwd.pw_name), CStr::from_ptr(pwd.pw_dir)) };
        let home = PathBuf::from(std::ffi::OsStr::from_bytes(home.to_bytes()));
        let groups = group_list(pw_name, pwd.pw_gid);
        return Ok(Some(RunAsUser {
            name: String::from_utf8_lossy(pw_name.to_bytes()).into_owned(),
            uid: pwd.pw_uid,
            gid: pwd.pw_gid,
            home,
            groups,
        }));
    }
}

fn group_list(cname: &CStr, gid: u32) -> Vec<u32> {
    let mut n: libc::c_int = 32;
    loop {
        let mut groups: Vec<libc::gid_t> = vec![0; n as usize];
        let mut count = n;
        // SAFETY: `groups` has room for `count` entries; getgrouplist updates count.
        let rc =
            unsafe { libc::getgrouplist(cname.as_ptr(), gid, groups.as_mut_ptr(), &mut count) };
        if rc >= 0 {
            groups.truncate(count.max(0) as usize);
            return groups;
        }
        if count <= n || n >= 65536 {
            // Could not grow: fall back to the primary group alone (least privilege).
            return vec![gid];
        }
        n = count;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_root_and_refuses_unknown() {
        let root = lookup_user("root").unwrap();
        assert_eq!((root.uid, root.gid), (0, 0));
        assert!(root.groups.contains(&0));
        assert!(matches!(
            lookup_user("no-such-user-rm-test"),
            Err(UserError::Unknown(_))
        ));
        assert!(matches!(lookup_user(""), Err(UserError::BadName(_))));
        assert!(matches!(lookup_user("a\0b"), Err(UserError::BadName(_))));
    }
}
