//! Figures, printed (run with `--nocapture` to see them), never asserted as timings:
//! render time per frame with 200 live attempts, and the cost of a store reload.

use crate::support::{HOST_ID, NOW, T0, attempt, load, seed};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use runner_manager::domain::AttemptState;
use runner_manager::store::{SqliteStore, Store};
use runner_manager::tui::theme::Theme;
use runner_manager::tui::{App, ui};
use std::time::Instant;

#[test]
fn figure_render_time_with_200_live_attempts() {
    let store = SqliteStore::open_in_memory().unwrap();
    seed(&store);
    let mut h = store.host_or_create().unwrap();
    h.capacity = 1000;
    store.update_host(&h).unwrap();
    for i in 0..200 {
        let states = [
            AttemptState::Starting,
            AttemptState::Idle,
            AttemptState::Busy,
        ];
        attempt(
            &store,
            "linux",
            Some(&format!("job {i}")),
            T0 + i,
            &states[..1 + (i as usize % 3)],
            None,
            Some((100 << 20, 5_000)),
        );
    }
    let _ = HOST_ID;
    let t = Instant::now();
    let loads = 20;
    let mut snap = load(&store);
    for _ in 0..loads {
        snap = load(&store);
    }
    let load_ms = t.elapsed().as_secs_f64() * 1000.0 / loads as f64;
    assert!(
        snap.live_total() >= 200,
        "the figure is about 200 live attempts"
    );
    let mut app = App::new(snap, Theme::FULL);
    for (pane, key) in [("overview", '1'), ("attempts", '2'), ("pictures", '3')] {
        app.key(crossterm::event::KeyEvent::from(
            crossterm::event::KeyCode::Char(key),
        ));
        for (w, h) in [(80u16, 24u16), (160, 48)] {
            let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
            let frames = 50;
            let t = Instant::now();
            for i in 0..frames {
                app.set_now(NOW + i);
                term.draw(|f| ui::draw(f, &app)).unwrap();
            }
            let per = t.elapsed().as_secs_f64() * 1000.0 / frames as f64;
            eprintln!("figure: tui render {pane} {w}x{h}, 200 live attempts: {per:.3} ms/frame");
        }
    }
    eprintln!("figure: tui snapshot load, 200 live + recent attempts (in memory): {load_ms:.2} ms");
}
