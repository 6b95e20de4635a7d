//! The simulated install's two shapes: the small default and the realistic one with a
//! real release's file count, which is still an install the daemon accepts and whose
//! root still runs as a runner.

use std::path::{Path, PathBuf};
use std::process::Command;

use runner_manager::runner::{RootOptions, check_install, prepare_root};
use runner_manager::sim::control::RUNNER_VERSION;
use runner_manager::sim::install::{self, Counts, InstallShape};

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn temp_dir(tag: &str) -> TempDir {
    let d = std::env::temp_dir().join(format!("rm-sim-install-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    TempDir(d)
}

fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_runner-manager"))
}

/// Files, links and directories under `dir` (not itself), and how deep its deepest
/// file lies (a file directly in `dir` is at depth 1).
fn walk(dir: &Path) -> (Counts, usize, usize) {
    let mut c = Counts {
        files: 0,
        links: 0,
        dirs: 0,
    };
    let mut externals = 0;
    let mut deepest = 0;
    let mut stack = vec![(dir.to_path_buf(), 0usize)];
    while let Some((d, depth)) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let ft = e.file_type().unwrap();
            if ft.is_symlink() {
                c.links += 1;
            } else if ft.is_dir() {
                c.dirs += 1;
                stack.push((e.path(), depth + 1));
            } else {
                c.files += 1;
                deepest = deepest.max(depth + 1);
                if e.path().starts_with(dir.join("externals")) {
                    externals += 1;
                }
            }
        }
    }
    (c, externals, deepest)
}

#[test]
fn the_small_shape_stays_small() {
    let d = temp_dir("small");
    install::lay_out(&d.0, &binary()).unwrap();
    let (c, _, _) = walk(&d.0);
    assert_eq!(c, InstallShape::Small.counts());
    assert_eq!(c.files, 6);
}

#[test]
fn the_realistic_shape_has_a_releases_file_count_and_still_runs_as_a_runner() {
    let d = temp_dir("realistic");
    let install_dir = d.0.join("runner");
    install::lay_out_shaped(&install_dir, &binary(), InstallShape::Realistic).unwrap();
    let (c, externals, deepest) = walk(&install_dir);
    let want = InstallShape::Realistic.counts();
    assert_eq!(c, want);
    // A few thousand files, most of them the node runtimes under externals/; a few
    // hundred in bin/ (the .NET runtime); as deep as npm's node_modules.
    assert!((8_000..9_000).contains(&c.files), "{c:?}");
    assert!(externals * 10 > c.files * 9, "{externals} of {}", c.files);
    let bin = std::fs::read_dir(install_dir.join("bin")).unwrap().count();
    assert!((250..300).contains(&bin), "{bin} entries in bin/");
    assert!(deepest >= 12, "the deepest file is {deepest} levels down");
    check_install(&install_dir).unwrap();

    // Laying out again over it changes nothing (the demo and benches may).
    install::lay_out_shaped(&install_dir, &binary(), InstallShape::Realistic).unwrap();
    assert_eq!(walk(&install_dir).0, want);

    // The daemon's root of it reaches every file: bin/ and the top-level files each
    // linked, the rest (externals/, most of the count) shared whole by one link, so
    // its cost does not grow with the release; and its listener runs as the runner.
    let root = d.0.join("attempts").join("1");
    let prepared = prepare_root(&install_dir, &root, RootOptions::default()).unwrap();
    let top_files = std::fs::read_dir(&install_dir)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_type().unwrap().is_file())
        .count();
    let bin_files = walk(&install_dir.join("bin")).0.files;
    assert_eq!(
        (prepared.linked + prepared.copied) as usize,
        top_files + bin_files,
        "{prepared:?}"
    );
    assert!(prepared.shared >= 1, "{prepared:?}");
    assert_eq!(
        walk(&root.join("externals").join(".")).0.files,
        externals,
        "externals/ reached through the root"
    );
    let out = Command::new(root.join("bin/Runner.Listener"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), RUNNER_VERSION);
}
