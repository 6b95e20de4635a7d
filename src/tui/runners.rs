//! The Runners pane: every runner GitHub lists for each target, as the daemon last
//! read the list (`store::daemon_facts::runners_seen`, each minute; `top` never asks
//! GitHub, so the title says how old each list is), and beside them our live
//! attempts the list does not have yet. Each row says whose the runner is (ours,
//! another runner-manager host's, or foreign), our attempt and its state, and what
//! GitHub said: busy, idle, offline or not listed.

use super::app::{Component, Ctx, Effect, Handled, movement, step_index};
use super::columns::{self, Col};
use super::fmt;
use super::keys::{self, Binding};
use super::model::Snapshot;
use crate::domain::{RegisteredRunner, parse_runner_name, runner_name};
use crossterm::event::{KeyCode, KeyEvent};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Table, TableState};

/// Whose a listed runner is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Whose {
    /// This host's: its name carries this host's id; the attempt id it names.
    Ours(i64),
    /// Named as runner-manager names runners, for another host's id.
    OtherHost,
    /// Anything else: registered by hand, by another tool, by another autoscaler.
    Foreign,
}

impl Whose {
    /// From the runner's name alone (`rm-<host short id>-<attempt id>`).
    pub fn of(host_id: &str, name: &str) -> Whose {
        if let Some(id) = parse_runner_name(host_id, name) {
            return Whose::Ours(id);
        }
        let mut parts = name.splitn(3, '-');
        let other = parts.next() == Some("rm")
            && parts
                .next()
                .is_some_and(|h| h.len() == 8 && h.bytes().all(|b| b.is_ascii_hexdigit()))
            && parts
                .next()
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        if other {
            Whose::OtherHost
        } else {
            Whose::Foreign
        }
    }

    /// WHOSE: whose runner it is, the attempt being its own column.
    pub fn word(self) -> &'static str {
        match self {
            Whose::Ours(_) => "ours",
            Whose::OtherHost => "other host",
            Whose::Foreign => "foreign",
        }
    }

    fn rank(self) -> u8 {
        match self {
            Whose::Ours(_) => 0,
            Whose::OtherHost => 1,
            Whose::Foreign => 2,
        }
    }
}

/// The GITHUB column: what GitHub says the runner is doing, or that its last list did
/// not have it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Github {
    Busy,
    Idle,
    Offline,
    /// A live attempt of ours the last list did not have: started since, or not
    /// registered yet.
    NotListed,
}

impl Github {
    pub fn word(self) -> &'static str {
        match self {
            Github::Busy => "busy",
            Github::Idle => "idle",
            Github::Offline => "offline",
            Github::NotListed => NOT_LISTED,
        }
    }
}

/// What GitHub says the runner is doing.
pub fn activity(r: &RegisteredRunner) -> Github {
    match (r.online, r.busy) {
        (false, _) => Github::Offline,
        (true, true) => Github::Busy,
        (true, false) => Github::Idle,
    }
}

/// GITHUB's word for [`Github::NotListed`].
pub const NOT_LISTED: &str = "not listed";

/// One row: the target it is listed for, the runner, whose it is. `listed` is
/// GitHub's entry; `None` for a live attempt of ours the last list did not have
/// (the list is read each minute, the attempts live: issue 38, `0 listed` while 3
/// were busy).
#[derive(Debug, Clone, PartialEq)]
pub struct RunnerRow<'a> {
    pub target: &'a str,
    pub name: String,
    pub listed: Option<&'a RegisteredRunner>,
    pub whose: Whose,
    pub labels: &'a [String],
}

impl RunnerRow<'_> {
    /// GITHUB: busy, idle or offline as listed, or [`NOT_LISTED`].
    pub fn github(&self) -> Github {
        self.listed.map_or(Github::NotListed, activity)
    }
}

/// Every listed runner, and every live attempt of ours the list does not have yet,
/// by target, then ours, other hosts', foreign, then name.
pub fn rows(snap: &Snapshot) -> Vec<RunnerRow<'_>> {
    let host_id = snap.host.as_ref().map_or("", |h| h.id.as_str());
    let mut rows: Vec<RunnerRow> = snap
        .targets
        .iter()
        .filter_map(|t| t.runners.as_ref().map(|s| (t.name.as_str(), s)))
        .flat_map(|(target, seen)| {
            seen.runners.iter().map(move |r| RunnerRow {
                target,
                name: r.name.clone(),
                listed: Some(r),
                whose: Whose::of(host_id, &r.name),
                labels: &r.labels,
            })
        })
        .collect();
    let unlisted: Vec<RunnerRow> = snap
        .attempts
        .iter()
        .filter(|a| a.state.is_live() && !a.cleaned)
        .filter(|a| {
            !rows
                .iter()
                .any(|r| r.target == a.target && r.whose == Whose::Ours(a.id))
        })
        .map(|a| RunnerRow {
            target: a.target.as_str(),
            name: runner_name(host_id, a.id),
            listed: None,
            whose: Whose::Ours(a.id),
            labels: snap.profile(&a.profile).map_or(&[], |p| &p.policy.labels),
        })
        .collect();
    rows.extend(unlisted);
    rows.sort_by(|a, b| {
        (a.target, a.whose.rank(), &a.name).cmp(&(b.target, b.whose.rank(), &b.name))
    });
    rows
}

