//! What containment costs: per spawn, readying an attempt and spawning its runner with
//! per-attempt uids and cgroups (`daemon::host::contain::ready` + `runner::spawn_runner`)
//! against the same with isolation `none`, over the realistic install; and per live
//! runner, one meter sample read from its cgroup against a /proc walk of its session;
//! and what a cache slot's lease costs (`runner::slots`): a cold slot, the same uid
//! again, and another uid taking over a slot of `files` files.
//! `cargo bench --bench contain [-- --small]`; prints, asserts nothing. The uids half
//! needs root (to make the test users and switch to them); without it, it says so and
//! measures the `none` half only.

#[path = "support/mod.rs"]
mod support;

#[path = "../tests/common/users.rs"]
mod users;

use runner_manager::daemon::host::contain::{self, Containment};
use runner_manager::domain::{Attempt, InEffect, ScalePolicy};
use runner_manager::meter::sample::sample_tree;
use runner_manager::runner;
use runner_manager::runner::cgroup::Cgroups;
use runner_manager::secret::Secret;
use runner_manager::sim::install::{self, InstallShape};
use std::path::Path;
use std::time::{Duration, Instant};

fn main() {
    let small = std::env::args().any(|a| a == "--small");
    let n = if small { 8 } else { 40 };
    let base = std::env::temp_dir().join(format!("rm-bench-contain-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).unwrap();
    let install_dir = base.join("runner");
    install::lay_out_shaped(
        &install_dir,
        &support::daemon_binary(),
        InstallShape::Realistic,
    )
    .expect("lay out the install");
    println!(
        "contain: {n} spawns per mode over the realistic install ({} build), under {}",
        support::profile(),
        base.display()
    );
    let cgroups = {
        let cg = Cgroups::detect("benchcontain");
        match cg.prepare() {
            Ok(()) => cg,
            Err(e) => Cgroups::none(&e.to_string()),
        }
    };
    println!("cgroups: {}", cgroups.summary());
    let t = Instant::now();
    let entries = runner::root::audit_install(&install_dir).expect("the install is safe");
    println!(
        "  audit of the install   {entries} entries in {:.2?} (once per install, at its first root with an owner)",
        t.elapsed()
    );
    let none = Containment {
        isolation: InEffect::None {
            why: "benchmark".into(),
        },
        cgroups: Cgroups::none("isolation none: no cgroup"),
        runtime_root: None,
        legacy_runtime: None,
        host_tag: "bench".into(),
        run_as_blocked: None,
        shared_dirs: None,
    };
    let t_none = spawns("none", &none, &base.join("none"), &install_dir, n, None);
    match users::try_runner_uids(n.min(16) as u32) {
        Err(why) => println!("uids: skipped ({why})"),
        Ok(block) => {
            let uids = Containment {
                isolation: InEffect::Uids(block.range()),
                cgroups: cgroups.clone(),
                runtime_root: None,
                legacy_runtime: None,
                host_tag: "bench".into(),
                run_as_blocked: None,
                shared_dirs: None,
            };
            let dir = base.join("uids");
            contain::open_for_runners(&dir).expect("open the state directory");
            let t_uids = spawns("uids", &uids, &dir, &install_dir, n, Some(&block));
            let extra = |p: f64| pct(&t_uids, p).as_secs_f64() - pct(&t_none, p).as_secs_f64();
            println!(
                "isolation costs per spawn: p50 {:+.2} ms, p99 {:+.2} ms",
                extra(0.5) * 1e3,
                extra(0.99) * 1e3
            );
            meters(&uids.cgroups, if small { 4 } else { 16 });
            cache_leases(&dir, &block, if small { 2_000 } else { 20_000 });
        }
    }
    let _ = std::fs::remove_dir_all(&base);
}

/// Readies and spawns `n` attempts, timing ready + spawn (the simulated listener then
/// exits at once on the JIT config it cannot read, and is cleaned up untimed).
fn spawns(
    mode: &str,
    c: &Containment,
    state_dir: &Path,
    install_dir: &Path,
    n: usize,
    block: Option<&users::UidBlock>,
) -> Vec<Duration> {
    std::fs::create_dir_all(state_dir.join("attempts")).unwrap();
    let policy = {
        let mut p = ScalePolicy::new("bench", "t", "0123abcd89ef4567");
        p.runner_dir = Some(install_dir.to_path_buf());
        p
    };
    let mut times = Vec::new();
    // Attempt 0 warms up (with an owner, the first root of an install audits it whole;
    // that is timed apart in `main`).
    for i in 0..=n {
        let mut a = Attempt::new(i as i64 + 1, "bench", "t", "0123abcd89ef4567", 0);
        if let Some(b) = block {
            let u = b.user((i % b.range().len() as usize) as u32);
            a.runner_uid = Some(u.uid);
            a.runner_gid = Some(u.gid);
        }
        let t = Instant::now();
        let ready = contain::ready(c, state_dir, install_dir, &policy, &a).expect("ready");
        let jit = Secret::new("not-a-jit-config");
        let log = runner::attempt_log(state_dir, a.id);
        let spawned = runner::spawn_runner(&ready.spawn_spec(&log, &jit, None)).expect("spawn");
        if i > 0 {
            times.push(t.elapsed());
        }
        // The listener fails on the JIT config and exits; what is left goes with the
        // attempt's cgroup and uid, as at cleanup.
        let _ = wait_exit(spawned.pid);
        let _ = contain::kill_all(c, &a);
        let _ = contain::remove_cgroup(c, a.id);
        let _ = runner::remove_root(&ready.root.root);
    }
    figures(&format!("  ready + spawn, {mode}"), &times);
    times
}

/// One meter sample per live attempt: from its cgroup, and from a /proc walk of its
/// session (what the meter did before, and still does without cgroups). Each attempt
/// is a `sleep` in its own session and cgroup.
fn meters(cgroups: &Cgroups, live: usize) {
    if cgroups.is_none() {
        return;
    }
    let limits = runner::cgroup::Limits::default();
    let mut procs = Vec::new();
    for i in 0..live {
        let id = 1_000 + i as i64;
        let cg = cgroups.create(id, &limits).expect("an attempt cgroup");
        let fds = std::sync::Arc::new(cg.join_fds().expect("its cgroup.procs"));
        let mut cmd = std::process::Command::new("sleep");
        cmd.arg("60");
        // SAFETY: setsid and the cgroup writes are async-signal-safe; nothing allocates.
        unsafe {
            use std::os::unix::process::CommandExt;
            let f = fds.clone();
            cmd.pre_exec(move || {
                libc::setsid();
                f.join_self()
            });
        }
        procs.push((cg, cmd.spawn().expect("a sleeper")));
    }
    let rounds = 50u32;
    let t = Instant::now();
    for _ in 0..rounds {
        for (cg, _) in &procs {
            std::hint::black_box(cg.usage());
        }
    }
    let from_cgroup = t.elapsed() / (rounds * live as u32);
    let t = Instant::now();
    for _ in 0..rounds {
        for (_, child) in &procs {
            std::hint::black_box(sample_tree(child.id() as i32));
        }
    }
    let from_proc = t.elapsed() / (rounds * live as u32);
    println!(
        "meter sample per live runner ({live} live, {} processes on the host): cgroup {from_cgroup:.1?}, /proc walk {from_proc:.1?}",
        std::fs::read_dir("/proc")
            .map(|d| d
                .filter(|e| e.as_ref().is_ok_and(|e| e
                    .file_name()
                    .to_string_lossy()
                    .bytes()
                    .all(|b| b.is_ascii_digit())))
                .count())
            .unwrap_or(0)
    );
    for (cg, mut child) in procs {
        let _ = cg.kill();
        let _ = child.wait();
        let _ = cg.remove();
    }
}

fn wait_exit(pid: i32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if matches!(
            runner::reap_child(pid),
            runner::Reap::Exited(_) | runner::Reap::NotOurChild
        ) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    false
}

fn pct(v: &[Duration], p: f64) -> Duration {
    let mut v = v.to_vec();
    v.sort();
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn figures(name: &str, v: &[Duration]) {
    println!(
        "{name:<24} n={:<3} p50 {:>9.2?}  p99 {:>9.2?}  max {:>9.2?}",
        v.len(),
        pct(v, 0.5),
        pct(v, 0.99),
        pct(v, 1.0)
    );
}

/// A cache slot's lease and release, timed: made cold, taken again by the same uid
/// (no walk), and taken over by another uid once the slot holds `files` files (the
/// walk that gives them to it). What each start with caches pays on top of `ready`.
fn cache_leases(runtime: &Path, block: &users::UidBlock, files: usize) {
    use runner_manager::runner::slots;
    let dirs: Vec<&str> = runner_manager::domain::caches::TOOLS
        .iter()
        .map(|t| t.dir)
        .collect();
    let (a, b) = (block.user(0), block.user(1));
    let range = block.range();
    let is_runner = move |u: u32| range.contains(u);
    let lease = |u: &runner_manager::runner::RunAsUser| {
        let t = Instant::now();
        let d = slots::lease_caches(
            runtime,
            "bench-0",
            0,
            Some((u.uid, u.gid)),
            &is_runner,
            &dirs,
        )
        .expect("lease");
        (t.elapsed(), d)
    };
    let (cold, dir) = lease(&a);
    let t = Instant::now();
    slots::release_caches(runtime, "bench-0", 0).expect("release");
    let release = t.elapsed();
    let (warm, _) = lease(&a);
    // Files as the first lessee wrote them (a package cache is many small files).
    for i in 0..files {
        let sub = dir.join("npm").join(format!("{:02x}", i % 256));
        let _ = std::fs::create_dir(&sub);
        let f = sub.join(i.to_string());
        std::fs::write(&f, b"x").unwrap();
        std::os::unix::fs::lchown(&f, Some(a.uid), Some(a.gid)).unwrap();
        std::os::unix::fs::lchown(&sub, Some(a.uid), Some(a.gid)).unwrap();
    }
    slots::release_caches(runtime, "bench-0", 0).expect("release");
    let (other, _) = lease(&b);
    println!(
        "  cache slot lease: cold {:.2} ms, same uid {:.2} ms, release {:.2} ms, \
         another uid over {files} files {:.1} ms",
        cold.as_secs_f64() * 1e3,
        warm.as_secs_f64() * 1e3,
        release.as_secs_f64() * 1e3,
        other.as_secs_f64() * 1e3
    );
    let _ = slots::remove_cache(runtime, "bench-0", 0);
}
