//! The real terminal: raw mode, the alternate screen and mouse capture, the event
//! loop, the clipboard (OSC 52), and putting the terminal back on every way out (quit,
//! error, panic, SIGTERM/SIGHUP/SIGINT, the terminal going away).
//!
//! The loop is synchronous and sleeps in `select!` over four channels: input from an
//! input thread, signals from a signal thread, the terminal's hang-up from a watcher
//! thread, and a 1 s `tick` that reloads the store (only when its `data_version`
//! moved) and redraws. Nothing spins, not even on a terminal that is gone: the watcher
//! ([`super::tty`]) takes a dead terminal from under crossterm's reader, and the end
//! of `top` never waits on a thread that may not end.

use super::actions;
use super::app::{App, Request};
use super::detail::LOG_LINES;
use super::model::Snapshot;
use super::theme::Theme;
use super::tty;
use super::ui;
use crate::store::{Store, StoreError};
use crate::timefmt::{Millis, now_millis};
use crossbeam_channel::{Receiver, RecvTimeoutError, select, tick, unbounded};
use crossterm::event::{self, DisableMouseCapture, EnableMouseCapture, Event, KeyEventKind};
use crossterm::terminal::{EnterAlternateScreen, LeaveAlternateScreen};
use crossterm::{cursor, execute, terminal};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use std::io::{self, IsTerminal, Stdout, Write};
use std::os::fd::RawFd;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How `top` ended: the user quit (q), was interrupted (Ctrl-C, SIGINT or SIGTERM), or
/// lost its terminal (SIGHUP, or the terminal hung up: a closed tmux pane, terminal tab
/// or SSH session). `top` and the demo exit 130 after either of the last two.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    Quit,
    Interrupted,
    Hangup,
}

impl Ending {
    /// What the exit message says, for an ending that is not a quit.
    pub fn describe(self) -> &'static str {
        match self {
            Ending::Quit => "quit",
            Ending::Interrupted => "interrupted",
            Ending::Hangup => "its terminal went away",
        }
    }
}

/// How often the views refresh.
pub const REFRESH: Duration = Duration::from_secs(1);

/// How long the input thread waits for a key before looking at its stop flag: four
/// wake-ups a second while idle.
const INPUT_POLL: Duration = Duration::from_millis(250);

/// How long the end of `top` waits for the input thread to notice its stop flag. A
/// thread stuck inside crossterm (should neutralising the dead terminal fail) would
/// never end: it is then left behind, and ends with the process.
const INPUT_JOIN_WAIT: Duration = Duration::from_millis(500);

/// The descriptor crossterm reads keys from (it uses stdin when stdin is a terminal,
/// which `run` checks), and so the one `top` watches for a hang-up.
const TTY_FD: RawFd = libc::STDIN_FILENO;

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

/// What the input thread sends.
#[derive(Debug)]
enum Input {
    Event(Event),
    /// Reading failed; the thread has ended.
    Failed(io::Error),
}

/// The input thread: its channel, and a channel that disconnects when it has ended
/// (so the end of `top` can wait for it with a deadline instead of a join that might
/// never return).
struct InputThread {
    events: Receiver<Input>,
    ended: Receiver<()>,
    handle: std::thread::JoinHandle<()>,
}

/// Reads terminal events into a channel until `stop` is set or the receiver is gone.
/// crossterm does the waiting (so a resize and a key arriving together are both
/// seen); should the terminal hang up meanwhile, [`spawn_tty_watch`] takes the
/// descriptor away from under it.
fn spawn_input(stop: Arc<AtomicBool>) -> io::Result<InputThread> {
    let (tx, events) = unbounded();
    let (ended_tx, ended) = crossbeam_channel::bounded::<()>(0);
    let handle = std::thread::Builder::new()
        .name("tui-input".into())
        .spawn(move || {
            let _ended = ended_tx;
            while !stop.load(Ordering::Relaxed) {
                let ev = match event::poll(INPUT_POLL) {
                    Ok(false) => continue,
                    Ok(true) => event::read(),
                    Err(e) => Err(e),
                };
                let msg = ev.map_or_else(Input::Failed, Input::Event);
                let failed = matches!(msg, Input::Failed(_));
                if tx.send(msg).is_err() || failed {
                    break;
                }
            }
        })?;
    Ok(InputThread {
        events,
        ended,
        handle,
    })
}

