//! The command line: parse with lexopt, dispatch, print tables or JSON, map errors to
//! exit codes by their class (`exit::TABLE`: 0 ok, 2 bad usage or invalid input with
//! nothing written, one code per failure class, 1 otherwise), each failure ending with
//! the line that names its fix.

mod apply;
mod attempts;
mod backup;
mod complete;
mod completions;
mod coordinator;
mod doctor;
pub mod exit;
mod host;
mod install;
mod output;
mod parse;
mod profiles;
mod reidentify;
mod run;
mod service;
pub mod spec;
mod targets;
mod top;
mod update;
mod usage;

use crate::domain::Invalid;
use crate::store::{SqliteStore, StoreError};
use exit::{Failure, Subject};
use parse::{Invocation, Parsed};
use spec::opts;
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

/// Why a command failed, and so which exit code it gets.
#[derive(Debug)]
pub enum CliError {
    /// Bad usage: exit 2.
    Usage(String),
    /// A refused value, naming the argument: exit 2.
    Invalid(Invalid),
    /// What the store refused or failed at: exit 2 for names that do not exist or are
    /// taken (the user's input), 1 for everything else.
    Store(StoreError),
    /// Any other failure: exit 1.
    Failed(String),
    /// Stopped by the user (Ctrl-C, SIGINT, SIGTERM): exit 130, as a shell reports it.
    Interrupted(String),
    /// A failure whose class was decided from a typed error (`Failure::of_github`,
    /// `of_lock`, ...) or a typed outcome (a required doctor check), with what its
    /// remedy names (a target, a rate limit's reset).
    Classed {
        failure: Failure,
        message: String,
        /// Boxed: most failures know none of it, and every `Result` carries the size.
        subject: Box<Subject>,
    },
}

impl CliError {
    pub fn usage(arg: &str, reason: &str) -> CliError {
        CliError::Invalid(Invalid::new(arg, reason))
    }

    pub fn classed(failure: Failure, message: impl Into<String>) -> CliError {
        CliError::Classed {
            failure,
            message: message.into(),
            subject: Box::default(),
        }
    }

    /// A failure whose one fix is known where it happened (the file to look at, the
    /// command to run): said instead of the class's generic remedy.
    pub fn fixed(failure: Failure, message: impl Into<String>, fix: impl Into<String>) -> CliError {
        CliError::Classed {
            failure,
            message: message.into(),
            subject: Box::new(Subject {
                fix: Some(fix.into()),
                ..Subject::default()
            }),
        }
    }

    /// A failure about one target, whose remedy names it.
    pub fn about_target(failure: Failure, target: &str, message: impl Into<String>) -> CliError {
        CliError::Classed {
            failure,
            message: message.into(),
            subject: Box::new(Subject {
                target: Some(target.to_string()),
                ..Subject::default()
            }),
        }
    }

    /// A GitHub error met on a target: classed by its type; a rate limit's remedy
    /// names its reset.
    pub fn github(
        target: &str,
        e: &crate::github::GhError,
        message: impl Into<String>,
    ) -> CliError {
        let mut err = CliError::about_target(Failure::of_github(e), target, message);
        if let (crate::github::GhError::RateLimited { until }, CliError::Classed { subject, .. }) =
            (e, &mut err)
        {
            subject.until = Some(crate::timefmt::format_rfc3339(*until));
        }
        err
    }

    /// The class, and so the exit code and the remedy.
    pub fn failure(&self) -> Failure {
        match self {
            CliError::Usage(_) | CliError::Invalid(_) => Failure::Usage,
            CliError::Store(e) => Failure::of_store(e),
            CliError::Failed(_) => Failure::Other,
            CliError::Interrupted(_) => Failure::Interrupted,
            CliError::Classed { failure, .. } => *failure,
        }
    }

    pub fn exit_code(&self) -> i32 {
        self.failure().code()
    }

