//! The Usage pane (issue 35): who used the host, from the daily usage roll-up. The
//! repositories that used the most runner time today and over the last 7 days as
//! bars, runner-hours a day over the last 14 days, and the workflows of the
//! repository selected in the 7-day list. Days are UTC days, as the roll-up keeps them.

use super::app::{Component, Ctx, Handled, movement, step_index};
use super::model::Snapshot;
use crate::domain::rollup::{Day, UsageFigures, day_of};
use crate::store::UsageRow;
use crate::timefmt::format_rfc3339;
use crossterm::event::KeyEvent;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Bar, BarChart, BarGroup, Paragraph, Row, Table};

/// Days the chart draws, today last; the snapshot reads as many.
pub const CHART_DAYS: Day = 14;
/// Days the longer list of repositories adds up.
pub const WEEK_DAYS: Day = 7;

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct UsageView {
    /// The selected repository in the 7-day list.
    pub index: usize,
}

/// One repository's (or workflow's) figures over some days.
#[derive(Debug, Clone, PartialEq)]
pub struct Used {
    pub name: String,
    pub figures: UsageFigures,
}

/// Runner time of a row's figures, busy and idle.
fn runner_ms(f: &UsageFigures) -> u64 {
    f.busy_ms + f.idle_ms
}

/// Adds up `rows` of days `from` on by `key`, the most runner time first (then by
/// name). An empty name (a job no source named) is `-`.
fn add_up(rows: &[UsageRow], from: Day, key: impl Fn(&UsageRow) -> &str) -> Vec<Used> {
    let mut by: std::collections::BTreeMap<String, UsageFigures> = Default::default();
    for r in rows.iter().filter(|r| r.key.day >= from) {
        let name = match key(r) {
            "" => "-",
            k => k,
        };
        by.entry(name.to_string()).or_default().merge(&r.figures);
    }
    let mut out: Vec<Used> = by
        .into_iter()
        .map(|(name, figures)| Used { name, figures })
        .collect();
    out.sort_by_key(|u| std::cmp::Reverse(runner_ms(&u.figures)));
    out
}

/// The repositories of days `from` on, the most runner time first.
pub fn repositories(rows: &[UsageRow], from: Day) -> Vec<Used> {
    add_up(rows, from, |r| &r.key.repo)
}

/// The workflows `repo` ran on days `from` on, the most runner time first.
pub fn workflows(rows: &[UsageRow], repo: &str, from: Day) -> Vec<Used> {
    let repo = if repo == "-" { "" } else { repo };
    let of_repo: Vec<UsageRow> = rows
        .iter()
        .filter(|r| r.key.repo == repo)
        .cloned()
        .collect();
    add_up(&of_repo, from, |r| &r.key.workflow)
}

/// Runner-hours of each of the `days` days up to `today`, oldest first.
pub fn per_day(rows: &[UsageRow], today: Day, days: Day) -> Vec<(Day, f64)> {
    (today - days + 1..=today)
        .map(|d| {
            let ms: u64 = rows
                .iter()
                .filter(|r| r.key.day == d)
                .map(|r| runner_ms(&r.figures))
                .sum();
            (d, ms as f64 / 3_600_000.0)
        })
        .collect()
}

/// A bar of `frac` (0..=1) of `width` cells, in eighths.
pub fn bar(frac: f64, width: usize) -> String {
    const EIGHTHS: [&str; 8] = ["", "▏", "▎", "▍", "▌", "▋", "▊", "▉"];
    let eighths = (frac.clamp(0.0, 1.0) * width as f64 * 8.0).round() as usize;
    let mut s = "█".repeat(eighths / 8);
    s.push_str(EIGHTHS[eighths % 8]);
    s
}

/// Hours with one decimal, or minutes below one hour.
fn hours(ms: u64) -> String {
    if ms < 3_600_000 {
        format!("{} min", ms / 60_000)
    } else {
        format!("{:.1} h", ms as f64 / 3_600_000.0)
    }
}

impl UsageView {
    /// The repository selected in the 7-day list, if any.
    pub fn selected(&self, snap: &Snapshot) -> Option<Used> {
        let week = repositories(&snap.usage, day_of(snap.now) - WEEK_DAYS + 1);
        week.get(self.index.min(week.len().saturating_sub(1)))
            .cloned()
    }
}

