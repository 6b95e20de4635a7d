//! The Overview pane: the host (capacity, daemon, each target's mode) and one row per
//! profile (a scale set profile's session state when wide), with the selected
//! profile's labels, last error and scale set session in full below.

use super::actions::Action;
use super::app::{Component, Ctx, Effect, Handled, movement, step_index};
use super::fmt;
use super::model::{ProfileRow, Snapshot};
use crate::domain::{DemandSource, Reported, SessionPhase, TargetMode};
use crossterm::event::{KeyCode, KeyEvent};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Cell, Paragraph, Row, Table, TableState, Wrap};

/// The selected profile, followed by name across refreshes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct OverviewView {
    pub selected: Option<String>,
    index: usize,
}

impl OverviewView {
    pub fn follow(&mut self, snap: &Snapshot) {
        let names: Vec<&str> = snap
            .profiles
            .iter()
            .map(|p| p.policy.name.as_str())
            .collect();
        if let Some(i) = self
            .selected
            .as_deref()
            .and_then(|s| names.iter().position(|n| *n == s))
        {
            self.index = i;
        } else {
            self.index = self.index.min(names.len().saturating_sub(1));
            self.selected = names.get(self.index).map(|s| s.to_string());
        }
    }

    pub fn selected_row<'a>(&self, snap: &'a Snapshot) -> Option<&'a ProfileRow> {
        self.selected.as_deref().and_then(|n| snap.profile(n))
    }
}

impl Component for OverviewView {
    fn event(&mut self, key: KeyEvent, snap: &Snapshot) -> Handled {
        if let Some(by) = movement(&key, 5) {
            self.index = step_index(self.index, by, snap.profiles.len());
            self.selected = snap.profiles.get(self.index).map(|p| p.policy.name.clone());
            return Handled::Yes;
        }
        let Some(row) = self.selected_row(snap) else {
            return Handled::No;
        };
        let p = &row.policy;
        let act = |a| Handled::Then(Effect::Act(a));
        match key.code {
            KeyCode::Char('p') | KeyCode::Char(' ') => act(Action::SetActive {
                profile: p.name.clone(),
                revision: p.revision,
                active: !p.active,
            }),
            KeyCode::Char('+') | KeyCode::Char('=') => act(Action::SetMax {
                profile: p.name.clone(),
                revision: p.revision,
                from: p.max_capacity,
                to: i64::from(p.max_capacity) + 1,
            }),
            KeyCode::Char('-') => act(Action::SetMax {
                profile: p.name.clone(),
                revision: p.revision,
                from: p.max_capacity,
                to: i64::from(p.max_capacity) - 1,
            }),
            KeyCode::Enter => Handled::Then(Effect::ShowProfile(p.name.clone())),
            _ => Handled::No,
        }
    }

    fn draw(&self, f: &mut Frame, area: Rect, cx: &Ctx) {
        // A scale set profile's session takes a line of its own below.
        let scaleset = self
            .selected_row(cx.snap)
            .is_some_and(|r| r.policy.demand == DemandSource::Scaleset);
        let [host, table, detail] = Layout::vertical([
            Constraint::Length(5),
            Constraint::Fill(1),
            Constraint::Length(if scaleset { 6 } else { 5 }),
        ])
        .areas(area);
        draw_host(f, host, cx);
        self.draw_table(f, table, cx);
        self.draw_selected(f, detail, cx);
    }
}

