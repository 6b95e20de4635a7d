//! Live meters in `top`: a busy runner's figures from the meter row the daemon keeps,
//! in the attempts list and the detail view, before its end writes them into the
//! attempt itself.

use crate::support::{Dir, NOW, app, attempt, load, screen, seed};
use crossterm::event::{KeyCode, KeyEvent};
use runner_manager::domain::AttemptState;
use runner_manager::meter::LiveMeter;
use runner_manager::store::{SqliteStore, Store};
use runner_manager::tui::terminal::perform;

#[test]
fn a_busy_attempt_shows_its_live_meter_in_the_list_and_the_detail() {
    let store = SqliteStore::open_in_memory().unwrap();
    seed(&store);
    let id = attempt(
        &store,
        "linux",
        Some("live job"),
        NOW - 5_000,
        &[
            AttemptState::Starting,
            AttemptState::Idle,
            AttemptState::Busy,
        ],
        None,
        None,
    );
    // Six samples, RSS rising to 612 MiB and CPU falling to 35%: the ring the
    // detail's sparkline reads.
    for seq in 0..6u64 {
        store
            .put_live_meters(&[LiveMeter {
                attempt: id,
                at: NOW - 6_000 + seq as i64 * 1_000,
                rss_bytes: (112 + 100 * seq) << 20,
                peak_rss_bytes: 700 << 20,
                cpu_millis: 1_234,
                cpu_percent: 35.0 + (5 - seq) as f64 * 10.0,
                processes: 4,
                seq,
            }])
            .unwrap();
    }
    let snap = load(&store);
    assert!(snap.meters.contains_key(&id));
    let a = snap.attempts.iter().find(|a| a.id == id).unwrap();
    assert_eq!(a.peak_rss_bytes, Some(700 << 20));
    let mut app = app(snap);
    app.key(KeyEvent::from(KeyCode::Char('2')));
    let list = screen(&app, 160, 40);
    let row = list
        .lines()
        .find(|l| l.contains("live job"))
        .unwrap_or_else(|| panic!("{list}"));
    // The CLI's units, as `attempts` prints them.
    assert!(row.contains("612 MiB") && row.contains("1.2 s"), "{row}");

    let dir = Dir::new("meters");
    std::fs::create_dir_all(dir.0.join("logs")).unwrap();
    let r = app.key(KeyEvent::from(KeyCode::Enter));
    perform(&mut app, &store, &dir.0, r, NOW);
    assert_eq!(app.detail.as_ref().map(|d| d.id), Some(id));
    let detail = screen(&app, 160, 40);
    // The sparklines, each to its own top, before the figures now: RSS rising, CPU
    // falling.
    assert_eq!(app.detail.as_ref().unwrap().points.len(), 6);
    let rss = detail.lines().find(|l| l.contains("rss     ")).unwrap();
    assert!(rss.contains("▂▃▅▆▇█ 612 MiB (peak 700 MiB)"), "{rss}");
    let cpu = detail.lines().find(|l| l.contains("cpu     ")).unwrap();
    assert!(cpu.contains("█▇▆▆▅▄ 1.2 s 35% · 4 procs"), "{cpu}");
}
