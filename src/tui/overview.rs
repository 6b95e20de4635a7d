//! The Overview pane: the host (capacity, daemon, each target's mode) and one row per
//! profile (a scale set profile's session state when wide), with the selected
//! profile's labels, last error and scale set session in full below. Where
//! the window has room (as btop or k9s use it), the live attempts with their meters
//! and a chart of the selected profile's queued jobs against live runners fill the
//! rest, each growing with the window.

use super::actions::Action;
use super::app::{Component, Ctx, Effect, Handled, movement, step_index};
use super::columns::{self, Col};
use super::fmt;
use super::keys::{self, Binding};
use super::model::{PICTURE_WINDOW_MS, ProfileRow, Snapshot};
use crate::domain::{DemandSource, Reported, SessionPhase, TargetMode};
use crate::timefmt::Millis;
use crossterm::event::{KeyCode, KeyEvent};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{
    Axis, Block, Chart, Dataset, GraphType, Paragraph, Table, TableState, Wrap,
};

/// From this many rows the Overview also shows the live attempts and the chart.
pub const ROOMY_HEIGHT: u16 = 30;

/// From this many columns the live attempts and the chart sit side by side.
pub const SIDE_BY_SIDE_WIDTH: u16 = 200;

/// The top of the chart's y axis: the larger peak rounded up to a round, even number
/// (at least 2), so the axis reads `0 … 20 … 40`, not `0 … 33`, and its middle
/// label is a whole number.
pub fn chart_top(peak: u64) -> u64 {
    let step = match peak {
        0..=20 => 2,
        21..=100 => 10,
        _ => 2 * 10u64.pow(peak.ilog10() - 1),
    };
    peak.div_ceil(step).max(1) * step
}

/// The y axis' labels: 0, the middle and the top (issue 38: only 0 and the top).
pub fn chart_y_labels(top: u64) -> [String; 3] {
    ["0".into(), (top / 2).to_string(), top.to_string()]
}

/// A series as chart points: seconds before `now` (negative) against the value.
pub fn chart_points(points: &[(Millis, u64)], now: Millis) -> Vec<(f64, f64)> {
    points
        .iter()
        .map(|&(at, v)| ((at - now) as f64 / 1000.0, v as f64))
        .collect()
}

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

    /// The host block, the profiles table, the selected profile, and (from
    /// [`ROOMY_HEIGHT`] rows) the room for the live attempts and the chart; empty
    /// below that. Drawing and clicks place the table by the same split.
    fn areas(&self, area: Rect, snap: &Snapshot) -> [Rect; 4] {
        // A scale set profile's session takes a line of its own below.
        let scaleset = self
            .selected_row(snap)
            .is_some_and(|r| r.policy.demand == DemandSource::Scaleset);
        let detail_h = if scaleset { 6 } else { 5 };
        if area.height < ROOMY_HEIGHT {
            let [host, table, detail] = Layout::vertical([
                Constraint::Length(5),
                Constraint::Fill(1),
                Constraint::Length(detail_h),
            ])
            .areas(area);
            return [host, table, detail, Rect::default()];
        }
        // The profiles take what they need (with a few rows to grow into); the room
        // under them goes to the live attempts and the chart.
        let table_h = (snap.profiles.len() as u16 + 3).clamp(5, area.height / 3);
        Layout::vertical([
            Constraint::Length(5),
            Constraint::Length(table_h),
            Constraint::Length(detail_h),
            Constraint::Fill(1),
        ])
        .areas(area)
    }

    /// A click on the `row`th line of a pane `height` lines high: a profile row
    /// selects that profile.
    pub fn click(&mut self, row: u16, height: u16, snap: &Snapshot) {
        let area = Rect::new(0, 0, 1, height);
        let table = self.areas(area, snap)[1];
        let Some(r) = row.checked_sub(table.y).filter(|r| *r < table.height) else {
            return;
        };
        if let Some(i) = super::runners::clicked(r, table.height, self.index, snap.profiles.len()) {
            self.index = i;
            self.selected = snap.profiles.get(i).map(|p| p.policy.name.clone());
        }
    }

    pub fn selected_row<'a>(&self, snap: &'a Snapshot) -> Option<&'a ProfileRow> {
        self.selected.as_deref().and_then(|n| snap.profile(n))
    }
}