fn draw_host(f: &mut Frame, area: Rect, cx: &Ctx) {
    let (snap, th) = (cx.snap, &cx.theme);
    let mut lines = Vec::new();
    match &snap.host {
        Some(h) => {
            let used = snap.live_total();
            let free = h.capacity.saturating_sub(used);
            let mut cap = vec![
                Span::styled("capacity ", th.title()),
                Span::raw(format!("{used} used, {free} free of {}", h.capacity)),
            ];
            if h.draining {
                cap.push(Span::raw("   "));
                cap.push(Span::styled("DRAINING", th.waiting()));
            }
            lines.push(Line::from(cap));
        }
        None => lines.push(Line::styled(
            "no host yet: nothing has been configured in this state directory",
            th.waiting(),
        )),
    }
    let daemon = match &snap.heartbeat {
        Some(b) if snap.daemon_alive() => Span::styled(
            format!(
                "alive (pid {}, {}, last pass {} ago)",
                b.pid,
                b.version,
                fmt::age(snap.now - b.heartbeat_at)
            ),
            th.good(),
        ),
        Some(b) => Span::styled(
            format!(
                "not running (last seen {} ago)",
                fmt::age(snap.now - b.heartbeat_at)
            ),
            th.bad(),
        ),
        None => Span::styled("not running", th.bad()),
    };
    let mut daemon_line = vec![Span::styled("daemon   ", th.title()), daemon];
    if snap.daemon_alive() {
        match snap.isolation.as_deref() {
            Some("uids") => daemon_line.push(Span::styled("  jobs isolated", th.good())),
            Some("none") => daemon_line.push(Span::styled(
                "  isolation NONE: jobs run as the daemon's user",
                th.waiting(),
            )),
            Some("refused") => daemon_line.push(Span::styled(
                "  isolation REFUSED: no runner starts (see status)",
                th.bad(),
            )),
            _ => {}
        }
    }
    lines.push(Line::from(daemon_line));
    let mut targets = vec![Span::styled("targets  ", th.title())];
    if snap.targets.is_empty() {
        targets.push(Span::raw("none"));
    }
    for (i, t) in snap.targets.iter().enumerate() {
        if i > 0 {
            targets.push(Span::raw(", "));
        }
        targets.push(Span::raw(format!("{} ", t.name)));
        let mode = t.status.as_ref().map(|s| &s.mode);
        targets.push(Span::styled(
            fmt::or_dash(mode, |m| m.to_string()),
            mode_style(mode, cx),
        ));
        if t.status.as_ref().is_some_and(|s| s.last_error.is_some()) {
            targets.push(Span::styled(" (error)", th.bad()));
        }
    }
    lines.push(Line::from(targets));
    let title = match &snap.host {
        Some(h) => format!(" Host {} ({}) ", h.name, h.short_id()),
        None => " Host ".into(),
    };
    f.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(title)),
        area,
    );
}

/// A profile's session in one word and its colour: `held` good, `conflict` and
/// `failing` (or a held session whose polls fail) bad, `-` for a REST profile, one
/// with no listener here, or with no daemon running.
fn session_word(r: &ProfileRow, cx: &Ctx) -> (String, ratatui::style::Style) {
    let th = &cx.theme;
    match &r.session {
        Some(s) if cx.snap.daemon_alive() => {
            let style = if s.is_troubled() {
                th.bad()
            } else if s.phase == SessionPhase::Held.into() {
                th.good()
            } else {
                th.quiet()
            };
            (s.phase.to_string(), style)
        }
        _ => ("-".into(), th.quiet()),
    }
}

fn mode_style(mode: Option<&Reported<TargetMode>>, cx: &Ctx) -> ratatui::style::Style {
    match mode.and_then(Reported::known) {
        Some(TargetMode::Standalone | TargetMode::Coordinated) => cx.theme.good(),
        Some(TargetMode::Fallback) => cx.theme.waiting(),
        None => cx.theme.quiet(),
    }
}

