//! The real terminal: raw mode, the alternate screen and mouse capture, the event
//! loop, the clipboard (OSC 52), and putting the terminal back on every way out (quit,
//! error, panic, SIGTERM/SIGHUP/SIGINT).
//!
//! The loop is synchronous and sleeps in `select!` over two channels: keys from an
//! input thread, and a 1 s `tick` that reloads the store (only when its
//! `data_version` moved) and redraws. Nothing spins.

use super::actions;
use super::app::{App, Request};
use super::detail::LOG_LINES;
use super::model::Snapshot;
use super::theme::Theme;
use super::ui;
use crate::store::{Store, StoreError};
use crate::timefmt::{Millis, now_millis};
use crossbeam_channel::{Receiver, select, tick, unbounded};
use crossterm::event::{self, DisableMouseCapture, EnableMouseCapture, Event, KeyEventKind};
use crossterm::terminal::{EnterAlternateScreen, LeaveAlternateScreen};
use crossterm::{cursor, execute, terminal};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use std::io::{self, IsTerminal, Stdout, Write};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How `top` ended: the user quit (q), or was interrupted (Ctrl-C, or SIGINT, SIGTERM
/// or SIGHUP). The demo exits 130 after an interruption.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    Quit,
    Interrupted,
}

/// How often the views refresh.
pub const REFRESH: Duration = Duration::from_secs(1);

/// How long the input thread waits for a key before looking at its stop flag: the
/// longest quitting can take, and four wake-ups a second while idle.
const INPUT_POLL: Duration = Duration::from_millis(250);

#[derive(Debug)]
pub enum TuiError {
    NotATerminal,
    Terminal(io::Error),
    Store(StoreError),
}

impl std::fmt::Display for TuiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TuiError::NotATerminal => f.write_str(
                "top needs a terminal on stdin and stdout; use 'status' or 'attempts' in scripts",
            ),
            TuiError::Terminal(e) => write!(f, "terminal: {e}"),
            TuiError::Store(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for TuiError {}

impl From<io::Error> for TuiError {
    fn from(e: io::Error) -> TuiError {
        TuiError::Terminal(e)
    }
}

impl From<StoreError> for TuiError {
    fn from(e: StoreError) -> TuiError {
        TuiError::Store(e)
    }
}

/// Puts the terminal back as it was. Safe to call more than once, and from the panic
/// hook: each step is attempted even if one fails.
fn restore() {
    let _ = execute!(io::stdout(), DisableMouseCapture);
    let _ = terminal::disable_raw_mode();
    let _ = execute!(io::stdout(), LeaveAlternateScreen, cursor::Show);
}

/// Raw mode and the alternate screen for as long as it lives; dropping it (normal
/// return, `?` error, unwinding) restores the terminal.
struct Guard;

impl Guard {
    fn enter() -> io::Result<Guard> {
        terminal::enable_raw_mode()?;
        // From here on any failure must restore: the guard exists, so drop does it.
        let g = Guard;
        execute!(
            io::stdout(),
            EnterAlternateScreen,
            cursor::Hide,
            EnableMouseCapture
        )?;
        Ok(g)
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        restore();
    }
}

/// Restores the terminal before the previous hook prints the panic, so the message
/// lands on the normal screen (with `panic = "abort"` nothing unwinds: this is the
/// only chance).
fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore();
        previous(info);
    }));
}

/// Reads terminal events into a channel until `stop` is set or the receiver is gone.
fn spawn_input(
    stop: Arc<AtomicBool>,
) -> io::Result<(Receiver<io::Result<Event>>, std::thread::JoinHandle<()>)> {
    let (tx, rx) = unbounded();
    let handle = std::thread::Builder::new()
        .name("tui-input".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let ev = match event::poll(INPUT_POLL) {
                    Ok(false) => continue,
                    Ok(true) => event::read(),
                    Err(e) => Err(e),
                };
                let failed = ev.is_err();
                if tx.send(ev).is_err() || failed {
                    break;
                }
            }
        })?;
    Ok((rx, handle))
}

