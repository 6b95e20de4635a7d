//! Colours with a meaning (good, waiting, working, bad, quiet), or none at all when
//! `NO_COLOR` is set: then only modifiers (bold, reversed) carry emphasis. Under
//! `TERM=dumb` the frame is drawn in ASCII: [`ascii`] turns every box-drawing, block,
//! braille and arrow glyph the widgets drew into its ASCII stand-in.

use crate::domain::AttemptState;
use ratatui::style::{Color, Modifier, Style};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Theme {
    pub color: bool,
    /// Draw borders and pictures in ASCII (`TERM=dumb`).
    pub ascii: bool,
}

impl Theme {
    /// Colour unless `NO_COLOR` is set to anything non-empty (no-color.org).
    /// ASCII when `TERM` is `dumb`.
    pub fn from_env() -> Theme {
        Theme::from_vars(
            std::env::var_os("NO_COLOR").as_deref(),
            std::env::var_os("TERM").as_deref(),
        )
    }

    /// The rule itself, from the two variables' values.
    pub fn from_vars(no_color: Option<&std::ffi::OsStr>, term: Option<&std::ffi::OsStr>) -> Theme {
        Theme {
            color: no_color.is_none_or(|v| v.is_empty()),
            ascii: term.is_some_and(|t| t == "dumb"),
        }
    }

    /// Colour, Unicode borders: what the tests mostly draw with.
    pub const FULL: Theme = Theme {
        color: true,
        ascii: false,
    };
    /// `NO_COLOR`.
    pub const PLAIN: Theme = Theme {
        color: false,
        ascii: false,
    };

    fn fg(&self, c: Color) -> Style {
        if self.color {
            Style::new().fg(c)
        } else {
            Style::new()
        }
    }

    /// Running and healthy.
    pub fn good(&self) -> Style {
        self.fg(Color::Green)
    }

    /// Waiting on something: starting, paused, draining.
    pub fn waiting(&self) -> Style {
        self.fg(Color::Yellow)
    }

    /// Doing a job.
    pub fn working(&self) -> Style {
        self.fg(Color::Cyan)
    }

    /// Failed, down, or an error to read.
    pub fn bad(&self) -> Style {
        self.fg(Color::Red).add_modifier(Modifier::BOLD)
    }

    /// Over and done with: history, not news.
    pub fn quiet(&self) -> Style {
        if self.color {
            Style::new().fg(Color::DarkGray)
        } else {
            Style::new()
        }
    }

    pub fn title(&self) -> Style {
        Style::new().add_modifier(Modifier::BOLD)
    }

    pub fn header(&self) -> Style {
        self.fg(Color::Blue).add_modifier(Modifier::BOLD)
    }

    pub fn selected(&self) -> Style {
        Style::new().add_modifier(Modifier::REVERSED)
    }

    /// The second series of a picture (live runners against queued jobs).
    pub fn series_b(&self) -> Style {
        self.fg(Color::Green)
    }

    pub fn series_a(&self) -> Style {
        self.fg(Color::Magenta)
    }

    /// A bordered block, in ASCII when asked.
    pub fn block(&self) -> ratatui::widgets::Block<'static> {
        let b = ratatui::widgets::Block::bordered();
        if self.ascii {
            b.border_set(ratatui::symbols::border::Set {
                top_left: "+",
                top_right: "+",
                bottom_left: "+",
                bottom_right: "+",
                vertical_left: "|",
                vertical_right: "|",
                horizontal_top: "-",
                horizontal_bottom: "-",
            })
        } else {
            b
        }
    }

    /// A picture's line marker: braille, or `*` in ASCII.
    pub fn marker(&self) -> ratatui::symbols::Marker {
        if self.ascii {
            ratatui::symbols::Marker::Custom('*')
        } else {
            ratatui::symbols::Marker::Braille
        }
    }

    pub fn state(&self, s: AttemptState) -> Style {
        match s {
            AttemptState::Pending | AttemptState::Starting => self.waiting(),
            AttemptState::Idle => self.good(),
            AttemptState::Busy => self.working(),
            AttemptState::Failed | AttemptState::CleanupDeferred => self.bad(),
            AttemptState::Finished | AttemptState::Destroying => self.quiet(),
        }
    }
}

/// The ASCII stand-in of a glyph the widgets draw, `None` for a symbol that is ASCII
/// already. Box drawing becomes `-`, `|` and `+`; a bar's eighths `.`, `-`, `=` and `#`
/// by height; a braille cell with any dot `*`; arrows `<`, `>`, `^`, `v`; anything else
/// outside ASCII `?`, so a dumb terminal never gets a byte it cannot show.
pub fn ascii(symbol: &str) -> Option<&'static str> {
    if symbol.is_ascii() {
        return None;
    }
    let c = symbol.chars().next()?;
    Some(match c {
        '─' | '━' | '═' | '╌' | '┄' => "-",
        '│' | '┃' | '║' | '╎' | '┆' => "|",
        '\u{2500}'..='\u{257F}' => "+",
        '▁' | '▂' => ".",
        '▃' | '▄' => "-",
        '▅' | '▆' => "=",
        '▇' | '█' | '\u{2580}'..='\u{259F}' => "#",
        '\u{2800}' => " ",
        '\u{2801}'..='\u{28FF}' | '•' => "*",
        '·' => ".",
        '→' => ">",
        '←' => "<",
        '↑' => "^",
        '↓' => "v",
        '…' => "~",
        '×' => "x",
        _ => "?",
    })
}

/// Rewrites a drawn buffer in ASCII (see [`ascii`]).
pub fn asciify(buf: &mut ratatui::buffer::Buffer) {
    for cell in buf.content.iter_mut() {
        if let Some(a) = ascii(cell.symbol()) {
            cell.set_symbol(a);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn no_color_and_dumb_terminals_are_read_from_their_variables() {
        let t = Theme::from_vars(None, Some(OsStr::new("xterm-256color")));
        assert_eq!(t, Theme::FULL);
        let t = Theme::from_vars(Some(OsStr::new("1")), Some(OsStr::new("dumb")));
        assert!(!t.color && t.ascii);
        // An empty NO_COLOR does not count (no-color.org).
        assert!(Theme::from_vars(Some(OsStr::new("")), None).color);
    }

    #[test]
    fn no_color_styles_carry_no_colour() {
        let t = Theme::PLAIN;
        for s in [
            t.good(),
            t.waiting(),
            t.working(),
            t.bad(),
            t.quiet(),
            t.header(),
        ] {
            assert_eq!((s.fg, s.bg), (None, None));
        }
    }

    #[test]
    fn every_glyph_has_an_ascii_stand_in() {
        assert_eq!(ascii("a"), None);
        assert_eq!(ascii("┌"), Some("+"));
        assert_eq!(ascii("─"), Some("-"));
        assert_eq!(ascii("│"), Some("|"));
        assert_eq!(ascii("▁"), Some("."));
        assert_eq!(ascii("█"), Some("#"));
        assert_eq!(ascii("⣿"), Some("*"));
        assert_eq!(ascii("\u{2800}"), Some(" "));
        assert_eq!(ascii("→"), Some(">"));
        assert_eq!(ascii("漢"), Some("?"));
    }
}
