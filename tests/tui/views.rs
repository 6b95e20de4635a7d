//! The Runners, Activity and Settings panes as state changes: what they list from the
//! seeded store, where Enter and `c` lead, and settings edited through the real store
//! (a refused value writes nothing and stays in the editor with why).

use crate::support::{NOW, app, seeded};
use crossterm::event::{KeyCode, KeyEvent};
use runner_manager::store::Store;
use runner_manager::tui::activity::{self, Level};
use runner_manager::tui::runners::{self, Whose};
use runner_manager::tui::terminal::perform;
use runner_manager::tui::{App, Pane, Request};
use std::path::Path;

fn key(app: &mut App, code: KeyCode) -> Request {
    app.key(KeyEvent::from(code))
}

fn typed(app: &mut App, text: &str) {
    for c in text.chars() {
        key(app, KeyCode::Char(c));
    }
}

fn run(a: &mut App, store: &dyn Store, r: Request) {
    assert!(!perform(a, store, Path::new("/nonexistent"), r, NOW));
}

#[test]
fn runners_lists_githubs_runners_ours_first_and_opens_ours() {
    let (_s, snap) = seeded();
    let rows = runners::rows(&snap);
    let got: Vec<(&str, Whose, &str)> = rows
        .iter()
        .map(|r| (r.name.as_str(), r.whose, r.github().word()))
        .collect();
    // Issue 38: the list is a minute old at worst, the attempts are live: ours that
    // it does not have yet (5, 7 and arm's 8) are shown beside it, not left out.
    assert_eq!(
        got,
        [
            ("rm-0123abcd-4", Whose::Ours(4), "busy"),
            ("rm-0123abcd-5", Whose::Ours(5), runners::NOT_LISTED),
            ("rm-0123abcd-6", Whose::Ours(6), "idle"),
            ("rm-0123abcd-7", Whose::Ours(7), runners::NOT_LISTED),
            ("rm-0123abcd-8", Whose::Ours(8), runners::NOT_LISTED),
            ("rm-0123abcd-99", Whose::Ours(99), "offline"),
            ("rm-deadbeef-12", Whose::OtherHost, "busy"),
            ("build-box-1", Whose::Foreign, "offline"),
            ("gpu-rig", Whose::Foreign, "idle"),
        ]
    );
    assert_eq!(
        runners::freshness(&snap),
        "as GitHub listed them 40s ago (acme not yet)"
    );
    assert_eq!(
        runners::busy(&snap, &rows),
        4,
        "4, 5 and 8 ours, and another host's"
    );
    // Each column says one thing: whose, the attempt, its state, GitHub's word.
    let drawn = crate::support::screen(
        &{
            let mut a = app(snap.clone());
            key(&mut a, KeyCode::Char('n'));
            a
        },
        160,
        48,
    );
    let line = |name: &str| {
        let l = drawn.lines().find(|l| l.contains(name)).unwrap();
        l.split_whitespace().map(String::from).collect::<Vec<_>>()
    };
    assert_eq!(line("rm-0123abcd-4")[2..6], ["ours", "#4", "busy", "busy"]);
    assert_eq!(
        line("rm-0123abcd-7")[2..7],
        ["ours", "#7", "starting", "not", "listed"]
    );
    assert_eq!(line("rm-deadbeef-12")[2..6], ["other", "host", "-", "-"]);
    assert!(
        drawn.contains(
            " Runners as GitHub listed them 40s ago (acme not yet): 6 listed + 3 of ours \
             not yet, 4 busy "
        ),
        "{drawn}"
    );
    let mut a = app(snap);
    key(&mut a, KeyCode::Char('n'));
    assert_eq!(a.pane, Pane::Runners);
    assert_eq!(
        key(&mut a, KeyCode::Char('c')),
        Request::Copy("rm-0123abcd-4".into())
    );
    // Enter (or o) on ours opens its attempt.
    assert_eq!(key(&mut a, KeyCode::Char('o')), Request::LoadLog(4));
    key(&mut a, KeyCode::Esc);
    // No attempt 99 in the store, and a foreign runner has none: Enter stays put.
    for _ in 0..5 {
        key(&mut a, KeyCode::Char('j'));
    }
    assert_eq!(
        a.runners.selected,
        Some(("octo".into(), "rm-0123abcd-99".into()))
    );
    assert_eq!(key(&mut a, KeyCode::Enter), Request::None);
    assert!(a.detail.is_none());
    key(&mut a, KeyCode::End);
    assert_eq!(a.runners.selected, Some(("octo".into(), "gpu-rig".into())));
}

