//! `usage`: the roll-up's totals add up to the attempts ledger they came from, in a
//! table, JSON and CSV; bad input is exit 2 naming the argument, the store untouched.

use crate::support::{Dir, seeded, snapshot};
use runner_manager::domain::job_owner::{JobOwner, OwnerSource};
use runner_manager::domain::{Attempt, AttemptState, Outcome};
use runner_manager::store::{AttemptFilter, NewAttempt, SqliteStore, Store};
use runner_manager::timefmt::now_millis;

/// Attempts ended an hour ago: three jobs of two repositories, one job no source
/// named, one idle runner; all cleaned.
fn lives(d: &Dir) -> Vec<Attempt> {
    let who = |repo: &str, workflow: &str| owner(repo, workflow, "build");
    ended(
        d,
        vec![
            (Some(who("octo/app", "CI")), Some(600_000)),
            (Some(who("octo/app", "Release")), Some(90_000)),
            (Some(who("octo/web", "CI, nightly")), Some(30_000)),
            (None, Some(45_000)),
            (None, None),
        ],
    )
}

/// Whose job a runner ran, queued 4 s before the attempts `ended` writes.
fn owner(repo: &str, workflow: &str, job: &str) -> JobOwner {
    JobOwner {
        repo: repo.into(),
        workflow: Some(workflow.into()),
        job_name: job.into(),
        run_id: 1,
        run_attempt: Some(1),
        job_id: Some(10),
        queued_at: Some(now_millis() - 3_604_000),
        source: OwnerSource::Webhook,
    }
}

/// Attempts ended an hour ago, one per case: whose job it ran (if any source said) and
/// how long it was busy (`None`: idle, no job); all cleaned.
fn ended(d: &Dir, cases: Vec<(Option<JobOwner>, Option<i64>)>) -> Vec<Attempt> {
    let s = SqliteStore::open(&d.state()).unwrap();
    let host = s.host_or_create().unwrap();
    let at = now_millis() - 3_600_000;
    for (i, (owner, busy)) in cases.into_iter().enumerate() {
        let t = at + i as i64 * 1_000;
        let mut a = s
            .create_attempt(
                &NewAttempt {
                    profile: "linux".into(),
                    target: "octo".into(),
                    host_id: host.id.clone(),
                    ..NewAttempt::default()
                },
                t,
            )
            .unwrap();
        a.step(AttemptState::Starting, t + 500).unwrap();
        a.step(AttemptState::Idle, t + 1_000).unwrap();
        a.owner = owner;
        a.cpu_millis = Some(7_000 * (i as u64 + 1));
        a.peak_rss_bytes = Some(1 << 30);
        a.mean_rss_bytes = Some(512 << 20);
        match busy {
            Some(b) => {
                a.step(AttemptState::Busy, t + 2_000).unwrap();
                a.job_name = Some(
                    a.owner
                        .as_ref()
                        .map_or_else(|| "build".into(), |o| o.job_name.clone()),
                );
                a.end(Outcome::CompletedJob, None, t + 2_000 + b).unwrap();
            }
            None => a
                .end(Outcome::ExitedIdleWithoutWork, None, t + 300_000)
                .unwrap(),
        }
        a.step(AttemptState::Destroying, a.updated_at + 10).unwrap();
        a.mark_cleaned(a.updated_at + 10);
        s.save_attempt(&a).unwrap();
    }
    s.attempts(&AttemptFilter::default()).unwrap()
}

fn json(d: &Dir, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["--json", "usage"];
    all.extend_from_slice(args);
    serde_json::from_str(&d.ok(&all).stdout).unwrap()
}

