//! Keys as state changes, and actions carried out on a real store through the same
//! `perform` the terminal loop calls.

use crate::support::{Dir, NOW, T0, app, attempt, load, seeded};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use runner_manager::domain::{AttemptState, Reported, TargetMode};
use runner_manager::store::Store;
use runner_manager::tui::actions::Action;
use runner_manager::tui::terminal::perform;
use runner_manager::tui::{App, Pane, Request};
use std::path::Path;

fn key(app: &mut App, code: KeyCode) -> Request {
    app.key(KeyEvent::from(code))
}

fn ch(app: &mut App, c: char) -> Request {
    key(app, KeyCode::Char(c))
}

fn ids(app: &App) -> Vec<i64> {
    app.attempts
        .visible(&app.snap)
        .iter()
        .map(|a| a.id)
        .collect()
}

#[test]
fn tab_and_hl_cycle_the_panes_and_numbers_jump() {
    let (_s, snap) = seeded();
    let mut a = app(snap);
    assert_eq!(a.pane, Pane::Overview);
    key(&mut a, KeyCode::Tab);
    assert_eq!(a.pane, Pane::Attempts);
    ch(&mut a, 'l');
    assert_eq!(a.pane, Pane::Pictures);
    key(&mut a, KeyCode::Right);
    assert_eq!(a.pane, Pane::Runners);
    key(&mut a, KeyCode::Tab);
    key(&mut a, KeyCode::Tab);
    assert_eq!(a.pane, Pane::Settings);
    key(&mut a, KeyCode::Right);
    assert_eq!(a.pane, Pane::Usage);
    key(&mut a, KeyCode::Right);
    assert_eq!(a.pane, Pane::Overview, "wraps around");
    key(&mut a, KeyCode::BackTab);
    assert_eq!(a.pane, Pane::Usage);
    ch(&mut a, 'h');
    assert_eq!(a.pane, Pane::Settings);
    ch(&mut a, '7');
    assert_eq!(a.pane, Pane::Usage);
    ch(&mut a, '1');
    assert_eq!(a.pane, Pane::Overview);
    // The original's letters, where they do not clash with ours.
    ch(&mut a, 'n');
    assert_eq!(a.pane, Pane::Runners);
    ch(&mut a, 'a');
    assert_eq!(a.pane, Pane::Activity);
    ch(&mut a, '4');
    assert_eq!(a.pane, Pane::Runners);
    assert_eq!(key(&mut a, KeyCode::F(5)), Request::Reload);
}

#[test]
fn help_opens_swallows_keys_and_closes() {
    let (_s, snap) = seeded();
    let mut a = app(snap);
    assert_eq!(ch(&mut a, '?'), Request::None);
    assert!(a.help);
    key(&mut a, KeyCode::Tab);
    assert_eq!(a.pane, Pane::Overview, "keys under the help do nothing");
    assert_eq!(ch(&mut a, 'q'), Request::None, "q closes help first");
    assert!(!a.help);
    ch(&mut a, '?');
    key(&mut a, KeyCode::Esc);
    assert!(!a.help);
    assert_eq!(ch(&mut a, 'q'), Request::Quit);
    let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
    assert_eq!(a.key(ctrl_c), Request::Interrupt);
}

#[test]
fn filter_narrows_rows_and_typing_q_does_not_quit() {
    let (_s, snap) = seeded();
    let mut a = app(snap);
    let all = ids(&a).len();
    assert_eq!(ch(&mut a, '/'), Request::None);
    assert_eq!(a.pane, Pane::Attempts, "/ goes to the attempts");
    for c in "mac q".chars() {
        assert_eq!(ch(&mut a, c), Request::None, "typing {c:?} into the filter");
    }
    assert_eq!(a.attempts.filter, "mac q");
    assert!(ids(&a).is_empty(), "no attempt has both words");
    key(&mut a, KeyCode::Backspace);
    key(&mut a, KeyCode::Backspace);
    key(&mut a, KeyCode::Enter);
    assert!(!a.attempts.editing);
    assert_eq!(ids(&a).len(), 1, "only the mac attempt");
    assert_eq!(a.attempts.selected, Some(ids(&a)[0]));
    key(&mut a, KeyCode::Esc);
    assert_eq!(a.attempts.filter, "");
    assert_eq!(ids(&a).len(), all);
}

