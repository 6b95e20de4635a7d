//! `runner install`: choose the actions-runner release for this OS and arch from a
//! target's downloads API, download it verifying its SHA-256, and unpack it safely and
//! atomically into the runner directory. Also what `doctor` asks of an install
//! (`installed_version`, `compare_versions`). `managed` keeps versions side by side
//! for the daemon to switch between; `versions` holds the pure decisions about which.

mod download;
pub mod managed;
mod unpack;
pub mod versions;

pub use download::{Progress, agent, download, loopback_http};
pub use unpack::{
    MARKER, Occupant, UnpackError, check_replaceable, install_tarball, occupant, unpack_safely,
};

pub use versions::parse_pin;

use crate::github::RunnerDownload;
use std::cmp::Ordering;
use std::fmt;
use std::path::Path;

/// What one install fetches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Release {
    pub version: String,
    pub url: String,
    pub filename: String,
    /// Lowercase hex, when the downloads API published it for this version.
    pub sha256: Option<String>,
}

/// Why an install failed; each message says what to do.
#[derive(Debug)]
pub enum InstallError {
    /// No release for this OS/arch in the downloads list.
    NoRelease(String),
    /// The download failed (network, HTTP status, size).
    Download(String),
    /// The bytes do not have the published SHA-256; nothing was unpacked.
    Checksum { expected: String, actual: String },
    /// The archive is unsafe or damaged; nothing was installed.
    Unpack(UnpackError),
    /// A filesystem step failed.
    Io(String),
    /// The directory (or its `.partial`, `.previous`) holds something `runner install`
    /// did not put there: refused, nothing written or removed.
    NotOurs(std::path::PathBuf),
}

impl fmt::Display for InstallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InstallError::NoRelease(m) | InstallError::Download(m) | InstallError::Io(m) => {
                f.write_str(m)
            }
            InstallError::Checksum { expected, actual } => write!(
                f,
                "the download's SHA-256 is {actual}, not the published {expected}: refused, nothing installed; try again, and if it persists report it"
            ),
            InstallError::Unpack(e) => write!(f, "{e}; nothing installed"),
            InstallError::NotOurs(p) => write!(
                f,
                "{} is not empty and was not installed by 'runner install' (it has no {MARKER}): refused, nothing written or removed; give an empty or new directory (an install by an older runner-manager: remove it, or create that file in it)",
                p.display()
            ),
        }
    }
}

impl From<UnpackError> for InstallError {
    fn from(e: UnpackError) -> InstallError {
        InstallError::Unpack(e)
    }
}

/// This machine's (os, arch) in the downloads API's words, if GitHub builds for it.
pub fn platform() -> Option<(&'static str, &'static str)> {
    let os = match std::env::consts::OS {
        "linux" => "linux",
        "macos" => "osx",
        _ => return None,
    };
    let arch = match std::env::consts::ARCH {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        "arm" => "arm",
        _ => return None,
    };
    Some((os, arch))
}

/// The version in a release file name (`actions-runner-linux-x64-2.336.0.tar.gz`).
pub fn version_of(filename: &str, os: &str, arch: &str) -> Option<String> {
    let v = filename
        .strip_prefix(&format!("actions-runner-{os}-{arch}-"))?
        .strip_suffix(".tar.gz")?;
    (!v.is_empty() && v.chars().all(|c| c.is_ascii_digit() || c == '.')).then(|| v.to_string())
}

/// Picks the release for `os`/`arch`. Without `version`, the listed (newest) one with
/// its checksum. With another version, the same URL with the version replaced (GitHub's
/// release URLs are regular) and no checksum, since the API publishes only the newest.
pub fn choose(
    downloads: &[RunnerDownload],
    os: &str,
    arch: &str,
    version: Option<&str>,
) -> Result<Release, InstallError> {
    let d = downloads
        .iter()
        .find(|d| d.os == os && d.arch == arch)
        .ok_or_else(|| {
            InstallError::NoRelease(format!(
                "the downloads API lists no runner for {os}-{arch}; GitHub does not build one for this machine"
            ))
        })?;
    let newest = version_of(&d.filename, os, arch).ok_or_else(|| {
        InstallError::NoRelease(format!(
            "cannot read a version from the listed file name {:?}",
            d.filename
        ))
    })?;
    match version {
        None => Ok(Release {
            version: newest,
            url: d.url.clone(),
            filename: d.filename.clone(),
            sha256: d.sha256.clone(),
        }),
        Some(v) if v == newest => choose(downloads, os, arch, None),
        Some(v) => {
            if v.is_empty() || !v.chars().all(|c| c.is_ascii_digit() || c == '.') {
                return Err(InstallError::NoRelease(format!(
                    "--version {v:?} is not a runner version like 2.330.0"
                )));
            }
            Ok(Release {
                version: v.to_string(),
                url: d.url.replace(&newest, v),
                filename: d.filename.replace(&newest, v),
                sha256: None,
            })
        }
    }
}

/// The version an install says it is (`bin/runnerversion`), if readable.
pub fn installed_version(dir: &Path) -> Option<String> {
    let v = std::fs::read_to_string(dir.join("bin/runnerversion")).ok()?;
    let v = v.trim();
    (!v.is_empty()).then(|| v.to_string())
}

/// Orders dotted versions numerically (`2.9.0 < 2.10.0`); a part that is not a number
/// compares as 0.
pub fn compare_versions(a: &str, b: &str) -> Ordering {
    let parts = |s: &str| -> Vec<u64> { s.split('.').map(|p| p.parse().unwrap_or(0)).collect() };
    let (a, b) = (parts(a), parts(b));
    for i in 0..a.len().max(b.len()) {
        let o = a.get(i).unwrap_or(&0).cmp(b.get(i).unwrap_or(&0));
        if o != Ordering::Equal {
            return o;
        }
    }
    Ordering::Equal
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dl(os: &str, arch: &str, v: &str) -> RunnerDownload {
        RunnerDownload {
            os: os.into(),
            arch: arch.into(),
            url: format!(
                "https://github.com/actions/runner/releases/download/v{v}/actions-runner-{os}-{arch}-{v}.tar.gz"
            ),
            filename: format!("actions-runner-{os}-{arch}-{v}.tar.gz"),
            sha256: Some("ab".repeat(32)),
        }
    }

    #[test]
    fn choosing_a_release() {
        let list = vec![dl("osx", "x64", "2.336.0"), dl("linux", "x64", "2.336.0")];
        let r = choose(&list, "linux", "x64", None).unwrap();
        assert_eq!(r.version, "2.336.0");
        assert!(r.sha256.is_some());
        let r = choose(&list, "linux", "x64", Some("2.330.1")).unwrap();
        assert_eq!(
            r.url,
            "https://github.com/actions/runner/releases/download/v2.330.1/actions-runner-linux-x64-2.330.1.tar.gz"
        );
        assert_eq!(r.sha256, None);
        assert!(choose(&list, "linux", "arm64", None).is_err());
        assert!(choose(&list, "linux", "x64", Some("../x")).is_err());
        assert_eq!(
            version_of("actions-runner-linux-x64-2.1.0.tar.gz", "linux", "x64").as_deref(),
            Some("2.1.0")
        );
        assert_eq!(compare_versions("2.9.0", "2.10.0"), Ordering::Less);
        assert_eq!(compare_versions("2.10", "2.10.0"), Ordering::Equal);
    }
}
