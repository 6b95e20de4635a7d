//! The Detail view: one attempt's fields, its timeline (each state change with its
//! time) and the tail of its runner log, scrollable, following the end by default.

use super::app::{Component, Ctx, Handled, movement};
use super::fmt;
use super::model::Snapshot;
use crate::timefmt::format_rfc3339;
use crossterm::event::KeyEvent;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};

/// How many lines of the runner log the view reads.
pub const LOG_LINES: usize = 500;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DetailView {
    pub id: i64,
    /// Lines scrolled up from the end of the log; 0 follows the end.
    pub scroll: usize,
    pub log: Vec<String>,
}

impl DetailView {
    pub fn new(id: i64) -> DetailView {
        DetailView {
            id,
            scroll: 0,
            log: Vec::new(),
        }
    }
}

/// `10:00:05` of a timestamp (the date is in the fields above).
fn clock(ms: crate::timefmt::Millis) -> String {
    format_rfc3339(ms)[11..19].to_string()
}

impl Component for DetailView {
    fn event(&mut self, key: KeyEvent, _snap: &Snapshot) -> Handled {
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
        let field = |k: &'static str, v: Span<'static>| {
            Line::from(vec![Span::styled(format!("{k:<8}"), th.title()), v])
        };
        let outcome = match (a.outcome, &a.reason) {
            (Some(o), Some(r)) => format!("{}: {r}", o.as_str()),
            (Some(o), None) => o.as_str().to_string(),
            (None, Some(r)) => r.to_string(),
            (None, None) => "-".into(),
        };
        let info = vec![
            field(
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
                "profile",
                Span::raw(format!("{} ({})", a.profile, a.target)),
            ),
            field("runner", Span::raw(a.runner_name.clone())),
            field(
                "job",
                Span::raw(a.job_name.clone().unwrap_or_else(|| "-".into())),
            ),
            field(
                "process",
                Span::raw(format!(
                    "pid {} exit {}",
                    fmt::or_dash(a.pid, |p| p.to_string()),
                    fmt::or_dash(a.exit_code, |c| c.to_string())
                )),
            ),
            field(
                "usage",
                Span::raw(match snap.meters.get(&a.id) {
                    Some(m) => format!(
                        "rss {} (peak {}) cpu {} {} procs {}",
                        fmt::bytes(m.rss_bytes),
                        fmt::bytes(m.peak_rss_bytes),
                        fmt::cpu(m.cpu_millis),
                        crate::meter::units::percent(m.cpu_percent),
                        m.processes
                    ),
                    None => format!(
                        "peak rss {} cpu {}",
                        fmt::or_dash(a.peak_rss_bytes, fmt::bytes),
                        fmt::or_dash(a.cpu_millis, fmt::cpu)
                    ),
                }),
            ),
            field("outcome", Span::raw(outcome)),
            field("created", Span::raw(format_rfc3339(a.created_at))),
        ];
        let cleaned = a.cleaned.then(|| (a.state_since(), "cleaned", a.state));
        let timeline: Vec<Line> = a
            .history
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
            .collect();
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
            format!(" Runner log: last {n} lines, following the end ")
        } else {
            format!(" Runner log: {scroll} lines up of {n} · G to follow ")
        };
        f.render_widget(
            Paragraph::new(lines).block(Block::bordered().title(title)),
            log,
        );
    }
}