impl InputThread {
    /// Stops the thread: joins it if it ends within [`INPUT_JOIN_WAIT`], else leaves
    /// it to end with the process. Never a join that may not return.
    fn finish(self, stop: &AtomicBool) {
        stop.store(true, Ordering::Relaxed);
        drop(self.events);
        match self.ended.recv_timeout(INPUT_JOIN_WAIT) {
            Err(RecvTimeoutError::Disconnected) | Ok(()) => {
                let _ = self.handle.join();
            }
            Err(RecvTimeoutError::Timeout) => {}
        }
    }
}

/// The watcher of the terminal: a thread asleep in poll(2) until the terminal hangs
/// up (then it neutralises the descriptor, so crossterm's reader stops reading 0 for
/// ever, and says so on `gone`) or `top` ends (dropping `wake` wakes it).
struct TtyWatch {
    gone: Receiver<()>,
    wake: std::os::unix::net::UnixStream,
    thread: std::thread::JoinHandle<()>,
}

/// Set once the terminal has hung up. Process-wide, as the terminal is: after
/// [`tty::neutralise`], descriptor 0 is a pipe and poll(2) can no longer tell.
static TTY_GONE: AtomicBool = AtomicBool::new(false);

/// Whether the terminal has gone away: the watcher saw it, or poll(2) says so now.
fn terminal_gone() -> bool {
    TTY_GONE.load(Ordering::SeqCst) || tty::gone(TTY_FD)
}

fn spawn_tty_watch() -> io::Result<TtyWatch> {
    let (wake, woken) = std::os::unix::net::UnixStream::pair()?;
    let (tx, gone) = crossbeam_channel::bounded(1);
    let thread = std::thread::Builder::new()
        .name("tui-tty".into())
        .spawn(move || {
            // An error from poll(2) itself (not a hang-up) leaves the tick's check.
            if let Ok(tty::Watch::Gone) = tty::watch(TTY_FD, &woken) {
                TTY_GONE.store(true, Ordering::SeqCst);
                let _ = tty::neutralise(TTY_FD);
                let _ = tx.send(());
            }
        })?;
    Ok(TtyWatch { gone, wake, thread })
}

impl TtyWatch {
    fn finish(self) {
        // The peer's end of file wakes the poll, so this join returns.
        drop(self.wake);
        let _ = self.thread.join();
    }
}

/// The signals that end `top`, as values on a channel, from a thread that a
/// `Handle::close` always ends.
struct SignalThread {
    signals: Receiver<i32>,
    handle: signal_hook::iterator::Handle,
    thread: std::thread::JoinHandle<()>,
}

fn spawn_signals() -> io::Result<SignalThread> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut it = signal_hook::iterator::Signals::new([SIGTERM, SIGHUP, SIGINT])?;
    let handle = it.handle();
    let (tx, signals) = unbounded();
    let thread = std::thread::Builder::new()
        .name("tui-signals".into())
        .spawn(move || {
            for sig in it.forever() {
                if tx.send(sig).is_err() {
                    break;
                }
            }
        })?;
    Ok(SignalThread {
        signals,
        handle,
        thread,
    })
}

impl SignalThread {
    fn finish(self) {
        // close() wakes the thread and ends `forever`, so this join returns.
        self.handle.close();
        let _ = self.thread.join();
    }
}