#[test]
fn usage_totals_match_the_ledger_in_a_table_json_and_csv() {
    let d = seeded("usage-ledger");
    let ledger = lives(&d);
    let sum = |f: fn(&Attempt) -> u64| ledger.iter().map(f).sum::<u64>();
    let v = json(&d, &["--by", "repo,workflow"]);
    let total = &v["total"];
    assert_eq!(total["runners"], ledger.len() as u64);
    assert_eq!(total["jobs"], 4);
    let cpu = total["cpu_seconds"].as_f64().unwrap();
    assert_eq!(cpu, sum(|a| a.cpu_millis.unwrap()) as f64 / 1000.0);
    let runner_secs =
        total["busy_seconds"].as_u64().unwrap() + total["idle_seconds"].as_u64().unwrap();
    let ledger_secs = sum(|a| a.age_millis(0) as u64) / 1000;
    // Each of busy and idle is rounded down to the second apart.
    assert!(
        ledger_secs - runner_secs <= 1,
        "{runner_secs} vs {ledger_secs}"
    );
    let rows = v["rows"].as_array().unwrap();
    let app_ci = rows
        .iter()
        .find(|r| r["repo"] == "octo/app" && r["workflow"] == "CI")
        .unwrap();
    assert_eq!(app_ci["jobs"], 1);
    assert_eq!(
        app_ci["wait_p50_seconds"], 10,
        "waited 6 s: the 10 s bucket"
    );
    let row_sum: f64 = rows
        .iter()
        .map(|r| r["cpu_seconds"].as_f64().unwrap())
        .sum();
    assert_eq!(row_sum, cpu, "the rows add up to the total");
    assert!(
        rows.iter().any(|r| r["repo"] == "-"),
        "unattributed, not lost"
    );

    let table = d.ok(&["usage", "--by", "repo"]).stdout;
    assert!(table.contains("octo/app") && table.lines().last().unwrap().starts_with("total"));
    assert!(!table.contains("COST"), "no prices, no cost column");

    d.ok(&[
        "host",
        "set",
        "cost_per_cpu_hour=3.6",
        "cost_per_gib_hour=0",
    ]);
    let v = json(&d, &["--top", "1"]);
    assert_eq!(
        v["rows"].as_array().unwrap().len(),
        2,
        "the top one and other"
    );
    let cost = v["total"]["cost"].as_f64().unwrap();
    assert!(
        (cost - cpu / 1000.0).abs() < 1e-9,
        "{cost}: 3.6 per CPU-hour"
    );

    let csv = d.ok(&["usage", "--by", "repo,workflow", "--csv"]).stdout;
    let mut lines = csv.lines();
    assert!(lines.next().unwrap().starts_with("REPO,WORKFLOW,JOBS,"));
    assert!(csv.contains("octo/web,\"CI, nightly\","), "{csv}");
    assert!(
        csv.lines().last().unwrap().starts_with("total,,4,5,"),
        "{csv}"
    );
}

#[test]
fn bad_usage_arguments_exit_2_naming_them_and_touch_nothing() {
    let d = seeded("usage-bad");
    lives(&d);
    let before = snapshot(&d.state());
    for (args, named) in [
        (&["usage", "--by", "team"][..], "--by"),
        (&["usage", "--since", "last week"], "--since"),
        (&["usage", "--since", "2d", "--until", "9d"], "--until"),
        (&["usage", "--top", "0"], "--top"),
        (&["usage", "--by", "repo,host"], "--by"),
        (&["coordinator", "usage", "--by", "team"], "--by"),
        (&["coordinator", "usage", "--until", "tomorrow"], "--until"),
        (&["coordinator", "usage", "--top", "x"], "--top"),
        (&["--json", "coordinator", "usage", "--csv"], "--csv"),
        (&["--json", "usage", "--csv"], "--csv"),
        (&["host", "set", "usage_retention=5m"], "usage_retention"),
        (
            &["host", "set", "cost_per_gib_hour=free"],
            "cost_per_gib_hour",
        ),
    ] {
        let r = d.run(args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains(named), "{args:?}: {}", r.stderr);
    }
    assert_eq!(snapshot(&d.state()), before);
}

