//! Every view on `TestBackend` at 80×24 and 160×48 against tests/golden/tui/, and the
//! Overview at 250×70 too (where it shows the live attempts and the chart).
//! `RUNNER_MANAGER_UPDATE_GOLDEN=1 cargo test --test tui` rewrites them.

use crate::support::{app, load, render, screen, seeded};
use crossterm::event::{KeyCode, KeyEvent};
use ratatui::style::Color;
use runner_manager::store::Store;
use runner_manager::tui::theme::Theme;
use runner_manager::tui::{App, Request};
use std::path::PathBuf;

const SIZES: [(u16, u16); 2] = [(80, 24), (160, 48)];

/// Scenes also drawn on a large terminal, which they lay out differently.
const LARGE: [(&str, (u16, u16)); 1] = [("overview", (250, 70))];

/// Scenes also drawn under `TERM=dumb` (and `NO_COLOR`), at 80×24: borders, the
/// chart and the sparklines in ASCII.
const ASCII: [&str; 5] = ["overview", "pictures", "runners", "detail", "usage"];

fn press(app: &mut App, keys: &[KeyCode]) {
    for k in keys {
        app.key(KeyEvent::from(*k));
    }
}

/// What leads to a scene from a fresh app.
type Setup = Box<dyn Fn(&mut App)>;

/// The scenes: a name and the keys that lead there from a fresh app.
fn scenes() -> Vec<(&'static str, Setup)> {
    use KeyCode::*;
    vec![
        ("overview", Box::new(|_: &mut App| {})),
        (
            "overview-mac",
            Box::new(|a: &mut App| press(a, &[Char('j'), Char('j')])),
        ),
        ("attempts", Box::new(|a: &mut App| press(a, &[Tab]))),
        (
            "attempts-filtered",
            Box::new(|a: &mut App| {
                press(a, &[Char('/')]);
                for c in "linux busy".chars() {
                    press(a, &[Char(c)]);
                }
            }),
        ),
        (
            "detail",
            Box::new(|a: &mut App| {
                press(a, &[Tab, Char('j'), Char('j'), Char('j'), Char('j')]);
                let id = a.attempts.selected.unwrap();
                assert_eq!(a.key(KeyEvent::from(Enter)), Request::LoadLog(id));
                let log = (1..=60)
                    .map(|i| format!("2026-11-30 10:0{}:{:02}Z: runner line {i}", i / 60, i % 60))
                    .collect();
                a.set_log(id, log);
                // The live meter's ring, as the loop reads it for the sparkline.
                let (store, _) = seeded();
                a.set_points(id, store.meter_points(id).unwrap());
            }),
        ),
        (
            "log",
            Box::new(|a: &mut App| {
                press(a, &[Tab, Char('j'), Char('j'), Char('j'), Char('j')]);
                let id = a.attempts.selected.unwrap();
                a.key(KeyEvent::from(Enter));
                assert_eq!(a.key(KeyEvent::from(Enter)), Request::LoadFullLog(id));
                let lines = (1..=300)
                    .map(|i| {
                        format!(
                            "2026-11-30 10:{:02}:{:02}Z: runner line {i}",
                            i / 60,
                            i % 60
                        )
                    })
                    .collect();
                a.set_full_log(
                    id,
                    runner_manager::tui::logfile::LogText {
                        lines,
                        skipped_bytes: 5 << 20,
                    },
                );
                // A page from the top: g, then three lines down.
                press(a, &[Char('g'), Char('j'), Char('j'), Char('j')]);
            }),
        ),
        ("pictures", Box::new(|a: &mut App| press(a, &[Char('3')]))),
        (
            "runners",
            Box::new(|a: &mut App| press(a, &[Char('n'), Char('j')])),
        ),
        ("activity", Box::new(|a: &mut App| press(a, &[Char('a')]))),
        (
            "activity-problems",
            Box::new(|a: &mut App| press(a, &[Char('a'), Char('!'), Char('j')])),
        ),
        ("settings", Box::new(|a: &mut App| press(a, &[Char('e')]))),
        (
            "usage",
            Box::new(|a: &mut App| press(a, &[Char('7'), Char('j')])),
        ),
        (
            "settings-refused",
            Box::new(|a: &mut App| {
                // max of linux set to a word: refused by the real edit path.
                let (store, _) = seeded();
                press(a, &[Char('e'), Char('j'), Char('j'), Char('j'), Enter]);
                press(a, &[Backspace, Char('x')]);
                let r = a.key(KeyEvent::from(Enter));
                let Request::Run(action) = r else {
                    panic!("{r:?}")
                };
                let probe = runner_manager::facts::host_probe::Probe {
                    state_dir: std::env::temp_dir(),
                };
                a.done(runner_manager::tui::actions::apply(&store, &action, &probe));
            }),
        ),
        ("help", Box::new(|a: &mut App| press(a, &[Char('?')]))),
        (
            "confirm-pause",
            Box::new(|a: &mut App| press(a, &[Char('j'), Char('p')])),
        ),
    ]
}

