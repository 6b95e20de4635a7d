//! The Detail view: one attempt's fields with a sparkline of its live meters (RSS and
//! CPU over the last 60 samples), its timeline (each state change with its time) and
//! the tail of its runner log, following the end by default; Enter or `l` opens the
//! whole log (read with a bound by `logfile`), scrollable with the list keys.

use super::app::{Component, Ctx, Effect, Handled, movement};
use super::fmt;
use super::keys::{self, Binding};
use super::logfile::LogText;
use super::model::Snapshot;
use super::theme::Theme;
use crate::domain::Attempt;
use crate::meter::MeterPoint;
use crate::timefmt::format_rfc3339;
use crossterm::event::{KeyCode, KeyEvent};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};
use std::cell::Cell;

/// How many lines of the runner log the view reads.
pub const LOG_LINES: usize = 500;

#[derive(Debug, Clone, PartialEq)]
pub struct DetailView {
    pub id: i64,
    /// Lines scrolled up from the end of the log; 0 follows the end.
    pub scroll: usize,
    pub log: Vec<String>,
    /// The live meter's last points, oldest first (none once the attempt ended).
    pub points: Vec<MeterPoint>,
    /// The whole log, while the log view is open.
    pub full: Option<FullLog>,
}

/// The whole-log view: the text read and the first line shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FullLog {
    pub text: LogText,
    pub top: usize,
    /// The lines the last frame had room for, so paging and the end are right.
    pub page: Cell<usize>,
}

impl FullLog {
    /// Opens at the end, where the tail view was.
    pub fn new(text: LogText) -> FullLog {
        FullLog {
            top: usize::MAX,
            text,
            page: Cell::new(0),
        }
    }

    /// The first line shown, within the log.
    pub fn first(&self) -> usize {
        self.top
            .min(self.text.lines.len().saturating_sub(self.page.get().max(1)))
    }
}

impl DetailView {
    pub fn new(id: i64) -> DetailView {
        DetailView {
            id,
            scroll: 0,
            log: Vec::new(),
            points: Vec::new(),
            full: None,
        }
    }
}

/// The widest sparkline drawn: the ring holds 60 points.
const SPARK_MAX: usize = 60;

/// A sparkline as text: the last `width` values, each an eighth-block against the
/// largest of them (so a series is drawn whatever its size).
pub fn spark(values: &[f64], width: usize) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let shown = &values[values.len().saturating_sub(width)..];
    let top = shown.iter().copied().fold(0.0_f64, f64::max);
    shown
        .iter()
        .map(|v| {
            if top <= 0.0 {
                BARS[0]
            } else {
                BARS[((v.max(0.0) / top) * 7.0).round() as usize]
            }
        })
        .collect()
}

/// `10:00:05` of a timestamp (the date is in the fields above).
fn clock(ms: crate::timefmt::Millis) -> String {
    format_rfc3339(ms)[11..19].to_string()
}

/// An open attempt's keys: the whole log, and back (from the whole log to the detail,
/// from the detail to its pane: `App` closes it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmd {
    WholeLog,
    Back,
}

pub const KEYS: &[Binding<Cmd>] = &[
    Binding {
        keys: &[KeyCode::Enter, KeyCode::Char('l'), KeyCode::Char('o')],
        cmd: Cmd::WholeLog,
        help: "the whole log",
    },
    Binding {
        keys: &[
            KeyCode::Esc,
            KeyCode::Left,
            KeyCode::Char('h'),
            KeyCode::Backspace,
        ],
        cmd: Cmd::Back,
        help: "back",
    },
];

impl Component for DetailView {
    fn keys(&self) -> Vec<(String, &'static str)> {
        keys::help_lines(KEYS)
    }

    fn event(&mut self, key: KeyEvent, _snap: &Snapshot) -> Handled {
        if let Some(full) = self.full.as_mut() {
            let page = full.page.get().max(1);
            if let Some(by) = movement(&key, page as isize) {
                let last = full.text.lines.len().saturating_sub(page);
                full.top = (full.first() as isize + by).clamp(0, last as isize) as usize;
                return Handled::Yes;
            }
            return match keys::find(KEYS, &key) {
                Some(Cmd::Back) => {
                    self.full = None;
                    Handled::Yes
                }
                // Already the whole log: l is the app's next pane, as elsewhere.
                Some(Cmd::WholeLog) | None => Handled::No,
            };
        }
        // Back from the detail itself is the app's: it holds the detail.
        if keys::find(KEYS, &key) == Some(Cmd::WholeLog) {
            return Handled::Then(Effect::OpenLog(self.id));
        }
        match movement(&key, 10) {
            // Down moves toward the end of the log, so it scrolls back less.
            Some(by) => {
                let max = self.log.len() as isize;
                self.scroll = (self.scroll as isize - by).clamp(0, max) as usize;
                Handled::Yes
            }
            None => Handled::No,
        }
    }

