//! Logs: one logfmt line per event on stderr, with journald priority prefixes under
//! systemd. Values are formatted with `Display`, so a `Secret` prints `***`.
//! `Repeats` bounds how often one event that repeats (a store write on a full disk)
//! is logged, as the coordinator's `Throttle` does for a peer's unknown frames.

use std::fmt::{self, Display, Write as _};
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Level {
    Error = 0,
    Warn = 1,
    Info = 2,
    Debug = 3,
}

impl Level {
    pub fn parse(s: &str) -> Option<Level> {
        match s {
            "error" => Some(Level::Error),
            "warn" | "warning" => Some(Level::Warn),
            "info" => Some(Level::Info),
            "debug" => Some(Level::Debug),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warn => "warn",
            Level::Info => "info",
            Level::Debug => "debug",
        }
    }

    /// syslog priority, as journald reads it from a `<N>` line prefix.
    fn priority(self) -> u8 {
        match self {
            Level::Error => 3,
            Level::Warn => 4,
            Level::Info => 6,
            Level::Debug => 7,
        }
    }
}

static LEVEL: AtomicU8 = AtomicU8::new(Level::Info as u8);
static JOURNAL: AtomicBool = AtomicBool::new(false);

/// Sets the level and notices whether stderr goes to the journal (`JOURNAL_STREAM`).
pub fn init(level: Level) {
    LEVEL.store(level as u8, Ordering::Relaxed);
    JOURNAL.store(
        std::env::var_os("JOURNAL_STREAM").is_some(),
        Ordering::Relaxed,
    );
}

pub fn enabled(level: Level) -> bool {
    level as u8 <= LEVEL.load(Ordering::Relaxed)
}

/// Writes `value` in logfmt: bare when it is a plain token, else quoted with `\"`,
/// `\\` and `\n` escaped, so one event is always one line.
fn push_value(out: &mut String, value: &str) {
    let plain = !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_graphic() && c != '"' && c != '=' && c != '\\');
    if plain {
        out.push_str(value);
        return;
    }
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            // Bidirectional controls too: a log is read on a terminal (`printable`).
            c if crate::printable::is_hazard(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Formats one event line (without the newline).
pub fn format_line(
    level: Level,
    journal: bool,
    now: crate::timefmt::Millis,
    msg: &str,
    fields: &[(&str, &dyn Display)],
) -> String {
    let mut out = String::with_capacity(128);
    if journal {
        // journald adds its own timestamp; the priority prefix sets the level.
        let _ = write!(out, "<{}>", level.priority());
    } else {
        out.push_str("ts=");
        out.push_str(&crate::timefmt::format_rfc3339(now));
        out.push(' ');
    }
    out.push_str("level=");
    out.push_str(level.as_str());
    out.push_str(" msg=");
    push_value(&mut out, msg);
    for (k, v) in fields {
        out.push(' ');
        out.push_str(k);
        out.push('=');
        push_value(&mut out, &v.to_string());
    }
    out
}

/// Emits one event if its level is enabled. Use the `log_*!` macros.
pub fn emit(level: Level, msg: &str, fields: &[(&str, &dyn Display)]) {
    if !enabled(level) {
        return;
    }
    let mut line = format_line(
        level,
        JOURNAL.load(Ordering::Relaxed),
        crate::timefmt::now_millis(),
        msg,
        fields,
    );
    line.push('\n');
    // One write call per line keeps lines whole when threads log at once.
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// Bounds the lines of events that repeat while a condition lasts: at most `burst`
/// lines of one event per `window`; the lines held back are counted, and the next
/// line let through carries their number (`suppressed=N`). Pure: the caller gives
/// the time (a monotonic `Instant`, so a wall clock step neither floods nor mutes).
#[derive(Debug)]
pub struct Repeats {
    burst: u32,
    window: std::time::Duration,
    events: std::collections::BTreeMap<String, Window>,
}

#[derive(Debug, Clone, Copy)]
struct Window {
    since: std::time::Instant,
    shown: u32,
    held: u64,
}

impl Repeats {
    pub fn new(burst: u32, window: std::time::Duration) -> Repeats {
        Repeats {
            burst,
            window,
            events: std::collections::BTreeMap::new(),
        }
    }

    /// Whether a line of `event` may be logged at `now`: `Some(held back since the
    /// last line)` when it may, `None` when it is held back (and counted).
    pub fn admit(&mut self, event: &str, now: std::time::Instant) -> Option<u64> {
        let w = self.events.entry(event.to_string()).or_insert(Window {
            since: now,
            shown: 0,
            held: 0,
        });
        if now.saturating_duration_since(w.since) >= self.window {
            w.since = now;
            w.shown = 0;
        }
        if w.shown >= self.burst {
            w.held += 1;
            return None;
        }
        w.shown += 1;
        Some(std::mem::take(&mut w.held))
    }
}

/// A value that prints `-` when absent, for optional fields.
pub struct Opt<'a, T: Display>(pub &'a Option<T>);

impl<T: Display> Display for Opt<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(v) => v.fmt(f),
            None => f.write_str("-"),
        }
    }
}

