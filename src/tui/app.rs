//! What the operator is looking at, and keys as state changes: the pane, each view's
//! selection, the filter, the overlays. Pure: a key changes the `App` and may return a
//! [`Request`] for the loop (quit, run an action, reload, read a log, copy); nothing
//! here touches the store or the terminal, so every key and click is tested as a state
//! change.

use super::actions::{Action, Done};
use super::activity::ActivityView;
use super::attempts::AttemptsView;
use super::detail::DetailView;
use super::keys::{self, Binding, Move};
use super::model::Snapshot;
use super::overview::OverviewView;
use super::pictures::PicturesView;
use super::pool::PoolView;
use super::runners::RunnersView;
use super::settings::SettingsView;
use super::theme::Theme;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind};
use ratatui::Frame;
use ratatui::layout::Rect;

/// The panes Tab cycles through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pane {
    Overview,
    Attempts,
    Pictures,
    /// Every runner GitHub lists for the targets, ours apart from the others.
    Runners,
    /// Events and errors, each error with its remedy.
    Activity,
    /// The host's and the profiles' settings, edited in place.
    Settings,
    /// Who used the host: the daily usage roll-up by repository and day.
    Usage,
    /// A coordinator's hosts and leases: only while the store has coordinator hosts.
    Pool,
}

impl Pane {
    pub const ALL: [Pane; 8] = [
        Pane::Overview,
        Pane::Attempts,
        Pane::Pictures,
        Pane::Runners,
        Pane::Activity,
        Pane::Settings,
        Pane::Usage,
        Pane::Pool,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Pane::Overview => "Overview",
            Pane::Attempts => "Attempts",
            Pane::Pictures => "Pictures",
            Pane::Runners => "Runners",
            Pane::Activity => "Activity",
            Pane::Settings => "Settings",
            Pane::Usage => "Usage",
            Pane::Pool => "Pool",
        }
    }

    /// The panes shown for this snapshot: Pool only when it has a pool.
    pub fn shown(snap: &Snapshot) -> &'static [Pane] {
        if snap.pool.is_some() {
            &Pane::ALL
        } else {
            &Pane::ALL[..7]
        }
    }

    fn step(self, by: isize, shown: &[Pane]) -> Pane {
        let i = shown.iter().position(|p| *p == self).unwrap_or(0) as isize;
        shown[(i + by).rem_euclid(shown.len() as isize) as usize]
    }
}

/// The keys that mean the same on every pane (under no overlay or editor).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Global {
    Next,
    Prev,
    Pane,
    Runners,
    Activity,
    Settings,
    Copy,
    Filter,
    Undo,
    Drain,
    Reload,
    Help,
    Quit,
}

const DIGITS: &[KeyCode] = &[
    KeyCode::Char('1'),
    KeyCode::Char('2'),
    KeyCode::Char('3'),
    KeyCode::Char('4'),
    KeyCode::Char('5'),
    KeyCode::Char('6'),
    KeyCode::Char('7'),
    KeyCode::Char('8'),
];

/// What the help says of the pane numbers; without a pool it says `1 … 7` instead.
pub const PANES_HELP: &str = "the panes, as the tabs number them (8: Pool, a coordinator's)";