impl Component for UsageView {
    fn event(&mut self, key: KeyEvent, snap: &Snapshot) -> Handled {
        let Some(by) = movement(&key, 5) else {
            return Handled::No;
        };
        let n = repositories(&snap.usage, day_of(snap.now) - WEEK_DAYS + 1).len();
        self.index = step_index(self.index, by, n);
        Handled::Yes
    }

    fn draw(&self, f: &mut Frame, area: Rect, cx: &Ctx) {
        let snap = cx.snap;
        let today = day_of(snap.now);
        if snap.usage.is_empty() {
            let block = cx.theme.block().title(" Usage ");
            let text = "No usage yet: each attempt adds its figures here as it ends. \
                        `runner-manager usage` reads the same rows.";
            f.render_widget(
                Paragraph::new(text)
                    .wrap(ratatui::widgets::Wrap { trim: true })
                    .block(block),
                area,
            );
            return;
        }
        let [lists, chart, wf] = Layout::vertical([
            Constraint::Length(7),
            Constraint::Fill(1),
            Constraint::Length(6),
        ])
        .areas(area);
        let [day, week] =
            Layout::horizontal([Constraint::Fill(1), Constraint::Fill(1)]).areas(lists);
        let selected = self.selected(snap);
        draw_bars(
            f,
            day,
            cx,
            " Today (UTC) ",
            &repositories(&snap.usage, today),
            None,
        );
        draw_bars(
            f,
            week,
            cx,
            " Last 7 days ",
            &repositories(&snap.usage, today - WEEK_DAYS + 1),
            Some(self.index),
        );
        draw_chart(f, chart, cx, today);
        draw_workflows(f, wf, cx, selected.as_ref(), today);
    }
}

/// One list of repositories as bars of runner time, scaled to the first (the most).
fn draw_bars(f: &mut Frame, area: Rect, cx: &Ctx, title: &str, used: &[Used], sel: Option<usize>) {
    let th = &cx.theme;
    let block = th.block().title(title);
    let inner = block.inner(area);
    f.render_widget(block, area);
    let rows = inner.height as usize;
    let sel = sel.map(|i| i.min(used.len().saturating_sub(1)));
    // Keep the selection in view.
    let first = sel.map_or(0, |i| (i + 1).saturating_sub(rows));
    let top = used.first().map_or(1, |u| runner_ms(&u.figures).max(1));
    let w = inner.width as usize;
    let name_w = (w * 2 / 5).clamp(6, 28);
    let figure_w = 16;
    let bar_w = w.saturating_sub(name_w + figure_w + 2);
    let lines: Vec<Line> = used
        .iter()
        .enumerate()
        .skip(first)
        .take(rows)
        .map(|(i, u)| {
            let ms = runner_ms(&u.figures);
            let name: String = u.name.chars().take(name_w).collect();
            let style = if Some(i) == sel {
                th.selected()
            } else {
                th.title()
            };
            Line::from(vec![
                Span::styled(format!("{name:<name_w$} "), style),
                Span::styled(
                    format!("{:<bar_w$}", bar(ms as f64 / top as f64, bar_w)),
                    th.series_b(),
                ),
                Span::raw(format!(
                    " {:>7} {:>3} jobs",
                    hours(ms),
                    u.figures.jobs.min(999)
                )),
            ])
        })
        .collect();
    if lines.is_empty() {
        f.render_widget(Paragraph::new(Span::styled("none", th.quiet())), inner);
    } else {
        f.render_widget(Paragraph::new(lines), inner);
    }
}

/// Runner time a day over the last [`CHART_DAYS`] days, as bars labelled by day of
/// the month: in hours, or in minutes while no day reaches two hours (a new host's
/// first jobs would draw no bar at all in hours).
fn draw_chart(f: &mut Frame, area: Rect, cx: &Ctx, today: Day) {
    let th = &cx.theme;
    let days = per_day(&cx.snap.usage, today, CHART_DAYS);
    let peak = days.iter().map(|d| d.1).fold(0.0, f64::max);
    let (unit, per_hour) = if peak < 2.0 {
        ("minutes", 60.0)
    } else {
        ("hours", 1.0)
    };
    let block = th.block().title(format!(
        " Runner-{unit} a day, last {CHART_DAYS} days (peak {:.1}) ",
        peak * per_hour
    ));
    let bars: Vec<Bar> = days
        .iter()
        .map(|(d, h)| {
            let date = format_rfc3339(d * crate::domain::rollup::DAY_MS);
            let v = h * per_hour;
            Bar::default()
                .value((v * 10.0).round() as u64)
                .text_value(format!("{v:.1}"))
                .label(Line::from(date[8..10].to_string()))
                .style(th.series_b())
        })
        .collect();
    let inner_w = area.width.saturating_sub(2);
    let bar_w = (inner_w / CHART_DAYS as u16).saturating_sub(1).clamp(1, 8);
    f.render_widget(
        BarChart::default()
            .block(block)
            .data(BarGroup::default().bars(&bars))
            .bar_width(bar_w)
            .bar_gap(1)
            .value_style(th.header()),
        area,
    );
}

