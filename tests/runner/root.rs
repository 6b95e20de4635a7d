//! Attempt roots: hard links, the copy fallback, idempotence, removal, listing.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use runner_manager::runner::{
    self, RootEntry, RootError, RootKind, RootOptions, check_install, list_attempt_roots,
    prepare_root, remove_root,
};

use super::util::{TempDir, fake_install};

const SCRIPT: &str = "#!/bin/sh\necho hi\n";

fn ino(p: &Path) -> u64 {
    fs::metadata(p).unwrap().ino()
}

#[test]
fn root_is_hard_linked_with_its_own_work_folder() {
    let dir = TempDir::new("link");
    let install = dir.path().join("install");
    fake_install(&install, SCRIPT);
    // Registration files of a configured install must never be shared.
    fs::write(install.join(".runner"), "{}").unwrap();
    fs::create_dir(install.join("_diag")).unwrap();
    let root = runner::attempt_root(dir.path(), 1);

    let got = prepare_root(&install, &root, RootOptions::default()).unwrap();
    assert!(!got.already_existed);
    assert_eq!(got.copied, 0);
    // bin/ file by file and config.sh; externals/ shared whole, by one link.
    assert_eq!((got.linked, got.shared), (3, 1));
    assert_eq!(
        fs::read_link(root.join("externals")).unwrap(),
        fs::canonicalize(install.join("externals")).unwrap()
    );
    assert!(fs::symlink_metadata(root.join("bin")).unwrap().is_dir());
    for f in [
        "bin/Runner.Listener",
        "bin/Runner.Worker.dll",
        "externals/node/bin/node",
    ] {
        assert_eq!(
            ino(&install.join(f)),
            ino(&root.join(f)),
            "{f} is not a hard link"
        );
    }
    assert_eq!(
        fs::read_link(root.join("bin/listener-link")).unwrap(),
        Path::new("Runner.Listener")
    );
    assert!(got.work_dir.is_dir() && got.work_dir == root.join("_work"));
    assert!(got.home_dir.is_dir() && got.tmp_dir.is_dir());
    assert!(!root.join(".runner").exists() && !root.join("_diag").exists());
    check_install(&root).unwrap();

    // A second try finds it complete and changes nothing.
    fs::write(root.join(".credentials"), "x").unwrap();
    let again = prepare_root(&install, &root, RootOptions::default()).unwrap();
    assert!(again.already_existed);
    assert!(root.join(".credentials").exists());
}

#[test]
fn an_interrupted_copy_is_started_over() {
    let dir = TempDir::new("partial");
    let install = dir.path().join("install");
    fake_install(&install, SCRIPT);
    let root = runner::attempt_root(dir.path(), 2);
    let partial = runner::root::partial_path(&root);
    fs::create_dir_all(partial.join("bin")).unwrap();
    fs::write(partial.join("bin/half-copied"), "x").unwrap();

    prepare_root(&install, &root, RootOptions::default()).unwrap();
    assert!(!partial.exists());
    assert!(!root.join("bin/half-copied").exists());
    assert!(root.join("bin/Runner.Listener").exists());
}

#[test]
fn falls_back_to_copying_across_filesystems() {
    let dir = TempDir::new("xdev");
    let install = dir.path().join("install");
    fake_install(&install, SCRIPT);
    let shm = Path::new("/dev/shm");
    let cross =
        shm.is_dir() && fs::metadata(shm).unwrap().dev() != fs::metadata(dir.path()).unwrap().dev();
    // Where /dev/shm is on the same filesystem, forcing the copy still checks the copy.
    let other = if cross {
        TempDir::under(shm, "xdev")
    } else {
        TempDir::new("xdev-same")
    };
    let root = runner::attempt_root(other.path(), 3);
    let opts = RootOptions {
        owner: None,
        always_copy: !cross,
    };

    let got = prepare_root(&install, &root, opts).unwrap();
    if cross {
        // Across filesystems bin/ and the top-level files are copied; externals/ is
        // still shared by one link.
        assert_eq!((got.linked, got.copied, got.shared), (0, 3, 1));
    } else {
        // Copying on purpose copies the shared directories too.
        assert_eq!((got.linked, got.copied, got.shared), (0, 4, 0));
    }
    let listener = root.join("bin/Runner.Listener");
    assert_ne!(ino(&install.join("bin/Runner.Listener")), ino(&listener));
    assert_eq!(fs::read_to_string(&listener).unwrap(), SCRIPT);
    assert_eq!(
        fs::metadata(&listener).unwrap().permissions().mode() & 0o777,
        0o755
    );
}