#[test]
fn activity_puts_standing_errors_first_each_with_its_fix() {
    let (_s, snap) = seeded();
    let ev = activity::events(&snap);
    let first = &ev[0];
    assert_eq!((first.at, first.level), (None, Level::Error));
    let acme = ev
        .iter()
        .find(|e| e.subject == "target acme")
        .expect("acme's last error");
    assert_eq!(
        acme.remedy.as_deref(),
        Some("runner-manager target check acme")
    );
    // mac's scale set session is another owner's: a warning, with where to look.
    assert!(
        ev.iter().any(|e| e.subject == "profile mac"
            && e.level == Level::Warn
            && e.text.contains("conflict")),
        "{ev:?}"
    );
    // Every error and warning names its fix; news does not.
    for e in &ev {
        assert_eq!(e.remedy.is_some(), e.level != Level::Info, "{e:?}");
    }
    // Events are newest first after the standing conditions.
    let times: Vec<i64> = ev.iter().filter_map(|e| e.at).collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "{times:?}");
    let failed = ev
        .iter()
        .find(|e| e.subject == "#2 linux" && e.level == Level::Error)
        .expect("attempt 2 failed");
    assert!(
        failed
            .remedy
            .as_ref()
            .unwrap()
            .contains("bootstrap_timeout")
    );

    let mut a = app(snap);
    key(&mut a, KeyCode::Char('a'));
    assert_eq!(a.pane, Pane::Activity);
    let all = a.activity.shown(&a.snap).len();
    key(&mut a, KeyCode::Char('!'));
    let problems = a.activity.shown(&a.snap);
    assert!(problems.len() < all && problems.iter().all(|e| e.level != Level::Info));
    assert_eq!(
        key(&mut a, KeyCode::Char('c')),
        Request::Copy(problems[0].remedy.clone().unwrap())
    );
}

#[test]
fn a_profile_setting_is_edited_in_place_and_a_bad_value_writes_nothing() {
    let (store, snap) = seeded();
    let mut a = app(snap);
    // e on the selected profile (linux) opens its settings.
    key(&mut a, KeyCode::Char('e'));
    assert_eq!(a.pane, Pane::Settings);
    let max_row = runner_manager::tui::settings::settings(&a.snap)
        .iter()
        .position(|s| s.key == "max" && s.scope.word() == "profile linux")
        .unwrap();
    while a.settings.index < max_row {
        key(&mut a, KeyCode::Char('j'));
    }
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.settings.edit.as_ref().unwrap().input, "4");
    // q, n and digits are typed into the value, not taken as keys.
    key(&mut a, KeyCode::Backspace);
    typed(&mut a, "q");
    let r = key(&mut a, KeyCode::Enter);
    run(&mut a, &store, r);
    let e = a.settings.edit.as_ref().expect("refused: the editor stays");
    assert!(e.error.as_ref().unwrap().contains("max"), "{e:?}");
    assert_eq!(
        store.profile("linux").unwrap().max_capacity,
        4,
        "nothing written"
    );
    let drawn = crate::support::screen(&a, 100, 30);
    assert!(drawn.contains("refused, nothing written"), "{drawn}");

    key(&mut a, KeyCode::Backspace);
    typed(&mut a, "6");
    let r = key(&mut a, KeyCode::Enter);
    run(&mut a, &store, r);
    assert_eq!(a.settings.edit, None);
    assert_eq!(store.profile("linux").unwrap().max_capacity, 6);
    assert!(!a.message.as_ref().unwrap().error);
    // Another edit meanwhile: refused as stale, the editor then shows the value now
    // and its revision, and Enter again sets it knowingly.
    key(&mut a, KeyCode::Enter);
    key(&mut a, KeyCode::Backspace);
    typed(&mut a, "5");
    let mut p = store.profile("linux").unwrap();
    p.max_capacity = 3;
    store.update_profile(&p, p.revision).unwrap();
    let r = key(&mut a, KeyCode::Enter);
    run(&mut a, &store, r);
    let e = a.settings.edit.as_ref().expect("stale: the editor stays");
    assert!(e.error.as_ref().unwrap().contains("another edit"), "{e:?}");
    assert_eq!((e.setting.value.as_str(), e.input.as_str()), ("3", "5"));
    let r = key(&mut a, KeyCode::Enter);
    run(&mut a, &store, r);
    assert_eq!(a.settings.edit, None);
    assert_eq!(store.profile("linux").unwrap().max_capacity, 5);
    // Esc leaves an edit without writing.
    key(&mut a, KeyCode::Enter);
    typed(&mut a, "9");
    key(&mut a, KeyCode::Esc);
    assert_eq!(a.settings.edit, None);
    assert_eq!(store.profile("linux").unwrap().max_capacity, 5);
}

