//! The Activity pane: what happened and what is wrong, newest first. Standing
//! conditions (the daemon down, a target's or profile's last error, an unfit host, a
//! scale set session another owner holds or that fails, a refused containment, a
//! runner install problem) come first; then every attempt's
//! steps and ends from the snapshot's attempts. Each error carries its remedy: one
//! line naming the command that fixes it, or shows why. [`events`] is pure.

use super::app::{Component, Ctx, Effect, Handled, movement, step_index};
use super::columns::{self, Col};
use super::fmt;
use super::keys::{self, Binding};
use super::model::Snapshot;
use super::runners::{clicked, first_shown};
use crate::domain::rerun::{Rerun, RerunState};
use crate::domain::{
    Attempt, AttemptState, Limit, NotReconciling, Outcome, ReasonKind, Reported, SessionPhase,
};
use crate::timefmt::Millis;
use crossterm::event::{KeyCode, KeyEvent};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Table, TableState, Wrap};

/// How many events the pane keeps: the newest.
pub const MAX_EVENTS: usize = 500;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Error,
    Warn,
    Info,
}

impl Level {
    pub fn word(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warn => "warn",
            Level::Info => "info",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// When it happened; `None` for a standing condition (true now).
    pub at: Option<Millis>,
    pub level: Level,
    /// What it is about: `host`, `daemon`, `target octo`, `profile linux`, `#12`.
    pub subject: String,
    pub text: String,
    /// The command that fixes it (or shows why), for errors and warnings.
    pub remedy: Option<String>,
    /// The attempt it is about: Enter opens it.
    pub attempt: Option<i64>,
}

const RM: &str = "runner-manager";

fn condition(level: Level, subject: String, text: String, remedy: String) -> Event {
    Event {
        at: None,
        level,
        subject,
        text,
        remedy: Some(remedy),
        attempt: None,
    }
}

/// Everything the pane lists, standing conditions first (errors before warnings),
/// then events newest first, at most [`MAX_EVENTS`].
pub fn events(snap: &Snapshot) -> Vec<Event> {
    let mut now = Vec::new();
    if !snap.daemon_alive() {
        now.push(condition(
            Level::Error,
            "daemon".into(),
            match &snap.heartbeat {
                Some(b) => format!(
                    "not running: last heartbeat {} ago",
                    fmt::age(snap.now - b.heartbeat_at)
                ),
                None => "not running (no daemon is up on this state directory)".into(),
            },
            format!("{RM} service status (or start it: {RM} daemon)"),
        ));
    }
    if snap.isolation.as_deref() == Some("refused") {
        now.push(condition(
            Level::Error,
            "host".into(),
            "containment refused: the daemon starts no runner".into(),
            format!("{RM} doctor"),
        ));
    }
    if let Some(p) = &snap.runner.problem {
        now.push(condition(
            Level::Warn,
            "runner install".into(),
            p.clone(),
            format!("{RM} runner install"),
        ));
    }
    for t in &snap.targets {
        if let Some(e) = t.status.as_ref().and_then(|s| s.last_error.as_ref()) {
            now.push(condition(
                Level::Error,
                format!("target {}", t.name),
                e.clone(),
                format!("{RM} target check {}", t.name),
            ));
        }
    }
    for p in &snap.profiles {
        let name = &p.policy.name;
        // A scale set session that is not ours only matters while a daemon runs.
        if let Some(sess) = p.session.as_ref().filter(|_| snap.daemon_alive()) {
            let why = sess.reason.clone().unwrap_or_default();
            let (text, remedy) = match sess.phase {
                Reported::Known(SessionPhase::Conflict) => (
                    format!("scale set session in conflict: {why}"),
                    format!("{RM} status (the session's owner and next try)"),
                ),
                Reported::Known(SessionPhase::Failing) => (
                    format!("scale set session failing: {why}"),
                    format!("{RM} target check {}", p.policy.target),
                ),
                _ => (String::new(), String::new()),
            };
            if !text.is_empty() {
                now.push(condition(
                    Level::Warn,
                    format!("profile {name}"),
                    text.trim_end().to_string(),
                    remedy,
                ));
            }
        }
        let Some(st) = &p.status else { continue };
        if let Some(e) = &st.last_error {
            now.push(condition(
                Level::Error,
                format!("profile {name}"),
                e.clone(),
                format!("{RM} profile show {name}"),
            ));
        }
        now.extend(limit_condition(snap, &p.policy.target, name, &st.limiting));
    }
    now.sort_by_key(|e| e.level);
    now.extend(newest_first(
        snap.attempts
            .iter()
            .flat_map(attempt_events)
            .chain(snap.reruns.iter().map(rerun_event))
            .collect(),
    ));
    now.truncate(MAX_EVENTS);
    now
}

/// The condition a profile's limiting factor stands for, if any (unfit, held by a
/// rate limit or a refused credential, paced).
fn limit_condition(
    snap: &Snapshot,
    target: &str,
    name: &str,
    limiting: &Reported<Limit>,
) -> Option<Event> {
    match limiting {
        Reported::Known(Limit::NotReconciling(NotReconciling::Unfit(why))) => Some(condition(
            Level::Error,
            format!("profile {name}"),
            format!("starts nothing: {why}"),
            format!("{RM} doctor"),
        )),
        Reported::Known(Limit::RateLimited(until)) => Some(condition(
            Level::Warn,
            format!("profile {name}"),
            format!(
                "rate limited for {} more",
                fmt::age(until.saturating_sub(snap.now))
            ),
            format!("{RM} target check {target} (the budget)"),
        )),
        Reported::Known(Limit::CredentialsRefused(since)) => Some(condition(
            Level::Error,
            format!("profile {name}"),
            format!(
                "credentials refused (401) for {}: starts nothing until the token is fixed",
                fmt::age(snap.now.saturating_sub(*since))
            ),
            format!(
                "{RM} target check {target}; fix the token file in place (see 'Replacing a token')"
            ),
        )),
        Reported::Known(Limit::Paced { waiting, next }) => Some(condition(
            Level::Info,
            format!("profile {name}"),
            format!(
                "paced: {waiting} starts wait for GitHub's per-minute limit (next in {})",
                fmt::age(next.saturating_sub(snap.now))
            ),
            "a scale set, or another credential, for larger bursts".to_string(),
        )),
        _ => None,
    }
}

/// Attempts' events newest first; within one millisecond (a runner that went idle and
/// took a job at once), the later step first, since each attempt's events come in the
/// order they happened.
fn newest_first(past: Vec<Event>) -> Vec<Event> {
    let mut past: Vec<(usize, Event)> = past.into_iter().enumerate().collect();
    past.sort_by(|(i, a), (j, b)| b.at.cmp(&a.at).then(j.cmp(i)));
    past.into_iter().map(|(_, e)| e).collect()
}

/// An attempt's steps, and its end with the remedy if it failed.
fn attempt_events(a: &Attempt) -> Vec<Event> {
    let subject = format!("#{} {}", a.id, a.profile);
    let mut out: Vec<Event> = a
        .history
        .iter()
        .filter(|c| !matches!(c.state, AttemptState::Finished | AttemptState::Failed))
        .map(|c| Event {
            at: Some(c.at),
            level: Level::Info,
            subject: subject.clone(),
            text: match (c.state, &a.job_name) {
                (AttemptState::Pending, _) => "asked for".into(),
                (AttemptState::Busy, Some(j)) => format!("busy: {j}"),
                (s, _) => s.as_str().to_string(),
            },
            remedy: None,
            attempt: Some(a.id),
        })
        .collect();
    if let (Some(o), Some(end)) = (a.outcome, a.ended_at) {
        let reason = a.reason.as_ref().map(ToString::to_string);
        let text = match &reason {
            Some(r) => format!("{}: {r}", o.as_str()),
            None => o.as_str().to_string(),
        };
        let failed = matches!(o, Outcome::Failed | Outcome::Orphaned);
        out.push(Event {
            at: Some(end),
            level: if failed { Level::Error } else { Level::Info },
            subject,
            text,
            remedy: failed.then(|| remedy(a)),
            attempt: Some(a.id),
        });
    }
    out
}

/// A lost job's re-run: waiting since the loss, or how it settled.
fn rerun_event(r: &Rerun) -> Event {
    let detail = r.detail.as_deref().unwrap_or("");
    let (level, text, remedy) = match r.state {
        RerunState::Waiting => (
            Level::Warn,
            format!("job lost ({}), re-run pending: {detail}", r.loss),
            None,
        ),
        RerunState::Rerun => (Level::Info, format!("lost job re-run: {detail}"), None),
        RerunState::Off => (
            Level::Warn,
            format!("job lost ({}), not re-run", r.loss),
            Some(format!("{RM} profile set {} rerun_lost=on", r.profile)),
        ),
        RerunState::Refused => (
            Level::Error,
            format!("lost job not re-run: {detail}"),
            Some(format!("{RM} target check {}", r.target)),
        ),
        _ => (Level::Warn, format!("lost job not re-run: {detail}"), None),
    };
    Event {
        at: Some(r.done_at.unwrap_or(r.lost_at)),
        level,
        subject: format!("#{} {}", r.attempt_id, r.profile),
        text,
        remedy,
        attempt: Some(r.attempt_id),
    }
}

/// The one command that fixes a failed attempt's cause, or shows it.
pub fn remedy(a: &Attempt) -> String {
    let (id, p, t) = (a.id, &a.profile, &a.target);
    let kind = a.reason.as_ref().map(|r| r.kind());
    match kind {
        Some(ReasonKind::JitConfig | ReasonKind::RunnerGroup) => format!("{RM} target check {t}"),
        Some(ReasonKind::Host) => format!("{RM} doctor"),
        Some(ReasonKind::VersionDeprecated | ReasonKind::RunnerUpdating) => {
            format!("{RM} runner install")
        }
        Some(ReasonKind::Oom) => format!("{RM} profile set {p} memory_max=SIZE (a larger one)"),
        Some(ReasonKind::JobTimeout) => {
            format!("{RM} profile set {p} job_timeout=DURATION (a longer one)")
        }
        Some(ReasonKind::BootstrapTimeout) => {
            format!("{RM} attempt show {id} (its log), then profile set {p} bootstrap_timeout=")
        }
        Some(ReasonKind::Spawn) => format!("{RM} doctor (the runner install and the host)"),
        _ => format!("{RM} attempt show {id} (its timeline and log say why)"),
    }
}

/// The Activity pane's own state: the selected event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ActivityView {
    pub index: usize,
    /// Errors and warnings only (`!` toggles).
    pub problems_only: bool,
}