impl OverviewView {
    fn draw_table(&self, f: &mut Frame, area: Rect, cx: &Ctx) {
        let (snap, th) = (cx.snap, &cx.theme);
        let wide = area.width >= 120;
        let mut header = vec!["PROFILE", "TARGET"];
        if wide {
            header.push("LABELS");
        }
        header.extend([
            "MODE",
            "PAUSED",
            "DEMAND",
            "START",
            "IDLE",
            "BUSY",
            "MAX",
            "LIMITED BY",
        ]);
        if wide {
            header.extend(["SESSION", "LAST ERROR"]);
        }
        let rows: Vec<Row> = snap
            .profiles
            .iter()
            .map(|r| {
                let p = &r.policy;
                let st = r.status.as_ref();
                let mut cells = vec![Cell::from(p.name.clone()), Cell::from(p.target.clone())];
                if wide {
                    cells.push(Cell::from(r.user_labels.join(",")));
                }
                let mode = r.mode.as_ref();
                cells.push(Cell::from(Span::styled(
                    fmt::or_dash(mode, |m| m.to_string()),
                    mode_style(mode, cx),
                )));
                cells.push(if p.active {
                    Cell::from("no")
                } else {
                    Cell::from(Span::styled("yes", th.waiting()))
                });
                cells.push(Cell::from(fmt::or_dash(st.map(|s| s.demand), |d| {
                    d.to_string()
                })));
                cells.push(Cell::from(Span::styled(
                    r.counts.starting.to_string(),
                    th.waiting(),
                )));
                cells.push(Cell::from(Span::styled(
                    r.counts.idle.to_string(),
                    th.good(),
                )));
                cells.push(Cell::from(Span::styled(
                    r.counts.busy.to_string(),
                    th.working(),
                )));
                cells.push(Cell::from(p.max_capacity.to_string()));
                cells.push(Cell::from(fmt::or_dash(st, |s| s.limiting.to_string())));
                if wide {
                    let (word, style) = session_word(r, cx);
                    cells.push(Cell::from(Span::styled(word, style)));
                    let err = st.and_then(|s| s.last_error.clone());
                    cells.push(Cell::from(Span::styled(
                        err.unwrap_or_else(|| "-".into()),
                        th.bad(),
                    )));
                }
                Row::new(cells)
            })
            .collect();
        let mut widths = vec![Constraint::Min(8), Constraint::Length(8)];
        if wide {
            widths.push(Constraint::Fill(1));
        }
        widths.extend([
            Constraint::Length(11),
            Constraint::Length(6),
            Constraint::Length(6),
            Constraint::Length(5),
            Constraint::Length(4),
            Constraint::Length(4),
            Constraint::Length(3),
            Constraint::Length(13),
        ]);
        if wide {
            widths.extend([Constraint::Length(9), Constraint::Fill(2)]);
        }
        let table = Table::new(rows, widths)
            .header(Row::new(header).style(th.header()))
            .row_highlight_style(th.selected())
            .block(Block::bordered().title(format!(" Profiles ({}) ", snap.profiles.len())));
        let mut state = TableState::default().with_selected(
            self.selected
                .as_ref()
                .and_then(|_| (!snap.profiles.is_empty()).then_some(self.index)),
        );
        f.render_stateful_widget(table, area, &mut state);
    }

    fn draw_selected(&self, f: &mut Frame, area: Rect, cx: &Ctx) {
        let th = &cx.theme;
        let Some(r) = self.selected_row(cx.snap) else {
            f.render_widget(
                Paragraph::new("no profiles: add one with 'runner-manager profile add'")
                    .block(Block::bordered()),
                area,
            );
            return;
        };
        let p = &r.policy;
        let st = r.status.as_ref();
        let mut lines = vec![Line::from(vec![
            Span::styled("labels ", th.title()),
            Span::raw(r.user_labels.join(",")),
            Span::raw(if p.default_labels { " + defaults" } else { "" }),
            Span::styled("  min ", th.title()),
            Span::raw(p.min_capacity.to_string()),
            Span::styled("  rev ", th.title()),
            Span::raw(p.revision.to_string()),
        ])];
        // Before the error, so a long error's wrapping never hides it.
        if p.demand == DemandSource::Scaleset {
            let (text, style) = match &r.session {
                _ if !cx.snap.daemon_alive() => {
                    ("not held: the daemon is not running".into(), th.quiet())
                }
                None => ("no listener on this host".into(), th.quiet()),
                Some(s) => (s.describe(cx.snap.now), session_word(r, cx).1),
            };
            lines.push(Line::from(vec![
                Span::styled("session ", th.title()),
                Span::styled(text, style),
            ]));
        }
        lines.extend([Line::from(vec![
            Span::styled("error  ", th.title()),
            match st.and_then(|s| s.last_error.as_ref()) {
                Some(e) => Span::styled(e.clone(), th.bad()),
                None => Span::raw("none"),
            },
        ])]);
        f.render_widget(
            Paragraph::new(lines)
                .wrap(Wrap { trim: true })
                .block(Block::bordered().title(format!(
                    " {} · p pause/resume · +/- max · Enter attempts ",
                    p.name
                ))),
            area,
        );
    }
}
