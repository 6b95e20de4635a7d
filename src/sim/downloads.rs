//! The runner downloads the simulated GitHub offers: `GET .../actions/runners/downloads`
//! (GitHub's shape, with SHA-256 checksums) and the tarballs themselves under
//! `/_sim/downloads/v<V>/actions-runner-<os>-<arch>-<V>.tar.gz` on the sim's own origin.
//!
//! A real release's `bin/Runner.Listener` is a .NET program. Ours is a bash script that
//! execs runner-manager under the name `Runner.Listener` (`exec -a "$0"`), which runs the
//! simulated runner (main.rs dispatches on argv[0]); `Runner.Worker` likewise. The path
//! of that binary is baked into the tarball when it is generated: `State::runner_binary`,
//! else the sim's own executable when it is runner-manager (`runner-manager sim github`).
//! Without either, the scripts say so and exit 1: the tarball still has the real layout
//! and checksum for `runner install` to verify and unpack.

use super::github::Out;
use super::install::SCRIPTS;
use super::state::State;
use crate::http_server::{Reply, Response};
use flate2::Compression;
use flate2::write::GzEncoder;
use serde::Serialize;
use std::path::PathBuf;

/// The os-arch pairs GitHub publishes runners for.
pub const PLATFORMS: &[(&str, &str)] = &[
    ("osx", "x64"),
    ("osx", "arm64"),
    ("linux", "x64"),
    ("linux", "arm64"),
    ("linux", "arm"),
    ("win", "x64"),
    ("win", "arm64"),
];

/// One entry of the downloads list, as GitHub's schema has it.
#[derive(Debug, Serialize)]
struct RunnerApplication {
    os: String,
    architecture: String,
    download_url: String,
    filename: String,
    sha256_checksum: String,
}

pub fn filename(os: &str, arch: &str, version: &str) -> String {
    let ext = if os == "win" { "zip" } else { "tar.gz" };
    format!("actions-runner-{os}-{arch}-{version}.{ext}")
}

fn runner_binary(st: &State) -> Option<PathBuf> {
    st.runner_binary.clone().or_else(|| {
        std::env::current_exe()
            .ok()
            .filter(|p| p.file_name().is_some_and(|n| n == "runner-manager"))
    })
}

fn exec_script(binary: Option<&PathBuf>) -> String {
    let head = "#!/bin/bash\n# The simulated GitHub's runner release: runs runner-manager's simulated runner\n# under this program's name (a real release has a .NET program here).\n";
    match binary {
        Some(b) => format!(
            "{head}exec -a \"$0\" '{}' \"$@\"\n",
            b.display().to_string().replace('\'', r"'\''")
        ),
        None => format!(
            "{head}echo \"this simulated runner release knows no runner-manager binary to run (set the sim's runner_binary)\" >&2\nexit 1\n"
        ),
    }
}

/// The tarball for one platform and version: deterministic bytes (fixed times, modes
/// and owners), so its checksum is stable for a given binary path.
pub fn tarball(st: &State, version: &str) -> Vec<u8> {
    let script = exec_script(runner_binary(st).as_ref());
    let mut files: Vec<(String, Vec<u8>, u32)> = vec![
        (
            "./bin/Runner.Listener".into(),
            script.clone().into_bytes(),
            0o755,
        ),
        ("./bin/Runner.Worker".into(), script.into_bytes(), 0o755),
        (
            "./bin/runnerversion".into(),
            version.as_bytes().to_vec(),
            0o644,
        ),
    ];
    for (name, text) in SCRIPTS {
        files.push((format!("./{name}"), text.as_bytes().to_vec(), 0o755));
    }
    let gz = GzEncoder::new(Vec::new(), Compression::default());
    let mut b = tar::Builder::new(gz);
    let dirs = ["./", "./bin/", "./externals/"];
    let mut append = |path: &str, kind: tar::EntryType, mode: u32, data: &[u8]| {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(kind);
        h.set_mode(mode);
        h.set_mtime(0);
        h.set_uid(1001);
        h.set_gid(127);
        h.set_size(data.len() as u64);
        // Paths are short ASCII literals: set_path cannot fail on them.
        let _ = h.set_path(path);
        h.set_cksum();
        let _ = b.append(&h, data);
    };
    for d in dirs {
        append(d, tar::EntryType::Directory, 0o755, &[]);
    }
    for (path, data, mode) in &files {
        append(path, tar::EntryType::Regular, *mode, data);
    }
    // Writing into a Vec cannot fail.
    b.into_inner()
        .and_then(|gz| gz.finish())
        .unwrap_or_default()
}

fn sha256_hex(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, bytes)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `GET /repos/{o}/{r}/actions/runners/downloads` (and the org one): every platform at
/// the sim's newest release (`State::runner_release`, `control::RUNNER_VERSION` until one is
/// published). Windows entries are listed like GitHub's but not served.
pub fn list(st: &State) -> Out {
    let release = st.runner_release.as_str();
    let tgz = tarball(st, release);
    let sum = sha256_hex(&tgz);
    let apps: Vec<RunnerApplication> = PLATFORMS
        .iter()
        .map(|(os, arch)| {
            let file = filename(os, arch, release);
            RunnerApplication {
                os: os.to_string(),
                architecture: arch.to_string(),
                download_url: format!("{}/_sim/downloads/v{release}/{file}", st.base_url),
                filename: file,
                sha256_checksum: sum.clone(),
            }
        })
        .collect();
    Out::json(200, &apps)
}

/// `GET /_sim/downloads/v<V>/actions-runner-<os>-<arch>-<V>.tar.gz`: any version of the
/// listed platforms, so `runner install --version` has something to fetch.
pub fn serve_tarball(st: &State, path: &str) -> Reply {
    let not_found = || Reply::Send(Response::new(404).with_body(b"Not Found".to_vec()));
    let Some((v, file)) = path.strip_prefix('v').and_then(|p| p.split_once('/')) else {
        return not_found();
    };
    let known = PLATFORMS
        .iter()
        .any(|(os, arch)| *os != "win" && filename(os, arch, v) == file);
    if !known || v.is_empty() || !v.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return not_found();
    }
    Reply::Send(
        Response::new(200)
            .with_header("content-type", "application/octet-stream")
            .with_body(tarball(st, v)),
    )
}