/// The Overview's own keys, on the selected profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cmd {
    Pause,
    MaxUp,
    MaxDown,
    Open,
}

const KEYS: &[Binding<Cmd>] = &[
    Binding {
        keys: &[KeyCode::Char('p'), KeyCode::Char(' ')],
        cmd: Cmd::Pause,
        help: "pause or resume the profile (asks)",
    },
    Binding {
        keys: &[KeyCode::Char('+'), KeyCode::Char('=')],
        cmd: Cmd::MaxUp,
        help: "the profile's max up or down by one, at once",
    },
    Binding {
        keys: &[KeyCode::Char('-')],
        cmd: Cmd::MaxDown,
        help: "the profile's max up or down by one, at once",
    },
    Binding {
        keys: &[KeyCode::Enter, KeyCode::Char('o')],
        cmd: Cmd::Open,
        help: "open: the profile's attempts",
    },
];

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
        let Some(cmd) = keys::find(KEYS, &key) else {
            return Handled::No;
        };
        match cmd {
            Cmd::Pause => act(Action::SetActive {
                profile: p.name.clone(),
                revision: p.revision,
                active: !p.active,
            }),
            Cmd::MaxUp => act(Action::SetMax {
                profile: p.name.clone(),
                revision: p.revision,
                from: p.max_capacity,
                to: i64::from(p.max_capacity) + 1,
            }),
            Cmd::MaxDown => act(Action::SetMax {
                profile: p.name.clone(),
                revision: p.revision,
                from: p.max_capacity,
                to: i64::from(p.max_capacity) - 1,
            }),
            Cmd::Open => Handled::Then(Effect::ShowProfile(p.name.clone())),
        }
    }

    fn keys(&self) -> Vec<(String, &'static str)> {
        keys::help_lines(KEYS)
    }

    fn draw(&self, f: &mut Frame, area: Rect, cx: &Ctx) {
        let [host, table, detail, rest] = self.areas(area, cx.snap);
        draw_host(f, host, cx);
        self.draw_table(f, table, cx);
        self.draw_selected(f, detail, cx);
        if rest.is_empty() {
            return;
        }
        let [live, chart] = if rest.width >= SIDE_BY_SIDE_WIDTH {
            Layout::horizontal([Constraint::Fill(3), Constraint::Fill(2)]).areas(rest)
        } else {
            Layout::vertical([Constraint::Fill(1), Constraint::Fill(1)]).areas(rest)
        };
        draw_live(f, live, cx);
        self.draw_chart(f, chart, cx);
    }
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
            if let Some(url) = &h.coordinator {
                cap.push(Span::raw("   "));
                cap.push(link_span(url, cx));
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
    if !snap.runner.in_use.is_empty() {
        let behind = snap.runner.newest.as_ref().is_some_and(|n| {
            snap.runner
                .in_use
                .iter()
                .any(|v| crate::install::compare_versions(v, n).is_lt())
        });
        let text = format!(
            "  runner {}{}",
            snap.runner.in_use.join(","),
            snap.runner
                .newest
                .as_ref()
                .map(|n| format!(" (newest {n})"))
                .unwrap_or_default()
        );
        let style = if behind { th.waiting() } else { th.good() };
        daemon_line.push(Span::styled(text, style));
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
        if let Some(paced) = t.status.as_ref().and_then(|s| paced(s, t.poll_interval_ms)) {
            targets.push(Span::styled(paced, th.waiting()));
        }
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

/// A coordinated host's link to its coordinator (issue 38: a lost link was hidden
/// behind the targets' mode): up for how long, or down for how long and why; with
/// no daemon running there is no link.
fn link_span(url: &str, cx: &Ctx) -> Span<'static> {
    let (snap, th) = (cx.snap, &cx.theme);
    let seen = snap.link.as_ref().filter(|l| l.url == url);
    match seen {
        _ if !snap.daemon_alive() => Span::styled("link DOWN: no daemon running", th.bad()),
        None => Span::styled("link not reported yet", th.waiting()),
        Some(l) if l.up => Span::styled(
            format!("link up {}", fmt::age(snap.now - l.since)),
            th.good(),
        ),
        Some(l) => Span::styled(
            format!(
                "link DOWN {}{}",
                fmt::age(snap.now - l.since),
                l.last_error
                    .as_ref()
                    .map(|e| format!(": {}", crate::printable::escape(e)))
                    .unwrap_or_default()
            ),
            th.bad(),
        ),
    }
}

/// ` (paced 12s, 85/100 left)` when the budget governor stretched the target's poll
/// interval so its rate-limit budget lasts to the reset; `None` otherwise.
fn paced(st: &crate::store::TargetStatus, base_ms: i64) -> Option<String> {
    let every = st.poll_every_ms.filter(|ms| *ms > base_ms)?;
    let left = match (st.rate_limit_remaining, st.rate_limit_limit) {
        (Some(r), Some(l)) => format!(", {r}/{l} left"),
        _ => String::new(),
    };
    Some(format!(" (paced {}s{left})", (every + 999) / 1000))
}

/// The live attempts with their meters now, oldest first (the longest-running on top).
fn draw_live(f: &mut Frame, area: Rect, cx: &Ctx) {
    let (snap, th) = (cx.snap, &cx.theme);
    let live: Vec<&crate::domain::Attempt> = snap
        .attempts
        .iter()
        .rev()
        .filter(|a| a.state.is_live())
        .collect();
    let cols = [
        Col::fixed("ID"),
        Col::shrink("PROFILE", 7),
        Col::fixed("STATE"),
        Col::fixed("AGE"),
        Col::shrink("JOB", 5),
        Col::fixed("RSS"),
        Col::fixed("PEAK"),
        Col::fixed("CPU"),
        Col::fixed("CPU%"),
        Col::fixed("PROCS"),
    ];
    let rows: Vec<Vec<Span>> = live
        .iter()
        .take(area.height.saturating_sub(3) as usize)
        .map(|a| {
            let m = snap.meters.get(&a.id);
            vec![
                Span::raw(a.id.to_string()),
                Span::raw(a.profile.clone()),
                Span::styled(a.state_word(), th.state(a.state)),
                Span::raw(fmt::age(a.age_millis(snap.now))),
                Span::raw(a.job_name.clone().unwrap_or_else(|| "-".into())),
                Span::raw(fmt::or_dash(m.map(|m| m.rss_bytes), fmt::bytes)),
                Span::raw(fmt::or_dash(
                    m.map(|m| m.peak_rss_bytes).or(a.peak_rss_bytes),
                    fmt::bytes,
                )),
                Span::raw(fmt::or_dash(a.cpu_millis, fmt::cpu)),
                Span::raw(fmt::or_dash(
                    m.map(|m| m.cpu_percent),
                    crate::units::percent,
                )),
                Span::raw(fmt::or_dash(m.map(|m| m.processes), |p| p.to_string())),
            ]
        })
        .collect();
    let (header, rows, widths) = columns::table(&cols, rows, area.width.saturating_sub(2));
    let table = Table::new(rows, widths)
        .header(header.style(th.header()))
        .block(Block::bordered().title(format!(" Live attempts ({}) ", live.len())));
    f.render_widget(table, area);
}

/// Every label a profile's runners carry, the user's first (what tells profiles
/// apart, and what a narrow column keeps), then the defaults (issue 38: LABELS was
/// blank for a profile whose labels are all defaults).
pub fn labels_shown(r: &ProfileRow) -> String {
    let defaults = r
        .policy
        .labels
        .iter()
        .filter(|l| !r.user_labels.contains(l));
    r.user_labels
        .iter()
        .chain(defaults)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(",")
}

/// LIMITED BY: what the daemon last wrote while it runs. With no daemon running
/// nothing reconciles, whatever it last wrote (the drain it stopped in, its own
/// stop), so that is what is said, as `status` says it (issue 38: `draining` after a
/// drained demo).
fn limit_cell(st: Option<&crate::store::ProfileStatus>, cx: &Ctx) -> Span<'static> {
    match st {
        _ if !cx.snap.daemon_alive() => Span::styled(DAEMON_STOPPED, cx.theme.quiet()),
        Some(s) => Span::raw(s.limiting.to_string()),
        None => Span::raw("-"),
    }
}