    /// What the remedy names that only the failure knows (its target, a reset).
    fn subject(&self) -> Option<&Subject> {
        match self {
            CliError::Classed { subject, .. } => Some(subject),
            _ => None,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Usage(m) | CliError::Failed(m) | CliError::Interrupted(m) => f.write_str(m),
            CliError::Invalid(i) => write!(f, "{i}"),
            CliError::Store(e) => write!(f, "{e}"),
            CliError::Classed { message, .. } => f.write_str(message),
        }
    }
}

impl From<Invalid> for CliError {
    fn from(i: Invalid) -> CliError {
        CliError::Invalid(i)
    }
}

impl From<StoreError> for CliError {
    fn from(e: StoreError) -> CliError {
        CliError::Store(e)
    }
}

impl From<crate::store::EditError> for CliError {
    fn from(e: crate::store::EditError) -> CliError {
        match e {
            crate::store::EditError::Invalid(i) => CliError::Invalid(i),
            crate::store::EditError::Store(e) => CliError::Store(e),
        }
    }
}

pub type CliResult = Result<(), CliError>;

/// Runs the command line and returns the process exit code.
pub fn main() -> i32 {
    harden_process();
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    if long_lived(&args) && std::env::var_os("RUNNER_MANAGER_MALLOC_CACHES").is_none() {
        // Returns only when the caches are off already (or cannot be turned off).
        crate::alloc::without_thread_caches();
    }
    run(args)
}

/// Whether `args` run a process that lives for months (the daemon, a coordinator),
/// whose malloc is tuned for memory held rather than speed (`alloc`).
fn long_lived(args: &[OsString]) -> bool {
    matches!(
        parse::parse(args.to_vec()),
        Ok(Parsed::Run(inv)) if matches!(inv.command.id, spec::CommandId::Daemon | spec::CommandId::CoordinatorServe)
    )
}

/// What every command of the binary does first (not `run`, which tests call in their
/// own process). Not dumpable: no core file and no same-user ptrace or
/// `/proc/PID/environ|mem` of a process that holds tokens, even when the operator's
/// `ulimit -c` or a crash handler would write one. Umask 077: everything the manager
/// writes (the store and its journal, logs, roots, the lock) is private unless it
/// opens access on purpose (a runner install, an attempt's root for its runner).
fn harden_process() {
    // SAFETY: prctl(PR_SET_DUMPABLE) and umask take plain integers and cannot fail in a
    // way that matters here.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        libc::umask(0o077);
    }
}

/// Runs one command line (without the program name) and returns its exit code.
pub fn run(args: Vec<OsString>) -> i32 {
    if args.first().is_some_and(|a| a == complete::COMMAND) {
        let words: Vec<String> = args[1..]
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        return complete::run(&words);
    }
    let named = command_named(&args);
    let (result, mut subject) = match parse::parse(args) {
        Ok(Parsed::Help(text)) => {
            print!("{text}");
            (Ok(()), Subject::default())
        }
        Ok(Parsed::Version) => {
            println!("runner-manager {}", crate::version::version());
            (Ok(()), Subject::default())
        }
        Ok(Parsed::Run(inv)) => {
            let subject = Subject {
                command: Some(inv.command.path.join(" ")),
                dir: state_dir(&inv).ok().map(|d| d.display().to_string()),
                ..Subject::default()
            };
            (execute(&inv), subject)
        }
        Err(e) => (
            Err(e),
            Subject {
                command: named,
                ..Subject::default()
            },
        ),
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            let failure = e.failure();
            if let Some(s) = e.subject() {
                subject.target = s.target.clone();
                subject.until = s.until.clone();
                subject.fix = s.fix.clone();
            }
            // Not eprintln!, which panics when the write fails: after `top` lost its
            // terminal, stderr is that hung-up terminal (EIO), and the exit code must
            // still be the failure's.
            use std::io::Write as _;
            let _ = writeln!(
                std::io::stderr(),
                "runner-manager: {}\n{}",
                crate::printable::escape_text(&e.to_string()),
                exit::fix_line(failure, &subject)
            );
            failure.code()
        }
    }
}

