//! The Pool pane against its golden buffers (tests/golden/tui/pool-*.txt; rewrite
//! them with `RUNNER_MANAGER_UPDATE_GOLDEN=1`), and its appearing only for a store
//! with coordinator hosts.

use super::*;
use crate::store::{SqliteStore, Store};
use crate::tui::app::{App, Pane};
use crate::tui::theme::Theme;
use crossterm::event::{KeyCode, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

const NOW: i64 = 1_796_032_200_000; // 2026-11-30 09:50:00Z

fn host(name: &str, connected: bool, free: u32, leases: u32) -> CoordHostRow {
    CoordHostRow {
        name: name.into(),
        created_at: NOW - 86_400_000,
        connected,
        version: Some(3),
        host_id: Some(format!("{name:0>16}")),
        os: Some("linux".into()),
        arch: Some("x86_64".into()),
        capacity: Some(8),
        free: Some(free),
        profiles: vec!["pool".into()],
        covered: vec!["app".into()],
        open_leases: leases,
        started: 40,
        finished: 37,
        refusals: 2,
        last_seen_at: Some(NOW - 2_000),
        ..CoordHostRow::default()
    }
}

fn job(key: &str, phase: Phase, host: Option<&str>, age_s: i64) -> CoordJobRow {
    CoordJobRow {
        job_key: key.into(),
        target: "pool".into(),
        repo: "acme/app".into(),
        name: format!("build {key}"),
        labels: vec!["self-hosted".into(), "linux".into()],
        queued_at: NOW - age_s * 1000,
        phase: phase.into(),
        lease_id: host.map(|_| format!("c7f3-{key}")),
        host: host.map(String::from),
        profile: host.map(|_| "pool".into()),
        runner_name: None,
        expires_at: host.map(|_| NOW + 90_000),
        placements: 1,
        updated_at: NOW - 1_000,
    }
}

/// A coordinator's store: three hosts (one gone), two open leases, a waiting job and
/// a started one.
fn coordinator_store() -> SqliteStore {
    let s = SqliteStore::open_in_memory().unwrap();
    for h in ["build-a", "build-b", "build-c"] {
        s.coord_add_host(h, &[1u8; 32], NOW - 86_400_000).unwrap();
    }
    let mut draining = host("build-b", true, 0, 1);
    draining.draining = true;
    draining.last_refusal = Some("draining".into());
    draining.last_refusal_at = Some(NOW - 5_000);
    let mut working = host("build-a", true, 6, 1);
    working.meters.insert(
        "pool".into(),
        crate::meter::ProfileMeters {
            runners: 1,
            rss_bytes: 512 << 20,
            cpu_millis: 40_000,
            cpu_percent: 85,
            processes: 6,
        },
    );
    let mut running = job("1000", Phase::Started, None, 65);
    running.host = Some("build-a".into());
    running.runner_name = Some("rm-0000buil-17".into());
    let mut waiting = job("1003", Phase::Waiting, None, 2);
    waiting.placements = 2;
    s.coord_put_view(
        &[working, draining],
        &[
            job("1001", Phase::Accepted, Some("build-a"), 12),
            job("1002", Phase::Offered, Some("build-b"), 3),
            waiting,
            running,
        ],
    )
    .unwrap();
    s
}

fn app_of(s: &SqliteStore) -> App {
    let snap = Snapshot::load(s, NOW).unwrap().with_pool(Some(s)).unwrap();
    App::new(snap, Theme::PLAIN)
}

fn screen(app: &App, w: u16, h: u16) -> String {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| crate::tui::ui::draw(f, app)).unwrap();
    let buf = t.backend().buffer();
    let mut out = String::new();
    for y in 0..h {
        let line: String = (0..w).map(|x| buf[(x, y)].symbol()).collect();
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[test]
fn the_pool_pane_against_its_golden_buffers() {
    let s = coordinator_store();
    let mut app = app_of(&s);
    app.key(KeyCode::Char('8').into());
    assert_eq!(app.pane, Pane::Pool);
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/tui");
    let update = std::env::var_os("RUNNER_MANAGER_UPDATE_GOLDEN").is_some();
    for (w, h) in [(80, 24), (160, 48)] {
        let actual = screen(&app, w, h);
        let path = dir.join(format!("pool-{w}x{h}.txt"));
        if update {
            std::fs::write(&path, &actual).unwrap();
            continue;
        }
        let expected = std::fs::read_to_string(&path).unwrap_or_default();
        assert_eq!(actual, expected, "{} differs:\n{actual}", path.display());
    }
}

#[test]
fn the_pane_reads_hosts_and_open_leases_only() {
    let s = coordinator_store();
    let pool = PoolSnapshot::load(&s).unwrap().unwrap();
    assert_eq!(pool.hosts.len(), 3);
    assert_eq!(pool.connected(), 2);
    let keys: Vec<&str> = pool.leases.iter().map(|j| j.job_key.as_str()).collect();
    assert_eq!(keys, ["1001", "1002"], "offered and accepted leases only");
    assert_eq!((pool.waiting, pool.started), (1, 1));
    // Issue 38: which host runs which job, the waiting ones after them.
    let keys: Vec<&str> = pool.jobs().map(|j| j.job_key.as_str()).collect();
    assert_eq!(keys, ["1001", "1002", "1000", "1003"]);
}

/// Issue 38, item 9: the pane shows which host runs which job, why a launch is
/// refused (what each host reported that makes it refuse one) and each host's meters.
#[test]
fn the_pane_says_who_runs_what_who_refuses_and_why() {
    let s = coordinator_store();
    let pool = PoolSnapshot::load(&s).unwrap().unwrap();
    let takes_of = |name: &str| takes(pool.hosts.iter().find(|h| h.name == name).unwrap());
    assert_eq!(takes_of("build-a"), "yes");
    assert_eq!(takes_of("build-b"), "no: draining");
    assert_eq!(takes_of("build-c"), "no: not connected");
    let mut h = host("x", true, 0, 0);
    assert_eq!(takes(&h), "no: full");
    h.free = Some(2);
    h.unfit = vec!["pool".into()];
    assert_eq!(takes(&h), "no: unfit: pool", "every profile unfit");
    h.profiles.push("gpu".into());
    assert_eq!(takes(&h), "yes, not pool");

    let story_of = |key: &str| story(&pool, pool.jobs().find(|j| j.job_key == key).unwrap(), NOW);
    assert_eq!(
        story_of("1000"),
        "1000 acme/app build 1000: runs on build-a as rm-0000buil-17"
    );
    assert_eq!(
        story_of("1001"),
        "1001 acme/app build 1001: accepted to build-a for profile pool, the lease ends in 1m30s"
    );
    assert!(
        story_of("1003").contains(
            "again after 2 offer(s) refused or let expire, the last by build-b: draining"
        ),
        "the waiting job's story names the newest refusal and its word: {}",
        story_of("1003")
    );
    let host_of = |name: &str| pool.hosts.iter().find(|h| h.name == name).unwrap();
    assert_eq!(refused(host_of("build-b"), NOW), "2 (draining 5s ago)");
    assert_eq!(
        refused(host_of("build-a"), NOW),
        "2",
        "no reason kept: the count alone"
    );

    let mut app = app_of(&s);
    app.key(KeyCode::Char('8').into());
    let drawn = screen(&app, 80, 24);
    let row = drawn.lines().find(|l| l.contains("build-a")).unwrap();
    assert!(
        row.contains("512 MiB") && row.contains("85%") && row.contains("yes"),
        "build-a's meters at 80 columns: {row}"
    );
    assert!(drawn.contains("no: draining"), "{drawn}");
    assert!(
        drawn.contains("1000 acme/app build 1000")
            || drawn.contains("1001 acme/app build 1001: accepted to build-a"),
        "the selected job's story: {drawn}"
    );
}

#[test]
fn the_pane_is_shown_only_when_the_store_has_coordinator_hosts() {
    let plain = SqliteStore::open_in_memory().unwrap();
    plain.host_or_create().unwrap();
    let mut app = app_of(&plain);
    assert!(app.snap.pool.is_none());
    assert_eq!(Pane::shown(&app.snap).len(), 7);
    app.key(KeyCode::Char('8').into());
    assert_eq!(app.pane, Pane::Overview, "8 does nothing without a pool");
    app.key(KeyCode::BackTab.into());
    assert_eq!(app.pane, Pane::Usage, "Tab cycles past no Pool pane");
    assert!(!screen(&app, 80, 24).contains("Pool"));

    let s = coordinator_store();
    let mut app = app_of(&s);
    // Eight tabs do not fit 80 columns with their keys: the names alone do.
    assert!(screen(&app, 80, 24).contains("Usage│ Pool"));
    assert!(screen(&app, 160, 48).contains("8 Pool"));
    assert_eq!(
        app.pane,
        Pane::Pool,
        "a coordinator's store opens on its pool"
    );
    app.key(KeyCode::Tab.into());
    app.key(KeyCode::BackTab.into());
    assert_eq!(app.pane, Pane::Pool);
    // Job rows move with j/k, clamped at the ends (four jobs).
    for _ in 0..5 {
        app.key(KeyCode::Char('j').into());
    }
    assert_eq!(app.pool.index, 3);
    // The hosts removed (a refresh with no pool): back to Overview.
    let snap = Snapshot::load(&plain, NOW)
        .unwrap()
        .with_pool(Some(&plain))
        .unwrap();
    app.set_snapshot(snap);
    assert_eq!(app.pane, Pane::Overview);
}

#[test]
fn a_click_on_a_tab_opens_its_pane_and_the_wheel_moves_the_selection() {
    use crossterm::event::{MouseButton, MouseEvent, MouseEventKind};
    let s = coordinator_store();
    let mut app = app_of(&s);
    let area = ratatui::layout::Rect::new(0, 0, 80, 24);
    let drawn = screen(&app, 80, 24);
    let tabs = drawn.lines().nth(1).unwrap();
    let at = |word: &str| tabs[..tabs.find(word).unwrap()].chars().count() as u16;
    let click = |column, row| MouseEvent {
        kind: MouseEventKind::Down(MouseButton::Left),
        column,
        row,
        modifiers: KeyModifiers::NONE,
    };
    // Every tab, clicked where the frame drew its title, opens its pane.
    for pane in Pane::ALL {
        app.mouse(click(at(pane.title()), 1), area);
        assert_eq!(app.pane, pane, "clicked {:?} in {tabs:?}", pane.title());
    }
    let wheel = MouseEvent {
        kind: MouseEventKind::ScrollDown,
        column: 10,
        row: 10,
        modifiers: KeyModifiers::NONE,
    };
    app.mouse(wheel, area);
    assert_eq!(app.pool.index, 1, "the wheel moves as j does");
}

#[test]
fn a_new_coordinator_with_a_host_and_no_lease_opens_on_its_pool() {
    // The first hour: `coordinator host add`, then `top`, before any host connects.
    let s = SqliteStore::open_in_memory().unwrap();
    s.coord_add_host("build-1", &[1u8; 32], NOW - 60_000)
        .unwrap();
    let app = app_of(&s);
    assert_eq!(app.pane, Pane::Pool);
    let drawn = screen(&app, 80, 24);
    assert!(
        drawn.contains("build-1") && drawn.contains("Jobs: 0 leased"),
        "{drawn}"
    );
}

/// Issue 50: top on a coordinator said `daemon down  live 0/0`, of a host daemon that
/// never runs there. Its header says it is a coordinator and what it serves.
#[test]
fn a_coordinators_header_says_coordinator_hosts_up_and_leases() {
    let s = coordinator_store();
    let app = app_of(&s);
    let head = screen(&app, 120, 4)
        .lines()
        .next()
        .unwrap_or("")
        .to_string();
    assert!(
        head.contains("coordinator down  hosts up 2/3  leases 2"),
        "{head}"
    );
    assert!(
        !head.contains("daemon") && !head.contains("live 0/0"),
        "{head}"
    );
    // Serving, it says so.
    s.put_coord_serving(&serde_json::json!({"listen": "127.0.0.1:1", "pid": 1}))
        .unwrap();
    let head = screen(&app_of(&s), 120, 4)
        .lines()
        .next()
        .unwrap_or("")
        .to_string();
    assert!(head.contains("coordinator up  hosts up"), "{head}");
}

/// Issue 50: at fifty hosts the pane stays usable. The hosts' title sums up the whole
/// pool, `/` on this pane filters its hosts and jobs (Enter keeps, Esc clears) and `s`
/// orders the hosts.
#[test]
fn at_fifty_hosts_a_summary_a_filter_and_a_sort_keep_the_pane_usable() {
    let s = SqliteStore::open_in_memory().unwrap();
    let mut rows = Vec::new();
    for i in 0..50 {
        let name = format!("node-{i:02}");
        s.coord_add_host(&name, &[i as u8; 32], NOW).unwrap();
        let mut h = host(&name, i % 10 != 9, (i % 8) as u32, 0);
        h.binary_version = Some(if i < 3 { "1.1.0" } else { "1.0.0" }.into());
        // The view lists the connected hosts; the rest are down.
        if h.connected {
            rows.push(h);
        }
    }
    let runners: u32 = rows.iter().map(|h| 8 - h.free.unwrap()).sum();
    let jobs = [job("2001", Phase::Accepted, Some("node-01"), 30)];
    s.coord_put_view(&rows, &jobs).unwrap();
    let mut app = app_of(&s);
    app.key(KeyCode::Char('8').into());
    let drawn = screen(&app, 160, 48);
    assert!(
        drawn.contains(&format!(
            "Pool: hosts 45 up, 5 down, 0 draining · runners {runners}/360 · leases 1 open"
        )),
        "{drawn}"
    );
    for c in "/1.1.0".chars() {
        app.key(KeyCode::Char(c).into());
    }
    app.key(KeyCode::Enter.into());
    let drawn = screen(&app, 160, 48);
    for (name, shown) in [("node-00", true), ("node-02", true), ("node-03", false)] {
        assert_eq!(drawn.contains(name), shown, "{name}: {drawn}");
    }
    assert!(drawn.contains("/1.1.0 3 of 50"), "{drawn}");
    // Typed text is the filter's, not a key: `s` above did not sort.
    assert_eq!(app.pool.sort, 0);
    app.key(KeyCode::Esc.into());
    app.key(KeyCode::Char('s').into());
    app.key(KeyCode::Char('s').into());
    let drawn = screen(&app, 160, 48);
    assert!(drawn.contains("· by version"), "{drawn}");
    let at = |v: &str| {
        drawn
            .lines()
            .position(|l| l.contains("node-") && l.contains(v))
    };
    // The newest may be past the pane's half; the oldest come first.
    let old = at("1.0.0").expect("a 1.0.0 host shown");
    assert!(
        at("1.1.0").is_none_or(|new| old < new),
        "oldest first: {drawn}"
    );
    assert!(
        app.help_lines()
            .iter()
            .any(|(k, h)| k == "s" && h.starts_with("sort hosts")),
        "the help lists the pane's sort key"
    );
}