/// How fresh the pane is, for its title: as fresh as the daemon's last read of
/// each target's list (each minute; `top` never asks GitHub itself), so the oldest
/// list's age, and the targets not listed yet.
pub fn freshness(snap: &Snapshot) -> String {
    let oldest = snap
        .targets
        .iter()
        .filter_map(|t| t.runners.as_ref().map(|s| s.at))
        .min();
    let missing: Vec<&str> = snap
        .targets
        .iter()
        .filter(|t| t.runners.is_none())
        .map(|t| t.name.as_str())
        .collect();
    match oldest {
        None => "not listed by GitHub yet".into(),
        Some(at) if missing.is_empty() => {
            format!("as GitHub listed them {} ago", fmt::age(snap.now - at))
        }
        Some(at) => format!(
            "as GitHub listed them {} ago ({} not yet)",
            fmt::age(snap.now - at),
            missing.join(", ")
        ),
    }
}

/// Runners at work: GitHub says busy, or our attempt is (the list may be older).
pub fn busy(snap: &Snapshot, rows: &[RunnerRow]) -> usize {
    rows.iter()
        .filter(|r| {
            r.github() == Github::Busy
                || matches!(r.whose, Whose::Ours(id)
                    if snap.attempt(id).is_some_and(|a| a.state == crate::domain::AttemptState::Busy))
        })
        .count()
}

/// The Runners pane's own state: the selected runner, followed by target and name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunnersView {
    pub index: usize,
    /// (target, runner name) of the selection.
    pub selected: Option<(String, String)>,
}

impl RunnersView {
    /// Keeps the selection on its runner across refreshes (by target and name).
    pub fn follow(&mut self, snap: &Snapshot) {
        let rows = rows(snap);
        if let Some((t, n)) = &self.selected
            && let Some(i) = rows.iter().position(|r| r.target == t && &r.name == n)
        {
            self.index = i;
        }
        self.index = self.index.min(rows.len().saturating_sub(1));
        self.remember(&rows);
    }

    fn remember(&mut self, rows: &[RunnerRow]) {
        self.selected = rows
            .get(self.index)
            .map(|r| (r.target.to_string(), r.name.clone()));
    }

    /// The selected runner's name, for `c`.
    pub fn copy_text(&self) -> Option<String> {
        self.selected.as_ref().map(|(_, n)| n.clone())
    }

    /// A click on the `row`th line of the pane (0: its top border).
    pub fn click(&mut self, row: u16, height: u16, snap: &Snapshot) {
        let rows = rows(snap);
        if let Some(i) = clicked(row, height, self.index, rows.len()) {
            self.index = i;
            self.remember(&rows);
        }
    }
}

/// The first row shown of a table `height` lines high (border and header
/// included) with `index` selected: the selection stays in view.
pub fn first_shown(index: usize, height: u16) -> usize {
    let body = height.saturating_sub(3).max(1) as usize;
    (index + 1).saturating_sub(body)
}

/// Which row of such a table a click on its `row`th line selects, if any.
pub fn clicked(row: u16, height: u16, index: usize, len: usize) -> Option<usize> {
    let body = row.checked_sub(2)? as usize;
    if body >= height.saturating_sub(3) as usize {
        return None;
    }
    let i = first_shown(index, height) + body;
    (i < len).then_some(i)
}

/// The Runners pane's one key of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Open;

const KEYS: &[Binding<Open>] = &[Binding {
    keys: &[KeyCode::Enter, KeyCode::Char('o')],
    cmd: Open,
    help: "open our runner's attempt",
}];