/// The selected repository's workflows over the last 7 days.
fn draw_workflows(f: &mut Frame, area: Rect, cx: &Ctx, repo: Option<&Used>, today: Day) {
    let th = &cx.theme;
    let name = repo.map_or("-", |r| r.name.as_str());
    let block = th
        .block()
        .title(format!(" {name}: workflows, last 7 days (j/k another) "));
    let list = repo
        .map(|r| workflows(&cx.snap.usage, &r.name, today - WEEK_DAYS + 1))
        .unwrap_or_default();
    let rows: Vec<Row> = list
        .iter()
        .map(|w| {
            let p95 = w.figures.wait.quantile_secs(0.95);
            Row::new(vec![
                w.name.clone(),
                w.figures.jobs.to_string(),
                hours(runner_ms(&w.figures)),
                super::fmt::cpu(w.figures.cpu_ms),
                p95.map_or("-".into(), |s| super::fmt::age(s as i64 * 1000)),
                w.figures.lost.to_string(),
            ])
        })
        .collect();
    let header =
        Row::new(["WORKFLOW", "JOBS", "RUNNER", "CPU", "WAIT P95", "LOST"]).style(th.header());
    f.render_widget(
        Table::new(
            rows,
            [
                Constraint::Fill(1),
                Constraint::Length(5),
                Constraint::Length(8),
                Constraint::Length(9),
                Constraint::Length(9),
                Constraint::Length(5),
            ],
        )
        .header(header)
        .block(block),
        area,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::rollup::UsageKey;

    fn row(day: Day, repo: &str, workflow: &str, busy_min: u64, jobs: u64) -> UsageRow {
        UsageRow {
            host: String::new(),
            key: UsageKey {
                day,
                repo: repo.into(),
                workflow: workflow.into(),
                job: "build".into(),
                profile: "linux".into(),
            },
            figures: UsageFigures {
                runners: jobs,
                jobs,
                busy_ms: busy_min * 60_000,
                ..UsageFigures::default()
            },
        }
    }

    #[test]
    fn repositories_add_up_their_days_the_most_used_first() {
        let rows = [
            row(10, "o/a", "CI", 30, 2),
            row(11, "o/a", "CI", 30, 1),
            row(11, "o/b", "CI", 90, 4),
            row(11, "", "", 5, 1),
        ];
        let week = repositories(&rows, 5);
        let names: Vec<(&str, u64)> = week
            .iter()
            .map(|u| (u.name.as_str(), u.figures.jobs))
            .collect();
        assert_eq!(names, vec![("o/b", 4), ("o/a", 3), ("-", 1)]);
        let today = repositories(&rows, 11);
        assert_eq!(today[1].figures.busy_ms, 30 * 60_000, "day 10 left out");
        let wf = workflows(&rows, "o/a", 5);
        assert_eq!((wf[0].name.as_str(), wf[0].figures.jobs), ("CI", 3));
        assert_eq!(workflows(&rows, "-", 5)[0].name, "-");
    }

    #[test]
    fn days_without_rows_are_zero_and_the_chart_ends_today() {
        let rows = [row(10, "o/a", "CI", 90, 1), row(12, "o/a", "CI", 30, 1)];
        assert_eq!(per_day(&rows, 12, 3), vec![(10, 1.5), (11, 0.0), (12, 0.5)]);
    }

    #[test]
    fn bars_are_drawn_in_eighths() {
        assert_eq!(bar(1.0, 4), "████");
        assert_eq!(bar(0.5, 4), "██");
        assert_eq!(bar(1.0 / 32.0, 4), "▏");
        assert_eq!(bar(0.0, 4), "");
    }
}