/// The command the words name, for a usage error's remedy: the longest run of leading
/// words (past the global options) that is a command in the spec. Only words the spec
/// knows come back, never a value from argv.
fn command_named(args: &[OsString]) -> Option<String> {
    let mut words = Vec::new();
    let mut it = args.iter().map(|a| a.to_string_lossy().into_owned());
    while let Some(a) = it.next() {
        match a.as_str() {
            "--state-dir" => {
                it.next();
            }
            a if a.starts_with('-') => {}
            _ => words.push(a),
        }
        if words.len() == 3 {
            break;
        }
    }
    (1..=words.len())
        .rev()
        .find_map(|n| spec::find(&words[..n]))
        .map(|c| c.path.join(" "))
}

/// Runs the command: one arm per `CommandId` and no fallback, so a command in the
/// table without its handler does not compile.
fn execute(inv: &Invocation) -> CliResult {
    use Books::{Create, Read, Write};
    use spec::CommandId as C;
    match inv.command.id {
        // Commands that must not create or open the user's store first: demo and the
        // simulated GitHub bring their own world, completions need none, doctor
        // reports a store that does not open as a failed check instead of exiting, and
        // service leaves the store to the daemon it installs (status reads one if there).
        C::Demo => run::demo(inv),
        C::SimGithub => run::sim_github(inv),
        C::SimJobAdd => printed(inv, |out| run::sim_job_add(inv, out)),
        C::Completions => completions::run(inv),
        C::Doctor => doctor::run(inv, &state_dir(inv)?),
        C::ServiceInstall => printed(inv, |out| service::install(inv, out)),
        C::ServiceStatus => printed(inv, |out| service::status(inv, out)),
        C::ServiceUninstall => printed(inv, |out| service::uninstall(inv, out)),
        // The coordinator's commands read its own books, which only `SqliteStore` has.
        C::CoordinatorServe => in_store(inv, Create, |s, dir| coordinator::serve(inv, s, dir)),
        C::CoordinatorHostAdd => books(inv, Create, |s, _, out| coordinator::host_add(inv, s, out)),
        C::CoordinatorHostRm => books(inv, Write, |s, _, out| coordinator::host_rm(inv, s, out)),
        C::CoordinatorStatus => books(inv, Read, |s, _, out| coordinator::status(s, out)),
        C::CoordinatorHosts => books(inv, Read, |s, _, out| coordinator::hosts(inv, s, out)),
        C::CoordinatorLeases => books(inv, Read, |s, _, out| coordinator::leases(inv, s, out)),
        C::CoordinatorUsage => books(inv, Read, |s, _, out| {
            usage::run(inv, s, out, usage::Books::Pool)
        }),
        C::TargetAdd => books(inv, Create, |s, _, out| targets::add(inv, s, out)),
        C::TargetSet => books(inv, Write, |s, _, out| targets::set(inv, s, out)),
        C::TargetList => books(inv, Read, |s, _, out| targets::list(s, out)),
        C::TargetShow => books(inv, Read, |s, _, out| targets::show(inv, s, out)),
        C::TargetRm => books(inv, Write, |s, _, out| targets::rm(inv, s, out)),
        C::TargetCheck => books(inv, Write, |s, _, _| run::target_check(inv, s)),
        C::ProfileAdd => books(inv, Write, |s, _, out| profiles::add(inv, s, out)),
        C::ProfileSet => books(inv, Write, |s, _, out| profiles::set(inv, s, out)),
        C::ProfileList => books(inv, Read, |s, _, out| profiles::list(s, out)),
        C::ProfileShow => books(inv, Read, |s, _, out| profiles::show(inv, s, out)),
        C::ProfileRm => books(inv, Write, |s, _, out| profiles::rm(inv, s, out)),
        C::ProfilePause => books(inv, Write, |s, _, out| {
            profiles::set_active(inv, s, out, false)
        }),
        C::ProfileResume => books(inv, Write, |s, _, out| {
            profiles::set_active(inv, s, out, true)
        }),
        C::HostShow => books(inv, Read, |s, _, out| host::show(s, out)),
        C::HostSet => books(inv, Create, |s, _, out| host::set(inv, s, out)),
        C::HostReidentify => books(inv, Write, reidentify::reidentify),
        C::Status => books(inv, Read, |s, dir, out| host::status(s, out, dir)),
        C::Attempts => books(inv, Read, |s, _, out| attempts::list(inv, s, out)),
        C::AttemptShow => books(inv, Read, |s, _, out| attempts::show(inv, s, out)),
        C::Usage => books(inv, Read, |s, _, out| {
            usage::run(inv, s, out, usage::Books::Host)
        }),
        C::Backup => in_store(inv, Read, |s, _| {
            printed(inv, |out| backup::run(inv, s, out))
        }),
        // A dry run writes nothing, not even a new store.
        C::Apply if inv.flag(&opts::apply::DRY_RUN) => {
            books(inv, Read, |s, dir, out| apply::apply(inv, s, dir, out))
        }
        C::Apply => books(inv, Create, |s, dir, out| apply::apply(inv, s, dir, out)),
        C::Export => books(inv, Read, |s, _, out| apply::export(s, out)),
        C::Daemon => books(inv, Create, |_, dir, _| run::daemon(inv, dir)),
        C::Drain => books(inv, Create, |s, _, out| run::drain(inv, s, out)),
        C::Top => books(inv, Write, |s, dir, _| top::top(s, dir)),
        C::RunnerInstall => books(inv, Write, |s, dir, _| install::run(inv, s, dir)),
        C::Update => books(inv, Write, |s, _, out| update::run(inv, s, out)),
    }
}