    fn draw(&self, f: &mut Frame, area: Rect, cx: &Ctx) {
        let (snap, th) = (cx.snap, &cx.theme);
        let Some(a) = snap.attempt(self.id) else {
            f.render_widget(
                Paragraph::new(format!(
                    "attempt {} is no longer in the store (pruned); Esc to go back",
                    self.id
                ))
                .block(Block::bordered()),
                area,
            );
            return;
        };
        if let Some(full) = &self.full {
            draw_full(f, area, a.id, full);
            return;
        }
        let info = self.fields(a, snap, th, area.width);
        let timeline = timeline(a, th);
        let top_h = (info.len().max(timeline.len()) as u16 + 2).min(area.height / 2);
        let [top, log] =
            Layout::vertical([Constraint::Length(top_h), Constraint::Fill(1)]).areas(area);
        let [left, right] =
            Layout::horizontal([Constraint::Fill(1), Constraint::Length(36)]).areas(top);
        f.render_widget(
            Paragraph::new(info).block(Block::bordered().title(format!(" Attempt {} ", a.id))),
            left,
        );
        // The latest changes matter most: when the box is short, show the end.
        let tl_h = right.height.saturating_sub(2) as usize;
        let skip = timeline.len().saturating_sub(tl_h);
        f.render_widget(
            Paragraph::new(timeline[skip..].to_vec()).block(Block::bordered().title(" Timeline ")),
            right,
        );
        self.draw_log_tail(f, log);
    }
}

/// One line of the fields: the name in 8 columns, then the value.
fn field(th: &Theme, k: &'static str, v: Span<'static>) -> Line<'static> {
    Line::from(vec![Span::styled(format!("{k:<8}"), th.title()), v])
}

impl DetailView {
    /// The attempt's fields, its usage (live meters with sparklines, or what the end
    /// recorded) among them, for a view `width` columns wide.
    fn fields(&self, a: &Attempt, snap: &Snapshot, th: &Theme, width: u16) -> Vec<Line<'static>> {
        let outcome = match (a.outcome, &a.reason) {
            (Some(o), Some(r)) => format!("{}: {r}", o.as_str()),
            (Some(o), None) => o.as_str().to_string(),
            (None, Some(r)) => r.to_string(),
            (None, None) => "-".into(),
        };
        let mut info = vec![
            field(
                th,
                "state",
                Span::styled(
                    format!(
                        "{} for {}",
                        a.state_word(),
                        fmt::age(snap.now - a.state_since())
                    ),
                    th.state(a.state),
                ),
            ),
            field(
                th,
                "profile",
                Span::raw(format!("{} ({})", a.profile, a.target)),
            ),
            field(th, "runner", Span::raw(a.runner_name.clone())),
            field(
                th,
                "job",
                Span::raw(a.job_name.clone().unwrap_or_else(|| "-".into())),
            ),
            field(
                th,
                "process",
                Span::raw(format!(
                    "pid {} exit {}",
                    fmt::or_dash(a.pid, |p| p.to_string()),
                    fmt::or_dash(a.exit_code, |c| c.to_string())
                )),
            ),
        ];
        info.extend(self.usage(a, snap, th, width));
        info.push(field(th, "outcome", Span::raw(outcome)));
        info.push(field(
            th,
            "created",
            Span::raw(format_rfc3339(a.created_at)),
        ));
        info
    }

    /// A live runner: RSS and CPU each on a line, a sparkline of its last samples
    /// (each to its own top) before the figures now; else what the end recorded.
    fn usage(&self, a: &Attempt, snap: &Snapshot, th: &Theme, width: u16) -> Vec<Line<'static>> {
        // The 8 columns of the name, 36 of the timeline and 2 of borders are not ours.
        let room = width.saturating_sub(36 + 2 + 8) as usize;
        let with_spark = |values: Vec<f64>, text: String| {
            let w = room.saturating_sub(text.chars().count() + 1).min(SPARK_MAX);
            let line = spark(&values, w);
            if line.is_empty() {
                text
            } else {
                format!("{line} {text}")
            }
        };
        let Some(m) = snap.meters.get(&a.id) else {
            return vec![field(
                th,
                "usage",
                Span::raw(format!(
                    "peak rss {} cpu {}",
                    fmt::or_dash(a.peak_rss_bytes, fmt::bytes),
                    fmt::or_dash(a.cpu_millis, fmt::cpu)
                )),
            )];
        };
        let rss = with_spark(
            self.points.iter().map(|p| p.rss_bytes as f64).collect(),
            format!(
                "{} (peak {})",
                fmt::bytes(m.rss_bytes),
                fmt::bytes(m.peak_rss_bytes)
            ),
        );
        let cpu = with_spark(
            self.points.iter().map(|p| p.cpu_percent).collect(),
            format!(
                "{} {} · {} procs",
                fmt::cpu(m.cpu_millis),
                crate::units::percent(m.cpu_percent),
                m.processes
            ),
        );
        vec![
            field(th, "rss", Span::styled(rss, th.series_b())),
            field(th, "cpu", Span::styled(cpu, th.series_a())),
        ]
    }

    /// The runner log's tail, `scroll` lines up from the end (0 follows the end).
    fn draw_log_tail(&self, f: &mut Frame, log: Rect) {
        let h = log.height.saturating_sub(2) as usize;
        let n = self.log.len();
        let scroll = self.scroll.min(n.saturating_sub(h));
        let start = n.saturating_sub(h + scroll);
        let lines: Vec<Line> = self.log[start..(start + h).min(n)]
            .iter()
            .map(|l| Line::raw(l.clone()))
            .collect();
        let title = if n == 0 {
            " Runner log: empty ".to_string()
        } else if scroll == 0 {
            format!(" Runner log: last {n} lines, following the end · Enter whole log ")
        } else {
            format!(" Runner log: {scroll} lines up of {n} · G to follow · Enter whole log ")
        };
        f.render_widget(
            Paragraph::new(lines).block(Block::bordered().title(title)),
            log,
        );
    }
}