impl Component for RunnersView {
    fn event(&mut self, key: KeyEvent, snap: &Snapshot) -> Handled {
        let rows = rows(snap);
        if let Some(by) = movement(&key, 10) {
            self.index = step_index(self.index, by, rows.len());
            self.remember(&rows);
            return Handled::Yes;
        }
        match keys::find(KEYS, &key) {
            Some(Open) => match rows.get(self.index).map(|r| r.whose) {
                Some(Whose::Ours(id)) if snap.attempt(id).is_some() => {
                    Handled::Then(Effect::OpenDetail(id))
                }
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
        let rows = rows(snap);
        let cols = [
            Col::shrink("TARGET", 6),
            Col::shrink("NAME", 12).keep(2),
            Col::fixed("WHOSE"),
            Col::fixed("ATTEMPT"),
            Col::fixed("STATE"),
            Col::fixed("GITHUB"),
            Col::grow("LABELS", 8),
        ];
        let height = area.height.saturating_sub(3) as usize;
        let first = first_shown(self.index, area.height);
        let cells: Vec<Vec<Span>> = rows
            .iter()
            .skip(first)
            .take(height)
            .map(|r| {
                let whose = match r.whose {
                    Whose::Ours(_) => Span::styled(r.whose.word(), th.good()),
                    Whose::OtherHost => Span::raw(r.whose.word()),
                    Whose::Foreign => Span::styled(r.whose.word(), th.waiting()),
                };
                let g = r.github();
                let style = match g {
                    Github::Busy => th.working(),
                    Github::Idle => th.good(),
                    Github::NotListed => th.waiting(),
                    Github::Offline => th.quiet(),
                };
                let github = Span::styled(g.word(), style);
                // Our runner's attempt and its state as the store has it, or none.
                let (attempt, state) = match r.whose {
                    Whose::Ours(id) => (
                        Span::raw(format!("#{id}")),
                        match snap.attempt(id) {
                            Some(a) => Span::styled(a.state_word(), th.state(a.state)),
                            None => Span::styled("no record", th.bad()),
                        },
                    ),
                    _ => (Span::raw("-"), Span::raw("-")),
                };
                vec![
                    Span::raw(r.target.to_string()),
                    Span::raw(r.name.clone()),
                    whose,
                    attempt,
                    state,
                    github,
                    Span::raw(r.labels.join(",")),
                ]
            })
            .collect();
        let (header, body, widths) = columns::table(&cols, cells, area.width.saturating_sub(2));
        let listed = rows.iter().filter(|r| r.listed.is_some()).count();
        let unlisted = rows.len() - listed;
        // Freshness first: a narrow title keeps what says how far to trust the rest.
        let mut title = vec![
            Span::raw(" Runners "),
            Span::styled(freshness(snap), th.quiet()),
            Span::raw(format!(": {listed} listed")),
        ];
        if unlisted > 0 {
            title.push(Span::styled(
                format!(" + {unlisted} of ours not yet"),
                th.waiting(),
            ));
        }
        title.push(Span::raw(format!(", {} busy ", busy(snap, &rows))));
        let empty = rows.is_empty();
        let table = Table::new(body, widths)
            .header(header.style(th.header()))
            .row_highlight_style(th.selected())
            .block(th.block().title(Line::from(title)));
        let selected = (!empty).then_some(self.index - first);
        let mut state = TableState::default().with_selected(selected);
        f.render_stateful_widget(table, area, &mut state);
        if empty {
            // Under the header, across the whole width (a table's footer row would
            // be cut to its first column's width).
            let at = Rect::new(area.x + 1, area.y + 2, area.width.saturating_sub(2), 1);
            if area.height > 3 {
                f.render_widget(
                    ratatui::widgets::Paragraph::new(Span::styled(empty_word(snap), th.quiet())),
                    at,
                );
            }
        }
    }
}

/// What an empty pane says: GitHub listed none, or there is no list yet.
pub fn empty_word(snap: &Snapshot) -> &'static str {
    if snap.targets.iter().any(|t| t.runners.is_some()) {
        "GitHub listed no runners, and no attempt of ours is live"
    } else {
        "no list yet: the daemon lists each target's runners each minute while it runs"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runner_is_ours_by_this_hosts_id_else_another_hosts_or_foreign() {
        let host = "0123abcd89ef4567";
        assert_eq!(Whose::of(host, "rm-0123abcd-12"), Whose::Ours(12));
        assert_eq!(Whose::of(host, "rm-deadbeef-3"), Whose::OtherHost);
        assert_eq!(Whose::of(host, "rm-0123abcd-x"), Whose::Foreign);
        assert_eq!(Whose::of(host, "build-box-1"), Whose::Foreign);
        assert_eq!(Whose::of(host, "rm-short-1"), Whose::Foreign);
    }

    #[test]
    fn busy_idle_offline() {
        let mut r = RegisteredRunner {
            id: 1,
            name: "x".into(),
            online: true,
            busy: true,
            labels: vec![],
        };
        assert_eq!(activity(&r), Github::Busy);
        r.busy = false;
        assert_eq!(activity(&r), Github::Idle);
        r.online = false;
        r.busy = true;
        assert_eq!(
            activity(&r),
            Github::Offline,
            "GitHub's busy flag lingers offline"
        );
    }

    #[test]
    fn a_click_selects_the_row_under_it_in_the_window_shown() {
        // 10 lines: border, header, 7 rows, border.
        assert_eq!(clicked(0, 10, 0, 20), None, "the border");
        assert_eq!(clicked(1, 10, 0, 20), None, "the header");
        assert_eq!(clicked(2, 10, 0, 20), Some(0));
        assert_eq!(clicked(8, 10, 0, 20), Some(6));
        assert_eq!(clicked(9, 10, 0, 20), None, "the bottom border");
        assert_eq!(clicked(4, 10, 0, 1), None, "below the last row");
        // Scrolled: row 10 selected, rows 4..=10 shown.
        assert_eq!(first_shown(10, 10), 4);
        assert_eq!(clicked(2, 10, 10, 20), Some(4));
    }
}