/// Runs a command that prints through `Out`, then prints what it gathered.
fn printed(inv: &Invocation, f: impl FnOnce(&mut output::Out) -> CliResult) -> CliResult {
    let mut out = output::Out::new(inv.json);
    f(&mut out)?;
    out.flush()
}

/// Runs a command on the store that prints through `Out`.
fn books(
    inv: &Invocation,
    may: Books,
    f: impl FnOnce(&SqliteStore, &Path, &mut output::Out) -> CliResult,
) -> CliResult {
    in_store(inv, may, |store, dir| {
        printed(inv, |out| f(store, dir, out))
    })
}

/// Whether a command may create the store, and whether it writes. Those that can
/// write the books on a fresh machine, and the daemon, may create it; every other
/// command needs a store to be there already, so a mistyped `--state-dir` is an error
/// naming it, not a new empty store. A command that writes checks the store is sound
/// first (`PRAGMA quick_check`) and refuses a damaged one with exit 8, writing nothing.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Books {
    /// Writes, and creates the store if there is none.
    Create,
    /// Writes an existing store.
    Write,
    /// Only reads an existing store.
    Read,
}

/// Opens the store in the state directory (creating it only when `may` says so),
/// checks it is sound when the command writes, runs the command on it, and takes a store it created away again when the command
/// refused its input (exit 2).
fn in_store(
    inv: &Invocation,
    may: Books,
    f: impl FnOnce(&SqliteStore, &Path) -> CliResult,
) -> CliResult {
    let dir = state_dir(inv)?;
    let db = dir.join(crate::store::DB_FILE);
    let missing =
        matches!(std::fs::metadata(&db), Err(e) if e.kind() == std::io::ErrorKind::NotFound);
    if missing && may != Books::Create {
        return Err(CliError::classed(
            Failure::NoStore,
            format!(
                "no store at {}: nothing has been set up in this state directory; check --state-dir \
                 (or RUNNER_MANAGER_STATE_DIR), or create one with 'target add' or 'host set'{}",
                dir.display(),
                system_store_hint(inv)
            ),
        ));
    }
    let created = missing.then(|| Created::before(&dir));
    let store = SqliteStore::open(&dir)?;
    if may != Books::Read {
        // Issue 33: a damaged page past the schema opens fine, and a write to it
        // succeeded; refuse before anything is written.
        store.check_sound()?;
    }
    let result = f(&store, &dir).map_err(|e| with_guess(inv, &store, e));
    drop(store);
    if let (Some(created), Err(e)) = (created, &result)
        && e.exit_code() == 2
    {
        created.undo(&dir);
    }
    result
}

