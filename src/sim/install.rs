//! An install directory laid out like an unpacked actions-runner release whose
//! `bin/Runner.Listener` and `bin/Runner.Worker` are our own binary (dispatched on
//! argv[0]), so the daemon cannot tell it from the real thing.
//!
//! Two shapes: `Small` (the default: the scripts and the two binaries, fast for tests)
//! and `Realistic`, with as many files and directories, as deep, as a real linux-x64
//! release, because the daemon builds each attempt's root file by file and what that
//! costs grows with the count. The filler files are a few bytes each: content does
//! not matter to that cost, count and depth do.

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::control::RUNNER_VERSION;

/// How much of a real release the install imitates.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum InstallShape {
    /// The scripts, `bin/Runner.Listener`, `bin/Runner.Worker` and `bin/runnerversion`.
    #[default]
    Small,
    /// The file count and depth of an actions-runner linux-x64 release (see [`REALISTIC`]).
    Realistic,
}

/// A generated subtree: `files` regular files spread over `dirs` directories (the
/// subtree's root included) nested at most `depth` levels below its root.
#[derive(Debug, Clone, Copy)]
pub struct Tree {
    pub at: &'static str,
    pub files: usize,
    pub dirs: usize,
    pub depth: usize,
}

/// The realistic shape, per part of a release. The numbers (checked in August 2026):
///
/// - `externals/`: `src/Misc/externals.sh` of actions/runner unpacks, for linux-x64,
///   the official Node.js tarballs of node 20 (20.20.2) and node 24 (24.19.0), each
///   whole (`fix_nested_dir` moves `node-vX-linux-x64/*` up), plus `node20_alpine` and
///   `node24_alpine` (actions/alpine_nodejs's Dockerfile packs only `bin/node` and
///   `LICENSE`). The node 20.20.2 tarball, counted on this machine from NodeSource's
///   repack of it (`dpkg -L nodejs`): `include/node` 2,365 files in 540 directories,
///   9 deep (OpenSSL's per-architecture headers are most of it); `lib/node_modules/npm`
///   1,600 files in 480 directories, 8 deep; `lib/node_modules/corepack` 51 files in
///   4 directories; `bin/node` and three links (`npm`, `npx`, `corepack`); `share/`
///   (`doc/node/gdbinit`, `lldb_commands.py`, `man/man1/node.1`,
///   `systemtap/tapset/node.stp`); `CHANGELOG.md`, `LICENSE`, `README.md`: about
///   4,030 files. Node 24 was not at hand; it is taken to have node 20's shape (npm
///   11, installed here, has 1,943 files in 461 directories: the same order).
/// - `bin/`: the runner's .NET 8 build, published self-contained for linux-x64
///   (`Runner.Listener.csproj`: `SelfContained`, net8.0): the .NET runtime (about
///   220 files: the managed `System.*`/`Microsoft.*` assemblies, the native `lib*.so`,
///   `createdump`), the runner's own assemblies and their NuGet dependencies with
///   their `.deps.json`/`.runtimeconfig.json` (about 40), and `src/Misc/layoutbin`
///   (13 files, two of them in `hashFiles/` and `checkScripts/`). No .NET runtime is
///   on this machine to count; 260 in all is the estimate used.
/// - the top level: `src/Misc/layoutroot` (8 scripts).
///
/// About 8,400 files and 2,050 directories in all, most of them under `externals/`.
pub const REALISTIC: &[Tree] = &[
    Tree {
        at: "bin",
        files: 244,
        dirs: 1,
        depth: 0,
    },
    Tree {
        at: "externals/node20/include/node",
        files: 2365,
        dirs: 540,
        depth: 9,
    },
    Tree {
        at: "externals/node20/lib/node_modules/npm",
        files: 1600,
        dirs: 480,
        depth: 8,
    },
    Tree {
        at: "externals/node20/lib/node_modules/corepack",
        files: 51,
        dirs: 4,
        depth: 3,
    },
    Tree {
        at: "externals/node24/include/node",
        files: 2365,
        dirs: 540,
        depth: 9,
    },
    Tree {
        at: "externals/node24/lib/node_modules/npm",
        files: 1600,
        dirs: 480,
        depth: 8,
    },
    Tree {
        at: "externals/node24/lib/node_modules/corepack",
        files: 51,
        dirs: 4,
        depth: 3,
    },
];