#[test]
fn a_host_setting_goes_through_host_sets_checks() {
    let (store, snap) = seeded();
    let mut a = app(snap);
    key(&mut a, KeyCode::Char('6'));
    assert_eq!(a.pane, Pane::Settings);
    assert_eq!(
        key(&mut a, KeyCode::Char('c')),
        Request::Copy("runner-manager host set capacity=8".into())
    );
    key(&mut a, KeyCode::Enter);
    key(&mut a, KeyCode::Backspace);
    typed(&mut a, "0");
    let r = key(&mut a, KeyCode::Enter);
    run(&mut a, &store, r);
    assert!(a.settings.edit.as_ref().unwrap().error.is_some());
    assert_eq!(store.host().unwrap().unwrap().capacity, 8);
    key(&mut a, KeyCode::Backspace);
    typed(&mut a, "12");
    let r = key(&mut a, KeyCode::Enter);
    run(&mut a, &store, r);
    assert_eq!(a.settings.edit, None);
    assert_eq!(store.host().unwrap().unwrap().capacity, 12);
    // isolation=uids without runner_uids: refused as host set refuses it.
    key(&mut a, KeyCode::Char('j'));
    key(&mut a, KeyCode::Char('j'));
    key(&mut a, KeyCode::Enter);
    for _ in 0..10 {
        key(&mut a, KeyCode::Backspace);
    }
    typed(&mut a, "uids");
    let r = key(&mut a, KeyCode::Enter);
    run(&mut a, &store, r);
    let why = a.settings.edit.as_ref().unwrap().error.clone().unwrap();
    assert!(why.contains("runner_uids"), "{why}");
}

#[test]
fn c_copies_the_selected_attempt_and_in_the_detail_its_log_path() {
    let (_s, snap) = seeded();
    let mut a = app(snap);
    key(&mut a, KeyCode::Char('2'));
    let id = a.attempts.selected.unwrap();
    assert_eq!(
        key(&mut a, KeyCode::Char('c')),
        Request::Copy(id.to_string())
    );
    key(&mut a, KeyCode::Enter);
    assert_eq!(key(&mut a, KeyCode::Char('c')), Request::CopyLogPath(id));
    let osc = runner_manager::tui::terminal::osc52("rm-0123abcd-4");
    assert_eq!(osc, "\x1b]52;c;cm0tMDEyM2FiY2QtNA==\x07");
}