/// A target or profile the store does not hold, with the one it most likely meant
/// (`target rm dem`: `no target named "dem"; did you mean 'demo'?`). Still exit 2.
/// Its fix is the very command with the name it meant.
fn with_guess(inv: &Invocation, store: &SqliteStore, e: CliError) -> CliError {
    let CliError::Store(StoreError::NotFound { what, name }) = &e else {
        return e;
    };
    let Some(meant) = crate::store::near_name(store, what, name) else {
        return e;
    };
    let fix = retyped(inv, name, &meant);
    let message = format!("{e}{}", crate::store::said(Some(meant)));
    CliError::Classed {
        failure: Failure::Usage,
        message,
        subject: Box::new(Subject {
            fix: Some(fix),
            ..Subject::default()
        }),
    }
}

/// The command line of `inv` with the first argument or option value that was `typed`
/// given as `meant`, ready to paste (each word quoted as the shell needs).
fn retyped(inv: &Invocation, typed: &str, meant: &str) -> String {
    use crate::tui::app::shell_quote;
    let mut done = false;
    // The name as a word of its own, or as the value of a KEY=VALUE setting.
    let mut word = |w: &str| {
        let key = w
            .strip_suffix(typed)
            .filter(|k| k.is_empty() || k.ends_with('='));
        match key {
            Some(key) if !done => {
                done = true;
                shell_quote(&format!("{key}{meant}"))
            }
            _ => shell_quote(w),
        }
    };
    let mut words = this_binary_words(inv);
    if inv.json {
        words.push("--json".into());
    }
    words.extend(inv.command.path.iter().map(|w| w.to_string()));
    for p in &inv.positionals {
        words.push(word(p));
    }
    for (name, value) in &inv.options {
        words.push(name.to_string());
        if let Some(v) = value {
            words.push(word(v));
        }
    }
    words.join(" ")
}

/// `runner-manager`, with the `--state-dir` the user gave (quoted for the shell): the
/// start of a fix line the user can paste as it is.
fn this_binary_words(inv: &Invocation) -> Vec<String> {
    let mut words = vec!["runner-manager".to_string()];
    if let Some(d) = &inv.state_dir {
        words.push("--state-dir".into());
        words.push(crate::tui::app::shell_quote(&d.to_string_lossy()));
    }
    words
}

/// `runner-manager [--state-dir DIR] ARGS`, each of `args` quoted as the shell needs.
pub(super) fn command_line(inv: &Invocation, args: &[&str]) -> String {
    let mut words = this_binary_words(inv);
    words.extend(args.iter().map(|a| crate::tui::app::shell_quote(a)));
    words.join(" ")
}

/// What opening a new store made: the store's files, and the state directory with
/// any of its parents that did not exist. Bad input changes nothing, so a command that
/// refuses its arguments on a fresh machine takes them away again.
struct Created {
    /// The highest directory that did not exist before, if any.
    top_dir: Option<std::path::PathBuf>,
}

impl Created {
    fn before(dir: &std::path::Path) -> Created {
        let top_dir = dir
            .ancestors()
            .take_while(|p| !p.as_os_str().is_empty() && !p.exists())
            .last()
            .map(std::path::Path::to_path_buf);
        Created { top_dir }
    }

    /// Removes the store's files, then each directory made for it, from the state
    /// directory up, as long as it is empty (nothing else is ever removed).
    fn undo(self, dir: &std::path::Path) {
        let db = dir.join(crate::store::DB_FILE);
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let mut p = db.clone().into_os_string();
            p.push(suffix);
            let _ = std::fs::remove_file(p);
        }
        let Some(top) = self.top_dir else { return };
        for d in dir.ancestors() {
            if std::fs::remove_dir(d).is_err() || d == top {
                break;
            }
        }
    }
}

/// `--state-dir`, else `RUNNER_MANAGER_STATE_DIR`, else the default for this user.
fn state_dir(inv: &Invocation) -> Result<PathBuf, CliError> {
    match &inv.state_dir {
        Some(d) => Ok(d.clone()),
        None => default_state_dir(),
    }
}