pub const GLOBAL: &[Binding<Global>] = &[
    Binding {
        keys: &[KeyCode::Tab, KeyCode::Char('l'), KeyCode::Right],
        cmd: Global::Next,
        help: "next pane (in detail, l: the whole log)",
    },
    Binding {
        keys: &[KeyCode::BackTab, KeyCode::Char('h'), KeyCode::Left],
        cmd: Global::Prev,
        help: "previous pane (in detail: back)",
    },
    Binding {
        keys: DIGITS,
        cmd: Global::Pane,
        help: PANES_HELP,
    },
    Binding {
        keys: &[KeyCode::Char('n')],
        cmd: Global::Runners,
        help: "Runners, Activity, Settings (e: the profile's)",
    },
    Binding {
        keys: &[KeyCode::Char('a')],
        cmd: Global::Activity,
        help: "Runners, Activity, Settings (e: the profile's)",
    },
    Binding {
        keys: &[KeyCode::Char('e')],
        cmd: Global::Settings,
        help: "Runners, Activity, Settings (e: the profile's)",
    },
    Binding {
        keys: &[KeyCode::Char('c')],
        cmd: Global::Copy,
        help: "copy: attempt id, log path, runner, fix, set command",
    },
    Binding {
        keys: &[KeyCode::Char('/')],
        cmd: Global::Filter,
        help: "filter attempts or pool (Enter keeps, Esc clears)",
    },
    Binding {
        keys: &[KeyCode::Char('u')],
        cmd: Global::Undo,
        help: "undo the last max step",
    },
    Binding {
        keys: &[KeyCode::Char('d')],
        cmd: Global::Drain,
        help: "drain the host, or stop draining (asks)",
    },
    Binding {
        keys: &[KeyCode::Char('r'), KeyCode::F(5)],
        cmd: Global::Reload,
        help: "reload now",
    },
    Binding {
        keys: &[KeyCode::Char('?')],
        cmd: Global::Help,
        help: "this help (Esc or ? closes it)",
    },
    Binding {
        keys: &[KeyCode::Char('q')],
        cmd: Global::Quit,
        help: "quit (Ctrl-C too)",
    },
];

/// A question's answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Yes,
    No,
}

pub const CONFIRM: &[Binding<Answer>] = &[
    Binding {
        keys: &[KeyCode::Char('y'), KeyCode::Char('Y'), KeyCode::Enter],
        cmd: Answer::Yes,
        help: "confirm or cancel a question",
    },
    Binding {
        keys: &[
            KeyCode::Char('n'),
            KeyCode::Char('N'),
            KeyCode::Esc,
            KeyCode::Char('q'),
        ],
        cmd: Answer::No,
        help: "confirm or cancel a question",
    },
];

/// The keys that close the help (it keeps every other).
const HELP_CLOSE: &[Binding<()>] = &[Binding {
    keys: &[
        KeyCode::Esc,
        KeyCode::Char('?'),
        KeyCode::Char('q'),
        KeyCode::Enter,
    ],
    cmd: (),
    help: "close this help",
}];

/// What the loop must do after a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    None,
    Quit,
    /// Ctrl-C: quit, and tell the caller the user interrupted (the demo exits 130).
    Interrupt,
    /// Carry out this action (already confirmed if it needed to be), then reload.
    Run(Action),
    /// Read the store again now.
    Reload,
    /// Read this attempt's runner log (the detail view just opened).
    LoadLog(i64),
    /// Read this attempt's whole runner log, with a bound, for the log view.
    LoadFullLog(i64),
    /// Put this text on the terminal's clipboard (OSC 52).
    Copy(String),
    /// Put this attempt's runner log path on the clipboard (the loop knows the
    /// state directory).
    CopyLogPath(i64),
}

/// `runner-manager …` with `--state-dir DIR` put after the program's name when `arg`
/// names one; other text (a profile's or a runner's name) as it is.
pub fn with_state_dir(text: &str, arg: Option<&str>) -> String {
    match (text.strip_prefix("runner-manager "), arg) {
        (Some(rest), Some(dir)) => format!("runner-manager --state-dir {dir} {rest}"),
        _ => text.to_string(),
    }
}

/// The `--state-dir` a copied command needs to reach `dir`: `None` when `dir` is
/// `default` (a plain shell of this user reaches it without one), else the absolute
/// path, shell-quoted, since it may be pasted in another directory.
pub fn state_dir_arg(dir: &std::path::Path, default: Option<&std::path::Path>) -> Option<String> {
    let abs: std::path::PathBuf = std::path::absolute(dir)
        .unwrap_or_else(|_| dir.to_path_buf())
        .components()
        .collect();
    let same = |d: &std::path::Path| {
        std::path::absolute(d).is_ok_and(|d| d.components().eq(abs.components()))
    };
    if default.is_some_and(same) {
        return None;
    }
    Some(shell_quote(&abs.to_string_lossy()))
}

