//! `runner install [--version V] [--dir DIR] [--target T]`: fetch the actions-runner
//! release for this machine from a target's downloads API, verify it, unpack it.

use super::output::Out;
use super::parse::Invocation;
use super::spec::opts;
use super::{CliError, CliResult};
use crate::domain::Target;
use crate::github::{GitHubClient, load_credential};
use crate::install::{self, Progress};
use crate::store::Store;
use serde_json::json;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

/// The target whose downloads API to ask: `--target`, else the only one.
pub(super) fn pick_target(inv: &Invocation, store: &dyn Store) -> Result<Target, CliError> {
    if let Some(t) = inv.value(&opts::runner_install::TARGET) {
        return Ok(store.target(t)?);
    }
    let mut all = store.targets()?;
    match all.len() {
        1 => Ok(all.remove(0)),
        0 => Err(CliError::Usage(
            "no target to ask for the runner release: add one with 'target add' first".into(),
        )),
        _ => Err(CliError::usage(
            "--target",
            "several targets exist: name the one whose downloads API to ask",
        )),
    }
}

/// A one-line bar on stderr, redrawn at most once per percent.
struct Bar {
    label: String,
    last: Option<u64>,
}

impl Progress for Bar {
    fn update(&mut self, done: u64, total: Option<u64>) {
        let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
        let (key, line) = match total.filter(|t| *t > 0) {
            Some(t) => {
                let pct = done * 100 / t;
                let filled = (pct / 5) as usize;
                (
                    pct,
                    format!(
                        "\r{} [{}{}] {pct:3}% {:.1}/{:.1} MiB",
                        self.label,
                        "#".repeat(filled),
                        " ".repeat(20 - filled.min(20)),
                        mib(done),
                        mib(t)
                    ),
                )
            }
            None => (done >> 20, format!("\r{} {:.1} MiB", self.label, mib(done))),
        };
        if self.last != Some(key) {
            self.last = Some(key);
            let mut e = std::io::stderr().lock();
            let _ = e.write_all(line.as_bytes());
            let _ = e.flush();
        }
    }

    fn finish(&mut self) {
        if self.last.is_some() {
            eprintln!();
        }
    }
}

fn sibling(dir: &Path, suffix: &str) -> PathBuf {
    let mut s = dir.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

pub fn run(inv: &Invocation, store: &dyn Store, state_dir: &Path) -> CliResult {
    let dir = match inv.value(&opts::runner_install::DIR) {
        Some(d) => crate::domain::validate::path("--dir", d)?,
        None => state_dir.join("runner"),
    };
    // A path the daemon switches between versions (`install::managed`) gets the
    // release beside the others and its link switched.
    let linked = matches!(
        install::managed::kind(&dir, state_dir),
        Ok(install::managed::Kind::Linked { .. })
    );
    // Before anything is fetched: only an install of ours is ever replaced.
    if !linked {
        install::check_replaceable(&dir).map_err(|e| match e {
            install::InstallError::NotOurs(_) => CliError::usage("--dir", &e.to_string()),
            other => CliError::Failed(other.to_string()),
        })?;
    }
    let target = pick_target(inv, store)?;
    let (os, arch) = install::platform().ok_or_else(|| {
        CliError::Failed(format!(
            "GitHub builds no runner for {}-{}",
            std::env::consts::OS,
            std::env::consts::ARCH
        ))
    })?;
    let credential = load_credential(&target.credential).map_err(|e| {
        CliError::about_target(
            super::exit::Failure::of_auth(&e),
            &target.name,
            format!("target {}: {e}", target.name),
        )
    })?;
    let client = GitHubClient::new(&target, credential);
    let downloads = client.runner_downloads(&target.scope).map_err(|e| {
        CliError::github(
            &target.name,
            &e,
            format!("asking {} for runner downloads: {e}", target.name),
        )
    })?;
    let release = install::choose(
        &downloads,
        os,
        arch,
        inv.value(&opts::runner_install::VERSION),
    )
    .map_err(|e| CliError::Failed(e.to_string()))?;
    let mut out = Out::new(inv.json);
    let report = |out: &mut Out, verb: &str, sha: Option<&str>| {
        let (d, v) = (dir.display().to_string(), release.version.clone());
        let sha = sha.map(str::to_string);
        out.emit(
            || format!("runner {v} ({os}-{arch}) {verb} in {d}\n"),
            || json!({"runner": {"version": v, "os": os, "arch": arch, "dir": d, "sha256": sha, "result": verb}}),
        );
    };
    if install::installed_version(&dir).as_deref() == Some(release.version.as_str()) {
        report(&mut out, "already installed", None);
        return out.flush();
    }
    if release.sha256.is_none() {
        eprintln!(
            "runner-manager: warning: no SHA-256 is published for runner {} (the downloads API lists only the newest); trusting the TLS download alone",
            release.version
        );
    }
    if linked {
        let (vdir, _) = install::managed::fetch(&release, state_dir, &mut ())
            .map_err(|e| CliError::Failed(e.to_string()))?;
        install::managed::switch(&dir, &vdir).map_err(|e| CliError::Failed(e.to_string()))?;
        report(&mut out, "installed", release.sha256.as_deref());
        return out.flush();
    }
    let tarball = sibling(&dir, ".download");
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|e| CliError::Failed(format!("creating {}: {e}", parent.display())))?;
    }
    let mut bar = Bar {
        label: release.filename.clone(),
        last: None,
    };
    let progress: &mut dyn Progress = if std::io::stderr().is_terminal() {
        &mut bar
    } else {
        &mut ()
    };
    let sha = install::download(&release.url, &tarball, release.sha256.as_deref(), progress)
        .map_err(|e| CliError::Failed(e.to_string()))?;
    let result = install::install_tarball(&tarball, &dir);
    let _ = std::fs::remove_file(&tarball);
    result.map_err(|e| match e {
        install::InstallError::NotOurs(_) => CliError::usage("--dir", &e.to_string()),
        other => CliError::Failed(other.to_string()),
    })?;
    report(&mut out, "installed", Some(&sha));
    out.flush()
}
