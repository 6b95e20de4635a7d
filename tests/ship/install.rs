//! `runner install` against the simulated GitHub: the unpacked layout runs, checksums
//! are enforced, and unsafe archives are refused leaving nothing behind.

use crate::support::{Dir, is_executable, sim_and_target};
use runner_manager::install::{self, InstallError, UnpackError};
use runner_manager::sim::control::RUNNER_VERSION;
use std::path::Path;
use std::process::Command;

fn leftovers(dir: &Path) -> Vec<String> {
    let parent = dir.parent().unwrap();
    let stem = dir.file_name().unwrap().to_string_lossy().to_string();
    std::fs::read_dir(parent)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with(&format!("{stem}.")))
        .collect()
}

#[test]
fn installs_a_runnable_release_and_replaces_it_with_another_version() {
    let d = Dir::new("install");
    let _sim = sim_and_target(&d);
    let dir = d.path("runner");
    let dir_s = dir.to_str().unwrap();
    let r = d.ok(&["runner", "install", "--dir", dir_s]);
    assert!(
        r.stdout.contains(&format!("runner {RUNNER_VERSION}")),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("installed in"), "{}", r.stdout);
    for f in [
        "bin/Runner.Listener",
        "bin/Runner.Worker",
        "run.sh",
        "config.sh",
        "env.sh",
    ] {
        assert!(is_executable(&dir.join(f)), "{f} executable");
    }
    assert!(dir.join("externals").is_dir());
    assert_eq!(
        install::installed_version(&dir).as_deref(),
        Some(RUNNER_VERSION)
    );
    assert!(leftovers(&dir).is_empty(), "{:?}", leftovers(&dir));
    // The unpacked Runner.Listener is runnable: it execs our binary as the simulated runner.
    let out = Command::new(dir.join("bin/Runner.Listener"))
        .arg("--version")
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), RUNNER_VERSION);

    let again = d.ok(&["--json", "runner", "install", "--dir", dir_s]);
    let v: serde_json::Value = serde_json::from_str(&again.stdout).unwrap();
    assert_eq!(v["runner"]["result"], "already installed");

    let old = d.ok(&["runner", "install", "--dir", dir_s, "--version", "2.330.0"]);
    assert!(
        old.stderr.contains("no SHA-256 is published"),
        "{}",
        old.stderr
    );
    assert_eq!(install::installed_version(&dir).as_deref(), Some("2.330.0"));
    assert!(leftovers(&dir).is_empty(), "{:?}", leftovers(&dir));
}

#[test]
fn the_default_directory_is_state_dir_runner_and_errors_name_the_fix() {
    let d = Dir::new("install-default");
    // No store yet: said so (exit 12, no-store), naming the command that makes one.
    let none = d.run(&["runner", "install"]);
    assert_eq!(none.code, 12, "{}", none.stderr);
    assert!(none.stderr.contains("target add"), "{}", none.stderr);
    // A store with no target: exit 2, naming the fix.
    d.ok(&["host", "set", "capacity=2"]);
    let none = d.run(&["runner", "install"]);
    assert_eq!(none.code, 2, "{}", none.stderr);
    assert!(none.stderr.contains("target add"), "{}", none.stderr);
    let _sim = sim_and_target(&d);
    d.ok(&["runner", "install"]);
    assert!(is_executable(&d.state().join("runner/bin/Runner.Listener")));
    let missing = d.run(&[
        "runner",
        "install",
        "--dir",
        d.path("x").to_str().unwrap(),
        "--version",
        "9.9.9-rc",
    ]);
    assert_eq!(missing.code, 1);
    assert!(
        missing.stderr.contains("not a runner version"),
        "{}",
        missing.stderr
    );
}

#[test]
fn a_wrong_checksum_refuses_and_leaves_nothing() {
    let d = Dir::new("install-sum");
    let sim = sim_and_target(&d);
    let url = format!(
        "{}/_sim/downloads/v{RUNNER_VERSION}/actions-runner-linux-x64-{RUNNER_VERSION}.tar.gz",
        sim.url()
    );
    let dest = d.path("runner.download");
    let e = install::download(&url, &dest, Some(&"0".repeat(64)), &mut ()).unwrap_err();
    assert!(matches!(e, InstallError::Checksum { .. }), "{e}");
    assert!(e.to_string().contains("refused"), "{e}");
    assert!(!dest.exists(), "the refused download is removed");
    // The right one passes, and the file is what was hashed.
    let sum = install::download(&url, &dest, None, &mut ()).unwrap();
    let again = install::download(&url, &dest, Some(&sum.to_uppercase()), &mut ()).unwrap();
    assert_eq!(sum, again);
    // A 404 is a download error, not an empty install.
    let e = install::download(
        &url.replace("linux-x64", "linux-sparc"),
        &d.path("x"),
        None,
        &mut (),
    )
    .unwrap_err();
    assert!(matches!(e, InstallError::Download(_)), "{e}");
    // Plain http to anywhere but loopback is refused before connecting.
    let e = install::download(
        "http://example.invalid/x.tar.gz",
        &d.path("y"),
        None,
        &mut (),
    )
    .unwrap_err();
    assert!(e.to_string().contains("only https://"), "{e}");
}