/// A word the shell reads back as `s`: as it is when only safe characters, else in
/// single quotes.
pub fn shell_quote(s: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "/._-+:@%,=".contains(c);
    if !s.is_empty() && s.chars().all(safe) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// What a view asks of the app when a key means more than its own state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// An action, asked about first if disruptive.
    Act(Action),
    OpenDetail(i64),
    /// Open this attempt's whole log.
    OpenLog(i64),
    /// Show this profile's attempts.
    ShowProfile(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handled {
    No,
    Yes,
    Then(Effect),
}

/// A view: keys change its own state (`event`); drawing only reads (`draw`).
pub trait Component {
    fn event(&mut self, key: KeyEvent, snap: &Snapshot) -> Handled;
    /// The view's own keys as the help lists them, from the table its `event` reads
    /// ([`keys`]); the movement keys ([`keys::MOVES`]) are every view's.
    fn keys(&self) -> Vec<(String, &'static str)> {
        Vec::new()
    }
    fn draw(&self, f: &mut Frame, area: Rect, cx: &Ctx);
}

/// What every view draws from.
pub struct Ctx<'a> {
    pub snap: &'a Snapshot,
    pub theme: Theme,
}

/// The status line's message after an action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub text: String,
    pub error: bool,
}

pub struct App {
    pub snap: Snapshot,
    pub pane: Pane,
    pub overview: OverviewView,
    pub attempts: AttemptsView,
    pub pictures: PicturesView,
    pub pool: PoolView,
    pub runners: RunnersView,
    pub activity: ActivityView,
    pub settings: SettingsView,
    pub usage: super::usage::UsageView,
    pub detail: Option<DetailView>,
    pub help: bool,
    /// A disruptive action waiting for y or n.
    pub confirm: Option<Action>,
    pub message: Option<Message>,
    /// What `u` puts back: the last max step, until another action runs.
    pub undo: Option<Action>,
    pub theme: Theme,
    /// `--state-dir DIR`, shell-quoted, when `top` reads a state directory other
    /// than the default: every command `c` copies carries it, so a command copied
    /// from the demo edits the demo's store, not `/var/lib/runner-manager` (issue 38).
    pub state_dir_arg: Option<String>,
}

impl App {
    pub fn new(snap: Snapshot, theme: Theme) -> App {
        // A coordinator's store (a pool, and no profile of its own) opens on its pool:
        // its Overview would say only that nothing is configured.
        let pane = if snap.pool.is_some() && snap.profiles.is_empty() {
            Pane::Pool
        } else {
            Pane::Overview
        };
        let mut app = App {
            snap,
            pane,
            overview: OverviewView::default(),
            attempts: AttemptsView::default(),
            pictures: PicturesView::default(),
            pool: PoolView::default(),
            runners: RunnersView::default(),
            activity: ActivityView::default(),
            settings: SettingsView::default(),
            usage: super::usage::UsageView::default(),
            detail: None,
            help: false,
            confirm: None,
            message: None,
            undo: None,
            theme,
            state_dir_arg: None,
        };
        app.follow();
        app
    }

    /// Takes a fresh snapshot; selections follow their profile and attempt by name
    /// and id, not by row number.
    pub fn set_snapshot(&mut self, snap: Snapshot) {
        self.snap = snap;
        self.follow();
    }

    /// Moves the clock without reloading (nothing changed in the store).
    pub fn set_now(&mut self, now: crate::timefmt::Millis) {
        self.snap.now = now;
    }