#[test]
fn sort_cycles_and_the_selection_follows_its_attempt() {
    let (store, snap) = seeded();
    let mut a = app(snap);
    ch(&mut a, '2');
    assert_eq!(ids(&a), vec![8, 7, 6, 5, 4, 3, 2, 1], "newest first");
    ch(&mut a, 'j');
    ch(&mut a, 'j');
    assert_eq!(a.attempts.selected, Some(6));
    ch(&mut a, 's');
    assert_eq!(a.attempts.sort.as_str(), "state");
    assert_eq!(
        a.attempts.selected,
        Some(6),
        "sorting keeps the attempt selected"
    );
    let v = ids(&a);
    assert_eq!(v[0], 7, "starting first: {v:?}");
    for _ in 0..4 {
        ch(&mut a, 's');
    }
    assert_eq!(a.attempts.sort.as_str(), "newest");
    // A refresh with a newer attempt shifts the rows; the selection stays on 6.
    let newer = attempt(&store, "linux", None, T0 + 590_000, &[], None, None);
    a.set_snapshot(load(&store));
    assert_eq!(ids(&a)[0], newer);
    assert_eq!(a.attempts.selected, Some(6));
    key(&mut a, KeyCode::End);
    assert_eq!(a.attempts.selected, Some(1));
    key(&mut a, KeyCode::Home);
    assert_eq!(a.attempts.selected, Some(newer));
    key(&mut a, KeyCode::Up);
    assert_eq!(a.attempts.selected, Some(newer), "the top stays put");
}

#[test]
fn enter_opens_detail_which_scrolls_and_esc_comes_back() {
    let (store, snap) = seeded();
    let dir = Dir::new("detail");
    std::fs::create_dir_all(dir.0.join("logs")).unwrap();
    let lines: String = (1..=30).map(|i| format!("line {i}\n")).collect();
    std::fs::write(dir.0.join("logs/8.log"), lines).unwrap();
    let mut a = app(snap);
    ch(&mut a, '2');
    let r = key(&mut a, KeyCode::Enter);
    assert_eq!(r, Request::LoadLog(8));
    assert!(!perform(&mut a, &store, &dir.0, r, NOW));
    let d = a.detail.as_ref().unwrap();
    assert_eq!((d.log.len(), d.log[29].as_str()), (30, "line 30"));
    ch(&mut a, 'k');
    ch(&mut a, 'k');
    assert_eq!(a.detail.as_ref().unwrap().scroll, 2);
    ch(&mut a, 'G');
    assert_eq!(a.detail.as_ref().unwrap().scroll, 0, "G follows the end");
    ch(&mut a, 'g');
    assert_eq!(a.detail.as_ref().unwrap().scroll, 30);
    key(&mut a, KeyCode::Esc);
    assert!(a.detail.is_none());
    assert_eq!(a.pane, Pane::Attempts);
}

#[test]
fn enter_on_a_profile_shows_its_attempts() {
    let (_s, snap) = seeded();
    let mut a = app(snap);
    ch(&mut a, 'j');
    assert_eq!(
        a.overview.selected.as_deref(),
        Some("linux"),
        "profiles by name: arm, linux, mac"
    );
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.pane, Pane::Attempts);
    assert_eq!(a.attempts.filter, "linux");
    assert!(
        a.attempts
            .visible(&a.snap)
            .iter()
            .all(|x| x.profile == "linux")
    );
}

fn run(a: &mut App, store: &dyn Store, r: Request) {
    assert!(!perform(a, store, Path::new("/nonexistent"), r, NOW));
}