/// Single files of the realistic shape (beside the trees and the small shape's own).
const REALISTIC_FILES: &[&str] = &[
    // src/Misc/layoutbin.
    "bin/RunnerService.js",
    "bin/actions.runner.plist.template",
    "bin/actions.runner.service.template",
    "bin/checkScripts/downloadCert.js",
    "bin/checkScripts/makeWebRequest.js",
    "bin/darwin.svc.sh.template",
    "bin/hashFiles/index.js",
    "bin/installdependencies.sh",
    "bin/macos-run-invoker.js",
    "bin/runsvc.sh",
    "bin/systemd.svc.sh.template",
    "bin/update.cmd.template",
    "bin/update.sh.template",
    // src/Misc/layoutroot, beyond the small shape's run.sh, config.sh and env.sh.
    "config.cmd",
    "run-helper.cmd.template",
    "run-helper.sh.template",
    "run.cmd",
    "safe_sleep.sh",
    // The rest of each node tarball, and the alpine builds.
    "externals/node20/bin/node",
    "externals/node20/share/doc/node/gdbinit",
    "externals/node20/share/doc/node/lldb_commands.py",
    "externals/node20/share/man/man1/node.1",
    "externals/node20/share/systemtap/tapset/node.stp",
    "externals/node20/CHANGELOG.md",
    "externals/node20/LICENSE",
    "externals/node20/README.md",
    "externals/node24/bin/node",
    "externals/node24/share/doc/node/gdbinit",
    "externals/node24/share/doc/node/lldb_commands.py",
    "externals/node24/share/man/man1/node.1",
    "externals/node24/share/systemtap/tapset/node.stp",
    "externals/node24/CHANGELOG.md",
    "externals/node24/LICENSE",
    "externals/node24/README.md",
    "externals/node20_alpine/bin/node",
    "externals/node20_alpine/LICENSE",
    "externals/node24_alpine/bin/node",
    "externals/node24_alpine/LICENSE",
];

/// The links in each node tarball's `bin/`, as (link, target).
const NODE_LINKS: &[(&str, &str)] = &[
    ("npm", "../lib/node_modules/npm/bin/npm-cli.js"),
    ("npx", "../lib/node_modules/npm/bin/npx-cli.js"),
    ("corepack", "../lib/node_modules/corepack/dist/corepack.js"),
];

/// What one shape holds: regular files and symbolic links (the root directory itself
/// is not counted among the directories).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub files: usize,
    pub links: usize,
    pub dirs: usize,
}

/// Files of the small shape: the three scripts and `bin/`'s three.
const SMALL_FILES: usize = SCRIPTS.len() + 3;

impl InstallShape {
    /// How many files, links and directories `lay_out_shaped` makes for this shape.
    pub fn counts(self) -> Counts {
        // bin/ and externals/.
        let small = Counts {
            files: SMALL_FILES,
            links: 0,
            dirs: 2,
        };
        if self == InstallShape::Small {
            return small;
        }
        let mut dirs = std::collections::BTreeSet::new();
        let mut add_parents = |path: &str| {
            let mut p = Path::new(path).parent();
            while let Some(d) = p.filter(|d| !d.as_os_str().is_empty()) {
                dirs.insert(d.to_path_buf());
                p = d.parent();
            }
        };
        for f in REALISTIC_FILES {
            add_parents(f);
        }
        let mut files = small.files + REALISTIC_FILES.len();
        let mut tree_dirs = 0;
        for t in REALISTIC {
            add_parents(&format!("{}/x", t.at));
            files += t.files;
            // The tree's root is among the parents above.
            tree_dirs += t.dirs - 1;
        }
        for n in ["node20", "node24"] {
            add_parents(&format!("externals/{n}/bin/x"));
        }
        dirs.insert("bin".into());
        dirs.insert("externals".into());
        Counts {
            files,
            links: 2 * NODE_LINKS.len(),
            dirs: dirs.len() + tree_dirs,
        }
    }
}

/// Lays out `dir` (created if missing) with links to `binary`, in the small shape.
pub fn lay_out(dir: &Path, binary: &Path) -> io::Result<()> {
    lay_out_shaped(dir, binary, InstallShape::Small)
}

