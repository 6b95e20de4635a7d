//! Shared fixtures: a temporary directory, running the binary, a simulated GitHub with
//! a target added through the CLI.

#![allow(dead_code)]

use runner_manager::sim::{SimConfig, SimGitHub, SimHandle};
use std::path::{Path, PathBuf};
use std::process::Command;

pub const PAT: &str = "ghp_SHIPTESTtoken0123456789abcdef";

#[path = "../common/dir.rs"]
mod dir;
pub use dir::{BIN, Dir};

/// A sim with repository `octo/app`, the test PAT, and our binary as the runner its
/// tarballs exec; plus target `t` added to `dir`'s store through the CLI.
pub fn sim_and_target(dir: &Dir) -> SimHandle {
    let h = SimGitHub::start(SimConfig::default()).expect("sim starts");
    h.add_org("octo");
    h.add_repo("octo/app", true);
    h.add_pat(PAT);
    h.with_state(|st| st.runner_binary = Some(PathBuf::from(BIN)));
    let token = dir.path("token");
    std::fs::write(&token, PAT).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    dir.ok(&[
        "target",
        "add",
        "t",
        "--repo",
        "octo/app",
        "--api-url",
        h.url(),
        "--token-file",
        token.to_str().unwrap(),
    ]);
    h
}

pub fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

pub fn on_path(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}