/// Runs `top` on an open store until the operator quits or a signal asks to stop.
/// `state_dir` is where the runner logs are (`logs/<id>.log`).
pub fn run(store: &dyn Store, state_dir: &Path) -> Result<Ending, TuiError> {
    if !io::stdout().is_terminal() || !io::stdin().is_terminal() {
        return Err(TuiError::NotATerminal);
    }
    // The coordinator's tables are not behind the `Store` trait: a second connection
    // to the same file reads them (a plain host's store simply has none).
    let coord = crate::store::SqliteStore::open(state_dir).ok();
    // Load before touching the terminal: a store error is then an ordinary message.
    let snap = Snapshot::load(store, now_millis())?.with_pool(coord.as_ref())?;
    let mut app = App::new(snap, Theme::from_env());
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
        signal_hook::consts::SIGINT,
    ] {
        signal_hook::flag::register(sig, Arc::clone(&stop))?;
    }
    install_panic_hook();
    let guard = Guard::enter()?;
    let mut term = Terminal::new(CrosstermBackend::new(io::stdout()))?;
    let (keys, input) = spawn_input(Arc::clone(&stop))?;
    let stores = Stores {
        main: store,
        coord: coord.as_ref(),
    };
    let result = event_loop(&mut term, &mut app, &stores, state_dir, &keys, &stop);
    stop.store(true, Ordering::Relaxed);
    drop(keys);
    let _ = input.join();
    drop(guard);
    result
}

/// The store `top` was given, and a connection to the same file for the
/// coordinator's tables (the Pool pane).
struct Stores<'a> {
    main: &'a dyn Store,
    coord: Option<&'a crate::store::SqliteStore>,
}

fn event_loop(
    term: &mut Terminal<CrosstermBackend<Stdout>>,
    app: &mut App,
    stores: &Stores,
    state_dir: &Path,
    keys: &Receiver<io::Result<Event>>,
    stop: &AtomicBool,
) -> Result<Ending, TuiError> {
    let ticker = tick(REFRESH);
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(Ending::Interrupted);
        }
        term.draw(|f| ui::draw(f, app))?;
        let request = select! {
            recv(keys) -> ev => match ev {
                Ok(Ok(Event::Key(k))) if k.kind == KeyEventKind::Press => app.key(k),
                Ok(Ok(Event::Mouse(m))) => {
                    let size = term.size()?;
                    app.mouse(m, ratatui::layout::Rect::new(0, 0, size.width, size.height))
                }
                // A resize redraws at the new size on the next pass; so does anything else.
                Ok(Ok(_)) => Request::None,
                Ok(Err(e)) => return Err(e.into()),
                // The input thread stopped: a signal set the flag (checked above).
                Err(_) => Request::Interrupt,
            },
            recv(ticker) -> _ => {
                refresh_in(app, stores, state_dir, false, now_millis());
                Request::None
            }
        };
        let ending = match request {
            Request::Interrupt => Ending::Interrupted,
            _ => Ending::Quit,
        };
        if perform_in(app, stores, state_dir, request, now_millis()) {
            return Ok(ending);
        }
    }
}

/// Carries out what a key asked for; true means quit. Public so tests drive the same
/// path as the terminal, keys in, store changes out.
pub fn perform(
    app: &mut App,
    store: &dyn Store,
    state_dir: &Path,
    request: Request,
    now: Millis,
) -> bool {
    let stores = Stores {
        main: store,
        coord: None,
    };
    perform_in(app, &stores, state_dir, request, now)
}