    fn follow(&mut self) {
        // The pool went away (the coordinator's hosts were removed): back to Overview.
        if !Pane::shown(&self.snap).contains(&self.pane) {
            self.pane = Pane::Overview;
        }
        self.overview.follow(&self.snap);
        self.attempts.follow(&self.snap);
        self.runners.follow(&self.snap);
        self.settings.follow(&self.snap);
    }

    pub fn set_log(&mut self, id: i64, lines: Vec<String>) {
        if let Some(d) = self.detail.as_mut().filter(|d| d.id == id) {
            d.log = lines;
        }
    }

    /// The live meter's points for the open detail.
    pub fn set_points(&mut self, id: i64, points: Vec<crate::meter::MeterPoint>) {
        if let Some(d) = self.detail.as_mut().filter(|d| d.id == id) {
            d.points = points;
        }
    }

    /// Opens the whole-log view over the open detail.
    pub fn set_full_log(&mut self, id: i64, text: super::logfile::LogText) {
        if let Some(d) = self.detail.as_mut().filter(|d| d.id == id) {
            d.full = Some(super::detail::FullLog::new(text));
        }
    }

    pub fn detail_id(&self) -> Option<i64> {
        self.detail.as_ref().map(|d| d.id)
    }

    /// Shows what an action did.
    pub fn done(&mut self, done: Done) {
        self.undo = None;
        // An edit from the Settings editor: refused keeps it open, with why.
        if self.settings.edit.is_some() {
            self.settings.answered(match &done {
                Done::Refused(why) => Some(why.clone()),
                _ => None,
            });
        }
        self.message = Some(match done {
            Done::Ok(text) => Message { text, error: false },
            Done::Undoable(text, undo) => {
                self.undo = Some(undo);
                Message { text, error: false }
            }
            Done::Refused(text) => Message { text, error: true },
        });
    }