#[test]
fn a_click_selects_the_row_under_it_in_the_overview_and_the_attempts() {
    use crossterm::event::{KeyModifiers, MouseButton, MouseEvent, MouseEventKind};
    let (_s, snap) = seeded();
    let mut a = app(snap);
    let area = ratatui::layout::Rect::new(0, 0, 80, 24);
    let click = |row| MouseEvent {
        kind: MouseEventKind::Down(MouseButton::Left),
        column: 5,
        row,
        modifiers: KeyModifiers::NONE,
    };
    // Where the frame drew each profile's row, a click selects that profile.
    let drawn = crate::support::screen(&a, 80, 24);
    for name in ["mac", "arm", "linux"] {
        let row = drawn
            .lines()
            .position(|l| l.starts_with(&format!("│{name} ")))
            .unwrap();
        a.mouse(click(row as u16), area);
        assert_eq!(a.overview.selected.as_deref(), Some(name), "{drawn}");
    }
    // A click on the header or a border selects nothing new.
    a.mouse(click(3), area);
    assert_eq!(a.overview.selected.as_deref(), Some("linux"));
    key(&mut a, KeyCode::Char('2'));
    let drawn = crate::support::screen(&a, 80, 24);
    let row = drawn.lines().position(|l| l.starts_with("│3 ")).unwrap();
    a.mouse(click(row as u16), area);
    assert_eq!(a.attempts.selected, Some(3));
}

/// The Attempts pane in view, over a store with one busy attempt whose job is `job`.
fn attempts_pane_with_job(job: &str) -> App {
    use runner_manager::domain::AttemptState;
    let store = runner_manager::store::SqliteStore::open_in_memory().unwrap();
    crate::support::seed(&store);
    crate::support::attempt(
        &store,
        "linux",
        Some(job),
        NOW - 60_000,
        &[
            AttemptState::Starting,
            AttemptState::Idle,
            AttemptState::Busy,
        ],
        None,
        None,
    );
    let mut a = app(crate::support::load(&store));
    a.pane = Pane::Attempts;
    a
}

/// A job named with a right-to-left override and an escape sequence (a job's name is
/// whatever its workflow says) reaches no cell of the screen as it is: `top` draws the
/// rest of its name, and nothing it holds acts on the terminal (issue 33).
#[test]
fn a_hostile_job_name_reaches_no_cell_of_the_screen() {
    let a = attempts_pane_with_job("build\u{202e}exe.\u{1b}[2Jtxt");
    let buf = crate::support::render(&a, 160, 48);
    let hazards: Vec<(u16, u16, String)> = buf
        .content
        .iter()
        .enumerate()
        .filter(|(_, c)| c.symbol().chars().any(runner_manager::printable::is_hazard))
        .map(|(i, c)| {
            (
                (i % 160) as u16,
                (i / 160) as u16,
                c.symbol().escape_unicode().to_string(),
            )
        })
        .collect();
    assert!(hazards.is_empty(), "{hazards:?}");
    // Shown escaped, as `attempts` prints it (issue 48).
    let screen = crate::support::text(&buf);
    assert!(
        screen.contains("build\\u{202e}exe.\\u{1b}[2Jtxt"),
        "{screen}"
    );
}

/// Issue 48: a job named with a line break was drawn with the break dropped
/// (`buildFAKE`), unlike `attempts`, which prints `build\u{a}FAKE`. `top` shows the
/// same text, in the Attempts pane and the attempt's detail.
#[test]
fn a_job_name_with_a_line_break_is_drawn_escaped() {
    let mut a = attempts_pane_with_job("build\nFAKE\r");
    let screen = crate::support::text(&crate::support::render(&a, 160, 48));
    assert!(screen.contains("build\\u{a}FAKE\\u{d}"), "{screen}");
    key(&mut a, KeyCode::Enter);
    let screen = crate::support::text(&crate::support::render(&a, 160, 48));
    assert!(screen.contains("build\\u{a}FAKE\\u{d}"), "{screen}");
}