/// Lays out `dir` in `shape`. The binaries are hard links to `binary` first (cheap,
/// and argv[0] keeps the link's name), then a copy, then a symlink.
pub fn lay_out_shaped(dir: &Path, binary: &Path, shape: InstallShape) -> io::Result<()> {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin)?;
    for name in ["Runner.Listener", "Runner.Worker"] {
        let target = bin.join(name);
        if target.exists() {
            std::fs::remove_file(&target)?;
        }
        if std::fs::hard_link(binary, &target).is_err() && std::fs::copy(binary, &target).is_err() {
            std::os::unix::fs::symlink(binary, &target)?;
        }
    }
    for (name, text) in SCRIPTS {
        let path = dir.join(name);
        std::fs::write(&path, text)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    }
    std::fs::write(bin.join("runnerversion"), RUNNER_VERSION)?;
    std::fs::create_dir_all(dir.join("externals"))?;
    for stale in [".runner", ".credentials", ".credentials_rsaparams"] {
        let _ = std::fs::remove_file(dir.join(stale));
    }
    if shape == InstallShape::Realistic {
        lay_out_realistic(dir)?;
    }
    Ok(())
}

fn lay_out_realistic(dir: &Path) -> io::Result<()> {
    for f in REALISTIC_FILES {
        let path = dir.join(f);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, f.as_bytes())?;
        if f.ends_with("bin/node") || f.ends_with(".sh") {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
        }
    }
    for t in REALISTIC {
        grow(&dir.join(t.at), t)?;
    }
    for n in ["node20", "node24"] {
        let nbin = dir.join("externals").join(n).join("bin");
        for (link, target) in NODE_LINKS {
            let path = nbin.join(link);
            if std::fs::symlink_metadata(&path).is_err() {
                std::os::unix::fs::symlink(target, &path)?;
            }
        }
    }
    Ok(())
}

/// Makes `t.dirs` directories under `root` (itself the first) and `t.files` files in
/// them, round robin. The first `t.depth` directories below the root form a chain, so
/// the deepest is `t.depth` levels down; the rest hang off that chain's upper levels,
/// never below it.
fn grow(root: &Path, t: &Tree) -> io::Result<()> {
    let mut dirs = vec![root.to_path_buf()];
    std::fs::create_dir_all(root)?;
    for i in 1..t.dirs {
        let parent = if i <= t.depth {
            dirs[i - 1].clone()
        } else {
            // Chain levels 0..depth-1, so no directory is deeper than the chain's end.
            dirs[i % t.depth.max(1)].clone()
        };
        let d = parent.join(format!("d{i}"));
        std::fs::create_dir_all(&d)?;
        dirs.push(d);
    }
    for i in 0..t.files {
        let path = dirs[i % dirs.len()].join(format!("f{i}"));
        std::fs::write(&path, format!("// {i}\n"))?;
    }
    Ok(())
}

/// The top-level scripts of a runner release, as the simulated install has them.
pub const SCRIPTS: [(&str, &str); 3] = [
    (
        "run.sh",
        "#!/bin/bash\n# Simulated actions-runner: run.sh restarts on exit code 2 like the real one.\nDIR=\"$(cd \"$(dirname \"$0\")\" && pwd)\"\nwhile true; do\n  \"$DIR/bin/Runner.Listener\" run \"$@\"\n  code=$?\n  if [ $code -ne 2 ]; then\n    if [ $code -eq 1 ]; then exit 1; fi\n    exit 0\n  fi\ndone\n",
    ),
    (
        "config.sh",
        "#!/bin/bash\necho \"The simulated runner is configured with a JIT config (ACTIONS_RUNNER_INPUT_JITCONFIG); config.sh does nothing\" >&2\nexit 1\n",
    ),
    (
        "env.sh",
        "#!/bin/bash\n# Writes .env and .path like the real env.sh.\nDIR=\"$(cd \"$(dirname \"$0\")\" && pwd)\"\necho \"LANG=${LANG:-C.UTF-8}\" > \"$DIR/.env\"\necho \"$PATH\" > \"$DIR/.path\"\n",
    ),
];