    pub fn key(&mut self, key: KeyEvent) -> Request {
        // A message answers the last key; the next one clears it.
        self.message = None;
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            return Request::Interrupt;
        }
        if let Some(r) = self.modal_key(key) {
            return r;
        }
        // `c` copies what the open detail shows before the detail sees a key.
        if keys::find(GLOBAL, &key) == Some(Global::Copy) {
            return self.copy();
        }
        if let Some(r) = self.detail_key(key) {
            return r;
        }
        if let Some(r) = self.global_key(key) {
            return r;
        }
        // Under an open detail the pane's keys would act unseen (and the help lists
        // the detail's, not the pane's).
        if self.detail.is_some() {
            return Request::None;
        }
        let handled = match self.pane {
            Pane::Overview => self.overview.event(key, &self.snap),
            Pane::Attempts => self.attempts.event(key, &self.snap),
            Pane::Pictures => self.pictures.event(key, &self.snap),
            Pane::Runners => self.runners.event(key, &self.snap),
            Pane::Activity => self.activity.event(key, &self.snap),
            Pane::Settings => self.settings.event(key, &self.snap),
            Pane::Usage => self.usage.event(key, &self.snap),
            Pane::Pool => self.pool.event(key, &self.snap),
        };
        match handled {
            Handled::Then(e) => self.effect(e),
            Handled::No | Handled::Yes => Request::None,
        }
    }

    /// What takes every key while it is up: the help overlay, a confirmation, the
    /// attempts filter being typed, the settings editor. `None` when none is up.
    fn modal_key(&mut self, key: KeyEvent) -> Option<Request> {
        if self.help {
            // The overlay keeps every other key, so nothing happens unseen under it.
            if keys::find(HELP_CLOSE, &key).is_some() {
                self.help = false;
            }
            return Some(Request::None);
        }
        if let Some(action) = self.confirm.take() {
            return Some(match keys::find(CONFIRM, &key) {
                Some(Answer::Yes) => Request::Run(action),
                Some(Answer::No) => {
                    self.message = Some(Message {
                        text: "cancelled".into(),
                        error: false,
                    });
                    Request::None
                }
                None => {
                    self.confirm = Some(action);
                    Request::None
                }
            });
        }
        if self.attempts.editing {
            self.attempts.event(key, &self.snap);
            return Some(Request::None);
        }
        if self.pool.editing {
            self.pool.event(key, &self.snap);
            return Some(Request::None);
        }
        // The settings editor takes every key (a value may hold q, n or a digit).
        if self.settings.edit.is_some() {
            return Some(match self.settings.event(key, &self.snap) {
                Handled::Then(e) => self.effect(e),
                _ => Request::None,
            });
        }
        None
    }

    /// The open attempt's detail: its own keys first, then Esc, Left, h or Backspace
    /// closing it. `None` when no detail is open or it leaves the key to the rest.
    fn detail_key(&mut self, key: KeyEvent) -> Option<Request> {
        let d = self.detail.as_mut()?;
        match d.event(key, &self.snap) {
            Handled::No => {}
            Handled::Yes => return Some(Request::None),
            Handled::Then(e) => return Some(self.effect(e)),
        }
        if keys::find(super::detail::KEYS, &key) == Some(super::detail::Cmd::Back) {
            self.detail = None;
            return Some(Request::None);
        }
        None
    }

    /// The keys that mean the same on every pane: quit, help, reload, undo, drain, and
    /// the pane switches. `None` for a key the pane has.
    fn global_key(&mut self, key: KeyEvent) -> Option<Request> {
        Some(match keys::find(GLOBAL, &key)? {
            Global::Quit => Request::Quit,
            Global::Help => {
                self.help = true;
                Request::None
            }
            Global::Reload => Request::Reload,
            Global::Undo => match self.undo.take() {
                Some(a) => Request::Run(a),
                None => {
                    self.message = Some(Message {
                        text: "nothing to undo (u undoes the last max step)".into(),
                        error: true,
                    });
                    Request::None
                }
            },
            Global::Drain => {
                let draining = self.snap.host.as_ref().is_some_and(|h| h.draining);
                self.effect(Effect::Act(Action::SetDraining(!draining)))
            }
            Global::Copy => self.copy(),
            switch => {
                self.switch_key(switch, key);
                Request::None
            }
        })
    }

    /// The keys that switch panes (`n`, `a`, `e`, Tab, Right, l, BackTab, Left, h, 1 to
    /// 8, `/`).
    fn switch_key(&mut self, cmd: Global, key: KeyEvent) {
        match cmd {
            Global::Runners => self.switch(Pane::Runners),
            Global::Activity => self.switch(Pane::Activity),
            Global::Settings => {
                // From a profile (Overview), its settings; else where Settings was.
                if self.pane == Pane::Overview
                    && let Some(name) = self
                        .overview
                        .selected_row(&self.snap)
                        .map(|r| r.policy.name.clone())
                {
                    self.settings.select_profile(&self.snap, &name);
                }
                self.switch(Pane::Settings);
            }
            Global::Next => self.switch(self.pane.step(1, Pane::shown(&self.snap))),
            Global::Prev => self.switch(self.pane.step(-1, Pane::shown(&self.snap))),
            Global::Pane => {
                let KeyCode::Char(c) = key.code else { return };
                match Pane::shown(&self.snap).get((c as usize).wrapping_sub('1' as usize)) {
                    Some(p) => self.switch(*p),
                    // Only 8 can miss: the Pool pane needs a coordinator's hosts.
                    None => {
                        self.message = Some(Message {
                            text: "no Pool here: it shows a coordinator's hosts, and this \
                                   store has none"
                                .into(),
                            error: true,
                        })
                    }
                }
            }
            // On the Pool pane it filters the pool's hosts and jobs.
            Global::Filter if self.pane == Pane::Pool && self.detail.is_none() => {
                self.pool.start_filter();
            }
            Global::Filter => {
                self.switch(Pane::Attempts);
                self.attempts.start_filter();
            }
            Global::Quit
            | Global::Help
            | Global::Reload
            | Global::Undo
            | Global::Drain
            | Global::Copy => {}
        }
    }

    /// Every key the help lists now: the app's, the movements, the open detail's or
    /// else the pane's, and a question's answers; each from the table its dispatch
    /// reads.
    pub fn help_lines(&self) -> Vec<(String, &'static str)> {
        let own = match (&self.detail, self.pane) {
            (Some(d), _) => d.keys(),
            (None, Pane::Overview) => self.overview.keys(),
            (None, Pane::Attempts) => self.attempts.keys(),
            (None, Pane::Pictures) => self.pictures.keys(),
            (None, Pane::Runners) => self.runners.keys(),
            (None, Pane::Activity) => self.activity.keys(),
            (None, Pane::Settings) => self.settings.keys(),
            (None, Pane::Usage) => self.usage.keys(),
            (None, Pane::Pool) => self.pool.keys(),
        };
        let mut out = keys::help_lines(GLOBAL);
        out.extend(keys::help_lines(keys::MOVES));
        out.extend(own);
        out.extend(keys::help_lines(CONFIRM));
        out
    }

    /// `c`: what the selection names, to the clipboard: the open attempt's log path,
    /// the selected attempt's id, runner's name, event's remedy, setting's command.
    fn copy(&mut self) -> Request {
        if let Some(id) = self.detail_id() {
            self.note(format!("copied the log path of attempt {id}"), false);
            return Request::CopyLogPath(id);
        }
        let text = match self.pane {
            Pane::Overview => self
                .overview
                .selected_row(&self.snap)
                .map(|r| r.policy.name.clone()),
            Pane::Attempts => self.attempts.selected.map(|id| id.to_string()),
            Pane::Runners => self.runners.copy_text(),
            Pane::Activity => self.activity.copy_text(&self.snap),
            Pane::Settings => self.settings.copy_text(&self.snap),
            Pane::Pictures | Pane::Usage | Pane::Pool => None,
        };
        match text.map(|t| with_state_dir(&t, self.state_dir_arg.as_deref())) {
            Some(t) => {
                self.note(format!("copied: {t}"), false);
                Request::Copy(t)
            }
            None => {
                self.note("nothing selected to copy here".into(), true);
                Request::None
            }
        }
    }

    /// The state directory every copied command names: `None` for the default one.
    pub fn with_state_dir_arg(mut self, arg: Option<String>) -> App {
        self.state_dir_arg = arg;
        self
    }

    fn note(&mut self, text: String, error: bool) {
        self.message = Some(Message { text, error });
    }

    /// A mouse event over a frame of `area`: a click on a tab opens its pane, a click
    /// on a row selects it, the wheel scrolls as j and k do. Ignored under an overlay
    /// or the settings editor, which wait for keys.
    pub fn mouse(&mut self, ev: MouseEvent, area: Rect) -> Request {
        if self.help || self.confirm.is_some() || self.settings.edit.is_some() {
            return Request::None;
        }
        let step = |code| KeyEvent::new(code, KeyModifiers::NONE);
        match ev.kind {
            MouseEventKind::ScrollDown => self.key(step(KeyCode::Down)),
            MouseEventKind::ScrollUp => self.key(step(KeyCode::Up)),
            MouseEventKind::Down(MouseButton::Left) => {
                let [_, tabs, body, _] = super::ui::areas(area);
                if ev.row == tabs.y {
                    let shown = Pane::shown(&self.snap);
                    let titles: Vec<String> = tab_titles(shown, tabs.width);
                    if let Some(i) = tab_at(&titles, ev.column.saturating_sub(tabs.x)) {
                        self.switch(shown[i]);
                    }
                } else if self.detail.is_none() && ev.row >= body.y && ev.row < body.bottom() {
                    let (row, h, snap) = (ev.row - body.y, body.height, &self.snap);
                    match self.pane {
                        Pane::Attempts => self.attempts.click(row, h, snap),
                        Pane::Runners => self.runners.click(row, h, snap),
                        Pane::Activity => self.activity.click(row, h, snap),
                        Pane::Settings => self.settings.click(row, h, snap),
                        Pane::Overview => self.overview.click(row, h, snap),
                        Pane::Pictures | Pane::Usage | Pane::Pool => {}
                    }
                }
                Request::None
            }
            _ => Request::None,
        }
    }

    fn switch(&mut self, pane: Pane) {
        self.pane = pane;
        self.detail = None;
    }

    fn effect(&mut self, e: Effect) -> Request {
        match e {
            Effect::Act(a) if a.disruptive() => {
                self.confirm = Some(a);
                Request::None
            }
            Effect::Act(a) => Request::Run(a),
            Effect::OpenDetail(id) => {
                self.detail = Some(DetailView::new(id));
                Request::LoadLog(id)
            }
            Effect::OpenLog(id) => Request::LoadFullLog(id),
            Effect::ShowProfile(name) => {
                self.switch(Pane::Attempts);
                self.attempts.set_filter(&name, &self.snap);
                Request::None
            }
        }
    }
}

