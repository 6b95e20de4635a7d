//! A store prepared for `top`'s tests: fixed times, fixed host identity, a few
//! profiles in different conditions, attempts in every state, samples for pictures.

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use runner_manager::domain::{
    AttemptState, CredentialRef, DemandSource, Limit, Outcome, Reason, Reported, ScalePolicy,
    SessionPhase, SessionState, Target, TargetMode, TargetScope,
};
use runner_manager::store::{
    Heartbeat, LatencySample, NewAttempt, ProfileStatus, QueueSample, SessionStatus, SqliteStore,
    Store, TargetStatus,
};
use runner_manager::timefmt::Millis;
use runner_manager::tui::theme::Theme;
use runner_manager::tui::{App, Snapshot, ui};
use std::path::PathBuf;

/// 2026-11-30T10:00:00Z.
pub const T0: Millis = 1_796_032_800_000;
/// When the tests look: ten minutes later.
pub const NOW: Millis = T0 + 600_000;
pub const HOST_ID: &str = "0123abcd89ef4567";

/// A fresh directory for one test, removed when dropped.
pub struct Dir(pub PathBuf);

impl Dir {
    pub fn new(tag: &str) -> Dir {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("rm-tui-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Dir(p)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn target(name: &str, scope: TargetScope) -> Target {
    Target {
        name: name.into(),
        scope,
        api_url: "https://api.github.com".into(),
        credential: CredentialRef::TokenEnv {
            var: "GH_TOKEN".into(),
        },
        poll_interval_secs: 5,
        repos: vec![],
        max_in_flight: 8,
        secondary_limit: Some(900),
    }
}

pub fn profile(store: &dyn Store, name: &str, target: &str, labels: &[&str], max: u32) {
    let h = store.host_or_create().unwrap();
    let mut p = ScalePolicy::new(name, target, &h.id);
    let labels: Vec<String> = labels.iter().map(|l| l.to_string()).collect();
    p.set_labels("labels", &labels, &h.os, &h.arch).unwrap();
    p.max_capacity = max;
    store.add_profile(&p).unwrap();
}

/// An attempt that went through `states` one minute-ish apart from `start`, ending
/// with `end` if given (its reason as the store keeps it).
#[allow(clippy::too_many_arguments)]
pub fn attempt(
    store: &dyn Store,
    profile: &str,
    job: Option<&str>,
    start: Millis,
    states: &[AttemptState],
    end: Option<(Outcome, &str)>,
    usage: Option<(u64, u64)>,
) -> i64 {
    let new = NewAttempt {
        profile: profile.into(),
        target: store.profile(profile).unwrap().target,
        host_id: HOST_ID.into(),
        job_name: job.map(str::to_string),
        ..NewAttempt::default()
    };
    let mut a = store.create_attempt(&new, start).unwrap();
    let mut t = start;
    for s in states {
        t += 7_000;
        a.step(*s, t).unwrap();
    }
    if let Some((o, r)) = end {
        t += 30_000;
        a.end(o, Some(Reason::parse(r)), t).unwrap();
    }
    if let Some((rss, cpu)) = usage {
        a.peak_rss_bytes = Some(rss);
        a.cpu_millis = Some(cpu);
    }
    a.pid = Some(4000 + a.id as i32);
    store.save_attempt(&a).unwrap();
    a.id
}

/// Three profiles on two targets (`mac` takes its demand from a scale set, whose
/// session another owner holds), attempts in every kind of state, the daemon's status
/// rows, a heartbeat, and ten minutes of samples.
pub fn seed(store: &dyn Store) {
    use AttemptState::*;
    let mut h = store.host_or_create().unwrap();
    h.capacity = 8;
    store.update_host(&h).unwrap();
    store
        .add_target(&target(
            "octo",
            TargetScope::Repo {
                owner: "octo".into(),
                repo: "app".into(),
            },
        ))
        .unwrap();
    store
        .add_target(&target("acme", TargetScope::Org { org: "acme".into() }))
        .unwrap();
    profile(store, "linux", "octo", &["gpu"], 4);
    profile(store, "arm", "octo", &["arm64", "big"], 2);
    let h = store.host_or_create().unwrap();
    let mut mac = ScalePolicy::new("mac", "acme", &h.id);
    mac.set_labels("labels", &["xcode".into()], &h.os, &h.arch)
        .unwrap();
    mac.max_capacity = 1;
    mac.demand = DemandSource::Scaleset;
    store.add_profile(&mac).unwrap();
    let mut arm = store.profile("arm").unwrap();
    arm.active = false;
    store.update_profile(&arm, arm.revision).unwrap();
    store
        .put_session_status(&SessionStatus {
            profile: "mac".into(),
            target: "acme".into(),
            session: SessionState {
                phase: SessionPhase::Conflict.into(),
                scale_set_id: Some(7),
                last_message_id: Some(41),
                last_poll_at: Some(NOW - 95_000),
                reason: Some("another listener holds this scale set's message session (409: owner runner-manager@other)".into()),
                retry_at: Some(NOW + 12_000),
                ..SessionState::default()
            },
            updated_at: NOW - 2_000,
        })
        .unwrap();

    attempt(
        store,
        "linux",
        Some("build (ubuntu)"),
        T0,
        &[Starting, Idle, Busy],
        Some((Outcome::CompletedJob, "job done")),
        Some((180 << 20, 95_000)),
    );
    attempt(
        store,
        "linux",
        None,
        T0 + 60_000,
        &[Starting],
        Some((Outcome::Failed, "bootstrap_timeout")),
        None,
    );
    attempt(
        store,
        "mac",
        Some("ios tests"),
        T0 + 120_000,
        &[Starting, Idle, Busy],
        Some((Outcome::Orphaned, "no process after restart")),
        Some((900 << 20, 300_000)),
    );
    attempt(
        store,
        "linux",
        Some("lint"),
        T0 + 300_000,
        &[Starting, Idle, Busy],
        None,
        Some((120 << 20, 41_000)),
    );
    attempt(
        store,
        "linux",
        Some("test (matrix 1)"),
        T0 + 420_000,
        &[Starting, Idle, Busy],
        None,
        Some((256 << 20, 12_500)),
    );
    attempt(
        store,
        "linux",
        None,
        T0 + 480_000,
        &[Starting, Idle],
        None,
        Some((60 << 20, 900)),
    );
    attempt(store, "linux", None, T0 + 570_000, &[Starting], None, None);
    // The busy `lint` runner (attempt 4) has a live meter: twelve samples 2 s apart,
    // RSS climbing to 95 MiB and CPU busy then calming, as the detail's sparkline
    // and the Overview's live table show them (its peak and CPU time the attempt's
    // own, so the orders by RSS and CPU stay as they were).
    for seq in 0..12u64 {
        store
            .put_live_meters(&[runner_manager::meter::LiveMeter {
                attempt: 4,
                at: NOW - 24_000 + seq as i64 * 2_000,
                rss_bytes: (40 + 5 * seq) << 20,
                peak_rss_bytes: 120 << 20,
                cpu_millis: 31_100 + seq * 900,
                cpu_percent: [
                    10.0, 40.0, 95.0, 120.0, 100.0, 80.0, 60.0, 45.0, 45.0, 30.0, 20.0, 15.0,
                ][seq as usize],
                processes: 3 + (seq as u32 % 3),
                seq,
            }])
            .unwrap();
    }
    attempt(
        store,
        "arm",
        Some("arm build"),
        T0 + 500_000,
        &[Starting, Idle, Busy],
        None,
        Some((2 << 30, 150_000)),
    );

    // GitHub's runner list for octo as the daemon published it 40 s ago (acme's not
    // listed yet): two of ours with attempts, one of ours no attempt explains,
    // another host's, and two foreign ones.
    let gh = |id, name: &str, online, busy| runner_manager::domain::RegisteredRunner {
        id,
        name: name.into(),
        online,
        busy,
        labels: vec!["self-hosted".into(), "linux".into(), "gpu".into()],
    };
    runner_manager::store::daemon_facts::publish_runners(
        store,
        "octo",
        &[
            gh(101, "rm-0123abcd-4", true, true),
            gh(102, "rm-0123abcd-6", true, false),
            gh(103, "rm-0123abcd-99", false, false),
            gh(104, "rm-deadbeef-12", true, true),
            gh(105, "build-box-1", false, true),
            gh(106, "gpu-rig", true, false),
        ],
        NOW - 40_000,
    )
    .unwrap();
    store
        .put_target_status(&TargetStatus {
            target: "octo".into(),
            mode: TargetMode::Standalone.into(),
            last_error: None,
            error_kind: None,
            rate_limit_remaining: Some(4800),
            rate_limit_limit: None,
            rate_limit_reset: None,
            poll_every_ms: None,
            updated_at: NOW - 2_000,
        })
        .unwrap();
    store
        .put_target_status(&TargetStatus {
            target: "acme".into(),
            mode: TargetMode::Fallback.into(),
            last_error: Some("coordinator unreachable".into()),
            error_kind: Some(runner_manager::domain::status::ErrorKind::Unreachable),
            rate_limit_remaining: None,
            rate_limit_limit: None,
            rate_limit_reset: None,
            poll_every_ms: None,
            updated_at: NOW - 2_000,
        })
        .unwrap();
    // Written as the store keeps them: `paused` is no word the daemon writes, so it
    // stands for one another build wrote, shown as it is.
    for (p, demand, limiting, err) in [
        ("linux", 5, "max_capacity", None),
        ("arm", 1, "paused", None),
        (
            "mac",
            0,
            "demand",
            Some(
                "GitHub 403: resource not accessible by integration (check the App's permissions)",
            ),
        ),
    ] {
        store
            .put_profile_status(&ProfileStatus {
                profile: p.into(),
                demand,
                limiting: Reported::read(limiting.into(), Limit::parse),
                last_error: err.map(str::to_string),
                updated_at: NOW - 2_000,
            })
            .unwrap();
    }
    store
        .put_heartbeat(&Heartbeat {
            pid: 4242,
            started_at: T0 - 3_600_000,
            heartbeat_at: NOW - 3_000,
            version: "0.1.0".into(),
        })
        .unwrap();
    // A queue that rises, is served, and falls; samples every 15 s.
    let mut samples = Vec::new();
    for i in 0..40i64 {
        let at = T0 + i * 15_000;
        let queued = [0, 1, 3, 5, 6, 4, 2, 1][(i / 5) as usize % 8];
        let live = [0, 1, 2, 4, 4, 4, 3, 2][(i / 5) as usize % 8];
        samples.push(QueueSample {
            profile: "linux".into(),
            at,
            queued,
            live,
        });
        samples.push(QueueSample {
            profile: "arm".into(),
            at,
            queued: u32::from(i > 30),
            live: u32::from(i > 33),
        });
    }
    store.add_queue_samples(&samples).unwrap();
    for (i, lat) in [4_000, 9_000, 31_000, 12_000, 6_000, 45_000, 8_000]
        .iter()
        .enumerate()
    {
        store
            .add_latency_sample(&LatencySample {
                profile: "linux".into(),
                at: T0 + 60_000 + i as i64 * 70_000,
                latency_ms: *lat,
            })
            .unwrap();
    }
    seed_usage(store);
}

/// Two weeks of the daily usage roll-up for the Usage pane: four repositories, their
/// workflows, today's before `T0`. Written by ending and cleaning attempts, then
/// pruning them, as retention would: only the roll-up stays, so the other panes see
/// none of them.
fn seed_usage(store: &dyn Store) {
    use runner_manager::domain::job_owner::{JobOwner, OwnerSource};
    let repos = [
        ("acme/app", &["CI", "Release"][..], 6),
        ("acme/web", &["CI"][..], 4),
        ("acme/infra", &["Terraform", "Lint"][..], 2),
        ("octo/tools", &["Nightly"][..], 1),
    ];
    for day in 0..14i64 {
        for (r, (repo, workflows, weight)) in repos.iter().enumerate() {
            for (w, workflow) in workflows.iter().enumerate() {
                let jobs = (weight + (day * 3 + r as i64 + w as i64) % 4) as usize;
                for j in 0..jobs {
                    let start = T0 - 36_000_000 - day * 86_400_000 + (j as i64) * 600_000;
                    let new = NewAttempt {
                        profile: "linux".into(),
                        target: store.profile("linux").unwrap().target,
                        host_id: HOST_ID.into(),
                        ..NewAttempt::default()
                    };
                    let mut a = store.create_attempt(&new, start).unwrap();
                    a.recover(AttemptState::Busy, start + 20_000).unwrap();
                    a.owner = Some(JobOwner {
                        repo: (*repo).into(),
                        workflow: Some((*workflow).into()),
                        job_name: "build".into(),
                        run_id: 9_000 + j as i64,
                        run_attempt: Some(1),
                        job_id: None,
                        queued_at: Some(start - 5_000 - (j as i64 % 3) * 40_000),
                        source: OwnerSource::Rest,
                    });
                    a.cpu_millis = Some(600_000 + r as u64 * 90_000);
                    a.mean_rss_bytes = Some(1 << 30);
                    let minutes = 12 + 9 * (r as i64 + j as i64 % 3);
                    a.end(Outcome::CompletedJob, None, start + minutes * 60_000)
                        .unwrap();
                    a.mark_cleaned(start + minutes * 60_000 + 1_000);
                    store.save_attempt(&a).unwrap();
                }
            }
        }
    }
    store.prune_attempts(T0).unwrap();
}

/// The seeded store, read at `NOW`, with the machine's host name and id replaced so
/// the buffers are the same on every machine.
pub fn seeded() -> (SqliteStore, Snapshot) {
    let store = SqliteStore::open_in_memory().unwrap();
    seed(&store);
    let snap = load(&store);
    (store, snap)
}

pub fn load(store: &dyn Store) -> Snapshot {
    let mut snap = Snapshot::load(store, NOW).unwrap();
    if let Some(h) = snap.host.as_mut() {
        h.name = "ci-host".into();
        h.id = HOST_ID.into();
    }
    snap
}

pub fn app(snap: Snapshot) -> App {
    App::new(snap, Theme::FULL)
}

/// Draws the app on a `w`×`h` test terminal.
pub fn render(app: &App, w: u16, h: u16) -> ratatui::buffer::Buffer {
    let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
    term.draw(|f| ui::draw(f, app)).unwrap();
    term.backend().buffer().clone()
}

/// The buffer's text, one line per row, trailing blanks trimmed.
pub fn text(buf: &ratatui::buffer::Buffer) -> String {
    let mut out = String::new();
    for y in 0..buf.area.height {
        let mut line = String::new();
        for x in 0..buf.area.width {
            line.push_str(buf[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

pub fn screen(app: &App, w: u16, h: u16) -> String {
    text(&render(app, w, h))
}