/// Issue 38: a lost coordinator link was hidden behind the targets' mode. The Host
/// box says the link's state: up for how long, or down for how long and why.
#[test]
fn the_host_box_shows_the_coordinator_links_state() {
    use runner_manager::store::daemon_facts::LinkSeen;
    let (store, _) = seeded();
    let mut h = store.host_or_create().unwrap();
    h.coordinator = Some("wss://coord.example:7700".into());
    store.update_host(&h).unwrap();
    let seen = |up: bool, since: i64, error: Option<&str>| LinkSeen {
        url: "wss://coord.example:7700".into(),
        up,
        since,
        last_error: error.map(String::from),
        last_error_at: error.map(|_| since),
    };
    let host_box = |store: &dyn Store| {
        let s = crate::support::screen(&app(crate::support::load(store)), 140, 40);
        s.lines()
            .find(|l| l.contains("capacity"))
            .unwrap_or_default()
            .to_string()
    };
    assert!(host_box(&store).contains("link not reported yet"));
    seen(
        false,
        NOW - 125_000,
        Some("cannot connect: connection refused"),
    )
    .write(&store)
    .unwrap();
    let line = host_box(&store);
    assert!(
        line.contains("link DOWN 2m05s: cannot connect: connection refused"),
        "{line}"
    );
    seen(
        true,
        NOW - 30_000,
        Some("cannot connect: connection refused"),
    )
    .write(&store)
    .unwrap();
    let line = host_box(&store);
    assert!(
        line.contains("link up 30s") && !line.contains("DOWN"),
        "{line}"
    );
}

/// Issue 38, "Copying": a command copied from the demo's `top` edited
/// /var/lib/runner-manager. A command copied from a state directory that is not the
/// default names it; a name (a profile's, a runner's) is copied as it is.
#[test]
fn a_copied_command_names_a_state_dir_that_is_not_the_default() {
    use runner_manager::tui::app::{shell_quote, state_dir_arg, with_state_dir};
    let demo = Path::new("/tmp/runner-manager-demo-1/");
    let default = Path::new("/var/lib/runner-manager");
    assert_eq!(state_dir_arg(default, Some(default)), None);
    assert_eq!(
        state_dir_arg(Path::new("/var/lib/runner-manager/"), Some(default)),
        None,
        "the same directory, however written"
    );
    assert_eq!(
        state_dir_arg(demo, Some(default)).as_deref(),
        Some("/tmp/runner-manager-demo-1")
    );
    assert_eq!(
        state_dir_arg(demo, None).as_deref(),
        Some("/tmp/runner-manager-demo-1")
    );
    let relative = state_dir_arg(Path::new("demo-state"), Some(default)).unwrap();
    assert!(relative.starts_with('/'), "pasted elsewhere: {relative}");
    assert_eq!(shell_quote("/tmp/my dir/it's"), r"'/tmp/my dir/it'\''s'");
    assert_eq!(
        with_state_dir("runner-manager host set capacity=4", Some("/d")),
        "runner-manager --state-dir /d host set capacity=4"
    );
    assert_eq!(with_state_dir("linux", Some("/d")), "linux");

    // Through the keys: Settings' `c` and Activity's remedy carry it; a profile's
    // name on the Overview does not.
    let (_s, snap) = seeded();
    let mut a = app(snap).with_state_dir_arg(Some("/tmp/demo".into()));
    assert_eq!(key(&mut a, KeyCode::Char('c')), Request::Copy("arm".into()));
    key(&mut a, KeyCode::Char('e'));
    assert_eq!(a.pane, Pane::Settings);
    let Request::Copy(cmd) = key(&mut a, KeyCode::Char('c')) else {
        panic!("c copies the setting's command");
    };
    assert!(
        cmd.starts_with("runner-manager --state-dir /tmp/demo profile set arm "),
        "{cmd}"
    );
    key(&mut a, KeyCode::Char('a'));
    key(&mut a, KeyCode::Char('!'));
    let Request::Copy(fix) = key(&mut a, KeyCode::Char('c')) else {
        panic!("c copies the remedy");
    };
    assert!(
        fix.starts_with("runner-manager --state-dir /tmp/demo "),
        "{fix}"
    );
    // Without one (the default directory), as before.
    let (_s, snap) = seeded();
    let mut a = app(snap);
    key(&mut a, KeyCode::Char('e'));
    let Request::Copy(cmd) = key(&mut a, KeyCode::Char('c')) else {
        panic!("c copies the setting's command");
    };
    assert!(cmd.starts_with("runner-manager profile set arm "), "{cmd}");
}

