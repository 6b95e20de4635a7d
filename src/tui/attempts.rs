//! The Attempts pane: live and recent attempts, filtered with `/`, sorted with `s`,
//! the selection following its attempt id across refreshes.

use super::app::{Component, Ctx, Effect, Handled, movement, step_index};
use super::fmt;
use super::model::Snapshot;
use crate::domain::Attempt;
use crossterm::event::{KeyCode, KeyEvent};
use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Cell, Row, Table, TableState};

/// The orders `s` cycles through.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Sort {
    #[default]
    Newest,
    State,
    Profile,
    Rss,
    Cpu,
}

impl Sort {
    pub fn next(self) -> Sort {
        match self {
            Sort::Newest => Sort::State,
            Sort::State => Sort::Profile,
            Sort::Profile => Sort::Rss,
            Sort::Rss => Sort::Cpu,
            Sort::Cpu => Sort::Newest,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Sort::Newest => "newest",
            Sort::State => "state",
            Sort::Profile => "profile",
            Sort::Rss => "rss",
            Sort::Cpu => "cpu",
        }
    }
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct AttemptsView {
    /// The selected attempt's id: the selection follows it, not its row.
    pub selected: Option<i64>,
    index: usize,
    pub filter: String,
    /// Typing into the filter.
    pub editing: bool,
    pub sort: Sort,
}

/// True when the attempt matches every word of the filter (case-insensitive, each
/// word anywhere in its id, profile, state, job, runner name, outcome or reason).
pub fn matches(a: &Attempt, filter: &str) -> bool {
    let hay = format!(
        "{} {} {} {} {} {} {}",
        a.id,
        a.profile,
        a.state,
        a.job_name.as_deref().unwrap_or(""),
        a.runner_name,
        a.outcome.map_or("", |o| o.as_str()),
        a.reason
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default()
    )
    .to_lowercase();
    filter
        .to_lowercase()
        .split_whitespace()
        .all(|w| hay.contains(w))
}

impl AttemptsView {
    /// The rows shown, in order.
    pub fn visible<'a>(&self, snap: &'a Snapshot) -> Vec<&'a Attempt> {
        let filter = self.filter.trim();
        let mut rows: Vec<&Attempt> = snap
            .attempts
            .iter()
            .filter(|a| filter.is_empty() || matches(a, filter))
            .collect();
        match self.sort {
            Sort::Newest => rows.sort_by_key(|a| std::cmp::Reverse(a.id)),
            // Live first (by the life's order), then ended; newest first within.
            Sort::State => {
                rows.sort_by_key(|a| (a.state.is_ended(), a.state, std::cmp::Reverse(a.id)))
            }
            Sort::Profile => rows.sort_by(|a, b| a.profile.cmp(&b.profile).then(b.id.cmp(&a.id))),
            Sort::Rss => {
                rows.sort_by_key(|a| (std::cmp::Reverse(a.peak_rss_bytes), std::cmp::Reverse(a.id)))
            }
            Sort::Cpu => {
                rows.sort_by_key(|a| (std::cmp::Reverse(a.cpu_millis), std::cmp::Reverse(a.id)))
            }
        }
        rows
    }

    /// Re-finds the selected attempt after a refresh, a filter or a sort: same id if it
    /// is still shown, else the row where it was.
    pub fn follow(&mut self, snap: &Snapshot) {
        let rows = self.visible(snap);
        if let Some(i) = self
            .selected
            .and_then(|id| rows.iter().position(|a| a.id == id))
        {
            self.index = i;
        } else {
            self.index = self.index.min(rows.len().saturating_sub(1));
            self.selected = rows.get(self.index).map(|a| a.id);
        }
    }

    pub fn start_filter(&mut self) {
        self.editing = true;
    }

    pub fn set_filter(&mut self, filter: &str, snap: &Snapshot) {
        self.filter = filter.to_string();
        self.editing = false;
        self.follow(snap);
    }
}