/// Each state change with its time and its offset from the start, then `cleaned`
/// when the attempt's files are gone.
fn timeline(a: &Attempt, th: &Theme) -> Vec<Line<'static>> {
    let cleaned = a.cleaned.then(|| (a.state_since(), "cleaned", a.state));
    a.history
        .iter()
        .map(|h| (h.at, h.state.as_str(), h.state))
        .chain(cleaned)
        .map(|(at, word, state)| {
            Line::from(vec![
                Span::raw(clock(at)),
                Span::styled(
                    format!(" {:>7} ", format!("+{}", fmt::age(at - a.created_at))),
                    th.quiet(),
                ),
                Span::styled(word, th.state(state)),
            ])
        })
        .collect()
}

/// The whole log, a page at a time, with where the page is in it.
fn draw_full(f: &mut Frame, area: Rect, id: i64, full: &FullLog) {
    let h = area.height.saturating_sub(2) as usize;
    full.page.set(h);
    let lines = &full.text.lines;
    let first = full.first();
    let shown: Vec<Line> = lines
        .iter()
        .skip(first)
        .take(h)
        .map(|l| Line::raw(l.clone()))
        .collect();
    let mut title = if lines.is_empty() {
        format!(" Log of attempt {id}: empty ")
    } else {
        format!(
            " Log of attempt {id}: lines {}-{} of {} ",
            first + 1,
            (first + h).min(lines.len()),
            lines.len()
        )
    };
    if full.text.skipped_bytes > 0 {
        title.push_str(&format!(
            "(first {} not read) ",
            fmt::bytes(full.text.skipped_bytes)
        ));
    }
    title.push_str("· j/k PgUp/PgDn g/G · Esc back ");
    f.render_widget(
        Paragraph::new(shown).block(Block::bordered().title(title)),
        area,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparks_scale_to_their_own_top_and_keep_the_last_points() {
        assert_eq!(spark(&[0.0, 1.0, 2.0, 4.0], 4), "▁▃▅█");
        assert_eq!(spark(&[9.0, 0.0, 0.0], 2), "▁▁", "all zero: a flat line");
        assert_eq!(spark(&[1.0, 2.0, 3.0], 2), "▆█", "the newest fit");
        assert_eq!(spark(&[], 5), "");
    }
}