#[test]
fn pause_asks_first_and_goes_through_the_revision_check() {
    let (store, snap) = seeded();
    let mut a = app(snap);
    ch(&mut a, 'j');
    let rev = store.profile("linux").unwrap().revision;
    assert_eq!(ch(&mut a, 'p'), Request::None, "pausing asks first");
    assert!(matches!(
        a.confirm,
        Some(Action::SetActive { active: false, .. })
    ));
    assert_eq!(
        ch(&mut a, 'x'),
        Request::None,
        "other keys keep the question"
    );
    assert!(a.confirm.is_some());
    assert_eq!(ch(&mut a, 'n'), Request::None);
    assert!(a.confirm.is_none());
    assert!(
        store.profile("linux").unwrap().active,
        "cancelled: nothing written"
    );
    ch(&mut a, 'p');
    let r = ch(&mut a, 'y');
    assert!(matches!(
        r,
        Request::Run(Action::SetActive { active: false, .. })
    ));
    run(&mut a, &store, r);
    let p = store.profile("linux").unwrap();
    assert!(!p.active);
    assert_eq!(p.revision, rev + 1);
    assert!(!a.message.as_ref().unwrap().error);
    assert!(!a.snap.profile("linux").unwrap().policy.active, "reloaded");
    // Resuming is not disruptive: no question.
    let r = ch(&mut a, 'p');
    assert!(matches!(
        r,
        Request::Run(Action::SetActive { active: true, .. })
    ));
    run(&mut a, &store, r);
    assert!(store.profile("linux").unwrap().active);
}

#[test]
fn max_steps_validate_like_profile_set() {
    let (store, snap) = seeded();
    let mut a = app(snap);
    ch(&mut a, 'j');
    ch(&mut a, 'j');
    assert_eq!(a.overview.selected.as_deref(), Some("mac"));
    let r = ch(&mut a, '+');
    assert!(
        matches!(r, Request::Run(Action::SetMax { to: 2, .. })),
        "{r:?}"
    );
    run(&mut a, &store, r);
    assert_eq!(store.profile("mac").unwrap().max_capacity, 2);
    let r = ch(&mut a, '-');
    run(&mut a, &store, r);
    assert_eq!(store.profile("mac").unwrap().max_capacity, 1);
    // 0 is refused by validate() for an autoscale profile, as `profile set max=0` is.
    let rev = store.profile("mac").unwrap().revision;
    let r = ch(&mut a, '-');
    run(&mut a, &store, r);
    let m = a.message.clone().unwrap();
    assert!(
        m.error && m.text.contains("max") && m.text.contains("monitor"),
        "{m:?}"
    );
    assert_eq!(
        store.profile("mac").unwrap().revision,
        rev,
        "refused: nothing written"
    );
    // Below min is refused by validate(), as `profile set max=` would be.
    let mut p = store.profile("mac").unwrap();
    p.max_capacity = 3;
    p.min_capacity = 3;
    store.update_profile(&p, p.revision).unwrap();
    a.set_snapshot(load(&store));
    let r = ch(&mut a, '-');
    run(&mut a, &store, r);
    assert!(a.message.as_ref().unwrap().error, "{:?}", a.message);
    assert_eq!(store.profile("mac").unwrap().max_capacity, 3);
}

