//! Who owns the binary `update` would replace: a package manager (then `update`
//! refuses: the next package upgrade would undo it, or the package's checksums would
//! no longer match) or the operator who dropped it there. `gather` asks dpkg and rpm
//! about the resolved path; `judge` is the pure decision over what they said.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// What one package manager said about a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Query {
    /// The tool is not installed.
    Absent,
    /// It owns the path: the package's name.
    Owned(String),
    NotOwned,
    /// It ran and failed for another reason (its database unreadable…).
    Failed(String),
}

/// The facts the decision is made on, gathered by `gather`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    /// The binary's path with every link resolved (what a rename replaces).
    pub path: PathBuf,
    /// `dpkg -S` on the path (and on its `/bin` alias under usrmerge).
    pub dpkg: Query,
    /// `rpm -qf` on the path.
    pub rpm: Query,
    /// dpkg's own list for a `runner-manager` package names the path (read directly,
    /// so a package is seen even where the dpkg tool is missing).
    pub dpkg_list: bool,
}

/// The decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Nobody but its owner manages it: `update` may replace it.
    Replaceable,
    /// Refused: the message names the manager and what to run instead.
    Managed(String),
}

/// Paths that belong to a package manager whatever the tools say: an immutable store
/// or a manager's own tree.
const MANAGED_TREES: &[(&str, &str)] = &[
    ("/nix/store/", "nix"),
    ("/gnu/store/", "guix"),
    ("/snap/", "snap"),
    ("/home/linuxbrew/.linuxbrew/", "Homebrew"),
    ("/opt/homebrew/", "Homebrew"),
];

/// The pure decision. A package that owns the path refuses; so does a system
/// directory (`/usr`, `/bin`, `/sbin`, not `/usr/local`) when no package manager
/// could answer, since nothing then shows the file is not a package's.
pub fn judge(f: &Facts) -> Verdict {
    let path = f.path.display();
    if let Some((_, by)) = MANAGED_TREES
        .iter()
        .find(|(tree, _)| f.path.starts_with(tree))
    {
        return Verdict::Managed(format!(
            "{path} is managed by {by}: update runner-manager through {by}"
        ));
    }
    // `cargo install` tracks its binaries (~/.cargo/bin), and a build in a checkout
    // (target/debug, target/release) is the next `cargo build`'s to replace.
    let parts: Vec<&str> = f.path.iter().filter_map(|p| p.to_str()).collect();
    if parts.windows(2).any(|w| w == [".cargo", "bin"]) {
        return Verdict::Managed(format!(
            "{path} was installed by cargo: update it with cargo install --force runner-manager"
        ));
    }
    if parts
        .windows(2)
        .any(|w| w[0] == "target" && (w[1] == "debug" || w[1] == "release"))
    {
        return Verdict::Managed(format!(
            "{path} is a cargo build in a checkout: rebuild it there (git pull, cargo build)"
        ));
    }
    if let Query::Owned(pkg) = &f.dpkg {
        return Verdict::Managed(format!(
            "{path} belongs to the dpkg package {pkg}: update it with apt (apt install --only-upgrade {pkg})"
        ));
    }
    if f.dpkg_list {
        return Verdict::Managed(format!(
            "{path} is listed by the dpkg package runner-manager: update it with apt"
        ));
    }
    if let Query::Owned(pkg) = &f.rpm {
        return Verdict::Managed(format!(
            "{path} belongs to the rpm package {pkg}: update it with dnf or yum (dnf upgrade runner-manager)"
        ));
    }
    let answered = |q: &Query| matches!(q, Query::NotOwned);
    let system = ["/usr/", "/bin/", "/sbin/"]
        .iter()
        .any(|d| f.path.starts_with(d))
        && !f.path.starts_with("/usr/local/");
    if system && !answered(&f.dpkg) && !answered(&f.rpm) {
        let why = [("dpkg", &f.dpkg), ("rpm", &f.rpm)]
            .iter()
            .map(|(tool, q)| match q {
                Query::Failed(e) => format!("{tool} failed: {e}"),
                _ => format!("{tool} is not installed"),
            })
            .collect::<Vec<_>>()
            .join("; ");
        return Verdict::Managed(format!(
            "{path} is in a system directory and no package manager could say it is not \
             a package's ({why}): install runner-manager under /usr/local/bin to update it here"
        ));
    }
    Verdict::Replaceable
}

/// Asks the package managers about `path` (already resolved).
pub fn gather(path: &Path) -> Facts {
    let mut dpkg = query("dpkg", &["-S"], path);
    // usrmerge: dpkg may know the file by its /bin or /sbin name.
    if dpkg == Query::NotOwned
        && let Ok(rest) = path.strip_prefix("/usr")
        && (rest.starts_with("bin") || rest.starts_with("sbin"))
        && let Query::Owned(p) = query("dpkg", &["-S"], &Path::new("/").join(rest))
    {
        dpkg = Query::Owned(p);
    }
    Facts {
        path: path.to_path_buf(),
        dpkg,
        rpm: query("rpm", &["-qf"], path),
        dpkg_list: dpkg_lists(path),
    }
}

