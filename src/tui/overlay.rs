//! What draws over the panes: the help overlay (every key the app and the pane in
//! view bind, from the tables their dispatch reads: `tui::keys`) and the confirmation
//! a disruptive action waits on.

use super::actions::Action;
use super::app::{Ctx, PANES_HELP};
use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph, Wrap};

/// What the help says of the mouse, after the keys.
const MOUSE: (&str, &str) = ("click", "a tab opens it; a row selects it");

/// A rectangle of at most `w`×`h` in the middle of `area`.
fn centered(area: Rect, w: u16, h: u16) -> Rect {
    area.centered(
        Constraint::Length(w.min(area.width)),
        Constraint::Length(h.min(area.height)),
    )
}

/// The help: `lines` are [`App::help_lines`](super::app::App::help_lines), every key
/// of the app, the movements and the pane (or open detail) from the tables their
/// dispatch reads.
pub fn draw_help(f: &mut Frame, area: Rect, cx: &Ctx, lines: &[(String, &'static str)]) {
    let th = &cx.theme;
    let keys: Vec<(String, &str)> = lines
        .iter()
        .map(|(k, what)| match *what {
            PANES_HELP if cx.snap.pool.is_none() => {
                (k.replace('8', "7"), "the panes, as the tabs number them")
            }
            _ => (k.clone(), *what),
        })
        .chain([(MOUSE.0.to_string(), MOUSE.1)])
        .collect();
    let w = keys
        .iter()
        .map(|(k, _)| k.chars().count())
        .max()
        .unwrap_or(0);
    let rows: Vec<Line> = keys
        .iter()
        .map(|(k, what)| {
            Line::from(vec![
                Span::styled(format!(" {k:<w$}  "), th.header()),
                Span::raw(*what),
            ])
        })
        .collect();
    let wide = keys
        .iter()
        .map(|(_, what)| what.chars().count())
        .max()
        .unwrap_or(0);
    let r = centered(area, (w + wide + 5) as u16, rows.len() as u16 + 2);
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(rows).block(th.block().title(" Keys · Esc or ? to close ")),
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
