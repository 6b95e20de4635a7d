//! `sim job add`: queues jobs on a running simulated GitHub, and says why when it
//! cannot.

use super::support::Dir;
use runner_manager::sim::{SimConfig, SimGitHub};

#[test]
fn sim_job_add_queues_jobs_with_their_labels_and_duration() {
    let d = Dir::new("sim-job");
    let mut sim = SimGitHub::start(SimConfig::default()).expect("sim starts");
    sim.add_repo("acme/app", true);
    let url = sim.url().to_string();
    let r = d.ok(&[
        "sim",
        "job",
        "add",
        "--url",
        &url,
        "--repo",
        "acme/app",
        "--labels",
        "self-hosted,linux",
        "--count",
        "3",
        "--duration",
        "2m",
        "--name",
        "build",
    ]);
    assert!(r.stdout.contains("queued 3 jobs"), "{}", r.stdout);
    let mut jobs = sim.jobs();
    jobs.sort_by_key(|j| j.name.clone());
    let names: Vec<_> = jobs.iter().map(|j| j.name.as_str()).collect();
    assert_eq!(names, ["build-1", "build-2", "build-3"]);
    for j in &jobs {
        assert_eq!(j.repo, "acme/app");
        assert_eq!(j.labels, ["self-hosted", "linux"]);
        assert_eq!(j.duration_ms, 120_000);
    }
    // It needs no store: nothing was made in the state directory.
    assert!(!d.state().exists());
    sim.shutdown();
}

/// `--script CMD`: each job carries its steps for the simulated runner's worker to run
/// with /bin/sh -c (the test bed's guest checks queue jobs that run commands); an
/// empty one is refused.
#[test]
fn sim_job_add_script_gives_each_job_its_steps() {
    let d = Dir::new("sim-job-script");
    let mut sim = SimGitHub::start(SimConfig::default()).expect("sim starts");
    sim.add_repo("acme/app", true);
    let url = sim.url().to_string();
    let cmd = "echo hi > /tmp/x; sleep 1";
    let r = d.ok(&[
        "sim", "job", "add", "--url", &url, "--repo", "acme/app", "--labels", "linux", "--count",
        "2", "--script", cmd,
    ]);
    assert!(r.stdout.contains("queued 2 jobs"), "{}", r.stdout);
    let jobs = sim.jobs();
    assert_eq!(jobs.len(), 2);
    for j in &jobs {
        assert_eq!(j.script.as_deref(), Some(cmd), "{}", j.name);
    }
    let r = d.run(&[
        "sim", "job", "add", "--url", &url, "--repo", "acme/app", "--labels", "linux", "--script",
        "",
    ]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("--script"), "{}", r.stderr);
    assert_eq!(sim.jobs().len(), 2, "a refused command queued a job");
    // Without --script a job has no steps: it sleeps for its duration.
    d.ok(&[
        "sim", "job", "add", "--url", &url, "--repo", "acme/app", "--labels", "linux",
    ]);
    assert_eq!(sim.jobs().iter().filter(|j| j.script.is_none()).count(), 1);
    sim.shutdown();
}

#[test]
fn sim_job_add_refuses_bad_input_and_says_what_went_wrong() {
    let d = Dir::new("sim-job-bad");
    let mut sim = SimGitHub::start(SimConfig::default()).expect("sim starts");
    sim.add_repo("acme/app", true);
    let url = sim.url().to_string();
    let base = ["sim", "job", "add", "--url"];
    let cases: &[(&[&str], i32, &str)] = &[
        (&["--repo", "acme/app", "--labels", "x"], 2, "--url"),
        (&[&url, "--repo", "acme", "--labels", "x"], 2, "--repo"),
        (
            &[&url, "--repo", "acme/app", "--labels", "a,,b"],
            2,
            "--labels",
        ),
        (
            &[&url, "--repo", "acme/app", "--labels", "x", "--count", "0"],
            2,
            "--count",
        ),
        (
            &[
                &url,
                "--repo",
                "acme/app",
                "--labels",
                "x",
                "--duration",
                "5 parsecs",
            ],
            2,
            "--duration",
        ),
        (
            &[&url, "--repo", "other/app", "--labels", "x"],
            1,
            "no such repository",
        ),
    ];
    for (args, code, says) in cases {
        // The first case leaves out --url altogether.
        let full: Vec<&str> = if args[0] == "--repo" {
            base[..3].iter().chain(args.iter()).copied().collect()
        } else {
            base.iter().chain(args.iter()).copied().collect()
        };
        let r = d.run(&full);
        assert_eq!(r.code, *code, "{full:?}: {}", r.stderr);
        assert!(r.stderr.contains(says), "{full:?}: {}", r.stderr);
    }
    assert!(sim.jobs().is_empty(), "a refused command queued a job");
    // Issue 50: a refusal's fix is what to do about it, not `doctor`.
    let r = d.run(&[
        "sim",
        "job",
        "add",
        "--url",
        &url,
        "--repo",
        "other/app",
        "--labels",
        "x",
    ]);
    assert_eq!(
        r.stderr.lines().last(),
        Some(
            "fix: runner-manager sim github --repo other/app (the simulated GitHub serves \
             only the repositories it was started with), then this command again"
        ),
        "{}",
        r.stderr
    );
    // Nothing listening: exit 1 naming the URL, and how to start one.
    let gone = "http://127.0.0.1:9";
    let r = d.run(&[
        "sim", "job", "add", "--url", gone, "--repo", "acme/app", "--labels", "x",
    ]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains(gone), "{}", r.stderr);
    assert_eq!(
        r.stderr.lines().last(),
        Some("fix: runner-manager sim github --repo OWNER/REPO (it prints the URL to give --url)"),
        "{}",
        r.stderr
    );
    sim.shutdown();
}

/// `sim github --webhook`: a webhook needs its secret, an http:// URL and a secret
/// that says something; each mistake exits 2 before anything listens.
#[test]
fn sim_github_refuses_a_webhook_without_its_secret_or_with_a_bad_url() {
    let d = Dir::new("sim-github-hook");
    let secret = d.file("hook-secret", "s3cr3t-hook\n");
    let empty = d.file("empty", "\n");
    let (secret, empty) = (secret.as_str(), empty.as_str());
    let cases: &[(&[&str], &str)] = &[
        (
            &["--webhook", "http://127.0.0.1:9/webhook"],
            "--webhook-secret-file",
        ),
        (&["--webhook-secret-file", secret], "--webhook"),
        (
            &[
                "--webhook",
                "ftp://127.0.0.1:9/",
                "--webhook-secret-file",
                secret,
            ],
            "http://",
        ),
        (
            &[
                "--webhook",
                "http://127.0.0.1:9/",
                "--webhook-secret-file",
                empty,
            ],
            "empty",
        ),
        (
            &[
                "--webhook",
                "http://127.0.0.1:9/",
                "--webhook-secret-file",
                "/nonexistent/s",
            ],
            "/nonexistent/s",
        ),
    ];
    for (args, named) in cases {
        let mut full = vec!["sim", "github", "--listen", "127.0.0.1:0"];
        full.extend_from_slice(args);
        let r = d.run(&full);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(
            r.stderr.contains(named),
            "{args:?} must name {named}: {}",
            r.stderr
        );
        assert!(
            !r.stderr.contains("s3cr3t-hook"),
            "{args:?} printed the secret"
        );
        assert!(r.stdout.is_empty(), "{args:?} listened: {}", r.stdout);
    }
}