/// Runs `tool ARGS PATH`: exit 0 owns (the package is what precedes `:` for dpkg,
/// the first line for rpm), exit 1 does not.
fn query(tool: &str, args: &[&str], path: &Path) -> Query {
    let out = Command::new(tool)
        .args(args)
        .arg(path)
        .stdin(Stdio::null())
        .env("LC_ALL", "C")
        .output();
    match out {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Query::Absent,
        Err(e) => Query::Failed(e.to_string()),
        Ok(o) if o.status.success() => {
            let text = String::from_utf8_lossy(&o.stdout);
            let line = text.lines().next().unwrap_or("").trim();
            let pkg = line.split(':').next().unwrap_or(line).trim();
            Query::Owned(if pkg.is_empty() { "?" } else { pkg }.to_string())
        }
        Ok(o) if o.status.code() == Some(1) => Query::NotOwned,
        Ok(o) => Query::Failed(format!(
            "exit {}: {}",
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        )),
    }
}

/// Whether `/var/lib/dpkg/info/runner-manager[:ARCH].list` names `path`.
fn dpkg_lists(path: &Path) -> bool {
    let Ok(dir) = std::fs::read_dir("/var/lib/dpkg/info") else {
        return false;
    };
    let want = path.to_string_lossy();
    dir.flatten().any(|e| {
        let name = e.file_name().to_string_lossy().into_owned();
        (name == "runner-manager.list" || name.starts_with("runner-manager:"))
            && name.ends_with(".list")
            && std::fs::read_to_string(e.path())
                .is_ok_and(|t| t.lines().any(|l| l == want || format!("/usr{l}") == want))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(path: &str, dpkg: Query, rpm: Query) -> Facts {
        Facts {
            path: path.into(),
            dpkg,
            rpm,
            dpkg_list: false,
        }
    }

    fn managed(v: &Verdict) -> &str {
        match v {
            Verdict::Managed(m) => m,
            Verdict::Replaceable => panic!("expected a refusal"),
        }
    }

    #[test]
    fn a_package_that_owns_the_binary_refuses_naming_it() {
        let v = judge(&facts(
            "/usr/bin/runner-manager",
            Query::Owned("runner-manager".into()),
            Query::Absent,
        ));
        assert!(managed(&v).contains("dpkg package runner-manager"), "{v:?}");
        let v = judge(&facts(
            "/opt/rm/runner-manager",
            Query::Absent,
            Query::Owned("runner-manager-0.1.0-1.x86_64".into()),
        ));
        assert!(managed(&v).contains("rpm package"), "{v:?}");
        let mut f = facts("/usr/bin/runner-manager", Query::NotOwned, Query::Absent);
        f.dpkg_list = true;
        assert!(managed(&judge(&f)).contains("listed by the dpkg package"));
        let v = judge(&facts(
            "/nix/store/abc-runner-manager/bin/runner-manager",
            Query::Absent,
            Query::Absent,
        ));
        assert!(managed(&v).contains("nix"), "{v:?}");
        let v = judge(&facts(
            "/home/ci/.cargo/bin/runner-manager",
            Query::NotOwned,
            Query::Absent,
        ));
        assert!(managed(&v).contains("cargo install"), "{v:?}");
        let v = judge(&facts(
            "/home/ci/src/runner-manager/target/release/runner-manager",
            Query::NotOwned,
            Query::Absent,
        ));
        assert!(managed(&v).contains("cargo build in a checkout"), "{v:?}");
    }

    #[test]
    fn a_system_directory_no_manager_could_answer_for_is_refused() {
        let v = judge(&facts(
            "/usr/bin/runner-manager",
            Query::Absent,
            Query::Absent,
        ));
        assert!(managed(&v).contains("dpkg is not installed"), "{v:?}");
        let v = judge(&facts(
            "/usr/bin/runner-manager",
            Query::Failed("database locked".into()),
            Query::Absent,
        ));
        assert!(managed(&v).contains("database locked"), "{v:?}");
    }

    #[test]
    fn a_binary_no_package_owns_is_replaceable() {
        for (path, dpkg, rpm) in [
            ("/usr/bin/runner-manager", Query::NotOwned, Query::Absent),
            ("/usr/bin/runner-manager", Query::Absent, Query::NotOwned),
            (
                "/usr/local/bin/runner-manager",
                Query::Absent,
                Query::Absent,
            ),
            (
                "/opt/rm/runner-manager",
                Query::Failed("x".into()),
                Query::Absent,
            ),
            (
                "/home/ci/bin/runner-manager",
                Query::NotOwned,
                Query::NotOwned,
            ),
        ] {
            assert_eq!(
                judge(&facts(path, dpkg, rpm)),
                Verdict::Replaceable,
                "{path}"
            );
        }
    }
}