/// `log_at!(Level::Info, "attempt_started", attempt = id, profile = name)`.
#[macro_export]
macro_rules! log_at {
    ($level:expr, $msg:expr $(, $k:ident = $v:expr)* $(,)?) => {
        if $crate::logging::enabled($level) {
            $crate::logging::emit($level, $msg, &[$((stringify!($k), &$v as &dyn ::std::fmt::Display)),*]);
        }
    };
}

#[macro_export]
macro_rules! log_error { ($($t:tt)*) => { $crate::log_at!($crate::logging::Level::Error, $($t)*) }; }
#[macro_export]
macro_rules! log_warn { ($($t:tt)*) => { $crate::log_at!($crate::logging::Level::Warn, $($t)*) }; }
#[macro_export]
macro_rules! log_info { ($($t:tt)*) => { $crate::log_at!($crate::logging::Level::Info, $($t)*) }; }
#[macro_export]
macro_rules! log_debug { ($($t:tt)*) => { $crate::log_at!($crate::logging::Level::Debug, $($t)*) }; }

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secret::Secret;

    #[test]
    fn a_repeating_event_is_logged_a_few_times_a_window_and_says_what_it_held_back() {
        use std::time::{Duration, Instant};
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut r = Repeats::new(2, Duration::from_secs(60));
        // Issue 33: a full disk failed a store write about 4.6 times a second.
        let admitted: Vec<(u64, Option<u64>)> = (0..300)
            .map(|i| (i * 217, r.admit("store_write_failed", at(i * 217))))
            .filter(|(_, a)| a.is_some())
            .collect();
        assert_eq!(
            admitted,
            [
                (0, Some(0)),
                (217, Some(0)),
                (60_109, Some(275)),
                (60_326, Some(0))
            ]
        );
        // Events are counted apart.
        assert_eq!(r.admit("pass_failed", at(60_300)), Some(0));
    }

    #[test]
    fn logfmt_lines() {
        let token = Secret::new("ghp_abc");
        let line = format_line(
            Level::Warn,
            false,
            0,
            "github error",
            &[
                ("target", &"octo"),
                ("error", &"503 Service \"Unavailable\"\nretry"),
                ("token", &token),
                ("n", &3),
            ],
        );
        assert_eq!(
            line,
            r#"ts=1970-01-01T00:00:00Z level=warn msg="github error" target=octo error="503 Service \"Unavailable\"\nretry" token=*** n=3"#
        );
        assert!(!line.contains("ghp_abc"));
    }

    #[test]
    fn journal_prefix_replaces_timestamp() {
        let line = format_line(Level::Error, true, 0, "x", &[]);
        assert_eq!(line, "<3>level=error msg=x");
    }

    #[test]
    fn empty_values_are_quoted() {
        assert_eq!(
            format_line(Level::Info, true, 0, "m", &[("k", &"")]),
            r#"<6>level=info msg=m k="""#
        );
    }

    #[test]
    fn levels_parse() {
        assert_eq!(Level::parse("debug"), Some(Level::Debug));
        assert_eq!(Level::parse("loud"), None);
    }
}