/// How a signal ends `top`: SIGHUP says the terminal went away.
pub fn ending_for(signal: i32) -> Ending {
    if signal == signal_hook::consts::SIGHUP {
        Ending::Hangup
    } else {
        Ending::Interrupted
    }
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
    let mut app = App::new(snap, Theme::from_env()).with_state_dir_arg(super::app::state_dir_arg(
        state_dir,
        default_state_dir().as_deref(),
    ));
    let signals = spawn_signals()?;
    install_panic_hook();
    let guard = Guard::enter()?;
    let mut term = Terminal::new(CrosstermBackend::new(io::stdout()))?;
    let watch = spawn_tty_watch()?;
    let stop = Arc::new(AtomicBool::new(false));
    let input = spawn_input(Arc::clone(&stop))?;
    let stores = Stores {
        main: store,
        coord: coord.as_ref(),
    };
    let result = event_loop(
        &mut term,
        &mut app,
        &stores,
        state_dir,
        &Inputs {
            input: &input.events,
            signals: &signals.signals,
            gone: &watch.gone,
        },
    );
    let gone = terminal_gone();
    watch.finish();
    input.finish(&stop);
    signals.finish();
    if gone {
        // Ratatui's `Drop` shows the cursor and reports a failure with `eprintln!`,
        // which panics when stderr is the hung-up terminal (EIO): the process would
        // end 101 instead of 130. There is no cursor left to show, so skip it.
        std::mem::forget(term);
    }
    // On a terminal that is gone these writes fail; restore ignores that.
    drop(guard);
    result
}

/// The state directory a command reaches without `--state-dir` in a plain shell of
/// this user: the CLI's default less `RUNNER_MANAGER_STATE_DIR`, which the shell a
/// copied command is pasted into may not have (naming the directory then is harmless).
fn default_state_dir() -> Option<std::path::PathBuf> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        return Some("/var/lib/runner-manager".into());
    }
    let var = |k| std::env::var_os(k).filter(|d| !d.is_empty());
    match (var("XDG_STATE_HOME"), var("HOME")) {
        (Some(x), _) => Some(std::path::PathBuf::from(x).join("runner-manager")),
        (None, Some(h)) => Some(std::path::PathBuf::from(h).join(".local/state/runner-manager")),
        (None, None) => None,
    }
}

/// The store `top` was given, and a connection to the same file for the
/// coordinator's tables (the Pool pane).
struct Stores<'a> {
    main: &'a dyn Store,
    coord: Option<&'a crate::store::SqliteStore>,
}

/// What the loop waits on besides its tick: keys and mouse, signals, the terminal
/// going away.
struct Inputs<'a> {
    input: &'a Receiver<Input>,
    signals: &'a Receiver<i32>,
    gone: &'a Receiver<()>,
}

fn event_loop(
    term: &mut Terminal<CrosstermBackend<Stdout>>,
    app: &mut App,
    stores: &Stores,
    state_dir: &Path,
    from: &Inputs,
) -> Result<Ending, TuiError> {
    let ticker = tick(REFRESH);
    loop {
        if let Err(e) = term.draw(|f| ui::draw(f, app)) {
            // A write to a hung-up terminal fails (EIO): that is a hang-up, not an error.
            return if terminal_gone() {
                Ok(Ending::Hangup)
            } else {
                Err(e.into())
            };
        }
        let request = select! {
            recv(from.input) -> ev => match ev {
                Ok(Input::Event(Event::Key(k))) if k.kind == KeyEventKind::Press => app.key(k),
                Ok(Input::Event(Event::Mouse(m))) => {
                    let size = term.size()?;
                    app.mouse(m, ratatui::layout::Rect::new(0, 0, size.width, size.height))
                }
                // A resize redraws at the new size on the next pass; so does anything else.
                Ok(Input::Event(_)) => Request::None,
                Ok(Input::Failed(e)) => {
                    return if terminal_gone() { Ok(Ending::Hangup) } else { Err(e.into()) };
                }
                // The input thread only ends by sending a failure (above).
                Err(_) => return Ok(Ending::Hangup),
            },
            recv(from.signals) -> sig => return Ok(sig.map_or(Ending::Interrupted, ending_for)),
            recv(from.gone) -> _ => return Ok(Ending::Hangup),
            recv(ticker) -> _ => {
                // A backstop beside the watcher, should its poll(2) ever fail.
                if terminal_gone() {
                    return Ok(Ending::Hangup);
                }
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
            let probe = crate::facts::host_probe::Probe {
                state_dir: state_dir.to_path_buf(),
            };
            let done = actions::apply(stores.main, &action, &probe);
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