fn perform_in(
    app: &mut App,
    stores: &Stores,
    state_dir: &Path,
    request: Request,
    now: Millis,
) -> bool {
    match request {
        Request::None => {}
        Request::Quit | Request::Interrupt => return true,
        Request::Reload => {
            refresh_in(app, stores, state_dir, true, now);
            // r in the whole-log view reads it again (at its new end).
            if let Some(id) = app
                .detail
                .as_ref()
                .filter(|d| d.full.is_some())
                .map(|d| d.id)
            {
                load_full_log(app, id, state_dir);
            }
        }
        Request::LoadLog(_) => load_detail(app, stores.main, state_dir),
        Request::LoadFullLog(id) => load_full_log(app, id, state_dir),
        Request::Copy(text) => copy(&text),
        Request::CopyLogPath(id) => {
            let path = crate::runner::attempt_log(state_dir, id);
            copy(&path.display().to_string());
            app.message = Some(super::app::Message {
                text: format!("copied: {}", path.display()),
                error: false,
            });
        }
        Request::Run(action) => {
            let done = actions::apply(stores.main, &action);
            app.done(done);
            refresh_in(app, stores, state_dir, true, now);
        }
    }
    false
}

/// The OSC 52 sequence that puts `text` on the terminal's clipboard (tmux and most
/// terminal emulators take it; over ssh too, which is where `top` mostly runs).
pub fn osc52(text: &str) -> String {
    use base64::Engine;
    format!(
        "\x1b]52;c;{}\x07",
        base64::engine::general_purpose::STANDARD.encode(text)
    )
}

/// Writes [`osc52`] to the terminal. Only what the operator selected is ever copied,
/// and nothing `top` shows is a secret.
fn copy(text: &str) {
    let mut out = io::stdout();
    let _ = out.write_all(osc52(text).as_bytes());
    let _ = out.flush();
}

/// Reads the store again if another connection committed since the last read (or when
/// forced), else only moves the clock; then the open detail's log. A failed read is
/// shown, not fatal: the daemon may be migrating or the disk briefly full.
pub fn refresh(app: &mut App, store: &dyn Store, state_dir: &Path, force: bool, now: Millis) {
    let stores = Stores {
        main: store,
        coord: None,
    };
    refresh_in(app, &stores, state_dir, force, now);
}

fn refresh_in(app: &mut App, stores: &Stores, state_dir: &Path, force: bool, now: Millis) {
    let changed = force
        || stores
            .main
            .data_version()
            .map_or(true, |v| v != app.snap.data_version);
    if changed {
        match Snapshot::load(stores.main, now).and_then(|s| s.with_pool(stores.coord)) {
            Ok(s) => app.set_snapshot(s),
            Err(e) => {
                app.set_now(now);
                app.message = Some(super::app::Message {
                    text: format!("reading the store failed: {e}"),
                    error: true,
                });
            }
        }
    } else {
        app.set_now(now);
    }
    load_detail(app, stores.main, state_dir);
}

fn load_full_log(app: &mut App, id: i64, state_dir: &Path) {
    let path = crate::runner::attempt_log(state_dir, id);
    match super::logfile::read_bounded(&path, super::logfile::FULL_LOG_MAX_BYTES) {
        Ok(text) => app.set_full_log(id, text),
        Err(e) => {
            app.message = Some(super::app::Message {
                text: format!("cannot read {}: {e}", path.display()),
                error: true,
            })
        }
    }
}

/// The open detail's log tail and meter points. The whole-log view is read once, when
/// opened (and again with `r`, which opens it afresh): reading megabytes every second
/// would be the UI's main cost.
fn load_detail(app: &mut App, store: &dyn Store, state_dir: &Path) {
    if let Some(id) = app.detail_id() {
        // A failed read leaves the sparkline empty; the fields above still show.
        app.set_points(id, store.meter_points(id).unwrap_or_default());
        let path = crate::runner::attempt_log(state_dir, id);
        let lines = crate::runner::log::tail_lines(&path, LOG_LINES)
            .unwrap_or_else(|e| vec![format!("cannot read {}: {e}", path.display())]);
        app.set_log(id, lines);
    }
}