/// Issue 16, item 22: `-` asked and `+` did not. Both now apply at once, say what
/// they did, and `u` puts it back through the same revision check.
#[test]
fn plus_and_minus_both_apply_at_once_and_u_undoes() {
    let (store, snap) = seeded();
    let mut a = app(snap);
    ch(&mut a, 'j');
    assert_eq!(a.overview.selected.as_deref(), Some("linux"));
    for (k, to) in [('-', 3), ('+', 4), ('=', 5)] {
        let r = ch(&mut a, k);
        assert!(a.confirm.is_none(), "{k} asks nothing");
        assert!(
            matches!(r, Request::Run(Action::SetMax { to: t, .. }) if t == to),
            "{k}: {r:?}"
        );
        run(&mut a, &store, r);
        assert_eq!(store.profile("linux").unwrap().max_capacity, to as u32);
        let m = a.message.clone().unwrap();
        assert!(!m.error && m.text.contains("u undoes"), "{m:?}");
    }
    let screen = crate::support::screen(&a, 80, 24);
    assert!(
        screen.contains("u undoes"),
        "the hint is on screen:\n{screen}"
    );
    // After the message, the status line keeps the hint, whole at 80 columns.
    ch(&mut a, 'j');
    ch(&mut a, 'k');
    let screen = crate::support::screen(&a, 80, 24);
    let status = screen.lines().last().unwrap();
    assert!(
        status.starts_with("u undo max") && status.ends_with("q quit"),
        "{status}"
    );
    // u undoes the last step only, once.
    let r = ch(&mut a, 'u');
    assert!(
        matches!(r, Request::Run(Action::SetMax { to: 4, .. })),
        "{r:?}"
    );
    run(&mut a, &store, r);
    assert_eq!(store.profile("linux").unwrap().max_capacity, 4);
    // The undo of an undo is the step again: u toggles.
    let r = ch(&mut a, 'u');
    assert!(
        matches!(r, Request::Run(Action::SetMax { to: 5, .. })),
        "{r:?}"
    );
    // Another edit in between: the undo names a stale revision and is refused.
    let mut p = store.profile("linux").unwrap();
    p.min_capacity = 1;
    store.update_profile(&p, p.revision).unwrap();
    run(&mut a, &store, r);
    let m = a.message.clone().unwrap();
    assert!(
        m.error && m.text.contains("changed by another edit"),
        "{m:?}"
    );
    assert_eq!(store.profile("linux").unwrap().max_capacity, 4);
    assert_eq!(ch(&mut a, 'u'), Request::None, "nothing left to undo");
    assert!(a.message.as_ref().unwrap().error);
    // Pausing still asks: it stops a whole profile.
    ch(&mut a, 'p');
    assert!(a.confirm.is_some());
}

/// Issue 16, item 22: the Pool's key did nothing on a plain host and help listed it.
#[test]
fn key_8_without_a_pool_says_why_and_help_does_not_list_it() {
    let (_s, snap) = seeded();
    let mut a = app(snap);
    ch(&mut a, '8');
    assert_eq!(a.pane, Pane::Overview);
    let m = a.message.clone().unwrap();
    assert!(m.text.contains("coordinator"), "{m:?}");
    ch(&mut a, '?');
    let help = crate::support::screen(&a, 80, 24);
    assert!(help.contains("1 … 7 "), "{help}");
    assert!(!help.contains("1 … 8"), "{help}");
    assert!(!help.contains(" Pool"), "{help}");
}

fn full(a: &App) -> &runner_manager::tui::detail::FullLog {
    a.detail.as_ref().unwrap().full.as_ref().unwrap()
}