/// LIMITED BY with no daemon running.
pub const DAEMON_STOPPED: &str = "daemon stopped";

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
        let mut cols = vec![Col::shrink("PROFILE", 7), Col::shrink("TARGET", 6)];
        if wide {
            cols.push(Col::shrink("LABELS", 6).keep(0));
        }
        cols.extend([
            Col::fixed("MODE"),
            Col::fixed("PAUSED"),
            Col::fixed("DEMAND"),
            Col::fixed("START"),
            Col::fixed("IDLE"),
            Col::fixed("BUSY"),
            Col::fixed("MAX"),
            // Why a job waits: the last column to lose a letter.
            Col::grow("LIMITED BY", 15).keep(2),
        ]);
        if wide {
            // The error takes the room left over, not LIMITED BY; it gives way first
            // when there is none, being shown in full under the table.
            cols.last_mut().unwrap().grow = false;
            cols.push(Col::fixed("SESSION"));
            cols.push(Col::grow("LAST ERROR", 10).keep(0));
        }
        let rows: Vec<Vec<Span>> = snap
            .profiles
            .iter()
            .map(|r| {
                let p = &r.policy;
                let st = r.status.as_ref();
                let mut cells = vec![Span::raw(p.name.clone()), Span::raw(p.target.clone())];
                if wide {
                    cells.push(Span::raw(labels_shown(r)));
                }
                let mode = r.mode.as_ref();
                cells.push(Span::styled(
                    fmt::or_dash(mode, |m| m.to_string()),
                    mode_style(mode, cx),
                ));
                cells.push(if p.active {
                    Span::raw("no")
                } else {
                    Span::styled("yes", th.waiting())
                });
                cells.push(Span::raw(fmt::or_dash(st.map(|s| s.demand), |d| {
                    d.to_string()
                })));
                cells.push(Span::styled(
                    r.counts.not_listening().to_string(),
                    th.waiting(),
                ));
                cells.push(Span::styled(r.counts.idle.to_string(), th.good()));
                cells.push(Span::styled(r.counts.busy.to_string(), th.working()));
                cells.push(Span::raw(p.max_capacity.to_string()));
                cells.push(limit_cell(st, cx));
                if wide {
                    let (word, style) = session_word(r, cx);
                    cells.push(Span::styled(word, style));
                    let err = st.and_then(|s| s.last_error.clone());
                    cells.push(Span::styled(err.unwrap_or_else(|| "-".into()), th.bad()));
                }
                cells
            })
            .collect();
        // Inside the borders, less the highlight symbol's column (none is set: 0).
        let (header, rows, widths) = columns::table(&cols, rows, area.width.saturating_sub(2));
        let table = Table::new(rows, widths)
            .header(header.style(th.header()))
            .row_highlight_style(th.selected())
            .block(Block::bordered().title(format!(" Profiles ({}) ", snap.profiles.len())));
        let mut state = TableState::default().with_selected(
            self.selected
                .as_ref()
                .and_then(|_| (!snap.profiles.is_empty()).then_some(self.index)),
        );
        f.render_stateful_widget(table, area, &mut state);
    }

    /// The selected profile's queued jobs against its live runners, on one axis with
    /// its numbers beside it (a chart has the room a sparkline row lacks).
    fn draw_chart(&self, f: &mut Frame, area: Rect, cx: &Ctx) {
        let (snap, th) = (cx.snap, &cx.theme);
        let mins = PICTURE_WINDOW_MS / 60_000;
        let Some(row) = self.selected_row(snap) else {
            f.render_widget(
                Paragraph::new("no profile selected").block(Block::bordered()),
                area,
            );
            return;
        };
        let name = &row.policy.name;
        let (queued, live) = super::pictures::series(snap, name);
        let peak = queued.iter().chain(&live).map(|p| p.1).max().unwrap_or(0);
        let top = chart_top(peak);
        let (q, l) = (
            chart_points(&queued, snap.now),
            chart_points(&live, snap.now),
        );
        // No dataset names: ratatui's legend sits over the plot (over the newest
        // points at the top right) or hides when the chart is small (issue 38); the
        // legend is the bottom border's title instead, always shown, never over data.
        let datasets = vec![
            Dataset::default()
                .marker(th.marker())
                .graph_type(GraphType::Line)
                .style(th.series_a())
                .data(&q),
            Dataset::default()
                .marker(th.marker())
                .graph_type(GraphType::Line)
                .style(th.series_b())
                .data(&l),
        ];
        let now_of = |v: &[(Millis, u64)]| fmt::or_dash(v.last().map(|p| p.1), |n| n.to_string());
        let legend = Line::from(vec![
            Span::raw(" "),
            Span::styled("── queued jobs ", th.series_a()),
            Span::raw(format!("{}  ", now_of(&queued))),
            Span::styled("── live runners ", th.series_b()),
            Span::raw(format!("{} ", now_of(&live))),
        ]);
        let window = PICTURE_WINDOW_MS as f64 / 1000.0;
        let chart = Chart::new(datasets)
            .block(
                Block::bordered()
                    .title(Line::from(vec![
                        Span::raw(format!(" {name}: ")),
                        Span::styled("queued jobs", th.series_a()),
                        Span::raw(" vs "),
                        Span::styled("live runners", th.series_b()),
                        Span::raw(format!(", last {mins} min ")),
                    ]))
                    .title_bottom(legend),
            )
            .legend_position(None)
            .x_axis(
                Axis::default()
                    .bounds([-window, 0.0])
                    .labels([format!("-{mins}m"), format!("-{}m", mins / 2), "now".into()])
                    .style(th.quiet()),
            )
            .y_axis(
                Axis::default()
                    .bounds([0.0, top as f64])
                    .labels(chart_y_labels(top))
                    .style(th.quiet()),
            );
        f.render_widget(chart, area);
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
            // Every label its runners carry, the defaults among them: what a job's
            // `runs-on` is matched against (issue 38: `labels + defaults` said none).
            Span::raw(labels_shown(r)),
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
        lines.push(Line::from(vec![
            Span::styled("error  ", th.title()),
            match st.and_then(|s| s.last_error.as_ref()) {
                Some(e) => Span::styled(e.clone(), th.bad()),
                None => Span::raw("none"),
            },
        ]));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_paced_target_shows_its_interval_and_budget() {
        let mut st = crate::store::TargetStatus {
            target: "octo".into(),
            mode: crate::domain::TargetMode::Standalone.into(),
            last_error: None,
            error_kind: None,
            rate_limit_remaining: Some(85),
            rate_limit_limit: Some(100),
            rate_limit_reset: None,
            poll_every_ms: Some(5_000),
            updated_at: 0,
        };
        assert_eq!(
            paced(&st, 5_000),
            None,
            "at its own interval: nothing to say"
        );
        st.poll_every_ms = Some(11_250);
        assert_eq!(
            paced(&st, 5_000).as_deref(),
            Some(" (paced 12s, 85/100 left)")
        );
    }

    #[test]
    fn the_chart_top_is_a_round_even_number_at_or_above_the_peak() {
        assert_eq!(chart_top(0), 2, "an empty chart still has an axis");
        assert_eq!(chart_top(3), 4);
        assert_eq!(chart_top(10), 10);
        assert_eq!(chart_top(13), 14);
        assert_eq!(chart_top(33), 40, "issue 16: a queue peak of 33");
        assert_eq!(chart_top(50), 50);
        assert_eq!(chart_top(51), 60);
        assert_eq!(chart_top(101), 120);
        assert_eq!(chart_top(1234), 1400);
        // Issue 38: a middle label, and a whole number, whatever the peak.
        for peak in 0..5000 {
            let top = chart_top(peak);
            assert!(top >= peak && top.is_multiple_of(2), "{peak} -> {top}");
        }
        assert_eq!(chart_y_labels(40), ["0", "20", "40"]);
    }

    #[test]
    fn chart_points_count_seconds_back_from_now() {
        let now = 1_000_000;
        assert_eq!(
            chart_points(&[(now - 600_000, 4), (now, 1)], now),
            vec![(-600.0, 4.0), (0.0, 1.0)]
        );
    }
}