/// One entry built from raw header bytes: (name, kind, link target).
type Raw<'a> = (&'a [u8], tar::EntryType, Option<&'a [u8]>);

/// Writes a .tar.gz of a `bin/Runner.Listener` and then `evil`, entries built from raw
/// header bytes (the tar crate's own setters refuse such paths, which is the point).
fn hostile_tarball(path: &Path, evil: &[Raw]) {
    let f = std::fs::File::create(path).unwrap();
    let gz = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
    let mut b = tar::Builder::new(gz);
    let mut ok = tar::Header::new_gnu();
    ok.set_path("bin/Runner.Listener").unwrap();
    ok.set_size(3);
    ok.set_mode(0o755);
    ok.set_cksum();
    b.append(&ok, &b"#!\n"[..]).unwrap();
    for (name, kind, link) in evil {
        let kind = *kind;
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(kind);
        h.set_mode(0o644);
        h.set_size(if kind == tar::EntryType::Regular {
            4
        } else {
            0
        });
        {
            let g = h.as_gnu_mut().unwrap();
            g.name[..name.len()].copy_from_slice(name);
            if let Some(l) = link {
                g.linkname[..l.len()].copy_from_slice(l);
            }
        }
        h.set_cksum();
        let data: &[u8] = if kind == tar::EntryType::Regular {
            b"evil"
        } else {
            b""
        };
        b.append(&h, data).unwrap();
    }
    b.into_inner().unwrap().finish().unwrap();
}

fn evil_tarball(path: &Path, name: &[u8], kind: tar::EntryType, link: Option<&[u8]>) {
    hostile_tarball(path, &[(name, kind, link)]);
}

#[test]
fn unsafe_archives_are_refused_and_nothing_is_written() {
    use tar::EntryType::*;
    let d = Dir::new("install-unsafe");
    type Case<'a> = (&'a [u8], tar::EntryType, Option<&'a [u8]>, &'a str);
    let cases: &[Case] = &[
        (b"../evil", Regular, None, "'..'"),
        (b"bin/../../evil", Regular, None, "'..'"),
        (b"/tmp/evil-abs", Regular, None, "absolute"),
        (b"dev/null2", Char, None, "device"),
        (b"dev/sda9", Block, None, "device"),
        (b"fifo", Fifo, None, "FIFO"),
        (
            b"escape",
            Symlink,
            Some(b"/etc"),
            "symlink pointing outside",
        ),
        (
            b"bin/up",
            Symlink,
            Some(b"../.."),
            "symlink pointing outside",
        ),
        (b"hard", Link, Some(b"../outside"), "hard link"),
    ];
    for (i, (name, kind, link, why)) in cases.iter().enumerate() {
        let tgz = d.path(&format!("evil{i}.tar.gz"));
        evil_tarball(&tgz, name, *kind, *link);
        let dir = d.path(&format!("runner{i}"));
        let e = install::install_tarball(&tgz, &dir).unwrap_err();
        match &e {
            InstallError::Unpack(UnpackError::Unsafe { why: w, .. }) => {
                assert!(w.contains(why), "{}: {w}", String::from_utf8_lossy(name))
            }
            other => panic!("{}: {other}", String::from_utf8_lossy(name)),
        }
        assert!(
            !dir.exists() && leftovers(&dir).is_empty(),
            "nothing left for {i}"
        );
    }
    assert!(!d.root.join("evil").exists() && !Path::new("/tmp/evil-abs").exists());
}

#[test]
fn a_failed_install_keeps_the_previous_one() {
    let d = Dir::new("install-keep");
    let dir = d.path("runner");
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    std::fs::write(dir.join("bin/runnerversion"), "2.300.0").unwrap();
    std::fs::write(dir.join(install::MARKER), "").unwrap();
    // An archive without bin/Runner.Listener is not a runner.
    let tgz = d.path("empty.tar.gz");
    let gz = flate2::write::GzEncoder::new(
        std::fs::File::create(&tgz).unwrap(),
        flate2::Compression::fast(),
    );
    let mut b = tar::Builder::new(gz);
    let mut h = tar::Header::new_gnu();
    h.set_path("README").unwrap();
    h.set_size(2);
    h.set_cksum();
    b.append(&h, &b"hi"[..]).unwrap();
    b.into_inner().unwrap().finish().unwrap();
    let e = install::install_tarball(&tgz, &dir).unwrap_err();
    assert!(
        matches!(e, InstallError::Unpack(UnpackError::NotARunner(_))),
        "{e}"
    );
    assert_eq!(install::installed_version(&dir).as_deref(), Some("2.300.0"));
    assert!(leftovers(&dir).is_empty());
    // Not gzip at all.
    std::fs::write(&tgz, b"not a tarball").unwrap();
    let e = install::install_tarball(&tgz, &dir).unwrap_err();
    assert!(
        matches!(e, InstallError::Unpack(UnpackError::Damaged(_))),
        "{e}"
    );
    assert_eq!(install::installed_version(&dir).as_deref(), Some("2.300.0"));
}