/// Issue 16, item 22: the whole log, scrollable, from the detail view.
#[test]
fn the_whole_log_opens_from_the_detail_and_scrolls() {
    let (store, snap) = seeded();
    let dir = Dir::new("fulllog");
    std::fs::create_dir_all(dir.0.join("logs")).unwrap();
    let lines: String = (1..=1000).map(|i| format!("line {i}\n")).collect();
    std::fs::write(dir.0.join("logs/8.log"), lines).unwrap();
    let mut a = app(snap);
    ch(&mut a, '2');
    let r = key(&mut a, KeyCode::Enter);
    assert!(!perform(&mut a, &store, &dir.0, r, NOW));
    assert_eq!(a.detail.as_ref().unwrap().log.len(), 500, "the tail only");
    let r = key(&mut a, KeyCode::Enter);
    assert_eq!(r, Request::LoadFullLog(8));
    assert!(!perform(&mut a, &store, &dir.0, r, NOW));
    assert_eq!(full(&a).text.lines.len(), 1000, "every line");
    // Opens at the end; the frame says where it is.
    let s = crate::support::screen(&a, 80, 24);
    assert!(s.contains("line 1000") && s.contains("of 1000"), "{s}");
    let page = full(&a).page.get();
    assert_eq!(page, 19, "24 rows less header, tabs, status and borders");
    assert_eq!(full(&a).first(), 1000 - page);
    ch(&mut a, 'g');
    assert_eq!(full(&a).first(), 0);
    ch(&mut a, 'j');
    ch(&mut a, 'j');
    assert_eq!(full(&a).first(), 2);
    key(&mut a, KeyCode::PageDown);
    assert_eq!(full(&a).first(), 2 + page);
    key(&mut a, KeyCode::PageUp);
    key(&mut a, KeyCode::PageUp);
    assert_eq!(full(&a).first(), 0, "clamped at the top");
    let s = crate::support::screen(&a, 80, 24);
    assert!(s.contains("line 1\n") || s.contains("│line 1 "), "{s}");
    ch(&mut a, 'G');
    assert_eq!(full(&a).first(), 1000 - page);
    ch(&mut a, 'j');
    assert_eq!(full(&a).first(), 1000 - page, "clamped at the end");
    ch(&mut a, 'k');
    assert_eq!(full(&a).first(), 999 - page, "k moves at once from the end");
    // The runner wrote more: r reads the whole log again, at its new end.
    let more: String = (1..=1010).map(|i| format!("line {i}\n")).collect();
    std::fs::write(dir.0.join("logs/8.log"), more).unwrap();
    assert_eq!(ch(&mut a, 'r'), Request::Reload);
    assert!(!perform(&mut a, &store, &dir.0, Request::Reload, NOW));
    assert_eq!(full(&a).text.lines.len(), 1010);
    assert!(crate::support::screen(&a, 80, 24).contains("line 1010"));
    // Esc goes back to the detail, then to the list.
    key(&mut a, KeyCode::Esc);
    assert!(a.detail.as_ref().unwrap().full.is_none());
    key(&mut a, KeyCode::Esc);
    assert!(a.detail.is_none());
    assert_eq!(a.pane, Pane::Attempts);
    // l opens it too, and a missing log is an empty view, not an error.
    ch(&mut a, 'j');
    let r = key(&mut a, KeyCode::Enter);
    let id = a.detail_id().unwrap();
    assert!(!perform(&mut a, &store, &dir.0, r, NOW));
    assert_eq!(ch(&mut a, 'l'), Request::LoadFullLog(id));
    assert!(!perform(
        &mut a,
        &store,
        &dir.0,
        Request::LoadFullLog(id),
        NOW
    ));
    assert!(full(&a).text.lines.is_empty());
    assert!(crate::support::screen(&a, 80, 24).contains("empty"));
}

/// Issue 16, item 22: a filtered title counts the live rows it shows.
#[test]
fn a_filtered_title_counts_what_it_shows() {
    let (_s, snap) = seeded();
    let mut a = app(snap);
    ch(&mut a, '2');
    let s = crate::support::screen(&a, 160, 48);
    assert!(s.contains("8 shown, 5 live"), "{s}");
    ch(&mut a, '/');
    for c in "mac".chars() {
        ch(&mut a, c);
    }
    key(&mut a, KeyCode::Enter);
    let s = crate::support::screen(&a, 160, 48);
    assert!(s.contains("1 shown, 0 live"), "{s}");
}

#[test]
fn a_stale_revision_is_refused_shown_and_reloaded() {
    let (store, snap) = seeded();
    let mut a = app(snap);
    ch(&mut a, 'j');
    // Someone else edits linux after the screen was read.
    let mut p = store.profile("linux").unwrap();
    p.max_capacity = 9;
    store.update_profile(&p, p.revision).unwrap();
    let r = ch(&mut a, '+');
    run(&mut a, &store, r);
    let m = a.message.clone().unwrap();
    assert!(
        m.error && m.text.contains("changed by another edit"),
        "{m:?}"
    );
    assert_eq!(
        store.profile("linux").unwrap().max_capacity,
        9,
        "not overwritten"
    );
    assert_eq!(
        a.snap.profile("linux").unwrap().policy.max_capacity,
        9,
        "reloaded"
    );
    let r = ch(&mut a, '+');
    run(&mut a, &store, r);
    assert_eq!(
        store.profile("linux").unwrap().max_capacity,
        10,
        "the retry works"
    );
}