/// A newcomer who runs `coordinator usage` on a host's own store gets the empty
/// report and, on stderr, where the figures they want are.
#[test]
fn coordinator_usage_on_a_store_no_host_joined_says_so() {
    let d = seeded("usage-no-pool");
    lives(&d);
    let r = d.run(&["coordinator", "usage"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.starts_with("pool usage"), "{}", r.stdout);
    assert!(
        r.stderr.contains("no host has joined") && r.stderr.contains("runner-manager usage"),
        "{}",
        r.stderr
    );
    let r = d.run(&["usage"]);
    assert!(!r.stderr.contains("no host has joined"), "{}", r.stderr);
}

/// Issue 48: a job named with a raw line break (from a signed delivery) reached
/// `attempt show` and the usage table as a real line break, and `usage --csv` wrote a
/// workflow named `=HYPERLINK(..)` as a live formula. Every name from GitHub is one
/// field: escaped in tables, blocks and CSV; a JSON string in `--json`; and a CSV
/// cell that would start a formula is neutralised, the report's own figures not.
#[test]
fn names_from_github_are_escaped_and_never_start_a_formula() {
    let d = seeded("usage-names");
    let job = "build\nFAKE  line\r";
    let list = ended(
        &d,
        vec![
            (
                Some(owner("octo/app", "=HYPERLINK(\"x\")", job)),
                Some(60_000),
            ),
            (Some(owner("+1", "CI", "build")), Some(50_000)),
            (Some(owner("-1", "CI", "build")), Some(40_000)),
            (Some(owner("@x", "CI", "build")), Some(30_000)),
        ],
    );
    let id = list
        .iter()
        .find(|a| a.job_name.as_deref() == Some(job))
        .unwrap()
        .id
        .to_string();
    let one_line = |text: &str, what: &str| {
        assert!(
            !text.lines().any(|l| l.starts_with("FAKE")),
            "{what}: the name broke the line\n{text}"
        );
        assert!(
            text.contains("build\\u{a}FAKE  line\\u{d}"),
            "{what}:\n{text}"
        );
    };
    one_line(&d.ok(&["attempts"]).stdout, "attempts");
    let show = d.ok(&["attempt", "show", &id]).stdout;
    one_line(&show, "attempt show");
    assert!(
        show.lines()
            .any(|l| l.starts_with("owner") && l.contains("=HYPERLINK(\"x\") / build\\u{a}FAKE")),
        "{show}"
    );
    one_line(&d.ok(&["usage", "--by", "job"]).stdout, "usage");
    // JSON keeps the name as a JSON string (its line break `\n`, not a raw one).
    let json = d.ok(&["--json", "attempt", "show", &id]).stdout;
    assert!(!json.lines().any(|l| l.starts_with("FAKE")), "{json}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["job_name"], job);
    let v: serde_json::Value =
        serde_json::from_str(&d.ok(&["--json", "usage", "--by", "job"]).stdout).unwrap();
    assert!(
        v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["job"] == job),
        "{v}"
    );

    let csv = d
        .ok(&["usage", "--by", "repo,workflow,job", "--csv"])
        .stdout;
    assert!(!csv.lines().any(|l| l.starts_with("FAKE")), "{csv}");
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 6, "a header, four rows and the total\n{csv}");
    for want in [
        "octo/app,\"'=HYPERLINK(\"\"x\"\")\",build\\u{a}FAKE  line\\u{d},1,1,",
        "\"'+1\",CI,build,1,1,",
        "\"'-1\",CI,build,1,1,",
        "\"'@x\",CI,build,1,1,",
    ] {
        assert!(lines.iter().any(|l| l.starts_with(want)), "{want}\n{csv}");
    }
    // No cell of ours is touched: the total's and the figures' stay bare.
    assert!(lines[5].starts_with("total,,,4,4,"), "{csv}");
    assert!(!csv.contains("'0") && !csv.contains("'total"), "{csv}");
}