/// The tabs as the header draws them in `width` columns: `1 Overview`, `2 Attempts`,
/// ... with their keys when they fit, else the bare names (a coordinator's eight tabs
/// at 80 columns).
pub fn tab_titles(shown: &[Pane], width: u16) -> Vec<String> {
    let numbered: Vec<String> = shown
        .iter()
        .enumerate()
        .map(|(i, p)| format!("{} {}", i + 1, p.title()))
        .collect();
    // A space before each title and a divider between them.
    let needs = numbered
        .iter()
        .map(|t| t.chars().count() + 2)
        .sum::<usize>()
        .saturating_sub(1);
    if needs <= width as usize {
        numbered
    } else {
        shown.iter().map(|p| p.title().to_string()).collect()
    }
}

/// Which tab is at column `x` of the tab line (as `ui` draws ratatui's `Tabs`: a space
/// before each title, one divider between).
pub fn tab_at(titles: &[String], x: u16) -> Option<usize> {
    let mut start = 0u16;
    for (i, t) in titles.iter().enumerate() {
        let end = start + t.chars().count() as u16 + 1;
        if x < end {
            return (x >= start).then_some(i);
        }
        start = end + 1;
    }
    None
}

/// A key typed into a list's filter while it is being edited (`/`): characters and
/// Backspace edit it, Ctrl-U clears it as a shell's line kill (no other Ctrl key
/// types), Enter keeps it and Esc clears it; both end the editing.
pub fn type_filter(filter: &mut String, editing: &mut bool, key: KeyEvent) {
    match key.code {
        KeyCode::Char('u') if key.modifiers.contains(KeyModifiers::CONTROL) => filter.clear(),
        KeyCode::Char(_) if key.modifiers.contains(KeyModifiers::CONTROL) => {}
        KeyCode::Char(c) => filter.push(c),
        KeyCode::Backspace => {
            filter.pop();
        }
        KeyCode::Enter => *editing = false,
        KeyCode::Esc => {
            filter.clear();
            *editing = false;
        }
        _ => {}
    }
}

/// Moves an index by `by` within `0..len`, clamped (no wrap: the ends stay put).
pub fn step_index(i: usize, by: isize, len: usize) -> usize {
    if len == 0 {
        return 0;
    }
    (i as isize + by).clamp(0, len as isize - 1) as usize
}

/// The movement keys every list shares ([`keys::MOVES`]): how far a key moves the
/// selection.
pub fn movement(key: &KeyEvent, page: isize) -> Option<isize> {
    Some(match keys::find(keys::MOVES, key)? {
        Move::Down => 1,
        Move::Up => -1,
        Move::PageDown => page,
        Move::PageUp => -page,
        Move::First => isize::MIN / 2,
        Move::Last => isize::MAX / 2,
    })
}