#[test]
fn drain_asks_and_undrain_does_not() {
    let (store, snap) = seeded();
    let mut a = app(snap);
    assert_eq!(ch(&mut a, 'd'), Request::None);
    assert_eq!(a.confirm, Some(Action::SetDraining(true)));
    let r = key(&mut a, KeyCode::Enter);
    run(&mut a, &store, r);
    assert!(store.host().unwrap().unwrap().draining);
    assert_eq!(ch(&mut a, 'd'), Request::Run(Action::SetDraining(false)));
}

#[test]
fn counts_come_from_open_attempts_and_the_daemon_is_judged_by_its_heartbeat() {
    let (store, snap) = seeded();
    let linux = snap.profile("linux").unwrap();
    assert_eq!(
        (
            linux.counts.not_listening(),
            linux.counts.idle,
            linux.counts.busy
        ),
        (1, 1, 2)
    );
    assert_eq!(snap.live_total(), 5);
    assert_eq!(
        snap.profile("mac").unwrap().mode,
        Some(Reported::Known(TargetMode::Fallback))
    );
    assert!(snap.daemon_alive());
    let later = runner_manager::tui::Snapshot::load(&store, NOW + 60_000).unwrap();
    assert!(
        !later.daemon_alive(),
        "a heartbeat a minute old is a dead daemon"
    );
    let _ = AttemptState::Busy;
}

#[test]
fn a_short_screen_scrolls_the_attempts_to_keep_the_selection_in_view() {
    let (_s, snap) = seeded();
    let mut a = app(snap);
    ch(&mut a, '2');
    // At 80 columns the job may be cut to make room for the outcome: look for its start.
    let top = crate::support::screen(&a, 80, 10);
    assert!(
        top.contains("arm build") && !top.contains("build (ubu"),
        "{top}"
    );
    key(&mut a, KeyCode::End);
    let bottom = crate::support::screen(&a, 80, 10);
    assert!(
        bottom.contains("build (ubu") && !bottom.contains("arm build"),
        "{bottom}"
    );
}

/// Issue 16, item 22: LIMITED BY was cut to `not_reconcili` at 160 columns while
/// PROFILE took 22. Columns are now as wide as what they hold.
#[test]
fn issue_16_limited_by_is_whole_beside_a_long_profile_name() {
    use runner_manager::domain::Limit;
    use runner_manager::store::ProfileStatus;
    let (store, _) = seeded();
    let long = "linux-x64-gpu-large-22";
    crate::support::profile(&store, long, "octo", &["gpu"], 2);
    store
        .put_profile_status(&ProfileStatus {
            profile: long.into(),
            demand: 3,
            limiting: Reported::read("not_reconciling (draining)".into(), Limit::parse),
            last_error: Some("a long last error that takes whatever room is left".into()),
            updated_at: NOW - 2_000,
        })
        .unwrap();
    let a = app(load(&store));
    for (w, h) in [(160, 48), (120, 30), (100, 30)] {
        let s = crate::support::screen(&a, w, h);
        let row = s
            .lines()
            .find(|l| l.contains("linux-x64"))
            .unwrap_or_else(|| panic!("{s}"));
        assert!(
            row.contains("not_reconciling (draining)"),
            "at {w} columns: {row}"
        );
        if w == 160 {
            assert!(row.contains(long), "{row}");
        }
    }
}

/// Every key without a modifier a test presses to find what is bound: printable ASCII
/// and the named keys.
fn every_key() -> Vec<KeyCode> {
    let mut out: Vec<KeyCode> = (' '..='~').map(KeyCode::Char).collect();
    out.extend([
        KeyCode::Enter,
        KeyCode::Esc,
        KeyCode::Tab,
        KeyCode::BackTab,
        KeyCode::Backspace,
        KeyCode::Left,
        KeyCode::Right,
        KeyCode::Up,
        KeyCode::Down,
        KeyCode::Home,
        KeyCode::End,
        KeyCode::PageUp,
        KeyCode::PageDown,
        KeyCode::Delete,
        KeyCode::Insert,
    ]);
    out.extend((1..=12).map(KeyCode::F));
    out
}

