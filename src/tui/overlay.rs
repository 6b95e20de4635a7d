//! What draws over the panes: the help overlay (every key, from the one table
//! [`KEYS`]) and the confirmation a disruptive action waits on.

use super::actions::Action;
use super::app::Ctx;
use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph, Wrap};

/// Every key `top` knows, as the help overlay lists them.
pub const KEYS: &[(&str, &str)] = &[
    ("Tab l →", "next pane (in detail, l: the whole log)"),
    ("S-Tab h ←", "previous pane (in detail: back)"),
    (
        "1 … 8",
        "the panes, as the tabs number them (8: Pool, a coordinator's)",
    ),
    ("n a e", "Runners, Activity, Settings (e: the profile's)"),
    ("j k ↓ ↑ wheel", "move the selection / scroll"),
    ("PgDn PgUp", "move by a page"),
    ("g G Home End", "first / last (log: top / follow)"),
    ("Enter o", "open: detail, whole log, edit a setting"),
    ("click", "a tab opens it; a row selects it"),
    ("c", "copy: attempt id, log path, runner, fix, set command"),
    ("Esc", "back; clear the filter; leave an edit; close help"),
    ("/", "filter attempts (Enter keeps, Esc clears)"),
    ("s", "sort attempts: newest state profile rss cpu"),
    ("!", "activity: problems only, or everything"),
    ("p Space", "pause or resume the profile (asks)"),
    ("+ -", "the profile's max up or down by one, at once"),
    ("u", "undo the last max step"),
    ("d", "drain the host, or stop draining (asks)"),
    ("y n", "confirm or cancel a question"),
    ("r F5", "reload now"),
    ("?", "this help"),
    ("q Ctrl-C", "quit"),
];

/// The pane keys as this store has them: 8 only where there is a Pool to show.
const PANES_NO_POOL: (&str, &str) = ("1 … 7", "the panes, as the tabs number them");

/// A rectangle of at most `w`×`h` in the middle of `area`.
fn centered(area: Rect, w: u16, h: u16) -> Rect {
    area.centered(
        Constraint::Length(w.min(area.width)),
        Constraint::Length(h.min(area.height)),
    )
}

pub fn draw_help(f: &mut Frame, area: Rect, cx: &Ctx) {
    let th = &cx.theme;
    let w = KEYS
        .iter()
        .map(|(k, _)| k.chars().count())
        .max()
        .unwrap_or(0);
    let keys: Vec<(&str, &str)> = KEYS
        .iter()
        .map(|&(k, what)| match k {
            "1 … 8" if cx.snap.pool.is_none() => PANES_NO_POOL,
            _ => (k, what),
        })
        .collect();
    let lines: Vec<Line> = keys
        .iter()
        .map(|(k, what)| {
            Line::from(vec![
                Span::styled(format!(" {k:<w$}  "), th.header()),
                Span::raw(*what),
            ])
        })
        .collect();
    let r = centered(area, 72, KEYS.len() as u16 + 2);
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(lines).block(th.block().title(" Keys · Esc or ? to close ")),
        r,
    );
}

pub fn draw_confirm(f: &mut Frame, area: Rect, cx: &Ctx, action: &Action) {
    let th = &cx.theme;
    let r = centered(area, 56, 6);
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(vec![
            Line::raw(action.question()),
            Line::raw(""),
            Line::from(vec![
                Span::styled("y", th.header()),
                Span::raw("/Enter yes   "),
                Span::styled("n", th.header()),
                Span::raw("/Esc no"),
            ]),
        ])
        .wrap(Wrap { trim: true })
        .block(th.block().title(" Confirm ").border_style(th.waiting())),
        r,
    );
}