impl ActivityView {
    pub fn shown(&self, snap: &Snapshot) -> Vec<Event> {
        let mut ev = events(snap);
        if self.problems_only {
            ev.retain(|e| e.level != Level::Info);
        }
        ev
    }

    /// The selected event's remedy, else its text, for `c`.
    pub fn copy_text(&self, snap: &Snapshot) -> Option<String> {
        let ev = self.shown(snap);
        let e = ev.get(self.index)?;
        Some(e.remedy.clone().unwrap_or_else(|| e.text.clone()))
    }

    pub fn click(&mut self, row: u16, height: u16, snap: &Snapshot) {
        let len = self.shown(snap).len();
        // The list takes the pane less the remedy's box.
        if let Some(i) = clicked(row, height.saturating_sub(REMEDY_HEIGHT), self.index, len) {
            self.index = i;
        }
    }
}

/// The box under the list that shows the selected event whole, with its remedy.
const REMEDY_HEIGHT: u16 = 4;

/// The Activity pane's own keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cmd {
    ProblemsOnly,
    Open,
}

const KEYS: &[Binding<Cmd>] = &[
    Binding {
        keys: &[KeyCode::Char('!')],
        cmd: Cmd::ProblemsOnly,
        help: "problems only, or everything",
    },
    Binding {
        keys: &[KeyCode::Enter, KeyCode::Char('o')],
        cmd: Cmd::Open,
        help: "open the event's attempt",
    },
];