/// The keys the help lists now, by name (`1 … 8` is each digit between).
fn listed(a: &App) -> Vec<String> {
    let mut out = Vec::new();
    for (keys, what) in a.help_lines() {
        // A question's answers act only while one is up (tested on their own).
        if what == "confirm or cancel a question" {
            continue;
        }
        let words: Vec<&str> = keys.split(' ').collect();
        for (i, w) in words.iter().enumerate() {
            if *w == "…" {
                let (from, to) = (words[i - 1], words[i + 1]);
                let (from, to) = (from.parse::<u32>().unwrap(), to.parse::<u32>().unwrap());
                out.extend((from + 1..to).map(|d| d.to_string()));
            } else {
                out.push(w.to_string());
            }
        }
    }
    out
}

/// All that a key can change of the app, as text.
fn state(a: &App, r: &Request) -> String {
    format!(
        "{r:?} {:?} {} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?}",
        a.pane,
        a.help,
        a.confirm,
        a.message,
        a.detail,
        a.overview,
        a.attempts,
        a.pictures,
        a.pool,
        a.runners,
        a.activity,
        a.settings,
        a.usage
    )
}

/// The app at each pane, and with an attempt's detail open.
fn places() -> Vec<(String, App)> {
    let (_s, snap) = seeded();
    let mut out = Vec::new();
    for (i, p) in Pane::shown(&snap).iter().enumerate() {
        let mut a = app(snap.clone());
        ch(&mut a, char::from(b'1' + i as u8));
        assert_eq!(a.pane, *p);
        out.push((format!("{p:?}"), a));
    }
    let mut a = app(snap);
    ch(&mut a, '2');
    key(&mut a, KeyCode::Enter);
    assert!(a.detail.is_some(), "Enter opens the selected attempt");
    out.push(("detail".into(), a));
    out
}

#[test]
fn every_key_the_help_lists_is_handled_and_every_handled_key_is_listed() {
    let (mut checked, mut idle) = (0, Vec::new());
    for (place, base) in places() {
        let names = listed(&base);
        let before = state(&base, &Request::None);
        for code in every_key() {
            let name = runner_manager::tui::keys::key_name(code);
            let is_listed = names.contains(&name);
            let mut a = app(base.snap.clone());
            // The same place: the same keys from a fresh app.
            a.pane = base.pane;
            a.overview = base.overview.clone();
            a.attempts = base.attempts.clone();
            a.detail = base.detail.clone();
            let r = a.key(KeyEvent::from(code));
            let changed = state(&a, &r) != before;
            assert!(
                is_listed || !changed,
                "{place}: {name} does something the help does not list"
            );
            checked += usize::from(changed);
            // The reverse: a listed key that did nothing (movements aside, which may
            // stand at the end of a list).
            let moves = runner_manager::tui::keys::binds(runner_manager::tui::keys::MOVES, code);
            if is_listed && !changed && !moves {
                idle.push(format!("{place} {name}"));
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} keys did anything: the scan sees nothing"
    );
    // Each listed key that did nothing here, and why: the pane it switches to is the
    // one shown, or the state it acts on is not there.
    assert_eq!(
        idle,
        [
            "Overview 1",
            "Attempts 2",
            "Attempts Esc (clears the filter: none is set)",
            "Pictures 3",
            "Runners 4",
            "Runners n",
            "Activity 5",
            "Activity a",
            "Activity o (opens the event's attempt: the first has none)",
            "Activity Enter (the same)",
            "Settings 6",
            "Settings e",
            "Usage 7",
        ]
        .map(|s| s.split(" (").next().unwrap().to_string()),
        "listed keys that did nothing"
    );
}