/// Issue 38, "Small things": LABELS was blank for a profile whose labels are all
/// defaults (the demo's `linux`), the detail read `labels + defaults`, and after a
/// drained demo LIMITED BY still said `draining` with no daemon running.
#[test]
fn labels_are_shown_whole_and_a_stopped_daemon_limits_every_profile() {
    use runner_manager::tui::overview::{DAEMON_STOPPED, labels_shown};
    let (_s, mut snap) = seeded();
    let linux = snap.profiles.iter_mut().find(|p| p.policy.name == "linux");
    let linux = linux.unwrap();
    linux.policy.labels = vec!["self-hosted".into(), "Linux".into(), "X64".into()];
    linux.user_labels = vec![];
    assert_eq!(labels_shown(linux), "self-hosted,Linux,X64");
    let arm = snap.profile("arm").unwrap();
    assert_eq!(
        labels_shown(arm),
        "arm64,big,self-hosted,Linux,X64",
        "the user's first: what a narrow column keeps"
    );
    // The daemon stopped in a drain: what it last wrote no longer holds.
    for p in snap.profiles.iter_mut() {
        if let Some(st) = p.status.as_mut() {
            st.limiting = runner_manager::domain::Limit::NotReconciling(
                runner_manager::domain::NotReconciling::Draining,
            )
            .into();
        }
    }
    snap.heartbeat.as_mut().unwrap().heartbeat_at = NOW - 600_000;
    let mut a = app(snap);
    key(&mut a, KeyCode::Down);
    let drawn = crate::support::screen(&a, 160, 48);
    assert!(drawn.contains("self-hosted,Linux,X64"), "{drawn}");
    assert!(
        drawn.contains("labels self-hosted,Linux,X64  min"),
        "the detail shows the labels: {drawn}"
    );
    assert!(!drawn.contains("draining"), "{drawn}");
    assert_eq!(drawn.matches(DAEMON_STOPPED).count(), 3, "{drawn}");
}

/// Issue 38, "Charts": the Overview's chart had no legend at 120 and 160 columns, its
/// legend covered the newest points at 250x70, and its y axis was labelled only at 0
/// and the top. The legend is now the bottom border's title at every size, and the
/// axis has a middle label.
#[test]
fn the_overview_chart_has_its_legend_below_the_plot_and_a_middle_label() {
    let (_s, snap) = seeded();
    let a = app(snap);
    for (w, h) in [(120, 40), (160, 48), (250, 70)] {
        let drawn = crate::support::screen(&a, w, h);
        let legend = drawn
            .lines()
            .find(|l| l.contains("── queued jobs"))
            .unwrap_or_else(|| panic!("no legend at {w}x{h}:\n{drawn}"));
        assert!(
            legend.contains("└ ── queued jobs 1  ── live runners 1 ─"),
            "on the bottom border at {w}x{h}: {legend}"
        );
        for label in ["2  │", "1  │", "0  │"] {
            assert!(drawn.contains(label), "{label:?} at {w}x{h}:\n{drawn}");
        }
    }
}

/// An empty Runners pane says why across its width (it was cut to `no lis` in the
/// first column), and does not call a list GitHub gave "no list yet".
#[test]
fn an_empty_runners_pane_says_whether_github_listed_none_or_nothing_was_read() {
    let (_s, mut snap) = seeded();
    snap.attempts.clear();
    for t in snap.targets.iter_mut() {
        if let Some(seen) = t.runners.as_mut() {
            seen.runners.clear();
        }
    }
    let mut a = app(snap.clone());
    key(&mut a, KeyCode::Char('n'));
    let drawn = crate::support::screen(&a, 80, 24);
    assert!(
        drawn.contains("GitHub listed no runners, and no attempt of ours is live"),
        "{drawn}"
    );
    for t in snap.targets.iter_mut() {
        t.runners = None;
    }
    let mut a = app(snap);
    key(&mut a, KeyCode::Char('n'));
    let drawn = crate::support::screen(&a, 80, 24);
    assert!(drawn.contains("no list yet: the daemon lists"), "{drawn}");
    assert!(
        drawn.contains("Runners not listed by GitHub yet: 0 listed"),
        "{drawn}"
    );
}
