//! The frame: a header line (host, daemon, clock), the pane tabs, the pane or the
//! detail view, the status line, and any overlay on top. Draws an [`App`]; reads
//! nothing else.

use super::app::{App, Component, Ctx, Pane};
use super::overlay;
use crate::timefmt::format_rfc3339;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Tabs};

/// The frame's rows: header, tabs, the pane, the status line (mouse clicks are
/// placed by the same split).
pub fn areas(area: Rect) -> [Rect; 4] {
    Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Fill(1),
        Constraint::Length(1),
    ])
    .areas(area)
}

pub fn draw(f: &mut Frame, app: &App) {
    draw_all(f, app);
    if app.theme.ascii {
        super::theme::asciify(f.buffer_mut());
    }
}

fn draw_all(f: &mut Frame, app: &App) {
    let cx = Ctx {
        snap: &app.snap,
        theme: app.theme,
    };
    let th = &cx.theme;
    let [head, tabs, body, status] = areas(f.area());
    let snap = &app.snap;
    let mut h = vec![
        Span::styled("runner-manager top", th.title()),
        Span::raw("  "),
    ];
    match &snap.pool {
        // A coordinator's store: no host daemon beats here, and none should (issue 50:
        // it said `daemon down live 0/0`). Say what it is and what it serves.
        Some(pool) if !snap.daemon_alive() => {
            h.push(if pool.serving {
                Span::styled("coordinator up", th.good())
            } else {
                Span::styled("coordinator down", th.bad())
            });
            h.push(Span::raw(format!("  {}", pool.header())));
        }
        _ => {
            h.push(if snap.daemon_alive() {
                Span::styled("daemon up", th.good())
            } else {
                Span::styled("daemon down", th.bad())
            });
            h.push(Span::raw(format!(
                "  live {}/{}",
                snap.live_total(),
                snap.capacity()
            )));
        }
    }
    if snap.host.as_ref().is_some_and(|h| h.draining) {
        h.push(Span::raw("  "));
        h.push(Span::styled("draining", th.waiting()));
    }
    let left = Line::from(h);
    // The clock only where it fits beside the words, two spaces apart: the words win.
    let mut clock = format_rfc3339(snap.now).replace('T', " ");
    if left.width() + 2 + clock.len() > head.width as usize {
        clock.clear();
    }
    let [hl, hr] =
        Layout::horizontal([Constraint::Fill(1), Constraint::Length(clock.len() as u16)])
            .areas(head);
    f.render_widget(Paragraph::new(left), hl);
    f.render_widget(Paragraph::new(Span::styled(clock, th.quiet())), hr);
    let shown = Pane::shown(snap);
    let titles = super::app::tab_titles(shown, tabs.width);
    let selected = shown.iter().position(|p| *p == app.pane).unwrap_or(0);
    f.render_widget(
        Tabs::new(titles)
            .padding(" ", "")
            .select(selected)
            .highlight_style(th.selected()),
        tabs,
    );
    match (&app.detail, app.pane) {
        (Some(d), _) => d.draw(f, body, &cx),
        (None, Pane::Overview) => app.overview.draw(f, body, &cx),
        (None, Pane::Attempts) => app.attempts.draw(f, body, &cx),
        (None, Pane::Pictures) => app.pictures.draw(f, body, &cx),
        (None, Pane::Runners) => app.runners.draw(f, body, &cx),
        (None, Pane::Activity) => app.activity.draw(f, body, &cx),
        (None, Pane::Settings) => app.settings.draw(f, body, &cx),
        (None, Pane::Usage) => app.usage.draw(f, body, &cx),
        (None, Pane::Pool) => app.pool.draw(f, body, &cx),
    }
    let line = match &app.message {
        Some(m) if m.error => Line::styled(m.text.clone(), th.bad()),
        Some(m) => Line::styled(m.text.clone(), th.good()),
        None if app.attempts.editing => Line::raw("filter: type words · Enter keep · Esc clear"),
        None if app.settings.edit.is_some() => {
            Line::raw("type the value · Enter sets it (checked first) · Esc leaves it")
        }
        None if app.detail.as_ref().is_some_and(|d| d.full.is_some()) => {
            Line::raw("j/k PgUp/PgDn scroll · g top · G end · r read again · Esc back · q quit")
        }
        None if app.detail.is_some() => Line::raw(
            "j/k scroll · g top · G follow · Enter whole log · Esc back · ? help · q quit",
        ),
        // Fits 80 columns: the undo hint replaces the least used keys.
        None if app.undo.is_some() => {
            Line::raw("u undo max · Tab panes · Enter detail · / filter · ? help · q quit")
        }
        // Each pane's own keys first; all of them under ?. Each fits 80 columns.
        None => Line::raw(match app.pane {
            Pane::Overview => {
                "Tab panes · Enter attempts · e settings · a activity · ? help · q quit"
            }
            Pane::Attempts => {
                "Enter detail · / filter · s sort · c copy id · d drain · ? help · q quit"
            }
            Pane::Pictures | Pane::Pool => {
                "Tab panes · n runners · a activity · e settings · d drain · ? help · q quit"
            }
            Pane::Runners => {
                "Enter our runner's attempt · c copy name · Tab panes · ? help · q quit"
            }
            Pane::Activity => "! problems only · Enter attempt · c copy the fix · ? help · q quit",
            Pane::Settings => "Enter edit · c copy the set command · Tab panes · ? help · q quit",
            Pane::Usage => "j/k select a repository · Tab panes · d drain · ? help · q quit",
        }),
    };
    f.render_widget(Paragraph::new(line), status);
    if let Some(a) = &app.confirm {
        overlay::draw_confirm(f, body, &cx, a);
    }
    if app.help {
        overlay::draw_help(f, f.area(), &cx, &app.help_lines());
    }
    defuse(f.buffer_mut());
}

/// Nothing a job, a host or GitHub sent acts on the terminal: whatever a view drew,
/// each cell is stripped of control and bidirectional characters
/// (`printable::is_hazard`) before the frame is written. ratatui drops control
/// characters but appends zero-width ones, U+202E among them, to the cell before them
/// (issue 33: a job named with one reversed what `top` showed after it).
pub fn defuse(buf: &mut ratatui::buffer::Buffer) {
    for cell in buf.content.iter_mut() {
        if cell.symbol().chars().any(crate::printable::is_hazard) {
            let clean: String = cell
                .symbol()
                .chars()
                .filter(|c| !crate::printable::is_hazard(*c))
                .collect();
            cell.set_symbol(if clean.is_empty() { " " } else { &clean });
        }
    }
}