impl Component for AttemptsView {
    fn event(&mut self, key: KeyEvent, snap: &Snapshot) -> Handled {
        if self.editing {
            match key.code {
                KeyCode::Char(c) => self.filter.push(c),
                KeyCode::Backspace => {
                    self.filter.pop();
                }
                KeyCode::Enter => self.editing = false,
                KeyCode::Esc => {
                    self.filter.clear();
                    self.editing = false;
                }
                _ => {}
            }
            self.follow(snap);
            return Handled::Yes;
        }
        if let Some(by) = movement(&key, 10) {
            let rows = self.visible(snap);
            self.index = step_index(self.index, by, rows.len());
            self.selected = rows.get(self.index).map(|a| a.id);
            return Handled::Yes;
        }
        match key.code {
            KeyCode::Char('s') => {
                self.sort = self.sort.next();
                self.follow(snap);
                Handled::Yes
            }
            KeyCode::Esc if !self.filter.is_empty() => {
                self.filter.clear();
                self.follow(snap);
                Handled::Yes
            }
            KeyCode::Enter => match self.selected {
                Some(id) => Handled::Then(Effect::OpenDetail(id)),
                None => Handled::Yes,
            },
            _ => Handled::No,
        }
    }

    fn draw(&self, f: &mut Frame, area: Rect, cx: &Ctx) {
        let (snap, th) = (cx.snap, &cx.theme);
        let rows = self.visible(snap);
        let wide = area.width >= 120;
        let mut header = vec!["ID", "PROFILE", "STATE", "AGE", "JOB"];
        if wide {
            header.push("RUNNER");
        }
        header.extend(["RSS", "CPU", "OUTCOME"]);
        // Only the rows that fit are built: with hundreds of attempts, formatting the
        // hidden ones is most of a frame. The window keeps the selection in view.
        let height = area.height.saturating_sub(3) as usize;
        let selected = self
            .selected
            .map(|_| self.index.min(rows.len().saturating_sub(1)));
        let first = selected.map_or(0, |i| (i + 1).saturating_sub(height));
        let table_rows: Vec<Row> = rows
            .iter()
            .skip(first)
            .take(height)
            .map(|a| {
                let mut cells = vec![
                    Cell::from(a.id.to_string()),
                    Cell::from(a.profile.clone()),
                    Cell::from(Span::styled(a.state_word(), th.state(a.state))),
                    Cell::from(fmt::age(a.age_millis(snap.now))),
                    Cell::from(a.job_name.clone().unwrap_or_else(|| "-".into())),
                ];
                if wide {
                    cells.push(Cell::from(a.runner_name.clone()));
                }
                // A live runner's RSS now; an ended one's peak.
                let rss = snap
                    .meters
                    .get(&a.id)
                    .map(|m| m.rss_bytes)
                    .or(a.peak_rss_bytes);
                cells.push(Cell::from(fmt::or_dash(rss, fmt::bytes)));
                cells.push(Cell::from(fmt::or_dash(a.cpu_millis, fmt::cpu)));
                let outcome = match (a.outcome, &a.reason) {
                    (Some(o), Some(r)) => format!("{}: {r}", o.as_str()),
                    (Some(o), None) => o.as_str().to_string(),
                    (None, Some(r)) => r.to_string(),
                    (None, None) => "-".into(),
                };
                let style = match a.outcome {
                    Some(crate::domain::Outcome::Failed | crate::domain::Outcome::Orphaned) => {
                        th.bad()
                    }
                    _ => th.quiet(),
                };
                cells.push(Cell::from(Span::styled(outcome, style)));
                Row::new(cells)
            })
            .collect();
        let mut widths = vec![
            Constraint::Length(5),
            Constraint::Length(10),
            Constraint::Length(10),
            Constraint::Length(6),
            Constraint::Fill(1),
        ];
        if wide {
            widths.push(Constraint::Length(16));
        }
        widths.extend([
            Constraint::Length(5),
            Constraint::Length(6),
            Constraint::Fill(1),
        ]);
        let live = snap.attempts.iter().filter(|a| a.state.is_live()).count();
        let mut title = vec![Span::raw(format!(
            " Attempts: {} shown, {live} live · sort {} ",
            rows.len(),
            self.sort.as_str()
        ))];
        if self.editing || !self.filter.is_empty() {
            let cursor = if self.editing { "_" } else { "" };
            title.push(Span::styled(
                format!("/{}{cursor} ", self.filter),
                th.waiting(),
            ));
        }
        let table = Table::new(table_rows, widths)
            .header(Row::new(header).style(th.header()))
            .row_highlight_style(th.selected())
            .block(Block::bordered().title(Line::from(title)));
        let mut state = TableState::default().with_selected(self.selected.map(|_| self.index));
        f.render_stateful_widget(table, area, &mut state);
    }
}