#[test]
fn every_view_against_its_golden_buffer() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/tui");
    let update = std::env::var_os("RUNNER_MANAGER_UPDATE_GOLDEN").is_some();
    let mut failures = Vec::new();
    for (name, setup) in scenes() {
        let (_store, snap) = seeded();
        let mut a = app(snap);
        setup(&mut a);
        let large = LARGE.iter().filter(|(n, _)| *n == name).map(|(_, s)| *s);
        for (w, h) in SIZES.into_iter().chain(large) {
            let actual = screen(&a, w, h);
            let path = dir.join(format!("{name}-{w}x{h}.txt"));
            check(&path, &actual, update, &mut failures);
        }
        if ASCII.contains(&name) {
            let mut a = a;
            a.theme = Theme {
                color: false,
                ascii: true,
            };
            let actual = screen(&a, 80, 24);
            assert!(actual.is_ascii(), "{name} under TERM=dumb:\n{actual}");
            check(
                &dir.join(format!("{name}-ascii-80x24.txt")),
                &actual,
                update,
                &mut failures,
            );
        }
    }
    assert!(
        failures.is_empty(),
        "{} golden buffers differ (RUNNER_MANAGER_UPDATE_GOLDEN=1 rewrites them):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Compares one golden buffer (or rewrites it).
fn check(path: &std::path::Path, actual: &str, update: bool, failures: &mut Vec<String>) {
    if update {
        std::fs::write(path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(path).unwrap_or_default();
    if expected != actual {
        failures.push(format!(
            "--- {}\n=== expected\n{expected}=== actual\n{actual}",
            path.display()
        ));
    }
}

/// Narrow, short and odd sizes: nothing panics, and what fits is still drawn.
#[test]
fn every_view_survives_small_and_odd_sizes() {
    for (name, setup) in scenes() {
        let (_store, snap) = seeded();
        let mut a = app(snap);
        setup(&mut a);
        for (w, h) in [(1, 1), (20, 5), (40, 12), (79, 23), (81, 25), (300, 100)] {
            let s = screen(&a, w, h);
            assert_eq!(s.lines().count(), h as usize, "{name} at {w}x{h}");
        }
    }
}

#[test]
fn no_color_draws_without_colours_but_keeps_the_selection_visible() {
    for (name, setup) in scenes() {
        let (_store, snap) = seeded();
        let mut a = App::new(snap, Theme::PLAIN);
        setup(&mut a);
        let buf = render(&a, 160, 48);
        let coloured = buf
            .content()
            .iter()
            .filter(|c| c.fg != Color::Reset || c.bg != Color::Reset)
            .count();
        assert_eq!(coloured, 0, "{name}: cells with a colour under NO_COLOR");
    }
    // With colour, the same screen does use colour (so the check above can fail).
    let (_store, snap) = seeded();
    let buf = render(&app(snap), 160, 48);
    assert!(buf.content().iter().any(|c| c.fg != Color::Reset));
}

#[test]
fn the_host_pane_shows_the_runner_version_in_use_and_the_newest() {
    use runner_manager::store::daemon_facts::{put_runner_in_use, put_runner_newest};
    let (store, snap) = seeded();
    let before = screen(&app(snap), 200, 40);
    assert!(!before.contains("runner 2."), "{before}");
    put_runner_in_use(&store, &["2.336.0".into()]).unwrap();
    put_runner_newest(&store, "2.337.0").unwrap();
    let s = screen(&app(load(&store)), 200, 40);
    assert!(s.contains("runner 2.336.0 (newest 2.337.0)"), "{s}");
}