#[test]
fn links_through_the_archives_own_links_are_refused() {
    use tar::EntryType::*;
    let d = Dir::new("install-linkchain");
    type Case<'a> = (&'a [Raw<'a>], &'a str);
    let cases: &[Case] = &[
        // `a -> .` then `a/b -> ..`: b would sit at the top and lead to the parent.
        (
            &[(b"a", Symlink, Some(b".")), (b"a/b", Symlink, Some(b".."))],
            "through a symlink",
        ),
        // The same, the other way round in the archive.
        (
            &[(b"a/b", Symlink, Some(b"..")), (b"a", Symlink, Some(b"."))],
            "through a symlink",
        ),
        // `x -> .` then `c -> x/..`: lexically the top, really the parent.
        (
            &[(b"x", Symlink, Some(b".")), (b"c", Symlink, Some(b"x/.."))],
            "symlink pointing outside",
        ),
        // A file written through the archive's link.
        (
            &[(b"up", Symlink, Some(b"bin")), (b"up/evil", Regular, None)],
            "through a symlink",
        ),
        // A hard link through it.
        (
            &[
                (b"l", Symlink, Some(b".")),
                (b"h", Link, Some(b"l/bin/Runner.Listener")),
            ],
            "hard link through a symlink",
        ),
    ];
    for (i, (entries, why)) in cases.iter().enumerate() {
        let tgz = d.path(&format!("chain{i}.tar.gz"));
        hostile_tarball(&tgz, entries);
        let dir = d.path(&format!("sub{i}/runner"));
        let e = install::install_tarball(&tgz, &dir).unwrap_err();
        match &e {
            InstallError::Unpack(UnpackError::Unsafe { why: w, .. }) => {
                assert!(w.contains(why), "case {i}: {w}")
            }
            other => panic!("case {i}: {other}"),
        }
        assert!(!dir.exists() && leftovers(&dir).is_empty(), "case {i}");
    }
    // A link to a link inside is still fine.
    let tgz = d.path("fine.tar.gz");
    hostile_tarball(
        &tgz,
        &[(b"x", Symlink, Some(b"bin")), (b"c", Symlink, Some(b"x"))],
    );
    install::install_tarball(&tgz, &d.path("fine")).unwrap();
    assert!(d.path("fine/c/Runner.Listener").is_file());
}

#[test]
fn only_an_install_of_ours_is_replaced_and_nothing_else_is_deleted() {
    let d = Dir::new("install-ours");
    let tgz = d.path("ok.tar.gz");
    hostile_tarball(&tgz, &[]);
    // Somebody's directory.
    let dir = d.path("data");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("precious"), "keep me").unwrap();
    let e = install::install_tarball(&tgz, &dir).unwrap_err();
    assert!(matches!(&e, InstallError::NotOurs(p) if *p == dir), "{e}");
    assert!(
        e.to_string().contains("not installed by 'runner install'"),
        "{e}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("precious")).unwrap(),
        "keep me"
    );
    assert!(leftovers(&dir).is_empty(), "{:?}", leftovers(&dir));
    // A link is never ours either.
    let link = d.path("link");
    std::os::unix::fs::symlink(&dir, &link).unwrap();
    assert!(matches!(
        install::install_tarball(&tgz, &link).unwrap_err(),
        InstallError::NotOurs(_)
    ));
    // An empty directory, and then our own install, are replaced.
    let ours = d.path("runner");
    std::fs::create_dir_all(&ours).unwrap();
    install::install_tarball(&tgz, &ours).unwrap();
    assert!(ours.join(install::MARKER).is_file());
    install::install_tarball(&tgz, &ours).unwrap();
    // But not over somebody's DIR.previous, which stays as it was.
    let prev = d.path("runner.previous");
    std::fs::create_dir_all(&prev).unwrap();
    std::fs::write(prev.join("notes"), "mine").unwrap();
    let e = install::install_tarball(&tgz, &ours).unwrap_err();
    assert!(matches!(&e, InstallError::NotOurs(p) if *p == prev), "{e}");
    assert_eq!(std::fs::read_to_string(prev.join("notes")).unwrap(), "mine");
    assert!(
        ours.join("bin/Runner.Listener").is_file(),
        "the install is kept"
    );
}

#[test]
fn runner_install_into_a_foreign_or_relative_dir_exits_2_and_keeps_it() {
    let d = Dir::new("install-foreign");
    let _sim = sim_and_target(&d);
    let dir = d.path("mine");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("precious"), "keep me").unwrap();
    let r = d.run(&["runner", "install", "--dir", dir.to_str().unwrap()]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("--dir"), "{}", r.stderr);
    assert!(
        r.stderr.contains("not installed by 'runner install'"),
        "{}",
        r.stderr
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("precious")).unwrap(),
        "keep me"
    );
    assert!(leftovers(&dir).is_empty(), "{:?}", leftovers(&dir));
    let r = d.run(&["runner", "install", "--dir", "relative/runner"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("--dir") && r.stderr.contains("absolute"),
        "{}",
        r.stderr
    );
}