#[test]
fn refuses_what_is_not_an_install() {
    let dir = TempDir::new("notinstall");
    let install = dir.path().join("install");
    fake_install(&install, SCRIPT);
    let listener = install.join("bin/Runner.Listener");
    fs::set_permissions(&listener, fs::Permissions::from_mode(0o644)).unwrap();
    let root = runner::attempt_root(dir.path(), 4);
    let err = prepare_root(&install, &root, RootOptions::default()).unwrap_err();
    assert!(matches!(err, RootError::Install(_)));
    assert!(err.to_string().contains("not executable"), "{err}");
    assert!(!root.exists());
    fs::remove_file(&listener).unwrap();
    assert!(
        check_install(&install)
            .unwrap_err()
            .to_string()
            .contains("missing")
    );
}

#[test]
fn removes_a_root_with_read_only_dirs_and_foreign_files() {
    let dir = TempDir::new("remove");
    let install = dir.path().join("install");
    fake_install(&install, SCRIPT);
    let root = runner::attempt_root(dir.path(), 5);
    let nobody = runner::lookup_user("nobody").unwrap();
    prepare_root(
        &install,
        &root,
        RootOptions {
            owner: Some((nobody.uid, nobody.gid)),
            always_copy: false,
        },
    )
    .unwrap();
    let locked = root.join("_work/locked");
    fs::create_dir_all(locked.join("deep")).unwrap();
    fs::write(locked.join("deep/file"), "x").unwrap();
    std::os::unix::fs::lchown(locked.join("deep/file"), Some(nobody.uid), Some(nobody.gid))
        .unwrap();
    for d in [locked.join("deep"), locked.clone(), root.join("bin")] {
        fs::set_permissions(&d, fs::Permissions::from_mode(0o500)).unwrap();
    }
    // A symlink out of the root must not lead removal outside it.
    std::os::unix::fs::symlink(&install, root.join("_work/escape")).unwrap();

    remove_root(&root).unwrap();
    assert!(!root.exists());
    assert!(install.join("bin/Runner.Listener").exists());
    remove_root(&root).unwrap();
}

#[test]
fn lists_roots_on_disk() {
    let dir = TempDir::new("list");
    assert_eq!(list_attempt_roots(dir.path()).unwrap(), vec![]);
    let attempts = dir.path().join("attempts");
    for name in ["12", "3", "4.partial", "not-an-attempt"] {
        fs::create_dir_all(attempts.join(name)).unwrap();
    }
    // A link or a file under an attempt's name is listed as what it is, never followed.
    std::os::unix::fs::symlink("/", attempts.join("5")).unwrap();
    fs::write(attempts.join("6"), "x").unwrap();
    let got = list_attempt_roots(dir.path()).unwrap();
    let entry = |attempt, name: &str, partial, kind| RootEntry {
        attempt,
        path: attempts.join(name),
        partial,
        kind,
    };
    assert_eq!(
        got,
        vec![
            entry(3, "3", false, RootKind::Dir),
            entry(4, "4.partial", true, RootKind::Dir),
            entry(5, "5", false, RootKind::Other),
            entry(6, "6", false, RootKind::Other),
            entry(12, "12", false, RootKind::Dir)
        ]
    );
}

#[test]
fn a_root_for_another_uid_is_its_own_and_the_install_stays_the_managers() {
    if unsafe { libc::geteuid() } != 0 {
        // The real stderr: libtest would swallow eprintln! of a passing test.
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            b"SKIPPED a_root_for_another_uid_is_its_own: needs root to chown\n",
        );
        return;
    }
    let dir = TempDir::new("owned");
    let install = dir.path().join("install");
    fake_install(&install, SCRIPT);
    let root = runner::attempt_root(dir.path(), 8);
    let nobody = runner::lookup_user("nobody").unwrap();
    let opts = RootOptions {
        owner: Some((nobody.uid, nobody.gid)),
        always_copy: false,
    };
    prepare_root(&install, &root, opts).unwrap();
    for d in ["", "_work", "_home", "_tmp"] {
        let m = fs::metadata(root.join(d)).unwrap();
        assert_eq!((m.uid(), m.mode() & 0o777), (nobody.uid, 0o700), "{d:?}");
    }
    // The linked files and the bin/ directory stay the manager's.
    let me = unsafe { libc::geteuid() };
    assert_eq!(fs::metadata(root.join("bin")).unwrap().uid(), me);
    assert_eq!(
        fs::metadata(root.join("bin/Runner.Listener"))
            .unwrap()
            .uid(),
        me
    );

    // An install others could write is refused before anything is made.
    let open = dir.path().join("open-install");
    fake_install(&open, SCRIPT);
    fs::set_permissions(
        open.join("externals/node/bin/node"),
        fs::Permissions::from_mode(0o666),
    )
    .unwrap();
    let root9 = runner::attempt_root(dir.path(), 9);
    let err = prepare_root(&open, &root9, opts).unwrap_err();
    assert!(matches!(err, RootError::Unsafe { .. }), "{err}");
    assert!(err.to_string().contains("chmod -R go-w"), "{err}");
    assert!(!root9.exists());
}
