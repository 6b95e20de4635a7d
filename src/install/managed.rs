//! Managed installs on disk: each version unpacked once under `STATE_DIR/runners/<V>/`,
//! and a profile's install path (`STATE_DIR/runner`, or a `runner_dir` of ours) a
//! symbolic link to one of them, switched by renaming a new link over it (atomic: a
//! start sees the old install or the new one, never neither). Attempt roots link to
//! the install's resolved directory (`runner::root` canonicalizes it), so a switch
//! changes what new attempts get and nothing under a live one.
//!
//! An install path that is a directory of ours (`runner install` before this layout)
//! is adopted: moved to `runners/<V>/` and replaced by a link, only while no attempt
//! is live (the caller holds the allocation lock), since the move and the link are two
//! steps. A path without our marker is an operator's own: never touched.

use super::{InstallError, MARKER, Occupant, Release, download, install_tarball, occupant};
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Where versions live, under the state directory.
pub const VERSIONS_DIR: &str = "runners";

pub fn versions_dir(state_dir: &Path) -> PathBuf {
    state_dir.join(VERSIONS_DIR)
}

/// What stands at a profile's install path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A link to `runners/<version>`: ours, switched by the daemon.
    Linked { version: String },
    /// A directory of ours (`runner install`), not yet adopted.
    InPlace,
    /// Nothing there (or an empty directory).
    Missing,
    /// An operator's own install, or a link elsewhere: reported, never touched.
    Foreign,
}

/// Looks at `path` (not following a link, except to read where it points).
pub fn kind(path: &Path, state_dir: &Path) -> io::Result<Kind> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Kind::Missing),
        Err(e) => return Err(e),
    };
    if meta.file_type().is_symlink() {
        // Compared resolved: the state directory may be given relative, or reached
        // through a link of its own.
        let (Ok(target), Ok(vd)) = (
            std::fs::canonicalize(path),
            std::fs::canonicalize(versions_dir(state_dir)),
        ) else {
            return Ok(Kind::Foreign);
        };
        let version = match target.strip_prefix(&vd) {
            Ok(rest) if rest.components().count() == 1 => rest.to_string_lossy().into_owned(),
            _ => return Ok(Kind::Foreign),
        };
        return Ok(
            if super::versions::is_version(&version) && vd.join(&version).join(MARKER).is_file() {
                Kind::Linked { version }
            } else {
                Kind::Foreign
            },
        );
    }
    Ok(match occupant(path)? {
        Occupant::Ours => Kind::InPlace,
        Occupant::Absent | Occupant::Empty => Kind::Missing,
        Occupant::Foreign => Kind::Foreign,
    })
}

fn io_err(what: &str, p: &Path) -> impl FnOnce(io::Error) -> InstallError {
    let msg = format!("{what} {}", p.display());
    move |e| InstallError::Io(format!("{msg}: {e}"))
}

/// The versions directory, created readable by runners (the daemon's umask would
/// make it private, and runners reach their install through it).
fn ensure_versions_dir(state_dir: &Path) -> Result<PathBuf, InstallError> {
    let vd = versions_dir(state_dir);
    std::fs::create_dir_all(&vd).map_err(io_err("creating", &vd))?;
    std::fs::set_permissions(&vd, std::fs::Permissions::from_mode(0o755))
        .map_err(io_err("setting the mode of", &vd))?;
    Ok(vd)
}

/// Whether `runners/<version>` holds a whole install of ours.
pub fn is_complete(dir: &Path) -> bool {
    dir.join(MARKER).is_file() && crate::runner::check_install(dir).is_ok()
}

/// Makes sure `runners/<release.version>` holds the release: downloaded beside the
/// others, its SHA-256 checked when published, unpacked whole (or not at all).
/// Returns the directory and whether it was fetched now. `progress` may cancel it.
pub fn fetch(
    release: &Release,
    state_dir: &Path,
    progress: &mut dyn super::Progress,
) -> Result<(PathBuf, bool), InstallError> {
    if !super::versions::is_version(&release.version) {
        return Err(InstallError::NoRelease(format!(
            "{:?} is not a runner version",
            release.version
        )));
    }
    let vd = ensure_versions_dir(state_dir)?;
    let dir = vd.join(&release.version);
    if is_complete(&dir) {
        return Ok((dir, false));
    }
    let tarball = vd.join(format!("{}.download", release.version));
    download(&release.url, &tarball, release.sha256.as_deref(), progress)?;
    let result = install_tarball(&tarball, &dir);
    let _ = std::fs::remove_file(&tarball);
    result.map(|()| (dir, true))
}

/// Points `path` at `dir` by renaming a new link over it: atomic. `path` must be a
/// link already, absent, or an empty directory.
pub fn switch(path: &Path, dir: &Path) -> Result<(), InstallError> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".switch");
    let tmp = PathBuf::from(tmp);
    let _ = std::fs::remove_file(&tmp);
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(io_err("creating", parent))?;
    }
    // Absolute: a link's relative target would be read from the link's own directory.
    let dir = std::path::absolute(dir).map_err(io_err("resolving", dir))?;
    std::os::unix::fs::symlink(&dir, &tmp).map_err(io_err("linking", &tmp))?;
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()) {
        // Only an empty directory gets here (`kind` said Missing): nothing to lose.
        std::fs::remove_dir(path).map_err(io_err("removing the empty", path))?;
    }
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io_err("switching", path)(e)
    })
}

