//! Colours with a meaning (good, waiting, working, bad, quiet), or none at all when
//! `NO_COLOR` is set: then only modifiers (bold, reversed) carry emphasis.

use crate::domain::AttemptState;
use ratatui::style::{Color, Modifier, Style};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Theme {
    pub color: bool,
}

impl Theme {
    /// Colour unless `NO_COLOR` is set to anything non-empty (no-color.org).
    pub fn from_env() -> Theme {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Theme { color: !no_color }
    }

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
