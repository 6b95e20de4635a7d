//! The Attempts pane: live and recent attempts, filtered with `/`, sorted with `s`,
//! the selection following its attempt id across refreshes.

use super::app::{Component, Ctx, Effect, Handled, movement, step_index, type_filter};
use super::columns::{self, Col};
use super::fmt;
use super::keys::{self, Binding};
use super::model::Snapshot;
use crate::domain::Attempt;
use crossterm::event::{KeyCode, KeyEvent};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Table, TableState};

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

    /// A click on the `row`th line of the pane (0: its top border).
    pub fn click(&mut self, row: u16, height: u16, snap: &Snapshot) {
        let rows = self.visible(snap);
        let index = self.selected.map_or(0, |_| self.index);
        if let Some(i) = super::runners::clicked(row, height, index, rows.len()) {
            self.index = i;
            self.selected = rows.get(i).map(|a| a.id);
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

/// The Attempts pane's own keys (`/`, which starts the filter from any pane, is the
/// app's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cmd {
    Sort,
    ClearFilter,
    Open,
}

const KEYS: &[Binding<Cmd>] = &[
    Binding {
        keys: &[KeyCode::Char('s')],
        cmd: Cmd::Sort,
        help: "sort attempts: newest state profile rss cpu",
    },
    Binding {
        keys: &[KeyCode::Esc],
        cmd: Cmd::ClearFilter,
        help: "clear the filter",
    },
    Binding {
        keys: &[KeyCode::Enter, KeyCode::Char('o')],
        cmd: Cmd::Open,
        help: "open the attempt's detail",
    },
];

impl Component for AttemptsView {
    fn event(&mut self, key: KeyEvent, snap: &Snapshot) -> Handled {
        if self.editing {
            type_filter(&mut self.filter, &mut self.editing, key);
            self.follow(snap);
            return Handled::Yes;
        }
        if let Some(by) = movement(&key, 10) {
            let rows = self.visible(snap);
            self.index = step_index(self.index, by, rows.len());
            self.selected = rows.get(self.index).map(|a| a.id);
            return Handled::Yes;
        }
        match keys::find(KEYS, &key) {
            Some(Cmd::Sort) => {
                self.sort = self.sort.next();
                self.follow(snap);
                Handled::Yes
            }
            Some(Cmd::ClearFilter) => {
                self.filter.clear();
                self.follow(snap);
                Handled::Yes
            }
            Some(Cmd::Open) => match self.selected {
                Some(id) => Handled::Then(Effect::OpenDetail(id)),
                None => Handled::Yes,
            },
            None => Handled::No,
        }
    }

    fn keys(&self) -> Vec<(String, &'static str)> {
        keys::help_lines(KEYS)
    }

    fn draw(&self, f: &mut Frame, area: Rect, cx: &Ctx) {
        let (snap, th) = (cx.snap, &cx.theme);
        let rows = self.visible(snap);
        let wide = area.width >= 120;
        let mut cols = vec![
            Col::fixed("ID"),
            Col::shrink("PROFILE", 7),
            Col::fixed("STATE"),
            // Never cut: `ended 7m09s a` would say nothing.
            Col::fixed("AGE"),
            Col::shrink("JOB", 8),
        ];
        if wide {
            // The runner's name is its id's: the first to give way.
            cols.push(Col::shrink("RUNNER", 8).keep(0));
        }
        cols.extend([
            Col::fixed("RSS"),
            Col::fixed("CPU"),
            Col::grow("OUTCOME", 8),
        ]);
        // Only the rows that fit are built: with hundreds of attempts, formatting the
        // hidden ones is most of a frame. The window keeps the selection in view.
        let height = area.height.saturating_sub(3) as usize;
        let selected = self
            .selected
            .map(|_| self.index.min(rows.len().saturating_sub(1)));
        let first = selected.map_or(0, |i| (i + 1).saturating_sub(height));
        let cells: Vec<Vec<Span>> = rows
            .iter()
            .skip(first)
            .take(height)
            .map(|a| {
                // A live attempt's age; an ended one's end, which is what matters then.
                let age = match a.ended_at {
                    Some(end) if a.state.is_ended() => fmt::ended_ago(end, snap.now),
                    None if a.state.is_ended() => fmt::ended_ago(a.state_since(), snap.now),
                    _ => fmt::age(a.age_millis(snap.now)),
                };
                let mut cells = vec![
                    Span::raw(a.id.to_string()),
                    Span::raw(a.profile.clone()),
                    Span::styled(a.state_word(), th.state(a.state)),
                    Span::raw(age),
                    Span::raw(a.job_name.clone().unwrap_or_else(|| "-".into())),
                ];
                if wide {
                    cells.push(Span::raw(a.runner_name.clone()));
                }
                // A live runner's RSS now; an ended one's peak.
                let rss = snap
                    .meters
                    .get(&a.id)
                    .map(|m| m.rss_bytes)
                    .or(a.peak_rss_bytes);
                cells.push(Span::raw(fmt::or_dash(rss, fmt::bytes)));
                cells.push(Span::raw(fmt::or_dash(a.cpu_millis, fmt::cpu)));
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
                cells.push(Span::styled(outcome, style));
                cells
            })
            .collect();
        let (header, table_rows, widths) =
            columns::table(&cols, cells, area.width.saturating_sub(2));
        // What the title counts is what is shown: with a filter, its live rows only.
        let live = rows.iter().filter(|a| a.state.is_live()).count();
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
            .header(header.style(th.header()))
            .row_highlight_style(th.selected())
            .block(Block::bordered().title(Line::from(title)));
        let mut state = TableState::default().with_selected(self.selected.map(|_| self.index));
        f.render_stateful_widget(table, area, &mut state);
    }
}
