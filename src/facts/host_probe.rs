//! The host's settings checked on this machine as the daemon and `update` will read
//! them (`store::HostProbe`): token and CA files, the runtime root, the runner users,
//! a release source, the webhook's secret, and uid ranges other daemons here hold.
//! `host set` and `top` both edit through `store::edit_host` with this probe.

use crate::domain::host_settings::{Beside, HostSettings};
use crate::domain::{Invalid, UidRange};
use std::path::{Path, PathBuf};

/// The probe of the daemon whose state directory is `state_dir`.
pub struct Probe {
    pub state_dir: PathBuf,
}

impl crate::store::HostProbe for Probe {
    fn setting(&self, key: &str, after: &HostSettings) -> Result<(), Invalid> {
        let h = &after.host;
        match key {
            "coordinator_token_file" => h
                .coordinator_token_file
                .as_deref()
                .map_or(Ok(()), |p| secret_file(key, p)),
            "coordinator_ca_file" => h.coordinator_ca_file.as_deref().map_or(Ok(()), |p| {
                readable_file(key, p)?;
                crate::coordinator::tls::check_ca_file(p).map_err(|e| Invalid::new(key, e))
            }),
            "runtime_root" => h
                .runtime_root
                .as_deref()
                .map_or(Ok(()), |p| runtime_root_on_disk(key, p)),
            "runner_uids" => h.runner_uids.map_or(Ok(()), |r| runner_users_exist(key, r)),
            _ => match Beside::of(key).and_then(|b| Some((b, after.beside(b)?))) {
                Some((Beside::ReleaseSource, v)) => release_source(key, v),
                Some((Beside::WebhookSecretFile, v)) => read_secret(Path::new(v))
                    .map(drop)
                    .map_err(|e| Invalid::new(key, e)),
                _ => Ok(()),
            },
        }
    }

    /// A range another daemon on this host holds would be refused at its daemon's
    /// next start (exit 7) or left `refused` while it runs: refused here first.
    fn uids_free(&self, range: UidRange) -> Result<(), Invalid> {
        use crate::runner::claim;
        match claim::check(&claim::lock_dir(), &self.state_dir, range) {
            Err(e @ claim::ClaimError::Held { .. }) => {
                Err(Invalid::new("runner_uids", e.to_string()))
            }
            _ => Ok(()),
        }
    }
}

/// Checks that a file the daemon will read later exists and is readable now.
pub fn readable_file(arg: &str, path: &Path) -> Result<(), Invalid> {
    match std::fs::File::open(path) {
        Ok(f) if f.metadata().is_ok_and(|m| m.is_file()) => Ok(()),
        Ok(_) => Err(Invalid::new(
            arg,
            format!("{} is not a file", path.display()),
        )),
        Err(e) => Err(Invalid::new(
            arg,
            format!("cannot read {}: {e}", path.display()),
        )),
    }
}

/// Checks that a token or key file the daemon will read later is one it will accept:
/// readable now, a regular file, private to its owner (see `secret::read_secret_file`).
pub fn secret_file(arg: &str, path: &Path) -> Result<(), Invalid> {
    crate::secret::read_secret_file(path)
        .map(drop)
        .map_err(|e| Invalid::new(arg, e.to_string()))
}

/// A GitHub App key file: readable as a secret and a PEM RSA private key, so a wrong
/// file is refused when it is named rather than at the daemon's first token.
pub fn app_key_file(arg: &str, path: &Path) -> Result<(), Invalid> {
    let pem =
        crate::secret::read_secret_file(path).map_err(|e| Invalid::new(arg, e.to_string()))?;
    crate::github::jwt::AppKey::from_pem(pem.expose())
        .map(drop)
        .map_err(|detail| {
            Invalid::new(
                arg,
                format!(
                    "{} is not a GitHub App private key (a PEM RSA key): {detail}",
                    path.display()
                ),
            )
        })
}

/// `release_source=`: where `update` finds releases. A directory must be one now, and
/// one nobody but root or this user can write (`selfupdate::trust`: `update` runs what
/// it holds).
fn release_source(key: &str, value: &str) -> Result<(), Invalid> {
    use crate::selfupdate::release::Source;
    match Source::parse(key, value)? {
        Some(Source::Dir(d)) if !d.is_dir() => Err(Invalid::new(
            key,
            format!("{} is not a directory", d.display()),
        )),
        Some(Source::Dir(d)) => crate::selfupdate::trust::audit(&d)
            .map(drop)
            .map_err(|why| Invalid::new(key, why)),
        _ => Ok(()),
    }
}

/// A runtime root must be a directory now, reached through no symbolic link, the
/// manager's, and writable by nobody else: runner roots, caches and kept workspaces
/// are made and removed under it with the manager's rights.
fn runtime_root_on_disk(key: &str, p: &Path) -> Result<(), Invalid> {
    use std::os::unix::fs::MetadataExt;
    let bad = |why: String| Err(Invalid::new(key, format!("{}: {why}", p.display())));
    let m = match std::fs::symlink_metadata(p) {
        Ok(m) => m,
        Err(e) => {
            return bad(format!(
                "cannot be read ({e}); create it first (mkdir -m 0711)"
            ));
        }
    };
    if !m.is_dir() {
        return bad("is not a directory".into());
    }
    match std::fs::canonicalize(p) {
        Ok(c) if c == p => {}
        _ => return bad("is reached through a symbolic link; name the real directory".into()),
    }
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if m.uid() != me {
        return bad(format!(
            "belongs to uid {}, not to the manager (uid {me})",
            m.uid()
        ));
    }
    if m.mode() & 0o022 != 0 {
        return bad(format!(
            "group or others can write it (mode {:o}); chmod go-w it",
            m.mode() & 0o7777
        ));
    }
    Ok(())
}

/// A range is only of use if its uids are users: jobs run ssh, git and package
/// managers, which look the user up. Refuses a range none of whose uids has a passwd
/// entry (the users were not created yet), naming how to create them.
fn runner_users_exist(key: &str, r: UidRange) -> Result<(), Invalid> {
    if crate::runner::uid::count_users(r, 1) == 0 {
        return Err(Invalid::new(
            key,
            format!(
                "no uid of {r} has a passwd entry; create the runner users first \
                 (packaging/install.sh --runner-users {r}, or useradd one per uid)"
            ),
        ));
    }
    Ok(())
}

/// The webhook's secret as the listener reads it: a regular file nobody else can read.
pub fn read_secret(path: &Path) -> Result<crate::secret::Secret, String> {
    let s = crate::secret::read_secret_file(path).map_err(|e| e.to_string())?;
    let trimmed = s.expose().trim();
    if trimmed.is_empty() {
        return Err(format!("{} is empty", path.display()));
    }
    Ok(crate::secret::Secret::new(trimmed))
}