/// For a user other than root on the default state directory: where a system
/// daemon's store is, which is not this user's default (empty otherwise).
fn system_store_hint(inv: &Invocation) -> String {
    let chosen = inv.state_dir.is_some()
        || std::env::var_os("RUNNER_MANAGER_STATE_DIR").is_some_and(|d| !d.is_empty());
    // SAFETY: geteuid has no preconditions and cannot fail.
    if chosen || unsafe { libc::geteuid() } == 0 {
        return String::new();
    }
    format!(
        ". (This is the default for a user other than root; a system daemon's store is in \
         {SYSTEM_STATE_DIR}: run as root, or pass --state-dir {SYSTEM_STATE_DIR}.)"
    )
}

/// Root's default state directory: the packaged service's.
const SYSTEM_STATE_DIR: &str = "/var/lib/runner-manager";

/// The state directory when `--state-dir` is not given: the environment's, root's, or
/// the user's.
fn default_state_dir() -> Result<PathBuf, CliError> {
    if let Some(d) = std::env::var_os("RUNNER_MANAGER_STATE_DIR").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(d));
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        return Ok(PathBuf::from(SYSTEM_STATE_DIR));
    }
    if let Some(x) = std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(x).join("runner-manager"));
    }
    match std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        Some(h) => Ok(PathBuf::from(h).join(".local/state/runner-manager")),
        None => Err(CliError::usage(
            "--state-dir",
            "neither HOME nor XDG_STATE_HOME is set; give --state-dir DIR",
        )),
    }
}

/// The risks of the `KEY=VALUE`s of `host set` or `profile set` (`domain::risks`):
/// warnings to print once the change is written, or the refusal of one nothing good
/// can come of (exit 2, nothing written). Each value is checked as its setting checks
/// it first, so a malformed one gets that setting's own message.
fn setting_risks(kvs: &[String]) -> Result<Vec<String>, CliError> {
    use crate::domain::{risks, runner_env};
    use std::os::unix::fs::MetadataExt;
    let mut warnings = Vec::new();
    for kv in kvs {
        let Ok((key, value)) = crate::domain::validate::key_value(kv) else {
            continue;
        };
        if let Some(name) = key.strip_prefix(runner_env::ENV_PREFIX) {
            runner_env::check_name(key, name)?;
            if value.is_empty() {
                continue;
            }
            runner_env::check_value(key, name, value)?;
            let stat = |d: &str| {
                std::fs::metadata(d).ok().map(|m| risks::DirFacts {
                    uid: m.uid(),
                    mode: m.mode() & 0o7777,
                })
            };
            warnings.extend(risks::env(key, name, value, effective_uid(), stat)?);
        } else if key == "run_as" && !value.is_empty() {
            let uid = crate::runner::user::lookup_user(value).ok().map(|u| u.uid);
            warnings.extend(risks::run_as(key, value, uid));
        }
    }
    Ok(warnings)
}

/// Prints `setting_risks`' warnings on stderr (the change stands).
fn warn(warnings: &[String]) {
    for w in warnings {
        eprintln!("runner-manager: warning: {w}");
    }
}

fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Checks that a file the daemon will read later exists and is readable now.
fn readable_file(arg: &str, path: &std::path::Path) -> Result<(), CliError> {
    Ok(crate::facts::host_probe::readable_file(arg, path)?)
}

/// Checks that a token or key file the daemon will read later is one it will accept:
/// readable now, a regular file, private to its owner (see `secret::read_secret_file`).
fn secret_file(arg: &str, path: &std::path::Path) -> Result<(), CliError> {
    Ok(crate::facts::host_probe::secret_file(arg, path)?)
}

/// A GitHub App key file: readable as a secret and a PEM RSA private key, so a wrong
/// file is refused when it is named rather than at the daemon's first token.
fn app_key_file(arg: &str, path: &std::path::Path) -> Result<(), CliError> {
    Ok(crate::facts::host_probe::app_key_file(arg, path)?)
}