/// Adopts a directory install of ours at `path` (version `version`): moved to
/// `runners/<version>` (or removed, when that exists already) and replaced by a link.
/// The caller makes sure no attempt is live: between the two steps `path` is absent.
pub fn adopt(path: &Path, version: &str, state_dir: &Path) -> Result<PathBuf, InstallError> {
    if !super::versions::is_version(version) {
        return Err(InstallError::Io(format!(
            "{} says it is version {version:?}, which is not a runner version",
            path.display()
        )));
    }
    let vd = ensure_versions_dir(state_dir)?;
    let dir = vd.join(version);
    if is_complete(&dir) {
        switch_over_dir(path, &dir)?;
    } else {
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(io_err("removing the partial", &dir))?;
        }
        std::fs::rename(path, &dir).map_err(io_err("moving", path))?;
        switch(path, &dir)?;
    }
    Ok(dir)
}

/// Replaces the directory at `path` by a link to `dir`: the directory is moved aside
/// first, then removed.
fn switch_over_dir(path: &Path, dir: &Path) -> Result<(), InstallError> {
    let mut aside = path.as_os_str().to_owned();
    aside.push(".adopted");
    let aside = PathBuf::from(aside);
    std::fs::rename(path, &aside).map_err(io_err("moving aside", path))?;
    switch(path, dir)?;
    let _ = std::fs::remove_dir_all(&aside);
    Ok(())
}

/// The versions unpacked under `runners/` (whole or not; leftovers of a crash such as
/// `<V>.partial` or `<V>.download` are not versions).
pub fn installed(state_dir: &Path) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(versions_dir(state_dir)) else {
        return Vec::new();
    };
    let mut v: Vec<String> = rd
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| super::versions::is_version(n))
        .collect();
    v.sort_by(|a, b| super::compare_versions(a, b));
    v
}

/// The targets of a root's top-level links (the install directories it shares).
pub fn root_links(root: &Path) -> io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(root)? {
        let e = e?;
        if e.file_type()?.is_symlink() {
            out.push(std::fs::read_link(e.path())?);
        }
    }
    Ok(out)
}

/// Removes `runners/<version>`.
pub fn remove(state_dir: &Path, version: &str) -> Result<(), InstallError> {
    let dir = versions_dir(state_dir).join(version);
    if !super::versions::is_version(version) || dir.join(MARKER).symlink_metadata().is_err() {
        return Err(InstallError::NotOurs(dir));
    }
    std::fs::remove_dir_all(&dir).map_err(io_err("removing", &dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_install(dir: &Path, version: &str) {
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        std::fs::create_dir_all(dir.join("externals")).unwrap();
        std::fs::write(dir.join(MARKER), "ours\n").unwrap();
        std::fs::write(dir.join("bin/runnerversion"), version).unwrap();
        let l = dir.join("bin/Runner.Listener");
        std::fs::write(&l, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&l, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn adopt_switch_and_remove() {
        let state = std::env::temp_dir().join(format!("rm-managed-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&state);
        std::fs::create_dir_all(&state).unwrap();
        let path = state.join("runner");
        assert_eq!(kind(&path, &state).unwrap(), Kind::Missing);
        fake_install(&path, "2.336.0");
        assert_eq!(kind(&path, &state).unwrap(), Kind::InPlace);
        adopt(&path, "2.336.0", &state).unwrap();
        assert_eq!(
            kind(&path, &state).unwrap(),
            Kind::Linked {
                version: "2.336.0".into()
            }
        );
        assert_eq!(
            super::super::installed_version(&path).as_deref(),
            Some("2.336.0")
        );
        let new = versions_dir(&state).join("2.337.0");
        fake_install(&new, "2.337.0");
        switch(&path, &new).unwrap();
        assert_eq!(
            super::super::installed_version(&path).as_deref(),
            Some("2.337.0")
        );
        assert_eq!(installed(&state), vec!["2.336.0", "2.337.0"]);
        remove(&state, "2.336.0").unwrap();
        assert_eq!(installed(&state), vec!["2.337.0"]);
        // Reached through a link to the state directory, it is still ours.
        let alias = std::env::temp_dir().join(format!("rm-managed-alias-{}", std::process::id()));
        let _ = std::fs::remove_file(&alias);
        std::os::unix::fs::symlink(&state, &alias).unwrap();
        assert_eq!(
            kind(&alias.join("runner"), &alias).unwrap(),
            Kind::Linked {
                version: "2.337.0".into()
            }
        );
        let _ = std::fs::remove_file(&alias);
        // An operator's own install is foreign; so is a link elsewhere.
        let own = state.join("own");
        std::fs::create_dir_all(own.join("bin")).unwrap();
        assert_eq!(kind(&own, &state).unwrap(), Kind::Foreign);
        let elsewhere = state.join("elsewhere");
        std::os::unix::fs::symlink(&own, &elsewhere).unwrap();
        assert_eq!(kind(&elsewhere, &state).unwrap(), Kind::Foreign);
        assert!(remove(&state, "../own").is_err());
        let _ = std::fs::remove_dir_all(&state);
    }
}
