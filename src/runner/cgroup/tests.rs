//! Unit tests of cgroup detection: the pure parsers, the v2 layout, and whole detections
//! against fixture trees (a fake /proc/self and /sys/fs/cgroup in a temp directory).

use super::attempt::cpu_quota_us;
use super::detect::{Membership, parse_mountinfo, parse_proc_cgroup, relative_components};
use super::v2::{release_has_cgroup_kill, v2_layout};
use super::*;
use std::sync::atomic::{AtomicU32, Ordering};

/// A fixture tree: `proc/self/{mountinfo,cgroup}` and directories/files under `sys/`.
struct Fixture {
    root: PathBuf,
}

impl Fixture {
    fn new(mountinfo: &str, cgroup: &str) -> Fixture {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let root = std::env::temp_dir().join(format!("rm-cgfix-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(root.join("proc/self")).unwrap();
        fs::create_dir_all(root.join("sys")).unwrap();
        fs::write(root.join("proc/self/mountinfo"), mountinfo).unwrap();
        fs::write(root.join("proc/self/cgroup"), cgroup).unwrap();
        Fixture { root }
    }

    /// Where the fixture's `/sys/...` lives.
    fn sys(&self) -> PathBuf {
        self.root.join("sys")
    }

    /// Creates `sys/<rel>` as a directory.
    fn dir(&self, rel: &str) -> &Fixture {
        fs::create_dir_all(self.sys().join(rel)).unwrap();
        self
    }

    /// Writes `sys/<rel>`, creating its directory.
    fn file(&self, rel: &str, text: &str) -> &Fixture {
        let p = self.sys().join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
        self
    }

    fn osrelease(&self, release: &str) -> &Fixture {
        fs::create_dir_all(self.root.join("proc/sys/kernel")).unwrap();
        fs::write(self.root.join("proc/sys/kernel/osrelease"), release).unwrap();
        self
    }

    fn detect(&self, tag: &str) -> Cgroups {
        self.detect_delegated(tag, &|_| false)
    }

    fn detect_delegated(&self, tag: &str, delegated: &dyn Fn(&Path) -> bool) -> Cgroups {
        // Mount points are absolute (`/sys/fs/cgroup`): the fixture root stands for `/`.
        detect_with(&self.root.join("proc/self"), &self.root, tag, delegated)
    }

    fn p(&self, rel: &str) -> PathBuf {
        self.sys().join(rel)
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
    }
}

const PURE_V2_MOUNTS: &str = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
25 22 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:2 - sysfs sysfs rw
30 25 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
";

/// This machine's layout: v1 controllers, a controller-less v2 at `unified`.
const HYBRID_MOUNTS: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
36 31 0:33 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

const HYBRID_CGROUP: &str = "\
9:name=systemd:/
8:pids:/
7:blkio:/
6:freezer:/
5:devices:/
4:memory:/process_api/a745f88a
3:cpuset:/
2:cpuacct:/
1:cpu:/
0::/
";

/// An older distribution: v1 only, cpu and cpuacct co-mounted, under a systemd service.
const V1_MOUNTS: &str = "\
18 1 8:1 / / rw - xfs /dev/sda1 rw
24 18 0:20 / /sys/fs/cgroup ro,nosuid shared:3 - tmpfs tmpfs ro,mode=755
25 24 0:21 / /sys/fs/cgroup/systemd rw,nosuid shared:4 - cgroup cgroup rw,xattr,release_agent=/usr/lib/systemd/systemd-cgroups-agent,name=systemd
28 24 0:24 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:7 - cgroup cgroup rw,cpu,cpuacct
29 24 0:25 / /sys/fs/cgroup/memory rw,nosuid shared:8 - cgroup cgroup rw,memory
30 24 0:26 / /sys/fs/cgroup/pids rw,nosuid shared:9 - cgroup cgroup rw,pids
";

const V1_CGROUP: &str = "\
11:pids:/system.slice/runner-manager.service
5:memory:/system.slice/runner-manager.service
3:cpu,cpuacct:/system.slice/runner-manager.service
1:name=systemd:/system.slice/runner-manager.service
";

fn hybrid_fixture() -> Fixture {
    let f = Fixture::new(HYBRID_MOUNTS, HYBRID_CGROUP);
    f.file("fs/cgroup/unified/cgroup.controllers", "hugetlb\n")
        .file("fs/cgroup/unified/cpu.stat", "usage_usec 1\n")
        .dir("fs/cgroup/memory/process_api/a745f88a")
        .dir("fs/cgroup/pids")
        .dir("fs/cgroup/cpu")
        .dir("fs/cgroup/cpuacct")
        .osrelease("6.18.44-fc-v1045\n");
    f
}

fn pure_v2_fixture(own: &str) -> Fixture {
    let f = Fixture::new(PURE_V2_MOUNTS, &format!("0::{own}\n"));
    f.file(
        "fs/cgroup/cgroup.controllers",
        "cpuset cpu io memory hugetlb pids rdma misc\n",
    )
    .file("fs/cgroup/cpu.stat", "usage_usec 5\n");
    let own_dir = format!("fs/cgroup{own}");
    for name in ["cgroup.kill", "cgroup.type", "cpu.stat"] {
        f.file(&format!("{own_dir}/{name}"), "");
    }
    f
}

#[test]
fn parses_mountinfo_cgroup_lines_only_with_escapes() {
    let text = format!(
        "{PURE_V2_MOUNTS}99 30 0:40 /sub /mnt/with\\040space rw - cgroup cgroup rw,nosuid,cpu,cpuacct\n\
         100 22 0:41 / /opt shared:9 master:2 - nfs srv:/x rw\n\
         garbage line\n"
    );
    let m = parse_mountinfo(&text);
    assert_eq!(m.len(), 2);
    assert_eq!(m[0].fstype, "cgroup2");
    assert_eq!(m[0].mount_point, PathBuf::from("/sys/fs/cgroup"));
    assert!(m[0].controllers.is_empty());
    assert_eq!(m[1].root, "/sub");
    assert_eq!(m[1].mount_point, PathBuf::from("/mnt/with space"));
    assert_eq!(m[1].controllers, vec!["cpu", "cpuacct"]);
    // Optional fields (shared:, master:) before the separator are skipped.
    let hy = parse_mountinfo(HYBRID_MOUNTS);
    assert_eq!(hy.len(), 10, "tmpfs is not a cgroup mount");
    assert!(hy.iter().any(|e| e.controllers == ["memory"]));
    let named = hy
        .iter()
        .find(|e| e.mount_point.ends_with("systemd"))
        .unwrap();
    assert!(
        named.controllers.is_empty(),
        "name=systemd is no controller"
    );
    assert!(parse_mountinfo("").is_empty());
}

#[test]
fn parses_proc_self_cgroup() {
    let m = parse_proc_cgroup(HYBRID_CGROUP);
    assert_eq!(m.len(), 10);
    assert_eq!(
        m[5],
        Membership {
            id: 4,
            controllers: vec!["memory".into()],
            path: "/process_api/a745f88a".into()
        }
    );
    assert_eq!(
        m[9],
        Membership {
            id: 0,
            controllers: vec![],
            path: "/".into()
        }
    );
    let v1 = parse_proc_cgroup(V1_CGROUP);
    assert_eq!(v1[2].controllers, vec!["cpu", "cpuacct"]);
    // A path may hold a colon.
    let odd = parse_proc_cgroup("0::/a:b\nnot a line\n");
    assert_eq!(odd.len(), 1);
    assert_eq!(odd[0].path, "/a:b");
}

#[test]
fn relative_components_refuse_escapes() {
    assert_eq!(relative_components("/", "/").unwrap(), Vec::<String>::new());
    assert_eq!(relative_components("/", "/a/b").unwrap(), vec!["a", "b"]);
    assert_eq!(relative_components("/a", "/a/b/").unwrap(), vec!["b"]);
    assert!(relative_components("/a", "/ab/c").is_err());
    assert!(relative_components("/", "/../x").is_err());
    assert!(relative_components("/", "/a/./b").is_err());
    assert!(relative_components("/", "a").is_err());
}

/// A cgroup path's components (also `handover`'s tests').
pub(super) fn comps(p: &str) -> Vec<String> {
    p.split('/')
        .filter(|c| !c.is_empty())
        .map(String::from)
        .collect()
}

#[test]
fn v2_layout_under_systemd_delegation_uses_controllers_only_from_the_leaf() {
    let own = comps("/system.slice/runner-manager.service");
    // In the `daemon` leaf (moved there at start): the unit's cgroup is ours to hand
    // controllers to our children.
    let in_leaf = comps("/system.slice/runner-manager.service/daemon");
    let l = v2_layout(&in_leaf, false, true, true, "a1b2c3d4");
    assert!(l.delegated);
    assert_eq!(l.managed, own);
    assert_eq!(l.leaf, Some(in_leaf));
    assert_eq!(
        l.base,
        comps("/system.slice/runner-manager.service/runner-manager-a1b2c3d4")
    );

    // Started in the unit's cgroup itself (systemd before 254): the same layout, with
    // the move into the leaf still to make.
    let l = v2_layout(&own, true, false, true, "a1b2c3d4");
    assert!(l.delegated);
    assert_eq!(l.managed, own);
    assert_eq!(
        l.leaf,
        Some(comps("/system.slice/runner-manager.service/daemon"))
    );
    assert_eq!(
        l.base,
        comps("/system.slice/runner-manager.service/runner-manager-a1b2c3d4")
    );

    // Not delegated (a root daemon run by hand in a login session): the v2 root, where
    // no leaf is needed.
    let session = comps("/user.slice/user-0.slice/session-3.scope");
    let l = v2_layout(&session, false, false, true, "t");
    assert!(!l.delegated);
    assert_eq!(l.managed, Vec::<String>::new());
    assert_eq!(l.leaf, None);
    assert_eq!(l.base, comps("/runner-manager-t"));

    // A container's cgroup namespace root is ours but not exempt: leaf `daemon`.
    let l = v2_layout(&[], false, false, false, "t");
    assert!(l.delegated);
    assert_eq!(l.leaf, Some(comps("/daemon")));
    assert_eq!(v2_layout(&comps("/daemon"), false, false, false, "t"), l);
    // The real root is exempt: nothing to move.
    assert_eq!(v2_layout(&[], false, false, true, "t").leaf, None);
}

#[test]
fn detects_pure_v2_not_delegated() {
    let f = pure_v2_fixture("/user.slice/user-0.slice/session-3.scope");
    let cg = f.detect("t1");
    assert_eq!(cg.mode(), CgroupMode::V2);
    assert_eq!(cg.summary(), "cgroup v2 (memory, cpu, pids; kill)");
    assert_eq!(cg.base_dirs(), vec![f.p("fs/cgroup/runner-manager-t1")]);
    assert_eq!(cg.delegated(), None);
    let e = cg.enforced();
    assert!(e.kill && e.memory && e.cpu && e.pids && e.meters, "{e:?}");
    assert!(e.why.is_empty(), "{:?}", e.why);
    assert_eq!(cg.hiers[0].enable, vec!["memory", "pids", "cpu"]);
    assert_eq!(cg.hiers[0].leaf, None);
    assert_eq!(
        cg.attempt(42).paths(),
        vec![f.p("fs/cgroup/runner-manager-t1/att-42")]
    );
}

#[test]
fn detects_pure_v2_delegated_by_systemd() {
    let own = "/system.slice/runner-manager.service";
    // systemd before 254 starts the daemon in the unit's own cgroup: it moves into the
    // leaf `daemon` and enables the controllers there, as systemd's delegation
    // pattern has it (the unit's ExecStopPost turns them off between two daemons).
    let f = pure_v2_fixture(own);
    f.file(
        &format!("fs/cgroup{own}/cgroup.controllers"),
        "cpu memory pids\n",
    );
    let unit = f.p(&format!("fs/cgroup{own}"));
    let probe = |p: &Path| p == unit.as_path();
    let cg = f.detect_delegated("a1b2c3d4", &probe);
    assert_eq!(
        cg.summary(),
        "cgroup v2 (memory, cpu, pids; kill, delegated)"
    );
    assert_eq!(cg.hiers[0].leaf, Some(unit.join("daemon")));
    assert_eq!(cg.hiers[0].enable, ["memory", "pids", "cpu"]);
    let e = cg.enforced();
    assert!(e.kill && e.memory && e.cpu && e.pids, "{e:?}");
    assert!(e.why.is_empty(), "{:?}", e.why);

    // Detected again once in the `daemon` leaf: the same layout.
    let f = pure_v2_fixture(&format!("{own}/daemon"));
    f.file(
        &format!("fs/cgroup{own}/cgroup.controllers"),
        "cpu memory pids\n",
    );
    let unit = f.p(&format!("fs/cgroup{own}"));
    let probe = |p: &Path| p == unit.as_path();
    let cg = f.detect_delegated("a1b2c3d4", &probe);
    assert_eq!(
        cg.summary(),
        "cgroup v2 (memory, cpu, pids; kill, delegated)"
    );
    assert_eq!(cg.delegated(), Some(unit.as_path()));
    let h = &cg.hiers[0];
    assert_eq!(h.parent, unit);
    assert_eq!(h.leaf, Some(unit.join("daemon")));
    assert_eq!(h.base, unit.join("runner-manager-a1b2c3d4"));

    // A delegated cgroup that offers no pids controller: the rest is enforced, and doctor
    // is told why pids is not.
    f.file(
        &format!("fs/cgroup{own}/cgroup.controllers"),
        "cpu memory\n",
    );
    let cg = f.detect_delegated("a1b2c3d4", &probe);
    assert_eq!(cg.summary(), "cgroup v2 (memory, cpu; kill, delegated)");
    let e = cg.enforced();
    assert!(e.memory && e.cpu && e.kill && !e.pids);
    assert_eq!(e.why.len(), 1);
    assert!(e.why[0].starts_with("pids: not limited"), "{:?}", e.why);
    assert!(e.why[0].contains("no pids controller"), "{:?}", e.why);
}

#[test]
fn detects_hybrid_like_this_machine() {
    let f = hybrid_fixture();
    let cg = f.detect("t1");
    assert_eq!(cg.mode(), CgroupMode::Hybrid);
    assert_eq!(
        cg.summary(),
        "hybrid: v2 kill and cpu time; v1 memory, cpu, pids"
    );
    let e = cg.enforced();
    assert!(e.kill && e.memory && e.cpu && e.pids && e.meters, "{e:?}");
    // v2 at its root (not delegated), v1 memory nested under our own v1 cgroup; cpuacct
    // is not needed because v2's cpu.stat gives CPU time.
    assert_eq!(
        cg.base_dirs(),
        vec![
            f.p("fs/cgroup/unified/runner-manager-t1"),
            f.p("fs/cgroup/memory/process_api/a745f88a/runner-manager-t1"),
            f.p("fs/cgroup/pids/runner-manager-t1"),
            f.p("fs/cgroup/cpu/runner-manager-t1"),
        ]
    );
    let v2 = &cg.hiers[0];
    assert!(v2.roles.kill && v2.roles.cpu_time && !v2.roles.memory);
    assert!(
        v2.enable.is_empty(),
        "hybrid v2 has no controllers to enable"
    );
    assert_eq!(v2.leaf, None);
}

#[test]
fn hybrid_on_an_old_kernel_kills_by_signal() {
    let f = hybrid_fixture();
    f.osrelease("5.10.0-23-amd64\n");
    let cg = f.detect("t1");
    assert_eq!(
        cg.summary(),
        "hybrid: v2 cpu time; v1 memory, cpu, pids; kill by signal"
    );
    assert!(cg.enforced().kill);
}

#[test]
fn a_hierarchy_outside_our_namespace_is_not_used() {
    let cgroup = HYBRID_CGROUP.replace("4:memory:/process_api/a745f88a", "4:memory:/../elsewhere");
    let f = Fixture::new(HYBRID_MOUNTS, &cgroup);
    f.file("fs/cgroup/unified/cgroup.controllers", "hugetlb\n")
        .file("fs/cgroup/unified/cpu.stat", "")
        .dir("fs/cgroup/pids")
        .dir("fs/cgroup/cpu");
    let cg = f.detect("t1");
    let e = cg.enforced();
    assert!(!e.memory && e.pids && e.cpu && !e.meters, "{e:?}");
    assert!(
        e.why.iter().any(|w| w.starts_with("memory: not limited")),
        "{:?}",
        e.why
    );
    assert_eq!(
        cg.summary(),
        "hybrid: v2 cpu time; v1 cpu, pids; kill by signal"
    );
}

#[test]
fn detects_v1_only_with_cpu_and_cpuacct_together() {
    let f = Fixture::new(V1_MOUNTS, V1_CGROUP);
    let svc = "system.slice/runner-manager.service";
    for h in ["cpu,cpuacct", "memory", "pids", "systemd"] {
        f.dir(&format!("fs/cgroup/{h}/{svc}"));
    }
    let cg = f.detect("t1");
    assert_eq!(cg.mode(), CgroupMode::V1);
    assert_eq!(
        cg.summary(),
        "cgroup v1 (memory, cpu, pids; kill by signal)"
    );
    let e = cg.enforced();
    assert!(e.kill && e.memory && e.cpu && e.pids && e.meters, "{e:?}");
    // Nested under the service's own cgroup in each hierarchy; cpu and cpuacct share one.
    assert_eq!(
        cg.base_dirs(),
        vec![
            f.p(&format!("fs/cgroup/memory/{svc}/runner-manager-t1")),
            f.p(&format!("fs/cgroup/pids/{svc}/runner-manager-t1")),
            f.p(&format!("fs/cgroup/cpu,cpuacct/{svc}/runner-manager-t1")),
        ]
    );
    let cpu = &cg.hiers[2];
    assert_eq!(cpu.name, "cpu,cpuacct");
    assert!(cpu.roles.cpu && cpu.roles.cpu_time);
}

#[test]
fn no_cgroup_fs_is_none_with_a_reason() {
    let f = Fixture::new(
        "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n",
        "0::/\n",
    );
    let cg = f.detect("t1");
    assert!(cg.is_none());
    assert_eq!(cg.mode(), CgroupMode::None);
    assert_eq!(cg.summary(), "none: no cgroup file system is mounted");
    let e = cg.enforced();
    assert!(!e.kill && !e.memory && !e.cpu && !e.pids && !e.meters);
    assert_eq!(e.why, vec!["no cgroups: no cgroup file system is mounted"]);
    assert!(cg.attempt(1).paths().is_empty());
    assert!(matches!(
        cg.create(1, &Limits::default()),
        Err(CgroupError::Unavailable { .. })
    ));
    assert!(matches!(cg.prepare(), Err(CgroupError::Unavailable { .. })));
    // Killing or removing nothing succeeds: the caller's cleanup needs no special case.
    assert!(cg.attempt(1).kill().is_ok());
    assert!(cg.attempt(1).remove().is_ok());
    assert!(cg.attempt(1).join_fds().unwrap().is_empty());
}

#[test]
fn unreachable_hierarchies_are_none_with_every_reason() {
    // v1 mounted, but this process's cgroups are not there (a different mount namespace).
    let f = Fixture::new(V1_MOUNTS, V1_CGROUP);
    let cg = f.detect("t1");
    assert!(cg.is_none());
    let s = cg.summary();
    assert!(
        s.starts_with("none: no cgroup2 file system is mounted; "),
        "{s}"
    );
    assert!(s.contains("runner-manager.service does not exist"), "{s}");
}

#[test]
fn unreadable_proc_and_bad_tags_are_none() {
    let missing = Cgroups::detect_in(Path::new("/nonexistent/proc"), Path::new("/"), "t1");
    assert!(missing.is_none());
    assert!(
        missing.summary().starts_with("none: cannot read"),
        "{}",
        missing.summary()
    );
    for tag in ["", "../x", "a/b", "a b", &"x".repeat(33)] {
        let cg = Cgroups::detect(tag);
        assert!(cg.is_none(), "{tag:?}");
        assert!(cg.summary().contains("tag"), "{}", cg.summary());
    }
    assert!(Cgroups::none("isolation=none").is_none());
    assert_eq!(
        Cgroups::none("isolation=none").summary(),
        "none: isolation=none"
    );
}

#[test]
fn lists_only_attempt_directories_we_named() {
    let f = hybrid_fixture();
    let cg = f.detect("t1");
    let mem = f.p("fs/cgroup/memory/process_api/a745f88a/runner-manager-t1");
    let v2 = f.p("fs/cgroup/unified/runner-manager-t1");
    for d in ["att-1", "att-22", "att-x", "att-007", "att--3", "other"] {
        fs::create_dir_all(mem.join(d)).unwrap();
    }
    fs::create_dir_all(v2.join("att-9")).unwrap();
    fs::write(mem.join("att-3"), "a file").unwrap();
    std::os::unix::fs::symlink(f.p("fs/cgroup/pids"), mem.join("att-5")).unwrap();
    assert_eq!(cg.list_attempts(), vec![1, 9, 22]);
    assert!(cg.attempt(22).exists());
    assert!(!cg.attempt(5).exists(), "a link is not a cgroup of ours");
}

#[test]
fn attempt_names_and_limits_are_checked() {
    assert_eq!(parse_attempt_name("att-0"), Some(0));
    assert_eq!(parse_attempt_name("att-123"), Some(123));
    for bad in ["att-", "att-01", "att-+1", "att--1", "att-1x", "x-1"] {
        assert_eq!(parse_attempt_name(bad), None, "{bad}");
    }
    let f = hybrid_fixture();
    let cg = f.detect("t1");
    assert!(cg.attempt(-1).paths().is_empty());
    assert!(matches!(
        cg.create(-1, &Limits::default()),
        Err(CgroupError::InvalidAttempt(-1))
    ));
    for (l, name) in [
        (
            Limits {
                memory_max: Some(0),
                ..Limits::default()
            },
            "memory_max",
        ),
        (
            Limits {
                cpu_max_millis: Some(9),
                ..Limits::default()
            },
            "cpu_max",
        ),
        (
            Limits {
                pids_max: Some(0),
                ..Limits::default()
            },
            "pids_max",
        ),
    ] {
        match cg.create(1, &l) {
            Err(CgroupError::InvalidLimit { name: n, .. }) => assert_eq!(n, name),
            other => panic!("{name}: {other:?}"),
        }
    }
    // Without prepare the base is missing: a typed error naming the fix.
    let err = cg.create(1, &Limits::default()).unwrap_err();
    assert!(matches!(err, CgroupError::NotPrepared { .. }), "{err:?}");
    assert!(err.to_string().contains("prepare"), "{err}");
    // A fixture tree is not a cgroup file system: prepare refuses it.
    assert!(matches!(cg.prepare(), Err(CgroupError::NotACgroup { .. })));
}

#[test]
fn cpu_quota_and_kernel_versions() {
    assert_eq!(cpu_quota_us(1000), 100_000);
    assert_eq!(cpu_quota_us(1500), 150_000);
    assert_eq!(cpu_quota_us(10), 1_000);
    assert!(release_has_cgroup_kill("5.14.0"));
    assert!(release_has_cgroup_kill("6.18.44-fc-v1045"));
    assert!(!release_has_cgroup_kill("5.13.19"));
    assert!(!release_has_cgroup_kill("4.19.0-26-amd64"));
    assert!(!release_has_cgroup_kill("garbage"));
    assert_eq!(and_list(&["kill"]), "kill");
    assert_eq!(and_list(&["kill", "cpu time"]), "kill and cpu time");
    assert_eq!(and_list(&["a", "b", "c"]), "a, b and c");
}
