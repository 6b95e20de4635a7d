//! The tools a profile's jobs need, looked up the way the runner's shell will find
//! them: on the `PATH` the runner gets (its profile's or host's `env.PATH`, else
//! `spawn::DEFAULT_PATH`), never the daemon's own. Read by `doctor` and the daemon's
//! fitness watch; what a missing tool means is `reconcile::fitness`'s to decide.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The `PATH` a runner with these extra variables starts with.
pub fn runner_path(extra_env: &[(String, String)]) -> String {
    extra_env
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map_or_else(
            || super::spawn::DEFAULT_PATH.to_string(),
            |(_, v)| v.clone(),
        )
}

/// Where `tool` is on `path`: the first directory holding a regular file of that name
/// with an execute bit. Empty and relative entries are skipped (the runner's working
/// directory is a job's checkout), and so is any name with a `/`.
pub fn find(tool: &str, path: &str) -> Option<PathBuf> {
    if tool.is_empty() || tool.contains('/') {
        return None;
    }
    path.split(':')
        .filter(|d| d.starts_with('/'))
        .map(|d| Path::new(d).join(tool))
        .find(|c| {
            std::fs::metadata(c).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// The tools of `tools` not found on `path`, in their order.
pub fn missing(tools: &[String], path: &str) -> Vec<String> {
    tools
        .iter()
        .filter(|t| find(t, path).is_none())
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runner_path_is_its_own_and_tools_are_found_there_only() {
        assert_eq!(runner_path(&[]), super::super::spawn::DEFAULT_PATH);
        let dir = std::env::temp_dir().join(format!("rm-tools-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let exe = dir.join("mytool");
        std::fs::write(&exe, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(dir.join("plain"), "").unwrap();
        let path = runner_path(&[("PATH".into(), format!("/nonexistent:{}", dir.display()))]);
        assert_eq!(find("mytool", &path), Some(exe.clone()));
        assert_eq!(find("plain", &path), None, "not executable");
        assert_eq!(find("mytool", super::super::spawn::DEFAULT_PATH), None);
        assert_eq!(find("../mytool", &path), None);
        let tools = ["mytool", "plain", "absent"].map(String::from);
        assert_eq!(missing(&tools, &path), ["plain", "absent"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