impl Component for ActivityView {
    fn event(&mut self, key: KeyEvent, snap: &Snapshot) -> Handled {
        let ev = self.shown(snap);
        if let Some(by) = movement(&key, 10) {
            self.index = step_index(self.index, by, ev.len());
            return Handled::Yes;
        }
        match keys::find(KEYS, &key) {
            Some(Cmd::ProblemsOnly) => {
                self.problems_only = !self.problems_only;
                self.index = 0;
                Handled::Yes
            }
            Some(Cmd::Open) => match ev.get(self.index).and_then(|e| e.attempt) {
                Some(id) if snap.attempt(id).is_some() => Handled::Then(Effect::OpenDetail(id)),
                _ => Handled::Yes,
            },
            None => Handled::No,
        }
    }

    fn keys(&self) -> Vec<(String, &'static str)> {
        keys::help_lines(KEYS)
    }

    fn draw(&self, f: &mut Frame, area: Rect, cx: &Ctx) {
        let (snap, th) = (cx.snap, &cx.theme);
        let ev = self.shown(snap);
        let index = self.index.min(ev.len().saturating_sub(1));
        let [list, detail] =
            Layout::vertical([Constraint::Fill(1), Constraint::Length(REMEDY_HEIGHT)]).areas(area);
        let cols = [
            Col::fixed("WHEN"),
            Col::fixed("LEVEL"),
            Col::shrink("ABOUT", 8),
            Col::grow("WHAT", 12),
        ];
        let height = list.height.saturating_sub(3) as usize;
        let first = first_shown(index, list.height);
        let cells: Vec<Vec<Span>> = ev
            .iter()
            .skip(first)
            .take(height)
            .map(|e| {
                let level = match e.level {
                    Level::Error => th.bad(),
                    Level::Warn => th.waiting(),
                    Level::Info => th.quiet(),
                };
                vec![
                    Span::raw(match e.at {
                        Some(t) => format!("{} ago", fmt::age(snap.now - t)),
                        None => "now".into(),
                    }),
                    Span::styled(e.level.word(), level),
                    Span::raw(e.subject.clone()),
                    Span::raw(e.text.clone()),
                ]
            })
            .collect();
        let (header, body, widths) = columns::table(&cols, cells, list.width.saturating_sub(2));
        let problems = ev.iter().filter(|e| e.level != Level::Info).count();
        let title = format!(
            " Activity: {} events, {problems} errors and warnings{} · ! {} ",
            ev.len(),
            if self.problems_only {
                " (only those)"
            } else {
                ""
            },
            if self.problems_only {
                "shows all"
            } else {
                "shows problems only"
            }
        );
        let table = Table::new(body, widths)
            .header(header.style(th.header()))
            .row_highlight_style(th.selected())
            .block(th.block().title(title));
        let selected = (!ev.is_empty()).then_some(index - first);
        let mut state = TableState::default().with_selected(selected);
        f.render_stateful_widget(table, list, &mut state);
        let lines = match ev.get(index) {
            Some(e) => {
                let mut l = vec![Line::from(vec![
                    Span::styled(format!("{} ", e.subject), th.title()),
                    Span::raw(e.text.clone()),
                ])];
                if let Some(r) = &e.remedy {
                    l.push(Line::from(vec![
                        Span::styled("fix: ", th.header()),
                        Span::raw(r.clone()),
                    ]));
                }
                l
            }
            None => vec![Line::raw("nothing happened yet")],
        };
        f.render_widget(
            Paragraph::new(lines)
                .wrap(Wrap { trim: true })
                .block(th.block().title(" Selected · c copies its fix ")),
            detail,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Reason;

    fn failed(kind: &str) -> Attempt {
        let mut a = Attempt::new(7, "linux", "octo", "h", 1_000);
        a.step(AttemptState::Starting, 2_000).unwrap();
        a.end(Outcome::Failed, Some(Reason::parse(kind)), 3_000)
            .unwrap();
        a
    }

    #[test]
    fn a_failed_attempt_is_an_error_with_the_command_that_fixes_it() {
        let ev = attempt_events(&failed("jit_config: 422 no"));
        let end = ev.last().unwrap();
        assert_eq!(end.level, Level::Error);
        assert_eq!(end.at, Some(3_000));
        assert_eq!(
            end.remedy.as_deref(),
            Some("runner-manager target check octo")
        );
        assert!(ev[..ev.len() - 1].iter().all(|e| e.remedy.is_none()));
        assert_eq!(
            remedy(&failed("oom")),
            "runner-manager profile set linux memory_max=SIZE (a larger one)"
        );
        assert!(remedy(&failed("exited_during_job (exit 1)")).contains("attempt show 7"));
    }

    #[test]
    fn a_lost_job_shows_how_its_rerun_went_with_the_fix_when_it_was_not() {
        let mut r = Rerun {
            attempt_id: 9,
            target: "octo".into(),
            profile: "linux".into(),
            runner_name: "rm-h-9".into(),
            repo: Some("octo/app".into()),
            run_id: Some(1),
            job_name: Some("build".into()),
            job_id: Some(2),
            loss: "killed".into(),
            lost_at: 5_000,
            state: RerunState::Waiting,
            tries: 1,
            next_at: 10_000,
            detail: Some("GitHub shows the job in_progress".into()),
            done_at: None,
        };
        let e = rerun_event(&r);
        assert_eq!(
            (e.level, e.at, e.attempt),
            (Level::Warn, Some(5_000), Some(9))
        );
        assert!(
            e.text.starts_with("job lost (killed), re-run pending"),
            "{}",
            e.text
        );
        r.state = RerunState::Rerun;
        r.done_at = Some(8_000);
        r.detail = Some("GitHub queued the job again".into());
        let e = rerun_event(&r);
        assert_eq!((e.level, e.at), (Level::Info, Some(8_000)));
        assert_eq!(e.text, "lost job re-run: GitHub queued the job again");
        r.state = RerunState::Off;
        assert_eq!(
            rerun_event(&r).remedy.as_deref(),
            Some("runner-manager profile set linux rerun_lost=on")
        );
        r.state = RerunState::Refused;
        let e = rerun_event(&r);
        assert_eq!(e.level, Level::Error);
        assert_eq!(
            e.remedy.as_deref(),
            Some("runner-manager target check octo")
        );
    }

    #[test]
    fn steps_of_one_millisecond_are_listed_newest_first_too() {
        let mut a = Attempt::new(57, "linux", "octo", "h", 1_000);
        a.step(AttemptState::Starting, 2_000).unwrap();
        a.step(AttemptState::Idle, 3_000).unwrap();
        a.step(AttemptState::Busy, 3_000).unwrap();
        let texts: Vec<String> = newest_first(attempt_events(&a))
            .into_iter()
            .map(|e| e.text)
            .collect();
        assert_eq!(texts, ["busy", "idle", "starting", "asked for"]);
    }

    #[test]
    fn a_clean_end_is_news_not_an_error() {
        let mut a = Attempt::new(8, "linux", "octo", "h", 1_000);
        a.step(AttemptState::Starting, 2_000).unwrap();
        a.end(
            Outcome::ExitedIdleWithoutWork,
            Some(Reason::parse("idle_timeout")),
            3_000,
        )
        .unwrap();
        let end = attempt_events(&a).pop().unwrap();
        assert_eq!((end.level, end.remedy), (Level::Info, None));
    }
}
